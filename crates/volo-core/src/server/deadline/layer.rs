//! [`DeadlineLayer`]: puts a [`Deadline`] around a server's service.

use std::time::Duration;

use super::{DEFAULT_GRACE, Deadline};
use crate::clock::{Clock, SystemClock};
use crate::service::Layer;

/// Wraps a service in a [`Deadline`] that reads time from `C`.
///
/// The server applies one with the [`SystemClock`] around every dispatcher (inside the
/// user's layers); build one yourself to test a stack with a
/// [`ManualClock`](crate::clock::ManualClock).
#[derive(Debug, Clone, Copy)]
pub struct DeadlineLayer<C = SystemClock> {
    clock: C,
    grace: Duration,
}

impl DeadlineLayer {
    /// A layer on the system clock, with the [`DEFAULT_GRACE`].
    pub fn new() -> Self {
        Self::with_clock(SystemClock)
    }
}

impl Default for DeadlineLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl<C: Clock> DeadlineLayer<C> {
    /// A layer on `clock`, with the [`DEFAULT_GRACE`].
    pub fn with_clock(clock: C) -> Self {
        DeadlineLayer {
            clock,
            grace: DEFAULT_GRACE,
        }
    }

    /// Answers a call it gave up on `grace` after the deadline (zero: at the deadline;
    /// see the [module docs](super)).
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }
}

impl<S, C: Clock> Layer<S> for DeadlineLayer<C> {
    type Service = Deadline<S, C>;

    fn layer(self, inner: S) -> Deadline<S, C> {
        Deadline::new(inner, self.clock).with_grace(self.grace)
    }
}
