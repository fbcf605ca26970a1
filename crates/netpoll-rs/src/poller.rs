//! Pollers: each owns a driver ([`sys::Selector`]: an epoll instance or an io_uring)
//! and runs the latency-tuned loop, on a thread of its own or as a task of a tokio
//! runtime.
//!
//! A poller knows what its tokens name only as [`Entry`]s (connections and listeners
//! implement it, in the modules above this one), so it serves them without naming
//! them; and it knows its driver only through `sys`'s interface, so nothing here
//! names epoll or the ring.

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mio::Token;

use crate::config::Config;
use crate::pool::BlockPool;
use crate::slab::Slab;
use crate::sync::lock;
use crate::sys::{self, Driver as DriverKind, Event, Op, Ready, Received, Selector};
use crate::timer::Timers;

/// What serving entries leaves for the poller to do after: entries to serve again on
/// the next turn, and operations to submit to its driver at the end of the turn (a
/// ring's; never any under epoll).
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    pub(crate) again: Vec<Arc<dyn Entry>>,
    pub(crate) ops: Vec<Op>,
}

/// What a token names: a registered socket the poller serves. The poller calls these
/// on its own thread (or task), holding none of its locks.
pub(crate) trait Entry: Send + Sync + fmt::Debug {
    /// An event for this socket, in the turn that read the clock at `now` (or, with
    /// `Ready::default()`, another turn for one that listed itself in `out.again`,
    /// where it goes when it has more to read than one turn's budget).
    fn on_event(self: Arc<Self>, ready: Ready, now: Instant, out: &mut Outbox);

    /// The deadline scheduled for this token in the poller's timers came at `now`.
    fn on_timer(self: Arc<Self>, now: Instant, out: &mut Outbox) {
        let _ = (now, out);
    }

    /// A receive the driver made for this socket completed (io_uring).
    fn on_recv(self: Arc<Self>, received: Received<'_>, now: Instant, out: &mut Outbox) {
        let _ = (received, now, out);
    }

    /// A send the driver made for this socket completed (io_uring): all of it went
    /// (`rest` empty), or `rest` is what the kernel did not take, or it failed.
    fn on_sent(
        self: Arc<Self>,
        rest: io::Result<Vec<bytes::Bytes>>,
        now: Instant,
        out: &mut Outbox,
    ) {
        let _ = (rest, now, out);
    }

    /// The driver's watch on this listening socket fired (io_uring); `more` while it
    /// stays armed.
    fn on_listen(self: Arc<Self>, more: bool, out: &mut Outbox) {
        let _ = (more, out);
    }

    /// Closes the socket (the reactor shuts down); it leaves the slab.
    fn close(&self);
}

/// The part of a poller that other threads use: how to register sockets with it and
/// wake it (to stop it, or to make it see an earlier deadline), the slab its tokens
/// index and its connections' deadlines.
#[derive(Debug)]
pub(crate) struct PollerShared {
    /// How other threads reach the poller's driver.
    pub(crate) io: sys::Remote,
    slab: Mutex<Entries>,
    pub(crate) shutdown: AtomicBool,
    pub(crate) config: Arc<Config>,
    /// Read blocks for this poller's connections.
    pub(crate) pool: BlockPool,
    /// The deadlines its inline handlers set, by connection token. Locked after a
    /// connection's state when both are (never the other way round).
    timers: Mutex<Timers<Token>>,
    /// Readers of its connections waiting for a reply they are owed
    /// ([`Connection::read_reply`](crate::Connection::read_reply)): while there are any,
    /// the poller's spin may wait for a reply's arrival (see [`Spin`]).
    replies_due: AtomicUsize,
}

/// A reply counted as due on a connection's poller until this is dropped
/// ([`Connection::reply_due`](crate::Connection::reply_due)).
#[derive(Debug)]
#[must_use = "the reply is due only while the guard lives"]
pub struct ReplyDue<'a>(&'a PollerShared);

impl Drop for ReplyDue<'_> {
    fn drop(&mut self) {
        self.0.replies_due.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A slab's entries: what the poller's tokens name.
struct Entries(Slab<Arc<dyn Entry>>);

impl fmt::Debug for Entries {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Entries({})", self.0.len())
    }
}

impl PollerShared {
    fn new(io: sys::Remote, config: Arc<Config>) -> Self {
        PollerShared {
            io,
            slab: Mutex::new(Entries(Slab::default())),
            shutdown: AtomicBool::new(false),
            pool: BlockPool::new(config.read_chunk, config.pooled_blocks),
            timers: Mutex::new(Timers::default()),
            replies_due: AtomicUsize::new(0),
            config,
        }
    }

