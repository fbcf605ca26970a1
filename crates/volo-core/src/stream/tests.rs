//! Streams end to end: a [`Server`] with a [`StreamHandler`] beside its ping-pong
//! service, and a [`StreamClient`], on loopback, on each transport.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use thrift_wire::{ApplicationExceptionKind, Utf8Bytes};
use tokio::sync::Notify;

use super::*;
use crate::client::ClientConfig;
use crate::client::StreamClient;
use crate::clock::ManualClock;
use crate::context::Address;
use crate::server::{Server, ServerConfig};
use crate::server::{ServerStream, StreamHandler};
use crate::test_support::{Running, TestService, Text, run_bounded, text};
use crate::transport::TransportKind;

/// Streams of `Text`, a method per behaviour:
/// - `echo` (bidirectional): answers each message with its text; a message `fail`
///   ends the stream with an exception, `biz` with business status 7;
/// - `count` (client stream): answers once, at the client's end, with the count;
/// - `push` (server stream): the first message's text is a count N: answers N
///   messages `0`..`N-1`, with a trailer `pushed: N`;
/// - `hold` (bidirectional): reads nothing until told ([`Held::release`]), then
///   counts every message and answers the count;
/// - `flood` (server stream): sends until the stream fails, counting what it sent.
///
/// Every stream's header carries back the client's `x-echo`.
#[derive(Clone, Default)]
struct Handler {
    held: Arc<Held>,
}

#[derive(Default)]
struct Held {
    release: Notify,
    /// Most bytes of cost the `hold` stream's queue held while held.
    queued_max: AtomicU64,
    /// Messages the `flood` stream sent, and how it ended.
    flooded: AtomicUsize,
    flood_ended: std::sync::Mutex<Option<StreamError>>,
    /// Streams the handler was called for.
    served: AtomicUsize,
    /// Streams whose handler saw a cancel, a passed deadline, another error.
    cancelled: AtomicUsize,
    deadlines: AtomicUsize,
    other_errors: AtomicUsize,
}

impl StreamHandler for Handler {
    async fn serve(&self, stream: ServerStream) -> Result<(), HandlerError> {
        self.held.served.fetch_add(1, Ordering::SeqCst);
        let method = stream.method().to_owned();
        let echo = stream.header().get("x-echo").map(str::to_owned);
        let (mut rx, mut tx) = stream.halves::<Text, Text>();
        if let Some(v) = echo {
            let mut h = Metadata::new();
            h.insert("x-echo", v);
            tx.set_header(h);
        }
        match method.as_str() {
            "echo" => loop {
                let m = match rx.recv().await {
                    Ok(Some(m)) => m,
                    Ok(None) => return Ok(()),
                    Err(e) => {
                        match e {
                            StreamError::Cancelled(_) => &self.held.cancelled,
                            StreamError::DeadlineExceeded => &self.held.deadlines,
                            _ => &self.held.other_errors,
                        }
                        .fetch_add(1, Ordering::SeqCst);
                        return Err(e.into());
                    }
                };
                match m.text.as_deref() {
                    Some("fail") => return Err(HandlerError::internal("failed on purpose")),
                    Some("biz") => {
                        return Err(HandlerError::Biz(BizStatus {
                            code: 7,
                            message: "biz on purpose".into(),
                            extra: None,
                        }));
                    }
                    _ => tx.send(&m).await?,
                }
            },
            "count" => {
                let mut n = 0;
                while rx.recv().await?.is_some() {
                    n += 1;
                }
                tx.send(&text(0, &n.to_string())).await?;
                Ok(())
            }
            "push" => {
                let first = rx.recv().await?.unwrap_or_default();
                let n: usize = first.text.as_deref().unwrap_or("0").parse().unwrap_or(0);
                for i in 0..n {
                    tx.send(&text(0, &i.to_string())).await?;
                }
                let mut t = Metadata::new();
                t.insert("pushed", n.to_string());
                tx.set_trailer(t);
                Ok(())
            }
            "hold" => {
                let released = self.held.release.notified();
                tokio::pin!(released);
                released.as_mut().enable();
                // Watch the queue while the client keeps sending.
                {
                    let cancelled = tx.cancelled();
                    tokio::pin!(cancelled);
                    loop {
                        let q = rx.queued();
                        self.held.queued_max.fetch_max(q, Ordering::SeqCst);
                        tokio::select! {
                            () = &mut released => break,
                            e = &mut cancelled => return Err(e.into()),
                            () = tokio::task::yield_now() => {}
                        }
                    }
                }
                let mut n = 0;
                while rx.recv().await?.is_some() {
                    n += 1;
                }
                tx.send(&text(0, &n.to_string())).await?;
                Ok(())
            }
            "flood" => {
                let body = "x".repeat(1000);
                let m = text(0, &body);
                let ended = loop {
                    if let Err(e) = tx.send(&m).await {
                        break e;
                    }
                    self.held.flooded.fetch_add(1, Ordering::SeqCst);
                };
                *self.held.flood_ended.lock().unwrap() = Some(ended);
                Ok(())
            }
            other => Err(HandlerError::unknown_method(other)),
        }
    }
}

/// A server with `handler` for streams on `at`, ping-pong calls served by
/// [`TestService`].
async fn start(
    config: ServerConfig,
    handler: Handler,
    at: &Address,
    streams: StreamConfig,
) -> Running {
    crate::test_support::start_with(config, at, move |s: Server<TestService>| {
        s.streams(handler).stream_config(streams)
    })
    .await
}

/// A server with the test handler for streams on `at` (for other modules' tests).
pub(crate) async fn start_streaming(config: ServerConfig, at: &Address) -> Running {
    start(config, Handler::default(), at, StreamConfig::default()).await
}

/// Opens an `echo` stream on `c`, sends `n` messages of `size` bytes and checks each
/// answer, then the metadata and the clean end.
pub(crate) async fn bidi_round_trip(c: &StreamClient, n: usize, size: usize) {
    let mut h = Metadata::new();
    h.insert("x-echo", "round trip");
    let mut s = c.open::<Text, Text>("echo", &h).await.expect("open");
    for i in 0..n {
        let body = format!("{i}:{}", "r".repeat(size));
        s.send(&text(1, &body)).await.expect("send");
        let got = s.recv().await.expect("recv").expect("a message");
        assert_eq!(got.text.as_deref(), Some(body.as_str()));
    }
    assert_eq!(
        s.header().await.expect("a header").get("x-echo"),
        Some("round trip")
    );
    s.close_send().await.expect("close");
    assert_eq!(s.recv().await.expect("the end"), None);
}

