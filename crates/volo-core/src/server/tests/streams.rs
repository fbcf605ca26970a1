//! Streams through the server's stack: a user layer sees each stream's opening and
//! its end, the limiter refuses streams over their limit with a typed refusal, the
//! stack's `CatchPanic` catches a handler's panic, and the metrics count a stream once.
//! The layers alone are tested against a mock service with a stand-in for a stream's
//! opening; the rest on loopback, with a real client.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use thrift_wire::ApplicationExceptionKind;

use crate::client::{ClientConfig, ClientStream, StreamClient};
use crate::context::ServerContext;
use crate::metrics::Metrics;
use crate::refusal::{Refusal, is_overload};
use crate::server::inflight::InflightLayer;
use crate::server::limit::{LimitConfig, LimitLayer, Overloaded};
use crate::server::metered::MeteredServer;
use crate::server::{DispatchError, ServerCall, ServerConfig, ServerStream, StreamHandler};
use crate::service::{Layer, Service, layer_fn, service_fn};
use crate::stream::{HandlerError, Metadata, StreamConfig, StreamError};
use crate::test_support::{Running, Text, run_bounded, start_with, text};

/// Streams of `Text`: `fail` ends at once with an exception, `panic` panics, any
/// other method answers each message with itself until the client's end.
struct Handler;

impl StreamHandler for Handler {
    async fn serve(&self, stream: ServerStream) -> Result<(), HandlerError> {
        let method = stream.method().to_owned();
        let (mut rx, mut tx) = stream.halves::<Text, Text>();
        match method.as_str() {
            "fail" => Err(HandlerError::internal("failed on purpose")),
            "panic" => panic!("a handler that panics"),
            _ => {
                while let Some(m) = rx.recv().await? {
                    tx.send(&m).await?;
                }
                Ok(())
            }
        }
    }
}

/// What [`Record`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Start {
        method: String,
        stream: bool,
        peer: bool,
        tenant: Option<String>,
    },
    End {
        method: String,
        outcome: Result<(), String>,
    },
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// A user layer over [`ServerCall`]: records each start and each end.
struct Record<S> {
    inner: S,
    seen: Log,
}

impl<S, R> Service<ServerContext, R> for Record<S>
where
    S: Service<ServerContext, R, Error = DispatchError> + Sync,
    R: ServerCall,
{
    type Response = S::Response;
    type Error = DispatchError;

    async fn call(&self, cx: &mut ServerContext, req: R) -> Result<S::Response, DispatchError> {
        let method = cx.rpc.method.to_string();
        self.seen.lock().unwrap().push(Seen::Start {
            method: method.clone(),
            stream: req.opens_stream(),
            peer: cx.peer().is_some(),
            tenant: cx.metainfo.persistent("tenant").map(str::to_owned),
        });
        let outcome = self.inner.call(cx, req).await;
        self.seen.lock().unwrap().push(Seen::End {
            method,
            outcome: outcome.as_ref().map(drop).map_err(ToString::to_string),
        });
        outcome
    }
}

/// A server of [`Handler`]'s streams behind [`Record`], with `config` and `streams`.
async fn start(config: ServerConfig, streams: StreamConfig, seen: &Log) -> Running {
    let seen = Arc::clone(seen);
    start_with(config, &"127.0.0.1:0".parse().unwrap(), move |s| {
        s.streams(Handler)
            .stream_config(streams)
            .layer(layer_fn(move |inner| Record { inner, seen }))
    })
    .await
}

fn client(running: &Running, config: &ClientConfig) -> StreamClient {
    StreamClient::new("Test", running.address.clone(), config).expect("a client")
}

async fn open(c: &StreamClient, method: &str, header: &Metadata) -> ClientStream<Text, Text> {
    c.open::<Text, Text>(method, header).await.expect("open")
}

/// How a stream `s` whose handler fails at once ends, on the client.
async fn failure(s: &mut ClientStream<Text, Text>) -> thrift_wire::ApplicationException {
    match s.recv().await {
        Err(StreamError::Application(e)) => e,
        other => panic!("{other:?}"),
    }
}

fn start_of(method: &str, tenant: Option<&str>) -> Seen {
    Seen::Start {
        method: method.into(),
        stream: true,
        peer: true,
        tenant: tenant.map(str::to_owned),
    }
}

