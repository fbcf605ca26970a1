//! Failure behaviours: partial writes under a tiny send buffer, the peer closing in the
//! middle of a write or of a read, a slow consumer with bounded memory, slots reused by
//! connection churn, and the same over Unix-domain sockets.
//!
//! The far end is usually a plain blocking std socket driven from `spawn_blocking`, so
//! its timing (slow reads, closes at chosen points) is under the test's control. Every
//! such socket has read and write timeouts, so no test can hang on it.

mod common;

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use common::*;
use netpoll_rs::{BufferSizes, Config, Connection, Listener, Reactor, SocketOptions};
use nix::sys::socket::MsgFlags;

/// How long a blocking peer waits for any one read or write before failing.
const PEER_TIMEOUT: Duration = Duration::from_secs(20);

/// The far end of a connection: a plain blocking socket.
trait Peer: Read + Write + Send + 'static {
    fn shutdown_write(&self);
    fn set_timeouts(&self);
    /// Writes the last bytes before a close. Over TCP they go with `MSG_MORE`, so their
    /// final segment waits and leaves with the FIN: the end of stream then arrives
    /// together with the data, not after it.
    fn write_last(&mut self, data: &[u8]);
}

impl Peer for TcpStream {
    fn write_last(&mut self, mut data: &[u8]) {
        let more = MsgFlags::from_bits_retain(nix::libc::MSG_MORE);
        while !data.is_empty() {
            let n = nix::sys::socket::send(self.as_raw_fd(), data, more).expect("send");
            data = &data[n..];
        }
    }
    fn shutdown_write(&self) {
        self.shutdown(Shutdown::Write).unwrap();
    }
    fn set_timeouts(&self) {
        self.set_read_timeout(Some(PEER_TIMEOUT)).unwrap();
        self.set_write_timeout(Some(PEER_TIMEOUT)).unwrap();
    }
}

impl Peer for UnixStream {
    fn write_last(&mut self, data: &[u8]) {
        self.write_all(data).unwrap();
    }
    fn shutdown_write(&self) {
        self.shutdown(Shutdown::Write).unwrap();
    }
    fn set_timeouts(&self) {
        self.set_read_timeout(Some(PEER_TIMEOUT)).unwrap();
        self.set_write_timeout(Some(PEER_TIMEOUT)).unwrap();
    }
}

/// A connection on `reactor` (with `SO_SNDBUF` = `send_buffer` when given) and the
/// blocking TCP socket at its other end (with `SO_RCVBUF` = `peer_recv_buffer`, set on
/// its listener before the connection exists, when given).
fn tcp_pair(
    reactor: &Reactor,
    send_buffer: Option<usize>,
    peer_recv_buffer: Option<usize>,
) -> (Connection, TcpStream) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    if let Some(n) = peer_recv_buffer {
        set_recv_buffer(&listener, n);
    }
    let options = SocketOptions {
        buffers: BufferSizes {
            send: send_buffer,
            recv: None,
        },
        ..SocketOptions::default()
    };
    let conn = reactor
        .connect_tcp_with(
            listener.local_addr().unwrap(),
            Duration::from_secs(5),
            options,
        )
        .unwrap();
    // The connection is established: it waits in the backlog, so this does not block.
    let (peer, _) = listener.accept().unwrap();
    peer.set_timeouts();
    (conn, peer)
}

/// A Unix-domain connection on `reactor` and the blocking socket at its other end.
fn unix_pair(reactor: &Reactor, dir: &TempDir, name: &str) -> (Connection, UnixStream) {
    let path = dir.path(name);
    let listener = UnixListener::bind(&path).unwrap();
    let conn = reactor.connect_unix(&path, Duration::from_secs(5)).unwrap();
    let (peer, _) = listener.accept().unwrap();
    peer.set_timeouts();
    (conn, peer)
}

/// Frames of many sizes (`count` of them, about `avg` body bytes each), each body a
/// pattern seeded by its index.
fn mixed_frames(count: usize, avg: usize) -> Vec<Bytes> {
    (0..count)
        .map(|i| frame(&pattern((i * 7919) % (2 * avg + 1), i as u8)))
        .collect()
}

