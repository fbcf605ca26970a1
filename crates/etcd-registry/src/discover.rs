//! The client side: [`EtcdDiscover`] reads a service's instances, then follows their
//! changes with a watch, into a [`DiscoverList`] the balancer reads.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use etcd_client::{Client, EventType, GetOptions, WatchResponse};
use tokio::task::JoinHandle;
use volo_core::client::{Changes, Discover, DiscoverList, InstanceList};
use volo_core::registry::{RegistryError, Route};

use crate::config::EtcdConfig;
use crate::entries::{Counters, Entries, Update};
use crate::etcd::{EtcdError, check_service, timed};
use crate::follow::{self, End, Follow};

/// What an [`EtcdDiscover`] has done so far (for tests, logs and metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DiscoverStats {
    /// Reads of the whole service after the first one: after a compaction, or after
    /// the watch broke.
    pub resyncs: u64,
    /// Watches canceled by etcd because the revision they were at was compacted.
    pub compactions: u64,
    /// Watches that broke (an error, the stream ended, etcd went away) and were
    /// started again.
    pub watch_restarts: u64,
    /// Watch events applied (puts and deletes).
    pub events: u64,
    /// Values skipped: keys outside the service's prefix, values over
    /// `max_value_bytes`, malformed JSON, no address that parses.
    pub skipped_values: u64,
    /// Addresses that did not parse, left out of values otherwise used.
    pub skipped_addresses: u64,
    /// Values read whose instance has no address this client can use (see
    /// [`Route`]); not an error, they are just not listed.
    pub unroutable: u64,
    /// Instances left out of the current list for `max_instances` (now, not a sum).
    pub over_limit: u64,
    /// Keys not followed because the service had more than 4 × `max_instances`
    /// keys (counted per read that stopped there and per put it dropped).
    pub keys_dropped: u64,
    /// The latest etcd revision seen.
    pub revision: i64,
}

/// A [`Discover`] over etcd: one service's instances, read at `connect`, then kept
/// up to date by a watch in a background task (stopped when this is dropped).
///
/// The list holds, at most [`max_instances`](EtcdConfig::max_instances) of them,
/// the instance [`Route::instance`] makes of each registration (of several keys
/// naming one address, the first by key). A read of the whole service goes a page at
/// a time (all at one revision), and each watch event changes the list by steps
/// ([`DiscoverList::apply`]): applying a change costs what changed, not the number
/// of instances, for the list and for the balancers that follow it; values it cannot read are logged
/// and skipped ([`DiscoverStats`] counts them). While etcd is unreachable the last
/// list stays; the watch is started again with a backoff (50 ms doubling to 2 s)
/// and the whole service read again before it follows changes, so nothing that
/// happened meanwhile is missed. A watch whose revision was compacted away is
/// followed by such a read at once.
pub struct EtcdDiscover {
    service: String,
    list: Arc<DiscoverList>,
    counters: Arc<Counters>,
    task: JoinHandle<()>,
}

impl fmt::Debug for EtcdDiscover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdDiscover")
            .field("service", &self.service)
            .field("instances", &self.list.instances().len())
            .field("stats", &self.stats())
            .finish()
    }
}

impl Drop for EtcdDiscover {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl EtcdDiscover {
    /// `service`'s instances as `route` calls them: read now (an error when etcd
    /// does not answer within [`timeout`](EtcdConfig::timeout)), then watched.
    pub async fn connect(
        config: EtcdConfig,
        service: &str,
        route: Route,
    ) -> Result<Self, RegistryError> {
        Self::start(config, service, route, None).await
    }

    /// As [`connect`](Self::connect), but the watch starts at `revision` rather
    /// than after the first read: for tests of what happens when that revision was
    /// compacted away.
    #[doc(hidden)]
    pub async fn connect_watching_from(
        config: EtcdConfig,
        service: &str,
        route: Route,
        revision: i64,
    ) -> Result<Self, RegistryError> {
        Self::start(config, service, route, Some(revision)).await
    }

    async fn start(
        config: EtcdConfig,
        service: &str,
        route: Route,
        watch_from: Option<i64>,
    ) -> Result<Self, RegistryError> {
        check_service(service)?;
        let client = crate::etcd::client(&config).await?;
        let key_prefix = config.service_prefix(service);
        let counters = Arc::new(Counters::default());
        let entries = Entries::new(
            key_prefix.clone(),
            service,
            config.layout,
            config.max_value_bytes,
            config.max_instances,
            route,
        );
        let mut watcher = Watcher {
            client,
            config,
            key_prefix,
            entries,
            counters: Arc::clone(&counters),
            list: Arc::new(DiscoverList::default()),
        };
        let revision = watcher.range().await.map_err(|e| {
            e.context(format!(
                "etcd discovery: reading {} from etcd at {:?}",
                watcher.key_prefix, watcher.config.endpoints
            ))
        })?;
        let list = Arc::clone(&watcher.list);
        let task = tokio::spawn(follow::run(watcher, watch_from.unwrap_or(revision + 1)));
        Ok(EtcdDiscover {
            service: service.to_string(),
            list,
            counters,
            task,
        })
    }

    /// The counters so far.
    pub fn stats(&self) -> DiscoverStats {
        let c = &*self.counters;
        let get = |n: &std::sync::atomic::AtomicU64| n.load(Ordering::Relaxed);
        DiscoverStats {
            resyncs: get(&c.resyncs),
            compactions: get(&c.compactions),
            watch_restarts: get(&c.watch_restarts),
            events: get(&c.events),
            skipped_values: get(&c.skipped_values),
            skipped_addresses: get(&c.skipped_addresses),
            unroutable: get(&c.unroutable),
            over_limit: get(&c.over_limit),
            keys_dropped: get(&c.keys_dropped),
            revision: c.revision.load(Ordering::Relaxed),
        }
    }
}

impl Discover for EtcdDiscover {
    fn list(&self) -> InstanceList {
        self.list.list()
    }