    /// Counts a reply as due until the guard is dropped.
    pub(crate) fn reply_due(&self) -> ReplyDue<'_> {
        self.replies_due.fetch_add(1, Ordering::Relaxed);
        ReplyDue(self)
    }

    /// Whether a reader of one of its connections waits for a reply, and no more than
    /// [`MAX_DUE_SPUN`] do.
    pub(crate) fn replies_due(&self) -> bool {
        (1..=MAX_DUE_SPUN).contains(&self.replies_due.load(Ordering::Relaxed))
    }

    /// Wakes the poller from its wait (a failed wake leaves it to its next turn).
    pub(crate) fn wake(&self) {
        self.io.wake();
    }

    /// Lets go of a closed socket of `token` (see [`sys::Remote::release`]).
    pub(crate) fn release<S: sys::Registered>(&self, token: Token, socket: S) {
        self.io.release(token, socket);
    }

    /// Stores `make`'s entry under a fresh token and returns it.
    pub(crate) fn insert<T: Entry + 'static>(
        &self,
        make: impl FnOnce(Token) -> Arc<T>,
    ) -> std::io::Result<Arc<T>> {
        let mut made = None;
        lock(&self.slab)
            .0
            .insert_with(|token| {
                let entry = make(token);
                made = Some(Arc::clone(&entry));
                entry as Arc<dyn Entry>
            })
            .ok_or_else(|| std::io::Error::other("the poller holds as many sockets as it can"))?;
        made.ok_or_else(|| std::io::Error::other("the poller made no entry"))
    }

    /// The entry `token` names, if it is still registered.
    fn get(&self, token: Token) -> Option<Arc<dyn Entry>> {
        lock(&self.slab).0.get(token).cloned()
    }

    /// Takes `token`'s entry out of the slab (its socket closed): its token never
    /// names anything again, and its deadline never fires.
    pub(crate) fn remove(&self, token: Token) {
        lock(&self.slab).0.remove(token);
        lock(&self.timers).remove(token);
    }

    /// Takes every entry out (the reactor shuts down).
    pub(crate) fn drain(&self) -> Vec<Arc<dyn Entry>> {
        lock(&self.slab).0.drain()
    }

    /// Sockets registered.
    pub(crate) fn len(&self) -> usize {
        lock(&self.slab).0.len()
    }

    /// Makes sure `token`'s deadline comes no later than `at`. Called from elsewhere
    /// than the poller (`on_poller` false), a deadline earlier than all others wakes
    /// the poller, which may be waiting for a later one (or none).
    pub(crate) fn schedule(&self, token: Token, at: Instant, on_poller: bool) {
        let earliest = lock(&self.timers).schedule(token, at);
        if earliest && !on_poller {
            self.wake();
        }
    }
}

/// Connections a poller can list for another turn before its lists grow.
const SERVE_AGAIN_CAPACITY: usize = 256;

/// A poller's own side: its driver, the connections to serve again and those whose
/// deadline came.
#[derive(Debug)]
pub(crate) struct Driver {
    selector: Selector,
    out: Outbox,
    serving: Vec<Arc<dyn Entry>>,
    /// Tokens whose deadline came this turn (taken out of the timers first, so that a
    /// deadline a handler sets at or before now fires on the next turn, not in a loop).
    due: Vec<Token>,
    /// The last poll filled the event buffer: more events may be waiting.
    full: bool,
    /// When the last poll returned.
    woke: Instant,
    shared: Arc<PollerShared>,
}

impl Driver {
    /// A poller of the kind `config` asks for, and the part other threads use. Where
    /// io_uring was asked for and the kernel refuses a ring, the error is returned
    /// with an epoll poller, for the caller to log.
    pub(crate) fn new(
        config: Arc<Config>,
        own_thread: bool,
    ) -> io::Result<(Driver, Option<io::Error>)> {
        let (selector, io, refused) = Selector::new(&config.setup(own_thread))?;
        let shared = Arc::new(PollerShared::new(io, config));
        let mut out = Outbox::default();
        // Room for many connections served again, so the hot path does not grow
        // them (they are swapped every turn, so both need it).
        out.again.reserve(SERVE_AGAIN_CAPACITY);
        let driver = Driver {
            selector,
            out,
            serving: Vec::with_capacity(SERVE_AGAIN_CAPACITY),
            due: Vec::new(),
            full: false,
            woke: Instant::now(),
            shared,
        };
        Ok((driver, refused))
    }

    pub(crate) fn shared(&self) -> &Arc<PollerShared> {
        &self.shared
    }

