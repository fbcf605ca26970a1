//! The rules a config center sets: plain values, checked when they were parsed.

use std::collections::HashMap;
use std::time::Duration;

/// A fast hasher for method names (looked up on every call of a governed client).
type Map<T> = HashMap<Box<str>, T, foldhash::fast::RandomState>;

/// Rules per method: those of named methods, and one for the others (Kitex's `"*"`).
#[derive(Debug, Clone, PartialEq)]
pub struct MethodRules<T> {
    any: Option<T>,
    methods: Map<T>,
}

impl<T> Default for MethodRules<T> {
    fn default() -> Self {
        MethodRules {
            any: None,
            methods: Map::default(),
        }
    }
}

impl<T> MethodRules<T> {
    /// No rules.
    pub fn new() -> Self {
        Self::default()
    }

    /// The rule for methods without one of their own.
    pub fn any(mut self, rule: T) -> Self {
        self.any = Some(rule);
        self
    }

    /// The rule for `method`.
    pub fn method(mut self, method: impl Into<Box<str>>, rule: T) -> Self {
        self.methods.insert(method.into(), rule);
        self
    }

    /// The rule for `method`: its own, else the one for any method.
    pub fn get(&self, method: &str) -> Option<&T> {
        if self.methods.is_empty() {
            return self.any.as_ref();
        }
        self.methods.get(method).or(self.any.as_ref())
    }

    /// The rule for methods without one of their own.
    pub fn for_any(&self) -> Option<&T> {
        self.any.as_ref()
    }

    /// The methods with a rule of their own, and their rules.
    pub fn named(&self) -> impl Iterator<Item = (&str, &T)> {
        self.methods.iter().map(|(m, r)| (&**m, r))
    }

    /// Whether there is no rule at all.
    pub fn is_empty(&self) -> bool {
        self.any.is_none() && self.methods.is_empty()
    }
}

/// A method's timeouts (Kitex's `rpc_timeout` item).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutRule {
    /// The whole call's limit, retries included; `None`: no limit (Kitex's 0).
    pub rpc: Option<Duration>,
    /// The limit of a connect the call makes; `None`: the client's own
    /// ([`ClientTimeouts::connect`](crate::client::ClientTimeouts::connect)).
    pub connect: Option<Duration>,
}

/// The wait before a retry, as a config center gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackoffRule {
    /// Retry at once (Kitex's `none`).
    None,
    /// The same wait every time (`fixed`, `fix_ms`).
    Fixed(Duration),
    /// A wait drawn uniformly from `min..=max` (`random`, `min_ms`, `max_ms`).
    Random {
        /// The shortest wait.
        min: Duration,
        /// The longest wait.
        max: Duration,
    },
}

/// A method's retry rule (Kitex's `retry` item).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RetryRule {
    /// No retries and no backup requests (Kitex's `"enable": false`).
    Off,
    /// Failed calls retried (Kitex's failure policy, `type` 0). The method counts as
    /// idempotent for the retry layer: naming it here says a second run does no harm,
    /// as a Kitex failure policy retries timeouts whether or not they ran.
    Failure {
        /// Retries after the first attempt, at most (0 to 5, as in Kitex).
        max_retries: u32,
        /// No retry starts once this long has passed since the call began
        /// (`max_duration_ms`; `None`: no such limit, the deadline still holds).
        max_duration: Option<Duration>,
        /// The wait before each retry; `None`: the builder's.
        backoff: Option<BackoffRule>,
        /// Whether a call marked as retried upstream is not retried again.
        chain_stop: bool,
    },
    /// A backup request after `delay` when the first attempt has not answered
    /// (Kitex's backup policy, `type` 1); the method counts as idempotent for it.
    Backup {
        /// How long the first attempt runs alone.
        delay: Duration,
        /// Whether a call marked as retried upstream gets no backup.
        chain_stop: bool,
    },
}

/// A method's breaker thresholds (Kitex's `circuit_break` item).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakerRule {
    /// `false`: calls of the method pass no breaker (neither refused nor counted).
    pub enabled: bool,
    /// The share of failures, over the breaker's window, at which it opens (0 to 1).
    pub error_rate: f64,
    /// Calls the window must hold before the rate is judged.
    pub min_samples: u64,
}

/// A server's limits (Kitex's `limit` item, and one of ours).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LimitRule {
    /// Connections open at once; more are closed as they are accepted. `None`: the
    /// server's `max_connections` only (Kitex's `connection_limit` 0).
    pub connections: Option<usize>,
    /// Calls admitted per second. `None`: no rate limit (Kitex's `qps_limit` 0).
    pub qps: Option<u32>,
    /// Calls in progress at once (`concurrency_limit`, ours; Kitex has no such
    /// item). `None`: no such limit.
    pub concurrency: Option<usize>,
}

/// The rules in force for one client, by category.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientRules {
    /// Timeouts per method.
    pub timeouts: MethodRules<TimeoutRule>,
    /// Retry and backup per method.
    pub retry: MethodRules<RetryRule>,
    /// Breaker thresholds per method.
    pub breaker: MethodRules<BreakerRule>,
}
