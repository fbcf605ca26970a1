//! Power of two choices: of two instances taken at random, the less loaded.

use super::derived::{Derived, InFlight, Member, below};
use super::round_robin::Usable;
use super::{InstanceList, LoadBalance};
use crate::context::Address;
use crate::random::{Xorshift, random_seed};

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
/// atomic counter each; only an address's first `start` takes the write lock. A pick
/// is O(1) whatever the fleet's size, and so is a change of one instance. Counts of
/// addresses missing from the lists given to `pick` are dropped, once they outnumber
/// the listed ones by far (more than twice the list, plus 16), unless calls are still
/// in flight on them, so memory follows the list's size.
#[derive(Debug)]
pub struct PowerOfTwoChoices {
    rng: Xorshift,
    usable: Derived<Usable>,
    in_flight: InFlight,
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
            rng: Xorshift::new(seed),
            usable: Derived::default(),
            in_flight: InFlight::default(),
        }
    }

    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.in_flight.len()
    }
}

/// An instance's address and weight, taken out of the balancer's state.
fn taken(i: &Member) -> (Address, u32) {
    (i.address.clone(), i.weight)
}

impl LoadBalance for PowerOfTwoChoices {
    fn pick(&self, list: &InstanceList, _key: Option<u64>) -> Option<Address> {
        let (a, b) = self.usable.with(list, |Usable(usable)| {
            let n = usable.len();
            match n {
                0 => return None,
                1 => return Some((taken(usable.get(0)), None)),
                _ => {}
            }
            let first = below(self.rng.next(), n);
            let second = (first + 1 + below(self.rng.next(), n - 1)) % n;
            Some((taken(usable.get(first)), Some(taken(usable.get(second)))))
        })?;
        let Some(b) = b else {
            return Some(a.0);
        };
        let [load_a, load_b] = self.in_flight.loads([&a.0, &b.0], list);
        // Load per unit of weight, compared without dividing.
        if load_a as u128 * u128::from(b.1) <= load_b as u128 * u128::from(a.1) {
            Some(a.0)
        } else {
            Some(b.0)
        }
    }

    fn start(&self, addr: &Address) {
        self.in_flight.start(addr);
    }

    fn end(&self, addr: &Address) {
        self.in_flight.end(addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::balance::Step;
    use crate::client::balance::tests::{counts, inst};

    fn list(of: &[(u16, u32)]) -> InstanceList {
        InstanceList::new(of.iter().map(|&(p, w)| inst(p, w)))
    }

    #[test]
    fn p2c_spreads_calls_evenly_when_idle() {
        let lb = PowerOfTwoChoices::with_seed(11);
        let list = list(&[(1, 100), (2, 100), (3, 100), (4, 100)]);
        let c = counts(&lb, &list, 40_000);
        for n in c.iter() {
            assert!((9_000..11_000).contains(n), "{c:?}");
        }
    }

    #[test]
    fn p2c_prefers_the_less_loaded() {
        let lb = PowerOfTwoChoices::with_seed(3);
        let two = list(&[(1, 100), (2, 100)]);
        let a1 = inst(1, 0).address;
        let a2 = inst(2, 0).address;
        let a3 = inst(3, 0).address;
        for _ in 0..3 {
            lb.start(&a1);
        }
        assert_eq!(counts(&lb, &two, 100), [0, 100]);
        for _ in 0..3 {
            lb.end(&a1);
        }
        lb.start(&a2);
        assert_eq!(counts(&lb, &two, 100), [100, 0]);
        lb.end(&a2);

        let three = list(&[(1, 100), (2, 100), (3, 100)]);
        for _ in 0..5 {
            lb.start(&a1);
        }
        lb.start(&a3);
        let c = counts(&lb, &three, 30_000);
        assert_eq!(c[0], 0, "{c:?}");
        assert!((19_000..21_000).contains(&c[1]), "{c:?}");
        assert!((9_000..11_000).contains(&c[2]), "{c:?}");
    }

    #[test]
    fn p2c_weighs_load_by_weight() {
        let lb = PowerOfTwoChoices::with_seed(5);
        let list = list(&[(1, 100), (2, 300)]);
        lb.start(&inst(1, 0).address);
        lb.start(&inst(1, 0).address);
        for _ in 0..3 {
            lb.start(&inst(2, 0).address);
        }
        assert_eq!(counts(&lb, &list, 50), [0, 50]);
    }

    #[test]
    fn p2c_zero_weights_single_and_empty() {
        let lb = PowerOfTwoChoices::with_seed(9);
        assert_eq!(lb.pick(&InstanceList::default(), None), None);
        assert_eq!(lb.pick(&list(&[(1, 0), (2, 0)]), None), None);
        assert_eq!(
            lb.pick(&list(&[(1, 0), (2, 10), (3, 0)]), None),
            Some(inst(2, 0).address)
        );
        let four = list(&[(1, 0), (2, 10), (3, 0), (4, 10)]);
        let c = counts(&lb, &four, 1_000);
        assert_eq!((c[0], c[2]), (0, 0), "{c:?}");
        assert_eq!(c[1] + c[3], 1_000);
        let a2 = inst(2, 0).address;
        lb.end(&a2);
        lb.start(&a2);
        lb.end(&a2);
        lb.end(&a2);
        lb.start(&inst(4, 0).address);
        assert_eq!(counts(&lb, &four, 50), [0, 50, 0, 0]);
        // Instance 1 gets a weight by a step: it takes calls from then on.
        let changed = four.apply([Step::put(inst(1, 10))]).unwrap();
        assert!(counts(&lb, &changed, 200)[0] > 50);
    }

    #[test]
    fn p2c_forgets_addresses_no_longer_listed() {
        let lb = PowerOfTwoChoices::with_seed(1);
        let busy = inst(999, 100);
        lb.start(&busy.address);
        for generation in 0..100u16 {
            let list: InstanceList = (0..4).map(|i| inst(generation * 4 + i, 100)).collect();
            for _ in 0..4 {
                let at = lb.pick(&list, None).unwrap();
                lb.start(&at);
                lb.end(&at);
            }
            assert!(lb.remembered() <= 2 * 4 + 16 + 4 + 1, "{}", lb.remembered());
        }
        let with_busy = InstanceList::new([busy.clone(), inst(60_000, 100)]);
        assert_eq!(counts(&lb, &with_busy, 20), [0, 20]);
        lb.end(&busy.address);
    }
}