    /// Which kind of poller this is.
    pub(crate) fn kind(&self) -> DriverKind {
        self.selector.kind()
    }

    /// The file descriptor that is readable while events or completions wait.
    fn raw_fd(&self) -> RawFd {
        self.selector.raw_fd()
    }

    fn stopping(&self) -> bool {
        // SeqCst: see `PollerSet::shutdown`.
        self.shared.shutdown.load(Ordering::SeqCst)
    }

    /// The earliest deadline of this poller's connections.
    fn next_deadline(&self) -> Option<Instant> {
        lock(&self.shared.timers).next_deadline()
    }

    /// One wait (with `timeout`, or none when connections wait for another turn) and
    /// the handling of what it returned, then of the deadlines that came. The clock
    /// is read once, after the wait, for all of it. `Ok(true)` when there was work, or
    /// may be more (a full batch, or connections to serve again).
    fn turn(&mut self, timeout: Option<Duration>) -> std::io::Result<bool> {
        let timeout = if self.out.again.is_empty() {
            timeout
        } else {
            Some(Duration::ZERO)
        };
        if !self.selector.wait(timeout)? {
            // A signal cut the wait short.
            return Ok(true);
        }
        // A shutdown began while it waited: what the wait brought is not delivered.
        // The other pollers close their sockets as they stop, and an end of stream
        // that this brings on a connection of this poller (its peer was one of
        // theirs) must not reach a reader as the peer's close: every connection is
        // closed here next, and its waiters get `NotConnected`.
        if self.stopping() {
            return Ok(false);
        }
        let now = Instant::now();
        self.woke = now;
        std::mem::swap(&mut self.out.again, &mut self.serving);
        let mut busy = !self.serving.is_empty();
        for entry in self.serving.drain(..) {
            entry.on_event(Ready::default(), now, &mut self.out);
        }
        let (shared, out) = (&self.shared, &mut self.out);
        let (any, full) = self.selector.dispatch(|token, event| {
            // None: a stale token, the socket closed after the event was queued.
            if let Some(entry) = shared.get(token) {
                deliver(entry, event, now, out);
            }
        });
        busy |= any;
        self.full = full;
        busy |= self.fire_timers(now);
        self.selector.end_turn(&mut self.out.ops)?;
        Ok(busy || !self.out.again.is_empty())
    }

    /// Serves the connections whose deadline is at or before `now`; whether there was
    /// any.
    fn fire_timers(&mut self, now: Instant) -> bool {
        {
            let mut timers = lock(&self.shared.timers);
            self.due.extend(std::iter::from_fn(|| timers.pop_due(now)));
        }
        let fired = !self.due.is_empty();
        for token in self.due.drain(..) {
            // None: the connection closed; its deadline has nothing left to end.
            if let Some(entry) = self.shared.get(token) {
                entry.on_timer(now, &mut self.out);
            }
        }
        fired
    }

    /// Work is known to be waiting now: connections to serve again, or a full batch.
    fn has_more(&self) -> bool {
        self.full || !self.out.again.is_empty()
    }

    /// The poller stops; its driver may have its sockets closed first (see
    /// [`Selector::finish`]).
    fn finish(self) {
        let Driver {
            selector, shared, ..
        } = self;
        selector.finish(|| {
            for entry in shared.drain() {
                entry.close();
            }
        });
    }
}

/// Hands what the driver said of `entry`'s socket to it.
#[inline]
fn deliver(entry: Arc<dyn Entry>, event: Event<'_>, now: Instant, out: &mut Outbox) {
    match event {
        Event::Ready(ready) => entry.on_event(ready, now, out),
        Event::Recv(received) => entry.on_recv(received, now, out),
        Event::Sent(rest) => entry.on_sent(rest, now, out),
        Event::Listen(more) => entry.on_listen(more, out),
    }
}

