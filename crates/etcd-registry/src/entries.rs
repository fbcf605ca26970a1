//! What discovery knows of one service, without I/O: the instances by key, fed the
//! keys and values etcd returns (a range, then watch events), and the changes they
//! make to the list, as steps (a watch event) or as a whole list (a read).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use foldhash::fast::RandomState;
use volo_core::client::{Instance, Step, Tags};
use volo_core::context::Address;
use volo_core::registry::Route;

use crate::config::Layout;
use crate::value;

/// Discovery's counters (see [`DiscoverStats`](crate::DiscoverStats)).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) resyncs: AtomicU64,
    pub(crate) compactions: AtomicU64,
    pub(crate) watch_restarts: AtomicU64,
    pub(crate) events: AtomicU64,
    pub(crate) skipped_values: AtomicU64,
    pub(crate) skipped_addresses: AtomicU64,
    pub(crate) unroutable: AtomicU64,
    pub(crate) over_limit: AtomicU64,
    pub(crate) keys_dropped: AtomicU64,
    pub(crate) revision: AtomicI64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// One service's instances by key, and what changed in its list since it was last
/// taken ([`take_update`](Entries::take_update)).
///
/// The list holds one instance per address: the one of the first key (in key
/// order) that names it. At most `max_instances` addresses are listed; beyond that,
/// new ones wait (first come, first listed) and take the place of listed ones that
/// leave. Each put or delete costs in proportion to what it changes, not to the
/// number of instances.
#[derive(Debug)]
pub(crate) struct Entries {
    /// `{prefix}/{service}/`: every key of the service starts with it.
    key_prefix: String,
    service: String,
    max_value_bytes: usize,
    max_instances: usize,
    route: Route,
    /// How the values are written.
    layout: Layout,
    /// Each valid key's instance, by the key's part after `key_prefix`; `None`:
    /// registered, but with no address this client can use (see [`Route`]).
    by_key: BTreeMap<Arc<str>, Option<Arc<Instance>>>,
    /// The keys (as in `by_key`, shared) that name each address, in key order.
    owners: HashMap<Address, Vec<Arc<str>>, RandomState>,
    /// The tags of the instances, one copy of each distinct set: a fleet's tags are
    /// mostly the same few (cluster, zone...), and a set of tags costs a few hundred
    /// bytes.
    tags: HashSet<Tags, RandomState>,
    /// The number of distinct tag sets after the last pruning.
    tags_pruned: usize,
    /// The addresses listed (at most `max_instances`).
    listed: HashSet<Address, RandomState>,
    /// Addresses named but not listed for the limit, first come first; entries of
    /// addresses no longer in `waiting_set` are stale and skipped.
    waiting: VecDeque<Address>,
    waiting_set: HashSet<Address, RandomState>,
    /// The steps made since the update was last taken.
    steps: Vec<Step>,
    /// Whether the list must be taken whole (it was cleared for a read since).
    whole: bool,
    /// How many instances were left out when that was last logged.
    left_out: usize,
    /// The most keys kept ([`KEYS_PER_INSTANCE`] per listed instance): what a
    /// registry full of keys can cost a client.
    max_keys: usize,
    /// Whether keys of the service were left untracked for `max_keys` (by the last
    /// read, or by a put since).
    truncated: bool,
    /// Whether a tracked key was deleted while others were untracked: one of those
    /// may now take its place, which only a new read can tell.
    resync: bool,
}

/// What changed in the list since it was last taken.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Update {
    /// These steps (none: nothing changed).
    Steps(Vec<Step>),
    /// The whole list, in key order (after a read).
    Whole(Vec<Instance>),
}

/// Keys tracked per instance listed: room for keys whose values are bad or have no
/// address this client can use, beyond the instances it lists.
pub(crate) const KEYS_PER_INSTANCE: usize = 4;

