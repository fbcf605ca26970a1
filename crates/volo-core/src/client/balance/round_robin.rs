//! Round robin: each instance in turn ([`RoundRobin`]), or in turn in proportion to
//! its weight, spread out ([`WeightedRoundRobin`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use super::{Instance, LoadBalance};
use crate::context::Address;
use crate::random::random_seed;

/// Each instance with a weight above 0 in turn, whatever its weight.
///
/// One counter for all calls: the `n`th call goes to the `n mod k`th of the `k`
/// instances it may use, so when the list changes between calls (an instance tried
/// already, one whose breaker is open) the turn goes on from where it was, over the
/// new list. The counter starts at a random place, so that clients started at once do
/// not all begin with the same instance.
#[derive(Debug)]
pub struct RoundRobin {
    next: AtomicUsize,
}

impl Default for RoundRobin {
    fn default() -> Self {
        RoundRobin {
            next: AtomicUsize::new(usize::from(random_seed() as u16)),
        }
    }
}

impl RoundRobin {
    /// A round robin starting at a random place.
    pub fn new() -> Self {
        Self::default()
    }
}

impl LoadBalance for RoundRobin {
    fn pick(&self, instances: &[Instance], _key: Option<u64>) -> Option<usize> {
        let usable = instances.iter().filter(|i| i.weight > 0).count();
        if usable == 0 {
            return None;
        }
        let turn = self.next.fetch_add(1, Ordering::Relaxed) % usable;
        if usable == instances.len() {
            return Some(turn);
        }
        instances
            .iter()
            .enumerate()
            .filter(|(_, i)| i.weight > 0)
            .nth(turn)
            .map(|(at, _)| at)
    }
}

/// Smooth weighted round robin: over a cycle (as many picks as the weights add up
/// to, in their lowest terms) each instance is picked as many times as its weight, and
/// its picks are spread over the cycle rather than bunched: weights 5, 1, 1 give
/// `a a b a c a a`, not `a a a a a b c`.
///
/// Each instance has a running score. At each pick every instance's score goes up by
/// its weight, the highest score wins (the first in the list on a tie), and the winner's
/// score goes down by the sum of the weights: an instance that just won waits while the
/// others catch up, in proportion to their weights.
///
/// Scores are kept by address, so the list may change between calls (order, weights,
/// instances coming and going). An instance missing from one call's list (tried
/// already, its breaker open) keeps its score for when it is back; the scores of
/// instances missing from the latest list are dropped once they outnumber the listed
/// ones by far (more than twice the list, plus 8), so memory follows the list's size.
/// Weight 0 instances are never picked.
#[derive(Debug, Default)]
pub struct WeightedRoundRobin {
    state: Mutex<Scores>,
}

#[derive(Debug, Default)]
struct Scores {
    by_address: HashMap<Address, Score>,
    /// Picks so far.
    round: u64,
}

#[derive(Debug)]
struct Score {
    current: i64,
    /// The last pick whose list had this address.
    seen: u64,
}

impl WeightedRoundRobin {
    /// A balancer with no scores yet.
    pub fn new() -> Self {
        Self::default()
    }

    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_address
            .len()
    }
}

impl LoadBalance for WeightedRoundRobin {
    fn pick(&self, instances: &[Instance], _key: Option<u64>) -> Option<usize> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let Scores { by_address, round } = &mut *state;
        *round += 1;
        let mut total = 0i64;
        let mut listed = 0usize;
        let mut best: Option<(usize, i64)> = None;
        for (at, inst) in instances.iter().enumerate() {
            if inst.weight == 0 {
                continue;
            }
            let weight = i64::from(inst.weight);
            let score = match by_address.get_mut(&inst.address) {
                Some(s) => s,
                None => by_address.entry(inst.address.clone()).or_insert(Score {
                    current: 0,
                    seen: *round,
                }),
            };
            score.current += weight;
            score.seen = *round;
            total += weight;
            listed += 1;
            if best.is_none_or(|(_, top)| score.current > top) {
                best = Some((at, score.current));
            }
        }
        let (at, _) = best?;
        if let Some(s) = by_address.get_mut(&instances[at].address) {
            s.current -= total;
        }
        if by_address.len() > 2 * listed + 8 {
            let now = *round;
            by_address.retain(|_, s| s.seen == now);
        }
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::balance::tests::inst;

    fn picks(lb: &impl LoadBalance, list: &[Instance], n: usize) -> Vec<usize> {
        (0..n).map(|_| lb.pick(list, None).unwrap()).collect()
    }

