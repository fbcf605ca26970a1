//! Sessions against a lying peer, in one process: the attacker is a real session whose
//! test hooks write raw descriptor words into its ring, raw indices into the victim's
//! release ring and raw frames onto the socket; the victim must end with a typed
//! protocol error, without a panic and without reading outside its mappings.

use std::os::fd::AsRawFd;
use std::sync::Once;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use proptest::prelude::*;

use crate::desc::Desc;
use crate::handshake::Hello;
use crate::layout::{ClassSpec, Layout};
use crate::{Config, Error, Listener, Session, Violation};

static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Counts panics anywhere in this test binary (a reader task's panic would otherwise
/// only show as a session that never ends).
fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            prev(info);
        }));
    });
}

fn small() -> Config {
    Config::default()
        .region_size(64 << 10)
        .size_classes([(256, 1), (4096, 1)])
        .queue_capacity(16)
        .handshake_timeout(Duration::from_secs(2))
}

fn path(tag: &str) -> std::path::PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    std::env::temp_dir().join(format!(
        "shm-ipc-unit-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// (attacker = client, victim = server)
async fn pair() -> (Session, Session) {
    pair_with(small()).await
}

/// A client with `small()` and a server with `server`.
async fn pair_with(server: Config) -> (Session, Session) {
    count_panics();
    let p = path("pair");
    let l = Listener::bind(&p, server).unwrap();
    let (a, b) = tokio::join!(Session::connect(&p, small()), l.accept());
    (a.unwrap(), b.unwrap())
}

/// Waits (at most 5 s) for `s` to end with a protocol error.
async fn violation(s: &Session) -> Violation {
    let wait = async {
        loop {
            match s.error() {
                Some(Error::Protocol(v)) => return v,
                Some(e) => panic!("ended with {e:?}, not a protocol error"),
                None => tokio::time::sleep(Duration::from_millis(2)).await,
            }
        }
    };
    let v = tokio::time::timeout(Duration::from_secs(5), wait)
        .await
        .expect("the victim did not notice the lie");
    assert!(!s.is_open());
    v
}

fn data(stream: u32, slice: u32, len: u32, more: bool) -> [u64; 2] {
    Desc::Data {
        stream,
        slice,
        len,
        more,
    }
    .encode()
}

#[test]
fn handles_are_send_and_sync() {
    fn both<T: Send + Sync>() {}
    both::<Session>();
    both::<crate::Stream>();
    both::<Listener>();
    both::<crate::Message>();
    both::<Error>();
}

#[tokio::test]
async fn descriptor_lies_end_the_session() {
    let cases: Vec<([u64; 2], Violation)> = vec![
        (
            data(1, 1_000_000, 1, false),
            Violation::Descriptor("slice index out of range"),
        ),
        (
            data(1, 0, 257, false),
            Violation::Descriptor("length does not fit the slice"),
        ),
        ([0x7f | (1 << 32), 0], Violation::Descriptor("unknown kind")),
        (data(0, 0, 1, false), Violation::Descriptor("stream id 0")),
        // The victim's own parity, an id it never gave.
        (data(8, 0, 1, false), Violation::StreamId(8)),
    ];
    for (words, want) in cases {
        let (attacker, victim) = pair().await;
        attacker.inner().raw_push(words);
        assert_eq!(violation(&victim).await, want);
        assert!(victim.accept_stream().await.is_err());
    }
    assert_eq!(PANICS.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn the_same_slice_twice_is_a_lie() {
    let (attacker, victim) = pair().await;
    attacker.inner().raw_push(data(1, 0, 10, true));
    attacker.inner().raw_push(data(1, 0, 10, false));
    assert_eq!(
        violation(&victim).await,
        Violation::Descriptor("slice lent twice")
    );
}

#[tokio::test]
async fn lying_ring_tail_is_caught() {
    let (attacker, victim) = pair().await;
    // 17 entries claimed in a ring of 16.
    attacker.inner().raw_desc_tail(17);
    assert!(matches!(
        violation(&victim).await,
        Violation::RingIndex { .. }
    ));
}

#[tokio::test]
async fn lying_ring_head_fails_the_sender_and_ends_the_session() {
    let (attacker, victim) = pair().await;
    // The attacker, as the consumer of the victim's ring, claims to be ahead of it.
    attacker.inner().raw_peer_desc_head(5);
    let st = victim.open_stream().unwrap();
    let e = st.send(&b"x"[..]).await.unwrap_err();
    assert!(
        matches!(e, Error::Protocol(Violation::RingIndex { .. })),
        "{e:?}"
    );
    assert!(!victim.is_open());
}

#[tokio::test]
async fn streams_past_the_limit_are_refused() {
    let (client, server) = pair_with(small().max_streams(2)).await;
    let streams: Vec<_> = (0..3).map(|_| client.open_stream().unwrap()).collect();
    for s in &streams {
        s.send(&b"hi"[..]).await.unwrap();
    }
    // The third is closed by the server at once: its receiver ends.
    let third = tokio::time::timeout(Duration::from_secs(5), streams[2].recv()).await;
    assert!(third.unwrap().unwrap().is_none());
    for _ in 0..2 {
        let s = server.accept_stream().await.unwrap().unwrap();
        assert!(s.recv().await.unwrap().is_some());
    }
    assert!(server.is_open() && client.is_open());
}

/// A receiver that does not read: its inbox fills, then the session's reader waits, the
/// sender's ring fills and its sends wait; nothing grows. Reading lets everything
/// through, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_inbox_is_backpressure() {
    let (client, server) = pair_with(small().stream_inbox(2)).await;
    let st = client.open_stream().unwrap();
    let sender = tokio::spawn(async move {
        for i in 0..100u32 {
            st.send(&i.to_le_bytes()[..]).await.unwrap();
        }
        st
    });
    let theirs = server.accept_stream().await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !sender.is_finished(),
        "100 messages cannot all be in flight"
    );
    // Inbox (2) + the one the reader holds + a ring of 16: the rest waits at the sender.
    assert!(server.stats().held <= 3, "{:?}", server.stats());
    for i in 0..100u32 {
        let mut m = theirs.recv().await.unwrap().unwrap();
        assert_eq!(bytes::Buf::get_u32_le(&mut m), i);
    }
    tokio::time::timeout(Duration::from_secs(5), sender)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn release_of_a_slice_never_lent_is_caught() {
    let (attacker, victim) = pair().await;
    attacker.inner().raw_release(0);
    assert_eq!(
        violation(&victim).await,
        Violation::Release("slice was not lent")
    );
    let (attacker, victim) = pair().await;
    attacker.inner().raw_release(u64::MAX);
    assert_eq!(
        violation(&victim).await,
        Violation::Release("index out of range")
    );
}

#[tokio::test]
async fn frame_lies_end_the_session() {
    let cases: Vec<(Vec<u8>, Violation)> = vec![
        (vec![0x7f], Violation::Frame("unknown frame type")),
        (
            vec![2, 3, 0, 0, 0, 1, 2, 3],
            Violation::Frame("data frame without a descriptor"),
        ),
    ];
    for (bytes, want) in cases {
        let (attacker, victim) = pair().await;
        attacker.inner().raw_frame(&bytes).await;
        assert_eq!(violation(&victim).await, want);
    }
    // A socket descriptor, then a frame of another length: a little longer, or a
    // header claiming 4 GiB (refused without reserving it).
    for frame in [
        &[2, 5, 0, 0, 0, 1, 2, 3, 4, 5][..],
        &[2, 0xff, 0xff, 0xff, 0xff],
    ] {
        let (attacker, victim) = pair().await;
        attacker
            .inner()
            .raw_push(Desc::Socket { stream: 1, len: 4 }.encode());
        attacker.inner().raw_frame(frame).await;
        assert_eq!(
            violation(&victim).await,
            Violation::Frame("data frame length differs from its descriptor")
        );
    }
}

#[tokio::test]
async fn a_lie_after_good_traffic_still_fails_pending_receivers() {
    let (attacker, victim) = pair().await;
    let st = attacker.open_stream().unwrap();
    st.send(&b"fine"[..]).await.unwrap();
    let theirs = victim.accept_stream().await.unwrap().unwrap();
    let mut m = theirs.recv().await.unwrap().unwrap();
    assert_eq!(bytes::Buf::copy_to_bytes(&mut m, 4), &b"fine"[..]);
    let pending = tokio::spawn(async move { theirs.recv().await });
    attacker.inner().raw_push([0x7f | (1 << 32), 0]);
    violation(&victim).await;
    let r = tokio::time::timeout(Duration::from_secs(5), pending)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(r, Err(Error::Protocol(_))), "{r:?}");
}

/// A raw client: sends `hello` with `fds` attached, returns what `accept` said.
///
/// One that sends nothing is refused when the handshake times out, after 300 ms so
/// that the test is quick. One that sends a hello is refused for what it sent, which
/// is in the socket before `accept` starts: its timeout is one it never comes near,
/// so that a slow machine cannot turn the refusal into a timeout.
async fn raw_client(hello: &[u8], fds: &[std::os::fd::RawFd]) -> std::io::Error {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    count_panics();
    let p = path("hs");
    let timeout = if hello.is_empty() {
        Duration::from_millis(300)
    } else {
        Duration::from_secs(60)
    };
    let config = small().handshake_timeout(timeout);
    let l = Listener::bind(&p, config).unwrap();
    let c = std::os::unix::net::UnixStream::connect(&p).unwrap();
    if !hello.is_empty() {
        let cmsg = [ControlMessage::ScmRights(fds)];
        let cmsgs: &[ControlMessage<'_>] = if fds.is_empty() { &[] } else { &cmsg };
        sendmsg::<()>(
            c.as_raw_fd(),
            &[std::io::IoSlice::new(hello)],
            cmsgs,
            MsgFlags::empty(),
            None,
        )
        .unwrap();
    }
    let e = l
        .accept()
        .await
        .expect_err("a bad client must not make a session");
    drop(c);
    e
}

fn hello_for(layout: &Layout) -> Vec<u8> {
    Hello::new(layout, true).encode().to_vec()
}

#[tokio::test]
async fn bad_handshakes_are_refused() {
    let layout = small().layout().unwrap();
    let good_fd = crate::sys::sealed_memfd(layout.total).unwrap();
    let kind = |e: std::io::Error| (e.kind(), e.to_string());

    // Silence: the handshake times out.
    let (k, _) = kind(raw_client(&[], &[]).await);
    assert_eq!(k, std::io::ErrorKind::TimedOut);

    // Another version.
    let mut h = Hello::new(&layout, true);
    h.version = 9;
    let (k, msg) = kind(raw_client(&h.encode(), &[good_fd.as_raw_fd()]).await);
    assert_eq!(k, std::io::ErrorKind::InvalidData);
    assert!(msg.contains("version 9"), "{msg}");

    // Garbage.
    let (k, _) = kind(raw_client(&[0xAB; 96], &[]).await);
    assert_eq!(k, std::io::ErrorKind::InvalidData);

    // A layout that does not fit the memfd sent with it.
    let big = Layout::new(
        16,
        &[ClassSpec {
            size: 1 << 20,
            count: 64,
        }],
    )
    .unwrap();
    let (_, msg) = kind(raw_client(&hello_for(&big), &[good_fd.as_raw_fd()]).await);
    assert!(msg.contains("smaller than its layout"), "{msg}");

    // An fd that is not sealed (the peer could shrink it under our mapping).
    let plain = nix::sys::memfd::memfd_create(c"x", nix::sys::memfd::MFdFlags::empty()).unwrap();
    nix::unistd::ftruncate(&plain, layout.total as i64).unwrap();
    let (_, msg) = kind(raw_client(&hello_for(&layout), &[plain.as_raw_fd()]).await);
    assert!(msg.contains("sealed"), "{msg}");

    // No fd, then two fds.
    let (_, msg) = kind(raw_client(&hello_for(&layout), &[]).await);
    assert!(msg.contains("no region descriptor"), "{msg}");
    let (_, msg) = kind(
        raw_client(
            &hello_for(&layout),
            &[good_fd.as_raw_fd(), plain.as_raw_fd()],
        )
        .await,
    );
    assert!(msg.contains("more than one descriptor"), "{msg}");
    assert_eq!(PANICS.load(Ordering::SeqCst), 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Any descriptor words: the victim ends with a protocol error exactly when they do
    /// not decode (or name a stream of its own it never opened), and never panics.
    #[test]
    fn random_descriptors_never_panic(w0: u64, w1: u64, small_stream: bool) {
        // Keep some stream ids and slices in range so valid descriptors occur too.
        let w0 = if small_stream { (w0 & 0x0000_0003_0000_ffff) | (1 << 32) } else { w0 };
        let w1 = if small_stream { w1 & 0x0000_0fff_0000_0001 } else { w1 };
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (attacker, victim) = pair().await;
            let layout = small().layout().unwrap();
            let decoded = Desc::decode([w0, w1], &layout, small().max_message_len);
            attacker.inner().raw_push([w0, w1]);
            match decoded {
                Err(want) => assert_eq!(violation(&victim).await, want),
                Ok(_) => {
                    // Let the victim take it, then check it is alive or ended cleanly
                    // with a typed protocol error (e.g. a stream id of its own side).
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    if let Some(e) = victim.error() {
                        assert!(e.is_protocol(), "{e:?}");
                    }
                }
            }
        });
        prop_assert_eq!(PANICS.load(Ordering::SeqCst), 0);
    }
}

/// A client that connects and says nothing does not hold up the next one: its
/// handshake waits on its own while the good client's session is accepted.
#[tokio::test]
async fn a_silent_client_does_not_block_the_next_one() {
    count_panics();
    let p = path("silent");
    let l = Listener::bind(&p, small().handshake_timeout(Duration::from_secs(30))).unwrap();
    let silent = std::os::unix::net::UnixStream::connect(&p).unwrap();
    let (client, server) = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(Session::connect(&p, small()), l.accept())
    })
    .await
    .expect("the good client waited behind the silent one");
    let (client, server) = (client.unwrap(), server.unwrap());
    let s = client.open_stream().unwrap();
    s.send(&b"hi"[..]).await.unwrap();
    let got = server.accept_stream().await.unwrap().unwrap();
    assert_eq!(got.recv().await.unwrap().unwrap().into_bytes(), &b"hi"[..]);
    drop(silent);
    assert_eq!(PANICS.load(Ordering::SeqCst), 0);
}

