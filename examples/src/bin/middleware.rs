//! `middleware`: two custom client layers on a generated client, as the guide's
//! middleware chapter (`docs/governance.md`) shows them.
//!
//! - `Tag`, around the whole call (`ClientBuilder::layer`): stamps every call with a
//!   persistent `tenant` metainfo value and counts calls.
//! - `CountAttempts` (from `examples::attempts`, a layer of the same shape), around
//!   each attempt (`ClientBuilder::layer_inner`, below the balancer): sees the
//!   instance each attempt went to and whether it failed.
//!
//! It serves EchoService on 127.0.0.1, builds a client over two instances (the server,
//! and a port where nothing listens), makes calls, and prints what the layers saw: each
//! call once in `Tag`; per instance, the failed connects to the dead port, each
//! followed by a retry on the live one. It exits with status 1 if anything differs
//! from that.

use std::sync::{Arc, Mutex, PoisonError};

use clap::Parser;
use examples::attempts::InstanceCounts;
use examples::echo::{EchoServiceClient, EchoServiceServer, Request};
use examples::echo_service::Echo;
use volo_core::client::{ClientContext, ClientRequest, ClientResponse, Error};
use volo_core::context::Address;
use volo_core::server::Server;
use volo_core::service::{Service, layer_fn};

/// Around the whole call: stamps the tenant, counts calls.
struct Tag<S> {
    inner: S,
    tenant: &'static str,
    calls: Arc<Mutex<u64>>,
}

impl<S> Service<ClientContext, ClientRequest> for Tag<S>
where
    S: Service<ClientContext, ClientRequest, Response = ClientResponse, Error = Error> + Sync,
{
    type Response = ClientResponse;
    type Error = Error;

    async fn call(
        &self,
        cx: &mut ClientContext,
        req: ClientRequest,
    ) -> Result<ClientResponse, Error> {
        *self.calls.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        cx.metainfo.set_persistent("tenant", self.tenant);
        self.inner.call(cx, req).await
    }
}

/// Two custom client layers on a generated client, one around the whole call and one
/// around each attempt: a few calls over a live and a dead instance, then what the
/// layers saw (status 1 if anything differs from what it expects).
#[derive(Debug, Parser)]
#[command(name = "middleware", version, args_override_self = true)]
struct Cli {}

#[tokio::main]
async fn main() {
    Cli::parse();
    let server = Server::new(EchoServiceServer::new(Echo::default()))
        .bind(&"127.0.0.1:0".parse().expect("an address"))
        .await
        .expect("binds");
    let live = server.local_addr().clone();
    let serving = tokio::spawn(server.serve());
    // A port that was free a moment ago: connects to it are refused.
    let dead = Address::Tcp(
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port"),
    );

    let calls = Arc::new(Mutex::new(0));
    let counts = InstanceCounts::new([&live, &dead]);
    let c = Arc::clone(&calls);
    let client = EchoServiceClient::builder()
        .addresses([live.clone(), dead.clone()])
        .layer(layer_fn(move |inner| Tag {
            inner,
            tenant: "t1",
            calls: Arc::clone(&c),
        }))
        .layer_inner(counts.layer())
        .build()
        .expect("a client");

    let mut ok = true;
    // Ten calls: fewer than the retries the budget holds from the start (ten), so
    // every connect refused is retried whatever the balancer picks.
    for i in 0..10 {
        let req = Request {
            action: "echo".into(),
            msg: format!("call {i}").into(),
        };
        match client.echo(req).await {
            Ok(r) => ok &= r.msg.as_str() == format!("call {i}"),
            Err(e) => {
                eprintln!("call {i} failed: {e}");
                ok = false;
            }
        }
    }
    let calls = *calls.lock().unwrap_or_else(PoisonError::into_inner);
    let seen = counts.snapshot();
    println!("calls the outer layer saw: {calls}");
    for (instance, c) in &seen {
        println!(
            "attempts on {instance}: {} answered, {} failed",
            c.ok, c.failed
        );
    }
    let of = |addr: &Address| {
        let addr = addr.to_string();
        seen.iter()
            .find(|(a, _)| *a == addr)
            .map(|(_, c)| (c.ok, c.failed))
            .unwrap_or_default()
    };
    let (live_ok, live_failed) = of(&live);
    let (dead_ok, dead_failed) = of(&dead);
    // Every call answered by the live instance; each attempt on the dead one failed
    // (its connect was refused) and was retried there.
    ok &= calls == 10 && live_ok == 10 && live_failed == 0 && dead_ok == 0;
    ok &= dead_failed > 0;
    println!("retried after a failed connect: {dead_failed}");
    serving.abort();
    if !ok {
        eprintln!("middleware: unexpected results");
        std::process::exit(1);
    }
}
