//! Governance from etcd: a client's timeouts, retry and breaker rules and a server's
//! limits read from keys in the layout of Kitex's config-etcd, watched, and applied
//! to a running client or server through volo-core's
//! [governance handles](volo_core::governance).
//!
//! # The keys
//!
//! As config-etcd writes them, under a prefix ([`KITEX_CONFIG_PREFIX`] by default):
//!
//! ```text
//! {prefix}/{caller}/{callee}/rpc_timeout     a client's timeouts per method
//! {prefix}/{caller}/{callee}/retry           its retry and backup rules
//! {prefix}/{caller}/{callee}/circuit_break   its breaker thresholds
//! {prefix}/{service}/limit                   a server's limits
//! ```
//!
//! holding the JSON of Kitex's config centers ([`volo_core::governance::kitex`]), so a
//! Kitex client and one of ours can be governed by one set of keys. `caller` is the
//! client's own service name, `callee` the service it calls.
//!
//! # What happens to a value
//!
//! A watch started at the revision of the first read sees every change. A value put
//! is parsed and checked; a good one is applied at once (the next call uses it) and
//! logged at `info`; a bad one (not JSON of the category's shape, out of range, not
//! UTF-8, over [`EtcdConfig::max_value_bytes`]) is refused with a `warn` line naming
//! the key and what is wrong, counted as refused by the handle (its `updates` and
//! `rpc_governance_updates_total`), and the last good value stays in force. A key deleted
//! puts the category's defaults back (the builder's settings), as Kitex does. Keys
//! of categories this crate does not build (`degradation`) are logged once and left.
//!
//! When the watch breaks (etcd down, the revision compacted) the values in force
//! are kept, and the keys are read again when etcd answers, with the same
//! backoff as discovery; only values that differ from those applied are applied
//! again, so a reconnect changes nothing that did not change.

use std::collections::HashMap;

use etcd_client::{Client, EventType, GetOptions, WatchResponse};
use tokio::task::JoinHandle;
use volo_core::governance::{ClientCategory, ClientGovernance, GovernanceError, ServerGovernance};
use volo_core::registry::RegistryError;

use crate::config::EtcdConfig;
use crate::etcd::{EtcdError, check_service, timed};
use crate::follow::{self, End, Follow};

/// The prefix of Kitex's config-etcd (`Options.Prefix`'s default).
pub const KITEX_CONFIG_PREFIX: &str = "/KitexConfig";

/// Follows governance keys in etcd while it lives (a background task, stopped when
/// this is dropped). See the [module docs](self).
#[derive(Debug)]
pub struct GovernanceWatch {
    task: JoinHandle<()>,
}

impl Drop for GovernanceWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Where a key's values go.
#[derive(Clone)]
enum Target {
    Client(ClientGovernance),
    Server(ServerGovernance),
}

impl GovernanceWatch {
    /// Follows the rules of a client of `callee` that calls as `caller`, under
    /// `prefix` ([`KITEX_CONFIG_PREFIX`] for config-etcd's keys), into `governance`
    /// (give the same handle to the client's
    /// [`ClientBuilder::governance`](volo_core::client::ClientBuilder::governance)).
    /// The keys are read before this returns (an error when etcd does not answer
    /// within [`EtcdConfig::timeout`]), so the first call already has them.
    pub async fn client(
        config: EtcdConfig,
        prefix: &str,
        caller: &str,
        callee: &str,
        governance: ClientGovernance,
    ) -> Result<Self, RegistryError> {
        check_service(caller)?;
        check_service(callee)?;
        let keys = format!("{}/{caller}/{callee}/", prefix.trim_end_matches('/'));
        Self::start(config, keys, Target::Client(governance)).await
    }

    /// Follows the limits of a server of `service` under `prefix`, into
    /// `governance` (give the same handle to the server's
    /// [`Server::governance`](volo_core::server::Server::governance)).
    pub async fn server(
        config: EtcdConfig,
        prefix: &str,
        service: &str,
        governance: ServerGovernance,
    ) -> Result<Self, RegistryError> {
        check_service(service)?;
        let keys = format!("{}/{service}/", prefix.trim_end_matches('/'));
        Self::start(config, keys, Target::Server(governance)).await
    }

    async fn start(
        config: EtcdConfig,
        keys: String,
        target: Target,
    ) -> Result<Self, RegistryError> {
        let client = crate::etcd::client(&config).await?;
        let mut follower = Follower {
            client,
            config,
            keys,
            target,
            applied: HashMap::new(),
            ignored: Vec::new(),
        };
        let revision = follower.read().await.map_err(|e| {
            e.context(format!(
                "etcd governance: reading {} from etcd at {:?}",
                follower.keys, follower.config.endpoints
            ))
        })?;
        Ok(GovernanceWatch {
            task: tokio::spawn(follow::run(follower, revision + 1)),
        })
    }
}