/// An `echo`-typed stream of `method` on `c`, with no metadata.
async fn open(c: &StreamClient, method: &str) -> crate::client::ClientStream<Text, Text> {
    c.open::<Text, Text>(method, &Metadata::new())
        .await
        .expect("open")
}

fn client(running: &Running, kind: TransportKind) -> StreamClient {
    let mut config = ClientConfig::default();
    config.transport.kind = kind;
    StreamClient::new("Test", running.address.clone(), &config).expect("a client")
}

fn small() -> StreamConfig {
    StreamConfig {
        window: flow::INITIAL_CREDIT,
        ..StreamConfig::default()
    }
}

fn server_config(kind: TransportKind) -> ServerConfig {
    let mut config = ServerConfig::default();
    config.transport.kind = kind;
    config
}

/// Runs `f` against a fresh server on each transport kind, TCP.
fn each_transport<F, Fut>(f: F)
where
    F: Fn(Running, StreamClient, Handler) -> Fut,
    Fut: std::future::Future<Output = Running>,
{
    for kind in [TransportKind::Netpoll, TransportKind::Tokio] {
        run_bounded(Duration::from_secs(60), async {
            let handler = Handler::default();
            let at: Address = "127.0.0.1:0".parse().unwrap();
            let running = start(server_config(kind), handler.clone(), &at, small()).await;
            let c = client(&running, kind).with_config(small());
            let running = f(running, c, handler).await;
            running.stop().await;
        });
    }
}

#[test]
fn a_bidirectional_stream_echoes_in_order_with_metadata_both_ways() {
    each_transport(|running, c, _| async move {
        let mut h = Metadata::new();
        h.insert("x-echo", "hello");
        let mut s = c.open::<Text, Text>("echo", &h).await.expect("open");
        for i in 0..100 {
            s.send(&text(1, &format!("m{i}"))).await.expect("send");
            let got = s.recv().await.expect("recv").expect("a message");
            assert_eq!(got.text.as_deref(), Some(format!("m{i}").as_str()));
        }
        assert_eq!(
            s.header().await.expect("a header").get("x-echo"),
            Some("hello")
        );
        s.close_send().await.expect("close");
        assert_eq!(s.recv().await.expect("the end"), None);
        assert!(s.trailer().is_some());
        running
    });
}

#[test]
fn a_server_stream_pushes_every_message_then_its_trailer() {
    each_transport(|running, c, _| async move {
        let mut s = open(&c, "push").await;
        s.send(&text(1, "500")).await.expect("send");
        s.close_send().await.expect("close");
        let got: Vec<_> = s.receiver().map(|m| m.expect("a message")).collect().await;
        assert_eq!(got.len(), 500);
        for (i, m) in got.iter().enumerate() {
            assert_eq!(m.text.as_deref(), Some(i.to_string().as_str()));
        }
        assert_eq!(s.trailer().expect("a trailer").get("pushed"), Some("500"));
        running
    });
}

#[test]
fn a_client_stream_gets_one_answer_after_it_ends() {
    each_transport(|running, c, _| async move {
        let mut s = open(&c, "count").await;
        for i in 0..300 {
            s.send(&text(1, &"y".repeat(i))).await.expect("send");
        }
        s.close_send().await.expect("close");
        let got = s.recv().await.expect("recv").expect("the answer");
        assert_eq!(got.text.as_deref(), Some("300"));
        assert_eq!(s.recv().await.expect("the end"), None);
        running
    });
}

#[test]
fn a_failed_handler_ends_its_stream_with_the_error_in_the_trailer() {
    each_transport(|running, c, _| async move {
        let mut s = open(&c, "echo").await;
        s.send(&text(1, "fail")).await.expect("send");
        match s.recv().await {
            Err(StreamError::Application(e)) => {
                assert_eq!(e.kind, ApplicationExceptionKind::InternalError);
                assert_eq!(e.message.as_str(), "failed on purpose");
            }
            other => panic!("{other:?}"),
        }
        let mut s = open(&c, "echo").await;
        s.send(&text(1, "biz")).await.expect("send");
        match s.recv().await {
            Err(StreamError::Biz(b)) => {
                assert_eq!((b.code, b.message.as_str()), (7, "biz on purpose"))
            }
            other => panic!("{other:?}"),
        }
        // A handler that does not say what it serves answers an unknown method in
        // its trailer; the client reads it as such all the same.
        let mut s = open(&c, "nope").await;
        match s.recv().await {
            Err(StreamError::UnknownMethod(m)) => assert!(m.contains("nope"), "{m}"),
            other => panic!("{other:?}"),
        }
        running
    });
}

#[test]
fn a_dropped_client_stream_cancels_the_handler() {
    each_transport(|running, c, handler| async move {
        let mut s = open(&c, "echo").await;
        s.send(&text(1, "a")).await.expect("send");
        s.recv().await.expect("recv").expect("a message");
        drop(s);
        // The handler sees the rst; the connection goes on serving.
        let mut other = open(&c, "echo").await;
        while handler.held.cancelled.load(Ordering::SeqCst) == 0 {
            other.send(&text(1, "b")).await.expect("send");
            other.recv().await.expect("recv").expect("a message");
        }
        running
    });
}

#[test]
fn a_stream_past_its_deadline_fails_on_both_sides() {
    each_transport(|running, c, handler| async move {
        let clock = ManualClock::new();
        let c = c.with_clock(clock.clone());
        let mut s = c
            .open_with_timeout::<Text, Text>("echo", &Metadata::new(), Some(Duration::from_secs(5)))
            .await
            .expect("open");
        // Nothing was sent: the server has nothing to answer before the deadline.
        clock.advance(Duration::from_secs(5));
        assert_eq!(s.recv().await, Err(StreamError::DeadlineExceeded));
        assert_eq!(
            s.send(&text(1, "late")).await,
            Err(StreamError::DeadlineExceeded)
        );
        // The handler sees the deadline's rst as a deadline; the connection lives on.
        let mut other = open(&c, "echo").await;
        while handler.held.deadlines.load(Ordering::SeqCst) == 0 {
            other.send(&text(1, "b")).await.expect("send");
            other.recv().await.expect("recv").expect("a message");
        }
        running
    });
}

