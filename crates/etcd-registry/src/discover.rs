//! The client side: [`EtcdDiscover`] reads a service's instances, then follows their
//! changes with a watch, into a [`DiscoverList`] the balancer reads.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use etcd_client::{Client, EventType, GetOptions, WatchOptions};
use tokio::task::JoinHandle;
use volo_core::client::{Changes, Discover, DiscoverList, Instance};
use volo_core::registry::{RegistryError, Route};

use crate::config::EtcdConfig;
use crate::entries::{Counters, Entries};
use crate::etcd::{EtcdError, check_service, timed};
use crate::timing::backoff;

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
/// The list holds, in key order and at most
/// [`max_instances`](EtcdConfig::max_instances) of them, the instance
/// [`Route::instance`] makes of each registration; values it cannot read are logged
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
            down: false,
        };
        let revision = watcher.range().await.map_err(|e| {
            e.context(format!(
                "etcd discovery: reading {} from etcd at {:?}",
                watcher.key_prefix, watcher.config.endpoints
            ))
        })?;
        let list = Arc::clone(&watcher.list);
        let task = tokio::spawn(watcher.run(watch_from.unwrap_or(revision + 1)));
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
    fn instances(&self) -> Arc<[Instance]> {
        self.list.instances()
    }

    fn changes(&self) -> Changes {
        self.list.changes()
    }
}

/// Why a watch stopped.
enum End {
    /// etcd compacted the revision it was at.
    Compacted(i64),
    /// A kept key was deleted while others were not followed: read them again.
    Untracked,
    /// It failed or ended.
    Broken(String),
}

/// The background task's state.
struct Watcher {
    client: Client,
    config: EtcdConfig,
    key_prefix: String,
    entries: Entries,
    counters: Arc<Counters>,
    list: Arc<DiscoverList>,
    /// Whether the last word logged was that the watch broke.
    down: bool,
}

impl Watcher {
    /// Reads the whole service into the list; the revision read at.
    async fn range(&mut self) -> Result<i64, EtcdError> {
        let mut kv = self.client.kv_client();
        let limit = i64::try_from(self.entries.max_keys()).unwrap_or(i64::MAX);
        let read = kv.get(
            self.key_prefix.as_str(),
            Some(GetOptions::new().with_prefix().with_limit(limit)),
        );
        let answer = timed(self.config.timeout, read).await?;
        let revision = answer.header().map_or(0, |h| h.revision());
        self.entries.clear();
        for kv in answer.kvs() {
            self.entries.put(kv.key(), kv.value(), &self.counters);
        }
        if answer.more() {
            self.entries.truncated_read(&self.counters);
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

    fn publish(&mut self) {
        let list = self.entries.list(&self.counters);
        self.list.set(list);
    }

    /// Follows changes from `start` on, for ever.
    async fn run(mut self, mut start: i64) {
        let mut failures = 0u32;
        loop {
            match self.watch(start, &mut failures).await {
                End::Compacted(compacted) => {
                    tracing::warn!(
                        prefix = self.key_prefix,
                        start,
                        compacted,
                        "etcd discovery: watch revision compacted; reading the service again"
                    );
                    Counters::add(&self.counters.compactions, 1);
                }
                End::Untracked => {
                    tracing::debug!(
                        prefix = self.key_prefix,
                        "etcd discovery: a key was deleted while others were not followed; \
                         reading the service again"
                    );
                }
                End::Broken(error) => {
                    Counters::add(&self.counters.watch_restarts, 1);
                    self.broke(&error);
                    failures = failures.saturating_add(1);
                    tokio::time::sleep(backoff(failures)).await;
                }
            }
            start = loop {
                match self.range().await {
                    Ok(revision) => break revision + 1,
                    Err(error) => {
                        self.broke(&error.to_string());
                        failures = failures.saturating_add(1);
                        tokio::time::sleep(backoff(failures)).await;
                    }
                }
            };
            Counters::add(&self.counters.resyncs, 1);
            if std::mem::take(&mut self.down) {
                tracing::info!(
                    prefix = self.key_prefix,
                    "etcd discovery: etcd answers again; list read again"
                );
            }
        }
    }

    /// Logs that the watch broke, once until it works again.
    fn broke(&mut self, error: &str) {
        if std::mem::replace(&mut self.down, true) {
            tracing::debug!(
                prefix = self.key_prefix,
                error,
                "etcd discovery: retry failed"
            );
        } else {
            tracing::warn!(
                prefix = self.key_prefix,
                error,
                "etcd discovery: watch broke; keeping the last list and reconnecting"
            );
        }
    }

    /// Watches from `start` until the watch stops; `failures` is reset once it
    /// is established.
    async fn watch(&mut self, start: i64, failures: &mut u32) -> End {
        let mut client = self.client.watch_client();
        let options = WatchOptions::new().with_prefix().with_start_revision(start);
        let opened = timed(
            self.config.timeout,
            client.watch(self.key_prefix.as_str(), Some(options)),
        )
        .await;
        let mut stream = match opened {
            Ok(stream) => stream,
            Err(error) => return End::Broken(error.to_string()),
        };
        loop {
            let answer = match stream.message().await {
                Ok(Some(answer)) => answer,
                Ok(None) => return End::Broken("the watch stream ended".to_string()),
                Err(error) => return End::Broken(error.to_string()),
            };
            if answer.compact_revision() > 0 {
                return End::Compacted(answer.compact_revision());
            }
            if answer.canceled() {
                return End::Broken(format!("watch canceled: {}", answer.cancel_reason()));
            }
            if answer.created() {
                *failures = 0;
            }
            if let Some(header) = answer.header() {
                self.seen(header.revision());
            }
            if answer.events().is_empty() {
                continue;
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
            if self.entries.take_resync() {
                return End::Untracked;
            }
        }
    }
}
