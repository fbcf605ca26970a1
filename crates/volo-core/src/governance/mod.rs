//! Governance that changes while running: timeouts, retry policy and breaker
//! thresholds per callee service and method on a client, limits on a server, set from
//! outside the process (a config center such as etcd) and taken up by the next call.
//!
//! # The model
//!
//! A [`ClientGovernance`] is a handle to the rules in force for one client (one callee
//! service): [`ClientRules`], three [`MethodRules`] tables (timeouts, retry, breaker),
//! each with rules for named methods and one for the rest (Kitex's `"*"`). A client
//! built with [`ClientBuilder::governance`](crate::client::ClientBuilder::governance)
//! reads them on each call: its timeout, retry, backup and service breaker layers ask
//! the table for the call's method and fall back to what the builder set when the
//! table has no rule for it. A [`ServerGovernance`] holds a server's [`LimitRule`],
//! which its limiter and its accept loop read
//! ([`Server::governance`](crate::server::Server::governance)).
//!
//! The handles are written whole, a category at a time, by whoever watches the
//! source: [`ClientGovernance::apply_kitex`] and [`ServerGovernance::apply_kitex`] take
//! a value in the JSON of Kitex's config centers (see [`kitex`]); the etcd watcher of
//! the `etcd-registry` crate feeds them from etcd keys in config-etcd's layout. A
//! value that does not parse or is out of range is refused as a whole with a typed
//! [`GovernanceError`] (and a log line at the watcher), and the rules in force stay
//! as they were: a typo in a config center never turns a service's settings off. A
//! value removed (`None`) puts the defaults back for that category, as Kitex does.
//!
//! # Cost per call
//!
//! A client without governance pays nothing. With it, each governed layer loads the
//! rules (an `ArcSwap` load: an atomic read and a thread-local slot, no lock) and looks
//! the method up in a hash map when the table has named methods. The service breaker
//! also reads the handle's version, an atomic, to notice a change of its thresholds.
//!
//! # In the metrics
//!
//! [`Metrics::watch_client_governance`](crate::metrics::Metrics::watch_client_governance)
//! and [`Metrics::watch_server_governance`](crate::metrics::Metrics::watch_server_governance)
//! report the values in force at each scrape (`rpc_governance_value`) and the values
//! applied and refused (`rpc_governance_updates_total`).

pub mod kitex;
mod rules;

#[cfg(test)]
mod tests;

pub use kitex::GovernanceError;
pub use rules::{
    BackoffRule, BreakerRule, ClientRules, LimitRule, MethodRules, RetryRule, TimeoutRule,
};

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;

/// A category of client rules: which table a value sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientCategory {
    /// Call and connect timeouts (Kitex's `rpc_timeout`).
    Timeout,
    /// Failure retries or backup requests (Kitex's `retry`).
    Retry,
    /// Service breaker thresholds (Kitex's `circuit_break`).
    Breaker,
}

impl ClientCategory {
    /// All, in the order the metrics give them.
    pub const ALL: [ClientCategory; 3] = [
        ClientCategory::Timeout,
        ClientCategory::Retry,
        ClientCategory::Breaker,
    ];

    /// The category's name in Kitex's config centers (the last part of the key).
    pub fn kitex_name(self) -> &'static str {
        match self {
            ClientCategory::Timeout => "rpc_timeout",
            ClientCategory::Retry => "retry",
            ClientCategory::Breaker => "circuit_break",
        }
    }

    /// The category named `name` in Kitex's config centers, if it is one of ours.
    pub fn from_kitex_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.kitex_name() == name)
    }
}

/// One value in force, as the metrics give it: `rpc_governance_value{method,
/// setting}`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Setting {
    /// The method (`*` for the rule of any method; empty for a server's limits).
    pub(crate) method: Box<str>,
    /// What is set: `rpc_timeout_seconds`, `retry_max`, `qps_limit`...
    pub(crate) name: &'static str,
    pub(crate) value: f64,
}

