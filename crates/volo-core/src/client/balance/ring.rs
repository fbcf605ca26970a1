//! The ring of [`ConsistentHash`](super::ConsistentHash): every instance's points in
//! one flat table, ordered by hash, so that finding a key's point reads one or two
//! cache lines of it and an instance that changes moves only its own points.
//!
//! The table is an ordered linear-probing table (Amble and Knuth's ordered hash
//! table): a point of hash `h` lives at its home slot `h * homes / 2^64` or, when
//! that is taken, in the run of taken slots after it, and the taken slots read left
//! to right are in the order of their hashes. A point with a hash at or above a
//! key's then lives at or after the key's home slot, so the first point at or after
//! a key is the first taken slot from the key's home on whose hash is not below the
//! key's (or, past the last slot, the first point of the table: the ring wraps). The
//! table keeps about four slots for three points, so runs are short; it is made
//! again, larger or smaller, when the points outgrow or shrink well below it.
//!
//! A balanced tree of the same points (the ring before) costs a pointer chase per
//! level, each a miss in the caches once the ring is larger than they are (a million
//! points for 10,000 instances of weight 100): a pick cost about 10 times as much at
//! 10,000 instances as at 10. Here it is one miss.

use std::collections::HashMap;
use std::sync::Arc;

use super::Instance;
use super::derived::Member;
use crate::context::Address;

/// Points on the ring per 100 of weight.
const POINTS_PER_100: u64 = 100;

/// Slots past the last home slot, for the run that may follow it.
const TAIL: usize = 64;

/// The fewest home slots a table has.
const MIN_HOMES: usize = 16;

/// A member index no member has: the slot is free.
const FREE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    hash: u64,
    member: u32,
}

const EMPTY: Slot = Slot {
    hash: 0,
    member: FREE,
};

/// The points of a list's instances, and the instances they belong to.
#[derive(Debug)]
pub(super) struct Ring {
    slots: Vec<Slot>,
    /// The slots points have their homes in (the rest is the tail).
    homes: usize,
    /// Points in the table.
    points: usize,
    /// The instances with points, by the index their points carry; `None` once one
    /// leaves, until a new one takes its index.
    members: Vec<Option<Member>>,
    free: Vec<u32>,
    index: HashMap<Address, u32, foldhash::fast::RandomState>,
}

impl Default for Ring {
    fn default() -> Self {
        Ring {
            slots: vec![EMPTY; MIN_HOMES + TAIL],
            homes: MIN_HOMES,
            points: 0,
            members: Vec::new(),
            free: Vec::new(),
            index: HashMap::default(),
        }
    }
}

/// How many points an instance of weight `weight` has.
fn points_for(weight: u32) -> u64 {
    (u64::from(weight) * POINTS_PER_100).div_ceil(100)
}

/// The hashes of the points of the instance at `address` of weight `weight`: from its
/// address as text (`10.0.0.1:9000`, `unix:/run/echo.sock`) by a function fixed here,
/// not by the standard library's hasher (which may change between Rust releases), so
/// that clients built apart put an instance's points at the same places.
fn points_of(address: &Address, weight: u32) -> impl Iterator<Item = u64> {
    let n = points_for(weight);
    // FNV-1a over the text, then each point's number mixed in.
    let base = address
        .to_string()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    (0..n).map(move |v| super::mix(base.wrapping_add(super::mix(v))))
}

/// The home slot of `hash` in a table of `homes` home slots.
fn home(hash: u64, homes: usize) -> usize {
    ((u128::from(hash) * homes as u128) >> 64) as usize
}

impl Ring {
    /// The address whose point is the first at or after `hash`, going round.
    pub(super) fn owner(&self, hash: u64) -> Option<&Address> {
        if self.points == 0 {
            return None;
        }
        let from = home(hash, self.homes);
        let slot = self.slots[from..]
            .iter()
            .find(|s| s.member != FREE && s.hash >= hash)
            .or_else(|| self.slots.iter().find(|s| s.member != FREE))?;
        self.members[slot.member as usize]
            .as_ref()
            .map(|m| &m.address)
    }

