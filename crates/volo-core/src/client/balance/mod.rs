//! Where a call goes: service discovery ([`Discover`], a fixed list or one that
//! changes, [`DiscoverList`]), load balancing ([`LoadBalance`]: weighted random, round
//! robin, power of two choices, consistent hash, local first, locality tiers), and
//! the layer that picks an instance for each attempt of a call.

mod derived;
mod local;
mod p2c;
mod ring;
mod round_robin;
mod tiers;

/// Discovery's types, which live with the registry: the balancer picks among them.
#[doc(no_inline)]
pub use crate::registry::{
    Change, Changes, Discover, DiscoverList, Instance, InstanceList, Locality, StaticDiscover,
    Step, Tags, Tier, no_changes,
};
pub use local::LocalFirst;
pub use p2c::PowerOfTwoChoices;
pub use round_robin::{RoundRobin, WeightedRoundRobin};
pub use tiers::Tiered;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use derived::{Dense, Derive, Derived, Follow, below};
use ring::Ring;

use crate::context::Address;
use crate::random::{Xorshift, random_seed};

mod layer;

pub use layer::{Balance, BalanceLayer};

/// Picks an instance for a call.
///
/// The balancer layer calls [`pick`](LoadBalance::pick) with discovery's list, then
/// [`start`](LoadBalance::start) and [`end`](LoadBalance::end) around the attempt on
/// the one picked, so balancers that weigh load (power of two choices) can count
/// calls in flight. `start` and `end` are called in pairs, also when the attempt
/// fails or is cancelled. When the instance picked cannot take the call (this call
/// tried it already, its breaker is open) the layer asks again, with another key for
/// a call that has one; a balancer gives another instance where it can.
///
/// # Fleets
///
/// The list is an [`InstanceList`]: a balancer that derives state from it (a weight
/// table, a ring) keeps that state by the list's [`lineage`](InstanceList::lineage)
/// and brings it to a new version by the [steps](InstanceList::steps_since) between
/// the two, so a change of one instance costs about the same with 10 instances as with
/// 10,000, and so does a pick. The balancers here all do.
pub trait LoadBalance: Send + Sync + 'static {
    /// The address of the instance of `list` for a call (`key`: the call's hash key,
    /// when it has one); `None` when none can take it (none listed, all of weight 0).
    fn pick(&self, list: &InstanceList, key: Option<u64>) -> Option<Address>;

    /// [`pick`](Self::pick), told which instances can take the call now (`usable`:
    /// not tried by this call, its breaker not open). The balancer layer calls this
    /// one. By default it is `pick` (the layer asks again when the answer is not
    /// usable); a balancer whose choice depends on which instances can take calls
    /// overrides it ([`Tiered`] spills to the next tier in proportion to what a tier
    /// cannot take).
    fn pick_usable(
        &self,
        list: &InstanceList,
        key: Option<u64>,
        usable: &dyn Fn(&Address) -> bool,
    ) -> Option<Address> {
        let _ = usable;
        self.pick(list, key)
    }

    /// An attempt on `addr` starts.
    fn start(&self, addr: &Address) {
        let _ = addr;
    }

    /// An attempt on `addr` ended (answered, failed or cancelled).
    fn end(&self, addr: &Address) {
        let _ = addr;
    }
}

/// A balancer chosen at run time (from a setting, say).
impl<B: LoadBalance + ?Sized> LoadBalance for Box<B> {
    fn pick(&self, list: &InstanceList, key: Option<u64>) -> Option<Address> {
        (**self).pick(list, key)
    }

    fn pick_usable(
        &self,
        list: &InstanceList,
        key: Option<u64>,
        usable: &dyn Fn(&Address) -> bool,
    ) -> Option<Address> {
        (**self).pick_usable(list, key, usable)
    }

    fn start(&self, addr: &Address) {
        (**self).start(addr);
    }

    fn end(&self, addr: &Address) {
        (**self).end(addr);
    }
}

/// Each instance in proportion to its weight (the default).
///
/// A pick is O(1) whatever the fleet's size, and so is applying a change of one
/// instance: instances are kept in classes by weight (class `c` holds weights from
/// 2^c to 2^(c+1) - 1); a pick draws a class in proportion to the weights it holds,
/// then an instance of it uniformly, kept with a chance of its weight over the
/// class's bound (at least one half) and drawn again otherwise. Each instance is
/// thus picked in exact proportion to its weight, in two draws on average at most.
#[derive(Debug)]
pub struct WeightedRandom {
    rng: Xorshift,
    classes: Derived<Classes>,
}

