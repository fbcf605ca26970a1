//! Label sets, and the table that resolves a call's (service, method) to its series
//! once, keeping the number of pairs bounded.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};
use std::time::Instant;

use prometheus_client::encoding::{EncodeLabel, EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::CallFamilies;

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

/// `{reason}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq)]
pub(crate) struct ReasonLabels {
    pub(crate) reason: &'static str,
}

impl EncodeLabelSet for ReasonLabels {
    fn encode(&self, e: &mut LabelSetEncoder<'_>) -> fmt::Result {
        ("reason", self.reason).encode(e.encode_label())
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
}

const OUTCOMES: usize = Outcome::Rejected as usize + 1;

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
        }
    }
}

/// The series of one service on one side.
pub(crate) struct ServiceEntry {
    name: Arc<str>,
    pub(crate) inflight: Gauge,
    methods: RwLock<Map<Box<str>, Arc<MethodEntry>>>,
}

/// The series of one (service, method): the histogram at once, the counters of each
/// outcome when first used (so outcomes that never happen make no series).
pub(crate) struct MethodEntry {
    pub(crate) labels: CallLabels,
    pub(crate) duration: super::histogram::LatencyHistogram,
    outcomes: [OnceLock<Counter>; OUTCOMES],
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
pub(crate) struct InFlight {
    service: Arc<ServiceEntry>,
    start: Instant,
    ended: bool,
}

impl InFlight {
    pub(crate) fn start(service: Arc<ServiceEntry>) -> Self {
        service.inflight.inc();
        InFlight {
            service,
            start: Instant::now(),
            ended: false,
        }
    }

    pub(crate) fn service(&self) -> &ServiceEntry {
        &self.service
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
#[derive(Default)]
pub(crate) struct MethodTable {
    services: RwLock<Map<Arc<str>, Arc<ServiceEntry>>>,
    /// Method entries made, against [`MAX_METHODS`] (`_other` ones not counted).
    methods: AtomicUsize,
}

impl MethodTable {
    /// The entry of `service`, made on first use.
    pub(crate) fn service(&self, families: &CallFamilies, service: &str) -> Arc<ServiceEntry> {
        if let Some(s) = read(&self.services).get(service) {
            return Arc::clone(s);
        }
        let mut services = self
            .services
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let entry = services.entry(service.into()).or_insert_with_key(|name| {
            let inflight = families.inflight.get_or_create_owned(&ServiceLabels {
                service: Arc::clone(name),
            });
            Arc::new(ServiceEntry {
                name: Arc::clone(name),
                inflight,
                methods: RwLock::default(),
            })
        });
        Arc::clone(entry)
    }

    /// The entry of `method` of `service`: [`OTHER`]'s when `method` is `None`
    /// (unknown), or new and [`MAX_METHODS`] are taken.
    pub(crate) fn method(
        &self,
        families: &CallFamilies,
        service: &ServiceEntry,
        method: Option<&str>,
    ) -> Arc<MethodEntry> {
        let method = method.unwrap_or(OTHER);
        if let Some(m) = read(&service.methods).get(method) {
            return Arc::clone(m);
        }
        let full = method != OTHER
            && self
                .methods
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    (n < MAX_METHODS).then_some(n + 1)
                })
                .is_err();
        let method = if full { OTHER } else { method };
        let mut methods = service
            .methods
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(m) = methods.get(method) {
            // Made meanwhile by another call: give back the slot taken.
            if !full && method != OTHER {
                self.methods.fetch_sub(1, Ordering::AcqRel);
            }
            return Arc::clone(m);
        }
        let labels = CallLabels {
            service: Arc::clone(&service.name),
            method: method.into(),
        };
        let entry = Arc::new(MethodEntry {
            duration: families.duration.get_or_create_owned(&labels),
            labels,
            outcomes: std::array::from_fn(|_| OnceLock::new()),
            retries: OnceLock::new(),
            backups: OnceLock::new(),
        });
        methods.insert(method.into(), Arc::clone(&entry));
        entry
    }

    /// The number of (service, method) pairs kept, `_other` ones included.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        read(&self.services)
            .values()
            .map(|s| read(&s.methods).len())
            .sum()
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}
