//! Where a call goes: service discovery ([`Discover`], a fixed list or one that
//! changes, [`DiscoverList`]), load balancing ([`LoadBalance`]: weighted random, round
//! robin, power of two choices, consistent hash, local first), and the layer that
//! picks an instance for each attempt of a call.

mod list_cache;
mod local;
mod p2c;
mod round_robin;

/// Discovery's types, which live with the registry: the balancer picks among them.
#[doc(no_inline)]
pub use crate::registry::{
    Change, Changes, Discover, DiscoverList, Instance, StaticDiscover, Tags, no_changes,
};
pub use local::LocalFirst;
pub use p2c::PowerOfTwoChoices;
pub use round_robin::{RoundRobin, WeightedRoundRobin};

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use list_cache::ListCache;

use crate::context::Address;
use crate::random::{Xorshift, random_seed};

mod layer;

pub use layer::{Balance, BalanceLayer};

/// Picks an instance for a call.
///
/// The balancer layer calls [`pick`](LoadBalance::pick) with the instances that may
/// take the call (discovery's list less those tried already and those whose breaker
/// is open), then [`start`](LoadBalance::start) and [`end`](LoadBalance::end) around
/// the attempt on the one picked, so balancers that weigh load (power of two choices)
/// can count calls in flight. `start` and `end` are called in pairs, also when the
/// attempt fails or is cancelled.
pub trait LoadBalance: Send + Sync + 'static {
    /// The index of the instance in `instances` for a call (`key`: the call's hash key,
    /// when it has one); `None` when none can take it.
    fn pick(&self, instances: &[Instance], key: Option<u64>) -> Option<usize>;

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
    fn pick(&self, instances: &[Instance], key: Option<u64>) -> Option<usize> {
        (**self).pick(instances, key)
    }

    fn start(&self, addr: &Address) {
        (**self).start(addr);
    }

    fn end(&self, addr: &Address) {
        (**self).end(addr);
    }
}

/// Each instance in proportion to its weight (the default).
#[derive(Debug)]
pub struct WeightedRandom {
    rng: Xorshift,
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
        }
    }

    /// The next random number (shared by all callers).
    fn next(&self) -> u64 {
        self.rng.next()
    }
}

impl LoadBalance for WeightedRandom {
    fn pick(&self, instances: &[Instance], _key: Option<u64>) -> Option<usize> {
        let total: u64 = instances.iter().map(|i| u64::from(i.weight)).sum();
        if total == 0 {
            return None;
        }
        let mut r = self.next() % total;
        for (i, inst) in instances.iter().enumerate() {
            let w = u64::from(inst.weight);
            if r < w {
                return Some(i);
            }
            r -= w;
        }
        None
    }
}

/// The same key to the same instance while the instances stay the same, and to few
/// other ones when they change: a ring of points (virtual nodes, in proportion to
/// weight) per instance; a call goes to the first point at or after its key's hash.
/// Calls without a key are spread by weight.
///
/// A ring is built for each list a pick is given, and kept for the last four lists
/// (see `ListCache`): picks of a list seen lately take no lock, and a balancer that
/// alternates lists (the two sides of a [`LocalFirst`] split, a retry's remainder)
/// does not rebuild on each turn.
#[derive(Debug, Default)]
pub struct ConsistentHash {
    /// The rings of the last instance lists seen: (point, index into the list),
    /// sorted by point.
    ring: ListCache<Vec<(u64, usize)>>,
    fallback: WeightedRandom,
}

/// The ring of `instances`.
fn ring_of(instances: &[Instance]) -> Vec<(u64, usize)> {
    let mut points = Vec::new();
    for (i, inst) in instances.iter().enumerate() {
        let n = (u64::from(inst.weight) * POINTS_PER_100).div_ceil(100);
        for v in 0..n {
            points.push((hash_of((&inst.address, v)), i));
        }
    }
    points.sort_unstable();
    points
}

/// Points on the ring per 100 of weight.
const POINTS_PER_100: u64 = 100;

pub(super) fn hash_of(v: impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

impl LoadBalance for ConsistentHash {
    fn pick(&self, instances: &[Instance], key: Option<u64>) -> Option<usize> {
        let Some(key) = key else {
            return self.fallback.pick(instances, None);
        };
        self.ring.with(instances, ring_of, |points| {
            if points.is_empty() {
                return None;
            }
            let h = hash_of(key);
            let at = points.partition_point(|(p, _)| *p < h);
            Some(points[at % points.len()].1)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An instance on 127.0.0.1:`port` of `weight` (the balancers' tests share it).
    pub(super) use crate::registry::inst;

    #[test]
    fn weighted_random_follows_the_weights() {
        let lb = WeightedRandom::with_seed(7);
        let list = [inst(1, 100), inst(2, 300), inst(3, 0)];
        let mut counts = [0u32; 3];
        for _ in 0..40_000 {
            counts[lb.pick(&list, None).unwrap()] += 1;
        }
        assert_eq!(counts[2], 0, "weight 0 gets nothing");
        let share = f64::from(counts[1]) / 40_000.0;
        assert!((0.72..0.78).contains(&share), "{counts:?}");
        assert_eq!(lb.pick(&[inst(1, 0)], None), None);
        assert_eq!(lb.pick(&[], None), None);
    }

    #[test]
    fn consistent_hash_keeps_keys_and_moves_few_when_one_goes() {
        let lb = ConsistentHash::default();
        let four = [inst(1, 100), inst(2, 100), inst(3, 100), inst(4, 100)];
        let before: Vec<usize> = (0..1000)
            .map(|k| lb.pick(&four, Some(k)).unwrap())
            .collect();
        let again: Vec<usize> = (0..1000)
            .map(|k| lb.pick(&four, Some(k)).unwrap())
            .collect();
        assert_eq!(before, again, "the same key, the same instance");
        for i in 0..4 {
            let n = before.iter().filter(|&&p| p == i).count();
            assert!((150..350).contains(&n), "instance {i} got {n} of 1000 keys");
        }
        // Instance 4 leaves: only its keys move.
        let three = &four[..3];
        let mut moved = 0;
        for (k, &was) in before.iter().enumerate() {
            let now = lb.pick(three, Some(k as u64)).unwrap();
            if was != 3 {
                assert_eq!(now, was, "key {k} moved though its instance stayed");
            } else {
                moved += 1;
            }
        }
        assert!(moved > 0);
    }
}
