//! Spans and the trace context across two hops (a client, a front server that calls a
//! back server), and the access log, seen by a subscriber that records what it gets.
//!
//! Everything runs on the test's thread (a current-thread runtime, tokio sockets,
//! a task per connection), where the recording subscriber is the default.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

use super::*;
use crate::client::retry::Backoff;
use crate::client::{Client, ClientConfig, ClientContext, RetryPolicy};
use crate::config::{Observability, TransportConfig};
use crate::trace::{AccessLog, TRACEPARENT};
use crate::transport::TransportKind;

/// A span or an event as the subscriber got it.
#[derive(Debug, Clone, Default)]
struct Seen {
    name: &'static str,
    target: String,
    fields: HashMap<String, String>,
}

impl Seen {
    fn get(&self, key: &str) -> &str {
        self.fields
            .get(key)
            .map_or_else(|| panic!("no {key} in {self:?}"), String::as_str)
    }
}

impl Visit for Seen {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.fields
            .insert(field.name().to_string(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.fields
            .insert(field.name().to_string(), value.to_string());
    }
}

/// Records every span (with its fields as recorded by the end) and every event.
#[derive(Clone, Default)]
struct Recorder {
    spans: Arc<Mutex<Vec<Seen>>>,
    events: Arc<Mutex<Vec<Seen>>>,
    next: Arc<AtomicU64>,
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let mut seen = Seen {
            name: attrs.metadata().name(),
            target: attrs.metadata().target().to_string(),
            ..Seen::default()
        };
        attrs.record(&mut seen);
        let mut spans = self.spans.lock().unwrap();
        spans.push(seen);
        self.next.fetch_add(1, Ordering::Relaxed);
        Id::from_u64(spans.len() as u64)
    }

    fn record(&self, id: &Id, values: &Record<'_>) {
        let mut spans = self.spans.lock().unwrap();
        let at = usize::try_from(id.into_u64()).unwrap() - 1;
        values.record(&mut spans[at]);
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut seen = Seen {
            name: event.metadata().name(),
            target: event.metadata().target().to_string(),
            ..Seen::default()
        };
        event.record(&mut seen);
        self.events.lock().unwrap().push(seen);
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

impl Recorder {
    fn spans(&self, name: &str) -> Vec<Seen> {
        let spans = self.spans.lock().unwrap();
        spans.iter().filter(|s| s.name == name).cloned().collect()
    }
}

/// The front hop: passes each `echo` on to the back hop, and answers with the
/// `traceparent` it received (or `none`).
struct Front {
    back: Client,
}

impl ServiceInfo for Front {
    const NAME: &'static str = "Front";

    fn is_oneway(_: &str) -> bool {
        false
    }
}

impl Service<ServerContext, ServerRequest> for Front {
    type Response = Text;
    type Error = DispatchError;

    async fn call(
        &self,
        cx: &mut ServerContext,
        req: ServerRequest,
    ) -> Result<Text, DispatchError> {
        let args: Text = req.decode(cx)?;
        let mut out = ClientContext::forward_from(cx);
        let back: Text = self.back.call(&mut out, "echo", args).await.map_err(|e| {
            DispatchError::Application(ApplicationException::new(
                ApplicationExceptionKind::InternalError,
                e.to_string(),
            ))
        })?;
        Ok(Text {
            id: 0,
            text: back.text,
        })
    }
}

fn tokio_server() -> ServerConfig {
    ServerConfig {
        transport: TransportConfig {
            kind: TransportKind::Tokio,
            ..Default::default()
        },
        ..ServerConfig::default()
    }
}

fn tokio_client(service: &'static str, addr: &Address) -> Client {
    Client::builder(service)
        .address(addr.clone())
        .config(ClientConfig {
            transport: TransportConfig {
                kind: TransportKind::Tokio,
                ..Default::default()
            },
            ..ClientConfig::default()
        })
        .build()
        .unwrap()
}

/// A server of the test service with `config` on a free loopback port, serving until
/// the runtime ends: its address.
async fn serve_test(config: ServerConfig) -> Address {
    let server = Server::new(TestService::default())
        .config(config)
        .bind(&"127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = server.local_addr().clone();
    tokio::spawn(server.serve());
    addr
}

/// Runs `f` on a current-thread runtime with `subscriber` as the default (`None`: a
/// subscriber that takes nothing, whatever another test installed globally).
fn on_this_thread<F: std::future::Future<Output = ()>>(
    subscriber: Option<Recorder>,
    f: impl FnOnce() -> F,
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = match subscriber {
        Some(rec) => tracing::subscriber::set_default(rec),
        None => tracing::subscriber::set_default(tracing::subscriber::NoSubscriber::default()),
    };
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), f())
            .await
            .expect("the test ran out of time");
    });
}