#[test]
fn a_held_receiver_bounds_its_queue_while_other_streams_move() {
    each_transport(|running, c, handler| async move {
        let mut held = open(&c, "hold").await;
        let (mut tx, mut rx) = {
            let s = open(&c, "echo").await;
            s.split()
        };
        let sent = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&sent);
        let message = text(1, &"z".repeat(1000));
        let sending = tokio::spawn(async move {
            for _ in 0..2000 {
                held.send(&message).await.expect("send");
                counter.fetch_add(1, Ordering::SeqCst);
            }
            held.close_send().await.expect("close");
            held
        });
        // The other stream on the connection keeps moving meanwhile.
        for i in 0..200 {
            tx.send(&text(1, &i.to_string())).await.expect("send");
            let got = rx.recv().await.expect("recv").expect("a message");
            assert_eq!(got.text.as_deref(), Some(i.to_string().as_str()));
        }
        // 2 MB offered against a 64 KiB window: the sender waits.
        let window = small().window;
        let cost = 1000 + 16 + flow::MESSAGE_COST;
        let max_sent = (window / cost + 2) as usize;
        assert!(
            sent.load(Ordering::SeqCst) <= max_sent,
            "{} sent",
            sent.load(Ordering::SeqCst)
        );
        assert!(handler.held.queued_max.load(Ordering::SeqCst) <= window + cost);
        handler.held.release.notify_one();
        let mut held = sending.await.expect("the sender");
        let got = held.recv().await.expect("recv").expect("the count");
        assert_eq!(got.text.as_deref(), Some("2000"));
        assert!(handler.held.queued_max.load(Ordering::SeqCst) <= window + cost);
        running
    });
}

#[test]
fn a_client_that_stops_reading_holds_a_flooding_server_to_its_window() {
    each_transport(|running, c, handler| async move {
        let mut flood = open(&c, "flood").await;
        flood.close_send().await.expect("close");
        let mut other = open(&c, "echo").await;
        for i in 0..200 {
            other.send(&text(1, &i.to_string())).await.expect("send");
            other.recv().await.expect("recv").expect("a message");
        }
        let window = small().window;
        let cost = 1000 + 16 + flow::MESSAGE_COST;
        assert!(flood.receiver().queued() <= window + cost);
        assert!(handler.held.flooded.load(Ordering::SeqCst) <= (window / cost + 2) as usize);
        // Dropped unread: the server's sender fails with the cancel.
        drop(flood);
        while handler.held.flood_ended.lock().unwrap().is_none() {
            other.send(&text(1, "b")).await.expect("send");
            other.recv().await.expect("recv").expect("a message");
        }
        assert!(matches!(
            *handler.held.flood_ended.lock().unwrap(),
            Some(StreamError::Cancelled(_))
        ));
        running
    });
}

#[test]
fn ping_pong_calls_still_work_on_a_server_that_serves_streams() {
    run_bounded(Duration::from_secs(30), async {
        let at: Address = "127.0.0.1:0".parse().unwrap();
        let running = start(
            server_config(TransportKind::Netpoll),
            Handler::default(),
            &at,
            small(),
        )
        .await;
        let addr = running.addr;
        let reply =
            tokio::task::spawn_blocking(move || crate::test_support::call_echo(addr, "ping"))
                .await
                .expect("the caller");
        assert_eq!(reply, "ping");
        let c = client(&running, TransportKind::Netpoll);
        let mut s = open(&c, "echo").await;
        s.send(&text(1, "pong")).await.expect("send");
        assert_eq!(
            s.recv().await.expect("recv").and_then(|m| m.text),
            Some(Utf8Bytes::from_static("pong"))
        );
        s.close_send().await.expect("close");
        assert_eq!(s.recv().await.expect("the end"), None);
        running.stop().await;
    });
}

/// A peer that writes frames by hand on a plain socket and reads what comes back.
struct RawPeer {
    socket: std::net::TcpStream,
}

impl RawPeer {
    fn connect(addr: std::net::SocketAddr) -> RawPeer {
        let socket = std::net::TcpStream::connect(addr).expect("connect");
        socket
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("a timeout");
        RawPeer { socket }
    }

    fn send(&mut self, frame: &Frame) {
        use std::io::Write;
        let mut out = Vec::new();
        frame.encode(&mut out).expect("encodes");
        self.socket.write_all(&out).expect("write");
    }

    fn send_bytes(&mut self, bytes: &[u8]) {
        use std::io::Write;
        self.socket.write_all(bytes).expect("write");
    }

    /// The next frame, `None` once the server closed the connection.
    fn recv(&mut self) -> Option<Frame> {
        use std::io::Read;
        let mut len = [0u8; 4];
        match self.socket.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return None,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
            Err(e) => panic!("no frame and no close: {e}"),
        }
        let mut rest = vec![0u8; u32::from_be_bytes(len) as usize];
        self.socket
            .read_exact(&mut rest)
            .expect("the rest of a frame");
        let mut whole = len.to_vec();
        whole.extend_from_slice(&rest);
        Some(Frame::decode(&bytes::Bytes::from(whole), &FrameLimits::default()).expect("a frame"))
    }

    /// The next data frame for stream `id`, after the server's header if it comes.
    fn recv_data(&mut self, id: i32) -> Frame {
        let got = self.recv_for(id);
        match got.kind {
            FrameKind::Header => self.recv_for(id),
            _ => got,
        }
    }

    /// The next frame for stream `id` that is not a meta frame.
    fn recv_for(&mut self, id: i32) -> Frame {
        loop {
            let f = self.recv().expect("a frame");
            if f.stream_id == id && f.kind != FrameKind::Meta {
                return f;
            }
        }
    }
}

fn header(id: i32, method: &str) -> Frame {
    Frame::new(FrameKind::Header, id).with_method(method.to_owned())
}

fn data(id: i32, method: &str, t: &str) -> Frame {
    let mut buf = thrift_wire::LinkBuffer::new();
    let n = thrift_wire::Codec::<thrift_wire::Binary>::new()
        .encode(&text(1, t), &mut buf)
        .expect("encodes");
    Frame::new(FrameKind::Data, id)
        .with_method(method.to_owned())
        .with_payload(buf.next(n))
}

fn payload_text(f: &Frame) -> String {
    let m: Text = thrift_wire::Codec::<thrift_wire::Binary>::new()
        .decode(f.payload.clone())
        .expect("a Text");
    m.text.unwrap_or_default().to_string()
}