#[test]
fn a_user_layer_sees_a_streams_opening_and_its_outcome() {
    run_bounded(Duration::from_secs(60), async {
        let seen = Log::default();
        let running = start(ServerConfig::default(), StreamConfig::default(), &seen).await;
        let c = client(&running, &ClientConfig::default());
        let mut header = Metadata::new();
        header.insert("RPC_PERSIST_tenant", "t1");
        let mut s = open(&c, "echo", &header).await;
        s.send(&text(1, "a")).await.expect("send");
        assert_eq!(s.recv().await.expect("recv"), Some(text(1, "a")));
        // The stream is open: the layer saw it start, and not end.
        assert_eq!(*seen.lock().unwrap(), [start_of("echo", Some("t1"))]);
        s.close_send().await.expect("close");
        assert_eq!(s.recv().await.expect("the end"), None);

        let mut f = open(&c, "fail", &Metadata::new()).await;
        assert_eq!(failure(&mut f).await.message.as_str(), "failed on purpose");
        // Each end is recorded before its trailer goes.
        assert_eq!(
            *seen.lock().unwrap(),
            [
                start_of("echo", Some("t1")),
                Seen::End {
                    method: "echo".into(),
                    outcome: Ok(()),
                },
                start_of("fail", None),
                Seen::End {
                    method: "fail".into(),
                    outcome: Err("failed on purpose".into()),
                },
            ]
        );
        running.stop().await;
    });
}

/// A stream's opening as far as the layers go, without a connection.
struct Opening;

impl ServerCall for Opening {
    fn opens_stream(&self) -> bool {
        true
    }
}

/// A service of [`Opening`]s that ends each when `gate` gives it a permit.
fn gated(
    gate: &Arc<tokio::sync::Semaphore>,
) -> impl Service<ServerContext, Opening, Response = (), Error = DispatchError> + Sync {
    let gate = Arc::clone(gate);
    service_fn(move |_: &mut ServerContext, _: Opening| {
        let gate = Arc::clone(&gate);
        async move {
            gate.acquire().await.expect("never closed").forget();
            Ok(())
        }
    })
}

#[test]
fn the_limit_layer_refuses_a_stream_over_its_limit_as_a_typed_refusal() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    // No call may pass; one stream may.
    let calls = LimitConfig {
        max_concurrency: Some(0),
        max_qps: Some(0),
    };
    let limit = LimitLayer::new(calls)
        .stream_limit(Some(1))
        .layer(gated(&gate));
    let mut cx = ServerContext::default();
    let mut first = Box::pin(limit.call(&mut cx, Opening));
    assert!(first.as_mut().now_or_never().is_none(), "held open");
    let mut cx = ServerContext::default();
    let refused = limit
        .call(&mut cx, Opening)
        .now_or_never()
        .expect("at once");
    let Err(e) = refused else {
        panic!("a second stream passed");
    };
    assert!(
        matches!(
            e,
            DispatchError::Overloaded(Overloaded::Streams { limit: 1 })
        ),
        "{e:?}"
    );
    // Made into wire text in one place: the overload exception, named as a refusal.
    assert_eq!(e.refusal(), Some(Refusal::Overloaded));
    let ex = e.into_exception("echo");
    assert!(is_overload(&ex), "{ex:?}");
    assert_eq!(
        ex.message.as_str(),
        "server overloaded: 1 streams in progress"
    );
    // The slot is held until the stream ends.
    gate.add_permits(1);
    assert!(matches!(first.as_mut().now_or_never(), Some(Ok(()))));
    drop(first);
    gate.add_permits(1);
    let mut cx = ServerContext::default();
    let again = limit.call(&mut cx, Opening).now_or_never();
    assert!(matches!(again, Some(Ok(()))), "the slot came back");
}

#[test]
fn streams_take_no_call_slot_and_are_not_counted_as_calls() {
    let gate = Arc::new(tokio::sync::Semaphore::new(1));
    let metrics = Metrics::new();
    // Not one call slot: a call would wait for ever.
    let stack =
        InflightLayer::new(0).layer(MeteredServer::new(gated(&gate), Some(metrics.clone())));
    let mut cx = ServerContext::default();
    cx.rpc.method = "opened".into();
    let done = stack.call(&mut cx, Opening).now_or_never();
    assert!(matches!(done, Some(Ok(()))), "no slot awaited");
    let text = metrics.encode();
    assert!(
        !text.lines().any(|l| l.contains("opened")),
        "a stream in the call families:\n{text}"
    );
}

