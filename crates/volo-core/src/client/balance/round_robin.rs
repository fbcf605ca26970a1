//! Round robin: each instance in turn ([`RoundRobin`]), or in turn in proportion to
//! its weight, spread out ([`WeightedRoundRobin`]).

use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use super::derived::{Dense, Derive, Derived, Follow};
use super::{Instance, InstanceList, LoadBalance, Step};
use crate::context::Address;
use crate::random::random_seed;

/// Each instance with a weight above 0 in turn, whatever its weight.
///
/// One counter for all calls: the `n`th call goes to the `n mod k`th of the `k`
/// instances it may use, in the order the balancer keeps them (the list's order to
/// begin with; an instance that leaves gives its place to the last one, a new one
/// comes last), so when the list changes the turn goes on from where it was. The
/// counter starts at a random place, so that clients started at once do not all begin
/// with the same instance. A pick is O(1), and so is a change of one instance.
#[derive(Debug)]
pub struct RoundRobin {
    next: AtomicUsize,
    usable: Derived<Usable>,
}

/// The instances of weight above 0.
#[derive(Debug)]
pub(super) struct Usable(pub(super) Dense);

impl Derive for Usable {
    fn derive(list: &InstanceList) -> Self {
        Usable(Dense::of(list, |i| i.weight > 0))
    }
}

impl Follow for Usable {
    fn apply(&mut self, step: &Step) {
        self.0.apply(step, |i| i.weight > 0);
    }
}