fn secs(d: Option<Duration>) -> f64 {
    d.map_or(0.0, |d| d.as_secs_f64())
}

impl ClientRules {
    /// The values in force, a few per rule (0 for "none").
    pub(crate) fn settings(&self) -> Vec<Setting> {
        let mut out = Vec::new();
        let mut push = |method: &str, name, value| {
            out.push(Setting {
                method: method.into(),
                name,
                value,
            })
        };
        for (method, t) in each(&self.timeouts) {
            push(method, "rpc_timeout_seconds", secs(t.rpc));
            push(method, "connect_timeout_seconds", secs(t.connect));
        }
        for (method, r) in each(&self.retry) {
            let (max, backup) = match *r {
                RetryRule::Off => (0.0, 0.0),
                RetryRule::Failure { max_retries, .. } => (f64::from(max_retries), 0.0),
                RetryRule::Backup { delay, .. } => (0.0, delay.as_secs_f64()),
            };
            push(method, "retry_max", max);
            push(method, "backup_delay_seconds", backup);
        }
        for (method, b) in each(&self.breaker) {
            push(method, "breaker_enabled", f64::from(u8::from(b.enabled)));
            push(method, "breaker_error_rate", b.error_rate);
            push(method, "breaker_min_samples", b.min_samples as f64);
        }
        out
    }
}

/// A table's rules: `*` first, then the methods in name order.
fn each<T>(rules: &MethodRules<T>) -> Vec<(&str, &T)> {
    let mut named: Vec<(&str, &T)> = rules.named().collect();
    named.sort_by_key(|(m, _)| *m);
    rules
        .for_any()
        .map(|r| ("*", r))
        .into_iter()
        .chain(named)
        .collect()
}

impl LimitRule {
    /// The limits in force (0 for "no limit").
    pub(crate) fn settings(&self) -> Vec<Setting> {
        let n = |v: Option<usize>| v.map_or(0.0, |v| v as f64);
        [
            ("connection_limit", n(self.connections)),
            ("qps_limit", self.qps.map_or(0.0, f64::from)),
            ("concurrency_limit", n(self.concurrency)),
        ]
        .into_iter()
        .map(|(name, value)| Setting {
            method: "".into(),
            name,
            value,
        })
        .collect()
    }
}

/// A governance handle that does not keep its rules alive (for the metrics).
#[derive(Debug, Clone)]
pub(crate) enum WeakGovernance {
    Client(Weak<ClientShared>),
    Server(Weak<ServerShared>),
}

/// What the metrics read of a live handle.
pub(crate) struct Report {
    pub(crate) side: &'static str,
    pub(crate) service: Arc<str>,
    pub(crate) settings: Vec<Setting>,
    /// (category, applied, refused).
    pub(crate) updates: Vec<(&'static str, u64, u64)>,
}

impl WeakGovernance {
    /// The handle's values now, while it lives.
    pub(crate) fn report(&self) -> Option<Report> {
        match self {
            WeakGovernance::Client(weak) => {
                let shared = weak.upgrade()?;
                let updates = ClientCategory::ALL
                    .into_iter()
                    .map(|c| {
                        let (a, r) = shared.counts[c as usize].get();
                        (c.kitex_name(), a, r)
                    })
                    .collect();
                Some(Report {
                    side: "client",
                    service: Arc::clone(&shared.service),
                    settings: shared.rules.load().settings(),
                    updates,
                })
            }
            WeakGovernance::Server(weak) => {
                let shared = weak.upgrade()?;
                let (a, r) = shared.counts.get();
                Some(Report {
                    side: "server",
                    service: Arc::clone(&shared.service),
                    settings: shared
                        .limit
                        .load()
                        .map(|l| l.settings())
                        .unwrap_or_default(),
                    updates: vec![("limit", a, r)],
                })
            }
        }
    }
}

/// Counts of the values a handle took and refused.
#[derive(Debug, Default)]
struct Counts {
    applied: AtomicU64,
    refused: AtomicU64,
}

impl Counts {
    /// `result`, counted as applied or refused.
    fn counted<T>(&self, result: Result<T, GovernanceError>) -> Result<T, GovernanceError> {
        let counter = match result {
            Ok(_) => &self.applied,
            Err(_) => &self.refused,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        result
    }

    fn get(&self) -> (u64, u64) {
        (
            self.applied.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
        )
    }
}

/// The rules in force for one client, shared by its layers and by whoever sets them
/// (clones share them). See the [module docs](self).
#[derive(Clone)]
pub struct ClientGovernance {
    shared: Arc<ClientShared>,
}

pub(crate) struct ClientShared {
    service: Arc<str>,
    rules: ArcSwap<ClientRules>,
    /// Bumped by every change, so a layer that keeps state derived from the rules
    /// (the breaker's per-method breakers) can tell when to rebuild it.
    version: AtomicU64,
    counts: [Counts; 3],
}

impl fmt::Debug for ClientGovernance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientGovernance")
            .field("service", &self.shared.service)
            .field("rules", &**self.shared.rules.load())
            .finish()
    }
}