/// Waits (at most 5 s) until `cond` holds.
async fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let wait = async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), wait)
        .await
        .unwrap_or_else(|_| panic!("waited in vain: {what}"));
}

/// The next message of `stream`, whole.
async fn received(stream: &crate::Stream) -> Vec<u8> {
    let msg = stream.recv().await.unwrap().expect("a message");
    msg.into_chunks().concat()
}

/// Sends `msg` on `from` and checks that `to` receives it.
async fn pass(from: &crate::Stream, to: &crate::Stream, msg: &[u8]) {
    from.send(msg).await.unwrap();
    assert_eq!(received(to).await, msg);
}

/// A client's reader that parked with nothing due gets up when a reply becomes due: a
/// message nobody waits for finds it parked (the server sends a wake-up); the answer
/// to a call made with a reply due finds it polling (no wake-up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_due_reply_gets_a_parked_client_reader_up_to_poll_for_it() {
    count_panics();
    // A window longer than the exchanges below: a reader that polls keeps polling
    // while they run; one with nothing to do parks when the window is over.
    let config = small().spin(Duration::from_secs(1));
    let p = path("due");
    let l = Listener::bind(&p, config.clone()).unwrap();
    let (client, server) = tokio::join!(Session::connect(&p, config), l.accept());
    let (client, server) = (client.unwrap(), server.unwrap());
    let parked = |s: &Session| s.inner().mine.parked().load(Ordering::SeqCst) == 1;
    wait_until("the idle client parks", || parked(&client)).await;

    let c = client.open_stream().unwrap();
    c.send(&b"hello"[..]).await.unwrap();
    let s = server.accept_stream().await.unwrap().unwrap();
    assert_eq!(received(&s).await, b"hello");
    pass(&s, &c, b"unasked").await;
    assert_eq!(
        server.stats().wakes,
        1,
        "the unasked message woke the client"
    );

    wait_until("the client parks again", || parked(&client)).await;
    let due = client.reply_due();
    wait_until("the client's reader gets up", || !parked(&client)).await;
    pass(&c, &s, b"call").await;
    pass(&s, &c, b"answer").await;
    assert_eq!(
        server.stats().wakes,
        1,
        "the answer found the reader polling"
    );
    drop(due);
    assert_eq!(PANICS.load(Ordering::SeqCst), 0);
    let _ = std::fs::remove_file(&p);
}

