//! What a service's instances are and how a client learns them: [`Instance`] (an
//! address, a weight, tags), [`Discover`] (the current list and its changes), a fixed
//! list ([`StaticDiscover`]) and one that a registry keeps up to date
//! ([`DiscoverList`](super::DiscoverList)). Both sides use these: a server registers an instance, a
//! client's balancer picks among them.

use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::sync::Arc;

use futures_util::stream::{self, Stream};

use crate::context::Address;

/// Labels of an instance (a registry's tags: cluster, zone, version...), shared: an
/// instance is cloned when a balancer copies a list.
pub type Tags = Arc<BTreeMap<String, String>>;

/// One instance of a service.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Instance {
    /// Where it listens (the one address of it this client calls).
    pub address: Address,
    /// Its share of the calls relative to the others (0: none). Default 100.
    pub weight: u32,
    /// Its labels, as registered (none by default).
    pub tags: Tags,
}

impl Instance {
    /// An instance at `address` with the default weight and no tags.
    pub fn new(address: Address) -> Self {
        Instance {
            address,
            weight: 100,
            tags: Tags::default(),
        }
    }

    /// Whether it is called on this host: over a Unix socket or shared memory, which
    /// only reach a process on the same machine. (A TCP address says nothing of where
    /// its process runs, loopback included: discovery picks a local address for an
    /// instance it knows to be co-located, see [`Route`](crate::registry::Route).)
    pub fn is_local(&self) -> bool {
        matches!(self.address, Address::Unix(_) | Address::Shm(_))
    }
}

/// Finds a service's instances. A registry client implements it (usually by handing
/// out a [`DiscoverList`](super::DiscoverList) it keeps up to date); [`StaticDiscover`] is a fixed list.
///
/// The balancer asks on every attempt, so implementations keep the current list ready
/// and hand out a shared reference to it (an `Arc` clone, no copy), replacing it as a
/// whole when it changes. The instance breakers index their breakers by that `Arc`: a
/// discovery that made a new one on every call would still work, but have them
/// indexed again on every attempt.
pub trait Discover: Send + Sync + 'static {
    /// The instances now.
    fn instances(&self) -> Arc<[Instance]>;

    /// The changes to come, as they happen (see [`Changes`] for how a subscriber that
    /// falls behind is served). By default none: the list is fixed.
    fn changes(&self) -> Changes {
        no_changes()
    }
}

/// A fixed list of instances.
#[derive(Debug, Clone)]
pub struct StaticDiscover {
    list: Arc<[Instance]>,
}

impl StaticDiscover {
    /// The instances `list`, for ever.
    pub fn new(list: impl IntoIterator<Item = Instance>) -> Self {
        StaticDiscover {
            list: list.into_iter().collect(),
        }
    }
}

impl Discover for StaticDiscover {
    fn instances(&self) -> Arc<[Instance]> {
        Arc::clone(&self.list)
    }
}

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
