use std::time::Duration;

use super::Timeout;
use crate::clock::{Clock, SystemClock};
use crate::governance::ClientGovernance;
use crate::service::Layer;

/// Wraps a service in a [`Timeout`].
#[derive(Debug, Clone)]
pub struct TimeoutLayer<C = SystemClock> {
    default: Option<Duration>,
    governance: Option<ClientGovernance>,
    clock: C,
}

impl TimeoutLayer {
    /// Calls without a timeout of their own get `default` (`None`: no limit).
    pub fn new(default: Option<Duration>) -> Self {
        TimeoutLayer {
            default,
            governance: None,
            clock: SystemClock,
        }
    }
}

impl<C> TimeoutLayer<C> {
    /// The same layer reading time from `clock`.
    pub fn with_clock<C2: Clock>(self, clock: C2) -> TimeoutLayer<C2> {
        TimeoutLayer {
            default: self.default,
            governance: self.governance,
            clock,
        }
    }

    /// The same layer, taking each method's timeouts from `governance` when it has a
    /// rule for the method (a call's own [`ClientContext::timeout`] still comes
    /// first).
    ///
    /// [`ClientContext::timeout`]: crate::client::ClientContext::timeout
    pub fn governed(mut self, governance: Option<ClientGovernance>) -> Self {
        self.governance = governance;
        self
    }
}

impl<S, C: Clock> Layer<S> for TimeoutLayer<C> {
    type Service = Timeout<S, C>;

    fn layer(self, inner: S) -> Timeout<S, C> {
        let mut timeout = Timeout::new(inner, self.default, self.clock);
        timeout.governance = self.governance;
        timeout
    }
}
