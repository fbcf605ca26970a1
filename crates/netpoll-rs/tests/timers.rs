//! Deadlines of inline handlers (`Io::wake_at`, `Handler::on_timer`) on the real poll
//! loops, a poller on its own thread and one on a tokio runtime: a deadline fires, not
//! before its time, and what `on_timer` writes is sent before its close; a deadline
//! moved later fires at the later time only; a cleared one never fires; and one set
//! from outside the poller wakes a poller that was blocked with no timeout.
//!
//! These wait on real time, for about a second each: they test the loops' wiring. The
//! timer logic itself is tested with a fake clock in `src/timer.rs`.
//!
//! Where a deadline must not pass before the peer's next frame is handled, it is
//! [`AHEAD`] off: a peer thread, a worker or a poller held up for 200 ms (a loaded
//! machine does that) still leaves it far off. Deadlines that are meant to fire are
//! checked only for not firing early.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use netpoll_rs::{Config, Connection, Handler, Io, Reactor};

/// How long a blocking peer waits for any one read or write before failing.
const PEER_TIMEOUT: Duration = Duration::from_secs(10);

/// How far off a deadline is set that the peer's next frame must come before, in ms:
/// three times a 200 ms stall of any thread.
const AHEAD: u16 = 600;
/// How long a test waits to see that a deadline [`AHEAD`] off did not fire, in ms.
const PAST_AHEAD: u64 = AHEAD as u64 + 300;

/// The body of a frame the peer sends: `arm(ms)` sets a deadline that far from
/// `io.now()`, `CLEAR` clears it, anything else only asks for the echo.
fn arm(ms: u16) -> Vec<u8> {
    let mut body = b"A".to_vec();
    body.extend_from_slice(&ms.to_be_bytes());
    body
}
const CLEAR: &[u8] = b"C";
const PING: &[u8] = b"P";
/// What `on_timer` writes before it closes the connection.
const FIRED: &[u8] = b"timer";

/// A deadline that fired: the deadline, and `io.now()` in `on_timer`.
type Fired = (Instant, Instant);

/// Exactly one deadline fired, at or after it.
fn fired_once(fired: &Mutex<Vec<Fired>>) {
    let fired = fired.lock().unwrap();
    assert_eq!(fired.len(), 1, "fired {} times", fired.len());
    let (deadline, now) = fired[0];
    assert!(now >= deadline, "fired {:?} early", deadline - now);
}

/// Echoes every frame after acting on it; on its deadline, writes `FIRED` and closes.
struct Timed {
    fired: Arc<Mutex<Vec<Fired>>>,
    /// Set on the first call (for `resume`): a deadline this far from `io.now()`.
    arm_first: Option<Duration>,
    /// The deadline this handler set last.
    armed: Option<Instant>,
}

impl Timed {
    fn new(fired: &Arc<Mutex<Vec<Fired>>>, arm_first: Option<Duration>) -> Timed {
        Timed {
            fired: Arc::clone(fired),
            arm_first,
            armed: None,
        }
    }

    fn wake_at(&mut self, io: &mut Io<'_>, at: Option<Instant>) {
        io.wake_at(at);
        assert_eq!(io.deadline(), at);
        self.armed = at;
    }
}

impl Handler for Timed {
    fn on_input(&mut self, io: &mut Io<'_>) {
        if let Some(after) = self.arm_first.take() {
            self.wake_at(io, Some(io.now() + after));
        }
        while let Ok(Some(len)) = frame_len(io.input()) {
            if io.input().len() < len {
                break;
            }
            let frame = io.input().next(len);
            match &frame[4..] {
                [b'A', hi, lo] => {
                    let after = Duration::from_millis(u16::from_be_bytes([*hi, *lo]).into());
                    self.wake_at(io, Some(io.now() + after));
                }
                b"C" => self.wake_at(io, None),
                _ => {}
            }
            io.output().insert(frame);
        }
    }

