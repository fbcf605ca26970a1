//! What a service's instances are and how a client learns them: [`Instance`] (an
//! address, a weight, tags), [`Discover`] (the current list and its changes), a fixed
//! list ([`StaticDiscover`]) and one that a registry keeps up to date
//! ([`DiscoverList`](super::DiscoverList)). Both sides use these: a server registers an instance, a
//! client's balancer picks among them.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::watch::{Changes, no_changes};
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
