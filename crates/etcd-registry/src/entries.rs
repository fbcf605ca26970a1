//! What discovery knows of one service, without I/O: the instances by key, fed the
//! keys and values etcd returns (a range, then watch events), and the list they make.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use volo_core::client::Instance;
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

/// One service's instances by key.
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
    /// Each valid key's instance; `None`: registered, but with no address this
    /// client can use (see [`Route`]).
    by_key: BTreeMap<String, Option<Instance>>,
    /// How many instances the last list left out (logged when it changes).
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

    /// Forgets every key (before a new range fills it again).
    pub(crate) fn clear(&mut self) {
        self.by_key.clear();
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
        if self.by_key.len() >= self.max_keys && !self.by_key.contains_key(key) {
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
                self.by_key.insert(key.to_string(), instance);
            }
            Err(why) => {
                tracing::warn!(key, %why, "etcd discovery: value skipped");
                Counters::add(&counters.skipped_values, 1);
                self.by_key.remove(key);
            }
        }
    }

    /// `key` was deleted.
    pub(crate) fn delete(&mut self, key: &[u8]) {
        if let Ok(key) = std::str::from_utf8(key)
            && self.by_key.remove(key).is_some()
            && self.truncated
        {
            self.resync = true;
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

    /// The instances, in key order, at most `max_instances` of them.
    pub(crate) fn list(&mut self, counters: &Counters) -> Vec<Instance> {
        let mut usable = self.by_key.values().flatten();
        let list: Vec<Instance> = usable.by_ref().take(self.max_instances).cloned().collect();
        let left_out = usable.count();
        if left_out != self.left_out {
            if left_out > 0 {
                tracing::warn!(
                    prefix = self.key_prefix,
                    max = self.max_instances,
                    left_out,
                    "etcd discovery: more instances than the limit; the last by key are left out"
                );
            } else {
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
        list
    }
}

#[cfg(test)]
mod tests {
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

    fn shown(list: &[Instance]) -> Vec<String> {
        list.iter()
            .map(|i| format!("{}/{}", i.address, i.weight))
            .collect()
    }

    #[test]
    fn puts_and_deletes_make_a_list_in_key_order() {
        let c = Counters::default();
        let mut e = entries(10);
        e.put(b"/p/echo/b", &value("10.0.0.2:80", 100), &c);
        e.put(b"/p/echo/a", &value("10.0.0.1:80", 100), &c);
        assert_eq!(shown(&e.list(&c)), ["10.0.0.1:80/100", "10.0.0.2:80/100"]);
        e.put(b"/p/echo/a", &value("10.0.0.1:80", 5), &c);
        e.delete(b"/p/echo/b");
        e.delete(b"/p/echo/never");
        assert_eq!(shown(&e.list(&c)), ["10.0.0.1:80/5"]);
        e.clear();
        assert!(e.list(&c).is_empty());
    }

    #[test]
    fn bad_keys_and_values_are_skipped_and_counted() {
        let c = Counters::default();
        let mut e = entries(10);
        e.put(b"/p/echo/a", &value("10.0.0.1:80", 100), &c);
        // A bad value replaces a good one: the key no longer names a usable instance.
        e.put(b"/p/echo/a", b"{nope", &c);
        e.put(b"/p/echo/", &value("10.0.0.3:80", 100), &c);
        e.put(b"/p/other/x", &value("10.0.0.4:80", 100), &c);
        e.put(b"/p/echo/\xff", &value("10.0.0.5:80", 100), &c);
        e.put(b"/p/echo/big", &[b' '; 129], &c);
        e.put(b"/p/echo/c", br#"{"addresses":["x","10.0.0.6:80"]}"#, &c);
        e.put(b"/p/echo/d", br#"{"addresses":["unix:/only/local"]}"#, &c);
        assert_eq!(shown(&e.list(&c)), ["10.0.0.6:80/100"]);
        assert_eq!(c.skipped_values.load(Ordering::Relaxed), 5);
        assert_eq!(c.skipped_addresses.load(Ordering::Relaxed), 1);
        assert_eq!(c.unroutable.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn the_list_is_bounded_and_says_how_many_it_left_out() {
        let c = Counters::default();
        let mut e = entries(2);
        for i in 0..5 {
            e.put(
                format!("/p/echo/{i}").as_bytes(),
                &value(&format!("10.0.0.{i}:80"), 100),
                &c,
            );
        }
        assert_eq!(shown(&e.list(&c)), ["10.0.0.0:80/100", "10.0.0.1:80/100"]);
        assert_eq!(c.over_limit.load(Ordering::Relaxed), 3);
        e.delete(b"/p/echo/0");
        e.delete(b"/p/echo/3");
        e.delete(b"/p/echo/4");
        assert_eq!(e.list(&c).len(), 2);
        assert_eq!(c.over_limit.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn keys_beyond_the_bound_are_not_kept_and_a_delete_then_asks_for_a_read() {
        let c = Counters::default();
        // One instance listed: at most 16 keys kept.
        let mut e = entries(1);
        assert_eq!(e.max_keys(), 16);
        for i in 0..20 {
            e.put(
                format!("/p/echo/{i:02}").as_bytes(),
                &value(&format!("10.0.0.{i}:80"), 100),
                &c,
            );
        }
        assert_eq!(e.by_key.len(), 16);
        assert_eq!(c.keys_dropped.load(Ordering::Relaxed), 4);
        // A key kept is still updated.
        e.put(b"/p/echo/00", &value("10.0.0.99:80", 7), &c);
        assert_eq!(shown(&e.list(&c)), ["10.0.0.99:80/7"]);
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
}
