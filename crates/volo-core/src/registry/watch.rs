//! Instance lists that change: [`DiscoverList`] holds the current list for the call
//! path and tells subscribers of each change as a [`Changes`] stream.

use std::sync::Arc;

use arc_swap::ArcSwap;
use futures_util::stream::{self, StreamExt};
use tokio::sync::watch;

use super::discover::{Change, Changes, Discover, Instance};
use super::list::{InstanceList, Step};

/// A service's instance list as discovery last found it: readers on the call path
/// take it with one atomic load, without a lock ([`list`](Discover::list)); the
/// discovery that feeds it changes it by steps ([`apply`](Self::apply)) or replaces
/// it ([`set`](Self::set)), and subscribers learn what changed
/// ([`changes`](Discover::changes)).
///
/// A registry client owns one, feeds it from its watch, and implements [`Discover`]
/// by handing it out. Each change makes a new version of the list from the last
/// ([`InstanceList::apply`]), so balancers bring their state up to it at the cost of
/// the change. Steps or a list that change nothing make no version: the call path
/// keeps the same list and no subscriber is woken.
#[derive(Debug)]
pub struct DiscoverList {
    current: ArcSwap<InstanceList>,
    notify: watch::Sender<InstanceList>,
}

impl Default for DiscoverList {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl DiscoverList {
    /// A list holding `instances` to start with (the first of several at one address).
    pub fn new(instances: Vec<Instance>) -> Self {
        let list = InstanceList::new(instances);
        DiscoverList {
            current: ArcSwap::from_pointee(list.clone()),
            notify: watch::Sender::new(list),
        }
    }

    /// Replaces the list with `instances` (the first of several at one address kept;
    /// instances listed before keep their place). Returns whether it changed. Costs
    /// a pass over both lists: a discovery that knows what changed uses
    /// [`apply`](Self::apply).
    pub fn set(&self, instances: Vec<Instance>) -> bool {
        self.publish(self.current.load().replaced_by(instances))
    }

    /// Changes the list by `steps`. Returns whether it changed. Costs what the steps
    /// change, not the list's length.
    pub fn apply(&self, steps: impl IntoIterator<Item = Step>) -> bool {
        self.publish(self.current.load().apply(steps))
    }

    fn publish(&self, list: Option<InstanceList>) -> bool {
        let Some(list) = list else {
            return false;
        };
        self.current.store(Arc::new(list.clone()));
        self.notify.send_replace(list);
        true
    }
}

impl Discover for DiscoverList {
    fn list(&self) -> InstanceList {
        InstanceList::clone(&self.current.load())
    }

    fn changes(&self) -> Changes {
        let mut rx = self.notify.subscribe();
        let seen = rx.borrow_and_update().clone();
        Box::pin(
            stream::unfold((rx, seen), |(mut rx, seen)| async move {
                loop {
                    rx.changed().await.ok()?;
                    let now = rx.borrow_and_update().clone();
                    let change = Change::between(&seen, &now);
                    if !change.is_empty() {
                        return Some((change, (rx, now)));
                    }
                }
            })
            .fuse(),
        )
    }
}

impl<D: Discover + ?Sized> Discover for Arc<D> {
    fn list(&self) -> InstanceList {
        (**self).list()
    }

    fn changes(&self) -> Changes {
        (**self).changes()
    }
}

/// A discovery chosen at run time (a fixed list or a registry, from a setting).
impl<D: Discover + ?Sized> Discover for Box<D> {
    fn list(&self) -> InstanceList {
        (**self).list()
    }

    fn changes(&self) -> Changes {
        (**self).changes()
    }
}

#[cfg(test)]
mod tests {
    use crate::context::Address;
    use crate::registry::{inst, no_changes};
    use futures_util::FutureExt;

    use super::*;

    fn ports(list: &[Instance]) -> Vec<u16> {
        list.iter()
            .map(|i| match &i.address {
                Address::Tcp(a) => a.port(),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[tokio::test]
    async fn a_subscriber_sees_added_removed_and_reweighted() {
        let list = DiscoverList::new(vec![inst(1, 100), inst(2, 100)]);
        let mut changes = list.changes();
        assert!(list.set(vec![inst(2, 50), inst(3, 100)]));
        let c = changes.next().await.expect("a change");
        assert_eq!(ports(&c.added), [3]);
        assert_eq!(ports(&c.removed), [1]);
        assert_eq!(ports(&c.updated), [2]);
        assert_eq!(c.updated[0].weight, 50);
        assert_eq!(ports(&c.list.to_vec()), [2, 3]);
        assert_eq!(ports(&list.instances()), [2, 3]);
    }

    #[tokio::test]
    async fn a_slow_subscriber_gets_one_change_from_what_it_saw_to_now() {
        let list = DiscoverList::new(vec![inst(1, 100)]);
        let mut changes = list.changes();
        for p in 2..100 {
            list.set(vec![inst(p, 100)]);
        }
        let c = changes.next().await.expect("a change");
        assert_eq!(ports(&c.removed), [1]);
        assert_eq!(ports(&c.added), [99]);
        // Nothing queued behind it: the next item waits for the next change.
        assert!(changes.next().now_or_never().is_none(), "no backlog");
    }

    #[tokio::test]
    async fn setting_the_same_list_keeps_the_version_and_wakes_nobody() {
        let list = DiscoverList::new(vec![inst(1, 100)]);
        let before = list.list();
        let mut changes = list.changes();
        assert!(!list.set(vec![inst(1, 100)]));
        assert!(!list.apply([Step::put(inst(1, 100))]));
        assert_eq!(before.id(), list.list().id());
        // A change there and back again reaches a subscriber that was not looking as
        // nothing: it is skipped, not reported empty.
        list.set(vec![inst(2, 100)]);
        list.set(vec![inst(1, 100)]);
        assert!(changes.next().now_or_never().is_none());
    }

    #[tokio::test]
    async fn duplicates_keep_the_first_and_the_stream_ends_with_the_list() {
        let list = DiscoverList::new(vec![inst(1, 10), inst(1, 20), inst(2, 30)]);
        let got = list.instances();
        assert_eq!(ports(&got), [1, 2]);
        assert_eq!(got[0].weight, 10);
        let mut changes = list.changes();
        drop(list);
        assert_eq!(changes.next().await, None);
        assert_eq!(no_changes().next().await, None);
    }
}
