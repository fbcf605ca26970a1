//! Time as an input: every layer whose behaviour depends on time (timeouts, backoff,
//! backup delays, breaker windows, token buckets) reads it from a [`Clock`] it was
//! given, so tests drive it with a [`ManualClock`] instead of sleeping.
//!
//! ```
//! use std::time::Duration;
//! use volo_core::clock::{Clock, ManualClock};
//!
//! # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! # rt.block_on(async {
//! let clock = ManualClock::new();
//! let start = clock.now();
//! let wake = clock.sleep_until(start + Duration::from_millis(5));
//! let waiter = tokio::spawn(wake);
//! clock.advance(Duration::from_millis(5));
//! waiter.await.unwrap();
//! assert_eq!(clock.now() - start, Duration::from_millis(5));
//! # });
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// A source of the current time and of timers.
///
/// Implementations must be cheap to clone (layers keep their own copy) and their
/// timers must complete once [`now`](Clock::now) has reached the deadline.
pub trait Clock: Clone + Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> Instant;

    /// The current instant to within a few milliseconds (a tick of the kernel's
    /// clock), possibly earlier or later than [`now`](Clock::now) by that much, read
    /// more cheaply: for bookkeeping that counts events in buckets of a second or so
    /// (breaker windows), never for deadlines. By default, [`now`](Clock::now).
    fn now_coarse(&self) -> Instant {
        self.now()
    }

    /// The current instant to within `tolerance`: the [coarse](Clock::now_coarse)
    /// reading where its tick is no longer than `tolerance`, else [`now`](Clock::now).
    /// For deadlines far enough away that a few milliseconds are a small share of
    /// them. By default, [`now`](Clock::now).
    fn now_within(&self, tolerance: Duration) -> Instant {
        let _ = tolerance;
        self.now()
    }

    /// Completes at `deadline` (at once if it has passed).
    fn sleep_until(
        &self,
        deadline: Instant,
    ) -> impl Future<Output = ()> + Send + 'static + use<Self>;
}

/// The real clock: `Instant::now` and tokio's timers (so it needs a tokio runtime with
/// time enabled, as the client and the server have).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    /// `CLOCK_MONOTONIC_COARSE` (the time at the kernel's last tick, which the vDSO
    /// gives without reading the TSC: about a third of `Instant::now`'s cost on a
    /// virtual machine), moved onto `Instant`'s scale by one pair of readings taken
    /// the first time. Both clocks are `CLOCK_MONOTONIC` underneath, so the result is
    /// within a tick of [`now`](Clock::now). Falls back to `now` if the clock cannot be
    /// read.
    fn now_coarse(&self) -> Instant {
        coarse::now().unwrap_or_else(Instant::now)
    }

    fn now_within(&self, tolerance: Duration) -> Instant {
        match coarse::tick() {
            Some(tick) if tick <= tolerance => self.now_coarse(),
            _ => Instant::now(),
        }
    }

    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static + use<> {
        tokio::time::sleep_until(deadline.into())
    }
}

/// The time from now until `deadline` on the system clock, to within 1% of it: the
/// coarse clock is read, and the precise one too only when the deadline is too close
/// for the coarse clock's tick.
pub(crate) fn time_left(deadline: Instant) -> Duration {
    if let (Some(tick), Some(now)) = (coarse::tick(), coarse::now()) {
        let rough = deadline.saturating_duration_since(now);
        if tick.saturating_mul(100) <= rough {
            return rough;
        }
    }
    deadline.saturating_duration_since(Instant::now())
}

