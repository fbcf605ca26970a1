//! A value a balancer derives from an instance list (a hash ring, the list split by
//! locality), kept for the last few lists it was given.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arc_swap::ArcSwapOption;

use super::Instance;

/// How many lists' values are kept. A pick is given discovery's list, or that list
/// less the instances a retry tried already or whose breakers are open; a balancer
/// inside [`LocalFirst`](super::LocalFirst) is given each side of it in turn. Four
/// covers a list, its two sides and one retry's remainder without a rebuild.
const SLOTS: usize = 4;

/// The values derived from the last [`SLOTS`] distinct instance lists seen; a pick
/// given another list builds its value, which replaces the oldest kept.
///
/// Discovery changes its list rarely and hands the same one to every pick, so most
/// picks find their list among those kept and use its value as it is: no lock, no
/// allocation, no reference count touched. A list that is not the one kept first
/// differs from it in length or in an early instance nearly always, so looking past
/// it costs a comparison or two. A new value is published whole: a pick that races
/// a rebuild uses one value or the other, each consistent with its own list.
#[derive(Debug)]
pub(super) struct ListCache<T> {
    slots: [ArcSwapOption<Derived<T>>; SLOTS],
    /// The slot the next value built goes to (oldest first), modulo [`SLOTS`].
    next: AtomicUsize,
}

#[derive(Debug)]
struct Derived<T> {
    seen: Vec<Instance>,
    value: T,
}

impl<T> Default for ListCache<T> {
    fn default() -> Self {
        ListCache {
            slots: std::array::from_fn(|_| ArcSwapOption::empty()),
            next: AtomicUsize::new(0),
        }
    }
}

impl<T> ListCache<T> {
    /// `f` of the value derived from `instances`: one kept when it was derived from
    /// an equal list, else `build`'s, which is kept from then on.
    pub(super) fn with<R>(
        &self,
        instances: &[Instance],
        build: impl FnOnce(&[Instance]) -> T,
        f: impl FnOnce(&T) -> R,
    ) -> R {
        for slot in &self.slots {
            let kept = slot.load();
            if let Some(d) = kept.as_deref()
                && d.seen == instances
            {
                return f(&d.value);
            }
        }
        let built = Arc::new(Derived {
            seen: instances.to_vec(),
            value: build(instances),
        });
        let out = f(&built.value);
        // Relaxed: the slot's own store publishes the value; which slot is taken
        // only decides what is evicted.
        let at = self.next.fetch_add(1, Ordering::Relaxed) % SLOTS;
        self.slots[at].store(Some(built));
        out
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::client::balance::tests::inst;

    #[test]
    fn a_value_is_built_once_per_list_and_again_when_the_list_changes() {
        let per = ListCache::default();
        let builds = Cell::new(0);
        let len = |list: &[Instance]| {
            per.with(
                list,
                |l| {
                    builds.set(builds.get() + 1);
                    l.len()
                },
                |n| *n,
            )
        };
        let a = [inst(1, 100), inst(2, 100)];
        assert_eq!((len(&a), len(&a), len(&a.clone())), (2, 2, 2));
        assert_eq!(builds.get(), 1, "an equal list is the same list");
        let b = [inst(1, 100), inst(2, 50)];
        assert_eq!(len(&b), 2);
        assert_eq!(builds.get(), 2, "a weight changed");
        // Lists taken in turn (the sides of a split, a retry's remainder) are all
        // kept: going back to one builds nothing.
        for _ in 0..3 {
            assert_eq!((len(&a), len(&b), len(&b[..1])), (2, 2, 1));
        }
        assert_eq!(builds.get(), 3, "a, b and b's first are kept together");
    }

    #[test]
    fn beyond_the_slots_the_oldest_list_is_dropped() {
        let per = ListCache::default();
        let builds = Cell::new(0);
        let port = |list: &[Instance]| {
            per.with(
                list,
                |l| {
                    builds.set(builds.get() + 1);
                    l[0].clone()
                },
                |i| i.address.clone(),
            )
        };
        let lists: Vec<[Instance; 1]> = (0..=SLOTS as u16).map(|p| [inst(p, 100)]).collect();
        for list in &lists {
            assert_eq!(port(list), list[0].address);
        }
        assert_eq!(builds.get(), SLOTS + 1);
        // The newest SLOTS are kept; the first was evicted by the last.
        for list in &lists[1..] {
            assert_eq!(port(list), list[0].address);
        }
        assert_eq!(builds.get(), SLOTS + 1);
        assert_eq!(port(&lists[0]), lists[0][0].address);
        assert_eq!(builds.get(), SLOTS + 2, "the oldest was built again");
    }
}
