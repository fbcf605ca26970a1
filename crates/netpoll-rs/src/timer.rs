//! A poller's deadlines: one heap for all its connections, so a server needs no timer
//! (and no task) per connection to end the idle ones.
//!
//! Each connection has at most one deadline ([`Io::wake_at`](crate::Io::wake_at)), which
//! it may move on every call of its handler. Moving an entry inside a heap is costly, so
//! entries are never moved: the heap is invalidated lazily. For each key it holds, the
//! structure records the instant of the one entry that counts (`scheduled`); any other
//! entry of that key is stale and is dropped when it comes to the top. A deadline that
//! moves later pushes nothing: the entry already there comes due first, and its owner
//! then finds its deadline still ahead and schedules it again ([`Due::Later`]). Only a
//! deadline earlier than the scheduled one pushes an entry.
//!
//! Bound: `scheduled` holds at most one instant per key (a connection with a deadline
//! pending), and whenever stale entries outnumber those by more than [`SLACK`], the heap
//! is rebuilt from `scheduled`. So the heap never holds more than twice the keys plus
//! `SLACK` entries, however often deadlines move.
//!
//! Nothing here reads a clock: the caller says what time it is.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::Hash;
use std::time::Instant;

/// Stale entries tolerated beyond one per key before the heap is rebuilt.
pub(crate) const SLACK: usize = 64;

/// Deadlines of keys (a poller's connection tokens), earliest first.
#[derive(Debug)]
pub(crate) struct Timers<K> {
    heap: BinaryHeap<Reverse<(Instant, K)>>,
    /// Per key, the instant of its entry that counts.
    scheduled: HashMap<K, Instant>,
}

impl<K> Default for Timers<K> {
    fn default() -> Self {
        Timers {
            heap: BinaryHeap::new(),
            scheduled: HashMap::new(),
        }
    }
}

impl<K: Copy + Eq + Hash + Ord> Timers<K> {
    /// Makes sure `key` comes due no later than `at`: pushes an entry unless one at or
    /// before `at` is already scheduled for it. Returns whether `at` is now the earliest
    /// deadline of all (a poller waiting for a later one must wake to wait less).
    pub(crate) fn schedule(&mut self, key: K, at: Instant) -> bool {
        if self.scheduled.get(&key).is_some_and(|&s| s <= at) {
            return false;
        }
        self.scheduled.insert(key, at);
        self.heap.push(Reverse((at, key)));
        if self.heap.len() > 2 * self.scheduled.len() + SLACK {
            self.compact();
        }
        self.next_deadline() == Some(at)
    }

    /// Forgets `key` (its connection closed): it never comes due.
    pub(crate) fn remove(&mut self, key: K) {
        self.scheduled.remove(&key);
    }

    /// The earliest deadline of all, once stale entries on top are dropped.
    pub(crate) fn next_deadline(&mut self) -> Option<Instant> {
        while let Some(&Reverse((at, key))) = self.heap.peek() {
            if self.is_live(at, key) {
                return Some(at);
            }
            self.heap.pop();
        }
        None
    }

    /// The next key whose scheduled entry is at or before `now`, which is then no longer
    /// scheduled (the key schedules again if it still has a deadline).
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<K> {
        while let Some(&Reverse((at, key))) = self.heap.peek() {
            if at > now {
                return None;
            }
            self.heap.pop();
            if self.is_live(at, key) {
                self.scheduled.remove(&key);
                return Some(key);
            }
        }
        None
    }

    fn is_live(&self, at: Instant, key: K) -> bool {
        self.scheduled.get(&key) == Some(&at)
    }

    /// Rebuilds the heap from the entries that count, dropping every stale one.
    fn compact(&mut self) {
        let Timers { heap, scheduled } = self;
        heap.clear();
        heap.extend(scheduled.iter().map(|(&key, &at)| Reverse((at, key))));
    }

    /// Entries in the heap, stale ones included.
    #[cfg(test)]
    pub(crate) fn heap_len(&self) -> usize {
        self.heap.len()
    }
}

/// What a key that came due does with the deadline its owner holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Due {
    /// The deadline has passed: clear it and call the owner's timer.
    Fire,
    /// The deadline moved later: schedule it again, at this instant.
    Later(Instant),
    /// The deadline was cleared: nothing to do.
    Cancelled,
}

