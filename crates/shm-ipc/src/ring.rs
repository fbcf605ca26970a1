//! A single-producer single-consumer ring of fixed-size entries in shared memory.
//!
//! The producer owns the tail, the consumer the head; each keeps its own index in
//! private memory (`tail_local`/`head_local`) and only *stores* it to the shared word,
//! never trusting what it reads back there, because the other side can write anything
//! into the shared region. The other side's index is read once per call, checked
//! (`tail - head` must be at most the capacity, in wrapping arithmetic) and used only
//! through a mask, so a lying index yields [`Violation::RingIndex`] or garbage entries
//! (which [`Desc::decode`](crate::desc::Desc::decode) rejects), never an access outside
//! `slots`.
//!
//! Ordering: an entry's words are stored (relaxed) before the tail (release); the
//! consumer loads the tail (acquire) before the words (relaxed). The head goes the other
//! way, so the producer never overwrites a slot still being read.

use crate::error::Violation;
use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// A view of one ring: `W` words per entry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RingRef<'a, const W: usize> {
    name: &'static str,
    head: &'a AtomicU32,
    tail: &'a AtomicU32,
    slots: &'a [AtomicU64],
    cap: u32,
}

impl<'a, const W: usize> RingRef<'a, W> {
    /// `slots` holds a power of two entries of `W` words.
    pub(crate) fn new(
        name: &'static str,
        head: &'a AtomicU32,
        tail: &'a AtomicU32,
        slots: &'a [AtomicU64],
    ) -> Self {
        let cap = (slots.len() / W) as u32;
        assert!(
            cap.is_power_of_two() && slots.len() == cap as usize * W,
            "ring slots must be a power of two entries"
        );
        RingRef {
            name,
            head,
            tail,
            slots,
            cap,
        }
    }