/// The background task's state.
struct Follower {
    client: Client,
    config: EtcdConfig,
    /// The prefix of the keys followed, ending in `/`.
    keys: String,
    target: Target,
    /// The value applied for each category key (its last segment), as given.
    applied: HashMap<String, Vec<u8>>,
    /// Keys of categories not built here, logged once.
    ignored: Vec<String>,
}

impl Follower {
    /// Reads the keys and applies what changed; the revision read at.
    async fn read(&mut self) -> Result<i64, EtcdError> {
        let mut kv = self.client.kv_client();
        let answer = timed(
            self.config.timeout,
            kv.get(self.keys.as_str(), Some(GetOptions::new().with_prefix())),
        )
        .await?;
        let mut present: Vec<String> = Vec::new();
        for kv in answer.kvs() {
            if let Some(name) = self.category_of(kv.key()) {
                present.push(name.clone());
                self.put(&name, kv.value());
            }
        }
        let gone: Vec<String> = self
            .applied
            .keys()
            .filter(|k| !present.contains(k))
            .cloned()
            .collect();
        for name in gone {
            self.delete(&name);
        }
        Ok(answer.header().map_or(0, |h| h.revision()))
    }

    /// The category a key names, if it is one of the keys followed (one segment
    /// under the prefix).
    fn category_of(&self, key: &[u8]) -> Option<String> {
        let rest = key.strip_prefix(self.keys.as_bytes())?;
        let name = std::str::from_utf8(rest).ok()?;
        (!name.is_empty() && !name.contains('/')).then(|| name.to_string())
    }

    /// Applies `value` to the category `name`, unless it is the one applied.
    fn put(&mut self, name: &str, value: &[u8]) {
        if self.applied.get(name).is_some_and(|v| v == value) {
            return;
        }
        let key = format!("{}{name}", self.keys);
        match self.apply(name, Some(value)) {
            None => {}
            Some(Ok(())) => {
                let text = String::from_utf8_lossy(value);
                tracing::info!(key, value = %text, "etcd governance: applied");
                self.applied.insert(name.to_string(), value.to_vec());
            }
            Some(Err(error)) => {
                // The value in the line only when it is text of a length to show.
                let text = match &error {
                    GovernanceError::TooLarge { .. } | GovernanceError::NotText => None,
                    _ => Some(String::from_utf8_lossy(value)),
                };
                tracing::warn!(
                    key,
                    value = text.as_deref().unwrap_or("(not shown)"),
                    %error,
                    "etcd governance: value refused; keeping the last good one"
                );
                // Not recorded as applied: the same value again is judged again.
            }
        }
    }

    /// Puts the category `name`'s defaults back.
    fn delete(&mut self, name: &str) {
        self.applied.remove(name);
        let key = format!("{}{name}", self.keys);
        if let Some(Ok(())) = self.apply(name, None) {
            tracing::info!(key, "etcd governance: key removed; defaults back in force");
        }
    }

    /// Gives `value` to the handle; `None` for a key of a category not built here.
    fn apply(&mut self, name: &str, value: Option<&[u8]>) -> Option<Result<(), GovernanceError>> {
        let max = self.config.max_value_bytes;
        let result = match &self.target {
            Target::Client(g) => match ClientCategory::from_kitex_name(name) {
                Some(category) => g.apply_kitex_bytes(category, value, max),
                None => return self.ignore(name),
            },
            Target::Server(g) if name == "limit" => g.apply_kitex_bytes(value, max),
            Target::Server(_) => return self.ignore(name),
        };
        Some(result)
    }

    fn ignore(&mut self, name: &str) -> Option<Result<(), GovernanceError>> {
        if !self.ignored.iter().any(|n| n == name) {
            tracing::info!(
                key = format!("{}{name}", self.keys),
                "etcd governance: a category not built here; ignored"
            );
            self.ignored.push(name.to_string());
        }
        None
    }
}

impl Follow for Follower {
    const WHAT: &'static str = "etcd governance";

    fn keys(&self) -> &str {
        &self.keys
    }

    fn client(&self) -> (&Client, std::time::Duration) {
        (&self.client, self.config.timeout)
    }

    async fn read(&mut self) -> Result<i64, EtcdError> {
        Follower::read(self).await
    }

    fn answer(&mut self, answer: &WatchResponse) -> Option<End> {
        for event in answer.events() {
            let Some(kv) = event.kv() else { continue };
            let Some(name) = self.category_of(kv.key()) else {
                continue;
            };
            match event.event_type() {
                EventType::Put => self.put(&name, kv.value()),
                EventType::Delete => self.delete(&name),
            }
        }
        None
    }
}
