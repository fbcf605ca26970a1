//! One breaker per instance, for the balancer: it leaves out the instances whose
//! breaker is open and reports each attempt's outcome to the instance that made it.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::Instant;

use foldhash::fast::RandomState;

use super::state::{Breaker, BreakerConfig, BreakerState, Change, Guarded, Outcome, Permit};
use super::{Level, cancelled, outcome};
use crate::client::balance::{InstanceList, Step};
use crate::client::error::Error;
use crate::clock::{Clock, SystemClock};
use crate::context::Address;

/// A breaker per instance address (cheap to clone: clones share the breakers).
///
/// The balancer asks [`is_available`](Self::is_available) to leave out the instances it
/// must not pick, takes an [`InstancePermit`] from [`allow`](Self::allow) for the one it
/// picked, and hands the attempt's outcome to the permit
/// ([`record`](InstancePermit::record) or [`record_result`](InstancePermit::record_result)).
/// A permit dropped without an outcome (the attempt was cancelled: a timeout above, a
/// backup request that answered first) frees its half-open trial slot and counts
/// nothing, unless the attempt's deadline, given with
/// [`with_deadline`](InstancePermit::with_deadline), had passed: then it counts as a
/// timeout. That is why the outcome goes to a permit rather than to an address.
///
/// Breakers are made on first use. [`follow`](Self::follow), given discovery's list,
/// drops those of instances that left it, so the map stays as small as the list;
/// [`forget`](Self::forget) drops one.
///
/// ```
/// use volo_core::client::{BreakerConfig, BreakerState, InstanceBreakers};
/// use volo_core::context::Address;
///
/// let breakers = InstanceBreakers::new(BreakerConfig::instance());
/// let addr: Address = "127.0.0.1:8888".parse().unwrap();
/// for _ in 0..10 {
///     let permit = breakers.allow(&addr).expect("closed: let through");
///     permit.record(true); // connect refused, say
/// }
/// assert_eq!(breakers.state(&addr), BreakerState::Open);
/// assert!(!breakers.is_available(&addr) && breakers.allow(&addr).is_none());
/// ```
pub struct InstanceBreakers<C: Clock = SystemClock> {
    shared: Arc<BreakerTable<C>>,
}

/// A client's instance breakers seen from the metrics
/// ([`InstanceBreakers::probe`]): how many are not closed.
struct Probe<C>(std::sync::Weak<BreakerTable<C>>);

impl<C: Clock> crate::metrics::BreakerProbe for Probe<C> {
    fn value(&self) -> Option<i64> {
        let shared = self.0.upgrade()?;
        Some(i64::try_from(shared.not_closed.load(Ordering::Acquire)).unwrap_or(i64::MAX))
    }
}

struct BreakerTable<C> {
    config: BreakerConfig,
    clock: C,
    map: RwLock<Map<C>>,
    /// The id of the version of discovery's list the map was last brought to
    /// ([`InstanceBreakers::follow`]), so that a pick on that version finds out that
    /// there is nothing to do without a lock.
    seen: AtomicU64,
    /// Breakers in the map that are not closed: while there are none (the common
    /// case), [`InstanceBreakers::is_available`] takes no lock.
    not_closed: AtomicUsize,
}

/// The breakers, by address.
struct Map<C> {
    /// A hasher seeded per process but far cheaper than SipHash (the addresses come
    /// from this client's discovery, not from peers).
    by_addr: HashMap<Address, Arc<Entry<C>>, RandomState>,
    /// The lineage and version of the list the map was last brought to.
    seen: (u64, u64),
}

/// An instance's breaker; the extra state under its lock says whether the instance
/// was dropped from the map (its changes then no longer count in `not_closed`).
struct Entry<C> {
    state: Guarded<bool>,
    /// Where `not_closed` is, for the rare outcome that opens or closes the breaker
    /// (weak: a permit outliving its client changes nothing).
    shared: Weak<BreakerTable<C>>,
    clock: C,
}

impl<C: Clock> Entry<C> {
    fn new(shared: &Arc<BreakerTable<C>>, now: Instant) -> Arc<Self> {
        Arc::new(Entry {
            state: Guarded::new(Breaker::new(shared.config.clone(), now), false),
            shared: Arc::downgrade(shared),
            clock: shared.clock.clone(),
        })
    }
}

