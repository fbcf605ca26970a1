//! The streaming service of idl/stream.thrift through the generated code: its
//! dispatcher served beside the ping-pong one on one port, and its typed client, for
//! server, client and bidirectional streams, metadata, errors and deadlines.

use std::time::Duration;

mod support;

use examples::stream::{
    Request, Response, StreamServiceClient, StreamServiceServer, StreamServiceStreamClient,
    StreamServiceStreamServer,
};
use examples::stream_service::{ECHO_KEY, Streams};
use futures_util::StreamExt;
use thrift_wire::{ApplicationExceptionKind, Utf8Bytes};
use volo_core::client::{ClientConfig, ClientContext};
use volo_core::context::Address;
use volo_core::server::Server;
use volo_core::stream::{Metadata, StreamError};

const STREAM_SERVER: &str = env!("CARGO_BIN_EXE_stream-server");

fn request(action: &str, msg: &str, count: i32) -> Request {
    Request {
        action: Utf8Bytes::from(action.to_owned()),
        msg: Utf8Bytes::from(msg.to_owned()),
        count,
    }
}

/// Runs `f` against a server of [`Streams`] on loopback, bounded in time.
fn with_server<F, Fut>(f: F)
where
    F: FnOnce(Address) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let (addr, stop) = start().await;
        tokio::time::timeout(Duration::from_secs(60), f(addr))
            .await
            .expect("the test ran out of time");
        stop.await;
    });
}

/// A server of [`Streams`] on loopback: its address, and what stops it (gracefully,
/// within 20 s).
async fn start() -> (Address, impl std::future::Future<Output = ()>) {
    let bound = Server::new(StreamServiceServer::new(Streams))
        .streams(StreamServiceStreamServer::new(Streams))
        .bind(&"127.0.0.1:0".parse().expect("an address"))
        .await
        .expect("bind");
    let addr = bound.local_addr().clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(bound.serve_with_shutdown(async {
        let _ = stopped.await;
    }));
    let stop = async move {
        let _ = stop.send(());
        tokio::time::timeout(Duration::from_secs(20), serving)
            .await
            .expect("the server stopped")
            .expect("the server task")
            .expect("the server");
    };
    (addr, stop)
}

fn client(addr: &Address) -> StreamServiceStreamClient {
    StreamServiceStreamClient::connect(addr.clone(), &ClientConfig::default()).expect("a client")
}

#[test]
fn a_server_stream_answers_count_times_with_its_header() {
    with_server(|addr| async move {
        let c = client(&addr);
        let mut h = Metadata::new();
        h.insert(ECHO_KEY, "hello");
        let mut rx = c
            .server_echo_with(&h, &request("push", "m", 5))
            .await
            .expect("open");
        let got: Vec<Response> = rx.by_ref().map(|r| r.expect("a response")).collect().await;
        assert_eq!(got.len(), 5);
        assert!(
            got.iter()
                .all(|r| r.action.as_str() == "push" && r.msg.as_str() == "m")
        );
        assert_eq!(
            rx.header().await.expect("a header").get(ECHO_KEY),
            Some("hello")
        );
    });
}

#[test]
fn a_client_stream_is_answered_once_with_the_count() {
    with_server(|addr| async move {
        let c = client(&addr);
        let mut s = c.client_count().await.expect("open");
        for i in 0..7 {
            s.send(&request("up", &i.to_string(), 0))
                .await
                .expect("send");
        }
        s.close_send().await.expect("close");
        let r = s.recv().await.expect("recv").expect("the answer");
        assert_eq!((r.action.as_str(), r.msg.as_str()), ("received", "7"));
        assert_eq!(s.recv().await.expect("the end"), None);
    });
}

#[test]
fn a_bidirectional_stream_echoes_in_order_and_fails_on_request() {
    with_server(|addr| async move {
        let c = client(&addr);
        let (mut tx, mut rx) = c.bidi_echo().await.expect("open").split();
        let body = "k".repeat(1024);
        let sending = tokio::spawn(async move {
            for i in 0..100 {
                tx.send(&request(&i.to_string(), &body, 0))
                    .await
                    .expect("send");
            }
            tx.send(&request("fail", "on purpose", 0))
                .await
                .expect("send");
            tx
        });
        for i in 0..100 {
            let r = rx.recv().await.expect("recv").expect("a response");
            assert_eq!(r.action.as_str(), i.to_string());
            assert_eq!(r.msg.len(), 1024);
        }
        match rx.recv().await {
            Err(StreamError::Application(e)) => {
                assert_eq!(e.kind, ApplicationExceptionKind::InternalError);
                assert_eq!(e.message.as_str(), "on purpose");
            }
            other => panic!("{other:?}"),
        }
        drop(sending.await.expect("the sender"));
    });
}