mod coarse {
    use std::cell::Cell;
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};

    use crate::sys;

    const CLOCK: sys::ClockId = sys::CLOCK_MONOTONIC_COARSE;

    /// Nanoseconds on the coarse clock.
    fn read() -> Option<u64> {
        let (secs, nanos) = sys::clock_gettime(CLOCK)?;
        secs.checked_mul(1_000_000_000)?
            .checked_add(u64::from(nanos))
    }

    /// The coarse clock's tick.
    fn resolution() -> Option<Duration> {
        let (secs, nanos) = sys::clock_getres(CLOCK)?;
        Some(Duration::new(secs, nanos))
    }

    /// The coarse clock's reading and an `Instant` taken together, once, and the
    /// coarse clock's tick.
    struct Anchor {
        at: Instant,
        coarse: u64,
        tick: Duration,
    }

    fn anchor() -> Option<&'static Anchor> {
        static ANCHOR: OnceLock<Option<Anchor>> = OnceLock::new();
        ANCHOR
            .get_or_init(|| {
                let tick = resolution()?;
                let (coarse, at) = paired_reading(tick)?;
                Some(Anchor { at, coarse, tick })
            })
            .as_ref()
    }

    /// A coarse reading and the `Instant` right after it. A thread held up between the
    /// two (descheduled on a loaded machine) would put every later coarse reading off
    /// by as long, for the life of the process: so the pair is bracketed by a precise
    /// reading before it, and taken again (a few times at most, keeping the tightest)
    /// while the two precise readings are more than a tick apart.
    fn paired_reading(tick: Duration) -> Option<(u64, Instant)> {
        const TRIES: usize = 8;
        let mut best: Option<(Duration, u64, Instant)> = None;
        for _ in 0..TRIES {
            let before = Instant::now();
            let coarse = read()?;
            let at = Instant::now();
            let width = at - before;
            if best.is_none_or(|(w, _, _)| width < w) {
                best = Some((width, coarse, at));
            }
            if width <= tick {
                break;
            }
        }
        best.map(|(_, coarse, at)| (coarse, at))
    }

    pub(super) fn now() -> Option<Instant> {
        // The reading changes once a tick (4 ms at HZ=250) and is read on every call:
        // each thread keeps the last one it turned into an `Instant`.
        thread_local! {
            static LAST: Cell<(u64, Option<Instant>)> = const { Cell::new((0, None)) };
        }
        let ns = read()?;
        LAST.with(|last| match last.get() {
            (seen, Some(at)) if seen == ns => Some(at),
            _ => {
                let a = anchor()?;
                // The coarse clock never goes back, so this is the time since the anchor.
                let at =
                    a.at.checked_add(Duration::from_nanos(ns.saturating_sub(a.coarse)))?;
                last.set((ns, Some(at)));
                Some(at)
            }
        })
    }

    /// How far apart two readings of the coarse clock are at least (and how far it
    /// may be from the precise one).
    pub(super) fn tick() -> Option<Duration> {
        anchor().map(|a| a.tick)
    }

    #[cfg(test)]
    mod tests {
        /// The `clock_gettime` call alone (Miri runs it; it has no `clock_getres`).
        #[test]
        fn a_reading_comes_from_the_kernel_and_never_goes_back() {
            let first = super::read().expect("CLOCK_MONOTONIC_COARSE reads");
            let second = super::read().expect("CLOCK_MONOTONIC_COARSE reads");
            assert!(first > 0 && second >= first, "{first} then {second}");
        }
    }
}

/// A clock that moves only when told to ([`advance`](ManualClock::advance)), for tests
/// of time-dependent logic without sleeps. Clones share one time.
#[derive(Clone)]
pub struct ManualClock {
    inner: Arc<Mutex<Manual>>,
}

