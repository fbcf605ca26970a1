//! Round robin: each instance in turn ([`RoundRobin`]), or in turn in proportion to
//! its weight, spread out ([`WeightedRoundRobin`]).

use std::collections::HashMap;
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

/// A group's place in the order of picks: its next deadline, then the number of its
/// making (the group made first goes first on a tie).
type Key = (u128, u64);

/// The key of a leaf that holds no group: after every deadline.
const FREE: Key = (u128::MAX, u64::MAX);

/// The groups of instances by weight, and their deadlines in a winner tree.
///
/// The tree is a complete binary tree over `cap` leaves (a power of two), a group a
/// leaf: each inner node holds the leaf of the earlier key of its two children's, so
/// the root holds the group due first. A pick reads the root and, having moved that
/// group's deadline on, compares its way back up: one comparison a level, always the
/// same path, where a binary heap's sift down compared twice a level, and a pick no
/// longer looks its group up by weight (`cargo bench -p benches --bench balance`,
/// three alternating runs each: 40 -> 33 ns a pick among 10 instances, 60 -> 51 ns
/// among 10,000 of 100 weights).
#[derive(Debug, Default)]
struct Deadlines {
    /// The group at each leaf (`None`: a free leaf).
    groups: Vec<Option<Group>>,
    /// Each leaf's key ([`FREE`] for a free leaf).
    keys: Vec<Key>,
    /// The tree: `tree[cap + l]` is leaf `l`, `tree[n]` the earlier of
    /// `tree[2n]` and `tree[2n + 1]`, `tree[1]` the earliest; empty while `cap` is 0.
    tree: Vec<u32>,
    /// The free leaves.
    free: Vec<u32>,
    /// The leaf of each weight's group.
    leaf_of: HashMap<u32, u32, foldhash::fast::RandomState>,
    /// The weight each listed instance has here (to find its group when it changes).
    weight_of: HashMap<Address, u32, foldhash::fast::RandomState>,
    /// The virtual clock: the deadline of the last pick.
    now: u128,
    /// Groups made so far: each one's number, which also breaks ties.
    made: u64,
}

/// The instances of one weight, taken in turn.
#[derive(Debug, Default)]
struct Group {
    weight: u32,
    members: Dense,
    turn: usize,
    /// Its period: [`SCALE`] over its weight times its size (kept, not divided out
    /// on every pick).
    period: u128,
}

impl Deadlines {
    /// How many leaves the tree has.
    fn cap(&self) -> usize {
        self.keys.len()
    }

    /// Of the leaves `a` and `b`, the one due first.
    fn earlier(&self, a: u32, b: u32) -> u32 {
        if self.keys[b as usize] < self.keys[a as usize] {
            b
        } else {
            a
        }
    }

    /// Inner node `n` set again from its two children.
    fn settle(&mut self, n: usize) {
        self.tree[n] = self.earlier(self.tree[2 * n], self.tree[2 * n + 1]);
    }

    /// Brings the tree up to a new key at `leaf`: its path to the root, compared again.
    fn fix(&mut self, leaf: u32) {
        let mut n = (self.cap() + leaf as usize) / 2;
        while n >= 1 {
            self.settle(n);
            n /= 2;
        }
    }

    /// The tree made again over `cap` leaves, the groups in leaves `0..` in the order
    /// they were made (it grows when no leaf is free, and shrinks when under a
    /// quarter of its leaves hold a group, so that a pick's path follows the number
    /// of weights there are, not of those there were).
    fn remake(&mut self, cap: usize) {
        let mut live: Vec<(Key, Group)> = self
            .groups
            .drain(..)
            .zip(self.keys.drain(..))
            .filter_map(|(g, k)| g.map(|g| (k, g)))
            .collect();
        live.sort_unstable_by_key(|(k, _)| k.1);
        let cap = cap.max(live.len()).next_power_of_two();
        self.leaf_of.clear();
        for (leaf, (key, group)) in live.into_iter().enumerate() {
            self.leaf_of.insert(group.weight, leaf as u32);
            self.groups.push(Some(group));
            self.keys.push(key);
        }
        self.free = (self.groups.len() as u32..cap as u32).rev().collect();
        self.groups.resize_with(cap, || None);
        self.keys.resize(cap, FREE);
        self.tree = vec![0; 2 * cap];
        for l in 0..cap {
            self.tree[cap + l] = l as u32;
        }
        for n in (1..cap).rev() {
            self.settle(n);
        }
    }

