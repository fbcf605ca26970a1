//! Instance lists that change: [`DiscoverList`] holds the current list for the call
//! path and tells subscribers of each change as a [`Changes`] stream.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;

use arc_swap::ArcSwap;
use futures_util::stream::{self, Stream, StreamExt};
use tokio::sync::watch;

use super::{Discover, Instance};
use crate::context::Address;

/// What changed in a service's instances between two lists a subscriber saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The whole list now.
    pub instances: Arc<[Instance]>,
    /// Instances at addresses the last list did not have.
    pub added: Vec<Instance>,
    /// Instances of the last list whose addresses are gone.
    pub removed: Vec<Instance>,
    /// Instances still listed at the same address with another weight or other tags
    /// (as they are now).
    pub updated: Vec<Instance>,
}

impl Change {
    /// What changed from `old` to `new`, instances matched by address.
    pub fn between(old: &[Instance], new: &Arc<[Instance]>) -> Change {
        let before: HashMap<&Address, &Instance> = old.iter().map(|i| (&i.address, i)).collect();
        let after: HashMap<&Address, &Instance> = new.iter().map(|i| (&i.address, i)).collect();
        let mut added = Vec::new();
        let mut updated = Vec::new();
        for i in new.iter() {
            match before.get(&i.address) {
                None => added.push(i.clone()),
                Some(was) if *was != i => updated.push(i.clone()),
                Some(_) => {}
            }
        }
        let removed = old
            .iter()
            .filter(|i| !after.contains_key(&i.address))
            .cloned()
            .collect();
        Change {
            instances: Arc::clone(new),
            added,
            removed,
            updated,
        }
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.updated.is_empty()
    }
}

/// The changes of a [`Discover`]'s list, as they happen (see [`Discover::changes`]).
///
/// A subscriber that falls behind does not queue changes: the next item is the
/// difference between the last list it saw and the current one, so the backlog is
/// one list whatever the registry does, and the last list is never missed. The
/// stream ends when the discovery is dropped, or at once for a list that never
/// changes ([`StaticDiscover`](super::StaticDiscover)).
pub type Changes = Pin<Box<dyn Stream<Item = Change> + Send>>;

/// A stream of no changes (the list is fixed).
pub fn no_changes() -> Changes {
    Box::pin(stream::empty())
}

/// A service's instance list as discovery last found it: readers on the call path
/// take it with one atomic load, without a lock ([`instances`](Discover::instances));
/// the discovery that feeds it replaces it as a whole ([`set`](Self::set)), and
/// subscribers learn what changed ([`changes`](Discover::changes)).
///
/// A registry client owns one, feeds it from its watch, and implements [`Discover`]
/// by handing it out. Setting a list equal to the current one (same instances in the
/// same order) changes nothing: the call path keeps the same `Arc`, so the instance
/// breakers' index of it stays valid, and no subscriber is woken.
#[derive(Debug)]
pub struct DiscoverList {
    current: ArcSwap<Arc<[Instance]>>,
    notify: watch::Sender<Arc<[Instance]>>,
}

impl Default for DiscoverList {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl DiscoverList {
    /// A list holding `instances` to start with.
    pub fn new(instances: Vec<Instance>) -> Self {
        let list: Arc<[Instance]> = dedup(instances).into();
        DiscoverList {
            current: ArcSwap::from_pointee(Arc::clone(&list)),
            notify: watch::Sender::new(list),
        }
    }

    /// Replaces the list with `instances` (the first of several at one address kept).
    /// Returns whether it changed.
    pub fn set(&self, instances: Vec<Instance>) -> bool {
        let list = dedup(instances);
        if self.current.load()[..] == list[..] {
            return false;
        }
        let list: Arc<[Instance]> = list.into();
        self.current.store(Arc::new(Arc::clone(&list)));
        self.notify.send_replace(list);
        true
    }
}

/// `list` with only the first instance of each address.
fn dedup(mut list: Vec<Instance>) -> Vec<Instance> {
    let mut seen = std::collections::HashSet::with_capacity(list.len());
    list.retain(|i| seen.insert(i.address.clone()));
    list
}

impl Discover for DiscoverList {
    fn instances(&self) -> Arc<[Instance]> {
        Arc::clone(&self.current.load())
    }

    fn changes(&self) -> Changes {
        let mut rx = self.notify.subscribe();
        let seen = Arc::clone(&rx.borrow_and_update());
        Box::pin(
            stream::unfold((rx, seen), |(mut rx, seen)| async move {
                loop {
                    rx.changed().await.ok()?;
                    let now = Arc::clone(&rx.borrow_and_update());
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
    fn instances(&self) -> Arc<[Instance]> {
        (**self).instances()
    }

    fn changes(&self) -> Changes {
        (**self).changes()
    }
}

/// A discovery chosen at run time (a fixed list or a registry, from a setting).
impl<D: Discover + ?Sized> Discover for Box<D> {
    fn instances(&self) -> Arc<[Instance]> {
        (**self).instances()
    }

    fn changes(&self) -> Changes {
        (**self).changes()
    }
}

#[cfg(test)]
mod tests {
    use crate::registry::inst;
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
        assert_eq!(ports(&c.instances), [2, 3]);
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
    async fn setting_the_same_list_keeps_the_arc_and_wakes_nobody() {
        let list = DiscoverList::new(vec![inst(1, 100)]);
        let before = list.instances();
        let mut changes = list.changes();
        assert!(!list.set(vec![inst(1, 100)]));
        assert!(Arc::ptr_eq(&before, &list.instances()));
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
