//! The programs' etcd side: the flags of a server that registers
//! ([`Registration`]: `--registry`, `--registry-layout`, `--weight`, `--host-id`,
//! `--lease-ttl`), and a
//! client's discovery that follows etcd and prints each change as it comes
//! ([`follow`]). `echo-server` and `stream-server` register through the first,
//! `echo-client` and `stream-check` follow through the second.
//!
//! All of it needs the `etcd` feature (see the crate docs). Without it the flags
//! still parse as flags, and their values are refused ([`options::etcd_url`]), so no
//! [`EtcdUrl`] exists and the functions here are never reached.

use std::time::Duration;

use volo_core::client::Discover;
use volo_core::server::{Dispatch, Server};

use crate::cli::Usage;
use crate::options::{self, EtcdUrl};

/// A server's registration in etcd, from its command line (flattened into the
/// program's flags).
#[derive(Debug, Clone, clap::Args)]
pub struct Registration {
    /// Registers every address in etcd under the service's name (needs the `etcd`
    /// feature).
    #[arg(long, value_name = "etcd://HOST:PORT[,HOST:PORT...]", value_parser = options::etcd_url)]
    pub registry: Option<EtcdUrl>,

    /// How the registration is written: `native` (every address and the host
    /// identity, under /thrift-rpc/services) or `kitex` (the first TCP address as
    /// Kitex's etcd registry writes it, under kitex/registry-etcd, where Kitex's
    /// clients find it).
    #[arg(
        long,
        value_enum,
        value_name = "LAYOUT",
        default_value = "native",
        requires = "registry"
    )]
    pub registry_layout: RegistryLayout,

    /// The weight registered [default: 100; with --registry-layout kitex, Kitex's
    /// default, 10, so that ours and Kitex's servers take even shares].
    #[arg(long, value_name = "N", requires = "registry")]
    pub weight: Option<u32>,

    /// The host identity registered [default: /etc/machine-id].
    #[arg(long, value_name = "ID", requires = "registry")]
    pub host_id: Option<String>,

    /// A tag registered with the instance (repeatable); `rack` and `zone` give its
    /// locality, which a client's `--rack`/`--zone` tiers prefer by.
    #[arg(long, value_name = "KEY=VALUE", requires = "registry",
          value_parser = options::key_value)]
    pub tag: Vec<(String, String)>,

    /// The registration's lease, in seconds, kept alive while the server runs.
    #[arg(long, value_name = "SECS", default_value = "10", requires = "registry",
          value_parser = options::positive_seconds)]
    pub lease_ttl: Duration,
}

impl Registration {
    /// `server`, registered in the etcd of `--registry` (if given) with `--weight`,
    /// `--host-id` and `--lease-ttl`: it registers once it listens, and deregisters
    /// on a graceful shutdown before it drains.
    pub async fn apply<S: Dispatch, L, St>(
        &self,
        server: Server<S, L, St>,
    ) -> Result<Server<S, L, St>, Usage> {
        match &self.registry {
            Some(url) => self.register(server, url).await,
            None => Ok(server),
        }
    }

    #[cfg(feature = "etcd")]
    async fn register<S: Dispatch, L, St>(
        &self,
        server: Server<S, L, St>,
        url: &EtcdUrl,
    ) -> Result<Server<S, L, St>, Usage> {
        use etcd_registry::EtcdRegistry;
        use volo_core::registry::RegistryInfo;

        let mut etcd = self.registry_layout.config(url);
        etcd.lease_ttl = self.lease_ttl;
        let default_weight = match etcd.layout {
            etcd_registry::Layout::Native => RegistryInfo::default().weight,
            etcd_registry::Layout::Kitex => etcd_registry::KITEX_DEFAULT_WEIGHT,
        };
        let info = RegistryInfo {
            weight: self.weight.unwrap_or(default_weight),
            host: self.host_id.clone().or(RegistryInfo::default().host),
            tags: self.tag.iter().cloned().collect(),
        };
        let registry = EtcdRegistry::connect(etcd)
            .await
            .map_err(|e| Usage(format!("--registry {}: {e}", url.url)))?;
        Ok(server.registry(registry, info))
    }

