//! Label sets, and the table that resolves a call's (service, method) to its series
//! once, keeping the number of pairs bounded.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use arc_swap::ArcSwap;

use prometheus_client::encoding::{EncodeLabel, EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::CallFamilies;
use super::striped::{LatencyHistogram, StripedCounter, StripedGauge};
use crate::transport::lock;

/// (service, method) pairs a side keeps at most; calls of further methods count as
/// method `_other` of their service.
pub const MAX_METHODS: usize = 1024;

/// The method label of calls whose method is unknown, or beyond [`MAX_METHODS`].
pub(crate) const OTHER: &str = "_other";

type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// `{service}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq)]
pub(crate) struct ServiceLabels {
    pub(crate) service: Arc<str>,
}

impl EncodeLabelSet for ServiceLabels {
    fn encode(&self, e: &mut LabelSetEncoder<'_>) -> fmt::Result {
        ("service", &*self.service).encode(e.encode_label())
    }
}

/// `{service, tier}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq)]
pub(crate) struct TierLabels {
    pub(crate) service: Arc<str>,
    pub(crate) tier: &'static str,
}

impl EncodeLabelSet for TierLabels {
    fn encode(&self, e: &mut LabelSetEncoder<'_>) -> fmt::Result {
        ("service", &*self.service).encode(e.encode_label())?;
        ("tier", self.tier).encode(e.encode_label())
    }
}

/// `{service, method}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq)]
pub(crate) struct CallLabels {
    pub(crate) service: Arc<str>,
    pub(crate) method: Arc<str>,
}

impl EncodeLabelSet for CallLabels {
    fn encode(&self, e: &mut LabelSetEncoder<'_>) -> fmt::Result {
        ("service", &*self.service).encode(e.encode_label())?;
        ("method", &*self.method).encode(e.encode_label())
    }
}

/// `{service, method, outcome}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq)]
pub(crate) struct OutcomeLabels {
    pub(crate) call: CallLabels,
    pub(crate) outcome: &'static str,
}

impl EncodeLabelSet for OutcomeLabels {
    fn encode(&self, e: &mut LabelSetEncoder<'_>) -> fmt::Result {
        self.call.encode(e)?;
        ("outcome", self.outcome).encode(e.encode_label())
    }
}

/// `{reason}` (or, made by [`direction`](Self::direction), `{direction}`).
#[derive(Debug, Clone, Hash, PartialEq, Eq)]
pub(crate) struct ReasonLabels {
    pub(crate) reason: &'static str,
    pub(crate) key: &'static str,
}

impl ReasonLabels {
    pub(crate) fn reason(reason: &'static str) -> Self {
        ReasonLabels {
            reason,
            key: "reason",
        }
    }

    pub(crate) fn direction(direction: &'static str) -> Self {
        ReasonLabels {
            reason: direction,
            key: "direction",
        }
    }
}

impl EncodeLabelSet for ReasonLabels {
    fn encode(&self, e: &mut LabelSetEncoder<'_>) -> fmt::Result {
        (self.key, self.reason).encode(e.encode_label())
    }
}

/// How a call ended, as the `outcome` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    // Server.
    UnknownMethod,
    DecodeError,
    ApplicationError,
    DeadlineExceeded,
    Panic,
    // Both.
    Cancelled,
    // Client: the error kinds.
    Connect,
    Io,
    Timeout,
    CircuitOpen,
    NoInstance,
    Protocol,
    Encode,
    Application,
    Overloaded,
    Rejected,
    Closing,
}

const OUTCOMES: usize = Outcome::Closing as usize + 1;

impl Outcome {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::UnknownMethod => "unknown_method",
            Outcome::DecodeError => "decode_error",
            Outcome::ApplicationError => "application_error",
            Outcome::DeadlineExceeded => "deadline_exceeded",
            Outcome::Panic => "panic",
            Outcome::Cancelled => "cancelled",
            Outcome::Connect => "connect",
            Outcome::Io => "io",
            Outcome::Timeout => "timeout",
            Outcome::CircuitOpen => "circuit_open",
            Outcome::NoInstance => "no_instance",
            Outcome::Protocol => "protocol",
            Outcome::Encode => "encode",
            Outcome::Application => "application",
            Outcome::Overloaded => "overloaded",
            Outcome::Rejected => "rejected",
            Outcome::Closing => "closing",
        }
    }
}

/// The series of one service on one side, and its methods'.
pub(crate) struct ServiceEntry {
    name: Arc<str>,
    pub(crate) inflight: StripedGauge,
    /// Method name to its index in `methods`, replaced whole when a method is added.
    index: ArcSwap<Map<Box<str>, usize>>,
    /// Append only: a method entry lives as long as the table.
    methods: boxcar::Vec<MethodEntry>,
}

/// The series of one (service, method): the histogram at once, the counters of each
/// outcome when first used (so outcomes that never happen make no series).
pub(crate) struct MethodEntry {
    pub(crate) labels: CallLabels,
    pub(crate) duration: LatencyHistogram,
    outcomes: [OnceLock<StripedCounter>; OUTCOMES],
    retries: OnceLock<Counter>,
    backups: OnceLock<Counter>,
}

