//! Streams opened through the client stack: balanced over discovered instances,
//! retried while they never left, counted by the instance breakers, seen by a user's
//! layer, and kept off an instance discovery dropped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::AsyncReadExt;

use super::*;
use crate::client::{ClientCall, DiscoverList, Instance, OpenedStream, RoundRobin, StreamRequest};
use crate::server::{ServerStream, StreamHandler};
use crate::stream::frame::{Frame, FrameKind, FrameLimits, frame_len};
use crate::stream::{HandlerError, Metadata, StreamError};

/// A stream server that says who it is:
/// - `who` (server stream): one message, its name, then the end;
/// - `echo` (bidirectional): answers each message with its text;
/// - `header` (server stream): one message per pair of the client's header,
///   `key=value`.
#[derive(Clone)]
struct Who(&'static str);

impl StreamHandler for Who {
    async fn serve(&self, stream: ServerStream) -> Result<(), HandlerError> {
        let method = stream.method().to_owned();
        let header: Vec<String> = stream
            .header()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let (mut rx, mut tx) = stream.halves::<Text, Text>();
        match method.as_str() {
            "who" => tx.send(&text(0, self.0)).await?,
            "header" => {
                for pair in header {
                    tx.send(&text(0, &pair)).await?;
                }
            }
            "echo" => {
                while let Some(m) = rx.recv().await? {
                    tx.send(&m).await?;
                }
            }
            other => return Err(HandlerError::unknown_method(other)),
        }
        Ok(())
    }
}

async fn start_who(name: &'static str) -> Running {
    let at: Address = "127.0.0.1:0".parse().unwrap();
    start_with(ServerConfig::default(), &at, move |s| s.streams(Who(name))).await
}

/// The name of the instance a `who` stream opened through `client` reached.
async fn who<S>(client: &Client<S>) -> Result<String, StreamError>
where
    S: crate::service::Service<
            ClientContext,
            StreamRequest,
            Response = OpenedStream,
            Error = Error,
        >,
{
    let mut cx = ClientContext::new();
    let req = StreamRequest::new("who", Metadata::new());
    let mut s = client.open_stream::<Text, Text>(&mut cx, req).await?;
    let name = s.recv().await?.and_then(|m| m.text).expect("a name");
    assert_eq!(s.recv().await?, None, "one message, then the end");
    Ok(name.to_string())
}

/// An address nothing listens on (bound, then closed).
fn dead_address() -> Address {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    Address::Tcp(addr)
}

#[test]
fn streams_are_balanced_over_the_instances() {
    run_bounded(Duration::from_secs(30), async {
        let (a, b) = (start_who("a").await, start_who("b").await);
        let client = Client::builder("Test")
            .addresses([a.address.clone(), b.address.clone()])
            .load_balance(RoundRobin::default())
            .build()
            .unwrap();
        let mut seen = Vec::new();
        for _ in 0..10 {
            seen.push(who(&client).await.expect("a stream"));
        }
        let on_a = seen.iter().filter(|n| *n == "a").count();
        assert_eq!((on_a, seen.len() - on_a), (5, 5), "{seen:?}");
        a.stop().await;
        b.stop().await;
    });
}

#[test]
fn an_opening_that_never_left_is_retried_on_another_instance() {
    run_bounded(Duration::from_secs(30), async {
        let live = start_who("live").await;
        let client = Client::builder("Test")
            .addresses([dead_address(), live.address.clone()])
            .load_balance(RoundRobin::default())
            .build()
            .unwrap();
        for _ in 0..10 {
            // Every other opening picks the dead instance first: its connect fails,
            // and the retry takes the live one.
            assert_eq!(who(&client).await.expect("a stream"), "live");
        }
        live.stop().await;
    });
}

#[test]
fn a_failed_opening_is_a_typed_error() {
    run_bounded(Duration::from_secs(30), async {
        let none = Client::builder("Test")
            .discover(DiscoverList::new(Vec::new()))
            .build()
            .unwrap();
        match who(&none).await {
            Err(StreamError::Open { kind, .. }) => assert_eq!(kind, ErrorKind::NoInstance),
            other => panic!("{other:?}"),
        }
        let dead = dead_address();
        let client = Client::builder("Test")
            .address(dead.clone())
            .build()
            .unwrap();
        match who(&client).await {
            Err(StreamError::Open { kind, instance, .. }) => {
                assert_eq!((kind, instance), (ErrorKind::Connect, Some(dead)));
            }
            other => panic!("{other:?}"),
        }
    });
}

/// A TCP listener that counts the connections it accepts and what each sent, and
/// handles them with `behave`.
async fn raw_peer<F, Fut>(behave: F) -> (Address, Arc<AtomicUsize>)
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = Address::Tcp(listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(behave(s));
        }
    });
    (addr, accepted)
}