/// Whether a poller keeps polling after a turn rather than block, and for how long.
///
/// Off (`busy_poll` false) it never does. With the fixed window (`adaptive_spin` false)
/// it polls on for [`Config::spin`] after the last turn with work. Adaptive (the
/// default), it learns the *idle gap*: from the end of a turn with work to the next
/// event, when a poll in between found nothing (turns back to back are one burst, not
/// a gap). It spins only when that gap is expected to be short, at most
/// [`SPIN_GAP`]: a spin that ends in an event costs the gap in CPU time, a sleep and a
/// wake-up cost a few microseconds of it, so only the shortest gaps are cheaper spun
/// through. A higher threshold lets a server at partial load spin through gaps that
/// a sleep would have covered for less CPU, and the fixed window spins through every
/// gap, so a whole core goes to waiting. Then it spins for twice the expected gap (at
/// most [`Config::spin`]). Otherwise it blocks at once: a blocking poll returns at
/// once when events came while the batch was handled, so the one more poll with a
/// zero timeout of the other modes (Netpoll's trick) would only add a system call when
/// none did.
///
/// A gap that ends in a wake-up also holds the time the thread took to wake, so the
/// gaps seen while blocking are not learnt from; instead, one block decision in
/// [`PROBE_EVERY`] spins for the whole window and learns the true gap, so that the
/// poller starts spinning again when events come closer together. A probe that finds
/// a long gap doubles the interval to the next (up to [`PROBE_MAX`]), so that a
/// poller at low load, where every probe spins its whole window for nothing, does not
/// pay a window every few calls.
/// In the other modes, one more poll follows a turn with work.
///
/// A reply that is due is not speculation: a reader of one of the poller's
/// connections waits for it ([`Connection::read_reply`](crate::Connection::read_reply),
/// what a client does after sending a call). Only a few at once count
/// ([`MAX_DUE_SPUN`]): with more in flight, replies come close together anyway. An
/// idle period that begins with a reply due is learnt apart (its gap is the peer's
/// turnaround, not the time between requests), and spun through when that gap is at
/// most the window
/// ([`Config::spin`]), for twice the gap: a client with a call in flight polls for its
/// reply instead of sleeping and paying a wake-up on every call, and stops once the
/// reply is later than twice the usual, or as soon as no reply is due any more (the
/// rest of the period is then an idle one). A server's poller, which is owed nothing,
/// keeps the rule above.
///
/// A lone caller in lockstep (one connection, its next call sent when the last is
/// answered) is not spun through, although it would gain: its gap, the caller's own
/// turnaround, is far longer than [`SPIN_GAP`], and the wake-up adds a scheduler
/// round trip to each of its calls. A poller cannot tell it from open load that a
/// client's pool sends on the connection it last freed: both are one socket, turn
/// after turn, with steady gaps. Spinning for such streaks (8 turns in a row from one
/// socket, then twice the gap) was tried: it brought a lone caller's latency nearly
/// down to the fixed window's, but at half load the server spun for the load
/// generator's pool, which reuses one connection, and used far more CPU than Volo's
/// server.
#[derive(Debug)]
struct Spin {
    on: bool,
    adaptive: bool,
    max: Duration,
    /// How long the current spin lasts after the last work.
    window: Duration,
    /// When the last turn with work ended.
    last_busy: Instant,
    /// A poll found nothing since the last work.
    idled: bool,
    /// The current idle period is spun through (or probed), so its gap is learnt.
    learning: bool,
    /// The average idle gap, in nanoseconds (exponential, weight 1/8 for the newest);
    /// none seen yet: 0.
    gap_ns: u64,
    /// The same for idle periods that began with a reply due.
    due_gap_ns: u64,
    /// The current idle period began with a reply due.
    due: bool,
    /// Block decisions since the last probe.
    blocks: u32,
    /// Block decisions from one probe to the next.
    probe_every: u32,
    /// The current idle period is a probe.
    probing: bool,
}

/// The most replies due at once for which a poller spins (see [`Spin`]). With more
/// calls in flight replies come often enough that a worker seldom sleeps between them,
/// and polling between them costs the tasks that have work: a client of 16 callers
/// made 0.87x the calls when its poller spun for every due reply.
pub(crate) const MAX_DUE_SPUN: usize = 4;

/// The longest expected idle gap a poller spins for (see [`Spin`]).
pub(crate) const SPIN_GAP: Duration = Duration::from_micros(3);
/// One block decision in this many spins for the whole window, to see the true gap.
pub(crate) const PROBE_EVERY: u32 = 16;
/// The most block decisions between two probes, after probes that found long gaps.
pub(crate) const PROBE_MAX: u32 = 1024;

impl Spin {
    fn new(config: &Config, now: Instant) -> Self {
        Spin {
            on: config.busy_poll,
            adaptive: config.adaptive_spin,
            max: config.spin,
            window: config.spin,
            last_busy: now,
            idled: false,
            learning: true,
            gap_ns: 0,
            due_gap_ns: 0,
            due: false,
            blocks: 0,
            probe_every: PROBE_EVERY,
            probing: false,
        }
    }