    /// Lists `instance` (in place of the one at its address, if any).
    pub(super) fn put(&mut self, instance: &Arc<Instance>) {
        self.remove(&instance.address);
        if instance.weight == 0 {
            return;
        }
        let member = Member {
            address: instance.address.clone(),
            weight: instance.weight,
        };
        let at = match self.free.pop() {
            Some(at) => {
                self.members[at as usize] = Some(member);
                at
            }
            None => {
                self.members.push(Some(member));
                (self.members.len() - 1) as u32
            }
        };
        self.index.insert(instance.address.clone(), at);
        self.fit(self.points + points_for(instance.weight) as usize);
        for hash in points_of(&instance.address, instance.weight) {
            self.insert(Slot { hash, member: at });
        }
    }

    /// Takes the instance at `address` out, with its points.
    pub(super) fn remove(&mut self, address: &Address) {
        let Some(at) = self.index.remove(address) else {
            return;
        };
        let Some(member) = self.members[at as usize].take() else {
            return;
        };
        for hash in points_of(&member.address, member.weight) {
            self.delete(Slot { hash, member: at });
        }
        self.free.push(at);
        self.fit(self.points);
    }

    /// Puts `slot` after the points of hashes up to its own, moving the run after
    /// it on by one.
    fn insert(&mut self, slot: Slot) {
        loop {
            let mut at = home(slot.hash, self.homes);
            while at < self.slots.len()
                && self.slots[at].member != FREE
                && self.slots[at].hash <= slot.hash
            {
                at += 1;
            }
            let Some(free) = self.slots[at..].iter().position(|s| s.member == FREE) else {
                // The run reaches the end of the tail: a larger table.
                self.remake(self.homes * 2);
                continue;
            };
            self.slots.copy_within(at..at + free, at + 1);
            self.slots[at] = slot;
            self.points += 1;
            return;
        }
    }

    /// Takes `slot` out, moving back the points after it that may move towards
    /// their homes.
    fn delete(&mut self, slot: Slot) {
        let from = home(slot.hash, self.homes);
        let Some(mut at) = self.slots[from..]
            .iter()
            .take_while(|s| s.member != FREE && s.hash <= slot.hash)
            .position(|s| *s == slot)
            .map(|p| from + p)
        else {
            return;
        };
        self.points -= 1;
        loop {
            let next = at + 1;
            match self.slots.get(next) {
                Some(s) if s.member != FREE && home(s.hash, self.homes) <= at => {
                    self.slots[at] = *s;
                    at = next;
                }
                _ => break,
            }
        }
        self.slots[at] = EMPTY;
    }

    /// Makes the table again when `points` would fill more than 7 in 8 of its home
    /// slots, or fewer than 1 in 4 (a table of four home slots for three points).
    fn fit(&mut self, points: usize) {
        let homes = self.homes;
        if points * 8 > homes * 7 || (points * 4 < homes && homes > MIN_HOMES) {
            self.remake((points * 4 / 3).max(MIN_HOMES));
        }
    }