struct Manual {
    now: Instant,
    /// Sleepers not yet woken: (timer id, deadline, waker).
    sleepers: Vec<(u64, Instant, Waker)>,
    next_id: u64,
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.lock();
        f.debug_struct("ManualClock")
            .field("now", &m.now)
            .field("sleepers", &m.sleepers.len())
            .finish()
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl ManualClock {
    /// A clock standing at the current instant.
    pub fn new() -> Self {
        ManualClock {
            inner: Arc::new(Mutex::new(Manual {
                now: Instant::now(),
                sleepers: Vec::new(),
                next_id: 0,
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Manual> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves the time on by `by` and wakes the timers whose deadline it reached.
    pub fn advance(&self, by: Duration) {
        let due: Vec<Waker> = {
            let mut m = self.lock();
            m.now += by;
            let now = m.now;
            let (due, later) = m.sleepers.drain(..).partition(|(_, at, _)| *at <= now);
            m.sleepers = later;
            due.into_iter().map(|(_, _, w)| w).collect()
        };
        for w in due {
            w.wake();
        }
    }

    /// Timers waiting now.
    pub fn sleepers(&self) -> usize {
        self.lock().sleepers.len()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.lock().now
    }

    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static + use<> {
        let id = {
            let mut m = self.lock();
            m.next_id += 1;
            m.next_id
        };
        ManualSleep {
            clock: self.clone(),
            deadline,
            id,
        }
    }
}

/// A [`ManualClock`] timer.
struct ManualSleep {
    clock: ManualClock,
    deadline: Instant,
    id: u64,
}

impl Future for ManualSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut m = self.clock.lock();
        if m.now >= self.deadline {
            return Poll::Ready(());
        }
        // One entry per timer: polled again, it replaces its waker.
        let (id, deadline) = (self.id, self.deadline);
        match m.sleepers.iter_mut().find(|(i, _, _)| *i == id) {
            Some(entry) => entry.2 = cx.waker().clone(),
            None => m.sleepers.push((id, deadline, cx.waker().clone())),
        }
        Poll::Pending
    }
}

impl Drop for ManualSleep {
    fn drop(&mut self) {
        let id = self.id;
        self.clock.lock().sleepers.retain(|(i, _, _)| *i != id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    #[test]
    fn a_manual_timer_fires_when_the_clock_reaches_it_and_not_before() {
        let clock = ManualClock::new();
        let t0 = clock.now();
        let mut sleep = Box::pin(clock.sleep_until(t0 + Duration::from_secs(2)));
        assert!((&mut sleep).now_or_never().is_none());
        assert_eq!(clock.sleepers(), 1);
        clock.advance(Duration::from_secs(1));
        assert!((&mut sleep).now_or_never().is_none());
        clock.advance(Duration::from_secs(1));
        assert!((&mut sleep).now_or_never().is_some());
        assert_eq!(clock.sleepers(), 0);
        assert!(
            clock.sleep_until(t0).now_or_never().is_some(),
            "a past deadline"
        );
    }

    #[test]
    fn the_coarse_clock_is_read_from_the_kernel() {
        // Not the fallback to `Instant::now`: the kernel's clock, and its tick (at most
        // 10 ms: HZ is at least 100).
        let tick = coarse::tick().expect("CLOCK_MONOTONIC_COARSE has a resolution");
        assert!(
            tick > Duration::ZERO && tick <= Duration::from_millis(10),
            "{tick:?}"
        );
        let first = coarse::now().expect("CLOCK_MONOTONIC_COARSE reads");
        let second = coarse::now().expect("CLOCK_MONOTONIC_COARSE reads");
        assert!(second >= first, "it never goes back");
    }

    #[test]
    fn the_coarse_system_clock_stays_within_a_tick_of_the_precise_one() {
        // A kernel tick is at most 10 ms (HZ=100); allow for a descheduled thread
        // between the two readings as well.
        let slack = Duration::from_millis(50);
        for _ in 0..1000 {
            let before = SystemClock.now();
            let coarse = SystemClock.now_coarse();
            let after = SystemClock.now();
            assert!(coarse + slack >= before, "{coarse:?} far behind {before:?}");
            assert!(coarse <= after + slack, "{coarse:?} far ahead of {after:?}");
        }
        // And it moves: over 30 ms of real time it advances by some of it.
        let start = SystemClock.now_coarse();
        let real = Instant::now();
        while real.elapsed() < Duration::from_millis(30) {
            std::hint::spin_loop();
        }
        assert!(SystemClock.now_coarse() > start, "the coarse clock moved");
    }

    #[test]
    fn the_time_left_is_within_one_percent() {
        for left in [
            Duration::ZERO,
            Duration::from_millis(3),
            Duration::from_secs(10),
        ] {
            // What is really left lies between `left` and `left` less the time between
            // the precise readings either side (a thread held up in between makes it
            // far less).
            let before = Instant::now();
            let deadline = before + left;
            let got = time_left(deadline);
            let after = Instant::now();
            let least = deadline.saturating_duration_since(after);
            let slack = left / 100 + Duration::from_millis(50);
            assert!(
                got <= left + slack && got + slack >= least,
                "{left:?}: {got:?}, at least {least:?} was left"
            );
        }
        let past = Instant::now();
        assert_eq!(time_left(past), Duration::ZERO, "a deadline gone by");
    }

    #[test]
    fn now_within_a_tolerance_stays_within_it() {
        let clock = SystemClock;
        for tolerance in [Duration::ZERO, Duration::from_millis(100)] {
            let before = clock.now();
            let t = clock.now_within(tolerance);
            let after = clock.now();
            // Within the tolerance of the precise readings either side (and 50 ms of
            // slack for a descheduled thread).
            let slack = tolerance + Duration::from_millis(50);
            assert!(t + slack >= before && t <= after + slack, "{tolerance:?}");
        }
        // A zero tolerance is the precise clock: never before an earlier reading.
        let before = clock.now();
        assert!(clock.now_within(Duration::ZERO) >= before);
    }

    #[test]
    fn a_dropped_timer_leaves_no_sleeper() {
        let clock = ManualClock::new();
        let mut sleep = Box::pin(clock.sleep_until(clock.now() + Duration::from_secs(1)));
        assert!((&mut sleep).now_or_never().is_none());
        drop(sleep);
        assert_eq!(clock.sleepers(), 0);
    }
}
