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

    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static + use<> {
        tokio::time::sleep_until(deadline.into())
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
    fn a_dropped_timer_leaves_no_sleeper() {
        let clock = ManualClock::new();
        let mut sleep = Box::pin(clock.sleep_until(clock.now() + Duration::from_secs(1)));
        assert!((&mut sleep).now_or_never().is_none());
        drop(sleep);
        assert_eq!(clock.sleepers(), 0);
    }
}