impl Entries {
    pub(crate) fn new(
        key_prefix: String,
        service: &str,
        layout: Layout,
        max_value_bytes: usize,
        max_instances: usize,
        route: Route,
    ) -> Self {
        Entries {
            key_prefix,
            layout,
            service: service.to_string(),
            max_value_bytes,
            max_instances,
            route,
            by_key: BTreeMap::new(),
            owners: HashMap::default(),
            tags: HashSet::default(),
            tags_pruned: 0,
            listed: HashSet::default(),
            waiting: VecDeque::new(),
            waiting_set: HashSet::default(),
            steps: Vec::new(),
            whole: false,
            left_out: 0,
            max_keys: max_instances.saturating_mul(KEYS_PER_INSTANCE).max(16),
            truncated: false,
            resync: false,
        }
    }

    /// The most keys it keeps, and so the most a read needs to return.
    pub(crate) fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// Forgets every key (before a new range fills it again): the next update is the
    /// whole list.
    pub(crate) fn clear(&mut self) {
        self.by_key.clear();
        self.owners.clear();
        self.tags.clear();
        self.tags_pruned = 0;
        self.listed.clear();
        self.waiting.clear();
        self.waiting_set.clear();
        self.steps.clear();
        self.whole = true;
        self.truncated = false;
        self.resync = false;
    }

    /// The read that filled it stopped at `max_keys`: the service has more keys.
    pub(crate) fn truncated_read(&mut self, counters: &Counters) {
        self.dropped_keys(counters);
    }

    /// Whether a new read is needed to learn what the untracked keys hold (and
    /// forgets the wish).
    pub(crate) fn take_resync(&mut self) -> bool {
        std::mem::take(&mut self.resync)
    }

    /// Keys left untracked: logged the first time since the last read.
    fn dropped_keys(&mut self, counters: &Counters) {
        Counters::add(&counters.keys_dropped, 1);
        if !std::mem::replace(&mut self.truncated, true) {
            tracing::warn!(
                prefix = self.key_prefix,
                max_keys = self.max_keys,
                "etcd discovery: more keys than it keeps; the others are not followed"
            );
        }
    }

    /// `key` now holds `bytes`. A value that cannot be used is logged, counted and
    /// removes what the key held before.
    pub(crate) fn put(&mut self, key: &[u8], bytes: &[u8], counters: &Counters) {
        let Some(key) = self.own_key(key, counters) else {
            return;
        };
        let short = &key[self.key_prefix.len()..];
        if self.by_key.len() >= self.max_keys && !self.by_key.contains_key(short) {
            self.dropped_keys(counters);
            return;
        }
        match value::decode(self.layout, &self.service, bytes, self.max_value_bytes) {
            Ok(decoded) => {
                if !decoded.bad_addresses.is_empty() {
                    tracing::warn!(
                        key,
                        bad = ?decoded.bad_addresses,
                        "etcd discovery: addresses that do not parse are left out"
                    );
                    Counters::add(
                        &counters.skipped_addresses,
                        decoded.bad_addresses.len() as u64,
                    );
                }
                let instance = self.route.instance(&decoded.registration);
                if instance.is_none() {
                    tracing::debug!(key, "etcd discovery: no address this client can use");
                    Counters::add(&counters.unroutable, 1);
                }
                let instance = instance.map(|mut i| {
                    i.tags = self.intern(i.tags);
                    Arc::new(i)
                });
                self.set(short, instance);
            }
            Err(why) => {
                tracing::warn!(key, %why, "etcd discovery: value skipped");
                Counters::add(&counters.skipped_values, 1);
                self.remove(short);
            }
        }
    }

    /// The kept copy of `tags` (this one, kept from now on, when it is new).
    fn intern(&mut self, tags: Tags) -> Tags {
        if let Some(kept) = self.tags.get(&tags) {
            return Arc::clone(kept);
        }
        // Drop the sets no instance holds any more, once they may be half the kept.
        if self.tags.len() > 2 * self.tags_pruned + 16 {
            self.tags.retain(|t| Arc::strong_count(t) > 1);
            self.tags_pruned = self.tags.len();
        }
        self.tags.insert(Arc::clone(&tags));
        tags
    }

