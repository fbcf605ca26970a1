//! `layered`: EchoService behind a custom server-side layer that counts calls per
//! method and refuses `echo_or_fail` for callers without the `RPC_PERSIST_tenant`
//! metainfo. It serves on 127.0.0.1, makes a few calls to itself, prints what the layer
//! saw, and exits (status 1 if anything differs from what it expects).
//!
//! A server-side layer is a `volo_core::service::Layer` whose service is again a
//! `Service<ServerContext, ServerRequest>` (so a `volo_core::server::Dispatch`): it sees
//! the method (`cx.rpc.method`), the context (metainfo, deadline, peer), the still
//! encoded arguments and the outcome, and may answer a call itself.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use clap::Parser;
use examples::echo::{EchoServiceClient, EchoServiceServer, Request};
use examples::echo_service::Echo;
use thrift_wire::{ApplicationException, ApplicationExceptionKind};
use volo_core::client::ClientContext;
use volo_core::context::ServerContext;
use volo_core::server::{DispatchError, Server, ServerRequest};
use volo_core::service::{Service, layer_fn};

/// Counts calls per method; `echo_or_fail` needs a tenant.
struct Guard<S> {
    inner: S,
    calls: Arc<Mutex<BTreeMap<String, u32>>>,
}

impl<S> Service<ServerContext, ServerRequest> for Guard<S>
where
    S: Service<ServerContext, ServerRequest, Error = DispatchError> + Sync,
{
    type Response = S::Response;
    type Error = DispatchError;

    async fn call(
        &self,
        cx: &mut ServerContext,
        req: ServerRequest,
    ) -> Result<S::Response, DispatchError> {
        let method = cx.rpc.method.as_str();
        *self
            .calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(method.to_string())
            .or_default() += 1;
        if method == "echo_or_fail" && cx.metainfo.persistent("tenant").is_none() {
            return Err(DispatchError::Application(ApplicationException::new(
                ApplicationExceptionKind::Unknown,
                "echo_or_fail needs a tenant",
            )));
        }
        self.inner.call(cx, req).await
    }
}

/// EchoService behind a server-side layer that counts calls per method and refuses
/// echo_or_fail without a tenant: a few calls to itself, then what the layer saw
/// (status 1 if anything differs from what it expects).
#[derive(Debug, Parser)]
#[command(name = "layered", version, args_override_self = true)]
struct Cli {}

#[tokio::main]
async fn main() {
    Cli::parse();
    let calls = Arc::new(Mutex::new(BTreeMap::new()));
    let seen = Arc::clone(&calls);
    let server = Server::new(EchoServiceServer::new(Echo::default()))
        .layer(layer_fn(move |inner| Guard {
            inner,
            calls: Arc::clone(&seen),
        }))
        .bind(&"127.0.0.1:0".parse().expect("an address"))
        .await
        .expect("binds");
    let addr = server.local_addr().clone();
    let serving = tokio::spawn(server.serve());
    let client = EchoServiceClient::builder()
        .address(addr)
        .build()
        .expect("a client");
    let req = |action: &str| Request {
        action: action.to_string().into(),
        msg: "hi".into(),
    };
    let mut ok = true;
    for _ in 0..3 {
        ok &= client.echo(req("echo")).await.is_ok();
    }
    let refused = client.echo_or_fail(req("pass")).await;
    println!("echo_or_fail without a tenant: {refused:?}");
    ok &= refused
        .as_ref()
        .is_err_and(|e| e.application_exception().is_some());
    let mut cx = ClientContext::new();
    cx.metainfo.set_persistent("tenant", "t1");
    let allowed = client.echo_or_fail_with(&mut cx, req("pass")).await;
    println!("echo_or_fail with a tenant: {allowed:?}");
    ok &= allowed.is_ok();
    let counts = calls.lock().unwrap_or_else(|e| e.into_inner()).clone();
    println!("calls the layer saw: {counts:?}");
    ok &= counts.get("echo") == Some(&3) && counts.get("echo_or_fail") == Some(&2);
    serving.abort();
    if !ok {
        eprintln!("layered: unexpected results");
        std::process::exit(1);
    }
}