/// The instances of weight above 0 by weight class.
#[derive(Debug)]
struct Classes {
    class: [Dense; 32],
    /// The weights each class holds.
    totals: [u64; 32],
    total: u64,
}

/// The class of weight `w` (above 0).
fn class_of(w: u32) -> usize {
    31 - w.leading_zeros() as usize
}

impl Classes {
    fn put(&mut self, i: &Arc<Instance>) {
        let c = class_of(i.weight);
        self.class[c].put(i);
        self.totals[c] += u64::from(i.weight);
        self.total += u64::from(i.weight);
    }

    /// Takes out the instance at `address`, whatever its class.
    fn remove(&mut self, address: &Address, listed: Option<u32>) {
        let Some(w) = listed.filter(|w| *w > 0) else {
            return;
        };
        let c = class_of(w);
        if self.class[c].remove(address) {
            self.totals[c] -= u64::from(w);
            self.total -= u64::from(w);
        }
    }

    /// The weight the instance at `address` is listed with here.
    fn weight(&self, address: &Address) -> Option<u32> {
        self.class
            .iter()
            .filter(|d| !d.is_empty())
            .find_map(|d| d.find(address).map(|i| i.weight))
    }
}

impl Derive for Classes {
    fn derive(list: &InstanceList) -> Self {
        let mut c = Classes {
            class: std::array::from_fn(|_| Dense::default()),
            totals: [0; 32],
            total: 0,
        };
        for i in list.in_order() {
            if i.weight > 0 {
                c.put(i);
            }
        }
        c
    }
}

impl Follow for Classes {
    fn apply(&mut self, step: &Step) {
        let was = self.weight(step.address());
        self.remove(step.address(), was);
        if let Step::Put(i) = step
            && i.weight > 0
        {
            self.put(i);
        }
    }
}

impl Default for WeightedRandom {
    fn default() -> Self {
        WeightedRandom::with_seed(random_seed())
    }
}

impl WeightedRandom {
    /// A balancer whose choices follow from `seed` (for tests).
    pub fn with_seed(seed: u64) -> Self {
        WeightedRandom {
            rng: Xorshift::new(seed),
            classes: Derived::default(),
        }
    }

    /// The next random number (shared by all callers).
    fn next(&self) -> u64 {
        self.rng.next()
    }
}

impl LoadBalance for WeightedRandom {
    fn pick(&self, list: &InstanceList, _key: Option<u64>) -> Option<Address> {
        self.classes.with(list, |c| {
            if c.total == 0 {
                return None;
            }
            let mut r = self.next() % c.total;
            let at = c.totals.iter().position(|&t| {
                let here = r < t;
                if !here {
                    r -= t;
                }
                here
            })?;
            let class = &c.class[at];
            // Weights in class `at` are below 2^(at + 1): keep the one drawn with a
            // chance of its weight over that bound (at least one half).
            let bound = 2u64 << at;
            loop {
                let i = class.get(below(self.next(), class.len()));
                if self.next() % bound < u64::from(i.weight) {
                    return Some(i.address.clone());
                }
            }
        })
    }
}

/// The same key to the same instance while the instances stay the same, and to few
/// other ones when they change: a ring of points (virtual nodes, in proportion to
/// weight) per instance; a call goes to the first point at or after its key's hash.
/// Calls without a key are spread by weight.
///
/// The ring is kept for the list given (see [`LoadBalance`]'s "Fleets") in one flat
/// table ordered by hash: a pick reads one or two cache lines of it, an instance that
/// changes moves only its own points. A key is mixed by a fixed function (not the
/// process's random hasher), so clients of one fleet send a key to one instance.
#[derive(Debug, Default)]
pub struct ConsistentHash {
    ring: Derived<Ring>,
    fallback: WeightedRandom,
}

impl Derive for Ring {
    fn derive(list: &InstanceList) -> Self {
        let mut ring = Ring::default();
        for i in list.in_order() {
            ring.put(i);
        }
        ring
    }
}

impl Follow for Ring {
    fn apply(&mut self, step: &Step) {
        match step {
            Step::Put(i) => self.put(i),
            Step::Remove(a) => self.remove(a),
        }
    }
}

