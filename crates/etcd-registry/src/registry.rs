//! The server side: [`EtcdRegistry`] puts an instance's key under a lease and keeps
//! that lease alive (or takes a new one) until the instance is deregistered.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use etcd_client::{Client, GetOptions, LeaseKeepAliveStream, LeaseKeeper, PutOptions};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use volo_core::context::Address;
use volo_core::registry::{Registration, Registry, RegistryError, RegistryFuture};

use crate::config::{EtcdConfig, Layout};
use crate::etcd::{EtcdError, check_service, timed};
use crate::keeper::{KeepAlive, Keeper, Report, Task};
use crate::timing::lease_ttl_secs;
use crate::value;

/// A [`Registry`] over etcd v3: each registered instance is a key,
/// `{prefix}/{service}/{first address}`, holding its
/// [JSON value](crate#the-keys-and-values), attached to a lease of its own that a
/// background task keeps alive.
///
/// While etcd is unreachable the task retries with a backoff; when the lease is lost
/// (etcd says it is gone, or did not answer for a whole TTL) it grants a new one and
/// puts the key again, so an instance comes back by itself after an etcd outage or
/// restart. Each change of state is logged once.
///
/// Registering an instance whose key is registered already replaces it (its value
/// is written again, under a new lease). Clones share their registrations. Dropping
/// the last clone stops the keepalives without deleting anything: the keys leave
/// etcd when their leases run out, at most [`lease_ttl`](EtcdConfig::lease_ttl)
/// later; [`deregister`](Registry::deregister) removes a key at once (also one this
/// registry did not register: deregistering is idempotent), then revokes its lease.
#[derive(Clone)]
pub struct EtcdRegistry {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    config: EtcdConfig,
    ttl_secs: i64,
    /// The keeper task of each registered key.
    keepers: Mutex<HashMap<String, KeeperHandle>>,
}

/// A running keeper task: stopped by a send on `stop`, or when `stop` is dropped
/// (with the registry); it returns the lease it held.
struct KeeperHandle {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Option<i64>>,
}

impl KeeperHandle {
    /// Stops the task; the lease it held.
    async fn stop(self) -> Option<i64> {
        let _ = self.stop.send(());
        self.task.await.ok().flatten()
    }
}

/// `instance`'s key in `config`'s layout, and the address it is filed under.
fn key_of<'r>(
    config: &EtcdConfig,
    instance: &'r Registration,
) -> Result<(String, &'r Address), RegistryError> {
    check_service(&instance.service)?;
    let layout = config.layout;
    let at = value::key_address(layout, instance).ok_or_else(|| {
        RegistryError::new(match layout {
            Layout::Native => format!(
                "etcd registry: instance of {:?} has no address",
                instance.service
            ),
            Layout::Kitex => format!(
                "etcd registry: instance of {:?} has no TCP address, the only kind \
                 Kitex's layout holds (addresses: {:?})",
                instance.service, instance.addresses
            ),
        })
    })?;
    let key = format!("{}{at}", config.service_prefix(&instance.service));
    Ok((key, at))
}

impl EtcdConfig {
    /// The key and value an [`EtcdRegistry`] of this configuration writes for
    /// `instance`, for a tool that writes many registrations under leases of its own
    /// (a fleet simulation, a migration); refused as `register` refuses it (no
    /// address the layout can file it under, a value over `max_value_bytes`).
    pub fn entry(&self, instance: &Registration) -> Result<(String, Vec<u8>), RegistryError> {
        let (key, at) = key_of(self, instance)?;
        let value = value::encode(self.layout, instance, at);
        if value.len() > self.max_value_bytes {
            return Err(RegistryError::new(format!(
                "etcd registry: the value of {key} is {} bytes, over max_value_bytes ({}): \
                 discovery would skip it",
                value.len(),
                self.max_value_bytes
            )));
        }
        Ok((key, value))
    }
}

impl fmt::Debug for EtcdRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<String> = self.keepers().keys().cloned().collect();
        f.debug_struct("EtcdRegistry")
            .field("config", &self.inner.config)
            .field("registered", &keys)
            .finish()
    }
}