    fn on_timer(&mut self, io: &mut Io<'_>) {
        assert_eq!(io.deadline(), None, "cleared before the call");
        let armed = self.armed.take().expect("a deadline was set");
        self.fired.lock().unwrap().push((armed, io.now()));
        io.output().insert(frame(FIRED));
        io.close();
    }
}

/// A server reactor: pollers on threads, or tasks of the current runtime.
fn server(on_runtime: bool) -> Reactor {
    if on_runtime {
        Reactor::on_runtime(&tokio::runtime::Handle::current(), Config::default()).unwrap()
    } else {
        reactor(Config::default())
    }
}

/// Listens on loopback; the connection the peer makes is accepted and returned.
async fn connect(reactor: &Reactor) -> (TcpStream, Connection) {
    let listener = reactor.listen_tcp("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let peer = TcpStream::connect(addr).expect("connect");
    peer.set_read_timeout(Some(PEER_TIMEOUT)).unwrap();
    peer.set_write_timeout(Some(PEER_TIMEOUT)).unwrap();
    peer.set_nodelay(true).unwrap();
    let conn = within(10, "accept", listener.accept()).await.unwrap();
    (peer, conn)
}

/// Sends a frame of `body` and waits for its echo; returns when it was sent.
fn send(peer: &mut TcpStream, body: &[u8]) -> Instant {
    let f = frame(body);
    let sent = send_only(peer, body);
    let mut back = vec![0u8; f.len()];
    peer.read_exact(&mut back).unwrap();
    assert_eq!(back, &f[..]);
    sent
}

/// Reads to end of stream, which must be `on_timer`'s output then its close, no
/// sooner than `after` from `set` (when the deadline was set, or before), with one
/// deadline fired in all.
fn closed_by_timer(mut peer: TcpStream, fired: &Mutex<Vec<Fired>>, set: Instant, after: Duration) {
    let mut rest = Vec::new();
    peer.read_to_end(&mut rest).expect("read to end");
    let end = set.elapsed();
    assert_eq!(
        rest,
        &frame(FIRED)[..],
        "on_timer's output, then end of stream"
    );
    assert!(
        end >= after,
        "closed {end:?} after the deadline was set, for {after:?}"
    );
    fired_once(fired);
}

/// Runs `body` on a blocking thread against a fresh server of each kind, its handler
/// sharing `fired`; the two at once, each on a thread of its own, so that the waits
/// of the two do not add up.
fn on_both_faces(body: impl Fn(TcpStream, Arc<Mutex<Vec<Fired>>>) + Clone + Send + 'static) {
    let faces: Vec<_> = [false, true]
        .into_iter()
        .map(|on_runtime| {
            let body = body.clone();
            std::thread::spawn(move || {
                run(20, async move {
                    let reactor = server(on_runtime);
                    let (peer, conn) = connect(&reactor).await;
                    let fired = Arc::new(Mutex::new(Vec::new()));
                    conn.serve_inline(Timed::new(&fired, None));
                    let f = Arc::clone(&fired);
                    tokio::task::spawn_blocking(move || body(peer, f))
                        .await
                        .unwrap_or_else(|e| panic!("on_runtime: {on_runtime}: {e}"));
                    reactor.shutdown();
                });
            })
        })
        .collect();
    for face in faces {
        if let Err(panic) = face.join() {
            std::panic::resume_unwind(panic);
        }
    }
}

#[test]
fn on_timer_runs_after_the_deadline_and_its_close_reaches_the_peer() {
    on_both_faces(|mut peer, fired| {
        let sent = send(&mut peer, &arm(50));
        closed_by_timer(peer, &fired, sent, Duration::from_millis(50));
    });
}

#[test]
fn a_deadline_moved_later_fires_at_the_later_time_only() {
    on_both_faces(|mut peer, fired| {
        // The first deadline is far enough off that the second frame surely comes
        // before it, even from a peer thread that a loaded machine holds up.
        send(&mut peer, &arm(AHEAD));
        // The entry for the first deadline stays in the poller's heap; when it comes
        // the poller finds the deadline moved, and waits again.
        let later = AHEAD + 200;
        let sent = send(&mut peer, &arm(later));
        closed_by_timer(peer, &fired, sent, Duration::from_millis(later.into()));
    });
}

#[test]
fn a_cleared_deadline_never_fires() {
    on_both_faces(|mut peer, fired| {
        // As above: the clear surely comes before the deadline.
        send(&mut peer, &arm(AHEAD));
        send(&mut peer, CLEAR);
        std::thread::sleep(Duration::from_millis(PAST_AHEAD));
        assert!(fired.lock().unwrap().is_empty());
        // Still open and served.
        send(&mut peer, PING);
        assert!(fired.lock().unwrap().is_empty());
    });
}

/// `resume` calls the handler off the poller while the poller blocks with no timeout;
/// the deadline it sets is earlier than all (there are none), so the poller is woken to
/// wait for it.
#[test]
fn a_deadline_set_from_resume_wakes_a_blocked_poller() {
    for on_runtime in [false, true] {
        run(20, async move {
            let reactor = server(on_runtime);
            let (peer, conn) = connect(&reactor).await;
            let fired = Arc::new(Mutex::new(Vec::new()));
            let handle = conn.inline_handle();
            conn.serve_inline(Timed::new(&fired, Some(Duration::from_millis(50))));
            // Let the poller go back to sleep.
            tokio::time::sleep(Duration::from_millis(20)).await;
            let resumed = Instant::now();
            assert!(handle.resume());
            let f = Arc::clone(&fired);
            tokio::task::spawn_blocking(move || {
                closed_by_timer(peer, &f, resumed, Duration::from_millis(50));
            })
            .await
            .unwrap_or_else(|e| panic!("on_runtime: {on_runtime}: {e}"));
            reactor.shutdown();
        });
    }
}

/// On a runtime without a time driver the poller cannot sleep until a deadline (tokio
/// panics making the sleep; the poller catches it and goes on): as documented on
/// `Reactor::on_runtime`, the deadline then fires when the poller next wakes for an
/// event, and the connection is served all along.
///
/// Busy polling is off here: its one more poll after an event is a turn too, and a
/// worker held up for longer than the deadline before it (a loaded CI machine did so
/// once) fires the deadline then, with no event from the peer. The deadline is also
/// [`AHEAD`] off, so that an extra turn queued by the arming frame's own edge runs
/// first even on a worker held up for a while.
#[test]
fn without_a_time_driver_a_deadline_fires_at_the_next_event() {
    let io_only = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_io()
        .build()
        .unwrap();
    let config = Config {
        busy_poll: false,
        ..Config::default()
    };
    let reactor = Reactor::on_runtime(io_only.handle(), config).unwrap();
    run(20, async move {
        let (peer, conn) = connect(&reactor).await;
        let fired = Arc::new(Mutex::new(Vec::new()));
        conn.serve_inline(Timed::new(&fired, None));
        let f = Arc::clone(&fired);
        tokio::task::spawn_blocking(move || {
            let mut peer = peer;
            send(&mut peer, &arm(AHEAD));
            std::thread::sleep(Duration::from_millis(PAST_AHEAD));
            assert!(f.lock().unwrap().is_empty(), "no sleep to wake the poller");
            // Any event does: the deadline has passed by then.
            let sent = send_only(&mut peer, PING);
            let mut back = vec![0u8; frame(PING).len()];
            peer.read_exact(&mut back).unwrap();
            closed_by_timer(peer, &f, sent, Duration::ZERO);
        })
        .await
        .unwrap();
        reactor.shutdown();
    });
}

/// Sends a frame of `body`; returns when it was sent.
fn send_only(peer: &mut TcpStream, body: &[u8]) -> Instant {
    let sent = Instant::now();
    peer.write_all(&frame(body)).unwrap();
    sent
}