    /// Without the `etcd` feature no [`EtcdUrl`] exists (`--registry` is refused).
    #[cfg(not(feature = "etcd"))]
    async fn register<S: Dispatch, L, St>(
        &self,
        _: Server<S, L, St>,
        url: &EtcdUrl,
    ) -> Result<Server<S, L, St>, Usage> {
        match *url {}
    }
}

/// Governance from etcd, from a program's command line (`--governance`,
/// `--governance-prefix`): a server's limits or a client's timeouts, retry and breaker
/// rules, in the key layout of Kitex's config-etcd, followed while the program runs
/// (see `etcd_registry::governance`).
#[derive(Debug, Clone, clap::Args)]
pub struct GovernanceArgs {
    /// Follows governance keys in this etcd, in Kitex's config-etcd layout: a server's
    /// `{prefix}/{service}/limit`, a client's `{prefix}/{caller}/{service}/{rpc_timeout,
    /// retry,circuit_break}` (needs the `etcd` feature).
    #[arg(long, value_name = "etcd://HOST:PORT[,HOST:PORT...]", value_parser = options::etcd_url)]
    pub governance: Option<EtcdUrl>,

    /// The prefix of the governance keys (config-etcd's default).
    #[arg(
        long,
        value_name = "PREFIX",
        default_value = "/KitexConfig",
        requires = "governance"
    )]
    pub governance_prefix: String,
}

/// Keeps a governance watch going while it lives.
pub type WatchGuard = Box<dyn std::any::Any + Send>;

impl GovernanceArgs {
    /// `server`, following the limits of `service` in the etcd of `--governance`
    /// (if given); keep the guard while it serves.
    pub async fn server<S: Dispatch, L, St>(
        &self,
        server: Server<S, L, St>,
        service: &str,
    ) -> Result<(Server<S, L, St>, Option<WatchGuard>), Usage> {
        let Some(url) = &self.governance else {
            return Ok((server, None));
        };
        #[cfg(feature = "etcd")]
        {
            let gov = volo_core::governance::ServerGovernance::new(service);
            let config = etcd_registry::EtcdConfig::new(url.endpoints.clone());
            let watch = etcd_registry::GovernanceWatch::server(
                config,
                &self.governance_prefix,
                service,
                gov.clone(),
            )
            .await
            .map_err(|e| Usage(format!("--governance {}: {e}", url.url)))?;
            Ok((server.governance(gov), Some(Box::new(watch))))
        }
        #[cfg(not(feature = "etcd"))]
        {
            let _ = (server, service);
            match *url {}
        }
    }

    /// The rules of a client of `service` calling as `caller`, followed in the etcd of
    /// `--governance` (if given): give the handle to the builder, keep the guard.
    pub async fn client(
        &self,
        caller: &str,
        service: &str,
    ) -> Result<Option<(volo_core::governance::ClientGovernance, WatchGuard)>, Usage> {
        let Some(url) = &self.governance else {
            return Ok(None);
        };
        #[cfg(feature = "etcd")]
        {
            let gov = volo_core::governance::ClientGovernance::new(service);
            let config = etcd_registry::EtcdConfig::new(url.endpoints.clone());
            let watch = etcd_registry::GovernanceWatch::client(
                config,
                &self.governance_prefix,
                caller,
                service,
                gov.clone(),
            )
            .await
            .map_err(|e| Usage(format!("--governance {}: {e}", url.url)))?;
            Ok(Some((gov, Box::new(watch) as WatchGuard)))
        }
        #[cfg(not(feature = "etcd"))]
        {
            let _ = (caller, service);
            match *url {}
        }
    }
}

/// How instances are written in etcd (`--registry-layout`): this project's layout,
/// or Kitex's etcd registry's (see `etcd_registry::Layout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum RegistryLayout {
    /// Every address of an instance and its host identity, under
    /// `/thrift-rpc/services`.
    #[default]
    Native,
    /// As `kitex-contrib/registry-etcd` writes them, under `kitex/registry-etcd`.
    Kitex,
}

