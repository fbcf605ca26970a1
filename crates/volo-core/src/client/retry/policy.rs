//! Which failed calls are retried, how often and after what wait.

use std::collections::HashSet;

use super::Backoff;
use crate::client::{Error, ErrorKind};

/// When a failed call is tried again (see [`Retry`](super::Retry) for the rules).
///
/// Built with setters that take and return the policy:
///
/// ```
/// use std::time::Duration;
/// use volo_core::client::{Backoff, RetryPolicy};
///
/// let policy = RetryPolicy::new()
///     .max_retries(1)
///     .idempotent(["get_user", "list_users"])
///     .backoff(Backoff::Fixed(Duration::from_millis(5)));
/// assert!(policy.is_idempotent("get_user") && !policy.is_idempotent("add_user"));
/// ```
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    pub(super) max_retries: u32,
    pub(super) idempotent: HashSet<String>,
    pub(super) backoff: Backoff,
    pub(super) budget_ratio: f64,
    pub(super) chain_stop: bool,
    pub(super) jitter_seed: Option<u64>,
    /// The kinds of failure retried; `None`: those [`Error::is_retryable`] names.
    pub(super) retry_on: Option<Vec<ErrorKind>>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 2,
            idempotent: HashSet::new(),
            backoff: Backoff::default(),
            budget_ratio: 0.1,
            chain_stop: true,
            jitter_seed: None,
            retry_on: None,
        }
    }
}

impl RetryPolicy {
    /// The defaults: at most 2 retries, no method idempotent (so only failures before
    /// the request left are retried), exponential backoff from 10 ms to 1 s with full
    /// jitter, a budget of 0.1 retries per call, chain stop on.
    pub fn new() -> Self {
        Self::default()
    }

    /// Retries after the first attempt, at most. Default 2 (three attempts in all).
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// Marks `methods` idempotent (in addition to those marked already): running one
    /// twice does no harm, so it is retried also after a failure that may have reached
    /// the server (a lost connection, a timeout). Default: none.
    pub fn idempotent<I, M>(mut self, methods: I) -> Self
    where
        I: IntoIterator<Item = M>,
        M: Into<String>,
    {
        self.idempotent.extend(methods.into_iter().map(Into::into));
        self
    }

    /// Whether `method` was marked idempotent.
    pub fn is_idempotent(&self, method: &str) -> bool {
        self.idempotent.contains(method)
    }

    /// The wait before each retry. Default [`Backoff::default`]: exponential from 10 ms
    /// to 1 s with full jitter.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Retries allowed per call made, across all the calls through one layer (0.1: at
    /// most one in ten calls retried, so retries add at most 10% load when a service
    /// fails; up to 10 retries may be taken at once after a quiet spell). Retries
    /// after a failure that reached no server (a failed connect) are not counted.
    /// Clamped to `0.0..=1.0`. Default 0.1.
    pub fn budget_ratio(mut self, ratio: f64) -> Self {
        self.budget_ratio = ratio;
        self
    }

    /// Whether a call that carries the mark of a retried request from upstream
    /// ([`RETRY_KEY`](super::RETRY_KEY)) is never retried, so one failure deep in a
    /// chain of services is not retried at every hop (retries multiplying hop by hop).
    /// Default true.
    pub fn chain_stop(mut self, on: bool) -> Self {
        self.chain_stop = on;
        self
    }

    /// Retries failures of these kinds only (still subject to the idempotency marks
    /// for those that may have run). Default: the kinds [`Error::is_retryable`]
    /// names: connect, I/O, timeout, a server's over-limit refusal, an open breaker.
    pub fn retry_on(mut self, kinds: impl IntoIterator<Item = ErrorKind>) -> Self {
        self.retry_on = Some(kinds.into_iter().collect());
        self
    }

    /// Whether a failure like `err` is of a kind this policy retries.
    pub fn retries(&self, err: &Error) -> bool {
        match &self.retry_on {
            Some(kinds) => kinds.contains(&err.kind()),
            None => err.is_retryable(),
        }
    }

    /// Seeds the jitter of the backoff, so the waits repeat from run to run (tests).
    /// Default: a random seed per layer.
    pub fn jitter_seed(mut self, seed: u64) -> Self {
        self.jitter_seed = Some(seed);
        self
    }
}
