//! The layer that puts a [`ServiceBreaker`] in a client stack.

use super::{BreakerConfig, ServiceBreaker};
use crate::clock::{Clock, SystemClock};
use crate::service::Layer;

/// Wraps a service in a [`ServiceBreaker`]: one breaker for the callee service per
/// layer applied. [`Default`] uses [`BreakerConfig::service`]: open at 50% failures
/// over 10 s once 200 calls were seen, for 5 s, then 3 trial calls.
#[derive(Debug, Clone)]
pub struct ServiceBreakerLayer<C = SystemClock> {
    config: BreakerConfig,
    clock: C,
}

impl Default for ServiceBreakerLayer {
    /// [`BreakerConfig::service`] on the system clock.
    fn default() -> Self {
        Self::new(BreakerConfig::service())
    }
}

impl ServiceBreakerLayer {
    /// A breaker with `config` on the system clock.
    pub fn new(config: BreakerConfig) -> Self {
        Self::with_clock(config, SystemClock)
    }
}

impl<C: Clock> ServiceBreakerLayer<C> {
    /// A breaker with `config` that reads the time from `clock`.
    pub fn with_clock(config: BreakerConfig, clock: C) -> Self {
        ServiceBreakerLayer { config, clock }
    }
}

impl<S, C: Clock> Layer<S> for ServiceBreakerLayer<C> {
    type Service = ServiceBreaker<S, C>;

    fn layer(self, inner: S) -> ServiceBreaker<S, C> {
        ServiceBreaker::new(inner, self.config, self.clock)
    }
}