    /// Lists `instance` (weight above 0) in the group of its weight; a new group's
    /// deadline is half its period after the clock.
    fn put(&mut self, instance: &Instance) {
        let w = instance.weight;
        self.weight_of.insert(instance.address.clone(), w);
        let leaf = match self.leaf_of.get(&w) {
            Some(&leaf) => leaf,
            None => {
                if self.free.is_empty() {
                    self.remake(2 * self.cap());
                }
                let Some(leaf) = self.free.pop() else {
                    return;
                };
                self.groups[leaf as usize] = Some(Group {
                    weight: w,
                    ..Group::default()
                });
                self.keys[leaf as usize] = (self.now + SCALE / u128::from(w) / 2, self.made);
                self.made += 1;
                self.leaf_of.insert(w, leaf);
                self.fix(leaf);
                leaf
            }
        };
        if let Some(group) = self.groups[leaf as usize].as_mut() {
            group.members.put(instance);
            group.period = SCALE / (u128::from(w) * group.members.len() as u128);
        }
    }

    /// Takes the instance at `address` out of its group.
    fn remove(&mut self, address: &Address) {
        let Some(w) = self.weight_of.remove(address) else {
            return;
        };
        let Some(&leaf) = self.leaf_of.get(&w) else {
            return;
        };
        let Some(group) = self.groups[leaf as usize].as_mut() else {
            return;
        };
        group.members.remove(address);
        if !group.members.is_empty() {
            group.period = SCALE / (u128::from(w) * group.members.len() as u128);
            return;
        }
        self.groups[leaf as usize] = None;
        self.keys[leaf as usize] = FREE;
        self.leaf_of.remove(&w);
        self.free.push(leaf);
        self.fix(leaf);
        if 4 * self.leaf_of.len() < self.cap() && self.cap() > 16 {
            self.remake(self.leaf_of.len());
        }
    }

    fn pick(&mut self) -> Option<Address> {
        let leaf = *self.tree.get(1)?;
        let group = self.groups[leaf as usize].as_mut()?;
        // The turn goes on from where it was when members come or go.
        if group.turn >= group.members.len() {
            group.turn = 0;
        }
        let member = group.members.get(group.turn);
        group.turn += 1;
        let key = &mut self.keys[leaf as usize];
        self.now = key.0;
        key.0 += group.period;
        let address = member.address.clone();
        self.fix(leaf);
        Some(address)
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
        for (group, key) in d.groups.iter().zip(d.keys.iter_mut()) {
            if let Some(g) = group {
                key.0 = g.period / 2;
            }
        }
        d.remake(d.cap());
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
    fn weighted_round_robin_tree_grows_and_shrinks_with_the_weights() {
        let lb = WeightedRoundRobin::new();
        // Weights 1 to 100, a group each: over a cycle of 5,050 picks each instance
        // is picked as many times as its weight.
        let list: InstanceList = (1..=100).map(|p| inst(p, u32::from(p))).collect();
        let c = counts(&lb, &list, 5050);
        assert!(c.iter().enumerate().all(|(i, &n)| n == i + 1), "{c:?}");
        lb.state
            .with(&list, |d| assert_eq!(d.lock().unwrap().cap(), 128));
        // All but two leave, one by one: the tree shrinks as its groups go, and the
        // two left share by weight.
        let mut two = list;
        for p in 3..=100 {
            two = two.apply([Step::Remove(inst(p, 0).address)]).unwrap();
            lb.pick(&two, None);
        }
        let c = counts(&lb, &two, 300);
        assert_eq!(c, [100, 200]);
        lb.state
            .with(&two, |d| assert!(d.lock().unwrap().cap() <= 16));
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
        // Many changes, groups made and emptied: the tree stays near the number of
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
            assert!(d.cap() <= 4 * d.leaf_of.len() + 16, "{}", d.cap());
            assert_eq!(d.weight_of.len(), list.len());
        });
    }
}
