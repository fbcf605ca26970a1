//! State a balancer derives from discovery's list (a weight table, a ring, the list
//! split by locality), kept in step with the list by applying its changes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{PoisonError, RwLock};

use crate::context::Address;
use crate::registry::{Instance, InstanceList, Step};

/// State derived from an instance list that follows the list's changes step by step.
pub(super) trait Follow: Send + Sync {
    /// The list changed by `step`.
    fn apply(&mut self, step: &Step);
}

/// State that is derived from the list alone (see [`Derived::with_by`] for state
/// that needs more).
pub(super) trait Derive: Follow {
    /// The state of `list`, from scratch.
    fn derive(list: &InstanceList) -> Self;
}

/// How many lineages of lists states are kept for: discovery's list, and the two
/// sides of it a [`LocalFirst`](super::LocalFirst) gives the balancer it wraps, and
/// one to spare.
const SLOTS: usize = 4;

/// A balancer's state for the lists it is given, one per lineage
/// ([`InstanceList::lineage`]) for the last [`SLOTS`] lineages.
///
/// A pick given the version of the list the state is at (nearly every pick) takes a
/// shared lock and uses it. Given a newer version, the pick brings the state up to it
/// by the steps between the two ([`InstanceList::steps_since`]), at the cost of the
/// change; only a list too far ahead, or of a lineage not kept, derives it again. A
/// pick given an older version than the state's (it loaded discovery's list just
/// before a change) uses the newer state as it is.
#[derive(Debug)]
pub(super) struct Derived<S> {
    slots: [Slot<S>; SLOTS],
    /// The slot the next lineage takes (oldest first), modulo [`SLOTS`].
    next: AtomicUsize,
}

#[derive(Debug)]
struct Slot<S> {
    /// The lineage it holds (0: none), read without the lock to find the slot.
    lineage: AtomicU64,
    kept: RwLock<Option<Kept<S>>>,
}

#[derive(Debug)]
struct Kept<S> {
    lineage: u64,
    /// The version of the list the state is at.
    id: u64,
    state: S,
}

impl<S> Default for Derived<S> {
    fn default() -> Self {
        Derived {
            slots: std::array::from_fn(|_| Slot {
                lineage: AtomicU64::new(0),
                kept: RwLock::new(None),
            }),
            next: AtomicUsize::new(0),
        }
    }
}

impl<S: Derive> Derived<S> {
    /// `f` of the state of `list`.
    pub(super) fn with<R>(&self, list: &InstanceList, f: impl FnOnce(&S) -> R) -> R {
        self.with_by(list, S::derive, f)
    }
}

impl<S: Follow> Derived<S> {
    /// `f` of the state of `list`, derived by `derive` when it must be.
    pub(super) fn with_by<R>(
        &self,
        list: &InstanceList,
        derive: impl Fn(&InstanceList) -> S,
        f: impl FnOnce(&S) -> R,
    ) -> R {
        let lineage = list.lineage();
        let current = |k: &Kept<S>| k.lineage == lineage && k.id >= list.id();
        let slot = self
            .slots
            .iter()
            .find(|s| s.lineage.load(Ordering::Acquire) == lineage);
        if let Some(slot) = slot {
            {
                let kept = slot.kept.read().unwrap_or_else(PoisonError::into_inner);
                if let Some(k) = kept.as_ref().filter(|k| current(k)) {
                    return f(&k.state);
                }
            }
            let mut kept = slot.kept.write().unwrap_or_else(PoisonError::into_inner);
            if let Some(k) = kept.as_mut().filter(|k| k.lineage == lineage) {
                if k.id < list.id() {
                    catch_up(k, list, &derive);
                }
                return f(&k.state);
            }
        }
        self.derive(list, derive, f)
    }

    /// Derives the state of `list` into the oldest slot.
    #[cold]
    fn derive<R>(
        &self,
        list: &InstanceList,
        derive: impl Fn(&InstanceList) -> S,
        f: impl FnOnce(&S) -> R,
    ) -> R {
        let at = self.next.fetch_add(1, Ordering::Relaxed) % SLOTS;
        let slot = &self.slots[at];
        let mut kept = slot.kept.write().unwrap_or_else(PoisonError::into_inner);
        let k = kept.insert(Kept {
            lineage: list.lineage(),
            id: list.id(),
            state: derive(list),
        });
        slot.lineage.store(list.lineage(), Ordering::Release);
        f(&k.state)
    }
}

