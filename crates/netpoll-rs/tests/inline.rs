//! Handlers on the poller (`Connection::serve_inline`): frames at every split point, the
//! peer's close and the handler's, a panicking handler, output bounded when the peer does
//! not read, input that came before the handler, frames above the high-water mark, a
//! closed loop with both ends inline, the reactor's shutdown, and the handle that
//! resumes or closes an inline connection from elsewhere.
//!
//! The far end is usually a plain blocking std socket with timeouts, driven from
//! `spawn_blocking`, so no test can hang on it.

mod common;

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use common::*;
use netpoll_rs::{Config, Connection, Handler, Io, Listener, Reactor};
use tokio::sync::mpsc;

/// How long a blocking peer waits for any one read or write before failing.
const PEER_TIMEOUT: Duration = Duration::from_secs(20);

/// How a connection ended, as `on_close` saw it.
type Closed = Option<io::ErrorKind>;

/// An echo server's handler: sends back every whole frame, and reports its close.
struct Echo {
    closed: mpsc::UnboundedSender<Closed>,
    /// Close the connection after this many frames.
    close_after: Option<usize>,
    /// Panic on a frame whose body starts with this byte.
    panic_on: Option<u8>,
    /// Ask for a frame's whole length when it is not all there yet (`Io::need`).
    need: bool,
    frames: usize,
    /// The most output and input left queued when `on_input` returned.
    max_output: Arc<AtomicUsize>,
    max_input: Arc<AtomicUsize>,
}

impl Echo {
    fn new(closed: mpsc::UnboundedSender<Closed>) -> Echo {
        Echo {
            closed,
            close_after: None,
            panic_on: None,
            need: false,
            frames: 0,
            max_output: Arc::default(),
            max_input: Arc::default(),
        }
    }
}

impl Handler for Echo {
    fn on_input(&mut self, io: &mut Io<'_>) {
        while let Ok(Some(len)) = frame_len(io.input()) {
            if io.input().len() < len {
                if self.need {
                    io.need(len);
                }
                break;
            }
            let frame = io.input().next(len);
            if self.panic_on.is_some() && frame.get(4).copied() == self.panic_on {
                panic!("the test's handler panics on this frame");
            }
            io.output().insert(frame);
            self.frames += 1;
            if Some(self.frames) == self.close_after {
                io.close();
                break;
            }
        }
        self.max_output
            .fetch_max(io.output().len(), Ordering::Relaxed);
        self.max_input
            .fetch_max(io.input().len(), Ordering::Relaxed);
    }

    fn on_close(&mut self, error: Option<io::Error>) {
        let _ = self.closed.send(error.map(|e| e.kind()));
    }
}

/// Accepts connections on `listener` and hands each to the handler `make` returns.
fn serve_inline<H: Handler>(listener: Listener, make: impl Fn() -> H + Send + 'static) {
    tokio::spawn(async move {
        while let Ok(conn) = listener.accept().await {
            conn.serve_inline(make());
        }
    });
}