impl EtcdRegistry {
    /// A registry over the etcd of `config`, checked by one read (bounded by
    /// [`timeout`](EtcdConfig::timeout)), so that an etcd nobody can reach is an
    /// error here rather than at the first registration.
    pub async fn connect(config: EtcdConfig) -> Result<Self, RegistryError> {
        let client = crate::etcd::client(&config).await?;
        let mut kv = client.kv_client();
        let probe = kv.get(
            config.trimmed_prefix(),
            Some(GetOptions::new().with_count_only()),
        );
        timed(config.timeout, probe)
            .await
            .map_err(|e| e.context(format!("etcd at {:?}", config.endpoints)))?;
        Ok(EtcdRegistry {
            inner: Arc::new(Inner {
                client,
                ttl_secs: lease_ttl_secs(config.lease_ttl),
                config,
                keepers: Mutex::new(HashMap::new()),
            }),
        })
    }

    fn keepers(&self) -> std::sync::MutexGuard<'_, HashMap<String, KeeperHandle>> {
        // The map holds no invariant a panic elsewhere could break.
        self.inner
            .keepers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// `instance`'s key, and the address it is filed under.
    fn key<'r>(&self, instance: &'r Registration) -> Result<(String, &'r Address), RegistryError> {
        key_of(&self.inner.config, instance)
    }

    async fn register_instance(&self, instance: &Registration) -> Result<(), RegistryError> {
        let (key, value) = self.inner.config.entry(instance)?;
        let previous = self.keepers().remove(&key);
        let old_lease = match previous {
            Some(keeper) => keeper.stop().await,
            None => None,
        };
        let inner = &self.inner;
        let lease = put_with_new_lease(&inner.client, &inner.config, inner.ttl_secs, &key, &value)
            .await
            .map_err(|e| e.context(format!("etcd registry: registering {key}")))?;
        if let Some(old) = old_lease {
            revoke_quietly(&inner.client, &inner.config, old).await;
        }
        let (stop, stopped) = oneshot::channel();
        let driver = Driver {
            client: inner.client.clone(),
            config: inner.config.clone(),
            ttl_secs: inner.ttl_secs,
            key: key.clone(),
            value,
            keeper: Keeper::new(lease, inner.ttl_secs, Instant::now()),
            stream: None,
        };
        let task = tokio::spawn(driver.run(stopped));
        tracing::debug!(key, lease, "etcd registry: registered");
        if let Some(raced) = self.keepers().insert(key, KeeperHandle { stop, task }) {
            // Another registration of the same key finished meanwhile: this one
            // replaces it; its task stops, its lease runs out by itself.
            drop(raced.stop);
        }
        Ok(())
    }

    async fn deregister_instance(&self, instance: &Registration) -> Result<(), RegistryError> {
        let (key, _) = self.key(instance)?;
        let keeper = self.keepers().remove(&key);
        let lease = match keeper {
            Some(keeper) => keeper.stop().await,
            None => None,
        };
        let config = &self.inner.config;
        let mut kv = self.inner.client.kv_client();
        timed(config.timeout, kv.delete(key.as_str(), None))
            .await
            .map_err(|e| e.context(format!("etcd registry: deleting {key}")))?;
        if let Some(lease) = lease {
            revoke_quietly(&self.inner.client, config, lease).await;
        }
        tracing::debug!(key, "etcd registry: deregistered");
        Ok(())
    }
}

impl Registry for EtcdRegistry {
    fn register<'a>(&'a self, instance: &'a Registration) -> RegistryFuture<'a> {
        Box::pin(self.register_instance(instance))
    }

    fn deregister<'a>(&'a self, instance: &'a Registration) -> RegistryFuture<'a> {
        Box::pin(self.deregister_instance(instance))
    }
}

/// Grants a lease of `ttl_secs` and puts `key` with it; the lease. (A lease granted
/// for a put that then fails is left to run out.)
async fn put_with_new_lease(
    client: &Client,
    config: &EtcdConfig,
    ttl_secs: i64,
    key: &str,
    value: &[u8],
) -> Result<i64, EtcdError> {
    let mut leases = client.lease_client();
    let lease = timed(config.timeout, leases.grant(ttl_secs, None))
        .await?
        .id();
    let mut kv = client.kv_client();
    let put = kv.put(key, value, Some(PutOptions::new().with_lease(lease)));
    timed(config.timeout, put).await?;
    Ok(lease)
}