    /// `key` was deleted.
    pub(crate) fn delete(&mut self, key: &[u8]) {
        let short = std::str::from_utf8(key)
            .ok()
            .and_then(|k| k.strip_prefix(self.key_prefix.as_str()));
        if let Some(short) = short
            && self.remove(short)
            && self.truncated
        {
            self.resync = true;
        }
    }

    /// The key whose part after the prefix is `short` holds `instance` now (`None`:
    /// one with no address this client uses).
    fn set(&mut self, short: &str, instance: Option<Arc<Instance>>) {
        let new = instance.as_ref().map(|i| i.address.clone());
        let key: Arc<str> = match self.by_key.get_key_value(short) {
            Some((kept, _)) => Arc::clone(kept),
            None => Arc::from(short),
        };
        let old = match self.by_key.insert(Arc::clone(&key), instance) {
            Some(Some(was)) => Some(was.address.clone()),
            _ => None,
        };
        if let Some(old) = old.as_ref().filter(|o| new.as_ref() != Some(*o)) {
            self.disown(old, &key);
            self.sync(old);
        }
        if let Some(new) = new {
            let keys = self.owners.entry(new.clone()).or_default();
            if let Err(at) = keys.binary_search(&key) {
                keys.insert(at, key);
            }
            self.sync(&new);
        }
    }

    /// Forgets `key`; whether it was kept.
    fn remove(&mut self, key: &str) -> bool {
        match self.by_key.remove(key) {
            Some(Some(was)) => {
                self.disown(&was.address, key);
                self.sync(&was.address);
                true
            }
            Some(None) => true,
            None => false,
        }
    }

    fn disown(&mut self, address: &Address, key: &str) {
        if let Some(keys) = self.owners.get_mut(address) {
            if let Ok(at) = keys.binary_search_by(|k| (**k).cmp(key)) {
                keys.remove(at);
            }
            if keys.is_empty() {
                self.owners.remove(address);
            }
        }
    }

    /// The instance its first key gives `address`, if any key names it.
    fn instance_at(&self, address: &Address) -> Option<&Arc<Instance>> {
        let first = self.owners.get(address)?.first()?;
        self.by_key.get(&**first)?.as_ref()
    }

    /// Makes the list agree with the keys about `address`: what its first key says
    /// when listed (or when there is room), nothing when no key names it (and a
    /// waiting address takes its place).
    fn sync(&mut self, address: &Address) {
        match self.instance_at(address).cloned() {
            Some(instance) => {
                if self.listed.contains(address) || self.listed.len() < self.max_instances {
                    self.listed.insert(address.clone());
                    self.steps.push(Step::Put(instance));
                } else if self.waiting_set.insert(address.clone()) {
                    self.waiting.push_back(address.clone());
                }
            }
            None => {
                if self.listed.remove(address) {
                    self.steps.push(Step::Remove(address.clone()));
                    self.admit_waiting();
                } else if self.waiting_set.remove(address) {
                    self.compact_waiting();
                }
            }
        }
    }

    /// Lists waiting addresses while there is room.
    fn admit_waiting(&mut self) {
        while self.listed.len() < self.max_instances {
            let Some(next) = self.waiting.pop_front() else {
                return;
            };
            if self.waiting_set.remove(&next)
                && let Some(instance) = self.instance_at(&next).cloned()
            {
                self.listed.insert(next);
                self.steps.push(Step::Put(instance));
            }
        }
    }

    /// Drops stale entries of the waiting queue once they outnumber the live ones.
    fn compact_waiting(&mut self) {
        if self.waiting.len() > 2 * self.waiting_set.len() + 16 {
            let live = &self.waiting_set;
            self.waiting.retain(|a| live.contains(a));
        }
    }