#[test]
fn a_stream_over_the_limit_is_refused_before_the_users_layers_as_overloaded() {
    run_bounded(Duration::from_secs(60), async {
        let seen = Log::default();
        let metrics = Metrics::new();
        let mut config = ServerConfig::default();
        config.observability.metrics = Some(metrics.clone());
        let limited = StreamConfig {
            max_in_flight: Some(1),
            ..StreamConfig::default()
        };
        let running = start(config, limited, &seen).await;
        let c = client(&running, &ClientConfig::default());
        let mut held = open(&c, "echo", &Metadata::new()).await;
        held.send(&text(1, "x")).await.expect("send");
        held.recv().await.expect("recv").expect("an echo");
        let mut over = open(&c, "echo", &Metadata::new()).await;
        let e = failure(&mut over).await;
        assert!(is_overload(&e), "{e:?}");
        assert_eq!(
            e.message.as_str(),
            "server overloaded: 1 streams in progress"
        );
        // The limiter is outside the user's layers: they never saw the refused one.
        assert_eq!(*seen.lock().unwrap(), [start_of("echo", None)]);
        // Counted as a rejection and, among the streams, as refused (not as a
        // handler's error).
        let text = counted(&metrics, r#"rpc_server_streams_total{outcome="refused"} 1"#).await;
        assert!(
            text.lines()
                .any(|l| l == r#"rpc_server_limiter_rejections_total{reason="streams"} 1"#),
            "{text}"
        );
        assert!(!text.contains(r#"outcome="application_error""#), "{text}");
        held.close_send().await.expect("close");
        assert_eq!(held.recv().await.expect("the end"), None);
        running.stop().await;
    });
}

/// Waits until the server's metrics show `line`.
async fn counted(metrics: &Metrics, line: &str) -> String {
    loop {
        let text = metrics.encode();
        if text.lines().any(|l| l == line) {
            return text;
        }
        tokio::task::yield_now().await;
    }
}

/// Opens a `panic` stream on a server with `metrics`: its failure, and what the layer
/// saw.
async fn a_panicking_stream(metrics: &Metrics) -> (thrift_wire::ApplicationException, Vec<Seen>) {
    let seen = Log::default();
    let mut config = ServerConfig::default();
    config.observability.metrics = Some(metrics.clone());
    let running = start(config, StreamConfig::default(), &seen).await;
    let c = client(&running, &ClientConfig::default());
    let mut s = open(&c, "panic", &Metadata::new()).await;
    let e = failure(&mut s).await;
    // The server goes on.
    let mut next = open(&c, "echo", &Metadata::new()).await;
    next.send(&text(1, "after")).await.expect("send");
    assert_eq!(next.recv().await.expect("recv"), Some(text(1, "after")));
    next.close_send().await.expect("close");
    assert_eq!(next.recv().await.expect("the end"), None);
    counted(metrics, r#"rpc_server_streams_total{outcome="ok"} 1"#).await;
    let seen = seen.lock().unwrap().clone();
    running.stop().await;
    (e, seen)
}

#[test]
fn a_panicking_stream_handler_is_caught_by_the_stacks_catch_panic() {
    run_bounded(Duration::from_secs(60), async {
        let (e, seen) = a_panicking_stream(&Metrics::new()).await;
        assert_eq!(e.kind, ApplicationExceptionKind::InternalError);
        // `CatchPanic`'s answer, which names the panic's message.
        assert_eq!(
            e.message.as_str(),
            "the handler panicked: a handler that panics"
        );
        // The user's layer, beneath `CatchPanic`, saw the panic unwind through it: a
        // start and no end.
        assert_eq!(seen[0], start_of("panic", None));
        assert_eq!(seen[1], start_of("echo", None));
    });
}

#[test]
fn a_panicking_stream_is_counted_once() {
    run_bounded(Duration::from_secs(60), async {
        let metrics = Metrics::new();
        let _ = a_panicking_stream(&metrics).await;
        let text = counted(
            &metrics,
            r#"rpc_server_streams_total{outcome="application_error"} 1"#,
        )
        .await;
        // In the stream families only, once: not as a call too.
        let mentions: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#') && l.contains("panic"))
            .collect();
        assert!(mentions.is_empty(), "{mentions:?}");
        let mut ended: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("rpc_server_streams_total{"))
            .collect();
        ended.sort_unstable();
        assert_eq!(
            ended,
            [
                r#"rpc_server_streams_total{outcome="application_error"} 1"#,
                r#"rpc_server_streams_total{outcome="ok"} 1"#,
            ],
            "{text}"
        );
    });
}