    /// After a turn that woke at `woke` and ended at `now`, with work (`busy`) or not,
    /// with a reply due (`due`) or not: whether to poll again at once instead of
    /// blocking.
    fn again(&mut self, busy: bool, woke: Instant, now: Instant, due: bool) -> bool {
        if !self.on {
            return false;
        }
        if busy {
            if self.adaptive {
                if self.idled && self.learning {
                    let gap = woke.saturating_duration_since(self.last_busy);
                    let worth = self.worth();
                    let avg = self.period_gap();
                    *avg = average(*avg, gap);
                    if self.probing {
                        self.probe_every = if gap > worth {
                            (self.probe_every * 2).min(PROBE_MAX)
                        } else {
                            PROBE_EVERY
                        };
                    }
                }
                self.due = due;
                self.window = self.choose();
            }
            self.last_busy = now;
            self.idled = false;
            // Adaptive and not spinning: block at once. A blocking poll returns at
            // once when events are waiting, so one more poll with a zero timeout
            // would only cost a system call when none are.
            return !self.adaptive || self.spinning();
        }
        if self.adaptive && self.due && !due {
            // The reply was taken and none is due: from here the period is an idle
            // one, spun through (and learnt) by the rule for those.
            self.due = false;
            self.window = self.choose();
        }
        let first_idle = !std::mem::replace(&mut self.idled, true);
        first_idle || now.saturating_duration_since(self.last_busy) < self.window
    }

    /// The longest expected gap worth spinning through in the current idle period:
    /// [`SPIN_GAP`], or the whole window when a reply is due.
    fn worth(&self) -> Duration {
        if self.due {
            self.max
        } else {
            SPIN_GAP.min(self.max)
        }
    }

    /// The average gap of the current idle period's kind: with a reply due or not.
    fn period_gap(&mut self) -> &mut u64 {
        if self.due {
            &mut self.due_gap_ns
        } else {
            &mut self.gap_ns
        }
    }

    /// The spin after the turn just ended, from the average gap of its kind.
    fn choose(&mut self) -> Duration {
        let max = self.max.as_nanos() as u64;
        let worth = self.worth().as_nanos() as u64;
        let gap_ns = *self.period_gap();
        self.probing = false;
        if gap_ns == 0 {
            // Nothing learnt yet: spin the whole window to learn.
            self.learning = true;
            return self.max;
        }
        if gap_ns <= worth {
            self.learning = true;
            self.probe_every = PROBE_EVERY;
            return Duration::from_nanos(gap_ns.saturating_mul(2).clamp(1_000, max.max(1_000)));
        }
        self.blocks += 1;
        self.learning = self.blocks >= self.probe_every;
        if self.learning {
            self.blocks = 0;
            self.probing = true;
            return self.max;
        }
        Duration::ZERO
    }

    /// Whether the poller is within a spin (not only the one poll after work).
    fn spinning(&self) -> bool {
        !self.window.is_zero()
    }
}

/// `avg` moved an eighth of the way to `sample` (the first sample taken whole).
fn average(avg: u64, sample: Duration) -> u64 {
    let sample = sample.as_nanos().min(u128::from(u64::MAX / 2)) as u64;
    if avg == 0 {
        return sample.max(1);
    }
    avg - avg / 8 + sample / 8
}

/// The poll loop of a poller thread. After a batch with events, [`Spin`] says whether
/// the thread keeps polling with a zero timeout, yielding between polls, and for how
/// long; then it blocks: until an event, or the earliest deadline of its connections,
/// with no timeout when there is none. Connections with input left after their read
/// budget are served again on the next turn, which then does not block either.
pub(crate) fn run(mut driver: Driver) {
    if driver.selector.start().is_err() {
        return;
    }
    let mut ended = Instant::now();
    let mut spin = Spin::new(&driver.shared.config, ended);
    let mut spinning = false;
    while !driver.stopping() {
        let timeout = if spinning {
            Some(Duration::ZERO)
        } else {
            // From when the last turn ended (nothing but this lies between): one clock
            // reading less per wait. mio rounds a timeout up to whole milliseconds, so
            // the wait never ends before the deadline.
            driver
                .next_deadline()
                .map(|at| at.saturating_duration_since(ended))
        };
        let busy = match driver.turn(timeout) {
            Ok(busy) => busy,
            // A wait that fails for another reason than a signal will fail again:
            // stop the poller rather than spin; its sockets see no more events.
            Err(_) => break,
        };
        ended = Instant::now();
        spinning = spin.again(busy, driver.woke, ended, driver.shared.replies_due());
        // The one poll after work needs no yield; a spin gives other threads a turn.
        if spinning && !busy && spin.spinning() {
            std::thread::yield_now();
        }
    }
    driver.finish();
}

/// The poller's epoll or ring file descriptor, for tokio's reactor to watch; the
/// poller owns it and outlives the watch.
struct WatchedFd(RawFd);

