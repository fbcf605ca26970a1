//! The etcd client as both sides use it: one way to connect, one bound on every
//! request, one mapping of failures to [`RegistryError`].

use std::future::Future;
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};
use volo_core::registry::RegistryError;

use crate::config::EtcdConfig;

/// How often HTTP/2 pings check a connection that carries a stream (a watch, a
/// keepalive): a member that vanished without closing the connection is noticed
/// within this plus the request timeout. etcd refuses pings more often than every
/// 5 s by default (`--grpc-keepalive-min-time`).
const PING_INTERVAL: Duration = Duration::from_secs(10);

/// Why an etcd request failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EtcdError {
    /// No answer in time.
    #[error("no answer from etcd within {0:?}")]
    Timeout(Duration),
    /// etcd or the connection to it failed it.
    #[error(transparent)]
    Etcd(#[from] etcd_client::Error),
}

impl EtcdError {
    /// A [`RegistryError`] saying `what` failed because of this.
    pub(crate) fn context(self, what: impl std::fmt::Display) -> RegistryError {
        let message = format!("{what}: {self}");
        RegistryError::with_source(message, self)
    }
}

/// A client for `config`'s endpoints. It connects on first use (the connection is
/// lazy), so this fails only on an endpoint that is not a `host:port`.
pub(crate) async fn client(config: &EtcdConfig) -> Result<Client, RegistryError> {
    if config.endpoints.is_empty() {
        return Err(RegistryError::new("etcd: no endpoint configured"));
    }
    let options = ConnectOptions::new()
        .with_connect_timeout(config.timeout)
        .with_keep_alive(PING_INTERVAL, config.timeout);
    Client::connect(&config.endpoints, Some(options))
        .await
        .map_err(|e| EtcdError::Etcd(e).context(format!("etcd at {:?}", config.endpoints)))
}

/// `request`, bounded by `timeout`.
pub(crate) async fn timed<T>(
    timeout: Duration,
    request: impl Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, EtcdError> {
    match tokio::time::timeout(timeout, request).await {
        Ok(answer) => Ok(answer?),
        Err(_) => Err(EtcdError::Timeout(timeout)),
    }
}

/// Whether `service` can be a key segment: not empty, no `/` (which would put one
/// service's keys under another's prefix).
pub(crate) fn check_service(service: &str) -> Result<(), RegistryError> {
    if service.is_empty() || service.contains('/') {
        return Err(RegistryError::new(format!(
            "etcd registry: service name {service:?} must be non-empty and without '/'"
        )));
    }
    Ok(())
}
