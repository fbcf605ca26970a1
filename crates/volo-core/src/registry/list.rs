//! A service's instances as one shared value that changes by steps:
//! [`InstanceList`], and the [`Step`]s between two of its versions.
//!
//! A fleet of 10,000 instances changes one instance at a time, many times a minute.
//! A list that is copied whole on each change, and state derived from it that is
//! rebuilt whole (a balancer's ring, its weight table), make every change cost in
//! proportion to the fleet, in every client. An [`InstanceList`] is persistent: a
//! new version shares all but the path to what changed with the one it was made
//! from, and names its steps from the versions before it, so that state derived
//! from one version is brought to the next by applying the steps
//! ([`InstanceList::steps_since`]), at the cost of the change.

use std::fmt;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use imbl::GenericHashMap;
use imbl::shared_ptr::DefaultSharedPtr;

use super::discover::Instance;
use crate::context::Address;

/// One change to a list: an instance put (added, or changed at its address) or the
/// instance at an address removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// This instance is listed at its address (added, or replacing the one there).
    Put(Arc<Instance>),
    /// Nothing is listed at this address any more.
    Remove(Address),
}

impl Step {
    /// A step that lists `instance`.
    pub fn put(instance: Instance) -> Step {
        Step::Put(Arc::new(instance))
    }

    /// The address it changes.
    pub fn address(&self) -> &Address {
        match self {
            Step::Put(i) => &i.address,
            Step::Remove(a) => a,
        }
    }
}

/// How many batches of steps a list keeps of its history: state derived from a list
/// up to this many versions older catches up by steps; from an older one it is
/// derived again. A subscriber or a balancer is rarely more than one version behind.
const HISTORY: usize = 32;

/// Ids of lists, unique in the process: a lineage's first list's id names the lineage.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// The instances by the hash of their address. A new version copies the nodes on
/// the path to what changed, 32 slots a node; a slot is a `u64` and one `Arc` (no
/// address, no instance), so that copy, and the drop of the old nodes, stay cheap.
#[derive(Clone, Default)]
struct ByAddress {
    map: GenericHashMap<u64, Bucket, BuildHasherDefault<Identity>, DefaultSharedPtr>,
    len: usize,
}

/// The entries whose addresses share one hash: one, but for a 64-bit collision.
type Bucket = Arc<[Entry]>;

/// The hash of an address, the same for every list of the process.
fn hash(address: &Address) -> u64 {
    static STATE: OnceLock<foldhash::fast::FixedState> = OnceLock::new();
    STATE
        .get_or_init(|| foldhash::fast::FixedState::with_seed(crate::random::random_seed()))
        .hash_one(address)
}

/// Keys that are hashes already.
#[derive(Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed with it (`write_u64`); anything else is folded.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl ByAddress {
    fn get(&self, address: &Address) -> Option<&Entry> {
        self.get_at(hash(address), address)
    }

    fn insert(&mut self, entry: Entry) {
        self.insert_at(hash(&entry.instance.address), entry);
    }

    fn remove(&mut self, address: &Address) -> bool {
        self.remove_at(hash(address), address)
    }

    /// The entry at `address`, whose hash is `h`.
    fn get_at(&self, h: u64, address: &Address) -> Option<&Entry> {
        let bucket = self.map.get(&h)?;
        bucket.iter().find(|e| e.instance.address == *address)
    }

    /// Puts `entry` (whose address hashes to `h`) in place of the one at its
    /// address, if any.
    fn insert_at(&mut self, h: u64, entry: Entry) {
        let bucket: Bucket = match self.map.get(&h) {
            None => {
                self.len += 1;
                Arc::from([entry])
            }
            Some(old) => {
                let mut all: Vec<Entry> = old
                    .iter()
                    .filter(|e| e.instance.address != entry.instance.address)
                    .cloned()
                    .collect();
                self.len += 1 + all.len() - old.len();
                all.push(entry);
                all.into()
            }
        };
        self.map.insert(h, bucket);
    }

    /// Takes the entry at `address` (which hashes to `h`) out; whether there was one.
    fn remove_at(&mut self, h: u64, address: &Address) -> bool {
        let Some(old) = self.map.get(&h) else {
            return false;
        };
        let left: Vec<Entry> = old
            .iter()
            .filter(|e| e.instance.address != *address)
            .cloned()
            .collect();
        if left.len() == old.len() {
            return false;
        }
        self.len -= 1;
        if left.is_empty() {
            self.map.remove(&h);
        } else {
            self.map.insert(h, left.into());
        }
        true
    }

    fn values(&self) -> impl Iterator<Item = &Entry> + '_ {
        self.map.values().flat_map(|b| b.iter())
    }
}