/// Whether a key that came due at `now` fires, given the owner's current `deadline`.
pub(crate) fn due(deadline: Option<Instant>, now: Instant) -> Due {
    match deadline {
        None => Due::Cancelled,
        Some(at) if at > now => Due::Later(at),
        Some(_) => Due::Fire,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Every key that is due at `now`, in order.
    fn drain(t: &mut Timers<u32>, now: Instant) -> Vec<u32> {
        std::iter::from_fn(|| t.pop_due(now)).collect()
    }

    #[test]
    fn a_deadline_comes_due_at_its_instant_not_before() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        assert!(t.schedule(1, t0 + ms(50)));
        assert_eq!(t.next_deadline(), Some(t0 + ms(50)));
        assert_eq!(drain(&mut t, t0 + ms(49)), [] as [u32; 0]);
        assert_eq!(drain(&mut t, t0 + ms(50)), [1]);
        assert_eq!(drain(&mut t, t0 + ms(1000)), [] as [u32; 0], "once only");
        assert_eq!(t.next_deadline(), None);
    }

    #[test]
    fn keys_come_due_earliest_first() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        assert!(t.schedule(3, t0 + ms(30)));
        assert!(!t.schedule(4, t0 + ms(40)), "not the earliest");
        assert!(t.schedule(1, t0 + ms(10)));
        assert!(!t.schedule(2, t0 + ms(20)));
        assert_eq!(t.next_deadline(), Some(t0 + ms(10)));
        assert_eq!(drain(&mut t, t0 + ms(25)), [1, 2]);
        assert_eq!(t.next_deadline(), Some(t0 + ms(30)));
        assert_eq!(drain(&mut t, t0 + ms(40)), [3, 4]);
    }

    #[test]
    fn an_earlier_deadline_comes_due_at_its_own_instant() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        t.schedule(1, t0 + ms(100));
        assert!(t.schedule(1, t0 + ms(20)));
        assert_eq!(t.next_deadline(), Some(t0 + ms(20)));
        assert_eq!(drain(&mut t, t0 + ms(20)), [1]);
        assert_eq!(
            drain(&mut t, t0 + ms(100)),
            [] as [u32; 0],
            "the replaced entry is stale"
        );
        assert_eq!(t.heap_len(), 0);
    }

    #[test]
    fn a_later_deadline_pushes_nothing() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        t.schedule(1, t0 + ms(10));
        for i in 0..1000 {
            assert!(!t.schedule(1, t0 + ms(11 + i)));
        }
        assert_eq!(t.heap_len(), 1);
        // The entry there comes due first; the owner then finds `Later` and schedules
        // its deadline again.
        assert_eq!(drain(&mut t, t0 + ms(10)), [1]);
        assert_eq!(
            due(Some(t0 + ms(1010)), t0 + ms(10)),
            Due::Later(t0 + ms(1010))
        );
        t.schedule(1, t0 + ms(1010));
        assert_eq!(drain(&mut t, t0 + ms(1009)), [] as [u32; 0]);
        assert_eq!(drain(&mut t, t0 + ms(1010)), [1]);
    }

    #[test]
    fn deadlines_moved_earlier_again_and_again_keep_the_heap_bounded() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        t.schedule(7, t0 + ms(1_000_000));
        for i in 1..100_000 {
            t.schedule(7, t0 + ms(1_000_000 - i * 10));
            assert!(t.heap_len() <= 2 + SLACK, "{} entries", t.heap_len());
        }
        // Many keys, each moved earlier many times.
        for key in 0..100u32 {
            for i in 0..100 {
                t.schedule(key, t0 + ms(500_000 - i));
                assert!(t.heap_len() <= 2 * 100 + SLACK);
            }
        }
        let fired = drain(&mut t, t0 + ms(10_000_000));
        assert_eq!(fired.len(), 100, "each key once: {fired:?}");
        assert_eq!(t.heap_len(), 0);
    }

    #[test]
    fn a_removed_key_never_comes_due() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        t.schedule(1, t0 + ms(10));
        t.schedule(2, t0 + ms(20));
        t.remove(1);
        assert_eq!(t.next_deadline(), Some(t0 + ms(20)), "1's entry is dropped");
        assert_eq!(drain(&mut t, t0 + ms(100)), [2]);
    }

    #[test]
    fn a_key_that_came_due_can_be_scheduled_again() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        t.schedule(1, t0 + ms(10));
        t.schedule(1, t0 + ms(5));
        assert_eq!(drain(&mut t, t0 + ms(5)), [1]);
        // Again at the instant of its stale entry: it comes due once, not twice.
        t.schedule(1, t0 + ms(10));
        assert_eq!(drain(&mut t, t0 + ms(10)), [1]);
        assert_eq!(t.heap_len(), 0);
    }

    #[test]
    fn a_due_key_fires_only_if_its_deadline_has_passed() {
        let t0 = Instant::now();
        assert_eq!(due(None, t0), Due::Cancelled);
        assert_eq!(due(Some(t0), t0), Due::Fire);
        assert_eq!(due(Some(t0), t0 + ms(1)), Due::Fire);
        assert_eq!(due(Some(t0 + ms(1)), t0), Due::Later(t0 + ms(1)));
    }
}