/// Brings `k` up to `list` by the steps between them, or derives it again.
fn catch_up<S: Follow>(k: &mut Kept<S>, list: &InstanceList, derive: impl Fn(&InstanceList) -> S) {
    match list.steps_since(k.id) {
        Some(steps) => {
            for step in steps {
                k.state.apply(step);
            }
        }
        None => k.state = derive(list),
    }
    k.id = list.id();
}

/// Which part of a [`Split`] an instance belongs to (`0..N`).
pub(super) trait Classify: Send + Sync {
    fn part(&self, instance: &Instance) -> usize;
}

/// A list split into `N` lists of its own by a classifier, each changed by the steps
/// that change the list (a change of one instance costs the same whatever the fleet's
/// size), with the weight each part holds and how many of its instances take calls
/// (weight above 0). [`LocalFirst`](super::LocalFirst)'s two sides and
/// [`Tiered`](super::Tiered)'s four tiers.
#[derive(Debug)]
pub(super) struct Split<const N: usize, C> {
    pub(super) lists: [InstanceList; N],
    pub(super) weight: [u64; N],
    pub(super) usable: [usize; N],
    classify: C,
}

impl<const N: usize, C: Classify> Split<N, C> {
    /// `list` split by `classify`.
    pub(super) fn of(list: &InstanceList, classify: C) -> Self {
        let in_order = list.in_order();
        let lists: [InstanceList; N] = std::array::from_fn(|p| {
            InstanceList::new(
                in_order
                    .iter()
                    .filter(|i| classify.part(i) == p)
                    .map(|i| (***i).clone()),
            )
        });
        let weight = std::array::from_fn(|p| lists[p].iter().map(|i| u64::from(i.weight)).sum());
        let usable = std::array::from_fn(|p| lists[p].iter().filter(|i| i.weight > 0).count());
        Split {
            lists,
            weight,
            usable,
            classify,
        }
    }

    /// Counts `instance` in or out of part `p`'s figures.
    fn count(&mut self, p: usize, instance: &Instance, add: bool) {
        let (w, u) = (u64::from(instance.weight), usize::from(instance.weight > 0));
        if add {
            self.weight[p] += w;
            self.usable[p] += u;
        } else {
            self.weight[p] -= w;
            self.usable[p] -= u;
        }
    }

    fn apply_to(&mut self, p: usize, step: Step) {
        if let Some(next) = self.lists[p].apply([step]) {
            self.lists[p] = next;
        }
    }
}

impl<const N: usize, C: Classify> Follow for Split<N, C> {
    fn apply(&mut self, step: &Step) {
        let address = step.address();
        let was = (0..N).find_map(|p| self.lists[p].get(address).map(|i| (p, i.clone())));
        if let Some((p, old)) = &was {
            self.count(*p, old, false);
        }
        match step {
            Step::Put(instance) => {
                let p = self.classify.part(instance);
                // An instance that moved (its locality changed) leaves its old part.
                if let Some((old, _)) = was.filter(|(old, _)| *old != p) {
                    self.apply_to(old, Step::Remove(address.clone()));
                }
                self.count(p, instance, true);
                self.apply_to(p, step.clone());
            }
            Step::Remove(_) => {
                if let Some((p, _)) = was {
                    self.apply_to(p, step.clone());
                }
            }
        }
    }
}

impl<const N: usize, C: Classify + Default> Derive for Split<N, C> {
    fn derive(list: &InstanceList) -> Self {
        Split::of(list, C::default())
    }
}

/// Instances in an array without gaps, found by address: one that leaves takes the
/// last one's place. What the balancers that pick by position keep.
///
/// An instance's address and weight are kept in the array itself, not behind the
/// instance's `Arc`: a pick reads one entry of a compact array (48 bytes an
/// instance: 480 KB for 10,000, within a core's L2 cache here) rather than chasing a
/// pointer to wherever the instance was allocated.
#[derive(Debug, Default)]
pub(super) struct Dense {
    items: Vec<Member>,
    at: HashMap<Address, usize, foldhash::fast::RandomState>,
}

/// What a pick reads of an instance.
#[derive(Debug, Clone)]
pub(super) struct Member {
    pub(super) address: Address,
    pub(super) weight: u32,
}

impl Dense {
    /// The instances of `list` for which `keep` holds, in the list's order.
    pub(super) fn of(list: &InstanceList, keep: impl Fn(&Instance) -> bool) -> Dense {
        let mut dense = Dense::default();
        for i in list.in_order() {
            if keep(i) {
                dense.put(i);
            }
        }
        dense
    }

