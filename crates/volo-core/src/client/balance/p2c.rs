//! Power of two choices: of two instances taken at random, the less loaded.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{PoisonError, RwLock};

use super::{Instance, LoadBalance, WeightedRandom};
use crate::context::Address;
use crate::random::random_seed;

/// Power of two choices: takes two distinct instances at random (uniformly among
/// those with a weight above 0) and picks the one with fewer calls in flight per unit
/// of weight, the first taken on a tie.
///
/// Load is counted per address by the balancer layer's [`start`](LoadBalance::start)
/// and [`end`](LoadBalance::end) around each attempt, so a slow or stuck instance, whose
/// calls pile up, is avoided without any timing; comparing two random instances rather
/// than all of them keeps a pick O(1) in load look-ups and spreads calls that arrive
/// together (they do not all rush to the one least loaded instance). Weights only
/// scale the load: an instance of weight 200 is as loaded with 2 calls in flight as
/// one of weight 100 with 1.
///
/// Picks and `start`/`end` on known addresses take a shared (read) lock and touch one
/// atomic counter each; only an address's first `start` takes the write lock. Counts of
/// addresses missing from the lists given to `pick` are dropped, once they outnumber
/// the listed ones by far (more than twice the list, plus 16), unless calls are still
/// in flight on them, so memory follows the list's size.
#[derive(Debug)]
pub struct PowerOfTwoChoices {
    rng: WeightedRandom,
    in_flight: RwLock<HashMap<Address, AtomicUsize>>,
}

impl Default for PowerOfTwoChoices {
    fn default() -> Self {
        Self::with_seed(random_seed())
    }
}

impl PowerOfTwoChoices {
    /// A balancer with random choices.
    pub fn new() -> Self {
        Self::default()
    }

    /// A balancer whose random choices follow from `seed` (for tests).
    pub fn with_seed(seed: u64) -> Self {
        PowerOfTwoChoices {
            rng: WeightedRandom::with_seed(seed),
            in_flight: RwLock::new(HashMap::new()),
        }
    }

    /// The index in `instances` of the `nth` instance with a weight above 0.
    fn usable(instances: &[Instance], all_usable: bool, nth: usize) -> usize {
        if all_usable {
            return nth;
        }
        instances
            .iter()
            .enumerate()
            .filter(|(_, i)| i.weight > 0)
            .nth(nth)
            .map_or(0, |(at, _)| at)
    }