    /// The same points in a table of `homes` home slots (or more, when a run would
    /// not fit in the tail).
    fn remake(&mut self, mut homes: usize) {
        let points: Vec<Slot> = self
            .slots
            .iter()
            .filter(|s| s.member != FREE)
            .copied()
            .collect();
        'again: loop {
            let mut slots = vec![EMPTY; homes + TAIL];
            let mut next = 0;
            for &p in &points {
                let at = home(p.hash, homes).max(next);
                if at >= slots.len() {
                    homes *= 2;
                    continue 'again;
                }
                slots[at] = p;
                next = at + 1;
            }
            self.slots = slots;
            self.homes = homes;
            return;
        }
    }

    /// How many points the ring has (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.points
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::random::Xorshift;
    use crate::registry::inst;

    /// The ring as a sorted map of every point, searched the obvious way.
    #[derive(Default)]
    struct Model {
        points: BTreeMap<(u64, u16), Address>,
    }

    impl Model {
        fn put(&mut self, i: &Instance) {
            self.remove(&i.address);
            for h in points_of(&i.address, i.weight) {
                self.points.insert((h, port(&i.address)), i.address.clone());
            }
        }

        fn remove(&mut self, a: &Address) {
            self.points.retain(|_, b| b != a);
        }

        fn owner(&self, hash: u64) -> Option<&Address> {
            self.points
                .range((hash, 0)..)
                .next()
                .or_else(|| self.points.iter().next())
                .map(|(_, a)| a)
        }
    }

    fn port(a: &Address) -> u16 {
        match a {
            Address::Tcp(s) => s.port(),
            _ => 0,
        }
    }

    #[test]
    fn the_ring_finds_the_point_a_sorted_map_finds_through_every_change() {
        let rng = Xorshift::new(44);
        let mut ring = Ring::default();
        let mut model = Model::default();
        // Grow to 300 instances, change weights, then shrink to a handful: the table
        // is made again both ways on the way.
        for round in 0..3000u32 {
            let port = 1 + (rng.next() % 300) as u16;
            let shrinking = round >= 2000;
            if shrinking || rng.next().is_multiple_of(4) {
                let a = inst(port, 0).address;
                ring.remove(&a);
                model.remove(&a);
            } else {
                let i = Arc::new(inst(port, 1 + (rng.next() % 150) as u32));
                ring.put(&i);
                model.put(&i);
            }
            assert_eq!(ring.len(), model.points.len(), "round {round}");
            for _ in 0..20 {
                let h = rng.next();
                assert_eq!(ring.owner(h), model.owner(h), "round {round}, hash {h}");
            }
            // Keys at and next to the points themselves.
            if let Some((&(h, _), _)) = model.points.iter().nth(round as usize % 7) {
                for k in [h.wrapping_sub(1), h, h.wrapping_add(1)] {
                    assert_eq!(ring.owner(k), model.owner(k));
                }
            }
        }
        assert!(ring.homes <= (ring.points * 4).max(MIN_HOMES), "shrunk");
        assert_eq!(ring.index.len(), ring.members.iter().flatten().count());
    }

    /// Computed apart from this code (FNV-1a of `10.0.0.1:9000`, MurmurHash3's
    /// finalizer of it plus the finalizer of 0, 1 and 2).
    const POINTS_OF_10_0_0_1: [u64; 3] = [
        0x4ee5_b727_da2a_a88c,
        0xb022_3d9d_8c30_c63d,
        0xea65_b9a7_b7f8_d206,
    ];

    /// The points are a fixed function of the address: these values are what every
    /// build gives, whatever its Rust release (a change here moves keys between
    /// instances in fleets of mixed clients).
    #[test]
    fn points_are_fixed_by_the_address_text() {
        let a = Address::Tcp(([10, 0, 0, 1], 9000).into());
        let got: Vec<u64> = points_of(&a, 3).collect();
        assert_eq!(got, POINTS_OF_10_0_0_1);
        assert_eq!(points_of(&a, 100).count(), 100);
        assert_eq!(points_of(&a, 150).count(), 150);
    }

    #[test]
    fn a_point_past_the_last_home_slot_and_a_key_past_the_last_point_wrap() {
        let mut ring = Ring::default();
        assert_eq!(ring.owner(7), None);
        // Points of hash near the top crowd into the tail.
        let (a, b) = (inst(1, 0).address, inst(2, 0).address);
        ring.members = vec![
            Some(Member {
                address: a.clone(),
                weight: 1,
            }),
            Some(Member {
                address: b.clone(),
                weight: 1,
            }),
        ];
        for k in 0..10u64 {
            ring.insert(Slot {
                hash: u64::MAX - 20 + k,
                member: 1,
            });
        }
        ring.insert(Slot { hash: 5, member: 0 });
        assert_eq!(ring.owner(6), Some(&b));
        assert_eq!(ring.owner(u64::MAX - 20), Some(&b));
        assert_eq!(
            ring.owner(u64::MAX - 10),
            Some(&a),
            "past the last: the first"
        );
        assert_eq!(ring.owner(u64::MAX), Some(&a));
        assert_eq!(ring.owner(0), Some(&a));
        assert_eq!(ring.owner(5), Some(&a));
        for k in 0..10u64 {
            ring.delete(Slot {
                hash: u64::MAX - 20 + k,
                member: 1,
            });
        }
        assert_eq!(ring.owner(u64::MAX), Some(&a));
        assert_eq!(ring.len(), 1);
    }
}