    /// Lists `instance` (in place of the one at its address, if any).
    pub(super) fn put(&mut self, instance: &Instance) {
        let member = Member {
            address: instance.address.clone(),
            weight: instance.weight,
        };
        match self.at.get(&instance.address) {
            Some(&at) => self.items[at] = member,
            None => {
                self.at.insert(instance.address.clone(), self.items.len());
                self.items.push(member);
            }
        }
    }

    /// Takes the instance at `address` out; whether one was there.
    pub(super) fn remove(&mut self, address: &Address) -> bool {
        let Some(at) = self.at.remove(address) else {
            return false;
        };
        self.items.swap_remove(at);
        if let Some(moved) = self.items.get(at) {
            self.at.insert(moved.address.clone(), at);
        }
        true
    }

    /// `step`, for the instances for which `keep` holds.
    pub(super) fn apply(&mut self, step: &Step, keep: impl Fn(&Instance) -> bool) {
        match step {
            Step::Put(i) if keep(i) => self.put(i),
            _ => {
                self.remove(step.address());
            }
        }
    }

    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The instance at `address`.
    pub(super) fn find(&self, address: &Address) -> Option<&Member> {
        self.at.get(address).map(|&at| &self.items[at])
    }

    /// The `n`th instance (`n` below [`len`](Self::len)).
    pub(super) fn get(&self, n: usize) -> &Member {
        &self.items[n]
    }
}

/// Calls in flight per address, counted around each attempt (the balancer layer's
/// `start` and `end`): a known address takes a shared lock and one atomic; only an
/// address's first `start` takes the write lock. Counts of addresses a list no longer
/// has are dropped once they outnumber its instances by far (more than twice, plus
/// 16), unless calls are still in flight on them, so memory follows the list.
#[derive(Debug, Default)]
pub(super) struct InFlight(
    RwLock<HashMap<Address, std::sync::atomic::AtomicUsize, foldhash::fast::RandomState>>,
);

impl InFlight {
    fn read(
        &self,
    ) -> std::sync::RwLockReadGuard<
        '_,
        HashMap<Address, std::sync::atomic::AtomicUsize, foldhash::fast::RandomState>,
    > {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn start(&self, addr: &Address) {
        if let Some(n) = self.read().get(addr) {
            n.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(addr.clone())
            .or_default()
            .fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn end(&self, addr: &Address) {
        if let Some(n) = self.read().get(addr) {
            // An `end` without its `start` (a count dropped meanwhile) stays at 0.
            let _ = n.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1));
        }
    }

    /// The calls in flight on each of `addrs`, read together; and drops the counts
    /// of addresses `list` lost, when they are many.
    pub(super) fn loads<const N: usize>(
        &self,
        addrs: [&Address; N],
        list: &InstanceList,
    ) -> [usize; N] {
        let (loads, counted) = {
            let map = self.read();
            let load = |a: &Address| map.get(a).map_or(0, |n| n.load(Ordering::Relaxed));
            (addrs.map(load), map.len())
        };
        if counted > 2 * list.len() + 16 {
            self.forget_unlisted(list);
        }
        loads
    }

    /// Drops the counts of addresses `list` does not have and no call is in flight on.
    #[cold]
    fn forget_unlisted(&self, list: &InstanceList) {
        self.0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|addr, n| list.contains(addr) || n.load(Ordering::Relaxed) > 0);
    }

    /// Addresses counted.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.read().len()
    }
}