    /// Drops the counts of addresses not in `instances` that have no call in flight.
    fn forget_unlisted(&self, instances: &[Instance]) {
        let listed: HashSet<&Address> = instances.iter().map(|i| &i.address).collect();
        let mut map = self
            .in_flight
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        map.retain(|addr, n| listed.contains(addr) || n.load(Ordering::Relaxed) > 0);
    }

    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.in_flight
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl LoadBalance for PowerOfTwoChoices {
    fn pick(&self, instances: &[Instance], _key: Option<u64>) -> Option<usize> {
        let usable = instances.iter().filter(|i| i.weight > 0).count();
        let all_usable = usable == instances.len();
        match usable {
            0 => return None,
            1 => return Some(Self::usable(instances, all_usable, 0)),
            _ => {}
        }
        let first = (self.rng.next() % usable as u64) as usize;
        let second = (first + 1 + (self.rng.next() % (usable as u64 - 1)) as usize) % usable;
        let a = Self::usable(instances, all_usable, first);
        let b = Self::usable(instances, all_usable, second);
        let (load_a, load_b, remembered) = {
            let map = self
                .in_flight
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            let load = |at: usize| {
                map.get(&instances[at].address)
                    .map_or(0, |n| n.load(Ordering::Relaxed))
            };
            (load(a), load(b), map.len())
        };
        if remembered > 2 * instances.len() + 16 {
            self.forget_unlisted(instances);
        }
        // load_a / weight_a <= load_b / weight_b, without division.
        let weight = |at: usize| u128::from(instances[at].weight);
        if load_a as u128 * weight(b) <= load_b as u128 * weight(a) {
            Some(a)
        } else {
            Some(b)
        }
    }

    fn start(&self, addr: &Address) {
        {
            let map = self
                .in_flight
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(n) = map.get(addr) {
                n.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        let mut map = self
            .in_flight
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        map.entry(addr.clone())
            .or_insert_with(|| AtomicUsize::new(0))
            .fetch_add(1, Ordering::Relaxed);
    }

    fn end(&self, addr: &Address) {
        let map = self
            .in_flight
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = map.get(addr) {
            // An `end` without its `start` (a count dropped meanwhile) stays at 0.
            let _ = n.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::balance::tests::inst;

    fn counts(lb: &PowerOfTwoChoices, list: &[Instance], n: usize) -> Vec<usize> {
        let mut c = vec![0; list.len()];
        for _ in 0..n {
            c[lb.pick(list, None).unwrap()] += 1;
        }
        c
    }

    #[test]
    fn p2c_spreads_calls_evenly_when_idle() {
        let lb = PowerOfTwoChoices::with_seed(11);
        let list = [inst(1, 100), inst(2, 100), inst(3, 100), inst(4, 100)];
        let c = counts(&lb, &list, 40_000);
        for n in c.iter() {
            assert!((9_000..11_000).contains(n), "{c:?}");
        }
    }

    #[test]
    fn p2c_prefers_the_less_loaded() {
        let lb = PowerOfTwoChoices::with_seed(3);
        let two = [inst(1, 100), inst(2, 100)];
        for _ in 0..3 {
            lb.start(&two[0].address);
        }
        assert_eq!(counts(&lb, &two, 100), [0, 100]);
        for _ in 0..3 {
            lb.end(&two[0].address);
        }
        lb.start(&two[1].address);
        assert_eq!(counts(&lb, &two, 100), [100, 0]);
        lb.end(&two[1].address);

        // Three: the most loaded never wins a pair; the idle one wins both of its
        // pairs, the middle one only against the most loaded.
        let three = [inst(1, 100), inst(2, 100), inst(3, 100)];
        for _ in 0..5 {
            lb.start(&three[0].address);
        }
        lb.start(&three[2].address);
        let c = counts(&lb, &three, 30_000);
        assert_eq!(c[0], 0, "{c:?}");
        assert!((19_000..21_000).contains(&c[1]), "{c:?}");
        assert!((9_000..11_000).contains(&c[2]), "{c:?}");
    }

    #[test]
    fn p2c_weighs_load_by_weight() {
        let lb = PowerOfTwoChoices::with_seed(5);
        let list = [inst(1, 100), inst(2, 300)];
        // 2 calls on weight 100 weigh more than 3 on weight 300.
        lb.start(&list[0].address);
        lb.start(&list[0].address);
        for _ in 0..3 {
            lb.start(&list[1].address);
        }
        assert_eq!(counts(&lb, &list, 50), [0, 50]);
    }

    #[test]
    fn p2c_zero_weights_single_and_empty() {
        let lb = PowerOfTwoChoices::with_seed(9);
        assert_eq!(lb.pick(&[], None), None);
        assert_eq!(lb.pick(&[inst(1, 0), inst(2, 0)], None), None);
        assert_eq!(
            lb.pick(&[inst(1, 0), inst(2, 10), inst(3, 0)], None),
            Some(1)
        );
        let list = [inst(1, 0), inst(2, 10), inst(3, 0), inst(4, 10)];
        let c = counts(&lb, &list, 1_000);
        assert_eq!((c[0], c[2]), (0, 0), "{c:?}");
        assert_eq!(c[1] + c[3], 1_000);
        // Unbalanced `end`s do not wrap the count.
        lb.end(&list[1].address);
        lb.start(&list[1].address);
        lb.end(&list[1].address);
        lb.end(&list[1].address);
        lb.start(&list[3].address);
        assert_eq!(counts(&lb, &list, 50), [0, 50, 0, 0]);
    }

    #[test]
    fn p2c_forgets_addresses_no_longer_listed() {
        let lb = PowerOfTwoChoices::with_seed(1);
        let busy = inst(999, 100);
        lb.start(&busy.address);
        for generation in 0..100u16 {
            let list: Vec<Instance> = (0..4).map(|i| inst(generation * 4 + i, 100)).collect();
            for _ in 0..4 {
                let at = lb.pick(&list, None).unwrap();
                lb.start(&list[at].address);
                lb.end(&list[at].address);
            }
            assert!(lb.remembered() <= 2 * 4 + 16 + 4 + 1, "{}", lb.remembered());
        }
        // The address with a call in flight kept its count.
        let with_busy = [busy.clone(), inst(60_000, 100)];
        assert_eq!(counts(&lb, &with_busy, 20), [0, 20]);
        lb.end(&busy.address);
    }
}