    fn counts(picks: &[usize], k: usize) -> Vec<usize> {
        let mut c = vec![0; k];
        for &p in picks {
            c[p] += 1;
        }
        c
    }

    #[test]
    fn round_robin_takes_each_in_turn() {
        let lb = RoundRobin::new();
        let list = [inst(1, 100), inst(2, 1), inst(3, 500)];
        let seq = picks(&lb, &list, 30);
        for w in seq.windows(2) {
            assert_eq!(w[1], (w[0] + 1) % 3, "{seq:?}");
        }
        assert_eq!(counts(&seq, 3), [10, 10, 10], "weights play no part");
    }

    #[test]
    fn round_robin_skips_zero_weights_and_follows_list_changes() {
        let lb = RoundRobin::new();
        let list = [inst(1, 0), inst(2, 100), inst(3, 0), inst(4, 100)];
        let seq = picks(&lb, &list, 20);
        assert_eq!(counts(&seq, 4), [0, 10, 0, 10]);
        assert!(seq.windows(2).all(|w| w[0] != w[1]), "{seq:?}");
        // One instance leaves: the turn goes on over the two left.
        let shorter = [inst(2, 100), inst(4, 100)];
        assert_eq!(counts(&picks(&lb, &shorter, 10), 2), [5, 5]);
        assert_eq!(lb.pick(&[], None), None);
        assert_eq!(lb.pick(&[inst(1, 0), inst(2, 0)], None), None);
        assert_eq!(lb.pick(&[inst(9, 7)], None), Some(0));
    }

    #[test]
    fn smooth_weighted_round_robin_spreads_the_picks() {
        let lb = WeightedRoundRobin::new();
        let list = [inst(1, 5), inst(2, 1), inst(3, 1)];
        // The classic smooth sequence, cycle after cycle.
        for _ in 0..3 {
            assert_eq!(picks(&lb, &list, 7), [0, 0, 1, 0, 2, 0, 0]);
        }
        // Weights 3, 2, 1: exact shares each cycle of 6, never the same one three
        // times running.
        let lb = WeightedRoundRobin::new();
        let list = [inst(1, 3), inst(2, 2), inst(3, 1)];
        let seq = picks(&lb, &list, 600);
        for cycle in seq.chunks(6) {
            assert_eq!(counts(cycle, 3), [3, 2, 1], "{cycle:?}");
        }
        assert!(seq.windows(3).all(|w| !(w[0] == w[1] && w[1] == w[2])));
    }

    #[test]
    fn weighted_round_robin_follows_the_weights_and_skips_zero() {
        let lb = WeightedRoundRobin::new();
        let list = [inst(1, 100), inst(2, 0), inst(3, 300), inst(4, 50)];
        let seq = picks(&lb, &list, 450 * 4);
        assert_eq!(counts(&seq, 4), [400, 0, 1200, 200]);
        let longest_run = seq
            .chunk_by(|a, b| a == b)
            .map(<[usize]>::len)
            .max()
            .unwrap();
        assert!(longest_run <= 2, "picks bunch up: a run of {longest_run}");
        assert_eq!(lb.pick(&[], None), None);
        assert_eq!(lb.pick(&[inst(1, 0)], None), None);
    }

    #[test]
    fn weighted_round_robin_copes_with_list_changes() {
        let lb = WeightedRoundRobin::new();
        let abc = [inst(1, 2), inst(2, 1), inst(3, 1)];
        picks(&lb, &abc, 5);
        // Reordered, one weight changed, one gone, one new: shares follow the new list
        // from the next full cycle on.
        let new = [inst(4, 1), inst(3, 3), inst(1, 2)];
        picks(&lb, &new, 6);
        let seq = picks(&lb, &new, 600);
        assert_eq!(counts(&seq, 3), [100, 300, 200]);
        // A call that leaves one out (tried already) does not reset the others.
        let without_first = &new[1..];
        let p = lb.pick(without_first, None).unwrap();
        assert!(p < 2);
        assert_eq!(
            lb.remembered(),
            4,
            "instance 2 is kept while the map is small"
        );
    }

    #[test]
    fn weighted_round_robin_forgets_instances_that_left() {
        let lb = WeightedRoundRobin::new();
        for generation in 0..100u16 {
            let list: Vec<Instance> = (0..4).map(|i| inst(generation * 4 + i, 10)).collect();
            picks(&lb, &list, 3);
            assert!(lb.remembered() <= 2 * 4 + 8 + 4, "{}", lb.remembered());
        }
    }
}