/// A number below `n` from a uniform `r` (the high bits of `r * n`: no division).
pub(super) fn below(r: u64, n: usize) -> usize {
    ((u128::from(r) * n as u128) >> 64) as usize
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;
    use crate::client::balance::tests::inst;

    /// Parts by weight: 0 (takes nothing), odd, even.
    #[derive(Debug)]
    struct ByWeight;

    impl Classify for ByWeight {
        fn part(&self, instance: &Instance) -> usize {
            match instance.weight {
                0 => 0,
                w => 1 + (w % 2) as usize,
            }
        }
    }

    /// Each part's instances as `address/weight`, sorted (the order within a part may
    /// differ: a moved instance joins its new part at the end), then the figures.
    type Shown = (Vec<Vec<String>>, [u64; 3], [usize; 3]);

    fn shown(s: &Split<3, ByWeight>) -> Shown {
        let lists = s
            .lists
            .iter()
            .map(|l| {
                let mut part: Vec<String> = l
                    .in_order()
                    .iter()
                    .map(|i| format!("{}/{}", i.address, i.weight))
                    .collect();
                part.sort();
                part
            })
            .collect();
        (lists, s.weight, s.usable)
    }

    /// Steps that move instances between parts, add and remove them: the split kept
    /// by the steps is the one made again from the list each time.
    #[test]
    fn a_split_kept_by_steps_is_the_split_made_again() {
        let mut list: InstanceList = (0..6).map(|i| inst(i, 1 + i as u32)).collect();
        let mut split = Split::of(&list, ByWeight);
        let steps = [
            Step::put(inst(0, 2)),
            Step::put(inst(1, 0)),
            Step::put(inst(9, 3)),
            Step::Remove(inst(2, 1).address),
            Step::put(inst(1, 5)),
            Step::put(inst(3, 4)),
            Step::Remove(inst(9, 1).address),
            Step::Remove(inst(7, 1).address),
        ];
        for step in steps {
            if let Some(next) = list.apply([step.clone()]) {
                list = next;
            }
            split.apply(&step);
            let again = Split::of(&list, ByWeight);
            assert_eq!(shown(&split), shown(&again), "after {step:?}");
        }
    }

    /// The sum of the weights, counting how often it was derived from scratch.
    #[derive(Debug)]
    struct Total(u64);

    static DERIVED: AtomicUsize = AtomicUsize::new(0);

    impl Derive for Total {
        fn derive(list: &InstanceList) -> Self {
            DERIVED.fetch_add(1, Ordering::Relaxed);
            Total(list.iter().map(|i| u64::from(i.weight)).sum())
        }
    }

    impl Follow for Total {
        fn apply(&mut self, _step: &Step) {
            // Not the sum: the tests below check which path was taken.
            self.0 += 1_000_000;
        }
    }

    #[test]
    fn newer_versions_are_reached_by_steps_and_other_lineages_derived() {
        let derived: Derived<Total> = Derived::default();
        let total = |l: &InstanceList| derived.with(l, |t| t.0);
        let before = DERIVED.load(Ordering::Relaxed);
        let a = InstanceList::new([inst(1, 10), inst(2, 20)]);
        assert_eq!(total(&a), 30);
        let b = a.apply([Step::put(inst(3, 5))]).unwrap();
        let c = b.apply([Step::Remove(inst(1, 0).address)]).unwrap();
        assert_eq!(total(&c), 2_000_030, "two steps applied, nothing derived");
        assert_eq!(
            total(&b),
            2_000_030,
            "an older version uses the newer state"
        );
        assert_eq!(DERIVED.load(Ordering::Relaxed) - before, 1);
        // Another lineage takes another slot; the first stays.
        let other = InstanceList::new([inst(9, 1)]);
        assert_eq!(total(&other), 1);
        assert_eq!(total(&c), 2_000_030);
        // Beyond the slots the oldest lineage goes and is derived again.
        for w in 0..SLOTS as u32 {
            total(&InstanceList::new([inst(9, w)]));
        }
        assert_eq!(total(&c), 25);
    }

    #[test]
    fn a_dense_array_fills_the_gap_a_removed_instance_leaves() {
        let mut d = Dense::of(
            &InstanceList::new([inst(1, 1), inst(2, 0), inst(3, 1), inst(4, 1)]),
            |i| i.weight > 0,
        );
        let ports = |d: &Dense| {
            (0..d.len())
                .map(|n| d.get(n).address.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(ports(&d), ["127.0.0.1:1", "127.0.0.1:3", "127.0.0.1:4"]);
        assert!(d.remove(&inst(1, 0).address) && !d.remove(&inst(1, 0).address));
        assert_eq!(ports(&d), ["127.0.0.1:4", "127.0.0.1:3"]);
        d.apply(&Step::put(inst(3, 0)), |i| i.weight > 0);
        d.apply(&Step::put(inst(5, 7)), |i| i.weight > 0);
        assert_eq!(ports(&d), ["127.0.0.1:4", "127.0.0.1:5"]);
        assert!(d.remove(&inst(5, 0).address));
        assert!(d.remove(&inst(4, 0).address) && d.is_empty());
    }

    #[test]
    fn below_spreads_over_the_range() {
        assert_eq!(below(0, 10), 0);
        assert_eq!(below(u64::MAX, 10), 9);
        assert_eq!(below(u64::MAX / 2, 10), 4);
        assert_eq!(below(12345, 1), 0);
    }
}