#[test]
fn a_slow_server_stream_past_its_deadline_fails_with_it() {
    with_server(|addr| async move {
        let inner = volo_core::client::StreamClient::new(
            "StreamService",
            addr.clone(),
            &ClientConfig::default(),
        )
        .expect("a client")
        .with_timeout(Duration::from_millis(250));
        let c = StreamServiceStreamClient::new(inner);
        let mut rx = c.server_echo(&request("slow", "z", 5)).await.expect("open");
        let mut got = 0;
        let end = loop {
            match rx.recv().await {
                Ok(Some(_)) => got += 1,
                other => break other,
            }
        };
        assert_eq!(end, Err(StreamError::DeadlineExceeded));
        assert!(got < 5, "{got} answers came before the deadline");
    });
}

/// A stream of a method the generated server does not serve, or one that names
/// another service, is reset at once: the client fails with
/// [`StreamError::UnknownMethod`] naming the method, with no deadline of its own to
/// wait for.
#[test]
fn an_unknown_method_or_service_fails_at_once_naming_the_method() {
    with_server(|addr| async move {
        let c = client(&addr);
        let mut s = c
            .client()
            .open::<Request, Response>("nope", &Metadata::new())
            .await
            .expect("open");
        match s.recv().await {
            Err(e @ StreamError::UnknownMethod(_)) => {
                assert!(e.to_string().contains("nope"), "{e}")
            }
            other => panic!("{other:?}"),
        }
        let inner = volo_core::client::StreamClient::new("Nope", addr, &ClientConfig::default())
            .expect("a client");
        let c = StreamServiceStreamClient::new(inner);
        let mut s = c.bidi_echo().await.expect("open");
        let e = s.recv().await.expect_err("no stream");
        assert!(matches!(e, StreamError::UnknownMethod(_)), "{e:?}");
        let said = e.to_string();
        assert!(
            said.contains("Nope") && said.contains("bidi_echo"),
            "{said}"
        );
        // A server stream's request goes before the answer can come, or fails on it.
        let e = match c.server_echo(&request("push", "m", 1)).await {
            Ok(mut rx) => rx.recv().await.expect_err("no stream"),
            Err(e) => e,
        };
        assert!(matches!(e, StreamError::UnknownMethod(_)), "{e:?}");
    });
}

#[test]
fn ping_pong_calls_share_the_port() {
    with_server(|addr| async move {
        let c = StreamServiceClient::builder()
            .address(addr.clone())
            .build()
            .expect("a client");
        let r = c
            .echo_with(&mut ClientContext::new(), request("ping", "pong", 0))
            .await
            .expect("a reply");
        assert_eq!(r.msg.as_str(), "pong");
        let s = client(&addr);
        let mut b = s.bidi_echo().await.expect("open");
        b.send(&request("a", "b", 0)).await.expect("send");
        assert_eq!(
            b.recv().await.expect("recv").expect("one").msg.as_str(),
            "b"
        );
    });
}

/// One generated client for calls and streams: built by the builder, its streaming
/// methods open through the stack (here over two instances, round robin), with the
/// header's metadata and each mode's shape.
#[test]
fn the_generated_client_opens_streams_through_its_stack() {
    with_server(|a| async move {
        let (b, stop_b) = start().await;
        {
            let c = StreamServiceClient::builder()
                .addresses([a.clone(), b.clone()])
                .load_balance(volo_core::client::RoundRobin::default())
                .build()
                .expect("a client");
            let mut instances = Vec::new();
            for _ in 0..4 {
                let mut cx = ClientContext::new();
                let mut h = Metadata::new();
                h.insert(ECHO_KEY, "via the stack");
                let mut rx = c
                    .server_echo_with(&mut cx, h, &request("push", "m", 3))
                    .await
                    .expect("open");
                let mut n = 0;
                while let Some(r) = rx.recv().await.expect("a response") {
                    assert_eq!(r.msg.as_str(), "m");
                    n += 1;
                }
                assert_eq!(n, 3);
                let header = rx.header().await.expect("the header");
                assert_eq!(header.get(ECHO_KEY), Some("via the stack"));
                instances.push(cx.rpc.callee.address.clone().expect("picked"));
            }
            // Round robin, from wherever it starts: the two instances in turn.
            let first = if instances[0] == a { &a } else { &b };
            let other = if first == &a { &b } else { &a };
            assert_eq!(instances, [first, other, first, other].map(Clone::clone));

            let mut count = c.client_count().await.expect("open");
            for i in 0..7 {
                count
                    .send(&request("x", &i.to_string(), 0))
                    .await
                    .expect("send");
            }
            count.close_send().await.expect("close");
            let answer = count.recv().await.expect("recv").expect("the answer");
            assert_eq!(
                (answer.action.as_str(), answer.msg.as_str()),
                ("received", "7")
            );

            let mut bidi = c.bidi_echo().await.expect("open");
            bidi.send(&request("a", "b", 0)).await.expect("send");
            let echoed = bidi.recv().await.expect("recv").expect("one");
            assert_eq!(echoed.msg.as_str(), "b");
            let r = c
                .echo_with(&mut ClientContext::new(), request("ping", "pong", 0))
                .await
                .expect("a call on the same client");
            assert_eq!(r.msg.as_str(), "pong");
        }
        stop_b.await;
    });
}

