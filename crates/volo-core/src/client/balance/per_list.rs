//! A value a balancer derives from an instance list (a hash ring, the list split by
//! locality), kept for the last list it was given.

use std::sync::Arc;

use arc_swap::ArcSwapOption;

use super::Instance;

/// The value derived from the last instance list seen, built again when a pick is
/// given a list that differs from it.
///
/// Discovery changes its list rarely and hands the same one to every pick, so most
/// picks compare the list with the one kept and use the value as it is: no lock, no
/// allocation, no reference count touched. A new list builds a new value, published
/// whole: a pick that races a rebuild uses one value or the other, each consistent
/// with its own list.
#[derive(Debug)]
pub(super) struct PerList<T> {
    last: ArcSwapOption<Derived<T>>,
}

#[derive(Debug)]
struct Derived<T> {
    seen: Vec<Instance>,
    value: T,
}

impl<T> Default for PerList<T> {
    fn default() -> Self {
        PerList {
            last: ArcSwapOption::empty(),
        }
    }
}

impl<T> PerList<T> {
    /// `f` of the value derived from `instances`: the one kept when it was derived
    /// from an equal list, else `build`'s, which is kept from then on.
    pub(super) fn with<R>(
        &self,
        instances: &[Instance],
        build: impl FnOnce(&[Instance]) -> T,
        f: impl FnOnce(&T) -> R,
    ) -> R {
        let last = self.last.load();
        if let Some(d) = last.as_deref()
            && d.seen == instances
        {
            return f(&d.value);
        }
        drop(last);
        let built = Arc::new(Derived {
            seen: instances.to_vec(),
            value: build(instances),
        });
        let out = f(&built.value);
        self.last.store(Some(built));
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
        let per = PerList::default();
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
        assert_eq!(len(&b[..1]), 1);
        assert_eq!(len(&a), 2);
        assert_eq!(builds.get(), 4, "only the last list is kept");
    }
}