/// A key spread over the ring: MurmurHash3's 64-bit finalizer, a bijection, fixed
/// here so that every client maps a key alike (keys such as 1, 2, 3 land far apart).
pub(super) fn mix(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

pub(super) fn hash_of(v: impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

impl LoadBalance for ConsistentHash {
    fn pick(&self, list: &InstanceList, key: Option<u64>) -> Option<Address> {
        let Some(key) = key else {
            return self.fallback.pick(list, None);
        };
        self.ring.with(list, |ring| ring.owner(mix(key)).cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An instance on 127.0.0.1:`port` of `weight` (the balancers' tests share it).
    pub(super) use crate::registry::inst;

    /// How many of `n` picks from `list` went to each of its instances, in its order.
    pub(super) fn counts(lb: &impl LoadBalance, list: &InstanceList, n: usize) -> Vec<usize> {
        let order: Vec<Address> = list.in_order().iter().map(|i| i.address.clone()).collect();
        let mut c = vec![0; order.len()];
        for _ in 0..n {
            let got = lb.pick(list, None).expect("a pick");
            c[order.iter().position(|a| *a == got).expect("a listed one")] += 1;
        }
        c
    }

    #[test]
    fn weighted_random_follows_the_weights() {
        let lb = WeightedRandom::with_seed(7);
        let list = InstanceList::new([inst(1, 100), inst(2, 300), inst(3, 0)]);
        let counts = counts(&lb, &list, 40_000);
        assert_eq!(counts[2], 0, "weight 0 gets nothing");
        let share = counts[1] as f64 / 40_000.0;
        assert!((0.72..0.78).contains(&share), "{counts:?}");
        assert_eq!(lb.pick(&InstanceList::new([inst(1, 0)]), None), None);
        assert_eq!(lb.pick(&InstanceList::default(), None), None);
    }

    #[test]
    fn weighted_random_follows_changes_and_weights_of_every_size() {
        let lb = WeightedRandom::with_seed(11);
        // Weights across many classes, the largest one too.
        let list = InstanceList::new([inst(1, 1), inst(2, 3), inst(3, 1000), inst(4, u32::MAX)]);
        let c = counts(&lb, &list, 10_000);
        assert!(c[3] > 9_990, "{c:?}");
        // A change applied by steps: the same shares as a list made from scratch.
        let changed = list
            .apply([
                Step::Remove(inst(4, 0).address),
                Step::put(inst(1, 3000)),
                Step::put(inst(5, 0)),
            ])
            .unwrap();
        let c = counts(&lb, &changed, 40_000);
        let share = |n: usize| c[n] as f64 / 40_000.0;
        assert!((0.72..0.78).contains(&share(0)), "{c:?}");
        assert!((0.22..0.28).contains(&share(2)), "{c:?}");
        assert_eq!(c[3], 0, "weight 0");
        let fresh = InstanceList::new(changed.to_vec());
        let d = counts(&lb, &fresh, 40_000);
        assert!(
            c.iter().zip(&d).all(|(a, b)| a.abs_diff(*b) < 1_000),
            "{c:?} {d:?}"
        );
    }

    #[test]
    fn consistent_hash_keeps_keys_and_moves_few_when_one_goes() {
        let lb = ConsistentHash::default();
        let four = InstanceList::new([inst(1, 100), inst(2, 100), inst(3, 100), inst(4, 100)]);
        let before: Vec<Address> = (0..1000)
            .map(|k| lb.pick(&four, Some(k)).unwrap())
            .collect();
        let again: Vec<Address> = (0..1000)
            .map(|k| lb.pick(&four, Some(k)).unwrap())
            .collect();
        assert_eq!(before, again, "the same key, the same instance");
        for i in 1..=4 {
            let n = before.iter().filter(|a| **a == inst(i, 0).address).count();
            assert!((150..350).contains(&n), "instance {i} got {n} of 1000 keys");
        }
        // Instance 4 leaves, by a step: only its keys move, and the ring reached by
        // the step is the ring of the list made from scratch.
        let gone = inst(4, 0).address;
        let three = four.apply([Step::Remove(gone.clone())]).unwrap();
        let fresh = ConsistentHash::default();
        let fresh_three = InstanceList::new(three.to_vec());
        let mut moved = 0;
        for (k, was) in before.iter().enumerate() {
            let now = lb.pick(&three, Some(k as u64)).unwrap();
            assert_eq!(
                Some(&now),
                fresh.pick(&fresh_three, Some(k as u64)).as_ref()
            );
            if *was != gone {
                assert_eq!(now, *was, "key {k} moved though its instance stayed");
            } else {
                moved += 1;
            }
        }
        assert!(moved > 0);
        assert_eq!(lb.pick(&InstanceList::default(), Some(1)), None);
    }
}