/// The interop checker against the streaming server, as programs: every check
/// passes, on both kinds of sockets, and the server stops gracefully on SIGTERM.
#[test]
fn stream_check_passes_against_stream_server() {
    let (mut server, port) = support::listening("stream-server", STREAM_SERVER, 0, &[]);
    let addr = format!("127.0.0.1:{port}");
    for io in ["netpoll", "tokio"] {
        let (status, lines, stderr) = stream_check(&["--addr", &addr, "--io", io]);
        assert!(status.success(), "{io}: {lines:?}\n{stderr}");
        assert_eq!(lines.len(), 12, "{lines:?}");
        assert!(lines.iter().all(|l| l.starts_with("PASS ")), "{lines:?}");
    }
    server.signal(nix::sys::signal::Signal::SIGTERM);
    let status = server
        .wait(Duration::from_secs(20))
        .expect("stream-server stops");
    assert!(status.success(), "{}", server.stderr());
}

/// `stream-check` run to its end with `args`: its status and stdout lines.
fn stream_check(args: &[&str]) -> (std::process::ExitStatus, Vec<String>, String) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let mut check = support::Proc::spawn("stream-check", env!("CARGO_BIN_EXE_stream-check"), &args);
    let status = check
        .wait(Duration::from_secs(60))
        .expect("stream-check ends");
    let mut lines = Vec::new();
    while let Some(l) = check.line(Duration::from_millis(100)) {
        lines.push(l);
    }
    (status, lines, check.stderr())
}

/// `--deadline-ms` is the deadline check's: at 2 s, past the slow stream's 500 ms,
/// that check alone fails (the stream ends before its deadline), and the run exits 1.
#[test]
fn stream_check_takes_its_deadline_from_the_flag() {
    let (_server, port) = support::listening("stream-server", STREAM_SERVER, 0, &[]);
    let addr = format!("127.0.0.1:{port}");
    let (status, lines, stderr) = stream_check(&["--addr", &addr, "--deadline-ms", "2000"]);
    assert_eq!(status.code(), Some(1), "{lines:?}\n{stderr}");
    let failed: Vec<&String> = lines.iter().filter(|l| !l.starts_with("PASS ")).collect();
    assert_eq!(failed.len(), 1, "{lines:?}");
    assert!(failed[0].starts_with("FAIL deadline: "), "{lines:?}");
}

/// `stream-check --load` over a static list of two servers: one stdout line whose
/// figures add up (every stream opened echoed its 32 messages, none failed), and
/// both instances got streams.
#[test]
fn stream_check_load_keeps_streams_going_over_a_static_list() {
    let (_a, pa) = support::listening("A", STREAM_SERVER, 0, &[]);
    let (_b, pb) = support::listening("B", STREAM_SERVER, 0, &[]);
    let list = format!("127.0.0.1:{pa},127.0.0.1:{pb}");
    let (status, lines, stderr) =
        stream_check(&["--addr", &list, "--load", "8", "--duration", "1"]);
    assert!(status.success(), "{lines:?}\n{stderr}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    let f = support::fields(&lines[0]);
    let n = |k| support::num(&f, k, &lines[0]);
    assert!(
        lines[0].starts_with("streams ") && n("opened") > 0,
        "{lines:?}"
    );
    assert_eq!(
        (n("open_failures"), n("broken"), n("errors"), n("msgs")),
        (0, 0, 0, 32 * n("opened")),
        "{lines:?}"
    );
    for port in [pa, pb] {
        let line = stderr
            .lines()
            .find(|l| l.starts_with(&format!("stream-check: instance=127.0.0.1:{port} ")))
            .unwrap_or_else(|| panic!("no line for {port}: {stderr}"));
        let f = support::fields(line);
        assert!(support::num(&f, "opened", line) > 0, "{line}");
    }
}
