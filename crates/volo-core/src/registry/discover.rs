//! What a service's instances are and how a client learns them: [`Instance`] (an
//! address, a weight, tags), [`Discover`] (the current list and its changes), a fixed
//! list ([`StaticDiscover`]) and one that a registry keeps up to date
//! ([`DiscoverList`](super::DiscoverList)). Both sides use these: a server registers an instance, a
//! client's balancer picks among them.

use std::collections::{BTreeMap, HashSet};
use std::pin::Pin;
use std::sync::Arc;

use futures_util::stream::{self, Stream};

use super::list::InstanceList;
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
    /// Where it runs, as far as its registration says (nothing by default).
    pub locality: Locality,
}

/// Where a process runs: its host, rack and zone, each when known. Discovery takes an
/// instance's host from its registration's host identity and its rack and zone from
/// its tags `rack` and `zone` ([`Route`](crate::registry::Route)); a client states
/// its own to [`Tiered`](crate::client::Tiered).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Locality {
    /// The host's identity ([`host_id`](crate::registry::host_id)).
    pub host: Option<Arc<str>>,
    /// The rack, unique within its zone.
    pub rack: Option<Arc<str>>,
    /// The zone (an availability zone, a data center).
    pub zone: Option<Arc<str>>,
}

/// How near an instance is to a client: the tiers a [`Tiered`](crate::client::Tiered)
/// balancer prefers, nearest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// The same host (or an instance reached over a Unix socket or shared memory).
    Host = 0,
    /// The same rack of the same zone.
    Rack = 1,
    /// The same zone.
    Zone = 2,
    /// Anywhere else, or where either side's locality is not known.
    Any = 3,
}

impl Tier {
    /// Every tier, nearest first.
    pub const ALL: [Tier; 4] = [Tier::Host, Tier::Rack, Tier::Zone, Tier::Any];

    /// Its name (`host`, `rack`, `zone`, `any`), as the metrics label it.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Host => "host",
            Tier::Rack => "rack",
            Tier::Zone => "zone",
            Tier::Any => "any",
        }
    }
}

impl Locality {
    /// The tier `instance` is in, seen from a client here.
    pub fn tier_of(&self, instance: &Instance) -> Tier {
        let same = |a: &Option<Arc<str>>, b: &Option<Arc<str>>| a.is_some() && a == b;
        let there = &instance.locality;
        if instance.is_local() || same(&self.host, &there.host) {
            Tier::Host
        } else if same(&self.zone, &there.zone) && same(&self.rack, &there.rack) {
            Tier::Rack
        } else if same(&self.zone, &there.zone) {
            Tier::Zone
        } else {
            Tier::Any
        }
    }
}

impl Instance {
    /// An instance at `address` with the default weight, no tags and no locality.
    pub fn new(address: Address) -> Self {
        Instance {
            address,
            weight: 100,
            tags: Tags::default(),
            locality: Locality::default(),
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
/// The balancer asks for the [`list`](Discover::list) on every attempt, so
/// implementations keep the current one ready and hand out a shared reference to it
/// (an [`InstanceList`] clone is one reference count), making a new version of it
/// by steps when it changes ([`InstanceList::apply`]). Balancers and instance
/// breakers keep state derived from the list and bring it up to a new version by the
/// steps between the two: a discovery that made a list from scratch on every call
/// would still work, but have that state derived again on every attempt.
pub trait Discover: Send + Sync + 'static {
    /// The instances now.
    fn list(&self) -> InstanceList;

    /// A copy of the instances now, in the list's order (for showing and for tests:
    /// it copies the whole list).
    fn instances(&self) -> Arc<[Instance]> {
        self.list().to_vec().into()
    }

    /// The changes to come, as they happen (see [`Changes`] for how a subscriber that
    /// falls behind is served). By default none: the list is fixed.
    fn changes(&self) -> Changes {
        no_changes()
    }
}

/// A fixed list of instances.
#[derive(Debug, Clone)]
pub struct StaticDiscover {
    list: InstanceList,
}

impl StaticDiscover {
    /// The instances `list` (the first of several at one address), for ever.
    pub fn new(list: impl IntoIterator<Item = Instance>) -> Self {
        StaticDiscover {
            list: InstanceList::new(list),
        }
    }
}

impl Discover for StaticDiscover {
    fn list(&self) -> InstanceList {
        self.list.clone()
    }
}

/// What changed in a service's instances between two lists a subscriber saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The whole list now.
    pub list: InstanceList,
    /// Instances at addresses the last list did not have.
    pub added: Vec<Instance>,
    /// Instances of the last list whose addresses are gone.
    pub removed: Vec<Instance>,
    /// Instances still listed at the same address with another weight or other tags
    /// (as they are now).
    pub updated: Vec<Instance>,
}

impl Change {
    /// What changed from `old` to `new`, instances matched by address. When `new` was
    /// made from `old` by steps it keeps ([`InstanceList::steps_since`]), this costs
    /// what changed; else a pass over both lists.
    pub fn between(old: &InstanceList, new: &InstanceList) -> Change {
        let mut change = Change {
            list: new.clone(),
            added: Vec::new(),
            removed: Vec::new(),
            updated: Vec::new(),
        };
        let mut sort = |address: &Address| match (old.get(address), new.get(address)) {
            (None, Some(now)) => change.added.push((**now).clone()),
            (Some(was), None) => change.removed.push((**was).clone()),
            (Some(was), Some(now)) if was != now => change.updated.push((**now).clone()),
            _ => {}
        };
        if let Some(steps) = new.steps_since(old.id()) {
            // An address changed twice is sorted once, by where it ended.
            let mut seen = HashSet::new();
            for step in steps {
                if seen.insert(step.address()) {
                    sort(step.address());
                }
            }
        } else {
            for i in new.in_order() {
                sort(&i.address);
            }
            for i in old.in_order() {
                if !new.contains(&i.address) {
                    sort(&i.address);
                }
            }
        }
        change
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