impl AsRawFd for WatchedFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// The poll loop as a task of a tokio runtime: tokio's own reactor watches the poller's
/// epoll fd (or ring fd), and the task polls it with a zero timeout when it is
/// readable. Handlers on the same runtime are then woken from their own threads, with
/// no thread switch. After a batch with events, while [`Spin`] says to keep polling
/// (or more work is known to wait), the task yields to the runtime (the woken handlers
/// run) and polls again with a zero timeout; then it waits again: for the fd to be
/// readable, or for the earliest deadline of its connections, on one tokio sleep that
/// the task keeps and moves (none while there is no deadline).
pub(crate) async fn run_on_runtime(mut driver: Driver) {
    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;

    let mut spin = Spin::new(&driver.shared.config, Instant::now());
    // SAFETY: the fd is the epoll instance or ring the driver owns; the driver closes
    // it only when dropped, after the `AsyncFd` (dropped first, below), and never
    // replaces it, so the fd stays open and the same for the `AsyncFd`'s whole life.
    let registered =
        unsafe { AsyncFd::register_with_interest(WatchedFd(driver.raw_fd()), Interest::READABLE) };
    let Ok(fd) = registered else {
        driver.finish();
        return;
    };
    let mut sleep = DeadlineSleep::default();
    let mut spinning = false;
    while !driver.stopping() {
        // Readiness is cleared before the poll, so an event that comes after it makes
        // the fd readable again and is not missed.
        if !spinning {
            // A ring's submissions of the last turn go in before the task waits.
            if driver.selector.submit().is_err() {
                break;
            }
            sleep.set(driver.next_deadline());
            let woke = std::future::poll_fn(|cx| {
                if let std::task::Poll::Ready(ready) = fd.poll_read_ready(cx) {
                    return std::task::Poll::Ready(ready.map(|mut guard| guard.clear_ready()));
                }
                sleep.poll(cx).map(Ok)
            })
            .await;
            if woke.is_err() {
                break;
            }
        }
        match driver.turn(Some(Duration::ZERO)) {
            Ok(busy) => {
                // A full batch or connections to serve again: more work is there now.
                let due = driver.shared.replies_due();
                spinning = spin.again(busy, driver.woke, Instant::now(), due) || driver.has_more();
                if spinning {
                    tokio::task::yield_now().await;
                }
            }
            Err(_) => break,
        }
    }
    // The watch goes before the poller that owns the fd.
    drop(fd);
    driver.finish();
}

/// The one sleep of a poller task on a runtime, until its earliest deadline: made at
/// the first deadline, then moved to each next one.
#[derive(Debug, Default)]
struct DeadlineSleep {
    sleep: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    /// The deadline the sleep is set for, `None` when there is none to wait for.
    armed: Option<Instant>,
    /// The runtime has no time driver (tokio panics when a sleep is made there).
    unavailable: bool,
}

impl DeadlineSleep {
    fn set(&mut self, deadline: Option<Instant>) {
        if deadline == self.armed {
            return;
        }
        self.armed = deadline;
        let Some(at) = deadline else {
            return;
        };
        let at = tokio::time::Instant::from_std(at);
        match &mut self.sleep {
            Some(sleep) => sleep.as_mut().reset(at),
            None if !self.unavailable => {
                let made = std::panic::catch_unwind(|| Box::pin(tokio::time::sleep_until(at)));
                match made {
                    Ok(sleep) => self.sleep = Some(sleep),
                    Err(_) => self.unavailable = true,
                }
            }
            None => {}
        }
    }