/// A reactor and an inline echo server on it; `on_close` reports of every connection.
fn echo_server(
    config: Config,
    tune: impl Fn(&mut Echo) + Send + 'static,
) -> (Reactor, SocketAddr, mpsc::UnboundedReceiver<Closed>) {
    let reactor = reactor(config);
    let listener = reactor.listen_tcp(localhost()).expect("listen");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = mpsc::unbounded_channel();
    serve_inline(listener, move || {
        let mut echo = Echo::new(tx.clone());
        tune(&mut echo);
        echo
    });
    (reactor, addr, rx)
}

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A blocking client socket with timeouts.
fn peer(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(PEER_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(PEER_TIMEOUT)).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Reads until end of stream.
fn read_to_end(mut s: TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    s.read_to_end(&mut got).expect("read to end");
    got
}

async fn next_close(rx: &mut mpsc::UnboundedReceiver<Closed>) -> Closed {
    within(10, "on_close", rx.recv())
        .await
        .expect("the server's handlers are gone")
}

#[test]
fn frames_split_at_every_byte_are_echoed_whole() {
    run(60, async {
        let (_reactor, addr, _closed) = echo_server(Config::default(), |_| {});
        let frame = frame(&pattern(61, 7));
        tokio::task::spawn_blocking(move || {
            let mut s = peer(addr);
            let mut back = vec![0u8; frame.len()];
            for cut in 1..frame.len() {
                s.write_all(&frame[..cut]).unwrap();
                std::thread::sleep(Duration::from_millis(2));
                s.write_all(&frame[cut..]).unwrap();
                s.read_exact(&mut back).unwrap();
                assert_eq!(back, &frame[..], "split at byte {cut}");
            }
        })
        .await
        .unwrap();
    });
}

#[test]
fn peer_close_delivers_every_frame_then_closes() {
    run(60, async {
        let (reactor, addr, mut closed) = echo_server(Config::default(), |_| {});
        let frames: Vec<Bytes> = (0..100)
            .map(|i| frame(&pattern(100 + i, i as u8)))
            .collect();
        let want: Vec<u8> = frames.concat();
        let got = tokio::task::spawn_blocking(move || {
            let mut s = peer(addr);
            s.write_all(&frames.concat()).unwrap();
            s.shutdown(Shutdown::Write).unwrap();
            read_to_end(s)
        })
        .await
        .unwrap();
        assert_eq!(first_difference(&got, &want), None);
        assert_eq!(next_close(&mut closed).await, None);
        wait_until(10, "the connection is unregistered", || {
            reactor.socket_count() == 1
        })
        .await;
    });
}

#[test]
fn handler_close_sends_its_output_then_closes() {
    run(60, async {
        let (_reactor, addr, mut closed) = echo_server(Config::default(), |e| {
            e.close_after = Some(3);
        });
        let frames: Vec<Bytes> = (0..5).map(|i| frame(&pattern(40, i))).collect();
        let want: Vec<u8> = frames[..3].concat();
        let got = tokio::task::spawn_blocking(move || {
            let mut s = peer(addr);
            s.write_all(&frames.concat()).unwrap();
            read_to_end(s)
        })
        .await
        .unwrap();
        assert_eq!(
            got, want,
            "exactly the first three frames, then end of stream"
        );
        assert_eq!(next_close(&mut closed).await, None);
    });
}

#[test]
fn a_panicking_handler_ends_only_its_connection() {
    run(60, async {
        let (reactor, addr, mut closed) = echo_server(Config::default(), |e| {
            e.panic_on = Some(0xEE);
        });
        let poison = frame(&[0xEE, 1, 2, 3]);
        let ok = frame(&pattern(500, 9));
        tokio::task::spawn_blocking(move || {
            let mut bad = peer(addr);
            bad.write_all(&poison).unwrap();
            let mut rest = Vec::new();
            // End of stream, or a reset if the close found our bytes unread.
            let _ = bad.read_to_end(&mut rest);
            assert!(
                rest.is_empty(),
                "no echo of the frame the handler panicked on"
            );

            let mut good = peer(addr);
            let mut back = vec![0u8; ok.len()];
            for _ in 0..10 {
                good.write_all(&ok).unwrap();
                good.read_exact(&mut back).unwrap();
                assert_eq!(back, &ok[..]);
            }
        })
        .await
        .unwrap();
        assert_eq!(next_close(&mut closed).await, Some(io::ErrorKind::Other));
        // The good connection served on and ended cleanly when its peer left.
        assert_eq!(next_close(&mut closed).await, None);
        wait_until(10, "both connections are unregistered", || {
            reactor.socket_count() == 1
        })
        .await;
    });
}

/// A peer that sends and never reads: the handler's output and input stay within their
/// bounds (the high-water mark plus one turn's reads), the sender is held back by TCP,
/// and once the peer reads, every byte arrives, in order.
#[test]
fn output_stays_bounded_while_the_peer_does_not_read() {
    const CHUNK: usize = 16 * 1024;
    const TURN: usize = 4;
    const HIGH_WATER: usize = 64 * 1024;
    const TOTAL: usize = 16 * 1024 * 1024;
    let config = Config {
        read_chunk: CHUNK,
        reads_per_turn: TURN,
        input_high_water: HIGH_WATER,
        // Under io_uring: a ring of one chunk, which bounds the input as one read does.
        ring_buffers: 1,
        ring_buffer_size: CHUNK,
        ..Config::default()
    };
    let max_output = Arc::new(AtomicUsize::new(0));
    let max_input = Arc::new(AtomicUsize::new(0));
    run(120, async {
        let (mo, mi) = (Arc::clone(&max_output), Arc::clone(&max_input));
        let (_reactor, addr, _closed) = echo_server(config, move |e| {
            e.max_output = Arc::clone(&mo);
            e.max_input = Arc::clone(&mi);
        });
        let body = pattern(CHUNK - 4, 3);
        let one = frame(&body);
        let frames = TOTAL / one.len();
        let client = peer(addr);
        set_recv_buffer(&client, 64 * 1024);
        let mut writer = client.try_clone().unwrap();
        let sent = Arc::new(AtomicUsize::new(0));
        let sent_w = Arc::clone(&sent);
        let one_w = one.clone();
        let write = tokio::task::spawn_blocking(move || {
            for _ in 0..frames {
                writer.write_all(&one_w).unwrap();
                sent_w.fetch_add(one_w.len(), Ordering::Relaxed);
            }
            writer.shutdown(Shutdown::Write).unwrap();
        });
        // The writer stalls: nothing is read on its side, so everything backs up.
        let mut last = usize::MAX;
        loop {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let now = sent.load(Ordering::Relaxed);
            if now == last {
                break;
            }
            assert!(now < TOTAL, "the writer was never held back");
            last = now;
        }
        let out = max_output.load(Ordering::Relaxed);
        let inp = max_input.load(Ordering::Relaxed);
        assert!(
            out <= HIGH_WATER + TURN * CHUNK + one.len(),
            "output grew to {out} bytes"
        );
        assert!(inp <= HIGH_WATER + CHUNK, "input grew to {inp} bytes");
        let got = tokio::task::spawn_blocking(move || read_to_end(client))
            .await
            .unwrap();
        write.await.unwrap();
        assert_eq!(got.len(), frames * one.len());
        for (i, f) in got.chunks(one.len()).enumerate() {
            assert_eq!(f, &one[..], "frame {i}");
        }
    });
}

/// Input the poller read before the handler came goes to it at once, and input the
/// high-water mark held back in the socket (its edge long gone) is read after.
#[test]
fn input_from_before_the_handler_and_held_back_input_reach_it() {
    const CHUNK: usize = 16 * 1024;
    const HIGH_WATER: usize = 64 * 1024;
    let config = Config {
        read_chunk: CHUNK,
        input_high_water: HIGH_WATER,
        ..Config::default()
    };
    run(60, async {
        let reactor = reactor(config);
        let listener = reactor.listen_tcp(localhost()).expect("listen");
        let addr = listener.local_addr().unwrap();
        let frames: Vec<Bytes> = (0..64).map(|i| frame(&pattern(8000, i as u8))).collect();
        let want: Vec<u8> = frames.concat();
        let client = peer(addr);
        let mut writer = client.try_clone().unwrap();
        let write = tokio::task::spawn_blocking(move || {
            writer.write_all(&frames.concat()).unwrap();
            writer.shutdown(Shutdown::Write).unwrap();
        });
        let conn: Connection = listener.accept().await.expect("accept");
        wait_until(10, "the input reaches the high-water mark", || {
            conn.input_len() >= HIGH_WATER
        })
        .await;
        let (tx, mut closed) = mpsc::unbounded_channel();
        conn.serve_inline(Echo::new(tx));
        let got = tokio::task::spawn_blocking(move || read_to_end(client))
            .await
            .unwrap();
        write.await.unwrap();
        assert_eq!(first_difference(&got, &want), None);
        assert_eq!(next_close(&mut closed).await, None);
    });
}

#[test]
fn need_reads_a_frame_larger_than_the_high_water_mark() {
    let config = Config {
        read_chunk: 16 * 1024,
        input_high_water: 64 * 1024,
        ..Config::default()
    };
    run(60, async {
        let (_reactor, addr, _closed) = echo_server(config, |e| e.need = true);
        let big = frame(&pattern(1024 * 1024, 5));
        let back = tokio::task::spawn_blocking(move || {
            let mut s = peer(addr);
            let mut w = s.try_clone().unwrap();
            let sent = big.clone();
            let writer = std::thread::spawn(move || w.write_all(&sent).unwrap());
            let mut back = vec![0u8; big.len()];
            s.read_exact(&mut back).unwrap();
            writer.join().unwrap();
            (back, big)
        })
        .await
        .unwrap();
        assert_eq!(first_difference(&back.0, &back.1), None);
    });
}

/// The client side of a closed loop, run from its poller: one frame out, its echo
/// back, the next out, `rounds` times; then it closes and reports what it counted.
struct Pinger {
    frame: Bytes,
    left: usize,
    done: Option<std::sync::mpsc::Sender<io::Result<usize>>>,
    echoed: usize,
}

impl Handler for Pinger {
    fn on_input(&mut self, io: &mut Io<'_>) {
        while let Ok(Some(len)) = frame_len(io.input()) {
            if io.input().len() < len {
                return;
            }
            let back = io.input().next(len);
            assert_eq!(back, self.frame);
            self.echoed += 1;
            self.left -= 1;
            if self.left == 0 {
                io.close();
                return;
            }
            io.output().insert(self.frame.clone());
        }
    }

    fn on_close(&mut self, error: Option<io::Error>) {
        if let Some(done) = self.done.take() {
            let _ = done.send(error.map_or(Ok(self.echoed), Err));
        }
    }
}

/// Both ends inline, over a Unix socket, the client's pollers on a tokio runtime and the
/// server's on threads of their own.
#[test]
fn closed_loop_with_both_ends_inline() {
    let dir = TempDir::new("inline-loop");
    let path = dir.path("echo.sock");
    run(60, async {
        let server = reactor(Config::default());
        let listener = server.listen_unix(&path).expect("listen");
        let (tx, _closed) = mpsc::unbounded_channel();
        serve_inline(listener, move || Echo::new(tx.clone()));
        let client =
            Reactor::on_runtime(&tokio::runtime::Handle::current(), Config::default()).unwrap();
        let mut results = Vec::new();
        for i in 0..8u8 {
            let conn = client
                .connect_unix(&path, Duration::from_secs(5))
                .expect("connect");
            let frame = frame(&pattern(300, i));
            let (done, result) = std::sync::mpsc::channel();
            conn.write(frame.clone());
            conn.serve_inline(Pinger {
                frame,
                left: 2000,
                done: Some(done),
                echoed: 0,
            });
            results.push(result);
        }
        for result in results {
            let echoed = within(30, "a client's loop", async {
                loop {
                    match result.try_recv() {
                        Ok(r) => break r,
                        Err(std::sync::mpsc::TryRecvError::Empty) => {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        Err(e) => panic!("the client's handler is gone: {e}"),
                    }
                }
            })
            .await;
            assert_eq!(echoed.expect("the loop failed"), 2000);
        }
        wait_until(10, "the client's connections are unregistered", || {
            client.socket_count() == 0
        })
        .await;
    });
}

#[test]
fn shutdown_tells_inline_handlers() {
    run(60, async {
        let (reactor, addr, mut closed) = echo_server(Config::default(), |_| {});
        let s = tokio::task::spawn_blocking(move || {
            let mut s = peer(addr);
            let f = frame(b"hello");
            s.write_all(&f).unwrap();
            let mut back = vec![0u8; f.len()];
            s.read_exact(&mut back).unwrap();
            s
        })
        .await
        .unwrap();
        reactor.shutdown();
        assert_eq!(next_close(&mut closed).await, None);
        assert_eq!(reactor.socket_count(), 0);
        let got = tokio::task::spawn_blocking(move || read_to_end(s))
            .await
            .unwrap();
        assert!(got.is_empty());
    });
}

/// A handler that answers nothing by itself: it hands each frame to `taken`, and
/// writes whatever was put in `ready` by the time it runs.
struct Deferred {
    taken: Arc<std::sync::Mutex<Vec<Bytes>>>,
    ready: Arc<std::sync::Mutex<Vec<Bytes>>>,
    closed: mpsc::UnboundedSender<Closed>,
}

impl Handler for Deferred {
    fn on_input(&mut self, io: &mut Io<'_>) {
        for frame in self.ready.lock().unwrap().drain(..) {
            io.output().insert(frame);
        }
        while let Ok(Some(len)) = frame_len(io.input()) {
            if io.input().len() < len {
                break;
            }
            let frame = io.input().next(len);
            self.taken.lock().unwrap().push(frame);
        }
    }

    fn on_close(&mut self, error: Option<io::Error>) {
        let _ = self.closed.send(error.map(|e| e.kind()));
    }
}

/// `InlineHandle::resume` calls the handler with no new input, from another task, and
/// what it writes is sent; `close` closes the connection and tells the handler; neither
/// does anything before `serve_inline` or after the close.
#[test]
fn a_handle_resumes_the_handler_and_closes_the_connection() {
    run(30, async {
        let reactor = reactor(Config::default());
        let listener = reactor.listen_tcp(localhost()).expect("listen");
        let addr = listener.local_addr().unwrap();
        let mut client = peer(addr);
        let conn = listener.accept().await.expect("accept");
        let handle = conn.inline_handle();
        assert!(!handle.resume(), "no handler yet");
        let taken = Arc::new(std::sync::Mutex::new(Vec::new()));
        let ready = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (tx, mut closed) = mpsc::unbounded_channel();
        conn.serve_inline(Deferred {
            taken: Arc::clone(&taken),
            ready: Arc::clone(&ready),
            closed: tx,
        });
        let request = frame(&pattern(3000, 9));
        client.write_all(&request).unwrap();
        wait_until(10, "the handler takes the frame", || {
            !taken.lock().unwrap().is_empty()
        })
        .await;
        // The work finishes elsewhere: a task hands the answer back and resumes.
        let answer = taken.lock().unwrap().pop().unwrap();
        let (h, r) = (handle.clone(), Arc::clone(&ready));
        let resumed = tokio::spawn(async move {
            r.lock().unwrap().push(answer);
            h.resume()
        });
        assert!(resumed.await.unwrap(), "the connection is open");
        let back = tokio::task::spawn_blocking(move || {
            let mut back = vec![0u8; request.len()];
            client.read_exact(&mut back).unwrap();
            assert_eq!(first_difference(&back, &request), None);
            client
        })
        .await
        .unwrap();
        assert!(handle.is_open());
        handle.close();
        assert!(!handle.is_open());
        assert_eq!(next_close(&mut closed).await, None);
        assert!(!handle.resume(), "closed");
        let rest = tokio::task::spawn_blocking(move || read_to_end(back))
            .await
            .unwrap();
        assert!(rest.is_empty());
    });
}