    fn changes(&self) -> Changes {
        self.list.changes()
    }
}

/// Keys read per page of a read: a page stays under the 4 MiB a gRPC answer may
/// carry even when every value is as large as discovery reads (`max_value_bytes`)
/// and keys are up to 1 KiB; at most 1,000.
fn page_keys(max_value_bytes: usize) -> i64 {
    let per_key = max_value_bytes.saturating_add(1024);
    i64::try_from((3 * 1024 * 1024 / per_key).clamp(16, 1000)).unwrap_or(16)
}

/// The end of the range of keys that start with `prefix` (etcd's `range_end` for a
/// prefix: its last byte below 0xff moved up by one, what follows dropped).
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Only 0xff bytes (or none): every key from the prefix on.
    vec![0]
}

/// The background task's state.
struct Watcher {
    client: Client,
    config: EtcdConfig,
    key_prefix: String,
    entries: Entries,
    counters: Arc<Counters>,
    list: Arc<DiscoverList>,
}

impl Watcher {
    /// Reads the whole service into the list, a page at a time, every page at the
    /// revision of the first; the revision read at.
    async fn range(&mut self) -> Result<i64, EtcdError> {
        let mut kv = self.client.kv_client();
        let page = page_keys(self.config.max_value_bytes);
        let end = prefix_end(self.key_prefix.as_bytes());
        self.entries.clear();
        let mut from = self.key_prefix.as_bytes().to_vec();
        let mut revision = 0;
        let mut kept = 0usize;
        loop {
            let left = self.entries.max_keys().saturating_sub(kept);
            let limit = page.min(i64::try_from(left).unwrap_or(i64::MAX));
            let mut options = GetOptions::new().with_range(end.clone()).with_limit(limit);
            if revision > 0 {
                options = options.with_revision(revision);
            }
            let answer = timed(self.config.timeout, kv.get(from.clone(), Some(options))).await?;
            if revision == 0 {
                revision = answer.header().map_or(0, |h| h.revision());
            }
            for kv in answer.kvs() {
                self.entries.put(kv.key(), kv.value(), &self.counters);
            }
            kept += answer.kvs().len();
            let Some(last) = answer.kvs().last().filter(|_| answer.more()) else {
                break;
            };
            if kept >= self.entries.max_keys() {
                // The service has more keys than discovery keeps.
                self.entries.truncated_read(&self.counters);
                break;
            }
            // The next page starts just after the last key read.
            from = [last.key(), &[0]].concat();
        }
        self.seen(revision);
        self.publish();
        Ok(revision)
    }

    fn seen(&self, revision: i64) {
        self.counters
            .revision
            .fetch_max(revision, Ordering::Relaxed);
    }

    /// Makes the list what the keys say: by the steps since the last time, or as a
    /// whole after a read.
    fn publish(&mut self) {
        match self.entries.take_update(&self.counters) {
            Update::Steps(steps) => self.list.apply(steps),
            Update::Whole(list) => self.list.set(list),
        };
    }
}

impl Follow for Watcher {
    const WHAT: &'static str = "etcd discovery";

    fn keys(&self) -> &str {
        &self.key_prefix
    }

    fn client(&self) -> (&Client, std::time::Duration) {
        (&self.client, self.config.timeout)
    }

    async fn read(&mut self) -> Result<i64, EtcdError> {
        self.range().await
    }

    fn answer(&mut self, answer: &WatchResponse) -> Option<End> {
        if let Some(header) = answer.header() {
            self.seen(header.revision());
        }
        if answer.events().is_empty() {
            return None;
        }
        for event in answer.events() {
            let Some(kv) = event.kv() else { continue };
            match event.event_type() {
                EventType::Put => self.entries.put(kv.key(), kv.value(), &self.counters),
                EventType::Delete => self.entries.delete(kv.key()),
            }
            Counters::add(&self.counters.events, 1);
        }
        self.publish();
        self.entries.take_resync().then_some(End::Untracked)
    }

    fn ended(&mut self, end: &End) {
        match end {
            End::Compacted(_) => Counters::add(&self.counters.compactions, 1),
            End::Broken(_) => Counters::add(&self.counters.watch_restarts, 1),
            End::Untracked => {}
        }
    }

    fn read_again(&mut self) {
        Counters::add(&self.counters.resyncs, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_ends_where_its_last_byte_moves_up() {
        assert_eq!(prefix_end(b"/p/echo/"), b"/p/echo0");
        assert_eq!(prefix_end(b"a\xff\xff"), b"b");
        assert_eq!(prefix_end(b"\xff"), [0]);
        assert_eq!(prefix_end(b""), [0]);
    }

    #[test]
    fn pages_stay_under_the_answer_limit() {
        assert_eq!(page_keys(100), 1000);
        assert_eq!(page_keys(64 * 1024), 47);
        assert_eq!(page_keys(usize::MAX), 16);
        for bytes in [1, 4096, 64 * 1024, 1 << 20] {
            let worst = page_keys(bytes) as usize * (bytes + 1024);
            assert!(
                worst < 4 << 20 || page_keys(bytes) == 16,
                "{bytes}: {worst}"
            );
        }
    }
}