impl<C: Clock> Clone for InstanceBreakers<C> {
    fn clone(&self) -> Self {
        InstanceBreakers {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<C: Clock> fmt::Debug for InstanceBreakers<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InstanceBreakers")
            .field("config", &self.shared.config)
            .field("instances", &self.len())
            .field(
                "not_closed",
                &self.shared.not_closed.load(Ordering::Relaxed),
            )
            .finish()
    }
}

impl Default for InstanceBreakers {
    /// Breakers with [`BreakerConfig::instance`] on the system clock.
    fn default() -> Self {
        Self::new(BreakerConfig::instance())
    }
}

impl InstanceBreakers {
    /// Breakers with `config` (see [`BreakerConfig::instance`]) on the system clock.
    pub fn new(config: BreakerConfig) -> Self {
        Self::with_clock(config, SystemClock)
    }
}

impl<C: Clock> InstanceBreakers<C> {
    /// Breakers with `config` that read the time from `clock`.
    pub fn with_clock(config: BreakerConfig, clock: C) -> Self {
        InstanceBreakers {
            shared: Arc::new(BreakerTable {
                config,
                clock,
                map: RwLock::new(Map {
                    by_addr: HashMap::default(),
                    seen: (0, 0),
                }),
                seen: AtomicU64::new(0),
                not_closed: AtomicUsize::new(0),
            }),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, Map<C>> {
        self.shared
            .map
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Map<C>> {
        self.shared
            .map
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn entry(&self, addr: &Address) -> Option<Arc<Entry<C>>> {
        self.read().by_addr.get(addr).cloned()
    }

    /// `addr`'s breaker, made if it has none.
    fn entry_or_new(&self, map: &mut Map<C>, addr: &Address) -> Arc<Entry<C>> {
        let shared = &self.shared;
        Arc::clone(
            map.by_addr
                .entry(addr.clone())
                .or_insert_with(|| Entry::new(shared, shared.clock.now())),
        )
    }

    /// Whether a call may go to `addr` now: false while its breaker is open, or
    /// half-open with every trial slot taken. It takes nothing, so the balancer may ask
    /// it of every instance in the list; [`allow`](Self::allow) for the one picked may
    /// still refuse (another call took the last trial slot in between).
    pub fn is_available(&self, addr: &Address) -> bool {
        if self.shared.not_closed.load(Ordering::Acquire) == 0 {
            return true;
        }
        match self.entry(addr) {
            Some(e) => e.state.lock().breaker.is_available(self.shared.clock.now()),
            None => true,
        }
    }

    /// Leave for one attempt on `addr`, or `None` while its breaker is open or its
    /// half-open trial slots are taken (a half-open breaker's permit holds a slot until
    /// it is recorded or dropped). The balancer then fails the attempt with
    /// `Error::circuit_open(CircuitOpen::Instance(addr))` or picks another instance.
    pub fn allow(&self, addr: &Address) -> Option<InstancePermit<C>> {
        let entry = match self.entry(addr) {
            Some(e) => e,
            None => self.entry_or_new(&mut self.write(), addr),
        };
        Self::permit(entry)
    }

    fn permit(entry: Arc<Entry<C>>) -> Option<InstancePermit<C>> {
        let permit = entry.state.try_acquire_at(|| entry.clock.now())?;
        Some(InstancePermit {
            entry,
            permit: Some(permit),
            deadline: None,
        })
    }

    /// The state of `addr`'s breaker ([`Closed`](BreakerState::Closed) for an address
    /// not seen yet).
    pub fn state(&self, addr: &Address) -> BreakerState {
        match self.entry(addr) {
            Some(e) => e.state.lock().breaker.state(self.shared.clock.now()),
            None => BreakerState::Closed,
        }
    }

    /// Brings the breakers to `list`, discovery's list as it is now: drops those of
    /// instances it no longer has (a breaker dropped while open comes back closed).
    ///
    /// Cheap enough to call before every pick: on the version it was last brought to
    /// it reads one atomic; on a newer one it drops the breakers of the instances
    /// the steps between the two removed ([`InstanceList::steps_since`]), at the cost
    /// of the change; only from a list it cannot reach by steps (another lineage, one
    /// too far ahead) it goes over every breaker. An older version than the last
    /// (a pick that loaded the list just before a change) changes nothing.
    pub fn follow(&self, list: &InstanceList) {
        let seen = self.shared.seen.load(Ordering::Acquire);
        if seen == list.id() {
            return;
        }
        let mut map = self.write();
        let (lineage, seen) = map.seen;
        let same_lineage = lineage == list.lineage();
        if same_lineage && seen >= list.id() {
            return;
        }
        match list.steps_since(seen).filter(|_| same_lineage) {
            Some(steps) => {
                for step in steps {
                    if let Step::Remove(addr) = step
                        && let Some(entry) = map.by_addr.remove(addr)
                    {
                        self.mark_removed(&entry);
                    }
                }
            }
            None => map.by_addr.retain(|addr, entry| {
                let keep = list.contains(addr);
                if !keep {
                    self.mark_removed(entry);
                }
                keep
            }),
        }
        map.seen = (list.lineage(), list.id());
        self.shared.seen.store(list.id(), Ordering::Release);
    }

    /// Drops `addr`'s breaker (it comes back closed if the address is used again).
    pub fn forget(&self, addr: &Address) {
        let mut map = self.write();
        if let Some(entry) = map.by_addr.remove(addr) {
            self.mark_removed(&entry);
        }
    }

    fn mark_removed(&self, entry: &Entry<C>) {
        let mut e = entry.state.lock();
        e.extra = true;
        if e.breaker.state(self.shared.clock.now()) != BreakerState::Closed {
            self.shared.not_closed.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Instances with a breaker.
    pub fn len(&self) -> usize {
        self.read().by_addr.len()
    }

    /// No instance has a breaker yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads how many are not closed, for the metrics, while they live.
    pub(crate) fn probe(&self) -> Box<dyn crate::metrics::BreakerProbe> {
        Box::new(Probe(Arc::downgrade(&self.shared)))
    }

    /// Breakers counted as not closed (the shortcut of `is_available`).
    #[cfg(test)]
    pub(crate) fn not_closed(&self) -> usize {
        self.shared.not_closed.load(Ordering::SeqCst)
    }
}

/// Leave for one attempt on an instance (from [`InstanceBreakers::allow`]): give it
/// the attempt's outcome, or drop it if the attempt was cancelled (that frees a
/// half-open trial slot and counts nothing).
#[must_use = "an attempt's outcome goes to its permit; dropping it counts nothing"]
pub struct InstancePermit<C: Clock = SystemClock> {
    entry: Arc<Entry<C>>,
    permit: Option<Permit>,
    deadline: Option<Instant>,
}

impl<C: Clock> fmt::Debug for InstancePermit<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InstancePermit")
            .field("permit", &self.permit)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl<C: Clock> InstancePermit<C> {
    /// The attempt's deadline (`None`: none): dropped at or after it without an
    /// outcome, the permit counts a failure, as the attempt timeout above that
    /// cancelled the attempt would have reported; dropped before it, nothing.
    pub fn with_deadline(mut self, deadline: Option<Instant>) -> Self {
        self.deadline = deadline;
        self
    }

    /// The attempt ended: `failed` says whether it counts as a failure of the instance
    /// (see [`counts_as_failure`](super::counts_as_failure)).
    pub fn record(mut self, failed: bool) {
        let outcome = if failed {
            Outcome::Failure
        } else {
            Outcome::Success
        };
        self.finish(outcome, self.entry.clock.now_coarse());
    }

    /// The attempt ended with `result`: a success, a failure of the instance (see
    /// [`counts_as_failure`](super::counts_as_failure)), or an error that says nothing
    /// about it (only the trial slot, if any, is freed).
    pub fn record_result<T>(mut self, result: &Result<T, Error>) {
        self.finish(
            outcome(result, Level::Instance),
            self.entry.clock.now_coarse(),
        );
    }

    /// Counts `outcome` at `now` (a coarse reading is enough: it only picks the
    /// window's bucket and, if the breaker opens, when its open time ends).
    fn finish(&mut self, outcome: Outcome, now: Instant) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        let mut e = self.entry.state.lock();
        let change = e.breaker.finish(permit, outcome, now);
        let removed = e.extra;
        if removed || matches!(change, Change::None | Change::Reopened) {
            return;
        }
        // Under the entry's lock, as `mark_removed` counts it out under it too.
        if let Some(shared) = self.entry.shared.upgrade() {
            if change == Change::Opened {
                shared.not_closed.fetch_add(1, Ordering::AcqRel);
            } else {
                shared.not_closed.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

impl<C: Clock> Drop for InstancePermit<C> {
    fn drop(&mut self) {
        if self.permit.is_some() {
            let now = self.entry.clock.now();
            self.finish(cancelled(self.deadline, now), now);
        }
    }
}