    /// Ready once the deadline set is reached; pending for ever while none is set.
    fn poll(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        match (&mut self.sleep, self.armed) {
            (Some(sleep), Some(_)) => sleep.as_mut().poll(cx),
            _ => std::task::Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    /// A spin policy and a fake clock: `t` microseconds after `base`.
    struct Clock {
        base: Instant,
    }

    impl Clock {
        fn at(&self, us: u64) -> Instant {
            self.base + US * us as u32
        }
    }

    fn spin(busy_poll: bool, adaptive: bool, window: Duration) -> (Spin, Clock) {
        let base = Instant::now();
        let config = Config {
            busy_poll,
            adaptive_spin: adaptive,
            spin: window,
            ..Config::default()
        };
        (Spin::new(&config, base), Clock { base })
    }

    /// Feeds `turns` idle gaps of `gap` µs, each ended by a turn with work of `work`
    /// µs, from time `t` (the end of the last work): after the work, one poll that
    /// finds nothing, then (spinning or woken) the next event. Returns the time the
    /// last turn ended.
    fn gaps(s: &mut Spin, c: &Clock, t: u64, turns: u32, gap: u64, work: u64) -> u64 {
        gaps_of(s, c, t, turns, gap, work, false)
    }

    /// [`gaps`], each idle period beginning with a reply due (`due`) or not.
    fn gaps_of(
        s: &mut Spin,
        c: &Clock,
        mut t: u64,
        turns: u32,
        gap: u64,
        work: u64,
        due: bool,
    ) -> u64 {
        for _ in 0..turns {
            if s.spinning() {
                assert!(
                    s.again(false, c.at(t), c.at(t), due),
                    "a spin polls at once"
                );
            }
            let woke = t + gap;
            t = woke + work;
            assert_eq!(s.again(true, c.at(woke), c.at(t), due), s.spinning());
        }
        t
    }

    #[test]
    fn busy_poll_off_always_blocks() {
        let (mut s, c) = spin(false, false, Duration::from_secs(3600));
        assert!(!s.again(true, c.at(0), c.at(1), false));
        assert!(!s.again(false, c.at(1), c.at(2), false));
    }

    #[test]
    fn a_zero_spin_polls_once_more_after_work_then_blocks() {
        let (mut s, c) = spin(true, false, Duration::ZERO);
        assert!(s.again(true, c.at(0), c.at(1), false));
        assert!(
            s.again(false, c.at(1), c.at(1), false),
            "one more poll after the work"
        );
        assert!(!s.again(false, c.at(1), c.at(1), false), "then it blocks");
        assert!(
            s.again(true, c.at(5), c.at(6), false),
            "work starts it again"
        );
        assert!(s.again(false, c.at(6), c.at(6), false));
        assert!(!s.again(false, c.at(6), c.at(6), false));
    }

    #[test]
    fn a_fixed_window_polls_on_until_it_has_passed() {
        let (mut s, c) = spin(true, false, US * 50);
        assert!(s.again(true, c.at(0), c.at(10), false));
        for t in 10..60 {
            assert!(s.again(false, c.at(t), c.at(t), false), "{t} µs");
        }
        assert!(
            !s.again(false, c.at(60), c.at(60), false),
            "50 µs after the work"
        );
    }

    /// Events that come soon after the work (gaps of 2 µs): the poller spins for
    /// twice the gap, and no longer.
    #[test]
    fn adaptive_spins_for_twice_the_gap_when_events_come_soon() {
        let (mut s, c) = spin(true, true, US * 50);
        assert!(
            s.again(true, c.at(0), c.at(5), false),
            "no gap known yet: it spins"
        );
        let t = gaps(&mut s, &c, 5, 20, 2, 5);
        assert_eq!(s.window, US * 4);
        assert!(s.again(false, c.at(t), c.at(t), false));
        assert!(s.again(false, c.at(t), c.at(t + 3), false));
        assert!(!s.again(false, c.at(t + 4), c.at(t + 4), false));
    }

    /// Events far apart (gaps of 30 µs, beyond `SPIN_GAP`): the poller blocks right
    /// after the work, with no poll between; but now and then a decision spins for
    /// the whole window (a probe), first after `PROBE_EVERY` blocks, then, as each
    /// probe finds a long gap, after twice as many as the last time.
    #[test]
    fn adaptive_blocks_when_the_gaps_are_long_but_probes_less_and_less() {
        let (mut s, c) = spin(true, true, US * 50);
        assert!(s.again(true, c.at(0), c.at(5), false));
        let mut t = gaps(&mut s, &c, 5, 4, 30, 5);
        let mut probes = Vec::new();
        for decision in 0..PROBE_EVERY * 15 {
            if s.window == US * 50 {
                probes.push(decision);
                assert!(
                    s.again(false, c.at(t), c.at(t + 49), false),
                    "a probe spins"
                );
            } else {
                assert_eq!(s.window, Duration::ZERO);
            }
            t += 30;
            let spins = s.again(true, c.at(t), c.at(t + 5), false);
            assert_eq!(spins, s.window == US * 50, "only a probe polls after work");
            t += 5;
        }
        // The first probe after 16 blocks (4 of them before the loop), then 32, 64, 128.
        assert_eq!(probes[0], PROBE_EVERY - 4, "{probes:?}");
        let gaps: Vec<u32> = probes.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps, [32, 64, 128], "{probes:?}");
        assert_eq!(s.probe_every, PROBE_EVERY * 16);
    }

    /// The load changes: long gaps, then short ones (the probes see them), then long
    /// again; the policy follows each way.
    #[test]
    fn adaptive_follows_the_gaps_as_they_change() {
        let (mut s, c) = spin(true, true, US * 50);
        assert!(s.again(true, c.at(0), c.at(5), false));
        let mut t = gaps(&mut s, &c, 5, 40, 30, 5);
        assert!(s.gap_ns > SPIN_GAP.as_nanos() as u64);
        for _ in 0..PROBE_EVERY * 40 {
            // While blocking, the gaps seen are long (the wake-up); the probes see 1 µs.
            let gap = if s.window.is_zero() { 40 } else { 1 };
            t = gaps(&mut s, &c, t, 1, gap, 5);
        }
        assert!(
            s.window > Duration::ZERO && s.window <= US * 6,
            "{:?}",
            s.window
        );
        gaps(&mut s, &c, t, 10, 30, 5);
        assert_eq!(s.window, Duration::ZERO, "long gaps again: it blocks");
    }

    /// A client's reply comes 20 µs after its call went out, far beyond `SPIN_GAP`:
    /// with the reply due, the poller spins for twice that and no longer, and does
    /// not block between the call and its reply.
    #[test]
    fn a_due_reply_is_spun_for_for_twice_its_usual_delay() {
        let (mut s, c) = spin(true, true, US * 50);
        assert!(
            s.again(true, c.at(0), c.at(5), true),
            "nothing learnt: it spins"
        );
        let t = gaps_of(&mut s, &c, 5, 40, 20, 5, true);
        assert_eq!(s.window, US * 40);
        assert!(s.again(false, c.at(t), c.at(t), true));
        assert!(s.again(false, c.at(t + 10), c.at(t + 39), true));
        assert!(
            !s.again(false, c.at(t + 40), c.at(t + 40), true),
            "40 µs: it blocks"
        );
    }

    /// The same gaps with no reply due (a server's poller between requests) are not
    /// spun through: the rule for idle gaps holds.
    #[test]
    fn the_same_gaps_with_no_reply_due_block() {
        let (mut s, c) = spin(true, true, US * 50);
        assert!(s.again(true, c.at(0), c.at(5), false));
        gaps_of(&mut s, &c, 5, 40, 20, 5, false);
        assert_eq!(s.window, Duration::ZERO);
    }

    /// Replies later than the window (a slow server) are not waited for: the poller
    /// blocks right after its work, probing now and then as for long idle gaps.
    #[test]
    fn a_reply_later_than_the_window_is_not_spun_for() {
        let (mut s, c) = spin(true, true, US * 50);
        assert!(s.again(true, c.at(0), c.at(5), true));
        let t = gaps_of(&mut s, &c, 5, 4, 200, 5, true);
        assert!(s.due_gap_ns > 50_000, "{}", s.due_gap_ns);
        assert_eq!(s.window, Duration::ZERO);
        assert!(
            !s.again(true, c.at(t + 200), c.at(t + 205), true),
            "it blocks at once"
        );
    }

    /// Idle gaps with and without a reply due are learnt apart: a client whose calls
    /// come back in 20 µs and that sits idle for long between bursts keeps spinning
    /// for its replies, and blocks when nothing is due.
    #[test]
    fn due_and_idle_gaps_are_learnt_apart() {
        let (mut s, c) = spin(true, true, US * 50);
        assert!(s.again(true, c.at(0), c.at(5), true));
        let mut t = gaps_of(&mut s, &c, 5, 40, 20, 5, true);
        let due_gap = s.due_gap_ns;
        // The last reply is taken: nothing is due; a long idle gap, learnt by probes.
        for _ in 0..PROBE_EVERY * 2 {
            t = gaps_of(&mut s, &c, t, 1, 5_000, 5, false);
            assert_eq!(s.due_gap_ns, due_gap, "an idle gap is not a reply's");
        }
        assert!(s.gap_ns > SPIN_GAP.as_nanos() as u64);
        assert_eq!(s.window, Duration::ZERO, "nothing due: it blocks");
        // A call goes out: the turn that ends with its reply due spins for it.
        assert!(s.again(true, c.at(t + 5_000), c.at(t + 5_005), true));
        assert_eq!(s.window, US * 40);
    }

    /// Turns back to back, with no empty poll between, are one burst: no gap is learnt.
    #[test]
    fn adaptive_learns_no_gap_inside_a_burst() {
        let (mut s, c) = spin(true, true, US * 50);
        assert!(s.again(true, c.at(0), c.at(5), false));
        let t = gaps(&mut s, &c, 5, 10, 30, 5);
        let learnt = s.gap_ns;
        for i in 0..100 {
            s.again(true, c.at(t + i * 5), c.at(t + i * 5 + 5), false);
        }
        assert_eq!(s.gap_ns, learnt);
    }
}
