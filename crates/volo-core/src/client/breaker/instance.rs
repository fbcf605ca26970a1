//! One breaker per instance, for the balancer: it leaves out the instances whose
//! breaker is open and reports each attempt's outcome to the instance that made it.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::Instant;

use foldhash::fast::RandomState;

use super::state::{Breaker, BreakerConfig, BreakerState, Change, Guarded, Outcome, Permit};
use super::{cancelled, outcome};
use crate::client::balance::Instance;
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
/// Breakers are made on first use. [`retain`](Self::retain), given discovery's list,
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
    /// The map's length as of its last change, so that [`InstanceBreakers::retain`]
    /// finds out that it has nothing to do without a lock.
    len: AtomicUsize,
    /// Breakers in the map that are not closed: while there are none (the common
    /// case), [`InstanceBreakers::is_available`] takes no lock.
    not_closed: AtomicUsize,
}

/// The breakers, by address and in the order of discovery's list.
struct Map<C> {
    /// A hasher seeded per process but far cheaper than SipHash (the addresses come
    /// from this client's discovery, not from peers).
    by_addr: HashMap<Address, Arc<Entry<C>>, RandomState>,
    /// The breakers of discovery's current list, in its order: the balancer picks an
    /// index into that list, and finds the breaker here without hashing the address
    /// (see [`InstanceBreakers::allow_listed`]). Made again when the list changes
    /// (discovery hands out a new `Arc`), dropped when a breaker leaves the map.
    listed: Option<Listed<C>>,
}

/// Discovery's list, and the breakers of its instances in its order.
type Listed<C> = (Arc<[Instance]>, Box<[Arc<Entry<C>>]>);

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
                    listed: None,
                }),
                len: AtomicUsize::new(0),
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
        let entry = Arc::clone(
            map.by_addr
                .entry(addr.clone())
                .or_insert_with(|| Entry::new(shared, shared.clock.now())),
        );
        shared.len.store(map.by_addr.len(), Ordering::Release);
        entry
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

    /// [`allow`](Self::allow) for `list[i]`, `list` being discovery's list as it is
    /// now: the breaker is found by its index in that list (kept in the list's order
    /// until discovery hands out another list), without hashing the address and
    /// probing the map on every attempt.
    /// `None` also for an index past the list's end.
    pub(crate) fn allow_listed(
        &self,
        list: &Arc<[Instance]>,
        i: usize,
    ) -> Option<InstancePermit<C>> {
        let listed = match &self.read().listed {
            Some((l, entries)) if Arc::ptr_eq(l, list) => entries.get(i).cloned(),
            _ => None,
        };
        let entry = match listed {
            Some(e) => e,
            None => self.list(list, i)?,
        };
        Self::permit(entry)
    }

    /// Puts the breakers of `list` in its order (making those it lacks); the one of
    /// `list[i]`.
    #[cold]
    fn list(&self, list: &Arc<[Instance]>, i: usize) -> Option<Arc<Entry<C>>> {
        let mut map = self.write();
        let entries: Box<[Arc<Entry<C>>]> = list
            .iter()
            .map(|instance| self.entry_or_new(&mut map, &instance.address))
            .collect();
        let entry = entries.get(i).cloned();
        map.listed = Some((Arc::clone(list), entries));
        entry
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

    /// Keeps the breakers of `instances` and drops the others. Give it discovery's
    /// whole list, before the instances tried already or refused by their breaker are
    /// left out: a breaker dropped while open comes back closed.
    ///
    /// Cheap enough to call before every pick: it does the work only when the map
    /// holds more breakers than the list has instances (so at least one left it). The
    /// map thus never holds more than the largest list plus the instances first used
    /// since the last call.
    pub fn retain(&self, instances: &[Instance]) {
        if self.shared.len.load(Ordering::Acquire) <= instances.len() {
            return;
        }
        let keep: HashSet<&Address> = instances.iter().map(|i| &i.address).collect();
        let mut map = self.write();
        map.by_addr.retain(|addr, entry| {
            let keep = keep.contains(addr);
            if !keep {
                self.mark_removed(entry);
            }
            keep
        });
        // The listed breakers may include one just dropped: list them again on use.
        map.listed = None;
        self.shared.len.store(map.by_addr.len(), Ordering::Release);
    }

    /// Drops `addr`'s breaker (it comes back closed if the address is used again).
    pub fn forget(&self, addr: &Address) {
        let mut map = self.write();
        if let Some(entry) = map.by_addr.remove(addr) {
            self.mark_removed(&entry);
            map.listed = None;
        }
        self.shared.len.store(map.by_addr.len(), Ordering::Release);
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
        self.finish(outcome(result), self.entry.clock.now_coarse());
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
