//! The layer that puts a [`ServiceBreaker`] in a client stack.

use super::{BreakerConfig, ServiceBreaker};
use crate::clock::{Clock, SystemClock};
use crate::governance::ClientGovernance;
use crate::service::Layer;

/// Wraps a service in a [`ServiceBreaker`]: one breaker for the callee service per
/// layer applied. [`Default`] uses [`BreakerConfig::service`]: open at 50% failures
/// over 10 s once 200 calls were seen, for 5 s, then 3 trial calls.
#[derive(Debug, Clone)]
pub struct ServiceBreakerLayer<C = SystemClock> {
    config: BreakerConfig,
    governance: Option<ClientGovernance>,
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
        ServiceBreakerLayer {
            config,
            governance: None,
            clock,
        }
    }

    /// The same layer, its thresholds following `governance`'s breaker rules (see
    /// [`ServiceBreaker::governed`]).
    pub fn governed(mut self, governance: Option<ClientGovernance>) -> Self {
        self.governance = governance;
        self
    }
}

impl<S, C: Clock> Layer<S> for ServiceBreakerLayer<C> {
    type Service = ServiceBreaker<S, C>;

    fn layer(self, inner: S) -> ServiceBreaker<S, C> {
        match self.governance {
            Some(g) => ServiceBreaker::governed(inner, self.config, self.clock, g),
            None => ServiceBreaker::new(inner, self.config, self.clock),
        }
    }
}
