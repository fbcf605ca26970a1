//! The allocator of a side's own slices: one lock-free free list per size class, and a
//! state per slice that says who holds it.
//!
//! Ownership is per direction: each side allocates only from the region it created and
//! lends slices to the peer through descriptors; the peer gives them back through the
//! release ring. The free lists and the slice states therefore live in the owner's
//! private memory, where the peer cannot corrupt them; what crosses the process boundary
//! is a slice index in a ring, checked here ([`Slices::reclaim`]) before it is reused: an
//! index out of range, or of a slice not currently lent, is a protocol violation.
//!
//! Each free list is a Treiber stack over the slice indices of its class: `next[i]` is
//! the slice after `i`, and the head is one `u64` holding the top index and a tag that
//! every successful update increments, so a pop that read `next[top]` before another
//! thread popped `top` and pushed it back (ABA) fails its compare-exchange and retries.

use crate::error::Violation;
use crate::sync::{AtomicU8, AtomicU32, AtomicU64, Ordering};

const NIL: u32 = u32::MAX;

fn pack(tag: u32, index: u32) -> u64 {
    (u64::from(tag) << 32) | u64::from(index)
}

fn unpack(head: u64) -> (u32, u32) {
    ((head >> 32) as u32, head as u32)
}

/// A Treiber stack of the indices `0..n`.
#[derive(Debug)]
pub(crate) struct FreeList {
    head: AtomicU64,
    next: Box<[AtomicU32]>,
}

impl FreeList {
    /// A list holding every index `0..n`, lowest on top.
    pub(crate) fn full(n: u32) -> FreeList {
        let next = (0..n)
            .map(|i| AtomicU32::new(if i + 1 < n { i + 1 } else { NIL }))
            .collect();
        FreeList {
            head: AtomicU64::new(pack(0, if n == 0 { NIL } else { 0 })),
            next,
        }
    }

    pub(crate) fn pop(&self) -> Option<u32> {
        let mut head = self.head.load(Ordering::Acquire);
        loop {
            let (tag, top) = unpack(head);
            if top == NIL {
                return None;
            }
            // `top` < n: only indices of this list are ever pushed (checked by the caller).
            let next = self.next[top as usize].load(Ordering::Relaxed);
            match self.head.compare_exchange_weak(
                head,
                pack(tag.wrapping_add(1), next),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(top),
                Err(now) => head = now,
            }
        }
    }

    /// Pushes `index`, which the caller owns exclusively (it is in no list).
    pub(crate) fn push(&self, index: u32) {
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            let (tag, top) = unpack(head);
            self.next[index as usize].store(top, Ordering::Relaxed);
            match self.head.compare_exchange_weak(
                head,
                pack(tag.wrapping_add(1), index),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }
}

const FREE: u8 = 0;
const LOCAL: u8 = 1;
const LENT: u8 = 2;

/// All slices of the owner's region: per class a free list, per slice a state.
#[derive(Debug)]
pub(crate) struct Slices {
    /// `(first global index, list)` per class, classes in layout order.
    lists: Vec<(u32, FreeList)>,
    state: Box<[AtomicU8]>,
}

impl Slices {
    /// Every slice free; `counts[c]` slices in class `c`, numbered globally in order.
    pub(crate) fn new(counts: &[u32]) -> Slices {
        let mut first = 0;
        let mut lists = Vec::with_capacity(counts.len());
        for &n in counts {
            lists.push((first, FreeList::full(n)));
            first += n;
        }
        let state = (0..first).map(|_| AtomicU8::new(FREE)).collect();
        Slices { lists, state }
    }

    /// Takes a free slice of `class` for this side to fill; its global index.
    pub(crate) fn alloc(&self, class: usize) -> Option<u32> {
        let (first, list) = &self.lists[class];
        let i = first + list.pop()?;
        let prev = self.state[i as usize].swap(LOCAL, Ordering::Relaxed);
        debug_assert_eq!(prev, FREE);
        Some(i)
    }

    /// A slice taken with [`alloc`](Self::alloc) is now the peer's to read.
    pub(crate) fn lend(&self, index: u32) {
        let prev = self.state[index as usize].swap(LENT, Ordering::Relaxed);
        debug_assert_eq!(prev, LOCAL);
    }

    /// A slice taken with [`alloc`](Self::alloc) and not lent goes back.
    pub(crate) fn free_local(&self, index: u32) {
        let prev = self.state[index as usize].swap(FREE, Ordering::Relaxed);
        debug_assert_eq!(prev, LOCAL);
        self.push(index);
    }

    /// The peer gives back slice `index` (read from shared memory: checked).
    pub(crate) fn reclaim(&self, index: u64) -> Result<(), Violation> {
        let i = u32::try_from(index)
            .ok()
            .filter(|&i| (i as usize) < self.state.len())
            .ok_or(Violation::Release("index out of range"))?;
        self.state[i as usize]
            .compare_exchange(LENT, FREE, Ordering::Relaxed, Ordering::Relaxed)
            .map_err(|_| Violation::Release("slice was not lent"))?;
        self.push(i);
        Ok(())
    }