/// A service's instances, one per address, as one shared value.
///
/// Cloning it is one reference count. [`apply`](Self::apply) makes a new version from
/// steps in time proportional to the steps, not to the list (it shares the rest with
/// this one). Each version has an [`id`](Self::id) of its own; versions made from one
/// another share a [`lineage`](Self::lineage), and a version keeps the steps that
/// made it from the last 32 versions before it ([`steps_since`](Self::steps_since)).
/// That is what lets a balancer keep its state in step with discovery's list at the
/// cost of each change.
///
/// Instances are listed in the order they were first put (an instance put again at
/// its address keeps its place); [`to_vec`](Self::to_vec) gives them in that order.
#[derive(Clone)]
pub struct InstanceList(Arc<Inner>);

struct Inner {
    id: u64,
    lineage: u64,
    by_address: ByAddress,
    /// The place the next new instance takes in the listing order.
    next_seq: u64,
    /// The steps that made this version, and the versions before it, newest last.
    history: Arc<[Batch]>,
    /// The version the oldest batch of `history` was applied to.
    base: u64,
}

/// An instance and its place in the listing order.
#[derive(Clone)]
struct Entry {
    seq: u64,
    instance: Arc<Instance>,
}

/// The steps that made the version `made` from the one before it.
#[derive(Clone)]
struct Batch {
    made: u64,
    steps: Arc<[Step]>,
}

impl Default for InstanceList {
    fn default() -> Self {
        InstanceList::new(Vec::new())
    }
}

impl fmt::Debug for InstanceList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InstanceList")
            .field("id", &self.0.id)
            .field("lineage", &self.0.lineage)
            .field("instances", &self.to_vec())
            .finish()
    }
}

/// Two lists are equal when they list the same instances in the same order.
impl PartialEq for InstanceList {
    fn eq(&self, other: &InstanceList) -> bool {
        self.0.id == other.0.id || self.to_vec() == other.to_vec()
    }
}

impl Eq for InstanceList {}

impl<I: Into<Instance>> FromIterator<I> for InstanceList {
    fn from_iter<T: IntoIterator<Item = I>>(iter: T) -> Self {
        InstanceList::new(iter.into_iter().map(Into::into))
    }
}

impl InstanceList {
    /// A list of `instances`, a lineage of its own; of several at one address the
    /// first is kept.
    pub fn new(instances: impl IntoIterator<Item = Instance>) -> Self {
        let mut by_address = ByAddress::default();
        let mut next_seq = 0;
        for instance in instances {
            if by_address.get(&instance.address).is_some() {
                continue;
            }
            by_address.insert(Entry {
                seq: next_seq,
                instance: Arc::new(instance),
            });
            next_seq += 1;
        }
        let id = next_id();
        InstanceList(Arc::new(Inner {
            id,
            lineage: id,
            by_address,
            next_seq,
            history: Arc::from([]),
            base: id,
        }))
    }

    /// This version's id, unique in the process.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// The id of the first version of the lists this one was made from by steps.
    pub fn lineage(&self) -> u64 {
        self.0.lineage
    }

    /// How many instances it lists.
    pub fn len(&self) -> usize {
        self.0.by_address.len
    }

    /// Whether it lists none.
    pub fn is_empty(&self) -> bool {
        self.0.by_address.len == 0
    }

    /// The instance at `address`.
    pub fn get(&self, address: &Address) -> Option<&Arc<Instance>> {
        self.0.by_address.get(address).map(|e| &e.instance)
    }

    /// Whether an instance is listed at `address`.
    pub fn contains(&self, address: &Address) -> bool {
        self.0.by_address.get(address).is_some()
    }

