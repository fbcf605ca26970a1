//! The concurrency limit: a counter of calls in progress, taken with a
//! compare-and-swap and given back when the slot that took it drops.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Calls in progress, at most `limit`.
#[derive(Debug)]
pub(super) struct Slots {
    limit: usize,
    taken: AtomicUsize,
}

/// One call's place among the [`Slots`]: given back on drop.
#[derive(Debug)]
pub(super) struct Slot {
    slots: Arc<Slots>,
}

impl Slots {
    /// Room for `limit` calls at once (none for zero).
    pub(super) fn new(limit: usize) -> Self {
        Slots {
            limit,
            taken: AtomicUsize::new(0),
        }
    }

    pub(super) fn limit(&self) -> usize {
        self.limit
    }

    /// Calls holding a slot now.
    pub(super) fn taken(&self) -> usize {
        self.taken.load(Ordering::Relaxed)
    }

    /// A slot, if fewer than `limit` are taken.
    ///
    /// A compare-and-swap rather than an add that is undone when over: an add would
    /// count the calls it refuses for a moment, and refuse others that fit.
    pub(super) fn try_take(self: &Arc<Self>) -> Option<Slot> {
        // The counter only counts; it guards no other memory, so Relaxed suffices (all
        // updates of one atomic are totally ordered, so it never passes `limit`).
        self.taken
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot {
                slots: Arc::clone(self),
            })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.taken.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_run_out_at_the_limit_and_come_back_on_drop() {
        let slots = Arc::new(Slots::new(2));
        let a = slots.try_take().expect("first");
        let b = slots.try_take().expect("second");
        assert!(slots.try_take().is_none());
        assert_eq!(slots.taken(), 2);
        drop(a);
        assert_eq!(slots.taken(), 1);
        let _c = slots.try_take().expect("freed by the drop");
        drop(b);
        assert_eq!(slots.taken(), 1);
    }

    #[test]
    fn a_limit_of_zero_admits_nothing() {
        let slots = Arc::new(Slots::new(0));
        assert!(slots.try_take().is_none());
        assert_eq!(slots.taken(), 0);
    }
}
