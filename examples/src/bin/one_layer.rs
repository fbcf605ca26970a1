//! `one-layer`: one server-side layer that wraps calls and streams alike. It serves
//! idl/stream.thrift's StreamService (its ping-pong `echo` and its streams) on
//! 127.0.0.1 behind `Audit`, a layer written over `volo_core::server::ServerCall`,
//! makes a call, a server stream and a failing server stream to itself, prints what
//! the layer saw (each start: method and peer; each end: its outcome) and
//! exits (status 1 if anything differs from what it expects).
//!
//! Streams go down the server's stack as calls do (see `volo_core::server`'s "One
//! stack for calls and streams"): what comes back up for a stream is its outcome, once
//! its handler has returned, so a layer that holds something across the `await` (a
//! timer, a slot) holds it for the stream's life. A layer written over
//! `ServerRequest` alone would not compile on a server with `Server::streams`.

use std::sync::{Arc, Mutex};

use clap::Parser;
use examples::stream::{
    Request, StreamServiceClient, StreamServiceServer, StreamServiceStreamClient,
    StreamServiceStreamServer,
};
use examples::stream_service::Streams;
use thrift_wire::Utf8Bytes;
use volo_core::client::{ClientConfig, StreamClient};
use volo_core::context::ServerContext;
use volo_core::server::{DispatchError, Server, ServerCall};
use volo_core::service::{Service, layer_fn};
use volo_core::stream::StreamError;

/// Records one line per call or stream when it starts and one when it ends.
struct Audit<S> {
    inner: S,
    lines: Arc<Mutex<Vec<String>>>,
}

impl<S> Audit<S> {
    fn record(&self, line: String) {
        self.lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line);
    }
}

impl<S, R> Service<ServerContext, R> for Audit<S>
where
    S: Service<ServerContext, R, Error = DispatchError> + Sync,
    R: ServerCall,
{
    type Response = S::Response;
    type Error = DispatchError;

    async fn call(&self, cx: &mut ServerContext, req: R) -> Result<S::Response, DispatchError> {
        let kind = if req.opens_stream() { "stream" } else { "call" };
        let method = cx.rpc.method.to_string();
        let from = match cx.peer() {
            Some(peer) if peer.to_string().starts_with("127.0.0.1:") => "loopback".to_string(),
            Some(peer) => peer.to_string(),
            None => "-".to_string(),
        };
        self.record(format!("start {kind} {method} from {from}"));
        let outcome = self.inner.call(cx, req).await;
        let end = match &outcome {
            Ok(_) => "ok".to_string(),
            Err(e) => format!("failed: {e}"),
        };
        self.record(format!("end {kind} {method}: {end}"));
        outcome
    }
}

fn request(action: &str, msg: &str, count: i32) -> Request {
    Request {
        action: Utf8Bytes::from(action.to_owned()),
        msg: Utf8Bytes::from(msg.to_owned()),
        count,
    }
}

/// StreamService behind one layer that sees calls and streams alike: a call, a
/// stream and a failing stream to itself, then what the layer saw (status 1 if
/// anything differs from what it expects).
#[derive(Debug, Parser)]
#[command(name = "one-layer", version, args_override_self = true)]
struct Cli {}

#[tokio::main]
async fn main() {
    Cli::parse();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&lines);
    let server = Server::new(StreamServiceServer::new(Streams))
        .streams(StreamServiceStreamServer::new(Streams))
        .layer(layer_fn(move |inner| Audit {
            inner,
            lines: Arc::clone(&seen),
        }))
        .bind(&"127.0.0.1:0".parse().expect("an address"))
        .await
        .expect("binds");
    let addr = server.local_addr().clone();
    let serving = tokio::spawn(server.serve());
    let mut ok = true;

    let calls = StreamServiceClient::builder()
        .address(addr.clone())
        .build()
        .expect("a client");
    ok &= calls.echo(request("ping", "pong", 0)).await.is_ok();

    let streams = StreamServiceStreamClient::new(
        StreamClient::new("StreamService", addr, &ClientConfig::default()).expect("a client"),
    );
    let mut answers = 0;
    match streams.server_echo(&request("push", "three", 3)).await {
        Ok(mut rx) => {
            while let Ok(Some(_)) = rx.recv().await {
                answers += 1;
            }
        }
        Err(e) => println!("server_echo: {e}"),
    }
    ok &= answers == 3;
    let failed = match streams.server_echo(&request("fail", "on purpose", 1)).await {
        Ok(mut rx) => loop {
            match rx.recv().await {
                Ok(Some(_)) => {}
                other => break other,
            }
        },
        Err(e) => Err(e),
    };
    println!("the failing stream ended with {failed:?}");
    ok &= matches!(failed, Err(StreamError::Application(_)));

    // The layer records a stream's end before its trailer goes: all is here.
    let saw = lines.lock().unwrap_or_else(|e| e.into_inner()).clone();
    println!("what the layer saw:");
    for line in &saw {
        println!("  {line}");
    }
    let expected = [
        "start call echo from loopback",
        "end call echo: ok",
        "start stream server_echo from loopback",
        "end stream server_echo: ok",
        "start stream server_echo from loopback",
    ];
    ok &= saw.len() == 6 && saw[..5] == expected;
    ok &= saw
        .get(5)
        .is_some_and(|l| l.starts_with("end stream server_echo: failed: on purpose"));
    serving.abort();
    if !ok {
        eprintln!("one-layer: unexpected results");
        std::process::exit(1);
    }
}