/// Two sessions, one of each `futex_wake` setting on each side, each reader parked
/// before every message: every wake-up that reaches a reader parked on its futex is a
/// `FUTEX_WAKE` (no byte on the socket), every one to a reader parked on the socket a
/// byte; messages flow both ways either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_reader_is_woken_the_way_its_hello_asked() {
    count_panics();
    for (client_futex, server_futex) in [(true, true), (false, true), (true, false)] {
        // No window: an idle reader parks as soon as it has yielded once.
        let config = |futex| small().spin(Duration::ZERO).futex_wake(futex);
        let p = path("futex");
        let l = Listener::bind(&p, config(server_futex)).unwrap();
        let (client, server) = tokio::join!(Session::connect(&p, config(client_futex)), l.accept());
        let (client, server) = (client.unwrap(), server.unwrap());
        let parked = |s: &Session| s.inner().mine.parked().load(Ordering::SeqCst) == 1;
        let c = client.open_stream().unwrap();
        wait_until("the idle server parks", || parked(&server)).await;
        c.send(&b"first"[..]).await.unwrap();
        let s = server.accept_stream().await.unwrap().unwrap();
        assert_eq!(received(&s).await, b"first");
        for round in 0..3u8 {
            wait_until("the client parks", || parked(&client)).await;
            pass(&s, &c, &[b'a', round]).await;
            wait_until("the server parks", || parked(&server)).await;
            pass(&c, &s, &[b'b', round]).await;
        }
        let (to_server, to_client) = (client.stats(), server.stats());
        let what = format!("client futex {client_futex}, server futex {server_futex}");
        assert_eq!(
            to_server.wakes, 4,
            "{what}: every message found the server parked"
        );
        assert_eq!(
            to_client.wakes, 3,
            "{what}: every message found the client parked"
        );
        let bytes = |futex: bool, wakes: u64| if futex { 0 } else { wakes };
        assert_eq!(to_server.wake_bytes, bytes(server_futex, 4), "{what}");
        assert_eq!(to_client.wake_bytes, bytes(client_futex, 3), "{what}");
        client.close();
        let _ = std::fs::remove_file(&p);
    }
    assert_eq!(PANICS.load(Ordering::SeqCst), 0);
}
