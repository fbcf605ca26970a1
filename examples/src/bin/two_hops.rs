//! `two_hops`: metainfo through two hops. A client calls `front`, whose `echo` handler
//! calls `back`; both are EchoService servers on 127.0.0.1. The client sets a
//! persistent value (`logid`) and a transient one (`color`):
//!
//! - `front` sees both; it passes the call on with `ClientContext::forward_from`, so
//!   `back` sees `logid` (persistent goes on) but not `color` (transient went one hop).
//! - `back` sends a backward value (`served_by`); it reaches `front`, and `front` sends
//!   its own back to the client: backward values go back one hop.
//!
//! Prints what each side saw and exits (status 1 if anything differs).
//!
//! With `--trace`, it also prints the spans of the call as they close, on stderr: one
//! trace, six spans (the client's call and attempt, front's server span, front's call
//! and attempt, back's server span), each with its `trace_id`, `span_id` and
//! `parent_span_id`, so the chain can be read off.

use std::convert::Infallible;

use clap::Parser;
use examples::echo::{
    EchoService, EchoServiceClient, EchoServiceEchoOrFailException, EchoServiceServer, Ids, MyTest,
    Request, Response,
};
use examples::echo_service::Echo;
use thrift_wire::Utf8Bytes;
use volo_core::client::ClientContext;
use volo_core::context::{Address, ServerContext};
use volo_core::server::{Server, ServerError};

/// What a hop reports: the metainfo it saw, in `msg`.
fn seen(cx: &ServerContext) -> String {
    format!(
        "logid={:?} color={:?}",
        cx.metainfo.persistent("logid"),
        cx.metainfo.transient("color")
    )
}

/// The second hop: answers with what it saw and says who served.
struct Back;

/// The first hop: calls `back`, and answers with both hops' views.
struct Front {
    back: EchoServiceClient,
}

/// The methods this example does not use: as the plain echo service answers them.
macro_rules! plain_methods {
    () => {
        async fn echo_test(
            &self,
            cx: &mut ServerContext,
            t: MyTest,
        ) -> Result<MyTest, ServerError<Infallible>> {
            Echo::default().echo_test(cx, t).await
        }

        async fn echo_ids(
            &self,
            cx: &mut ServerContext,
            ids: Ids,
        ) -> Result<Ids, ServerError<Infallible>> {
            Echo::default().echo_ids(cx, ids).await
        }

        async fn echo_or_fail(
            &self,
            cx: &mut ServerContext,
            req: Request,
        ) -> Result<Response, ServerError<EchoServiceEchoOrFailException>> {
            Echo::default().echo_or_fail(cx, req).await
        }

        async fn notify(
            &self,
            cx: &mut ServerContext,
            event: Utf8Bytes,
        ) -> Result<(), ServerError<Infallible>> {
            Echo::default().notify(cx, event).await
        }
    };
}

impl EchoService for Back {
    async fn echo(
        &self,
        cx: &mut ServerContext,
        req: Request,
    ) -> Result<Response, ServerError<Infallible>> {
        cx.metainfo.set_backward("served_by", "back");
        Ok(Response {
            action: req.action,
            msg: format!("back saw {}", seen(cx)).into(),
        })
    }

    plain_methods!();
}

impl EchoService for Front {
    async fn echo(
        &self,
        cx: &mut ServerContext,
        req: Request,
    ) -> Result<Response, ServerError<Infallible>> {
        let mine = format!("front saw {}", seen(cx));
        let mut next = ClientContext::forward_from(cx);
        let answer = self
            .back
            .echo_with(&mut next, req)
            .await
            .map_err(|e| ServerError::internal(format!("calling back: {e}")))?;
        let back_says = next
            .metainfo
            .backward("served_by")
            .unwrap_or("nobody")
            .to_string();
        cx.metainfo.set_backward("served_by", "front");
        cx.metainfo.set_backward("front_heard_from", back_says);
        Ok(Response {
            action: answer.action,
            msg: format!("{mine}; {}", answer.msg).into(),
        })
    }

    plain_methods!();
}

async fn serve<S: EchoService>(service: S) -> Address {
    let bound = Server::new(EchoServiceServer::new(service))
        .bind(&"127.0.0.1:0".parse().expect("an address"))
        .await
        .expect("binds");
    let addr = bound.local_addr().clone();
    tokio::spawn(bound.serve());
    addr
}

fn client(addr: Address) -> EchoServiceClient {
    EchoServiceClient::builder()
        .address(addr)
        .build()
        .expect("a client")
}

/// Metainfo through two hops: a client calls front, whose handler calls back; prints
/// what each side saw (status 1 if anything differs from what it expects).
#[derive(Debug, Parser)]
#[command(name = "two-hops", version, args_override_self = true)]
struct Cli {
    /// Prints the spans of the call on stderr as they close: one trace, six spans.
    #[arg(long)]
    trace: bool,
}

#[tokio::main]
async fn main() {
    if Cli::parse().trace {
        tracing_subscriber::fmt()
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
            .with_writer(std::io::stderr)
            .init();
    }
    let back = serve(Back).await;
    let front = serve(Front { back: client(back) }).await;
    let mut cx = ClientContext::new();
    cx.metainfo.set_persistent("logid", "L-7");
    cx.metainfo.set_transient("color", "blue");
    let answer = client(front)
        .echo_with(
            &mut cx,
            Request {
                action: "echo".into(),
                msg: "hi".into(),
            },
        )
        .await
        .expect("the call through two hops");
    println!("{}", answer.msg);
    let served_by = cx.metainfo.backward("served_by");
    let heard = cx.metainfo.backward("front_heard_from");
    println!("backward at the client: served_by={served_by:?} front_heard_from={heard:?}");
    let want = "front saw logid=Some(\"L-7\") color=Some(\"blue\"); \
                back saw logid=Some(\"L-7\") color=None";
    if answer.msg.as_str() != want || served_by != Some("front") || heard != Some("back") {
        eprintln!("two_hops: unexpected results; wanted {want:?}");
        std::process::exit(1);
    }
}
