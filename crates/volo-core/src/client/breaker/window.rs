//! Counts of successes and failures over a sliding span of time, in a fixed ring of
//! buckets: memory is the same at ten calls a second or a million, and time is an
//! argument (no clock is read here), so tests move it by hand.

use std::ops::{AddAssign, SubAssign};
use std::time::{Duration, Instant};

/// Successes and failures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) successes: u64,
    pub(crate) failures: u64,
}

impl Counts {
    /// Successes and failures together.
    pub(crate) fn total(&self) -> u64 {
        self.successes + self.failures
    }
}

impl AddAssign for Counts {
    fn add_assign(&mut self, other: Counts) {
        self.successes += other.successes;
        self.failures += other.failures;
    }
}

impl SubAssign for Counts {
    fn sub_assign(&mut self, other: Counts) {
        self.successes -= other.successes;
        self.failures -= other.failures;
    }
}

/// The outcomes of the last `span` of time, in `buckets` buckets of `span / buckets`.
///
/// Time is cut into bucket-long slots counted from the window's creation; the ring holds
/// the newest slot (the one `now` falls in, partly elapsed) and the `buckets - 1` before
/// it, so a sample stops counting between `span - span / buckets` and `span` after it
/// was recorded. More buckets make that edge finer at the cost of a few bytes each.
///
/// An instant older than the newest slot (callers read the clock before taking the lock
/// that guards the window, so two threads may arrive out of order) counts in the newest
/// slot: time never moves the window back.
#[derive(Debug)]
pub(crate) struct Window {
    buckets: Box<[Counts]>,
    /// Length of a slot in nanoseconds (at least 1).
    slot: u64,
    /// Where slot 0 starts.
    origin: Instant,
    /// The slot number of the newest bucket.
    head: u64,
    /// Its bucket (`head` modulo the bucket count, kept: a division per call costs
    /// more than the rest of a record).
    head_at: usize,
    /// Where the slot after `head` starts: until then, an instant falls in the newest
    /// bucket and `advance` has nothing to do (no division on the common path).
    next: Instant,
    /// The sum of the buckets.
    total: Counts,
}

impl Window {
    /// A window of `span` in `buckets` buckets (at least one), starting empty at `now`.
    pub(crate) fn new(span: Duration, buckets: u32, now: Instant) -> Self {
        let n = buckets.max(1);
        let slot = u64::try_from(span.as_nanos() / u128::from(n))
            .unwrap_or(u64::MAX)
            .max(1);
        Window {
            buckets: vec![Counts::default(); n as usize].into_boxed_slice(),
            slot,
            origin: now,
            head: 0,
            head_at: 0,
            next: Self::slot_start(now, slot, 1),
            total: Counts::default(),
        }
    }

    /// Counts one outcome at `now`.
    pub(crate) fn record(&mut self, now: Instant, failed: bool) {
        self.advance(now);
        let at = self.head_at;
        let one = if failed {
            Counts {
                successes: 0,
                failures: 1,
            }
        } else {
            Counts {
                successes: 1,
                failures: 0,
            }
        };
        self.buckets[at] += one;
        self.total += one;
    }

    /// Whether a failure is counted, as of the last record or count.
    pub(crate) fn has_failures(&self) -> bool {
        self.total.failures > 0
    }

    /// The outcomes still inside the window at `now`.
    pub(crate) fn counts(&mut self, now: Instant) -> Counts {
        self.advance(now);
        self.total
    }

    /// Forgets every outcome.
    pub(crate) fn clear(&mut self) {
        self.buckets.fill(Counts::default());
        self.total = Counts::default();
    }

    fn index(&self, slot: u64) -> usize {
        (slot % self.buckets.len() as u64) as usize
    }

    /// Moves the newest slot to the one `now` falls in, emptying the buckets of the
    /// slots that left the window on the way (all of them after a long quiet spell).
    #[inline]
    fn advance(&mut self, now: Instant) {
        if now >= self.next {
            self.move_head(now);
        }
    }

    /// `advance` past the newest slot's end.
    #[cold]
    #[inline(never)]
    fn move_head(&mut self, now: Instant) {
        let since = now.saturating_duration_since(self.origin).as_nanos();
        let slot = u64::try_from(since).unwrap_or(u64::MAX) / self.slot;
        if slot <= self.head {
            return;
        }
        if slot - self.head >= self.buckets.len() as u64 {
            self.clear();
        } else {
            for s in self.head + 1..=slot {
                let at = self.index(s);
                let old = std::mem::take(&mut self.buckets[at]);
                self.total -= old;
            }
        }
        self.head = slot;
        self.head_at = self.index(slot);
        self.next = Self::slot_start(self.origin, self.slot, slot.saturating_add(1));
    }

