//! The service breaker's thresholds from a governance rule: `"*"` sets those of the
//! breaker of the whole service, a method named gets a breaker of its own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Instant;

use super::BreakerConfig;
use super::state::{Breaker, Guarded};
use crate::governance::{BreakerRule, ClientGovernance};

/// Which breaker a call of one method passes.
#[derive(Clone)]
pub(super) enum Route {
    /// The service's.
    Service,
    /// None: the method's breaker is off.
    Bypass,
    /// The method's own.
    Own(Arc<Guarded<()>>),
}

/// The per-method breakers a governance's rules ask for, kept in step with them.
pub(super) struct Governed {
    governance: ClientGovernance,
    /// The builder's thresholds, put back when no rule names them.
    base: BreakerConfig,
    /// The governance version the breakers were made for (`u64::MAX`: none yet).
    seen: AtomicU64,
    /// Whether `methods` has any: when not (the usual case), a call takes no lock.
    any_named: AtomicBool,
    methods: RwLock<HashMap<Box<str>, (BreakerRule, Route)>>,
}

impl Governed {
    pub(super) fn new(governance: ClientGovernance, base: BreakerConfig) -> Self {
        Governed {
            governance,
            base,
            seen: AtomicU64::new(u64::MAX),
            any_named: AtomicBool::new(false),
            methods: RwLock::new(HashMap::new()),
        }
    }

    /// The breaker a call of `method` passes, after bringing the breakers in step with
    /// the rules if they changed (`service`: the service's breaker).
    /// `now` is read only when the rules changed.
    pub(super) fn route(
        &self,
        method: &str,
        service: &Guarded<()>,
        now: impl FnOnce() -> Instant,
    ) -> Route {
        let version = self.governance.version();
        if self.seen.load(Ordering::Acquire) != version {
            self.follow(version, service, now());
        }
        if !self.any_named.load(Ordering::Acquire) {
            return Route::Service;
        }
        let methods = self.methods.read().unwrap_or_else(PoisonError::into_inner);
        match methods.get(method) {
            Some((_, route)) => route.clone(),
            None => Route::Service,
        }
    }

    /// Remakes the breakers for the rules of `version`: a method whose rule did not
    /// change keeps its breaker (and what it has counted).
    #[cold]
    fn follow(&self, version: u64, service: &Guarded<()>, now: Instant) {
        let rules = self.governance.rules();
        let mut methods = self.methods.write().unwrap_or_else(PoisonError::into_inner);
        let (error_rate, min_samples, consecutive_failures) = match rules.breaker.for_any() {
            None => (
                self.base.error_rate,
                self.base.min_samples,
                self.base.consecutive_failures,
            ),
            Some(r) if r.enabled => (r.error_rate, r.min_samples, 0),
            // Off: a rate above 1 never opens it.
            Some(_) => (2.0, 1, 0),
        };
        service
            .lock()
            .breaker
            .set_thresholds(error_rate, min_samples, consecutive_failures);
        let mut next = HashMap::new();
        for (method, rule) in rules.breaker.named() {
            let route = match methods.remove(method) {
                Some((old, route)) if old == *rule => route,
                _ if !rule.enabled => Route::Bypass,
                _ => {
                    let config = BreakerConfig {
                        error_rate: rule.error_rate,
                        min_samples: rule.min_samples,
                        consecutive_failures: 0,
                        ..self.base.clone()
                    };
                    Route::Own(Arc::new(Guarded::new(Breaker::new(config, now), ())))
                }
            };
            next.insert(method.into(), (*rule, route));
        }
        self.any_named.store(!next.is_empty(), Ordering::Release);
        *methods = next;
        self.seen.store(version, Ordering::Release);
    }
}
