use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::http::{Asked, MAX_CONNECTIONS, MAX_HEAD, parse};
use super::labels::{MAX_METHODS, OTHER, Outcome};
use super::*;

/// The value of the sample `name{labels}` in `text`, if there is one.
pub(crate) fn sample(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(name_and_labels)?;
        rest.strip_prefix(' ')?.split(' ').next()?.parse().ok()
    })
}

#[test]
fn a_call_counts_by_service_method_and_outcome() {
    let m = Metrics::new();
    let inner = &m.inner;
    let table = &inner.server_methods;
    let svc = table.service(&inner.server_calls, "Echo");
    for _ in 0..3 {
        table
            .method(&inner.server_calls, svc, Some("echo"))
            .count(&inner.server_calls, Outcome::Ok);
    }
    let echo = table.method(&inner.server_calls, svc, Some("echo"));
    echo.count(&inner.server_calls, Outcome::ApplicationError);
    echo.duration.observe(std::time::Duration::from_micros(70));
    table
        .method(&inner.server_calls, svc, None)
        .count(&inner.server_calls, Outcome::UnknownMethod);
    let text = m.encode();
    let at = |s: &str| sample(&text, s);
    assert_eq!(
        at(r#"rpc_server_requests_total{service="Echo",method="echo",outcome="ok"}"#),
        Some(3.0)
    );
    assert_eq!(
        at(
            r#"rpc_server_requests_total{service="Echo",method="echo",outcome="application_error"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        at(r#"rpc_server_requests_total{service="Echo",method="_other",outcome="unknown_method"}"#),
        Some(1.0)
    );
    // Outcomes that never happened make no series.
    assert!(!text.contains(r#"outcome="panic""#));
    assert_eq!(
        at(r#"rpc_server_duration_seconds_count{service="Echo",method="echo"}"#),
        Some(1.0)
    );
    // 70 µs falls in the 100 µs bucket, not the 50 µs one.
    let bucket = |le| {
        at(&format!(
            r#"rpc_server_duration_seconds_bucket{{le="{le}",service="Echo",method="echo"}}"#
        ))
    };
    assert_eq!(
        (bucket("0.00005"), bucket("0.0001")),
        (Some(0.0), Some(1.0))
    );
    assert!(
        text.contains(
            "# HELP rpc_server_requests RPC server calls by service, method and outcome."
        )
    );
    assert!(text.contains("# TYPE rpc_server_open_connections gauge"));
    assert!(text.ends_with("# EOF\n"));
}

#[test]
fn methods_beyond_the_cap_fold_into_other() {
    let m = Metrics::new();
    let inner = &m.inner;
    let table = &inner.client_methods;
    let a = table.service(&inner.client_calls, "A");
    let b = table.service(&inner.client_calls, "B");
    for i in 0..MAX_METHODS {
        let svc = if i % 2 == 0 { a } else { b };
        let name = format!("m{i}");
        let e = table.method(&inner.client_calls, svc, Some(&name));
        assert_eq!(&*e.labels.method, name);
    }
    assert_eq!(table.len(), MAX_METHODS);
    // Known ones are still found; new ones fold, per service.
    let known = table.method(&inner.client_calls, a, Some("m0"));
    assert_eq!(&*known.labels.method, "m0");
    for i in 0..10 {
        let e = table.method(&inner.client_calls, a, Some(&format!("new{i}")));
        assert_eq!(&*e.labels.method, OTHER);
        e.count(&inner.client_calls, Outcome::Ok);
    }
    let e = table.method(&inner.client_calls, b, Some("another"));
    assert_eq!((&*e.labels.service, &*e.labels.method), ("B", OTHER));
    assert_eq!(table.len(), MAX_METHODS + 2, "one _other per service");
    let text = m.encode();
    assert_eq!(
        sample(
            &text,
            r#"rpc_client_requests_total{service="A",method="_other",outcome="ok"}"#
        ),
        Some(10.0)
    );
}

#[test]
fn request_lines_are_parsed_strictly() {
    assert_eq!(parse(b"GET /metrics HTTP/1.1\r\nHost: x"), Asked::Metrics);
    assert_eq!(parse(b"GET /metrics?x=1 HTTP/1.0"), Asked::Metrics);
    assert_eq!(parse(b"GET / HTTP/1.1"), Asked::NotFound);
    assert_eq!(parse(b"GET /metrics/x HTTP/1.1"), Asked::NotFound);
    assert_eq!(parse(b"POST /metrics HTTP/1.1"), Asked::BadMethod);
    assert_eq!(parse(b"GET /metrics"), Asked::Bad);
    assert_eq!(parse(b"GET /metrics SPDY/3"), Asked::Bad);
    assert_eq!(parse(b"\xff\xfe /metrics HTTP/1.1"), Asked::Bad);
}

/// Sends `request` to `addr` and reads the whole response (the server closes).
async fn exchange(addr: std::net::SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    // The server may answer (and close) before all of an oversized request is sent.
    let _ = s.write_all(request).await;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn the_endpoint_serves_metrics_and_refuses_the_rest() {
    let m = Metrics::new();
    m.server_conns().accepted.inc_by(7);
    let server = m.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = server.local_addr();
    tokio::time::timeout(Duration::from_secs(10), async {
        let ok = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains(&format!("Content-Type: {CONTENT_TYPE}\r\n")));
        assert!(ok.contains("Connection: close\r\n"));
        let (head, body) = ok.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("Content-Length: {}\r\n", body.len())));
        assert_eq!(sample(body, "rpc_server_connections_total"), Some(7.0));

        let wrong = exchange(addr, b"GET /other HTTP/1.1\r\n\r\n").await;
        assert!(wrong.starts_with("HTTP/1.1 404 "), "{wrong}");
        let post = exchange(addr, b"POST /metrics HTTP/1.1\r\n\r\n").await;
        assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
        assert!(post.contains("Allow: GET\r\n"));

        // A head that never ends within the bound: refused, not buffered for ever.
        let mut big = b"GET /metrics HTTP/1.1\r\n".to_vec();
        while big.len() < 4 * MAX_HEAD {
            big.extend_from_slice(b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
        let large = exchange(addr, &big).await;
        assert!(large.starts_with("HTTP/1.1 431 "), "{large}");
        let garbage = exchange(addr, b"hello\r\n\r\n").await;
        assert!(garbage.starts_with("HTTP/1.1 400 "), "{garbage}");
    })
    .await
    .expect("the endpoint answers within 10 s");
    server.stop();
    // Stopped: no more connections are taken (the abort lands at the task's next
    // await, so wait for the refusal).
    tokio::time::timeout(Duration::from_secs(10), async {
        while TcpStream::connect(addr).await.is_ok() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the listener closes");
}

#[tokio::test]
async fn scrapes_over_the_limit_are_closed_and_logged() {
    let log = crate::test_support::captured_log();
    let m = Metrics::new();
    let server = m.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = server.local_addr();
    tokio::time::timeout(Duration::from_secs(10), async {
        // Scrapers that connect and send nothing hold every slot (for up to the
        // read timeout); the endpoint takes connections in order.
        let mut idle = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            idle.push(TcpStream::connect(addr).await.unwrap());
        }
        let mut extra = TcpStream::connect(addr).await.unwrap();
        let local = extra.local_addr().unwrap();
        let mut out = Vec::new();
        let _ = extra.read_to_end(&mut out).await;
        assert!(out.is_empty(), "closed without an answer, got {out:?}");
        let line = format!("peer={local} limit={MAX_CONNECTIONS}");
        let logged = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
        assert!(
            logged
                .lines()
                .any(|l| l.contains("WARN") && l.contains(&line)),
            "no warning for {local} in: {logged}"
        );
        // Once the idle scrapers leave, scrapes are answered again (the slots free
        // as the endpoint sees each close, so the first tries may still be refused).
        drop(idle);
        loop {
            let ok = exchange(addr, b"GET /metrics HTTP/1.1\r\n\r\n").await;
            if !ok.is_empty() {
                assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the endpoint answers within 10 s");
}

#[test]
fn breaker_states_are_read_at_each_scrape() {
    use std::sync::atomic::{AtomicU8, Ordering};
    struct Probe(std::sync::Weak<AtomicU8>);
    impl BreakerProbe for Probe {
        fn value(&self) -> Option<i64> {
            Some(i64::from(self.0.upgrade()?.load(Ordering::Relaxed)))
        }
    }
    let m = Metrics::new();
    let a = Arc::new(AtomicU8::new(0));
    let b = Arc::new(AtomicU8::new(0));
    m.watch_breaker("S", Box::new(Probe(Arc::downgrade(&a))));
    m.watch_breaker("S", Box::new(Probe(Arc::downgrade(&b))));
    let state = |m: &Metrics| sample(&m.encode(), r#"rpc_client_breaker_state{service="S"}"#);
    assert_eq!(state(&m), Some(0.0));
    b.store(2, Ordering::Relaxed);
    assert_eq!(state(&m), Some(2.0), "the worst of the service's breakers");
    drop(b);
    a.store(1, Ordering::Relaxed);
    assert_eq!(state(&m), Some(1.0), "a dropped breaker is forgotten");
    drop(a);
    assert_eq!(state(&m), None);

    // Instance breakers not closed: added over a service's clients.
    let (c, d) = (Arc::new(AtomicU8::new(2)), Arc::new(AtomicU8::new(3)));
    m.watch_instance_breakers("S", Box::new(Probe(Arc::downgrade(&c))));
    m.watch_instance_breakers("S", Box::new(Probe(Arc::downgrade(&d))));
    let open = |m: &Metrics| {
        sample(
            &m.encode(),
            r#"rpc_client_instance_breakers_not_closed{service="S"}"#,
        )
    };
    assert_eq!(open(&m), Some(5.0));
    drop(d);
    assert_eq!(open(&m), Some(2.0));
}

/// The layers against stand-ins, polled by hand: no network, no sleeps.
mod layers {
    use std::future::Future;
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::pin::pin;
    use std::time::Duration;

    use futures_util::FutureExt;
    use thrift_wire::{ApplicationException, ApplicationExceptionKind, Utf8Bytes};

    use super::{Metrics, sample};
    use crate::client::metered::MeteredClient;
    use crate::client::mock::{Mock, Outcome, Step, Wait, after, now, request};
    use crate::client::retry::{Backoff, RetryLayer, RetryPolicy};
    use crate::client::{BackupDelay, BackupLayer, BackupPolicy, ClientContext};
    use crate::clock::ManualClock;
    use crate::codec::{Framing, Protocol};
    use crate::context::ServerContext;
    use crate::server::metered::MeteredServer;
    use crate::server::{DispatchError, ServerRequest, deadline};
    use crate::service::{Layer, Service, service_fn};

    const MS: Duration = Duration::from_millis(1);

    fn server_cx(method: &'static str) -> ServerContext {
        let mut cx = ServerContext::new(Framing::TTHeader, Protocol::Binary);
        cx.rpc.callee.service = "S".into();
        cx.rpc.method = Utf8Bytes::from_static(method);
        cx
    }

    /// Fails or answers by method; `slow` never answers, `boom` panics.
    async fn handler(method: Utf8Bytes) -> Result<(), DispatchError> {
        let ex = |message: String| {
            Err(DispatchError::Application(ApplicationException::new(
                ApplicationExceptionKind::InternalError,
                message,
            )))
        };
        match method.as_str() {
            "ok" => Ok(()),
            "nope" => Err(DispatchError::UnknownMethod),
            "late" => Err(DispatchError::DeadlinePassed(
                deadline::GivenUp::DroppedUnfinished,
            )),
            "fail" => ex("failed".into()),
            // A refusal is a value: one a layer returns counts as its refusal, an
            // exception whose message only looks like one counts as what it is.
            "closing" => Err(DispatchError::Closing),
            "lookalike" => ex(format!("{}busy", crate::refusal::OVERLOAD_PREFIX)),
            "slow" => std::future::pending().await,
            _ => panic!("boom"),
        }
    }

    #[test]
    fn the_server_layer_counts_each_outcome_and_the_calls_in_flight() {
        let m = Metrics::new();
        let svc = MeteredServer::new(
            service_fn(|cx: &mut ServerContext, _req: ServerRequest| {
                handler(cx.rpc.method.clone())
            }),
            Some(m.clone()),
        );
        for method in ["ok", "ok", "nope", "late", "fail", "closing", "lookalike"] {
            let mut cx = server_cx(method);
            let done = svc.call(&mut cx, ServerRequest::default()).now_or_never();
            assert!(done.is_some(), "{method} answers at once");
        }
        // A panic unwinds through the layer's future.
        let mut cx = server_cx("boom");
        let panicked = catch_unwind(AssertUnwindSafe(|| {
            svc.call(&mut cx, ServerRequest::default()).now_or_never()
        }));
        assert!(panicked.is_err());
        // A call in flight, then dropped (its connection closed).
        let mut cx = server_cx("slow");
        {
            let mut call = pin!(svc.call(&mut cx, ServerRequest::default()));
            assert!(call.as_mut().now_or_never().is_none());
            let inflight = sample(&m.encode(), r#"rpc_server_inflight_requests{service="S"}"#);
            assert_eq!(inflight, Some(1.0));
        }
        let text = m.encode();
        let count = |method: &str, outcome: &str| {
            sample(
                &text,
                &format!(
                    r#"rpc_server_requests_total{{service="S",method="{method}",outcome="{outcome}"}}"#
                ),
            )
        };
        assert_eq!(count("ok", "ok"), Some(2.0));
        assert_eq!(count("_other", "unknown_method"), Some(1.0), "{text}");
        assert_eq!(count("late", "deadline_exceeded"), Some(1.0));
        assert_eq!(count("fail", "application_error"), Some(1.0));
        assert_eq!(count("closing", "closing"), Some(1.0), "{text}");
        assert_eq!(count("lookalike", "application_error"), Some(1.0), "{text}");
        assert_eq!(count("boom", "panic"), Some(1.0));
        assert_eq!(count("slow", "cancelled"), Some(1.0));
        assert!(
            !text.contains(r#"method="nope""#),
            "the unknown name is no label"
        );
        assert_eq!(
            sample(&text, r#"rpc_server_inflight_requests{service="S"}"#),
            Some(0.0)
        );
        // Without metrics the layer only passes calls on.
        let off = MeteredServer::new(
            service_fn(|_: &mut ServerContext, _: ServerRequest| async {
                Ok::<_, DispatchError>(())
            }),
            None,
        );
        let mut cx = server_cx("ok");
        assert!(
            off.call(&mut cx, ServerRequest::default())
                .now_or_never()
                .is_some()
        );
    }

    fn poll<F: Future>(f: std::pin::Pin<&mut F>) -> Option<F::Output> {
        f.now_or_never()
    }

    #[test]
    fn the_client_layer_counts_the_retries_and_backups_of_a_call() {
        let m = Metrics::new();
        let clock = ManualClock::new();
        let forever = Step {
            wait: Wait::Forever,
            outcome: Outcome::Ok,
        };
        // Refused, retried; the retry is slow, so a backup goes out at 20 ms and wins.
        let script = vec![now(Outcome::Connect), forever, after(10 * MS, Outcome::Ok)];
        let mock = Mock::new(&clock, script, now(Outcome::Ok));
        let backup = BackupPolicy::new(BackupDelay::Fixed(20 * MS)).idempotent(["echo"]);
        let backed = BackupLayer::new(backup)
            .with_clock(clock.clone())
            .layer(mock.clone());
        let policy = RetryPolicy::new().backoff(Backoff::None).jitter_seed(1);
        let retried = RetryLayer::new(policy)
            .with_clock(clock.clone())
            .layer(backed);
        let svc = MeteredClient::new(retried, Some(m.clone()));
        let mut cx = ClientContext::new();
        cx.rpc.callee.service = "S".into();
        cx.rpc.method = Utf8Bytes::from_static("echo");
        {
            let mut call = pin!(svc.call(&mut cx, request("echo")));
            assert!(poll(call.as_mut()).is_none());
            clock.advance(20 * MS);
            assert!(poll(call.as_mut()).is_none());
            clock.advance(10 * MS);
            assert!(poll(call.as_mut()).expect("the backup answered").is_ok());
        }
        assert_eq!(mock.attempts(), 3);
        // A call dropped by its caller.
        let mut cx2 = cx.clone();
        {
            mock.push(Step {
                wait: Wait::Forever,
                outcome: Outcome::Ok,
            });
            let mut call = pin!(svc.call(&mut cx2, request("echo")));
            assert!(poll(call.as_mut()).is_none());
        }
        let text = m.encode();
        let at = |s: &str| sample(&text, s);
        assert_eq!(
            at(r#"rpc_client_requests_total{service="S",method="echo",outcome="ok"}"#),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            at(r#"rpc_client_requests_total{service="S",method="echo",outcome="cancelled"}"#),
            Some(1.0)
        );
        assert_eq!(
            at(r#"rpc_client_retries_total{service="S",method="echo"}"#),
            Some(1.0)
        );
        assert_eq!(
            at(r#"rpc_client_backup_requests_total{service="S",method="echo"}"#),
            Some(1.0)
        );
        assert_eq!(
            at(r#"rpc_client_inflight_requests{service="S"}"#),
            Some(0.0)
        );
        assert_eq!(
            at(r#"rpc_client_duration_seconds_count{service="S",method="echo"}"#),
            Some(2.0)
        );
    }
}
