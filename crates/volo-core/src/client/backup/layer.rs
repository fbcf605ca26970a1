//! The layer that wraps a client stack in [`Backup`].

use std::sync::Arc;

use super::policy::Latencies;
use super::{BUDGET_MAX, Backup, BackupPolicy};
use crate::client::RetryBudget;
use crate::clock::{Clock, SystemClock};
use crate::governance::ClientGovernance;
use crate::service::Layer;

/// Wraps a service in [`Backup`] with one policy. The services it makes, and their
/// clones, share one backup budget and one record of latencies; make one layer per
/// client.
#[derive(Debug, Clone)]
pub struct BackupLayer<C = SystemClock> {
    policy: Arc<BackupPolicy>,
    budget: Arc<RetryBudget>,
    latencies: Arc<Latencies>,
    governance: Option<ClientGovernance>,
    clock: C,
}

impl BackupLayer {
    /// A layer sending backups by `policy`, timed on the system clock.
    pub fn new(policy: BackupPolicy) -> Self {
        BackupLayer {
            budget: Arc::new(RetryBudget::new(policy.budget_ratio, BUDGET_MAX)),
            latencies: Arc::new(Latencies::new(policy.delay)),
            policy: Arc::new(policy),
            governance: None,
            clock: SystemClock,
        }
    }
}

impl<C> BackupLayer<C> {
    /// The same layer, reading time from `clock` (a
    /// [`ManualClock`](crate::clock::ManualClock) in tests).
    pub fn with_clock<C2: Clock>(self, clock: C2) -> BackupLayer<C2> {
        BackupLayer {
            policy: self.policy,
            budget: self.budget,
            latencies: self.latencies,
            governance: self.governance,
            clock,
        }
    }

    /// The same layer, taking each method's rule from `governance` when it has one:
    /// a [`RetryRule::Backup`](crate::governance::RetryRule::Backup) sends backups
    /// after its fixed delay (whether or not the policy marked the method), any other
    /// rule for the method sends none.
    pub fn governed(mut self, governance: Option<ClientGovernance>) -> Self {
        self.governance = governance;
        self
    }
}

impl<S, C: Clock> Layer<S> for BackupLayer<C> {
    type Service = Backup<S, C>;

    fn layer(self, inner: S) -> Backup<S, C> {
        Backup {
            inner,
            policy: self.policy,
            budget: self.budget,
            latencies: self.latencies,
            governance: self.governance,
            clock: self.clock,
        }
    }
}