    /// Where slot `n` starts, for a window starting at `origin`; `origin` itself if
    /// that instant cannot be represented (`advance` then always takes its slow path,
    /// which is still right).
    fn slot_start(origin: Instant, slot: u64, n: u64) -> Instant {
        let nanos = u128::from(slot) * u128::from(n);
        u64::try_from(nanos)
            .ok()
            .and_then(|ns| origin.checked_add(Duration::from_nanos(ns)))
            .unwrap_or(origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn counts(successes: u64, failures: u64) -> Counts {
        Counts {
            successes,
            failures,
        }
    }

    #[test]
    fn counts_what_was_recorded() {
        let t0 = Instant::now();
        let mut w = Window::new(Duration::from_secs(10), 10, t0);
        assert_eq!(w.counts(t0), Counts::default());
        for i in 0..30 {
            w.record(t0 + i * 100 * MS, i % 3 == 0);
        }
        assert_eq!(w.counts(t0 + 3000 * MS), counts(20, 10));
        assert_eq!(w.counts(t0 + 3000 * MS).total(), 30);
    }

    #[test]
    fn buckets_leave_the_window_one_by_one() {
        let t0 = Instant::now();
        // 1 s buckets: one failure in slot 0, one in slot 1, one in slot 2.
        let mut w = Window::new(Duration::from_secs(10), 10, t0);
        w.record(t0, true);
        w.record(t0 + 1500 * MS, true);
        w.record(t0 + 2999 * MS, true);
        // Slot 9 is the last that still holds slot 0.
        assert_eq!(w.counts(t0 + 9999 * MS), counts(0, 3));
        // Slot 10 takes slot 0's bucket.
        assert_eq!(w.counts(t0 + 10_000 * MS), counts(0, 2));
        assert_eq!(w.counts(t0 + 11_000 * MS), counts(0, 1));
        assert_eq!(w.counts(t0 + 12_000 * MS), counts(0, 0));
    }

    #[test]
    fn a_long_quiet_spell_empties_the_window() {
        let t0 = Instant::now();
        let mut w = Window::new(Duration::from_secs(10), 10, t0);
        for i in 0..10 {
            w.record(t0 + i * Duration::from_secs(1), false);
        }
        assert_eq!(w.counts(t0 + Duration::from_secs(9)), counts(10, 0));
        w.record(t0 + Duration::from_secs(3600), true);
        assert_eq!(w.counts(t0 + Duration::from_secs(3600)), counts(0, 1));
    }

    #[test]
    fn late_instants_count_in_the_newest_bucket() {
        let t0 = Instant::now();
        let mut w = Window::new(Duration::from_secs(10), 10, t0);
        w.record(t0 + Duration::from_secs(5), false);
        // Read before the lock by a thread that then lost the race: still counted, and
        // it leaves the window with the newest bucket, not before.
        w.record(t0 + Duration::from_secs(1), true);
        assert_eq!(w.counts(t0 + Duration::from_secs(14)), counts(1, 1));
        assert_eq!(w.counts(t0 + Duration::from_secs(15)), counts(0, 0));
    }

    #[test]
    fn memory_does_not_grow_with_traffic() {
        let t0 = Instant::now();
        let mut w = Window::new(Duration::from_secs(10), 10, t0);
        for i in 0..100_000u32 {
            w.record(t0 + Duration::from_micros(u64::from(i) * 300), i % 2 == 0);
        }
        assert_eq!(w.buckets.len(), 10);
        // 30 s of traffic; the last 10 s (slots 21..=29 full, plus 30's start) remain.
        let c = w.counts(t0 + Duration::from_micros(100_000 * 300));
        assert!(c.total() < 35_000 && c.total() > 29_000, "{c:?}");
    }

    #[test]
    fn one_bucket_and_tiny_spans_work() {
        let t0 = Instant::now();
        let mut w = Window::new(Duration::ZERO, 0, t0);
        w.record(t0, true);
        assert_eq!(w.counts(t0), counts(0, 1));
        assert_eq!(w.counts(t0 + Duration::from_nanos(1)), counts(0, 0));
    }
}