impl ClientGovernance {
    /// No rules yet, for a client of `service` (the name the metrics give).
    pub fn new(service: impl Into<Arc<str>>) -> Self {
        ClientGovernance {
            shared: Arc::new(ClientShared {
                service: service.into(),
                rules: ArcSwap::from_pointee(ClientRules::default()),
                version: AtomicU64::new(0),
                counts: Default::default(),
            }),
        }
    }

    /// The callee service the rules are for.
    pub fn service(&self) -> &str {
        &self.shared.service
    }

    /// The rules in force now.
    pub fn rules(&self) -> Arc<ClientRules> {
        self.shared.rules.load_full()
    }

    /// The rules in force, without taking a reference count (for the layers).
    pub(crate) fn load(&self) -> arc_swap::Guard<Arc<ClientRules>> {
        self.shared.rules.load()
    }

    /// Increases with every change of the rules.
    pub fn version(&self) -> u64 {
        self.shared.version.load(Ordering::Acquire)
    }

    /// Replaces the timeout rules.
    pub fn set_timeouts(&self, rules: MethodRules<TimeoutRule>) {
        self.update(|r| r.timeouts = rules.clone());
    }

    /// Replaces the retry rules.
    pub fn set_retry(&self, rules: MethodRules<RetryRule>) {
        self.update(|r| r.retry = rules.clone());
    }

    /// Replaces the breaker rules.
    pub fn set_breaker(&self, rules: MethodRules<BreakerRule>) {
        self.update(|r| r.breaker = rules.clone());
    }

    /// Changes one category, keeping the others: read, copy and swap again if
    /// another category changed meanwhile (two setters at once lose neither change).
    fn update(&self, change: impl Fn(&mut ClientRules)) {
        self.shared.rules.rcu(|now| {
            let mut rules = ClientRules::clone(now);
            change(&mut rules);
            rules
        });
        self.shared.version.fetch_add(1, Ordering::AcqRel);
    }

    /// Sets `category` from `value` in the JSON of Kitex's config centers
    /// ([`kitex`]); `None` (the key was removed) puts the category's defaults back (no
    /// rules: the builder's settings). A value that does not parse or is out of range
    /// is refused and changes nothing.
    pub fn apply_kitex(
        &self,
        category: ClientCategory,
        value: Option<&str>,
    ) -> Result<(), GovernanceError> {
        let result = match category {
            ClientCategory::Timeout => kitex::timeouts(value).map(|r| self.set_timeouts(r)),
            ClientCategory::Retry => kitex::retry(value).map(|r| self.set_retry(r)),
            ClientCategory::Breaker => kitex::breaker(value).map(|r| self.set_breaker(r)),
        };
        self.shared.counts[category as usize].counted(result)
    }