/// Runs `f` with a raw peer's view of a server (netpoll-rs, window as [`small`],
/// `max_streams` as given).
fn with_raw_server(max_streams: usize, f: impl FnOnce(std::net::SocketAddr) + Send + 'static) {
    with_raw_server_and(max_streams, |addr, _| f(addr));
}

/// [`with_raw_server`], `f` also given the handler's state.
fn with_raw_server_and(
    max_streams: usize,
    f: impl FnOnce(std::net::SocketAddr, Handler) + Send + 'static,
) {
    run_bounded(Duration::from_secs(60), async move {
        let at: Address = "127.0.0.1:0".parse().unwrap();
        let streams = StreamConfig {
            max_streams,
            ..small()
        };
        let handler = Handler::default();
        let running = start(
            server_config(TransportKind::Netpoll),
            handler.clone(),
            &at,
            streams,
        )
        .await;
        let addr = running.addr;
        tokio::task::spawn_blocking(move || f(addr, handler))
            .await
            .expect("the peer");
        running.stop().await;
    });
}

/// Kitex's side of a stream, by hand: no window, so the server's queue is bounded by
/// holding the reader; the echo comes back with a header first.
#[test]
fn a_peer_without_a_window_is_served_as_kitex_is() {
    with_raw_server(16, |addr| {
        let mut p = RawPeer::connect(addr);
        p.send(&header(1, "echo"));
        p.send(&data(1, "echo", "one"));
        let h = p.recv_for(1);
        assert_eq!(h.kind, FrameKind::Header);
        assert_eq!(
            h.meta_value(flow::WINDOW_KEY),
            None,
            "no window for a peer that sent none"
        );
        let d = p.recv_for(1);
        assert_eq!(
            (d.kind, payload_text(&d)),
            (FrameKind::Data, "one".to_owned())
        );
        p.send(&Frame::new(FrameKind::Trailer, 1).with_method("echo"));
        let t = p.recv_for(1);
        assert_eq!(t.kind, FrameKind::Trailer);
        assert!(t.payload.is_empty(), "a clean end");
    });
}

#[test]
fn frames_before_a_header_reset_their_stream_and_nothing_else() {
    with_raw_server(16, |addr| {
        let mut p = RawPeer::connect(addr);
        p.send(&data(5, "echo", "early"));
        let rst = p.recv_for(5);
        assert_eq!(rst.kind, FrameKind::Rst);
        let e = frame::read_exception(rst.payload).expect("an exception");
        assert_eq!(e.kind.id(), error::CODE_RESET);
        assert!(
            e.message.contains("before the stream's header"),
            "{}",
            e.message
        );
        // A frame for a stream that ended is dropped without a word, and the
        // connection serves the next stream.
        p.send(&header(6, "echo"));
        p.send(&Frame::new(FrameKind::Rst, 6).with_method("echo"));
        p.send(&data(6, "echo", "stale"));
        p.send(&header(7, "echo"));
        p.send(&data(7, "echo", "fine"));
        let h = p.recv_for(7);
        assert_eq!(h.kind, FrameKind::Header);
        let d = p.recv_for(7);
        assert_eq!(payload_text(&d), "fine");
    });
}

#[test]
fn a_message_after_the_peers_trailer_resets_the_stream() {
    with_raw_server(16, |addr| {
        let mut p = RawPeer::connect(addr);
        p.send(&header(1, "hold"));
        p.send(&data(1, "hold", "a"));
        p.send(&Frame::new(FrameKind::Trailer, 1).with_method("hold"));
        p.send(&data(1, "hold", "after"));
        let rst = p.recv_for(1);
        assert_eq!(rst.kind, FrameKind::Rst);
        let e = frame::read_exception(rst.payload).expect("an exception");
        assert!(
            e.message.contains("after the peer's trailer"),
            "{}",
            e.message
        );
    });
}

#[test]
fn streams_beyond_the_connections_limit_are_refused_in_a_trailer() {
    with_raw_server(4, |addr| {
        let mut p = RawPeer::connect(addr);
        // Four held streams fill the connection; the fifth is refused at once.
        for id in 1..=5 {
            p.send(&header(id, "hold"));
        }
        let t = p.recv_for(5);
        assert_eq!(t.kind, FrameKind::Trailer);
        let e = frame::read_exception(t.payload).expect("an exception");
        assert!(e.message.contains("its limit"), "{}", e.message);
        // One ends; then a new stream is taken.
        p.send(&Frame::new(FrameKind::Rst, 1).with_method("hold"));
        p.send(&header(6, "echo"));
        p.send(&data(6, "echo", "room again"));
        let got = p.recv_data(6);
        assert_eq!(payload_text(&got), "room again");
        for id in 2..=4 {
            p.send(&Frame::new(FrameKind::Rst, id).with_method("hold"));
        }
    });
}

#[test]
fn an_oversized_frame_closes_its_connection_only() {
    with_raw_server(16, |addr| {
        let mut bad = RawPeer::connect(addr);
        let mut good = RawPeer::connect(addr);
        good.send(&header(1, "echo"));
        // 16 MiB and one byte, streaming flag set: refused before it is read.
        let mut head = (16u32 * 1024 * 1024 + 1 - 4).to_be_bytes().to_vec();
        head.extend_from_slice(&[0x10, 0x00, 0x00, 0x02, 0, 0, 0, 1]);
        bad.send_bytes(&head);
        assert!(bad.recv().is_none(), "the server closed the connection");
        good.send(&data(1, "echo", "still here"));
        let got = good.recv_data(1);
        assert_eq!(payload_text(&got), "still here");
    });
}

#[test]
fn ended_streams_leave_nothing_in_their_connections_table() {
    each_transport(|running, c, _| async move {
        for i in 0..50 {
            let mut s = open(&c, "echo").await;
            s.send(&text(1, "x")).await.expect("send");
            s.recv().await.expect("recv").expect("a message");
            if i % 2 == 0 {
                s.close_send().await.expect("close");
                assert_eq!(s.recv().await.expect("the end"), None);
            }
        }
        assert_eq!(c.open_streams(), 0);
        running
    });
}

