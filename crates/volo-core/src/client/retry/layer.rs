//! The layer that wraps a client stack in [`Retry`].

use std::sync::Arc;

use super::{BUDGET_MAX, Retry, RetryBudget, RetryPolicy};
use crate::clock::{Clock, SystemClock};
use crate::governance::ClientGovernance;
use crate::random::{Xorshift, random_seed};
use crate::service::Layer;

/// Wraps a service in [`Retry`] with one policy. The services it makes, and their
/// clones, share one retry budget and one jitter sequence; make one layer per client.
#[derive(Debug, Clone)]
pub struct RetryLayer<C = SystemClock> {
    policy: RetryPolicy,
    budget: Arc<RetryBudget>,
    jitter: Arc<Xorshift>,
    governance: Option<ClientGovernance>,
    clock: C,
}

impl RetryLayer {
    /// A layer retrying by `policy`, sleeping on the system clock.
    pub fn new(policy: RetryPolicy) -> Self {
        RetryLayer {
            budget: Arc::new(RetryBudget::new(policy.budget_ratio, BUDGET_MAX)),
            jitter: Arc::new(Xorshift::new(
                policy.jitter_seed.unwrap_or_else(random_seed),
            )),
            policy,
            governance: None,
            clock: SystemClock,
        }
    }
}

impl<C> RetryLayer<C> {
    /// The same layer, reading time from `clock` (a
    /// [`ManualClock`](crate::clock::ManualClock) in tests).
    pub fn with_clock<C2: Clock>(self, clock: C2) -> RetryLayer<C2> {
        RetryLayer {
            policy: self.policy,
            budget: self.budget,
            jitter: self.jitter,
            governance: self.governance,
            clock,
        }
    }

    /// The same layer, taking each method's retry rule from `governance` when it has
    /// one for the method (see [`RetryRule`](crate::governance::RetryRule)); the
    /// policy holds for the others.
    pub fn governed(mut self, governance: Option<ClientGovernance>) -> Self {
        self.governance = governance;
        self
    }
}

impl<S, C: Clock> Layer<S> for RetryLayer<C> {
    type Service = Retry<S, C>;

    fn layer(self, inner: S) -> Retry<S, C> {
        Retry {
            inner,
            policy: Arc::new(self.policy),
            budget: self.budget,
            jitter: self.jitter,
            governance: self.governance,
            clock: self.clock,
        }
    }
}
