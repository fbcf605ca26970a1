//! Each stream is an `rpc.stream` span with an event per message sent and received,
//! on both sides. A test binary of its own: the subscriber it installs is the
//! process's, so no other test's threads can make the span's callsite uninterested
//! before it is installed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use thrift_wire::Utf8Bytes;
use thrift_wire::fixtures::echo::Request as Text;
use volo_core::client::{ClientConfig, StreamClient};
use volo_core::context::{Address, ServerContext};
use volo_core::server::{
    DispatchError, Server, ServerConfig, ServerRequest, ServerStream, ServiceInfo, StreamHandler,
};
use volo_core::service::Service;
use volo_core::stream::{HandlerError, Metadata};
use volo_core::transport::TransportKind;

/// No ping-pong methods: the server is here for its streams.
struct NoCalls;

impl ServiceInfo for NoCalls {
    const NAME: &'static str = "Test";

    fn is_oneway(_method: &str) -> bool {
        false
    }
}

impl Service<ServerContext, ServerRequest> for NoCalls {
    type Response = Text;
    type Error = DispatchError;

    async fn call(
        &self,
        _cx: &mut ServerContext,
        _req: ServerRequest,
    ) -> Result<Text, DispatchError> {
        Err(DispatchError::UnknownMethod)
    }
}

/// Echoes every message of every stream.
struct Streams;

impl StreamHandler for Streams {
    async fn serve(&self, stream: ServerStream) -> Result<(), HandlerError> {
        let (mut rx, mut tx) = stream.halves::<Text, Text>();
        while let Some(m) = rx.recv().await? {
            tx.send(&m).await?;
        }
        Ok(())
    }
}

#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_stream_is_a_span_with_an_event_per_message() {
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), async {
            let mut config = ServerConfig::default();
            config.transport.kind = TransportKind::Tokio;
            let bound = Server::new(NoCalls)
                .streams(Streams)
                .config(config)
                .bind(&"127.0.0.1:0".parse::<Address>().expect("an address"))
                .await
                .expect("bind");
            let addr = bound.local_addr().clone();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let serving = tokio::spawn(bound.serve_with_shutdown(async {
                let _ = stopped.await;
            }));
            let mut client_config = ClientConfig::default();
            client_config.transport.kind = TransportKind::Tokio;
            let c = StreamClient::new("Test", addr, &client_config).expect("a client");
            let mut s = c
                .open::<Text, Text>("echo", &Metadata::new())
                .await
                .expect("open");
            for _ in 0..3 {
                let m = Text {
                    action: Utf8Bytes::from_static("span"),
                    msg: Utf8Bytes::from_static("message"),
                };
                s.send(&m).await.expect("send");
                s.recv().await.expect("recv").expect("an echo");
            }
            s.close_send().await.expect("close");
            assert_eq!(s.recv().await.expect("the end"), None);
            let _ = stop.send(());
            serving.await.expect("the server task").expect("the server");
        })
        .await
        .expect("in time");
    });
    let out = String::from_utf8(lines.0.lock().unwrap().clone()).expect("text");
    let count = |what: &str, kind: &str| {
        out.lines()
            .filter(|l| l.contains("rpc.stream{") && l.contains(what) && l.contains(kind))
            .count()
    };
    for side in ["client", "server"] {
        let kind = format!("otel.kind=\"{side}\"");
        assert_eq!(count("stream message sent", &kind), 3, "{side}:\n{out}");
        assert_eq!(count("stream message received", &kind), 3, "{side}:\n{out}");
    }
}