    /// `key` as text when it is one of this service's instance keys: valid UTF-8
    /// under the service's prefix, with something after it. Else logged and counted.
    fn own_key<'k>(&self, key: &'k [u8], counters: &Counters) -> Option<&'k str> {
        let ok = std::str::from_utf8(key)
            .ok()
            .filter(|k| k.len() > self.key_prefix.len() && k.starts_with(&self.key_prefix));
        if ok.is_none() {
            tracing::warn!(
                key = %String::from_utf8_lossy(key),
                prefix = self.key_prefix,
                "etcd discovery: key outside the service's prefix skipped"
            );
            Counters::add(&counters.skipped_values, 1);
        }
        ok
    }

    /// What changed since the last call: the steps of the puts and deletes since,
    /// or the whole list after a read. Logs when the limit starts or stops leaving
    /// instances out.
    pub(crate) fn take_update(&mut self, counters: &Counters) -> Update {
        let left_out = self.waiting_set.len();
        if left_out != self.left_out {
            if self.left_out == 0 {
                tracing::warn!(
                    prefix = self.key_prefix,
                    max = self.max_instances,
                    left_out,
                    "etcd discovery: more instances than the limit; the last to come are \
                     left out until listed ones leave"
                );
            } else if left_out == 0 {
                tracing::info!(
                    prefix = self.key_prefix,
                    "etcd discovery: back under the limit"
                );
            }
            self.left_out = left_out;
        }
        counters
            .over_limit
            .store(left_out as u64, Ordering::Relaxed);
        let steps = std::mem::take(&mut self.steps);
        if !std::mem::take(&mut self.whole) {
            return Update::Steps(steps);
        }
        let mut list = Vec::with_capacity(self.listed.len());
        for (key, instance) in &self.by_key {
            if let Some(i) = instance
                && self.listed.contains(&i.address)
                && self.owners.get(&i.address).and_then(|k| k.first()) == Some(key)
            {
                list.push((**i).clone());
            }
        }
        Update::Whole(list)
    }
}

#[cfg(test)]
mod tests {
    use volo_core::client::InstanceList;

    use super::*;

    fn entries(max_instances: usize) -> Entries {
        Entries::new(
            "/p/echo/".into(),
            "echo",
            Layout::Native,
            128,
            max_instances,
            Route::tcp_only(),
        )
    }