/// Reads whole stream frames from `s` until it has one, or the peer closed.
async fn read_frame(s: &mut tokio::net::TcpStream, buf: &mut Vec<u8>) -> Option<Frame> {
    let limits = FrameLimits::default();
    loop {
        if buf.len() >= 4
            && let Ok(Some(len)) = frame_len(&buf[..4], &limits)
            && buf.len() >= len
        {
            let bytes = bytes::Bytes::from(buf.drain(..len).collect::<Vec<u8>>());
            return Frame::decode(&bytes, &limits).ok();
        }
        let mut chunk = [0u8; 4096];
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

#[test]
fn an_opening_is_not_retried_once_its_header_left() {
    run_bounded(Duration::from_secs(30), async {
        // Peers that read a stream's header and then close the connection: the
        // stream may have started there, so it must not be opened again elsewhere.
        let headers = Arc::new(AtomicUsize::new(0));
        let eat = |headers: Arc<AtomicUsize>| {
            move |mut s: tokio::net::TcpStream| {
                let headers = Arc::clone(&headers);
                async move {
                    let mut buf = Vec::new();
                    if let Some(f) = read_frame(&mut s, &mut buf).await
                        && f.kind == FrameKind::Header
                    {
                        headers.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        };
        let (a, accepted_a) = raw_peer(eat(Arc::clone(&headers))).await;
        let (b, accepted_b) = raw_peer(eat(Arc::clone(&headers))).await;
        let client = Client::builder("Test").addresses([a, b]).build().unwrap();
        let mut cx = ClientContext::new();
        let req = StreamRequest::new("echo", Metadata::new());
        // The peer may close before the opening returns (an opening whose header
        // may have arrived fails) or after (the stream breaks): not retried either way.
        match client.open_stream::<Text, Text>(&mut cx, req).await {
            Ok(mut s) => match s.recv().await {
                Err(StreamError::Connection { .. }) => {}
                other => panic!("{other:?}"),
            },
            Err(StreamError::Open { kind, .. }) => assert_eq!(kind, ErrorKind::Io),
            Err(other) => panic!("{other:?}"),
        }
        assert_eq!(headers.load(Ordering::SeqCst), 1);
        assert_eq!(
            accepted_a.load(Ordering::SeqCst) + accepted_b.load(Ordering::SeqCst),
            1,
            "one instance tried"
        );
    });
}

#[test]
fn connections_that_break_under_streams_open_the_instance_breaker() {
    run_bounded(Duration::from_secs(30), async {
        // A peer that takes each connection and drops it at once: each stream sent
        // there breaks (or its opening fails), and each counts against it.
        let (slammer, accepted) = raw_peer(|s| async move { drop(s) }).await;
        let live = start_who("live").await;
        let client = Client::builder("Test")
            .addresses([slammer, live.address.clone()])
            .load_balance(RoundRobin::default())
            .build()
            .unwrap();
        let mut broken = 0;
        for _ in 0..40 {
            match who(&client).await {
                Ok(name) => assert_eq!(name, "live"),
                Err(StreamError::Connection { .. }) => broken += 1,
                Err(StreamError::Open {
                    kind: ErrorKind::Io,
                    ..
                }) => broken += 1,
                Err(e) => panic!("{e:?}"),
            }
        }
        let before = accepted.load(Ordering::SeqCst);
        assert!(
            before >= 1 && broken >= 1,
            "{before} connections, {broken} broken"
        );
        // Its breaker is open (10 failures in a row, of openings or of connections
        // under streams): every stream now goes to the live instance.
        for _ in 0..20 {
            assert_eq!(who(&client).await.expect("a stream"), "live");
        }
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            before,
            "no new connection to it"
        );
        live.stop().await;
    });
}

#[test]
fn streams_cut_after_their_opening_count_against_the_instance() {
    run_bounded(Duration::from_secs(30), async {
        // A peer that reads a stream's header and then closes the connection: each
        // opening succeeds (the header left), and each stream then breaks. Only the
        // breaks tell the breaker that the instance is bad.
        let (cutter, accepted) = raw_peer(|mut s| async move {
            let mut buf = Vec::new();
            let _ = read_frame(&mut s, &mut buf).await;
        })
        .await;
        let live = start_who("live").await;
        let client = Client::builder("Test")
            .addresses([cutter, live.address.clone()])
            .load_balance(RoundRobin::default())
            .build()
            .unwrap();
        for _ in 0..60 {
            match who(&client).await {
                Ok(name) => assert_eq!(name, "live"),
                Err(StreamError::Connection { .. }) => {}
                Err(StreamError::Open {
                    kind: ErrorKind::Io,
                    ..
                }) => {}
                Err(e) => panic!("{e:?}"),
            }
        }
        let before = accepted.load(Ordering::SeqCst);
        for _ in 0..20 {
            assert_eq!(who(&client).await.expect("a stream"), "live");
        }
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            before,
            "its breaker is open"
        );
        live.stop().await;
    });
}

/// A layer over calls and streams alike: records what goes down.
#[derive(Clone, Default)]
struct Record(Arc<Mutex<Vec<(String, bool)>>>);

struct Recorded<S> {
    inner: S,
    seen: Record,
}

impl<S> crate::service::Layer<S> for Record {
    type Service = Recorded<S>;

    fn layer(self, inner: S) -> Recorded<S> {
        Recorded { inner, seen: self }
    }
}

impl<S, R> crate::service::Service<ClientContext, R> for Recorded<S>
where
    R: ClientCall,
    S: crate::service::Service<ClientContext, R, Error = Error> + Sync,
    S::Response: Send,
{
    type Response = S::Response;
    type Error = Error;

    async fn call(&self, cx: &mut ClientContext, req: R) -> Result<S::Response, Error> {
        self.seen
            .0
            .lock()
            .unwrap()
            .push((req.method().to_owned(), req.opens_stream()));
        self.inner.call(cx, req).await
    }
}

#[test]
fn a_layer_over_client_calls_sees_calls_and_stream_openings() {
    run_bounded(Duration::from_secs(30), async {
        let running = start_who("a").await;
        let seen = Record::default();
        let client = Client::builder("Test")
            .address(running.address.clone())
            .layer(seen.clone())
            .build()
            .unwrap();
        assert_eq!(who(&client).await.unwrap(), "a");
        let mut cx = ClientContext::new();
        let _ = client
            .call::<_, Text>(&mut cx, "echo", text(1, "hi"))
            .await
            .expect("a call");
        assert_eq!(
            *seen.0.lock().unwrap(),
            [("who".to_owned(), true), ("echo".to_owned(), false)]
        );
        running.stop().await;
    });
}

#[test]
fn metainfo_and_metadata_travel_in_the_stream_header() {
    run_bounded(Duration::from_secs(30), async {
        let running = start_who("a").await;
        let client = Client::builder("Test")
            .address(running.address.clone())
            .build()
            .unwrap();
        let mut cx = ClientContext::new();
        cx.metainfo.set_persistent("tenant", "acme");
        let mut header = Metadata::new();
        header.insert("x-user", "u1");
        let req = StreamRequest::new("header", header);
        let mut s = client
            .open_stream::<Text, Text>(&mut cx, req)
            .await
            .unwrap();
        let mut got = Vec::new();
        while let Some(m) = s.recv().await.unwrap() {
            got.push(m.text.unwrap().to_string());
        }
        assert!(
            got.contains(&"RPC_PERSIST_tenant=acme".to_owned()),
            "{got:?}"
        );
        assert!(got.contains(&"x-user=u1".to_owned()), "{got:?}");
        running.stop().await;
    });
}

#[test]
fn an_instance_discovery_drops_gets_no_new_streams_and_its_streams_finish() {
    run_bounded(Duration::from_secs(30), async {
        let (a, b) = (start_who("a").await, start_who("b").await);
        let list = Arc::new(DiscoverList::new(vec![
            Instance::new(a.address.clone()),
            Instance::new(b.address.clone()),
        ]));
        let client = Client::builder("Test")
            .discover(Arc::clone(&list))
            .load_balance(RoundRobin::default())
            .build()
            .unwrap();
        // One echo stream on each instance.
        let mut streams = Vec::new();
        for _ in 0..2 {
            let mut cx = ClientContext::new();
            let req = StreamRequest::new("echo", Metadata::new());
            let s = client
                .open_stream::<Text, Text>(&mut cx, req)
                .await
                .unwrap();
            streams.push((cx.rpc.callee.address.clone().unwrap(), s));
        }
        let on_a = streams
            .iter()
            .position(|(addr, _)| *addr == a.address)
            .expect("a stream on a");
        list.set(vec![Instance::new(b.address.clone())]);
        // The change reaches the transport's follower on another task.
        tokio::task::yield_now().await;
        for _ in 0..6 {
            assert_eq!(who(&client).await.unwrap(), "b");
        }
        let (_, s) = &mut streams[on_a];
        s.send(&text(1, "still here")).await.expect("send");
        let back = s.recv().await.expect("recv").expect("an echo");
        assert_eq!(back.text.as_deref(), Some("still here"));
        s.close_send().await.unwrap();
        assert_eq!(s.recv().await.unwrap(), None);
        drop(streams);
        a.stop().await;
        b.stop().await;
    });
}

#[test]
fn a_closing_server_refuses_new_streams_by_value_and_its_connection_takes_no_more() {
    run_bounded(Duration::from_secs(30), async {
        let mut running = start_who("a").await;
        let client = Client::builder("Test")
            .address(running.address.clone())
            .build()
            .unwrap();
        let mut cx = ClientContext::new();
        let req = StreamRequest::new("echo", Metadata::new());
        let mut held = client
            .open_stream::<Text, Text>(&mut cx, req)
            .await
            .unwrap();
        held.send(&text(1, "before")).await.unwrap();
        assert!(held.recv().await.unwrap().is_some());

        let _ = running.stop.take().expect("a stop").send(());
        // Streams opened once the server took the news are refused as closing.
        let refused = loop {
            match who(&client).await {
                Ok(_) => tokio::time::sleep(Duration::from_millis(1)).await,
                Err(e) => break e,
            }
        };
        let StreamError::Application(ex) = &refused else {
            panic!("{refused:?}");
        };
        assert_eq!(
            crate::refusal::Refusal::of_reply(ex, None),
            Some(crate::refusal::Refusal::Closing),
            "{ex:?}"
        );
        // The next opening does not go on that connection: a new one is dialled,
        // and the closing server no longer listens.
        match who(&client).await {
            Err(StreamError::Open { kind, .. }) => assert_eq!(kind, ErrorKind::Connect),
            other => panic!("{other:?}"),
        }
        // The stream in progress runs to its end.
        held.send(&text(1, "after")).await.unwrap();
        let back = held.recv().await.unwrap().expect("an echo");
        assert_eq!(back.text.as_deref(), Some("after"));
        held.close_send().await.unwrap();
        assert_eq!(held.recv().await.unwrap(), None);
        drop(held);
        tokio::time::timeout(Duration::from_secs(20), &mut running.done)
            .await
            .expect("the server stopped")
            .unwrap()
            .unwrap();
    });
}

/// A pool retired (its instance left discovery) while an opening is under way on it
/// keeps its connection until that opening ends: the stream it opened is not cut
/// by the close of a connection that looked idle; an opening that found the pool
/// before it was retired still opens (it raced the removal, and the instance serves
/// on). Then the connection goes once its last stream ends.
#[test]
fn a_retired_pool_lets_an_opening_under_way_finish() {
    use crate::client::pool::Dialer;
    use crate::client::stream::StreamPool;
    use crate::stream::session::Timer;

    run_bounded(Duration::from_secs(30), async {
        let a = start_who("a").await;
        let config = ClientConfig::default();
        let reactor = crate::client::pool::reactor_for(&config).unwrap();
        let dialer = Dialer::new(reactor, a.address.clone(), &config);
        let pool = StreamPool::new(dialer, &config.streams, Timer::default(), None, None);
        let opened = |s| OpenedStream::new(s).typed::<Text, Text>();
        // A connection, idle once its first stream ended.
        let first = pool
            .open("who".into(), "Test", &Metadata::new(), None)
            .await;
        let mut first = opened(first.expect("a stream"));
        assert_eq!(
            first.recv().await.unwrap().and_then(|m| m.text).as_deref(),
            Some("a")
        );
        assert_eq!(first.recv().await.unwrap(), None);
        drop(first);
        let session = pool.connection(0).expect("a connection");

        let opening = pool.begin_opening().expect("not retired yet");
        pool.retire();
        assert!(session.is_open(), "kept for the opening under way");
        // An opening that found the pool before it was retired (it raced the
        // instance's removal) still opens its stream: the instance serves on.
        let raced = pool
            .open("who".into(), "Test", &Metadata::new(), None)
            .await;
        let mut raced = opened(raced.expect("the opening that raced the removal"));
        assert_eq!(
            raced.recv().await.unwrap().and_then(|m| m.text).as_deref(),
            Some("a")
        );
        assert_eq!(raced.recv().await.unwrap(), None);
        drop(raced);
        assert!(session.is_open(), "still kept for the opening under way");
        // The opening under way opens its stream, and ends.
        let stream = session
            .open("echo".into(), "Test", &Metadata::new(), None)
            .await;
        let mut stream = opened(stream.expect("the stream under way"));
        drop(opening);
        assert!(pool.connection(0).is_none(), "let go");
        stream.send(&text(1, "still here")).await.expect("send");
        let back = stream.recv().await.expect("recv").expect("an echo");
        assert_eq!(back.text.as_deref(), Some("still here"));
        stream.close_send().await.unwrap();
        assert_eq!(stream.recv().await.unwrap(), None);
        drop(stream);
        while session.is_open() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        a.stop().await;
    });
}

/// `close_streams` returns only once the rst of a stream dropped just before it has
/// left: a program that exits right after (here: the runtime is dropped at once)
/// does not cut it, on either transport. Then no stream opens.
#[test]
fn a_client_whose_streams_are_closed_has_sent_their_rsts_first() {
    use crate::transport::TransportKind;

    const ROUNDS: usize = 12;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("an address");
    let peer = std::thread::spawn(move || {
        (0..ROUNDS)
            .map(|_| crate::stream::tests::record_connection(&listener))
            .collect::<Vec<_>>()
    });
    for i in 0..ROUNDS {
        let mut config = ClientConfig::default();
        config.transport.kind = [TransportKind::Netpoll, TransportKind::Tokio][i % 2];
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let client = Client::builder("Test")
                .address(Address::Tcp(addr))
                .config(config)
                .build()
                .expect("a client");
            let open = |client: &Client| {
                let client = client.clone();
                async move {
                    let mut cx = ClientContext::new();
                    let req = StreamRequest::new("echo", Metadata::new());
                    client.open_stream::<Text, Text>(&mut cx, req).await
                }
            };
            drop(open(&client).await.expect("open"));
            tokio::time::timeout(Duration::from_secs(20), client.close_streams())
                .await
                .expect("close_streams returns once the connection is closed");
            if i == ROUNDS - 1 {
                // Checked last: the opening lets the runtime run other tasks.
                match open(&client).await {
                    Err(StreamError::Open { .. }) => {}
                    other => panic!("an opening after close_streams: {other:?}"),
                }
            }
        });
        drop(rt);
    }
    crate::stream::tests::assert_each_cancelled(peer.join().expect("the peer"));
}