    /// Takes back every lent slice (the session is over; the peer reads no more).
    pub(crate) fn reclaim_all(&self) {
        for (i, s) in self.state.iter().enumerate() {
            if s.compare_exchange(LENT, FREE, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                self.push(i as u32);
            }
        }
    }

    fn push(&self, index: u32) {
        // The class is the last one whose first index is at or below `index`.
        let (first, list) = self
            .lists
            .iter()
            .rev()
            .find(|(first, _)| *first <= index)
            .expect("index 0 belongs to the first class");
        list.push(index - first);
    }

    /// How many slices the peer holds now (a walk over all states: for stats and tests).
    pub(crate) fn lent(&self) -> usize {
        self.state
            .iter()
            .filter(|s| s.load(Ordering::Relaxed) == LENT)
            .count()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn pops_every_index_once_then_none() {
        let l = FreeList::full(5);
        let mut got: Vec<u32> = std::iter::from_fn(|| l.pop()).collect();
        got.sort();
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        assert_eq!(l.pop(), None);
        l.push(3);
        l.push(1);
        assert_eq!(l.pop(), Some(1));
        assert_eq!(l.pop(), Some(3));
        assert_eq!(l.pop(), None);
        assert_eq!(FreeList::full(0).pop(), None);
    }

    #[test]
    fn slices_track_who_holds_what() {
        let s = Slices::new(&[2, 1]);
        let a = s.alloc(0).unwrap();
        let b = s.alloc(0).unwrap();
        assert_eq!(s.alloc(0), None);
        let c = s.alloc(1).unwrap();
        assert_eq!(c, 2);
        s.lend(a);
        s.lend(c);
        assert_eq!(s.lent(), 2);
        // Only lent slices come back, once.
        assert_eq!(
            s.reclaim(u64::from(b)),
            Err(Violation::Release("slice was not lent"))
        );
        assert_eq!(s.reclaim(3), Err(Violation::Release("index out of range")));
        assert_eq!(
            s.reclaim(u64::MAX),
            Err(Violation::Release("index out of range"))
        );
        s.reclaim(u64::from(c)).unwrap();
        assert!(s.reclaim(u64::from(c)).is_err());
        assert_eq!(s.alloc(1), Some(2));
        s.free_local(b);
        s.reclaim(u64::from(a)).unwrap();
        let mut again = vec![s.alloc(0).unwrap(), s.alloc(0).unwrap()];
        again.sort();
        assert_eq!(again, vec![0, 1]);
        assert_eq!(s.lent(), 0);
    }

    #[test]
    fn threads_never_share_a_slice() {
        let s = std::sync::Arc::new(Slices::new(&[8]));
        let held: std::sync::Arc<Vec<AtomicU8>> =
            std::sync::Arc::new((0..8).map(|_| AtomicU8::new(0)).collect());
        // Miri interleaves the threads at random at every step: a tenth of the rounds
        // is enough for it, and takes 5 s instead of 46.
        let rounds = if cfg!(miri) { 200 } else { 2000 };
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (s, held) = (s.clone(), held.clone());
                std::thread::spawn(move || {
                    for _ in 0..rounds {
                        if let Some(i) = s.alloc(0) {
                            assert_eq!(held[i as usize].swap(1, Ordering::SeqCst), 0);
                            held[i as usize].store(0, Ordering::SeqCst);
                            s.lend(i);
                            s.reclaim(u64::from(i)).unwrap();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut all: Vec<u32> = std::iter::from_fn(|| s.alloc(0)).collect();
        all.sort();
        assert_eq!(all, (0..8).collect::<Vec<_>>());
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// Two threads pop and push concurrently while a third reclaims: no index is ever
    /// handed out twice, and all come back.
    #[test]
    fn loom_free_list_hands_out_each_slice_once() {
        loom::model(|| {
            let s = Arc::new(Slices::new(&[2]));
            let lent = s.alloc(0).unwrap();
            s.lend(lent);
            let workers: Vec<_> = (0..2)
                .map(|_| {
                    let s = s.clone();
                    loom::thread::spawn(move || {
                        let got = s.alloc(0);
                        if let Some(i) = got {
                            s.free_local(i);
                        }
                        got
                    })
                })
                .collect();
            s.reclaim(u64::from(lent)).unwrap();
            for w in workers {
                w.join().unwrap();
            }
            let a = s.alloc(0);
            let b = s.alloc(0);
            assert!(a.is_some() && b.is_some() && a != b);
            assert_eq!(s.alloc(0), None);
        });
    }

    /// The ABA case: a pop that read `next[top]` races a pop-pop-push of the same top.
    #[test]
    fn loom_free_list_aba() {
        loom::model(|| {
            let l = Arc::new(FreeList::full(3));
            let l2 = l.clone();
            let t = loom::thread::spawn(move || {
                let a = l2.pop();
                let b = l2.pop();
                if let Some(a) = a {
                    l2.push(a);
                }
                b
            });
            let mine = l.pop();
            let theirs = t.join().unwrap();
            let mut rest: Vec<u32> = std::iter::from_fn(|| l.pop()).collect();
            rest.extend(mine);
            rest.extend(theirs);
            rest.sort();
            assert_eq!(rest, vec![0, 1, 2]);
        });
    }
}