impl Default for RoundRobin {
    fn default() -> Self {
        RoundRobin {
            next: AtomicUsize::new(usize::from(random_seed() as u16)),
            usable: Derived::default(),
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
    fn pick(&self, list: &InstanceList, _key: Option<u64>) -> Option<Address> {
        self.usable.with(list, |Usable(usable)| {
            if usable.is_empty() {
                return None;
            }
            let turn = self.next.fetch_add(1, Ordering::Relaxed) % usable.len();
            Some(usable.get(turn).address.clone())
        })
    }
}

/// Weighted round robin, spread out: over a cycle (as many picks as the weights add
/// up to, divided by their greatest common divisor) each instance is picked as many
/// times as its weight, and its picks are spread over the cycle rather than bunched.
///
/// Earliest deadline first (as Envoy does it), over groups of instances of one
/// weight: each group has a deadline on a virtual clock, half its period (one over
/// its weight times its size) at first; a pick takes the group of the earliest
/// deadline (the one made first on a tie), the next of its instances in turn, moves
/// the clock to the deadline and the deadline on by the period. Weights 3, 2, 1 give
/// `a b a c b a`; weights 5, 1, 1 give `a b a a a c a`. A pick costs O(log g) for `g`
/// distinct weights (a fleet of one weight is a plain round robin), and a change of
/// one instance the same. A group that gains or loses an instance keeps its next
/// deadline and moves on by its new period from there.
///
/// This is not nginx's smooth weighted round robin, whose picks cost O(n) in the
/// number of instances: the order within a cycle may differ, the shares per cycle
/// are the same. Weight 0 instances are never picked.
#[derive(Debug, Default)]
pub struct WeightedRoundRobin {
    state: Derived<Mutex<Deadlines>>,
}

/// Deadlines are in units of 1 / 2^64 of the virtual clock's second: a group's period
/// (2^64 over its weight times its size, which is below 2^46) keeps 18 bits or more,
/// whatever the weights; a clock of 128 bits does not wrap.
const SCALE: u128 = 1 << 64;

/// The groups of instances by weight, and their deadlines.
#[derive(Debug, Default)]
struct Deadlines {
    groups: HashMap<u32, Group, foldhash::fast::RandomState>,
    /// The weight each listed instance has here (to find its group when it changes).
    weight_of: HashMap<Address, u32, foldhash::fast::RandomState>,
    /// One entry per group that counts, and entries of groups that emptied (dropped
    /// when they come up, or when they outnumber the groups).
    heap: BinaryHeap<Reverse<Due>>,
    /// The virtual clock: the deadline of the last pick.
    now: u128,
    /// Entries made so far: each one's number, which also breaks ties (the one made
    /// first goes first).
    made: u64,
}

/// The instances of one weight, taken in turn.
#[derive(Debug, Default)]
struct Group {
    members: Dense,
    turn: usize,
    /// Its period: [`SCALE`] over its weight times its size (kept, not divided out
    /// on every pick).
    period: u128,
    /// Its entry in the heap.
    entry: u64,
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Due {
    deadline: u128,
    entry: u64,
    weight: u32,
}

impl Deadlines {
    /// Lists `instance` (weight above 0) in the group of its weight; a new group's
    /// deadline is half its period after the clock.
    fn put(&mut self, instance: &Instance) {
        let w = instance.weight;
        self.weight_of.insert(instance.address.clone(), w);
        let group = self.groups.entry(w).or_default();
        group.members.put(instance);
        group.period = SCALE / (u128::from(w) * group.members.len() as u128);
        if group.members.len() == 1 {
            group.entry = self.made;
            self.made += 1;
            self.heap.push(Reverse(Due {
                deadline: self.now + SCALE / u128::from(w) / 2,
                entry: group.entry,
                weight: w,
            }));
        }
    }

    /// Takes the instance at `address` out of its group.
    fn remove(&mut self, address: &Address) {
        let Some(w) = self.weight_of.remove(address) else {
            return;
        };
        if let Some(group) = self.groups.get_mut(&w) {
            group.members.remove(address);
            if group.members.is_empty() {
                self.groups.remove(&w);
                self.compact();
            } else {
                group.period = SCALE / (u128::from(w) * group.members.len() as u128);
            }
        }
    }

    /// Drops the entries of groups that emptied, once they outnumber the groups.
    fn compact(&mut self) {
        if self.heap.len() <= 2 * self.groups.len() + 16 {
            return;
        }
        let groups = &self.groups;
        self.heap
            .retain(|Reverse(d)| groups.get(&d.weight).is_some_and(|g| g.entry == d.entry));
    }

    fn pick(&mut self) -> Option<Address> {
        loop {
            // The earliest entry, moved on in place: one sift down rather than a pop
            // and a push (52 -> 48 ns a pick at 100 weights, 35 -> 37 ns at 10).
            let mut top = self.heap.peek_mut()?;
            let due = &mut top.0;
            let Some(group) = self
                .groups
                .get_mut(&due.weight)
                .filter(|g| g.entry == due.entry)
            else {
                PeekMut::pop(top);
                continue;
            };
            // The turn goes on from where it was when members come or go.
            if group.turn >= group.members.len() {
                group.turn = 0;
            }
            let member = group.members.get(group.turn);
            group.turn += 1;
            self.now = due.deadline;
            due.deadline += group.period;
            return Some(member.address.clone());
        }
    }
}

impl Derive for Mutex<Deadlines> {
    fn derive(list: &InstanceList) -> Self {
        let mut d = Deadlines::default();
        for i in list.in_order() {
            if i.weight > 0 {
                d.put(i);
            }
        }
        // Each group is first due half its period in, its period as the list has it
        // (its members came one by one above).
        let mut firsts: Vec<Due> = d
            .groups
            .iter()
            .map(|(&weight, g)| Due {
                deadline: g.period / 2,
                entry: g.entry,
                weight,
            })
            .collect();
        firsts.sort_unstable_by_key(|f| f.entry);
        d.heap = firsts.into_iter().map(Reverse).collect();
        Mutex::new(d)
    }
}

impl Follow for Mutex<Deadlines> {
    fn apply(&mut self, step: &Step) {
        let d = self.get_mut().unwrap_or_else(PoisonError::into_inner);
        d.remove(step.address());
        if let Step::Put(i) = step
            && i.weight > 0
        {
            d.put(i);
        }
    }
}

impl WeightedRoundRobin {
    /// A balancer with no deadlines yet.
    pub fn new() -> Self {
        Self::default()
    }
}

impl LoadBalance for WeightedRoundRobin {
    fn pick(&self, list: &InstanceList, _key: Option<u64>) -> Option<Address> {
        self.state.with(list, |d| {
            d.lock().unwrap_or_else(PoisonError::into_inner).pick()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::balance::tests::{counts, inst};

    /// The positions in `list`'s order of `n` picks.
    fn picks(lb: &impl LoadBalance, list: &InstanceList, n: usize) -> Vec<usize> {
        let order: Vec<Address> = list.in_order().iter().map(|i| i.address.clone()).collect();
        (0..n)
            .map(|_| {
                let got = lb.pick(list, None).unwrap();
                order.iter().position(|a| *a == got).unwrap()
            })
            .collect()
    }

    fn tally(picks: &[usize], k: usize) -> Vec<usize> {
        let mut c = vec![0; k];
        for &p in picks {
            c[p] += 1;
        }
        c
    }

    #[test]
    fn round_robin_takes_each_in_turn() {
        let lb = RoundRobin::new();
        let list = InstanceList::new([inst(1, 100), inst(2, 1), inst(3, 500)]);
        let seq = picks(&lb, &list, 30);
        for w in seq.windows(2) {
            assert_eq!(w[1], (w[0] + 1) % 3, "{seq:?}");
        }
        assert_eq!(tally(&seq, 3), [10, 10, 10], "weights play no part");
    }

    #[test]
    fn round_robin_skips_zero_weights_and_follows_list_changes() {
        let lb = RoundRobin::new();
        let list = InstanceList::new([inst(1, 0), inst(2, 100), inst(3, 0), inst(4, 100)]);
        let seq = picks(&lb, &list, 20);
        assert_eq!(tally(&seq, 4), [0, 10, 0, 10]);
        assert!(seq.windows(2).all(|w| w[0] != w[1]), "{seq:?}");
        // One instance leaves, another gets a weight: the turn goes on over them.
        let changed = list
            .apply([Step::Remove(inst(2, 0).address), Step::put(inst(3, 5))])
            .unwrap();
        assert_eq!(counts(&lb, &changed, 10), [0, 5, 5], "1 (weight 0), 3, 4");
        assert_eq!(lb.pick(&InstanceList::default(), None), None);
        let none = InstanceList::new([inst(1, 0), inst(2, 0)]);
        assert_eq!(lb.pick(&none, None), None);
        let one = InstanceList::new([inst(9, 7)]);
        assert_eq!(lb.pick(&one, None), Some(inst(9, 7).address));
    }

    #[test]
    fn weighted_round_robin_spreads_the_picks() {
        let lb = WeightedRoundRobin::new();
        let list = InstanceList::new([inst(1, 3), inst(2, 2), inst(3, 1)]);
        // Deadlines 1/6, 1/4, 1/2 (a tie: the first listed), 1/2, 3/4, 5/6.
        for _ in 0..3 {
            assert_eq!(picks(&lb, &list, 6), [0, 1, 0, 2, 1, 0]);
        }
        // Weights 5, 1, 1: the two of weight 1 take turns in their group (period
        // 1/2, first due at 1/4), spread between the picks of the first.
        let lb = WeightedRoundRobin::new();
        let list = InstanceList::new([inst(1, 5), inst(2, 1), inst(3, 1)]);
        for _ in 0..3 {
            assert_eq!(picks(&lb, &list, 7), [0, 1, 0, 0, 0, 2, 0]);
        }
        // One weight: a plain round robin.
        let lb = WeightedRoundRobin::new();
        let list: InstanceList = (1..=4).map(|p| inst(p, 7)).collect();
        let seq = picks(&lb, &list, 12);
        assert_eq!(seq, [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]);
    }

    #[test]
    fn weighted_round_robin_follows_the_weights_and_skips_zero() {
        let lb = WeightedRoundRobin::new();
        let list = InstanceList::new([inst(1, 100), inst(2, 0), inst(3, 300), inst(4, 50)]);
        let seq = picks(&lb, &list, 450 * 4);
        assert_eq!(tally(&seq, 4), [400, 0, 1200, 200]);
        let longest_run = seq
            .chunk_by(|a, b| a == b)
            .map(<[usize]>::len)
            .max()
            .unwrap();
        // 1,200 picks of one against 600 of the others: runs of three at most.
        assert!(longest_run <= 3, "picks bunch up: a run of {longest_run}");
        assert_eq!(lb.pick(&InstanceList::default(), None), None);
        assert_eq!(lb.pick(&InstanceList::new([inst(1, 0)]), None), None);
    }

    #[test]
    fn weighted_round_robin_keeps_shares_at_the_largest_weights() {
        // 2,000 instances of the largest weight and one just below it: the group of
        // 2,000 has a period of 2^64 / (2^32 * 2,000) units, which a clock counting
        // in 2^40ths of a second rounded to 0, so that it took every pick.
        let lb = WeightedRoundRobin::new();
        let list: InstanceList = (1..=2000)
            .map(|p| inst(p, u32::MAX))
            .chain([inst(3000, u32::MAX - 1)])
            .collect();
        let seq = picks(&lb, &list, 2001 * 3);
        let c = tally(&seq, 2001);
        assert_eq!(c[2000], 3, "the one of the other weight, once a cycle");
        assert!(c[..2000].iter().all(|&n| n == 3), "{:?}", &c[..10]);
    }

    #[test]
    fn weighted_round_robin_follows_changes_and_forgets_what_left() {
        let lb = WeightedRoundRobin::new();
        let abc = InstanceList::new([inst(1, 2), inst(2, 1), inst(3, 1)]);
        picks(&lb, &abc, 5);
        // One weight changed, one gone, one new: shares follow the new list.
        let new = abc
            .apply([
                Step::put(inst(4, 1)),
                Step::put(inst(3, 3)),
                Step::Remove(inst(2, 0).address),
            ])
            .unwrap();
        picks(&lb, &new, 6);
        let c = counts(&lb, &new, 600);
        assert_eq!(c, [200, 300, 100], "1, 3 and 4 in the list's order");
        // Many changes, groups made and emptied: the heap stays near the number of
        // groups, and the instances known near the list's size.
        let mut list = new;
        for p in 10..400u16 {
            list = list
                .apply([
                    Step::put(inst(p, u32::from(p))),
                    Step::Remove(inst(p - 1, 0).address),
                ])
                .unwrap();
            lb.pick(&list, None);
        }
        lb.state.with(&list, |d| {
            let d = d.lock().unwrap();
            assert!(d.heap.len() <= 2 * d.groups.len() + 17, "{}", d.heap.len());
            assert_eq!(d.weight_of.len(), list.len());
        });
    }
}