    fn entry(&self, index: u32) -> &'a [AtomicU64] {
        let at = (index & (self.cap - 1)) as usize * W;
        &self.slots[at..at + W]
    }

    /// Entries the producer may still push. `tail_local` must be the producer's index as
    /// it is now (read under the producer's lock, not a copy taken earlier): a stale one
    /// can be overtaken by the consumer and look like a lie.
    pub(crate) fn room(&self, tail_local: u32) -> Result<u32, Violation> {
        let used = tail_local.wrapping_sub(self.head.load(Ordering::Acquire));
        if used > self.cap {
            return Err(Violation::RingIndex {
                ring: self.name,
                what: "the consumer's head is not within a ring of our tail",
            });
        }
        Ok(self.cap - used)
    }

    /// Pushes one entry; `Ok(false)` when the ring is full.
    pub(crate) fn push(&self, tail_local: &mut u32, entry: [u64; W]) -> Result<bool, Violation> {
        if self.room(*tail_local)? == 0 {
            return Ok(false);
        }
        for (slot, word) in self.entry(*tail_local).iter().zip(entry) {
            slot.store(word, Ordering::Relaxed);
        }
        *tail_local = tail_local.wrapping_add(1);
        self.tail.store(*tail_local, Ordering::Release);
        Ok(true)
    }

    /// Stores any tail (tests: a lying producer).
    #[cfg(test)]
    pub(crate) fn raw_tail(&self, tail: u32) {
        self.tail.store(tail, Ordering::Release);
    }

    /// Stores any head (tests: a lying consumer).
    #[cfg(test)]
    pub(crate) fn raw_head(&self, head: u32) {
        self.head.store(head, Ordering::Release);
    }

    /// Entries waiting for the consumer. `head_local` must be current, as for
    /// [`room`](Self::room).
    pub(crate) fn pending(&self, head_local: u32) -> Result<u32, Violation> {
        let avail = self.tail.load(Ordering::Acquire).wrapping_sub(head_local);
        if avail > self.cap {
            return Err(Violation::RingIndex {
                ring: self.name,
                what: "the producer's tail is not within a ring of our head",
            });
        }
        Ok(avail)
    }

    /// Pops one entry, copied out into locals; `Ok(None)` when the ring is empty.
    pub(crate) fn pop(&self, head_local: &mut u32) -> Result<Option<[u64; W]>, Violation> {
        if self.pending(*head_local)? == 0 {
            return Ok(None);
        }
        let mut out = [0u64; W];
        for (word, slot) in out.iter_mut().zip(self.entry(*head_local)) {
            *word = slot.load(Ordering::Relaxed);
        }
        *head_local = head_local.wrapping_add(1);
        self.head.store(*head_local, Ordering::Release);
        Ok(Some(out))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    struct Mem {
        head: AtomicU32,
        tail: AtomicU32,
        slots: Vec<AtomicU64>,
    }

    fn mem(cap: usize, w: usize) -> Mem {
        Mem {
            head: AtomicU32::new(0),
            tail: AtomicU32::new(0),
            slots: (0..cap * w).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    #[test]
    fn fifo_wraps_around_u32() {
        let m = mem(4, 2);
        let r = RingRef::<2>::new("test", &m.head, &m.tail, &m.slots);
        // Start near the wrap of the indices.
        let (mut t, mut h) = (u32::MAX - 5, u32::MAX - 5);
        m.head.store(h, Ordering::Relaxed);
        m.tail.store(t, Ordering::Relaxed);
        let mut next = 0u64;
        let mut expect = 0u64;
        for round in 0..20u64 {
            let n = round % 5;
            for _ in 0..n {
                if r.push(&mut t, [next, !next]).unwrap() {
                    next += 1;
                }
            }
            assert!(r.room(t).unwrap() <= 4);
            while let Some(e) = r.pop(&mut h).unwrap() {
                assert_eq!(e, [expect, !expect]);
                expect += 1;
            }
        }
        assert_eq!(next, expect);
        assert!(next > 10);
    }

    #[test]
    fn full_ring_refuses() {
        let m = mem(2, 1);
        let r = RingRef::<1>::new("test", &m.head, &m.tail, &m.slots);
        let mut t = 0;
        assert!(r.push(&mut t, [1]).unwrap());
        assert!(r.push(&mut t, [2]).unwrap());
        assert!(!r.push(&mut t, [3]).unwrap());
        assert_eq!(r.room(t).unwrap(), 0);
    }

    #[test]
    fn lying_indices_are_errors() {
        let m = mem(4, 1);
        let r = RingRef::<1>::new("test", &m.head, &m.tail, &m.slots);
        // Consumer side: the peer claims 5 entries in a ring of 4.
        m.tail.store(5, Ordering::Relaxed);
        assert!(matches!(r.pop(&mut 0), Err(Violation::RingIndex { .. })));
        // ...or a tail behind our head.
        m.tail.store(1, Ordering::Relaxed);
        assert!(matches!(r.pop(&mut 2), Err(Violation::RingIndex { .. })));
        // Producer side: the peer moves the head past our tail.
        m.head.store(3, Ordering::Relaxed);
        assert!(matches!(
            r.push(&mut 1, [0]),
            Err(Violation::RingIndex { .. })
        ));
        // The shared tail word is not what the producer trusts.
        m.head.store(0, Ordering::Relaxed);
        m.tail.store(1000, Ordering::Relaxed);
        let mut t = 0;
        assert!(r.push(&mut t, [9]).unwrap());
        assert_eq!(m.tail.load(Ordering::Relaxed), 1);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    struct Mem {
        head: AtomicU32,
        tail: AtomicU32,
        slots: Vec<AtomicU64>,
    }

    #[test]
    fn loom_ring_spsc_delivers_in_order() {
        loom::model(|| {
            let m = Arc::new(Mem {
                head: AtomicU32::new(0),
                tail: AtomicU32::new(0),
                slots: (0..4).map(|_| AtomicU64::new(0)).collect(),
            });
            let p = m.clone();
            let producer = loom::thread::spawn(move || {
                let r = RingRef::<2>::new("test", &p.head, &p.tail, &p.slots);
                let mut t = 0;
                let mut i = 0u64;
                while i < 3 {
                    if r.push(&mut t, [i, i * 10]).unwrap() {
                        i += 1;
                    } else {
                        loom::thread::yield_now();
                    }
                }
            });
            let r = RingRef::<2>::new("test", &m.head, &m.tail, &m.slots);
            let mut h = 0;
            let mut want = 0u64;
            while want < 3 {
                match r.pop(&mut h).unwrap() {
                    Some(e) => {
                        assert_eq!(e, [want, want * 10]);
                        want += 1;
                    }
                    None => loom::thread::yield_now(),
                }
            }
            producer.join().unwrap();
        });
    }
}