    fn value(addr: &str, weight: u32) -> Vec<u8> {
        format!(r#"{{"addresses":["{addr}"],"weight":{weight}}}"#).into_bytes()
    }

    /// A discovery's list, fed the updates as the watcher feeds it.
    struct Fed(InstanceList);

    impl Fed {
        fn new() -> Self {
            Fed(InstanceList::default())
        }

        /// Takes the update, applies it, and shows the list (sorted: the list's
        /// order is the order instances came in).
        fn shown(&mut self, e: &mut Entries, c: &Counters) -> Vec<String> {
            match e.take_update(c) {
                Update::Steps(steps) => {
                    if let Some(next) = self.0.apply(steps) {
                        self.0 = next;
                    }
                }
                Update::Whole(list) => self.0 = InstanceList::new(list),
            }
            let mut shown: Vec<String> = self
                .0
                .to_vec()
                .iter()
                .map(|i| format!("{}/{}", i.address, i.weight))
                .collect();
            shown.sort();
            shown
        }
    }

    fn put(e: &mut Entries, c: &Counters, key: &str, addr: &str, weight: u32) {
        e.put(key.as_bytes(), &value(addr, weight), c);
    }

    #[test]
    fn puts_and_deletes_make_steps_and_a_read_the_whole_list() {
        let c = Counters::default();
        let mut e = entries(10);
        let mut fed = Fed::new();
        put(&mut e, &c, "/p/echo/b", "10.0.0.2:80", 100);
        put(&mut e, &c, "/p/echo/a", "10.0.0.1:80", 100);
        assert_eq!(
            fed.shown(&mut e, &c),
            ["10.0.0.1:80/100", "10.0.0.2:80/100"]
        );
        put(&mut e, &c, "/p/echo/a", "10.0.0.1:80", 5);
        e.delete(b"/p/echo/b");
        e.delete(b"/p/echo/never");
        assert_eq!(
            e.take_update(&c),
            Update::Steps(vec![
                Step::put(Instance {
                    weight: 5,
                    ..Instance::new("10.0.0.1:80".parse().unwrap())
                }),
                Step::Remove("10.0.0.2:80".parse().unwrap()),
            ])
        );
        assert_eq!(e.take_update(&c), Update::Steps(vec![]), "nothing since");
        // A read starts over: the whole list, in key order.
        e.clear();
        put(&mut e, &c, "/p/echo/x", "10.0.0.9:80", 1);
        put(&mut e, &c, "/p/echo/y", "10.0.0.8:80", 1);
        let Update::Whole(list) = e.take_update(&c) else {
            panic!("a whole list after a read");
        };
        let addrs: Vec<String> = list.iter().map(|i| i.address.to_string()).collect();
        assert_eq!(addrs, ["10.0.0.9:80", "10.0.0.8:80"]);
    }

    #[test]
    fn an_address_named_by_two_keys_is_listed_once_from_the_first_key() {
        let c = Counters::default();
        let mut e = entries(10);
        let mut fed = Fed::new();
        put(&mut e, &c, "/p/echo/b", "10.0.0.1:80", 20);
        put(&mut e, &c, "/p/echo/a", "10.0.0.1:80", 10);
        assert_eq!(
            fed.shown(&mut e, &c),
            ["10.0.0.1:80/10"],
            "key a comes first"
        );
        e.delete(b"/p/echo/a");
        assert_eq!(
            fed.shown(&mut e, &c),
            ["10.0.0.1:80/20"],
            "b still names it"
        );
        // b moves to another address: the first one is gone.
        put(&mut e, &c, "/p/echo/b", "10.0.0.2:80", 20);
        assert_eq!(fed.shown(&mut e, &c), ["10.0.0.2:80/20"]);
    }

    #[test]
    fn bad_keys_and_values_are_skipped_and_counted() {
        let c = Counters::default();
        let mut e = entries(10);
        let mut fed = Fed::new();
        e.put(b"/p/echo/a", &value("10.0.0.1:80", 100), &c);
        // A bad value replaces a good one: the key no longer names a usable instance.
        e.put(b"/p/echo/a", b"{nope", &c);
        e.put(b"/p/echo/", &value("10.0.0.3:80", 100), &c);
        e.put(b"/p/other/x", &value("10.0.0.4:80", 100), &c);
        e.put(b"/p/echo/\xff", &value("10.0.0.5:80", 100), &c);
        e.put(b"/p/echo/big", &[b' '; 129], &c);
        e.put(b"/p/echo/c", br#"{"addresses":["x","10.0.0.6:80"]}"#, &c);
        e.put(b"/p/echo/d", br#"{"addresses":["unix:/only/local"]}"#, &c);
        assert_eq!(fed.shown(&mut e, &c), ["10.0.0.6:80/100"]);
        assert_eq!(c.skipped_values.load(Ordering::Relaxed), 5);
        assert_eq!(c.skipped_addresses.load(Ordering::Relaxed), 1);
        assert_eq!(c.unroutable.load(Ordering::Relaxed), 1);
        // A key whose instance cannot be routed any more takes it out of the list.
        e.put(b"/p/echo/c", br#"{"addresses":["unix:/only/local"]}"#, &c);
        assert!(fed.shown(&mut e, &c).is_empty());
    }

    #[test]
    fn the_list_is_bounded_and_waiting_instances_take_the_place_of_leavers() {
        let c = Counters::default();
        let mut e = entries(2);
        let mut fed = Fed::new();
        for i in 0..5 {
            put(
                &mut e,
                &c,
                &format!("/p/echo/{i}"),
                &format!("10.0.0.{i}:80"),
                100,
            );
        }
        assert_eq!(
            fed.shown(&mut e, &c),
            ["10.0.0.0:80/100", "10.0.0.1:80/100"]
        );
        assert_eq!(c.over_limit.load(Ordering::Relaxed), 3);
        // 0 leaves: 2 (first to wait) takes its place; 3 leaves while waiting.
        e.delete(b"/p/echo/0");
        e.delete(b"/p/echo/3");
        assert_eq!(
            fed.shown(&mut e, &c),
            ["10.0.0.1:80/100", "10.0.0.2:80/100"]
        );
        assert_eq!(c.over_limit.load(Ordering::Relaxed), 1);
        e.delete(b"/p/echo/1");
        assert_eq!(
            fed.shown(&mut e, &c),
            ["10.0.0.2:80/100", "10.0.0.4:80/100"]
        );
        assert_eq!(c.over_limit.load(Ordering::Relaxed), 0);
        // Churn while over the limit does not grow the waiting queue without bound.
        for i in 10..1_000 {
            put(
                &mut e,
                &c,
                "/p/echo/w",
                &format!("10.0.{}.{}:80", i / 256, i % 256),
                1,
            );
        }
        assert!(
            e.waiting.len() <= 2 * e.waiting_set.len() + 17,
            "{}",
            e.waiting.len()
        );
    }

    #[test]
    fn keys_beyond_the_bound_are_not_kept_and_a_delete_then_asks_for_a_read() {
        let c = Counters::default();
        // One instance listed: at most 16 keys kept.
        let mut e = entries(1);
        let mut fed = Fed::new();
        assert_eq!(e.max_keys(), 16);
        for i in 0..20 {
            put(
                &mut e,
                &c,
                &format!("/p/echo/{i:02}"),
                &format!("10.0.0.{i}:80"),
                100,
            );
        }
        assert_eq!(e.by_key.len(), 16);
        assert_eq!(c.keys_dropped.load(Ordering::Relaxed), 4);
        // A key kept is still updated.
        put(&mut e, &c, "/p/echo/00", "10.0.0.0:80", 7);
        assert_eq!(fed.shown(&mut e, &c), ["10.0.0.0:80/7"]);
        // When it moves to another address, that is a new instance: it waits behind
        // those that came before it, and the first of them takes the place.
        put(&mut e, &c, "/p/echo/00", "10.0.0.99:80", 7);
        assert_eq!(fed.shown(&mut e, &c), ["10.0.0.1:80/100"]);
        // A delete of an untracked key changes nothing; of a kept one, asks for a read.
        e.delete(b"/p/echo/19");
        assert!(!e.take_resync());
        e.delete(b"/p/echo/03");
        assert!(e.take_resync());
        assert!(!e.take_resync(), "asked once");
        e.clear();
        e.delete(b"/p/echo/04");
        assert!(!e.take_resync(), "after a full read, nothing is untracked");
    }

    #[test]
    fn instances_of_the_same_tags_share_one_copy_and_unused_copies_go() {
        let c = Counters::default();
        let mut e = entries(100);
        let tagged = |addr: &str, zone: &str| {
            format!(r#"{{"addresses":["{addr}"],"tags":{{"zone":"{zone}"}}}}"#).into_bytes()
        };
        e.put(b"/p/echo/a", &tagged("10.0.0.1:80", "z1"), &c);
        e.put(b"/p/echo/b", &tagged("10.0.0.2:80", "z1"), &c);
        e.put(b"/p/echo/c", &tagged("10.0.0.3:80", "z2"), &c);
        let tags = |e: &Entries, k: &str| Arc::clone(&e.by_key[k].as_ref().unwrap().tags);
        assert!(Arc::ptr_eq(&tags(&e, "a"), &tags(&e, "b")));
        assert!(!Arc::ptr_eq(&tags(&e, "a"), &tags(&e, "c")));
        assert_eq!(tags(&e, "c").get("zone").map(String::as_str), Some("z2"));
        // Sets of tags nobody holds any more are dropped as new ones come.
        for i in 0..200 {
            let zone = format!("once-{i}");
            e.put(b"/p/echo/d", &tagged("10.0.0.4:80", &zone), &c);
            e.take_update(&c);
        }
        assert!(e.tags.len() < 60, "{} sets kept", e.tags.len());
    }
}
