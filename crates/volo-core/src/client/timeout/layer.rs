use std::time::Duration;

use super::Timeout;
use crate::clock::{Clock, SystemClock};
use crate::service::Layer;

/// Wraps a service in a [`Timeout`].
#[derive(Debug, Clone)]
pub struct TimeoutLayer<C = SystemClock> {
    default: Option<Duration>,
    clock: C,
}

impl TimeoutLayer {
    /// Calls without a timeout of their own get `default` (`None`: no limit).
    pub fn new(default: Option<Duration>) -> Self {
        TimeoutLayer {
            default,
            clock: SystemClock,
        }
    }
}

impl<C> TimeoutLayer<C> {
    /// The same layer reading time from `clock`.
    pub fn with_clock<C2: Clock>(self, clock: C2) -> TimeoutLayer<C2> {
        TimeoutLayer {
            default: self.default,
            clock,
        }
    }
}

impl<S, C: Clock> Layer<S> for TimeoutLayer<C> {
    type Service = Timeout<S, C>;

    fn layer(self, inner: S) -> Timeout<S, C> {
        Timeout::new(inner, self.default, self.clock)
    }
}