    /// The instances, in no particular order (see [`in_order`](Self::in_order)).
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Instance>> + '_ {
        self.0.by_address.values().map(|e| &e.instance)
    }

    /// The instances in the listing order (the order they were first put). It sorts:
    /// for deriving state from scratch and for showing, not for every call.
    pub fn in_order(&self) -> Vec<&Arc<Instance>> {
        let mut all: Vec<&Entry> = self.0.by_address.values().collect();
        all.sort_unstable_by_key(|e| e.seq);
        all.into_iter().map(|e| &e.instance).collect()
    }

    /// A copy of the instances, in the listing order.
    pub fn to_vec(&self) -> Vec<Instance> {
        self.in_order().into_iter().map(|i| (**i).clone()).collect()
    }

    /// The version that `steps` make of this one, of the same lineage; `None` when
    /// none of them changes anything (a put of an instance equal to the one listed, a
    /// remove of an address not listed). Costs what the steps change.
    pub fn apply(&self, steps: impl IntoIterator<Item = Step>) -> Option<InstanceList> {
        let mut by_address = self.0.by_address.clone();
        let mut next_seq = self.0.next_seq;
        let mut made = Vec::new();
        for step in steps {
            let changed = match &step {
                Step::Put(instance) => {
                    let seq = match by_address.get(&instance.address) {
                        Some(e) if *e.instance == **instance => None,
                        Some(e) => Some(e.seq),
                        None => {
                            next_seq += 1;
                            Some(next_seq - 1)
                        }
                    };
                    if let Some(seq) = seq {
                        by_address.insert(Entry {
                            seq,
                            instance: Arc::clone(instance),
                        });
                    }
                    seq.is_some()
                }
                Step::Remove(address) => by_address.remove(address),
            };
            if changed {
                made.push(step);
            }
        }
        if made.is_empty() {
            return None;
        }
        let id = next_id();
        let dropped = self.0.history.len().saturating_sub(HISTORY - 1);
        let kept = &self.0.history[dropped..];
        let base = match dropped {
            0 => self.0.base,
            n => self.0.history[n - 1].made,
        };
        let history: Arc<[Batch]> = kept
            .iter()
            .cloned()
            .chain([Batch {
                made: id,
                steps: made.into(),
            }])
            .collect();
        Some(InstanceList(Arc::new(Inner {
            id,
            lineage: self.0.lineage,
            by_address,
            next_seq,
            history,
            base,
        })))
    }

    /// The version that lists `instances` instead (of several at one address the
    /// first is kept; the order of those listed before is kept), made by steps from
    /// this one; `None` when it lists the same instances. Costs a pass over both.
    pub fn replaced_by(&self, instances: Vec<Instance>) -> Option<InstanceList> {
        let mut wanted: std::collections::HashSet<&Address, foldhash::fast::RandomState> =
            std::collections::HashSet::with_capacity_and_hasher(
                instances.len(),
                Default::default(),
            );
        let mut steps = Vec::new();
        for instance in &instances {
            if !wanted.insert(&instance.address) {
                continue;
            }
            if self.get(&instance.address).is_none_or(|i| **i != *instance) {
                steps.push(Step::put(instance.clone()));
            }
        }
        for instance in self.in_order() {
            if !wanted.contains(&instance.address) {
                steps.push(Step::Remove(instance.address.clone()));
            }
        }
        self.apply(steps)
    }

    /// The steps that made this version from the version `id` of its lineage, oldest
    /// first (none when `id` is this version); `None` when `id` is not one of the
    /// versions whose steps it keeps (another lineage, or too old): state derived
    /// from that version is then derived again from this one.
    pub fn steps_since(&self, id: u64) -> Option<impl Iterator<Item = &Step> + '_> {
        let history = &self.0.history;
        // The steps after the version `id` are those of the batches after the one
        // that made it, or all of them when the oldest kept batch was applied to it.
        let from = if id == self.0.id {
            history.len()
        } else if id == self.0.base {
            0
        } else {
            history.iter().position(|b| b.made == id)? + 1
        };
        Some(history[from..].iter().flat_map(|b| b.steps.iter()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::inst;

    fn ports(list: &InstanceList) -> Vec<(u16, u32)> {
        list.to_vec()
            .iter()
            .map(|i| match &i.address {
                Address::Tcp(a) => (a.port(), i.weight),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn steps_make_a_new_version_and_leave_the_old_one_as_it_was() {
        let a = InstanceList::new([inst(1, 100), inst(2, 100), inst(1, 7)]);
        assert_eq!(ports(&a), [(1, 100), (2, 100)], "the first at an address");
        let b = a
            .apply([
                Step::put(inst(3, 100)),
                Step::put(inst(1, 50)),
                Step::Remove(inst(2, 0).address),
            ])
            .expect("a change");
        assert_eq!(
            ports(&b),
            [(1, 50), (3, 100)],
            "a changed one keeps its place"
        );
        assert_eq!(ports(&a), [(1, 100), (2, 100)]);
        assert_eq!((b.lineage(), a.lineage()), (a.id(), a.id()));
        assert_ne!(a.id(), b.id());
        assert!(b.get(&inst(3, 0).address).is_some() && !b.contains(&inst(2, 0).address));
        // Steps that change nothing make no version.
        assert!(
            b.apply([Step::put(inst(3, 100)), Step::Remove(inst(9, 0).address)])
                .is_none()
        );
    }

    #[test]
    fn steps_since_an_older_version_are_the_ones_that_changed_something() {
        let a = InstanceList::new([inst(1, 100)]);
        let b = a.apply([Step::put(inst(2, 100))]).unwrap();
        let c = b
            .apply([Step::put(inst(2, 100)), Step::Remove(inst(1, 0).address)])
            .unwrap();
        let since =
            |l: &InstanceList, id| l.steps_since(id).map(|s| s.cloned().collect::<Vec<_>>());
        assert_eq!(since(&c, c.id()), Some(vec![]));
        assert_eq!(
            since(&c, b.id()),
            Some(vec![Step::Remove(inst(1, 0).address)])
        );
        assert_eq!(
            since(&c, a.id()),
            Some(vec![
                Step::put(inst(2, 100)),
                Step::Remove(inst(1, 0).address)
            ])
        );
        // Another lineage: no steps lead from it.
        let other = InstanceList::new([inst(1, 100)]);
        assert!(c.steps_since(other.id()).is_none());
        // Replaying the steps on the old version gives the new one.
        let replayed = a.apply(since(&c, a.id()).unwrap()).unwrap();
        assert_eq!(replayed, c);
    }

    #[test]
    fn history_is_bounded_and_older_versions_are_derived_again() {
        let first = InstanceList::new([inst(1, 1)]);
        let mut list = first.clone();
        let mut ids = vec![first.id()];
        for w in 2..100 {
            list = list.apply([Step::put(inst(1, w))]).unwrap();
            ids.push(list.id());
        }
        assert!(list.steps_since(first.id()).is_none(), "too old");
        let back = ids[ids.len() - 1 - HISTORY];
        assert_eq!(list.steps_since(back).unwrap().count(), HISTORY);
        assert!(list.steps_since(ids[ids.len() - 2 - HISTORY]).is_none());
        assert_eq!(list.0.history.len(), HISTORY);
    }

    #[test]
    fn addresses_of_one_hash_share_a_bucket_and_stay_apart() {
        let entry = |port, weight| Entry {
            seq: u64::from(port),
            instance: Arc::new(inst(port, weight)),
        };
        let (a, b) = (inst(1, 0).address, inst(2, 0).address);
        let mut map = ByAddress::default();
        map.insert_at(7, entry(1, 10));
        map.insert_at(7, entry(2, 20));
        map.insert_at(7, entry(1, 11));
        assert_eq!(map.len, 2);
        assert_eq!(map.get_at(7, &a).map(|e| e.instance.weight), Some(11));
        assert_eq!(map.get_at(7, &b).map(|e| e.instance.weight), Some(20));
        assert_eq!(map.values().count(), 2);
        assert!(map.remove_at(7, &a) && !map.remove_at(7, &a));
        assert!(map.get_at(7, &a).is_none() && map.get_at(7, &b).is_some());
        assert!(map.remove_at(7, &b));
        assert_eq!((map.len, map.map.len()), (0, 0));
    }

    #[test]
    fn a_replacement_list_is_made_of_the_differences() {
        let a = InstanceList::new([inst(1, 100), inst(2, 100), inst(3, 100)]);
        assert!(
            a.replaced_by(vec![inst(1, 100), inst(2, 100), inst(3, 100)])
                .is_none()
        );
        assert!(
            a.replaced_by(vec![inst(3, 100), inst(1, 100), inst(2, 100)])
                .is_none(),
            "the order of a replacement does not move listed instances"
        );
        let b = a
            .replaced_by(vec![inst(4, 100), inst(2, 9), inst(4, 1), inst(1, 100)])
            .unwrap();
        assert_eq!(ports(&b), [(1, 100), (2, 9), (4, 100)]);
        assert_eq!(
            b.steps_since(a.id()).unwrap().count(),
            3,
            "put 4, put 2, remove 3"
        );
    }
}