/// Starts a back server (the test service) and a front one calling it, on tokio
/// sockets: their addresses, and the stop senders.
async fn two_hops() -> (Address, Vec<tokio::sync::oneshot::Sender<()>>) {
    let back = Server::new(TestService::default())
        .config(tokio_server())
        .bind(&"127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let back_addr = back.local_addr().clone();
    let front = Server::new(Front {
        back: tokio_client("Test", &back_addr),
    })
    .config(tokio_server())
    .bind(&"127.0.0.1:0".parse().unwrap())
    .await
    .unwrap();
    let front_addr = front.local_addr().clone();
    let (stop_front, front_stopped) = tokio::sync::oneshot::channel::<()>();
    let (stop_back, back_stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(front.serve_with_shutdown(async {
        let _ = front_stopped.await;
    }));
    tokio::spawn(back.serve_with_shutdown(async {
        let _ = back_stopped.await;
    }));
    let stops = vec![stop_front, stop_back];
    (front_addr, stops)
}

#[test]
fn one_trace_spans_both_hops_with_each_span_the_child_of_the_one_before() {
    let rec = Recorder::default();
    let front_seen = Arc::new(Mutex::new(String::new()));
    let kept = Arc::clone(&front_seen);
    on_this_thread(Some(rec.clone()), || async move {
        let (front, _stops) = two_hops().await;
        *kept.lock().unwrap() = front.to_string();
        let client = tokio_client("Front", &front);
        let got: Text = client
            .call(&mut ClientContext::new(), "echo", text(1, "hi"))
            .await
            .unwrap();
        assert_eq!(got.text.as_deref(), Some("hi"));
    });
    // The chain: client call > attempt > front server > front's call > its attempt >
    // back server.
    let calls = rec.spans("rpc.client");
    let attempts = rec.spans("rpc.attempt");
    let servers = rec.spans("rpc.server");
    assert_eq!((calls.len(), attempts.len(), servers.len()), (2, 2, 2));
    let by_service = |list: &[Seen], service: &str| {
        list.iter()
            .find(|s| s.get("rpc.service") == service)
            .unwrap_or_else(|| panic!("no span of {service} in {list:?}"))
            .clone()
    };
    let (call_front, call_back) = (by_service(&calls, "Front"), by_service(&calls, "Test"));
    let (server_front, server_back) = (by_service(&servers, "Front"), by_service(&servers, "Test"));
    let attempt_of = |call: &Seen| {
        attempts
            .iter()
            .find(|a| a.get("parent_span_id") == call.get("span_id"))
            .unwrap_or_else(|| panic!("no attempt under {call:?}"))
            .clone()
    };
    let (attempt_front, attempt_back) = (attempt_of(&call_front), attempt_of(&call_back));
    let trace = call_front.get("trace_id").to_string();
    assert_eq!(trace.len(), 32);
    for s in [
        &call_front,
        &attempt_front,
        &server_front,
        &call_back,
        &attempt_back,
        &server_back,
    ] {
        assert_eq!(s.get("trace_id"), trace, "one trace: {s:?}");
        assert_eq!(s.get("span_id").len(), 16);
    }
    assert!(
        !call_front.fields.contains_key("parent_span_id"),
        "the root"
    );
    let parent = |child: &Seen, of: &Seen| {
        assert_eq!(
            child.get("parent_span_id"),
            of.get("span_id"),
            "{} under {}",
            child.name,
            of.name
        );
    };
    parent(&server_front, &attempt_front);
    parent(&call_back, &server_front);
    parent(&server_back, &attempt_back);

    // The conventions' attributes.
    assert_eq!(call_front.get("otel.name"), "Front/echo");
    assert_eq!(call_front.get("otel.kind"), "client");
    assert_eq!(call_front.get("rpc.system"), "apache_thrift");
    assert_eq!(call_front.get("rpc.method"), "echo");
    assert_eq!(call_front.get("otel.status_code"), "OK");
    assert_eq!(
        attempt_front.get("server.address"),
        *front_seen.lock().unwrap()
    );
    assert_eq!(attempt_front.get("rpc.attempt"), "0");
    assert_eq!(server_back.get("otel.kind"), "server");
    assert_eq!(server_back.get("otel.name"), "Test/echo");
    assert!(server_back.get("client.address").starts_with("127.0.0.1:"));
    assert_eq!(server_back.get("otel.status_code"), "OK");
}

#[test]
fn a_failed_call_is_an_error_on_both_sides_and_a_bad_traceparent_starts_a_trace() {
    let rec = Recorder::default();
    on_this_thread(Some(rec.clone()), || async {
        let addr = serve_test(tokio_server()).await;
        let client = tokio_client("Test", &addr);
        let mut cx = ClientContext::new();
        cx.metainfo.set_persistent(TRACEPARENT, "00-nonsense");
        let failed = client
            .call::<Text, Text>(&mut cx, "fail", text(1, "x"))
            .await;
        assert!(failed.is_err());
    });
    let call = &rec.spans("rpc.client")[0];
    assert_eq!(call.get("otel.status_code"), "ERROR");
    assert_eq!(call.get("error.type"), "Application");
    assert!(!call.fields.contains_key("parent_span_id"), "a new trace");
    let server = &rec.spans("rpc.server")[0];
    assert_eq!(server.get("otel.status_code"), "ERROR");
    assert_eq!(server.get("error.type"), "InternalError");
    assert_eq!(server.get("trace_id"), call.get("trace_id"));
}

#[test]
fn with_no_subscriber_no_trace_context_is_sent() {
    on_this_thread(None, || async {
        let addr = serve_test(tokio_server()).await;
        let client = tokio_client("Test", &addr);
        // `logid` comes back as `seen`: the server saw the persistent metainfo; it
        // would see `traceparent` the same way, and does not.
        let mut cx = ClientContext::new();
        cx.metainfo.set_persistent("logid", "7");
        client
            .call::<Text, Text>(&mut cx, "echo", text(1, "x"))
            .await
            .unwrap();
        assert_eq!(cx.metainfo.backward("seen"), Some("7"));
        assert_eq!(cx.metainfo.persistent(TRACEPARENT), None);
    });
}

/// `echo`, `echo`, `fail` (an application exception) and `nothing` (no such
/// method), with 0, 10, 20 and 30 bytes of text.
async fn four_calls(client: &Client) {
    for (i, method) in ["echo", "echo", "fail", "nothing"].into_iter().enumerate() {
        let _ = client
            .call::<Text, Text>(
                &mut ClientContext::new(),
                method,
                text(1, &"x".repeat(i * 10)),
            )
            .await;
    }
}

#[test]
fn the_access_log_shows_one_call_in_every_n_with_its_sizes() {
    let rec = Recorder::default();
    on_this_thread(Some(rec.clone()), || async {
        let config = ServerConfig {
            observability: Observability {
                access_log: Some(AccessLog { every: 2 }),
                ..Default::default()
            },
            ..tokio_server()
        };
        let addr = serve_test(config).await;
        let client = tokio_client("Test", &addr);
        four_calls(&client).await;
    });
    let events = rec.events.lock().unwrap();
    let lines: Vec<&Seen> = events
        .iter()
        .filter(|e| e.target == "volo_core::access")
        .collect();
    assert_eq!(lines.len(), 2, "calls 1 and 3 of 4: {lines:?}");
    let (first, third) = (lines[0], lines[1]);
    assert_eq!(first.get("method"), "echo");
    assert_eq!(first.get("status"), "ok");
    assert_eq!(first.get("service"), "Test");
    assert!(first.get("peer").starts_with("127.0.0.1:"));
    assert_eq!(third.get("method"), "fail");
    assert_eq!(third.get("status"), "InternalError");
    let num = |s: &Seen, k: &str| s.get(k).parse::<u64>().unwrap();
    assert!(
        num(third, "request_bytes") > num(first, "request_bytes"),
        "20 bytes more text"
    );
    assert!(num(first, "reply_bytes") > 0);
    let _ = num(first, "duration_us");
}

#[test]
fn the_client_access_log_shows_its_calls_with_the_sizes_the_server_saw() {
    let rec = Recorder::default();
    on_this_thread(Some(rec.clone()), || async {
        let config = ServerConfig {
            observability: Observability {
                access_log: Some(AccessLog::all()),
                ..Default::default()
            },
            ..tokio_server()
        };
        let addr = serve_test(config).await;
        let client_config = |every| ClientConfig {
            transport: TransportConfig {
                kind: TransportKind::Tokio,
                ..Default::default()
            },
            observability: Observability {
                access_log: Some(AccessLog { every }),
                ..Default::default()
            },
            ..ClientConfig::default()
        };
        let client = Client::builder("Test")
            .address(addr.clone())
            .config(client_config(2))
            .build()
            .unwrap();
        four_calls(&client).await;
        // A port nobody listens on: the call fails before anything is written.
        let dead: Address = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            Address::Tcp(l.local_addr().unwrap())
        };
        // Two retries each (a failed connect is retried), with one context for two
        // calls: each call's line counts its own attempts.
        let retries = RetryPolicy::new().backoff(Backoff::None).max_retries(2);
        let client = Client::builder("Test")
            .address(dead)
            .config(client_config(1))
            .retry(retries)
            .build()
            .unwrap();
        let mut cx = ClientContext::new();
        for _ in 0..2 {
            let failed = client
                .call::<Text, Text>(&mut cx, "echo", text(1, "x"))
                .await;
            assert!(failed.is_err());
        }
    });
    let events = rec.events.lock().unwrap();
    let side = |which: &str| -> Vec<Seen> {
        events
            .iter()
            .filter(|e| e.target == "volo_core::access" && e.get("side") == which)
            .cloned()
            .collect()
    };
    let (client, server) = (side("client"), side("server"));
    assert_eq!(
        client.len(),
        4,
        "calls 1 and 3 of 4, and the two failed ones: {client:?}"
    );
    assert_eq!(server.len(), 4, "every call the server got: {server:?}");
    assert!(
        server.iter().all(|s| !s.fields.contains_key("attempts")),
        "a server has no attempts to count: {server:?}"
    );
    let num = |s: &Seen, k: &str| s.get(k).parse::<u64>().unwrap();
    // The client's calls 1 and 3 are the server's calls 1 and 3, frame for frame.
    for (c, s) in [(&client[0], &server[0]), (&client[1], &server[2])] {
        assert_eq!(c.get("method"), s.get("method"));
        assert_eq!(c.get("service"), "Test");
        assert_eq!(num(c, "request_bytes"), num(s, "request_bytes"));
        assert_eq!(num(c, "reply_bytes"), num(s, "reply_bytes"));
        assert_eq!(num(c, "attempts"), 1);
        assert!(c.get("peer").starts_with("127.0.0.1:"));
        let _ = num(c, "duration_us");
    }
    assert_eq!(client[0].get("status"), "ok");
    assert_eq!(client[1].get("method"), "fail");
    assert_eq!(client[1].get("status"), "Application");
    assert!(num(&client[1], "request_bytes") > num(&client[0], "request_bytes"));
    let dead = &client[2];
    assert_eq!(dead.get("status"), "Connect");
    assert_eq!(
        (num(dead, "request_bytes"), num(dead, "reply_bytes")),
        (0, 0)
    );
    assert!(dead.get("peer").starts_with("127.0.0.1:"));
    assert_eq!(num(dead, "attempts"), 3, "the first and two retries");
    assert_eq!(client[3].get("status"), "Connect");
    assert_eq!(num(&client[3], "attempts"), 3, "the second call's own");
}

/// Streams whose handler fails those of method `fail` and ends the others at once.
struct Streams;

impl crate::server::StreamHandler for Streams {
    async fn serve(
        &self,
        stream: crate::server::ServerStream,
    ) -> Result<(), crate::stream::HandlerError> {
        match stream.method() {
            "fail" => Err(crate::stream::HandlerError::internal("no")),
            _ => Ok(()),
        }
    }
}

#[test]
fn a_streams_handler_runs_in_a_server_span_that_records_how_it_ended() {
    let rec = Recorder::default();
    on_this_thread(Some(rec.clone()), || async {
        let server = Server::new(TestService::default())
            .streams(Streams)
            .config(tokio_server())
            .bind(&"127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let addr = server.local_addr().clone();
        tokio::spawn(server.serve());
        let config = ClientConfig {
            transport: TransportConfig {
                kind: TransportKind::Tokio,
                ..Default::default()
            },
            ..ClientConfig::default()
        };
        let c = crate::client::StreamClient::new("Test", addr, &config).unwrap();
        let none = crate::stream::Metadata::new();
        // tracing caches whether a callsite is wanted, process-wide, when it is first
        // hit; one first hit on another test's thread while this thread's subscriber
        // was being installed can leave it cached as unwanted. A stream first (every
        // callsite of the path is registered by its end), then a rebuild of that
        // cache: the streams checked below are seen whatever ran beside this test.
        let mut first = c.open::<Text, Text>("warm", &none).await.unwrap();
        assert!(first.recv().await.is_ok());
        tracing::callsite::rebuild_interest_cache();
        for method in ["done", "fail"] {
            let mut s = c.open::<Text, Text>(method, &none).await.unwrap();
            let end = s.recv().await;
            assert_eq!(end.is_ok(), method == "done", "{end:?}");
        }
    });
    // Each span ended before its stream's trailer went.
    let spans = rec.spans("rpc.server");
    let of = |method: &str| {
        spans
            .iter()
            .find(|s| s.get("rpc.method") == method)
            .unwrap_or_else(|| panic!("no span of {method}: {spans:?}"))
    };
    assert_eq!(of("done").get("otel.kind"), "server");
    assert_eq!(of("done").get("otel.name"), "Test/done");
    assert!(of("done").get("client.address").starts_with("127.0.0.1:"));
    assert_eq!(of("done").get("otel.status_code"), "OK");
    assert_eq!(of("fail").get("otel.status_code"), "ERROR");
    assert_eq!(of("fail").get("error.type"), "InternalError");
}
