//! The time and sleeps of a streaming connection, on a clock given as an input.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clock::{Clock, SystemClock};

/// A sleep of a [`Timer`].
pub(crate) type Sleep = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The time, and sleeps, on a [`Clock`] given as an input (the real one, or a
/// test's).
#[derive(Clone)]
pub(crate) struct Timer {
    now: Arc<dyn Fn(Duration) -> Instant + Send + Sync>,
    sleep: Arc<dyn Fn(Instant) -> Sleep + Send + Sync>,
}

impl Timer {
    pub(crate) fn new(clock: impl Clock) -> Timer {
        let now = clock.clone();
        Timer {
            now: Arc::new(move |tolerance| now.now_within(tolerance)),
            sleep: Arc::new(move |at| Box::pin(clock.sleep_until(at))),
        }
    }

    /// The clock's time.
    pub(crate) fn now(&self) -> Instant {
        (self.now)(Duration::ZERO)
    }

    /// The clock's time to within `tolerance` ([`Clock::now_within`]), read more
    /// cheaply where the clock can.
    pub(crate) fn now_within(&self, tolerance: Duration) -> Instant {
        (self.now)(tolerance)
    }

    /// Completes once the clock reaches `at`.
    pub(crate) fn sleep_until(&self, at: Instant) -> Sleep {
        (self.sleep)(at)
    }

    /// Completes once `d` has passed on the clock.
    pub(crate) fn after(&self, d: Duration) -> Sleep {
        self.sleep_until(self.now() + d)
    }
}

impl std::fmt::Debug for Timer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Timer")
    }
}

impl Default for Timer {
    fn default() -> Self {
        Timer::new(SystemClock)
    }
}