impl MethodEntry {
    /// Counts one call that ended with `outcome`.
    pub(crate) fn count(&self, families: &CallFamilies, outcome: Outcome) {
        self.outcomes[outcome as usize]
            .get_or_init(|| {
                families.requests.get_or_create_owned(&OutcomeLabels {
                    call: self.labels.clone(),
                    outcome: outcome.as_str(),
                })
            })
            .inc();
    }

    /// Adds `n` to the counter of `family` that `cell` caches.
    pub(crate) fn add(&self, cell: Which, family: &Family<CallLabels, Counter>, n: u64) {
        let cell = match cell {
            Which::Retries => &self.retries,
            Which::Backups => &self.backups,
        };
        cell.get_or_init(|| family.get_or_create_owned(&self.labels))
            .inc_by(n);
    }
}

/// A call in its service's in-flight gauge, from [`start`](Self::start) until
/// [`end`](Self::end) records it.
pub(crate) struct InFlight<'a> {
    service: &'a ServiceEntry,
    start: Instant,
    ended: bool,
}

impl<'a> InFlight<'a> {
    pub(crate) fn start(service: &'a ServiceEntry) -> Self {
        service.inflight.inc();
        InFlight {
            service,
            start: Instant::now(),
            ended: false,
        }
    }

    pub(crate) fn service(&self) -> &'a ServiceEntry {
        self.service
    }

    pub(crate) fn is_ended(&self) -> bool {
        self.ended
    }

    /// Takes the call out of the gauge and records its latency and `outcome` under
    /// `method`.
    pub(crate) fn end(&mut self, families: &CallFamilies, method: &MethodEntry, outcome: Outcome) {
        self.ended = true;
        self.service.inflight.dec();
        method.duration.observe(self.start.elapsed());
        method.count(families, outcome);
    }
}

/// Which per-method counter of the client [`MethodEntry::add`] adds to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Which {
    Retries,
    Backups,
}

/// The (service, method) pairs seen, each resolved to its series once.
///
/// A call finds its entries with two loads of a map and two hash lookups, and
/// holds them as references for as long as the table lives: no lock, and no
/// reference count, is touched on the way (those were shared atomics every call on
/// every thread wrote). Adding a service or a method takes a lock and replaces the
/// map; that happens at most once per pair.
#[derive(Default)]
pub(crate) struct MethodTable {
    /// Service name to its index in `services`.
    index: ArcSwap<Map<Arc<str>, usize>>,
    /// Append only: a service entry lives as long as the table.
    services: boxcar::Vec<ServiceEntry>,
    /// Held to add an entry; the method entries made, against [`MAX_METHODS`]
    /// (`_other` ones not counted).
    made: Mutex<usize>,
}

impl MethodTable {
    /// The entry of `service`, made on first use.
    pub(crate) fn service(&self, families: &CallFamilies, service: &str) -> &ServiceEntry {
        if let Some(&i) = self.index.load().get(service) {
            return &self.services[i];
        }
        let _made = lock(&self.made);
        let index = self.index.load();
        if let Some(&i) = index.get(service) {
            // Made meanwhile by another call.
            return &self.services[i];
        }
        let name: Arc<str> = service.into();
        let inflight = families.inflight.get_or_create_owned(&ServiceLabels {
            service: Arc::clone(&name),
        });
        let i = self.services.push(ServiceEntry {
            name: Arc::clone(&name),
            inflight,
            index: ArcSwap::default(),
            methods: boxcar::Vec::new(),
        });
        let mut next = Map::clone(&index);
        next.insert(name, i);
        self.index.store(Arc::new(next));
        &self.services[i]
    }

    /// The entry of `method` of `service`: [`OTHER`]'s when `method` is `None`
    /// (unknown), or new and [`MAX_METHODS`] are taken.
    pub(crate) fn method<'a>(
        &self,
        families: &CallFamilies,
        service: &'a ServiceEntry,
        method: Option<&str>,
    ) -> &'a MethodEntry {
        let method = method.unwrap_or(OTHER);
        if let Some(&i) = service.index.load().get(method) {
            return &service.methods[i];
        }
        let mut made = lock(&self.made);
        let full = method != OTHER && *made >= MAX_METHODS;
        let method = if full { OTHER } else { method };
        let index = service.index.load();
        if let Some(&i) = index.get(method) {
            // Made meanwhile by another call, or `_other` already there.
            return &service.methods[i];
        }
        if method != OTHER {
            *made += 1;
        }
        let labels = CallLabels {
            service: Arc::clone(&service.name),
            method: method.into(),
        };
        let i = service.methods.push(MethodEntry {
            duration: families.duration.get_or_create_owned(&labels),
            labels,
            outcomes: std::array::from_fn(|_| OnceLock::new()),
            retries: OnceLock::new(),
            backups: OnceLock::new(),
        });
        let mut next = Map::clone(&index);
        next.insert(method.into(), i);
        service.index.store(Arc::new(next));
        &service.methods[i]
    }

    /// The number of (service, method) pairs kept, `_other` ones included.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.services.iter().map(|(_, s)| s.methods.count()).sum()
    }
}