/// Revokes `lease`; a failure is only logged (the lease runs out by itself).
async fn revoke_quietly(client: &Client, config: &EtcdConfig, lease: i64) {
    let mut leases = client.lease_client();
    if let Err(error) = timed(config.timeout, leases.revoke(lease)).await {
        tracing::debug!(lease, %error, "etcd registry: revoking a lease failed; it will run out");
    }
}

/// The task that keeps one key registered.
struct Driver {
    client: Client,
    config: EtcdConfig,
    ttl_secs: i64,
    key: String,
    value: Vec<u8>,
    keeper: Keeper,
    /// The keepalive stream of the lease held, once opened.
    stream: Option<(LeaseKeeper, LeaseKeepAliveStream)>,
}

impl Driver {
    /// Keeps the key registered until `stop` fires or is dropped; the lease held.
    async fn run(mut self, mut stop: oneshot::Receiver<()>) -> Option<i64> {
        loop {
            let (wait, task) = self.keeper.next();
            tokio::select! {
                biased;
                _ = &mut stop => break,
                () = tokio::time::sleep(wait) => {}
            }
            let (reports, error) = tokio::select! {
                biased;
                _ = &mut stop => break,
                done = self.step(task) => done,
            };
            for report in reports {
                self.log(report, error.as_ref());
            }
        }
        self.keeper.lease()
    }

    /// Does `task`; what the keeper reports of it, and the error when it failed.
    async fn step(&mut self, task: Task) -> (Vec<Report>, Option<EtcdError>) {
        match task {
            Task::KeepAlive(lease) => {
                let (outcome, error) = self.keep_alive(lease).await;
                (self.keeper.on_keepalive(outcome, Instant::now()), error)
            }
            Task::Register { old } => {
                let put = put_with_new_lease(
                    &self.client,
                    &self.config,
                    self.ttl_secs,
                    &self.key,
                    &self.value,
                )
                .await;
                match put {
                    Ok(lease) => {
                        if let Some(old) = old {
                            revoke_quietly(&self.client, &self.config, old).await;
                        }
                        self.stream = None;
                        (self.keeper.on_register(Some(lease), Instant::now()), None)
                    }
                    Err(error) => (self.keeper.on_register(None, Instant::now()), Some(error)),
                }
            }
        }
    }

    /// One keepalive of `lease`, on its open stream, or on a new one when there is
    /// none or it broke (opening one sends a keepalive too).
    async fn keep_alive(&mut self, lease: i64) -> (KeepAlive, Option<EtcdError>) {
        let timeout = self.config.timeout;
        if let Some((keeper, responses)) = &mut self.stream {
            let answer = timed(timeout, async {
                keeper.keep_alive().await?;
                responses.message().await
            })
            .await;
            match answer {
                Ok(Some(r)) if r.ttl() > 0 => return (KeepAlive::Alive, None),
                Ok(Some(_)) => return (KeepAlive::Gone, None),
                // The stream broke: try a new one now.
                Ok(None) | Err(_) => self.stream = None,
            }
        }
        let mut leases = self.client.lease_client();
        match timed(timeout, leases.keep_alive(lease)).await {
            Ok(opened) => {
                self.stream = Some(opened);
                (KeepAlive::Alive, None)
            }
            // etcd-client's word for a first answer of TTL 0: no such lease.
            Err(EtcdError::Etcd(etcd_client::Error::LeaseKeepAliveError(_))) => {
                (KeepAlive::Gone, None)
            }
            Err(error) => (KeepAlive::Failed, Some(error)),
        }
    }

    fn log(&self, report: Report, error: Option<&EtcdError>) {
        let key = &self.key;
        let lease = self.keeper.lease();
        match report {
            Report::Down => tracing::warn!(
                key,
                error = error.map(tracing::field::display),
                "etcd registry: etcd is not answering; retrying"
            ),
            Report::Up => tracing::info!(key, "etcd registry: etcd answers again; lease kept"),
            Report::LeaseGone => {
                tracing::warn!(key, "etcd registry: etcd lost the lease; registering again")
            }
            Report::LeasePresumedLost => tracing::warn!(
                key,
                lease,
                "etcd registry: no keepalive for a whole TTL; registering again"
            ),
            Report::Registered(lease) => {
                tracing::info!(key, lease, "etcd registry: registered again")
            }
        }
    }
}