/// Reads until end of stream, slowly: `chunk` bytes per read, a 1 ms pause every
/// `pause_every` reads, once `go` says so.
fn slow_read_to_end(
    mut peer: impl Peer,
    go: std::sync::mpsc::Receiver<()>,
    chunk: usize,
    pause_every: usize,
) -> Vec<u8> {
    go.recv_timeout(PEER_TIMEOUT).expect("the go to read");
    let mut got = Vec::new();
    let mut buf = vec![0u8; chunk];
    for reads in 1.. {
        let n = peer.read(&mut buf).expect("the slow reader's read");
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        if reads % pause_every == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    got
}

/// Flushes an output that cannot fit in the socket and checks that the WRITABLE path
/// finished it: the first poll writes what fits and is pending with output left; then
/// the reader is told to `go`, and while the flush is not polled again (so the caller
/// writes nothing), the output shrinks, which only the poller's write on WRITABLE can
/// do; then the flush resolves.
async fn flush_finished_by_the_poller(conn: &Connection, go: std::sync::mpsc::Sender<()>) {
    let mut flush = Box::pin(conn.flush());
    let first = poll_once(&mut flush).await;
    assert!(
        first.is_pending(),
        "the first flush poll sent everything: the socket never filled up ({first:?})"
    );
    let left = conn.output_len();
    assert!(left > 0, "a pending flush with no output left");
    go.send(()).expect("the reader waits");
    wait_until(20, "the poller sends more of a pending output", || {
        conn.output_len() < left
    })
    .await;
    flush.await.expect("the flush");
    assert_eq!(conn.output_len(), 0);
}

/// Queues `frames` (alternately zero-copy and copied into the output), flushes through
/// a slow reader, half-closes, and checks that the reader got exactly the frames' bytes.
async fn partial_writes_deliver_every_byte_once(
    conn: Connection,
    peer: impl Peer,
    frames: Vec<Bytes>,
) {
    let expected: Vec<u8> = frames.concat();
    // The reader starts once the first flush poll is pending: nothing is read before,
    // so that poll surely fills the socket.
    let (go, go_rx) = std::sync::mpsc::channel();
    let reader = tokio::task::spawn_blocking(move || slow_read_to_end(peer, go_rx, 4096, 32));
    for (i, f) in frames.into_iter().enumerate() {
        if i % 3 == 2 {
            conn.write_with(|out| out.write(&f));
        } else {
            conn.write(f);
        }
    }
    assert_eq!(conn.output_len(), expected.len());
    flush_finished_by_the_poller(&conn, go).await;
    conn.close_write().await.expect("close_write");
    let got = reader.await.unwrap();
    assert_eq!(
        first_difference(&got, &expected),
        None,
        "received {} bytes, sent {}: they differ from this offset on",
        got.len(),
        expected.len()
    );
}

#[test]
fn tiny_send_buffer_one_big_frame_arrives_whole_after_partial_writes() {
    let reactor = reactor(Config::default());
    run(60, async {
        let (conn, peer) = tcp_pair(&reactor, Some(4096), Some(4096));
        let frames = vec![frame(&pattern(4 << 20, 1))];
        partial_writes_deliver_every_byte_once(conn, peer, frames).await;
    });
    reactor.shutdown();
}

#[test]
fn tiny_send_buffer_many_small_frames_arrive_whole_after_partial_writes() {
    let reactor = reactor(Config::default());
    run(60, async {
        let (conn, peer) = tcp_pair(&reactor, Some(4096), Some(4096));
        // About 3 MiB in 20 000 frames: many more nodes than one writev takes.
        let frames = mixed_frames(20_000, 150);
        partial_writes_deliver_every_byte_once(conn, peer, frames).await;
    });
    reactor.shutdown();
}

#[test]
fn unix_socket_one_big_frame_arrives_whole_after_partial_writes() {
    let dir = TempDir::new("partial-writes");
    let reactor = reactor(Config::default());
    run(60, async {
        let (conn, peer) = unix_pair(&reactor, &dir, "s");
        let frames = vec![frame(&pattern(4 << 20, 2))];
        partial_writes_deliver_every_byte_once(conn, peer, frames).await;
    });
    reactor.shutdown();
}

/// The peer reads a little of a large output and closes while the flush is pending: the
/// flush fails (within the time bound), and so does every later call.
async fn peer_close_mid_write_fails_the_flush(conn: Connection, mut peer: impl Peer) {
    let body = pattern(8 << 20, 3);
    conn.write(frame(&body));
    let peer_task = tokio::task::spawn_blocking(move || {
        std::thread::sleep(Duration::from_millis(50));
        let mut head = vec![0u8; 64 * 1024];
        peer.read_exact(&mut head).expect("the peer's read");
        // Closing with unread data in its buffer: the peer's end is gone.
        drop(peer);
        head
    });
    let mut flush = Box::pin(conn.flush());
    assert!(
        poll_once(&mut flush).await.is_pending(),
        "8 MiB fit in the socket: the flush was not in progress when the peer closed"
    );
    let err = tokio::time::timeout(Duration::from_secs(10), flush)
        .await
        .expect("the flush hangs after the peer closed")
        .expect_err("the flush succeeded although the peer closed mid-write");
    assert!(
        matches!(
            err.kind(),
            io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
        ),
        "unexpected flush error {err:?}"
    );
    let head = peer_task.await.unwrap();
    assert_eq!(&head[..4], &(body.len() as u32).to_be_bytes());
    assert_eq!(&head[4..], &body[..head.len() - 4]);

    // The error stays: every later call fails at once, with the same kind.
    for _ in 0..3 {
        let again = conn.flush().await.expect_err("a later flush succeeded");
        assert_eq!(again.kind(), err.kind());
    }
    conn.write(frame(b"more"));
    assert_eq!(
        conn.flush()
            .await
            .expect_err("a flush of new output succeeded")
            .kind(),
        err.kind()
    );
    assert!(conn.close_write().await.is_err());
    assert!(conn.read_frame(frame_len).await.is_err());
    conn.close();
    assert!(!conn.is_open());
    assert!(conn.flush().await.is_err());
    assert!(conn.read_frame(frame_len).await.is_err());
}

#[test]
fn peer_closing_mid_write_fails_the_flush_and_every_later_call() {
    let reactor = reactor(Config::default());
    run(60, async {
        let (conn, peer) = tcp_pair(&reactor, Some(16 * 1024), Some(16 * 1024));
        peer_close_mid_write_fails_the_flush(conn, peer).await;
    });
    reactor.shutdown();
}

#[test]
fn unix_peer_closing_mid_write_fails_the_flush_and_every_later_call() {
    let dir = TempDir::new("close-mid-write");
    let reactor = reactor(Config::default());
    run(60, async {
        let (conn, peer) = unix_pair(&reactor, &dir, "s");
        peer_close_mid_write_fails_the_flush(conn, peer).await;
    });
    reactor.shutdown();
}

/// The peer sends one whole frame and half of the next, then closes: the whole frame
/// comes out, then `UnexpectedEof` (and again on the next call). With `reader_first`,
/// the reader is already waiting when the bytes and the close arrive; otherwise they
/// are all in before the first read. With `close_with_data` the close travels with the
/// bytes ([`Peer::write_last`]); otherwise it follows them 20 ms later.
async fn peer_close_mid_frame(
    conn: Connection,
    mut peer: impl Peer,
    reader_first: bool,
    close_with_data: bool,
) {
    let whole = frame(&pattern(3000, 4));
    let next = frame(&pattern(3000, 5));
    let mut wire = whole.to_vec();
    wire.extend_from_slice(&next[..next.len() / 2]);
    let send = move || {
        if close_with_data {
            peer.write_last(&wire);
        } else {
            peer.write_all(&wire).unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(peer);
    };
    if reader_first {
        let sender = tokio::task::spawn_blocking(move || {
            std::thread::sleep(Duration::from_millis(50));
            send();
        });
        let got = within(10, "the whole frame", conn.read_frame(frame_len)).await;
        assert_eq!(got.unwrap(), Some(whole));
        sender.await.unwrap();
    } else {
        send();
        let got = within(10, "the whole frame", conn.read_frame(frame_len)).await;
        assert_eq!(got.unwrap(), Some(whole));
    }
    for _ in 0..2 {
        let what = format!(
            "the end of stream in the middle of a frame (reader first: {reader_first}, \
             close with the data: {close_with_data})"
        );
        let err = within(10, &what, conn.read_frame(frame_len))
            .await
            .expect_err("a frame cut by the close was not reported");
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{err:?}");
    }
}

#[test]
fn peer_closing_mid_frame_gives_the_whole_frame_then_unexpected_eof() {
    let reactor = reactor(Config::default());
    run(30, async {
        for (reader_first, close_with_data) in
            [(false, false), (false, true), (true, false), (true, true)]
        {
            let (conn, peer) = tcp_pair(&reactor, None, None);
            peer_close_mid_frame(conn, peer, reader_first, close_with_data).await;
        }
    });
    reactor.shutdown();
}

#[test]
fn unix_peer_closing_mid_frame_gives_the_whole_frame_then_unexpected_eof() {
    let dir = TempDir::new("close-mid-frame");
    let reactor = reactor(Config::default());
    run(30, async {
        for (reader_first, close_with_data) in
            [(false, false), (false, true), (true, false), (true, true)]
        {
            let name = format!("s-{reader_first}-{close_with_data}");
            let (conn, peer) = unix_pair(&reactor, &dir, &name);
            peer_close_mid_frame(conn, peer, reader_first, close_with_data).await;
        }
    });
    reactor.shutdown();
}

/// Reads `frames` from `conn` in order, then end of stream (twice); `case` names the
/// case in failures.
async fn expect_frames_then_end(conn: &Connection, frames: &[Bytes], case: &str) {
    expect_frames(conn, frames, case).await;
    expect_end(conn, case).await;
}

/// Reads `frames` from `conn` in order.
async fn expect_frames(conn: &Connection, frames: &[Bytes], case: &str) {
    for (i, want) in frames.iter().enumerate() {
        let what = format!("frame {i} ({case})");
        let got = within(10, &what, conn.read_frame(frame_len))
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(got.as_ref(), Some(want), "{what}");
    }
}

/// Reads end of stream from `conn`, twice.
async fn expect_end(conn: &Connection, case: &str) {
    for _ in 0..2 {
        let what = format!("the end of stream ({case})");
        let end = within(10, &what, conn.read_frame(frame_len)).await;
        assert_eq!(end.unwrap(), None, "{what}");
    }
    assert_eq!(conn.input_len(), 0);
}

/// About 2 MiB: many small frames and a few of 200 KiB.
fn frames_with_some_big_ones() -> Vec<Bytes> {
    (0..300)
        .map(|i| {
            let len = if i % 50 == 7 {
                200 * 1024
            } else {
                (i * 37) % 5000
            };
            frame(&pattern(len, i as u8))
        })
        .collect()
}

/// The peer sends every frame and closes completely before the first read: all of them
/// are still delivered, then end of stream. With `close_with_data` the close travels
/// with the last frame ([`Peer::write_last`]); otherwise it follows 20 ms later.
async fn frames_before_close_are_delivered(
    conn: Connection,
    mut peer: impl Peer,
    close_with_data: bool,
) {
    let frames = frames_with_some_big_ones();
    let (last, rest) = frames.split_last().unwrap();
    let (last, rest) = (last.clone(), rest.concat());
    tokio::task::spawn_blocking(move || {
        peer.write_all(&rest).unwrap();
        if close_with_data {
            peer.write_last(&last);
        } else {
            peer.write_all(&last).unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(peer);
    })
    .await
    .unwrap();
    let what = format!("close with the data: {close_with_data}");
    expect_frames_then_end(&conn, &frames, &what).await;
}

#[test]
fn frames_sent_before_the_peer_closes_are_delivered_then_end_of_stream() {
    let reactor = reactor(Config::default());
    run(30, async {
        for close_with_data in [false, true] {
            let (conn, peer) = tcp_pair(&reactor, None, None);
            frames_before_close_are_delivered(conn, peer, close_with_data).await;
        }
    });
    reactor.shutdown();
}

#[test]
fn unix_frames_sent_before_the_peer_closes_are_delivered_then_end_of_stream() {
    let dir = TempDir::new("close-after-frames");
    let reactor = reactor(Config::default());
    run(30, async {
        for close_with_data in [false, true] {
            let (conn, peer) = unix_pair(&reactor, &dir, &format!("s-{close_with_data}"));
            frames_before_close_are_delivered(conn, peer, close_with_data).await;
        }
    });
    reactor.shutdown();
}

#[test]
fn frames_sent_before_the_peer_half_closes_are_delivered_and_the_answer_still_goes_out() {
    let reactor = reactor(Config::default());
    run(30, async {
        let (conn, mut peer) = tcp_pair(&reactor, None, None);
        let frames = frames_with_some_big_ones();
        let (last, rest) = frames.split_last().unwrap();
        let (last, rest) = (last.clone(), rest.concat());
        let answer = frame(&pattern(1 << 20, 6));
        let expected_answer = answer.clone();
        // The last frame goes once the others are all taken, on an idle connection, and
        // the FIN leaves with it.
        let (go, go_rx) = std::sync::mpsc::channel::<()>();
        let peer_task = tokio::task::spawn_blocking(move || {
            peer.write_all(&rest).unwrap();
            go_rx.recv_timeout(PEER_TIMEOUT).unwrap();
            peer.write_last(&last);
            peer.shutdown_write();
            let mut got = Vec::new();
            peer.read_to_end(&mut got).unwrap();
            got
        });
        let case = "half-closed with the last frame";
        let (last, rest) = frames.split_last().unwrap();
        expect_frames(&conn, rest, case).await;
        go.send(()).unwrap();
        expect_frames_then_end(&conn, std::slice::from_ref(last), case).await;
        // Only the peer's sending side is closed: ours still works.
        conn.write(answer);
        conn.close_write()
            .await
            .expect("the answer after end of stream");
        let got = peer_task.await.unwrap();
        assert_eq!(first_difference(&got, &expected_answer), None);
    });
    reactor.shutdown();
}

#[test]
fn end_of_stream_behind_the_high_water_mark_comes_after_every_frame() {
    // The peer sends much more than the high-water mark and closes; the connection
    // stops reading at the mark, so the end of stream waits in the kernel behind
    // megabytes of frames that the slow consumer takes a few at a time.
    let reactor = reactor(Config {
        input_high_water: 64 * 1024,
        read_chunk: 16 * 1024,
        ..Config::default()
    });
    run(60, async {
        let (conn, mut peer) = tcp_pair(&reactor, None, None);
        let frames = mixed_frames(8000, 250);
        let wire = frames.concat();
        let writer = tokio::task::spawn_blocking(move || {
            peer.write_all(&wire).unwrap();
            drop(peer);
        });
        for (i, want) in frames.iter().enumerate() {
            if i % 500 == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let got = within(10, &format!("frame {i}"), conn.read_frame(frame_len)).await;
            assert_eq!(got.unwrap().as_ref(), Some(want), "frame {i}");
        }
        let end = within(10, "the end of stream", conn.read_frame(frame_len)).await;
        assert_eq!(end.unwrap(), None);
        writer.await.unwrap();
    });
    reactor.shutdown();
}

/// Appends the slow-consumer test's next frame to `out`: a `u32` index, then
/// `index as u8` repeated, in a body of 100 to 400 bytes.
fn push_indexed_frame(out: &mut BytesMut, index: u32) {
    let len = indexed_frame_body_len(index);
    out.put_u32(len as u32);
    out.put_u32(index);
    out.put_bytes(index as u8, len - 4);
}

fn indexed_frame_body_len(index: u32) -> usize {
    100 + (index as usize * 7919) % 301
}

#[test]
fn slow_consumer_input_stays_under_the_high_water_mark_plus_one_read_chunk() {
    const HIGH_WATER: usize = 256 * 1024;
    const READ_CHUNK: usize = 64 * 1024;
    const TOTAL: usize = 32 << 20;
    /// Sent alone first (see below).
    const FIRST: usize = 200 * 1024;
    let config = Config {
        input_high_water: HIGH_WATER,
        read_chunk: READ_CHUNK,
        // Under io_uring the input passes the mark by the ring's buffers at most:
        // 4 x 16 KiB, as much as one read under epoll.
        ring_buffers: 4,
        ring_buffer_size: READ_CHUNK / 4,
        ..Config::default()
    };
    // `fill` checks the limit before every read and stops at the mark, and a read asks
    // the kernel for `read_chunk` bytes (`Config::read_chunk`), so one read at most lands
    // above the mark: `reads_per_turn` does not enter into it.
    let bound = HIGH_WATER + READ_CHUNK;
    let reactor = reactor(config);
    run(120, async {
        let listener = reactor.listen_tcp("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        // The writer sends the first 200 KiB alone and the rest once they are all in the
        // input, so the reads that reach the mark start from a partly filled input
        // buffer with the kernel holding plenty: a read asking for more than
        // `read_chunk` would show. Then it writes as fast as it can, in batches of about
        // 64 KiB, and closes.
        let (go, go_rx) = std::sync::mpsc::channel::<()>();
        let writer = tokio::task::spawn_blocking(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_timeouts();
            let mut index = 0u32;
            let mut pending = BytesMut::new();
            while pending.len() < FIRST {
                push_indexed_frame(&mut pending, index);
                index += 1;
            }
            s.write_all(&pending.split_to(FIRST)).unwrap();
            go_rx.recv_timeout(PEER_TIMEOUT).unwrap();
            let mut sent = FIRST;
            while sent < TOTAL {
                while pending.len() < 64 * 1024 {
                    push_indexed_frame(&mut pending, index);
                    index += 1;
                }
                s.write_all(&pending).unwrap();
                sent += pending.len();
                pending.clear();
            }
            index
        });
        let conn = listener.accept().await.unwrap();
        wait_until(20, "the first 200 KiB are in the input", || {
            conn.input_len() == FIRST
        })
        .await;
        go.send(()).unwrap();

        // Nobody reads: the input fills up to the mark and stays there.
        let mut max = 0;
        wait_until(20, "the input reaches the high-water mark", || {
            let n = conn.input_len();
            max = max.max(n);
            n >= HIGH_WATER
        })
        .await;
        let paused_at = conn.input_len();
        for _ in 0..300 {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let n = conn.input_len();
            max = max.max(n);
            assert_eq!(
                n, paused_at,
                "the connection read on above the high-water mark"
            );
        }
        assert!(
            !writer.is_finished(),
            "32 MiB fit in the kernel: the writer was never held back"
        );
        assert!(
            max <= bound,
            "{max} bytes of unconsumed input while nobody read, more than the mark \
             {HIGH_WATER} plus one read of {READ_CHUNK}"
        );

        // Now consume everything, checking every frame.
        let mut index = 0u32;
        while let Some(f) = within(
            10,
            &format!("frame {index} or the end of stream"),
            conn.read_frame(frame_len),
        )
        .await
        .unwrap()
        {
            max = max.max(conn.input_len());
            let len = indexed_frame_body_len(index);
            assert_eq!(f.len(), 4 + len, "frame {index}");
            assert_eq!(&f[4..8], &index.to_be_bytes(), "frame {index}");
            assert!(f[8..].iter().all(|&b| b == index as u8), "frame {index}");
            index += 1;
            assert!(
                max <= bound,
                "{max} bytes of unconsumed input at frame {index}, more than the mark \
                 {HIGH_WATER} plus one read of {READ_CHUNK}"
            );
        }
        let sent = writer.await.unwrap();
        assert_eq!(index, sent, "frames received, frames sent");
    });
    reactor.shutdown();
}

/// Serves echo on every connection `listener` accepts, until it closes; counts the
/// connections served.
fn serve_echo(listener: Arc<Listener>, served: Arc<AtomicUsize>) {
    tokio::spawn(async move {
        while let Ok(conn) = listener.accept().await {
            served.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                while let Ok(Some(f)) = conn.read_frame(frame_len).await {
                    conn.write(f);
                    if conn.flush().await.is_err() {
                        return;
                    }
                }
            });
        }
    });
}

/// A churning connection's frame: its number, then 0xEE bytes.
fn churn_frame(i: u32) -> Bytes {
    let mut body = vec![0xEE; 64 + (i as usize % 200)];
    body[..4].copy_from_slice(&i.to_be_bytes());
    frame(&body)
}

#[test]
fn connection_churn_never_mixes_bytes_into_a_long_lived_connection() {
    const CHURN: u32 = 1500;
    let reactor = reactor(Config {
        pollers: 2,
        ..Config::default()
    });
    run(120, async {
        let listener = Arc::new(reactor.listen_tcp("127.0.0.1:0".parse().unwrap()).unwrap());
        let addr = listener.local_addr().unwrap();
        let served = Arc::new(AtomicUsize::new(0));
        serve_echo(Arc::clone(&listener), Arc::clone(&served));
        let long = reactor.connect_tcp(addr, Duration::from_secs(5)).unwrap();

        // Connections that live a moment, so their slots (and fds) are reused while
        // events for them may still be queued: some echo once, some close with their
        // echo in flight, some (plain sockets) reset the connection.
        let churn_reactor = reactor.clone();
        let churn = tokio::spawn(async move {
            for i in 0..CHURN {
                match i % 3 {
                    0 => {
                        let c = churn_reactor
                            .connect_tcp(addr, Duration::from_secs(5))
                            .unwrap();
                        c.write(churn_frame(i));
                        c.flush().await.unwrap();
                        let back = c.read_frame(frame_len).await.unwrap();
                        assert_eq!(back, Some(churn_frame(i)), "churning connection {i}");
                    }
                    1 => {
                        let c = churn_reactor
                            .connect_tcp(addr, Duration::from_secs(5))
                            .unwrap();
                        c.write(churn_frame(i));
                        c.flush().await.unwrap();
                    }
                    _ => {
                        let mut s = TcpStream::connect(addr).unwrap();
                        s.set_timeouts();
                        let linger = nix::sys::socket::sockopt::Linger;
                        let reset = nix::libc::linger {
                            l_onoff: 1,
                            l_linger: 0,
                        };
                        nix::sys::socket::setsockopt(&s, linger, &reset).unwrap();
                        s.write_all(&churn_frame(i)).unwrap();
                    }
                }
                if i % 50 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        });

        // The long-lived connection echoes all along, and only ever gets its own bytes.
        let mut round = 0u32;
        while !churn.is_finished() || round < 200 {
            let body = pattern(16 + (round as usize * 131) % 4000, round as u8);
            long.write(frame(&body));
            long.flush().await.unwrap();
            let back = long.read_frame(frame_len).await.unwrap().unwrap();
            assert_eq!(&back[4..], &body[..], "round {round}");
            assert_eq!(long.input_len(), 0, "stray bytes after round {round}");
            round += 1;
        }
        churn.await.unwrap();
        // Every churning connection is accepted (a reset one too: the kernel hands it
        // out) and then gone from the slabs: the listener and the two ends of the
        // long-lived connection are left.
        wait_until(
            20,
            "every churning connection is served and unregistered",
            || served.load(Ordering::Relaxed) == CHURN as usize + 1 && reactor.socket_count() == 3,
        )
        .await;
        long.write(frame(b"still here"));
        long.flush().await.unwrap();
        assert_eq!(
            long.read_frame(frame_len).await.unwrap(),
            Some(frame(b"still here"))
        );
        listener.close();
    });
    reactor.shutdown();
}

/// Connects time out: over TCP to an address that drops SYNs is not reachable from a
/// loopback-only test, but a Unix listener whose backlog is full makes a connect wait
/// the same way, and `connect_unix` gives up after its timeout with `TimedOut`. Once
/// the listener accepts, there is room again.
#[test]
fn a_unix_connect_to_a_full_backlog_times_out() {
    use nix::sys::socket::{
        AddressFamily, Backlog, SockFlag, SockType, UnixAddr, accept, bind, listen, socket,
    };
    let dir = TempDir::new("full-backlog");
    let path = dir.path("s");
    let listener = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap();
    bind(listener.as_raw_fd(), &UnixAddr::new(&path).unwrap()).unwrap();
    listen(&listener, Backlog::new(1).unwrap()).unwrap();
    let reactor = reactor(Config::default());
    let mut waiting = Vec::new();
    let timed_out = loop {
        match reactor.connect_unix(&path, Duration::from_millis(50)) {
            Ok(conn) => waiting.push(conn),
            Err(e) => break e,
        }
        assert!(waiting.len() < 64, "the backlog never filled");
    };
    assert_eq!(timed_out.kind(), io::ErrorKind::TimedOut, "{timed_out}");
    // Room again: one accepted connection leaves the backlog.
    let accepted = accept(listener.as_raw_fd()).unwrap();
    let conn = reactor
        .connect_unix(&path, Duration::from_secs(5))
        .expect("a connect once the backlog has room");
    assert!(conn.is_open());
    nix::unistd::close(accepted).unwrap();
    drop(waiting);
    reactor.shutdown();
}