/// A Kitex-like peer (no window) that floods a stream its handler does not read: the
/// server's queue stays within the window (its reader waits), and every message
/// arrives once the handler reads.
#[test]
fn a_flood_from_a_peer_without_a_window_is_held_at_the_window() {
    with_raw_server_and(16, |addr, handler| {
        let mut p = RawPeer::connect(addr);
        let writer = p.socket.try_clone().expect("a second handle");
        let sending = std::thread::spawn(move || {
            let mut w = RawPeer { socket: writer };
            w.send(&header(1, "hold"));
            let body = "q".repeat(1000);
            for _ in 0..2000 {
                w.send(&data(1, "hold", &body));
            }
            w.send(&Frame::new(FrameKind::Trailer, 1).with_method("hold"));
        });
        let window = small().window;
        let cost = 1000 + 16 + flow::MESSAGE_COST;
        // The queue fills to the window, and no further.
        while handler.held.queued_max.load(Ordering::SeqCst) + cost < window {
            std::thread::yield_now();
        }
        handler.held.release.notify_one();
        sending.join().expect("the writer");
        let got = p.recv_data(1);
        assert_eq!(payload_text(&got), "2000");
        assert!(handler.held.queued_max.load(Ordering::SeqCst) <= window + cost);
    });
}

/// Streams over a Unix socket and over shared memory, messages small and larger
/// than a slice of shared memory, on both kinds of transport where they apply.
#[test]
fn streams_go_over_unix_sockets_and_shared_memory() {
    let dir = std::env::temp_dir().join(format!("volo-core-streams-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (i, (kind, shm)) in [
        (TransportKind::Netpoll, false),
        (TransportKind::Tokio, false),
        (TransportKind::Netpoll, true),
    ]
    .into_iter()
    .enumerate()
    {
        let path = dir.join(format!("s{i}.sock"));
        let at = match shm {
            true => Address::Shm(path.as_path().into()),
            false => Address::Unix(path.as_path().into()),
        };
        run_bounded(Duration::from_secs(60), async {
            let running = start_streaming(server_config(kind), &at).await;
            let c = client(&running, kind);
            bidi_round_trip(&c, 20, 10).await;
            bidi_round_trip(&c, 3, 3 << 20).await;
            running.stop().await;
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server that grants no window and says nothing (Kitex's, before its handler
/// answers): a client stream beyond the initial credit waits the decision wait on a
/// fake clock, tells the server it stops counting, and sends the rest; the next
/// stream on the connection does not ask for a window.
#[test]
fn a_client_stops_counting_for_a_server_that_grants_no_window() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("an address");
    let silent = std::thread::spawn(move || {
        let (socket, _) = listener.accept().expect("a client");
        socket
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("a timeout");
        let mut p = RawPeer { socket };
        let mut frames = Vec::new();
        // Two streams' headers, one's 100 messages, its trailer, and the opt-out.
        while frames.len() < 104 {
            frames.push(p.recv().expect("a frame"));
        }
        frames
    });
    run_bounded(Duration::from_secs(60), async {
        let mut config = ClientConfig::default();
        config.transport.kind = TransportKind::Tokio;
        let clock = ManualClock::new();
        let c = StreamClient::new("Test", Address::Tcp(addr), &config)
            .expect("a client")
            .with_clock(clock.clone());
        let mut s = open(&c, "count").await;
        let sending = tokio::spawn(async move {
            let body = "u".repeat(1000);
            for _ in 0..100 {
                s.send(&text(1, &body)).await.expect("send");
            }
            s.close_send().await.expect("close");
            s
        });
        // The credit spent, the sender waits for the server's word on the clock.
        while clock.sleepers() == 0 {
            tokio::task::yield_now().await;
        }
        clock.advance(StreamConfig::default().decision_wait);
        let s = sending.await.expect("the sender");
        let next = open(&c, "count").await;
        drop((s, next));
    });
    let frames = silent.join().expect("the silent server");
    let first = &frames[0];
    assert_eq!(first.kind, FrameKind::Header);
    assert!(
        first.meta_value(flow::WINDOW_KEY).is_some(),
        "the first stream asks"
    );
    let opt_out = frames
        .iter()
        .position(|f| f.meta_value(flow::UNCOUNTED_KEY).is_some())
        .expect("an opt-out");
    let size = thrift_wire::Codec::<thrift_wire::Binary>::new().size(&text(1, &"u".repeat(1000)));
    let cost = size + flow::MESSAGE_COST as usize;
    let before = frames[..opt_out]
        .iter()
        .filter(|f| f.kind == FrameKind::Data)
        .count();
    assert_eq!(
        before,
        flow::INITIAL_CREDIT as usize / cost + 1,
        "the initial credit, and one more"
    );
    let data = frames.iter().filter(|f| f.kind == FrameKind::Data).count();
    assert_eq!(data, 100);
    let second = frames
        .iter()
        .filter(|f| f.kind == FrameKind::Header)
        .nth(1)
        .expect("a second stream");
    assert_eq!(
        second.meta_value(flow::WINDOW_KEY),
        None,
        "the second does not"
    );
}

/// Metrics on both sides: streams open and ended by outcome, messages and bytes
/// either way; a stream over the server's in-flight limit is refused as overloaded.
#[test]
fn streams_are_counted_and_limited() {
    run_bounded(Duration::from_secs(60), async {
        let metrics = crate::metrics::Metrics::new();
        let mut config = server_config(TransportKind::Netpoll);
        config.observability.metrics = Some(metrics.clone());
        let at: Address = "127.0.0.1:0".parse().unwrap();
        let limited = StreamConfig {
            max_in_flight: Some(2),
            ..StreamConfig::default()
        };
        let handler = Handler::default();
        let running = start(config, handler.clone(), &at, limited).await;
        let mut client_config = ClientConfig::default();
        client_config.observability.metrics = Some(metrics.clone());
        let c =
            StreamClient::new("Test", running.address.clone(), &client_config).expect("a client");

        let mut s = open(&c, "echo").await;
        for i in 0..10 {
            s.send(&text(1, &"e".repeat(i))).await.expect("send");
            s.recv().await.expect("recv").expect("an echo");
        }
        s.close_send().await.expect("close");
        assert_eq!(s.recv().await.expect("the end"), None);
        let mut failing = open(&c, "echo").await;
        failing.send(&text(1, "fail")).await.expect("send");
        assert!(failing.recv().await.is_err());
        // Two held streams fill the server's limit: a third is refused.
        let mut held: Vec<_> = Vec::new();
        for _ in 0..2 {
            let mut h = open(&c, "echo").await;
            h.send(&text(1, "x")).await.expect("send");
            h.recv().await.expect("recv").expect("an echo");
            held.push(h);
        }
        let mut over = open(&c, "echo").await;
        match over.recv().await {
            Err(StreamError::Application(e)) => {
                assert!(crate::refusal::is_overload(&e), "{e}");
            }
            other => panic!("{other:?}"),
        }
        drop(held);
        drop((s, failing, over));
        // The server sees both cancels before the counts are read.
        while handler.held.cancelled.load(Ordering::SeqCst) < 2 {
            tokio::task::yield_now().await;
        }
        let text = metrics.encode();
        let has = |line: &str| assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        // 10 echoes and 3 more messages each way for the held and failing streams.
        has(r#"rpc_client_stream_messages_total{direction="sent"} 13"#);
        has(r#"rpc_server_stream_messages_total{direction="received"} 13"#);
        has(r#"rpc_server_stream_messages_total{direction="sent"} 12"#);
        has(r#"rpc_client_stream_messages_total{direction="received"} 12"#);
        // Each message is its string's length and 8 bytes of struct.
        let bytes = (0..10).map(|i| 8 + i).sum::<usize>() + (8 + 4) + 2 * (8 + 1);
        has(&format!(
            r#"rpc_client_stream_bytes_total{{direction="sent"}} {bytes}"#
        ));
        has(r#"rpc_server_streams_total{outcome="ok"} 1"#);
        // The failing stream is a handler's error; the one over the limit, refused.
        has(r#"rpc_server_streams_total{outcome="application_error"} 1"#);
        has(r#"rpc_server_streams_total{outcome="refused"} 1"#);
        has(r#"rpc_server_streams_total{outcome="cancelled"} 2"#);
        has(r#"rpc_client_streams_total{outcome="ok"} 1"#);
        has(r#"rpc_client_streams_total{outcome="application_error"} 1"#);
        has(r#"rpc_client_streams_total{outcome="refused"} 1"#);
        has(r#"rpc_client_streams_total{outcome="cancelled"} 2"#);
        has("rpc_server_open_streams 0");
        has("rpc_client_open_streams 0");
        running.stop().await;
    });
}

/// A connection that breaks fails every stream on it with a connection error, and
/// the next stream goes on a new connection.
#[test]
fn a_broken_connection_fails_every_stream_on_it() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("an address");
    let breaking = std::thread::spawn(move || {
        let (socket, _) = listener.accept().expect("a client");
        socket
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("a timeout");
        let mut p = RawPeer { socket };
        // Three streams' headers, then the connection goes.
        for _ in 0..3 {
            assert_eq!(p.recv().expect("a header").kind, FrameKind::Header);
        }
        drop(p);
        // The client's next stream comes on a new connection.
        let (socket, _) = listener.accept().expect("the client again");
        socket
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("a timeout");
        RawPeer { socket }.recv().expect("a header").kind
    });
    run_bounded(Duration::from_secs(30), async {
        let mut config = ClientConfig::default();
        config.transport.kind = TransportKind::Tokio;
        let c = StreamClient::new("Test", Address::Tcp(addr), &config).expect("a client");
        let mut streams = Vec::new();
        for _ in 0..3 {
            streams.push(open(&c, "echo").await);
        }
        for s in &mut streams {
            match s.recv().await {
                Err(StreamError::Connection { .. }) => {}
                other => panic!("{other:?}"),
            }
            assert!(matches!(
                s.send(&text(1, "late")).await,
                Err(StreamError::Connection { .. })
            ));
        }
        assert_eq!(c.open_streams(), 0);
        let _next = open(&c, "echo").await;
    });
    assert_eq!(breaking.join().expect("the peer"), FrameKind::Header);
}

/// Takes the next connection on `listener` and records its frames until the client
/// closes it (a read that neither gets a frame nor the end fails the test).
pub(crate) fn record_connection(listener: &std::net::TcpListener) -> Vec<Frame> {
    let (socket, _) = listener.accept().expect("a client");
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("a timeout");
    let mut p = RawPeer { socket };
    std::iter::from_fn(|| p.recv()).collect()
}

/// A client on `kind` to a raw peer at `addr`, with streams on `clock`.
fn raw_client(
    kind: TransportKind,
    addr: std::net::SocketAddr,
    clock: &ManualClock,
) -> StreamClient {
    let mut config = ClientConfig::default();
    config.transport.kind = kind;
    StreamClient::new("Test", Address::Tcp(addr), &config)
        .expect("a client")
        .with_clock(clock.clone())
}

/// How a client's last stream is reset just before the connection goes.
#[derive(Debug, Clone, Copy)]
enum LastReset {
    /// Its deadline passed, then the client was dropped.
    Deadline,
    /// Its handle was dropped, then the client.
    HandleThenClient,
    /// The client was dropped, then the handle (the stream held the connection).
    ClientThenHandle,
}

/// A stream reset as its client goes (its deadline passed, its handle dropped) still
/// tells the peer: the rst leaves before the connection closes, every time, on both
/// transports.
#[test]
fn an_rst_written_as_the_client_goes_reaches_the_peer_before_the_close() {
    const ROUNDS: usize = 240;
    let cases = [
        LastReset::Deadline,
        LastReset::HandleThenClient,
        LastReset::ClientThenHandle,
    ];
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("an address");
    let (tx, mut recorded) = tokio::sync::mpsc::unbounded_channel();
    let peer = std::thread::spawn(move || {
        for _ in 0..ROUNDS {
            let _ = tx.send(record_connection(&listener));
        }
    });
    run_bounded(Duration::from_secs(120), async {
        for i in 0..ROUNDS {
            let reset = cases[i % 3];
            let kind = [TransportKind::Netpoll, TransportKind::Tokio][(i / 3) % 2];
            let clock = ManualClock::new();
            let c = raw_client(kind, addr, &clock);
            let timeout = Some(Duration::from_secs(5));
            let mut s = c
                .open_with_timeout::<Text, Text>("echo", &Metadata::new(), timeout)
                .await
                .expect("open");
            match reset {
                LastReset::Deadline => {
                    clock.advance(Duration::from_secs(5));
                    assert_eq!(s.recv().await, Err(StreamError::DeadlineExceeded));
                    drop(c);
                    drop(s);
                }
                LastReset::HandleThenClient => {
                    drop(s);
                    drop(c);
                }
                LastReset::ClientThenHandle => {
                    drop(c);
                    drop(s);
                }
            }
            let frames = recorded.recv().await.expect("the peer's record");
            let kinds: Vec<_> = frames.iter().map(|f| f.kind).collect();
            let round = format!("round {i} ({reset:?}, {kind:?})");
            assert_eq!(kinds, [FrameKind::Header, FrameKind::Rst], "{round}");
            let e = frame::read_exception(frames[1].payload.clone()).expect("an exception");
            let code = match reset {
                LastReset::Deadline => error::CODE_DEADLINE,
                _ => error::CODE_CANCELED,
            };
            assert_eq!(e.kind.id(), code, "{round}");
        }
    });
    peer.join().expect("the peer");
}

/// `StreamClient::close` returns only once the connection is closed with what was
/// written on it sent, so a program may exit right after: here the runtime (and with
/// it every task the client started) is dropped as soon as `close` returns, as a
/// process that exits would, and the peer still gets the dropped stream's rst.
#[test]
fn a_closed_client_has_sent_its_rsts_before_close_returns() {
    const ROUNDS: usize = 24;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("an address");
    let peer = std::thread::spawn(move || {
        (0..ROUNDS)
            .map(|_| record_connection(&listener))
            .collect::<Vec<_>>()
    });
    for i in 0..ROUNDS {
        let kind = [TransportKind::Netpoll, TransportKind::Tokio][i % 2];
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let clock = ManualClock::new();
            let c = raw_client(kind, addr, &clock);
            let s = c
                .open::<Text, Text>("echo", &Metadata::new())
                .await
                .expect("open");
            drop(s);
            tokio::time::timeout(Duration::from_secs(20), c.close())
                .await
                .expect("close returns once the connection is closed");
            match c.open::<Text, Text>("echo", &Metadata::new()).await {
                Err(StreamError::Open { .. }) => {}
                other => panic!("round {i}: an opening after close: {other:?}"),
            }
        });
        drop(rt);
    }
    assert_each_cancelled(peer.join().expect("the peer"));
}

/// Each recorded connection carried one stream's header, then its rst for a cancel.
pub(crate) fn assert_each_cancelled(connections: Vec<Vec<Frame>>) {
    for (i, frames) in connections.into_iter().enumerate() {
        let kinds: Vec<_> = frames.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [FrameKind::Header, FrameKind::Rst], "round {i}");
        let e = frame::read_exception(frames[1].payload.clone()).expect("an exception");
        assert_eq!(e.kind.id(), error::CODE_CANCELED, "round {i}");
    }
}

/// A peer that takes nothing more cannot hold a closing connection: the session
/// waits [`CLOSING_FLUSH_WAIT`](session::CLOSING_FLUSH_WAIT) on its clock for its
/// output to leave, then closes, and nothing it started holds the connection after;
/// the peer reads the end after what its socket took.
#[test]
fn a_peer_that_does_not_read_holds_a_closing_session_only_so_long() {
    use std::io::Read;
    for kind in [TransportKind::Netpoll, TransportKind::Tokio] {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        // A small window: the client's socket soon has nowhere to put its bytes.
        nix::sys::socket::setsockopt(&listener, nix::sys::socket::sockopt::RcvBuf, &4096)
            .expect("a receive buffer");
        let addr = listener.local_addr().expect("an address");
        let (read_now, told) = std::sync::mpsc::channel::<()>();
        let peer = std::thread::spawn(move || {
            let (mut socket, _) = listener.accept().expect("a client");
            socket
                .set_read_timeout(Some(Duration::from_secs(20)))
                .expect("a timeout");
            told.recv().expect("told to read");
            let mut got = Vec::new();
            socket.read_to_end(&mut got).map(|_| got.len())
        });
        let size = 8 << 20;
        run_bounded(Duration::from_secs(60), async {
            let mut config = ClientConfig::default();
            config.transport.kind = kind;
            let reactor = (kind == TransportKind::Netpoll).then(|| {
                let runtime = tokio::runtime::Handle::current();
                netpoll_rs::Reactor::on_runtime(&runtime, config.transport.reactor.clone())
                    .expect("a reactor")
            });
            let dialer = crate::client::pool::Dialer::new(reactor, Address::Tcp(addr), &config);
            let conn = dialer.connect(None).await.expect("connect");
            let clock = ManualClock::new();
            let timer = session::Timer::new(clock.clone());
            let reactor = dialer.reactor().cloned();
            let s = session::Session::client(conn, reactor, StreamConfig::default(), timer, None);
            let stream = s
                .open("echo".into(), "Test", &Metadata::new(), None)
                .await
                .expect("open");
            let mut send = Box::pin(stream.send_with(size, |out| {
                bytes::BufMut::put_bytes(out, b'z', size);
            }));
            assert!(
                futures_util::FutureExt::now_or_never(&mut send).is_none(),
                "the socket took it all"
            );
            drop(send);
            // An rst behind the message, and its flush, which waits for the socket.
            stream.reset(StreamError::Cancelled("dropped".into()));
            s.stop();
            while clock.sleepers() == 0 {
                tokio::task::yield_now().await;
            }
            clock.advance(session::CLOSING_FLUSH_WAIT);
            while s.conn_is_open() {
                tokio::task::yield_now().await;
            }
            // The reader, the flusher and the rst's flush are gone: only this test
            // holds the session.
            while Arc::strong_count(&s) > 2 {
                tokio::task::yield_now().await;
            }
            read_now.send(()).expect("the peer");
            let read = tokio::task::spawn_blocking(move || peer.join().expect("the peer"))
                .await
                .expect("the peer's waiter");
            let read = read.unwrap_or_else(|e| panic!("{kind:?}: no end: {e}"));
            assert!(read < size, "{kind:?}: the peer read {read} bytes");
        });
    }
}

/// [`Handler`] saying what it serves: the service `Test` and its methods.
#[derive(Clone, Default)]
struct Declared(Handler);

impl StreamHandler for Declared {
    async fn serve(&self, stream: ServerStream) -> Result<(), HandlerError> {
        self.0.serve(stream).await
    }

    fn service_name(&self) -> Option<&str> {
        Some("Test")
    }

    fn serves_method(&self, method: &str) -> bool {
        matches!(method, "echo" | "count" | "push" | "hold" | "flood")
    }
}

/// A header frame of `method` naming `service` (its `isn` key), as Kitex's client
/// sends it.
fn header_of(id: i32, method: &str, service: &str) -> Frame {
    let mut h = header(id, method);
    h.meta.push((
        Utf8Bytes::from_static(frame::str_key::SERVICE),
        Utf8Bytes::from(service.to_owned()),
    ));
    h
}

/// The exception of an rst for stream `id`, the next frame for it.
fn rst_exception(p: &mut RawPeer, id: i32) -> thrift_wire::ApplicationException {
    let rst = p.recv_for(id);
    assert_eq!(rst.kind, FrameKind::Rst, "stream {id}");
    frame::read_exception(rst.payload).expect("an exception")
}

/// A stream of a method, or of a service, that the handler does not serve is reset
/// at once with an `UNKNOWN_METHOD` that names it, before any handler runs, and the
/// connection goes on serving; a client of this crate fails with
/// [`StreamError::UnknownMethod`] without waiting for anything.
#[test]
fn a_stream_the_handler_does_not_serve_is_reset_at_once_as_unknown() {
    run_bounded(Duration::from_secs(60), async {
        let handler = Declared::default();
        let at: Address = "127.0.0.1:0".parse().unwrap();
        let config = server_config(TransportKind::Netpoll);
        let served = handler.clone();
        let running =
            crate::test_support::start_with(config, &at, move |s: Server<TestService>| {
                s.streams(served)
            })
            .await;
        let addr = running.addr;
        tokio::task::spawn_blocking(move || {
            let mut p = RawPeer::connect(addr);
            p.send(&header_of(1, "nope", "Test"));
            let e = rst_exception(&mut p, 1);
            assert_eq!(e.kind, ApplicationExceptionKind::UnknownMethod);
            assert!(e.message.contains("nope"), "{}", e.message);
            p.send(&header_of(3, "echo", "Nope"));
            let e = rst_exception(&mut p, 3);
            assert_eq!(e.kind, ApplicationExceptionKind::UnknownMethod);
            assert!(
                e.message.contains("Nope") && e.message.contains("echo"),
                "{}",
                e.message
            );
            p.send(&header_of(5, "echo", "Test"));
            p.send(&data(5, "echo", "served"));
            assert_eq!(payload_text(&p.recv_data(5)), "served");
        })
        .await
        .expect("the peer");
        assert_eq!(handler.0.held.served.load(Ordering::SeqCst), 1);

        let c = client(&running, TransportKind::Netpoll);
        let mut s = open(&c, "nope").await;
        match s.recv().await {
            Err(e @ StreamError::UnknownMethod(_)) => {
                assert!(e.to_string().contains("nope"), "{e}")
            }
            other => panic!("{other:?}"),
        }
        let elsewhere =
            StreamClient::new("Nope", running.address.clone(), &ClientConfig::default())
                .expect("a client");
        let mut s = open(&elsewhere, "echo").await;
        match s.recv().await {
            Err(e @ StreamError::UnknownMethod(_)) => {
                let said = e.to_string();
                assert!(said.contains("Nope") && said.contains("echo"), "{said}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(handler.0.held.served.load(Ordering::SeqCst), 1);
        running.stop().await;
    });
}

/// An rst for stream `id` carrying `error`, as a client sends it.
fn rst_of(id: i32, method: &str, error: &StreamError) -> Frame {
    let payload = frame::exception_payload(&error.to_rst(), method, id).expect("encodes");
    Frame::new(FrameKind::Rst, id)
        .with_method(method.to_owned())
        .with_payload(payload)
}

/// The frames for stream `id` (meta frames aside) up to and with its trailer or rst.
fn frames_to_end(p: &mut RawPeer, id: i32) -> Vec<Frame> {
    let mut frames = Vec::new();
    loop {
        let f = p.recv_for(id);
        let kind = f.kind;
        frames.push(f);
        if matches!(kind, FrameKind::Trailer | FrameKind::Rst) {
            return frames;
        }
    }
}

/// The exception of a trailer sent after an rst of `code`: an `INTERNAL_ERROR` whose
/// message names the code as Kitex's does.
fn kitex_trailer_exception(trailer: &Frame, code: i32) -> thrift_wire::ApplicationException {
    let e = frame::read_exception(trailer.payload.clone()).expect("an exception");
    assert_eq!(
        e.kind,
        ApplicationExceptionKind::InternalError,
        "{}",
        e.message
    );
    let prefix = format!("[ttstream error, code={code}] ");
    assert!(e.message.starts_with(&prefix), "{}", e.message);
    e
}

/// After a client's rst, the server ends the stream as Kitex's does once its handler
/// returns: its header if it sent none yet, then a trailer with the handler's
/// outcome (a handler that stopped on the rst's error gets an `INTERNAL_ERROR` naming
/// the rst's code, as Kitex's does).
#[test]
fn a_stream_the_client_reset_gets_the_handlers_trailer_as_from_kitex() {
    with_raw_server(16, |addr| {
        let mut p = RawPeer::connect(addr);
        // Reset before the handler answered anything: a header, then the trailer.
        p.send(&header(1, "echo"));
        p.send(&rst_of(1, "echo", &StreamError::Cancelled("gone".into())));
        let frames = frames_to_end(&mut p, 1);
        let kinds: Vec<_> = frames.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [FrameKind::Header, FrameKind::Trailer]);
        let e = kitex_trailer_exception(&frames[1], error::CODE_CANCELED);
        assert!(e.message.contains("gone"), "{}", e.message);
        // Reset past its deadline after an answer: the trailer alone, with the code.
        p.send(&header(3, "echo"));
        p.send(&data(3, "echo", "one"));
        assert_eq!(payload_text(&p.recv_data(3)), "one");
        p.send(&rst_of(3, "echo", &StreamError::DeadlineExceeded));
        let frames = frames_to_end(&mut p, 3);
        let kinds: Vec<_> = frames.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [FrameKind::Trailer]);
        kitex_trailer_exception(&frames[0], error::CODE_DEADLINE);
        // A handler that returns Ok on the rst's error: an empty trailer.
        p.send(&header(5, "flood"));
        assert_eq!(p.recv_data(5).kind, FrameKind::Data);
        p.send(&rst_of(
            5,
            "flood",
            &StreamError::Cancelled("enough".into()),
        ));
        let end = frames_to_end(&mut p, 5).pop().expect("a frame");
        assert_eq!(end.kind, FrameKind::Trailer);
        assert!(end.payload.is_empty(), "a clean end");
        // The connection serves the next stream.
        p.send(&header(7, "echo"));
        p.send(&data(7, "echo", "after"));
        assert_eq!(payload_text(&p.recv_data(7)), "after");
    });
}