#[cfg(feature = "etcd")]
impl RegistryLayout {
    /// The config for the etcd of `url` in this layout (with its default prefix).
    fn config(self, url: &EtcdUrl) -> etcd_registry::EtcdConfig {
        let endpoints = url.endpoints.clone();
        match self {
            RegistryLayout::Native => etcd_registry::EtcdConfig::new(endpoints),
            RegistryLayout::Kitex => etcd_registry::EtcdConfig::kitex(endpoints),
        }
    }
}

/// The instances registered in etcd under `service`, followed: each change printed
/// on stderr as it comes, `<program>: discovered unix_ms=<n> added=<addrs>
/// removed=<addrs> updated=<addrs> now=<n>` (`-` for none; the first line lists what
/// was there at the start), read in `layout`. Those of this host over shared memory
/// or a Unix socket when `local`, else all over TCP.
#[cfg(feature = "etcd")]
pub async fn follow(
    url: &EtcdUrl,
    layout: RegistryLayout,
    service: &str,
    local: bool,
    program: &'static str,
) -> Result<Box<dyn Discover>, Usage> {
    use etcd_registry::EtcdDiscover;
    use futures_util::StreamExt;
    use volo_core::client::{Change, Instance, InstanceList};
    use volo_core::registry::Route;

    use crate::attempts::unix_ms;

    /// `added=<addrs> removed=<addrs> updated=<addrs> now=<n>` for a discovery change.
    fn change_line(change: &Change) -> String {
        let list = |l: &[Instance]| {
            if l.is_empty() {
                "-".to_string()
            } else {
                l.iter()
                    .map(|i| i.address.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            }
        };
        format!(
            "added={} removed={} updated={} now={}",
            list(&change.added),
            list(&change.removed),
            list(&change.updated),
            change.list.len()
        )
    }

    let route = if local {
        Route::for_this_host()
    } else {
        Route::tcp_only()
    };
    let found = EtcdDiscover::connect(layout.config(url), service, route)
        .await
        .map_err(|e| Usage(format!("--discover {}: {e}", url.url)))?;
    eprintln!(
        "{program}: discovered unix_ms={} {}",
        unix_ms(),
        change_line(&Change::between(&InstanceList::default(), &found.list()))
    );
    let mut changes = found.changes();
    tokio::spawn(async move {
        while let Some(change) = changes.next().await {
            let line = change_line(&change);
            eprintln!("{program}: discovered unix_ms={} {line}", unix_ms());
        }
    });
    Ok(Box::new(found))
}

/// Without the `etcd` feature no [`EtcdUrl`] exists (`--discover` is refused).
#[cfg(not(feature = "etcd"))]
pub async fn follow(
    url: &EtcdUrl,
    _: RegistryLayout,
    _: &str,
    _: bool,
    _: &'static str,
) -> Result<Box<dyn Discover>, Usage> {
    match *url {}
}

/// How a program names the etcd it follows, in its logs: the URL as given.
#[cfg(feature = "etcd")]
pub fn etcd_target(url: &EtcdUrl) -> String {
    url.url.clone()
}

/// Without the `etcd` feature no [`EtcdUrl`] exists.
#[cfg(not(feature = "etcd"))]
pub fn etcd_target(url: &EtcdUrl) -> String {
    match *url {}
}

/// The endpoints of the etcd at `url`, or of one started here on a free loopback
/// port (which needs the `etcd` binary) when none is given; keep the second half as
/// long as that etcd is used (dropping it stops it).
#[cfg(feature = "etcd")]
pub fn etcd_or_local(
    url: Option<EtcdUrl>,
) -> Result<(Vec<String>, Option<etcd_registry::testing::Etcd>), Usage> {
    match url {
        Some(url) => Ok((url.endpoints, None)),
        None => {
            let etcd = etcd_registry::testing::Etcd::start().ok_or_else(|| {
                Usage("no etcd binary: install etcd-server, or give --etcd".into())
            })?;
            let url = options::etcd_url(&etcd.url()).map_err(Usage)?;
            Ok((url.endpoints, Some(etcd)))
        }
    }
}