    /// [`apply_kitex`](Self::apply_kitex) of a value as read from a store: refused,
    /// and counted as refused, when it is longer than `max_bytes` or not UTF-8.
    pub fn apply_kitex_bytes(
        &self,
        category: ClientCategory,
        value: Option<&[u8]>,
        max_bytes: usize,
    ) -> Result<(), GovernanceError> {
        match value.map(|v| kitex::text(v, max_bytes)).transpose() {
            Ok(text) => self.apply_kitex(category, text),
            Err(error) => self.shared.counts[category as usize].counted(Err(error)),
        }
    }

    /// Values applied and refused so far in `category`.
    pub fn updates(&self, category: ClientCategory) -> (u64, u64) {
        self.shared.counts[category as usize].get()
    }

    pub(crate) fn downgrade(&self) -> WeakGovernance {
        WeakGovernance::Client(Arc::downgrade(&self.shared))
    }
}

/// The limits in force for one server, shared by its limiter, its accept loop and
/// whoever sets them (clones share them). See the [module docs](self).
#[derive(Clone)]
pub struct ServerGovernance {
    shared: Arc<ServerShared>,
}

pub(crate) struct ServerShared {
    service: Arc<str>,
    limit: ArcSwap<Option<LimitRule>>,
    version: AtomicU64,
    counts: Counts,
}

impl fmt::Debug for ServerGovernance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerGovernance")
            .field("service", &self.shared.service)
            .field("limit", &**self.shared.limit.load())
            .finish()
    }
}

impl ServerGovernance {
    /// No rule yet (the server's own limits hold), for a server of `service`.
    pub fn new(service: impl Into<Arc<str>>) -> Self {
        ServerGovernance {
            shared: Arc::new(ServerShared {
                service: service.into(),
                limit: ArcSwap::from_pointee(None),
                version: AtomicU64::new(0),
                counts: Counts::default(),
            }),
        }
    }

    /// The service the limits are for.
    pub fn service(&self) -> &str {
        &self.shared.service
    }

    /// The limit rule in force; `None`: the server's own [`LimitConfig`] and
    /// `max_connections` hold.
    ///
    /// [`LimitConfig`]: crate::server::limit::LimitConfig
    pub fn limit(&self) -> Option<LimitRule> {
        **self.shared.limit.load()
    }

    /// Increases with every change of the limits.
    pub fn version(&self) -> u64 {
        self.shared.version.load(Ordering::Acquire)
    }

    /// Replaces the limit rule (`None`: back to the server's own limits).
    pub fn set_limit(&self, rule: Option<LimitRule>) {
        self.shared.limit.store(Arc::new(rule));
        self.shared.version.fetch_add(1, Ordering::AcqRel);
    }

    /// Sets the limits from `value` in the JSON of Kitex's config centers (the
    /// `limit` category, [`kitex::limit`]); `None` (the key was removed) puts the
    /// server's own limits back. A bad value is refused and changes nothing.
    pub fn apply_kitex(&self, value: Option<&str>) -> Result<(), GovernanceError> {
        self.shared
            .counts
            .counted(kitex::limit(value).map(|rule| self.set_limit(rule)))
    }

    /// [`apply_kitex`](Self::apply_kitex) of a value as read from a store: refused,
    /// and counted as refused, when it is longer than `max_bytes` or not UTF-8.
    pub fn apply_kitex_bytes(
        &self,
        value: Option<&[u8]>,
        max_bytes: usize,
    ) -> Result<(), GovernanceError> {
        match value.map(|v| kitex::text(v, max_bytes)).transpose() {
            Ok(text) => self.apply_kitex(text),
            Err(error) => self.shared.counts.counted(Err(error)),
        }
    }

    /// Values applied and refused so far.
    pub fn updates(&self) -> (u64, u64) {
        self.shared.counts.get()
    }

    pub(crate) fn downgrade(&self) -> WeakGovernance {
        WeakGovernance::Server(Arc::downgrade(&self.shared))
    }
}
