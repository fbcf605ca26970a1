//! Service registries and discovery, which both sides use: what a server registers
//! ([`Registration`]), the trait a registry implements for the server ([`Registry`]),
//! the host identity that tells a client which instances run on its machine
//! ([`host_id`]), which address of an instance a client calls ([`Route`]), and what
//! a client's balancer picks among ([`Instance`], found through [`Discover`]).
//!
//! A registry client for discovery implements [`Discover`] (usually over a
//! [`DiscoverList`]); the etcd one is the `etcd-registry` crate.
//!
//! # Registering with a server
//!
//! [`Server::registry`](crate::server::Server::registry) gives a server a registry.
//! Its instance is registered once it listens, before it serves the first call, with
//! every address it listens on ([`Server::bind_all`](crate::server::Server::bind_all))
//! and this host's identity; a failed registration is the server's start-up error (as
//! in Kitex: an instance nobody can find is a misconfiguration to see at once). On a
//! graceful shutdown it is deregistered first, and the drain starts after that, so
//! clients that follow the registry stop sending new calls while the ones in progress
//! finish. Keeping the registration alive (leases, keepalives, registering again after
//! the registry lost it) is the registry's job.
//!
//! # Local first
//!
//! An instance that serves TCP, a Unix socket and shared memory registers all three,
//! and the [`host_id`] of its machine. A client on the same machine
//! ([`Route::for_this_host`]) calls it over shared memory (or the Unix socket when it
//! has no shared-memory address), and every other instance over TCP; the
//! [`LocalFirst`](crate::client::LocalFirst) balancer then keeps a set share of the
//! calls on the local ones.

mod discover;
mod list;
mod watch;

pub use discover::{
    Change, Changes, Discover, Instance, Locality, StaticDiscover, Tags, Tier, no_changes,
};
pub use list::{InstanceList, Step};
pub use watch::DiscoverList;

/// A test's instance on loopback port `port`, of weight `weight`.
#[cfg(test)]
pub(crate) fn inst(port: u16, weight: u32) -> Instance {
    Instance {
        weight,
        ..Instance::new(Address::Tcp(([127, 0, 0, 1], port).into()))
    }
}

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use crate::context::Address;

/// A future a [`Registry`] returns.
pub type RegistryFuture<'a> = Pin<Box<dyn Future<Output = Result<(), RegistryError>> + Send + 'a>>;

/// What a registry holds for one instance of a service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// The service's name (the key prefix a registry files it under).
    pub service: String,
    /// Every address it serves on, in the order it prefers them for remote callers.
    pub addresses: Vec<Address>,
    /// Its share of the calls relative to the others (0: none). Default 100.
    pub weight: u32,
    /// Its labels.
    pub tags: BTreeMap<String, String>,
    /// The identity of the machine it runs on ([`host_id`]), when known.
    pub host: Option<String>,
}

impl Registration {
    /// `service` served at `addresses`, with weight 100, no tags, and this machine's
    /// [`host_id`].
    pub fn new(service: impl Into<String>, addresses: Vec<Address>) -> Self {
        Registration {
            service: service.into(),
            addresses,
            weight: 100,
            tags: BTreeMap::new(),
            host: host_id().map(str::to_string),
        }
    }
}

/// How a server's instance is described when registered: all but its addresses and
/// its service, which the server knows ([`Server::registry`](crate::server::Server::registry)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryInfo {
    /// Its share of the calls (default 100).
    pub weight: u32,
    /// Its labels (default none).
    pub tags: BTreeMap<String, String>,
    /// The identity of the machine it runs on; by default this one's ([`host_id`]).
    /// Set it to make an instance look remote (tests, measurements) or to share one
    /// identity across containers of one host.
    pub host: Option<String>,
}

impl Default for RegistryInfo {
    fn default() -> Self {
        RegistryInfo {
            weight: 100,
            tags: BTreeMap::new(),
            host: host_id().map(str::to_string),
        }
    }
}

/// A registry a server registers its instance with.
///
/// `register` returns once the instance is registered, and keeps it registered
/// (leases, keepalives, registering again after an outage) until `deregister`. Both
/// are called once per service a server serves. They take `&self`, so one registry
/// may register several instances.
pub trait Registry: Send + Sync + 'static {
    /// Registers `instance` and keeps it registered.
    fn register<'a>(&'a self, instance: &'a Registration) -> RegistryFuture<'a>;

    /// Removes `instance`, and stops keeping it registered.
    fn deregister<'a>(&'a self, instance: &'a Registration) -> RegistryFuture<'a>;
}

impl<R: Registry + ?Sized> Registry for Arc<R> {
    fn register<'a>(&'a self, instance: &'a Registration) -> RegistryFuture<'a> {
        (**self).register(instance)
    }

    fn deregister<'a>(&'a self, instance: &'a Registration) -> RegistryFuture<'a> {
        (**self).deregister(instance)
    }
}

/// Why a registry refused or failed an operation.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct RegistryError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl RegistryError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        RegistryError {
            message: message.into(),
            source: None,
        }
    }

    /// An error saying `message`, caused by `source`.
    pub fn with_source(
        message: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        RegistryError {
            message: message.into(),
            source: Some(source.into()),
        }
    }
}

/// Why a machine id file gave no identity.
#[derive(Debug, thiserror::Error)]
pub enum HostIdError {
    /// It could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// What reading it said.
        source: io::Error,
    },
    /// It does not hold an id as machine-id(5) writes one: 32 hexadecimal digits and
    /// an optional newline.
    #[error("{path} does not hold a machine id (32 hexadecimal digits)")]
    Malformed {
        /// The file.
        path: String,
    },
}

/// The machine id in `path` (machine-id(5): 32 lower-case hexadecimal digits, then a
/// newline), in lower case.
pub fn read_host_id(path: &Path) -> Result<String, HostIdError> {
    let shown = || path.display().to_string();
    // A machine id file is 33 bytes; anything much longer is not one, so reading
    // stops early rather than taking in whatever the path holds.
    let mut bytes = Vec::with_capacity(64);
    let file = std::fs::File::open(path).map_err(|source| HostIdError::Read {
        path: shown(),
        source,
    })?;
    io::Read::read_to_end(&mut io::Read::take(file, 64), &mut bytes).map_err(|source| {
        HostIdError::Read {
            path: shown(),
            source,
        }
    })?;
    let text = std::str::from_utf8(&bytes)
        .ok()
        .map(|t| t.strip_suffix('\n').unwrap_or(t))
        .filter(|t| t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| HostIdError::Malformed { path: shown() })?;
    Ok(text.to_ascii_lowercase())
}

/// This machine's identity, from `/etc/machine-id` (read once); `None`, with a
/// warning logged once, when that file is missing or malformed. Instances without a
/// host identity are never taken for local ones.
pub fn host_id() -> Option<&'static str> {
    static ID: OnceLock<Option<String>> = OnceLock::new();
    ID.get_or_init(|| match read_host_id(Path::new("/etc/machine-id")) {
        Ok(id) => Some(id),
        Err(error) => {
            tracing::warn!(%error, "no host identity: every instance is taken for a remote one");
            None
        }
    })
    .as_deref()
}

/// Which of a registered instance's addresses a client calls.
///
/// An instance on the client's machine (the same [`host_id`]) is called over its
/// first shared-memory address, else its first Unix-socket one, else as a remote one;
/// a remote one over its first TCP address (`ip:port` or `name:port`). An instance
/// with no address the client can use is left out.
///
/// The instance carries its [`Locality`]: the registration's host identity, and its
/// tags `rack` and `zone` (Kitex's registrations carry tags too).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Route {
    /// This client's host; `None`: every instance is remote.
    host: Option<String>,
    /// Whether shared memory is used for local instances (else only Unix sockets).
    shm: bool,
}

impl Route {
    /// Local instances over shared memory (or a Unix socket), the others over TCP.
    pub fn for_this_host() -> Self {
        Route {
            host: host_id().map(str::to_string),
            shm: true,
        }
    }

    /// As if on host `host` (tests, measurements).
    pub fn for_host(host: impl Into<String>) -> Self {
        Route {
            host: Some(host.into()),
            shm: true,
        }
    }

    /// Every instance over TCP, co-located ones too (local-first routing off).
    pub fn tcp_only() -> Self {
        Route::default()
    }

    /// Local instances over their Unix sockets, never shared memory.
    pub fn without_shm(mut self) -> Self {
        self.shm = false;
        self
    }

    /// Whether `instance` runs on this client's host.
    pub fn is_local(&self, instance: &Registration) -> bool {
        self.host.is_some() && instance.host == self.host
    }

    /// The instance a client calls for `instance`, at the address it calls it on;
    /// `None` when it has none this client can use.
    pub fn instance(&self, instance: &Registration) -> Option<Instance> {
        let find = |want: fn(&Address) -> bool| instance.addresses.iter().find(|a| want(a));
        let local = if self.is_local(instance) {
            let shm = if self.shm {
                find(|a| matches!(a, Address::Shm(_)))
            } else {
                None
            };
            shm.or_else(|| find(|a| matches!(a, Address::Unix(_))))
        } else {
            None
        };
        let address = local.or_else(|| find(Address::is_tcp))?;
        let tag = |name: &str| instance.tags.get(name).map(|v| Arc::from(v.as_str()));
        Some(Instance {
            address: address.clone(),
            weight: instance.weight,
            tags: Tags::new(instance.tags.clone()),
            locality: Locality {
                host: instance.host.as_deref().map(Arc::from),
                rack: tag("rack"),
                zone: tag("zone"),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(host: Option<&str>, addrs: &[&str]) -> Registration {
        Registration {
            service: "echo".into(),
            addresses: addrs.iter().map(|a| a.parse().unwrap()).collect(),
            weight: 70,
            tags: BTreeMap::from([("zone".to_string(), "a".to_string())]),
            host: host.map(str::to_string),
        }
    }

    fn routed(route: &Route, r: &Registration) -> Option<String> {
        route.instance(r).map(|i| i.address.to_string())
    }

    #[test]
    fn a_local_instance_is_called_over_shm_then_unix_then_tcp() {
        let here = Route::for_host("h1");
        let all = reg(
            Some("h1"),
            &["10.0.0.1:80", "unix:/run/e.sock", "shm:/run/e.shm"],
        );
        assert_eq!(routed(&here, &all).as_deref(), Some("shm:/run/e.shm"));
        assert_eq!(
            routed(&here.clone().without_shm(), &all).as_deref(),
            Some("unix:/run/e.sock")
        );
        let tcp = reg(Some("h1"), &["10.0.0.1:80"]);
        assert_eq!(routed(&here, &tcp).as_deref(), Some("10.0.0.1:80"));
        let got = here.instance(&all).unwrap();
        assert_eq!(got.weight, 70);
        assert_eq!(got.tags.get("zone").map(String::as_str), Some("a"));
        assert!(got.is_local());
        // Its locality: the registration's host, its zone tag, no rack tag.
        assert_eq!(got.locality.host.as_deref(), Some("h1"));
        assert_eq!(got.locality.zone.as_deref(), Some("a"));
        assert_eq!(got.locality.rack, None);
    }

    #[test]
    fn a_remote_instance_is_called_over_tcp_or_left_out() {
        let here = Route::for_host("h1");
        let other = reg(Some("h2"), &["unix:/run/e.sock", "shm:/x", "svc.local:90"]);
        assert_eq!(routed(&here, &other).as_deref(), Some("svc.local:90"));
        let unreachable = reg(Some("h2"), &["unix:/run/e.sock"]);
        assert_eq!(routed(&here, &unreachable), None);
        // Without a host on either side nothing is local.
        let no_host = reg(None, &["unix:/a", "10.0.0.1:80"]);
        assert_eq!(routed(&here, &no_host).as_deref(), Some("10.0.0.1:80"));
        let all = reg(Some("h1"), &["10.0.0.1:80", "shm:/x"]);
        assert_eq!(
            routed(&Route::tcp_only(), &all).as_deref(),
            Some("10.0.0.1:80")
        );
    }

    #[test]
    fn machine_ids_are_read_strictly() {
        let dir = std::env::temp_dir().join(format!("host-id-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, text: &[u8]| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let good = write("good", b"3D1219C7C4C5404AAA1F6D2A48ADFDA4\n");
        assert_eq!(
            read_host_id(&good).unwrap(),
            "3d1219c7c4c5404aaa1f6d2a48adfda4"
        );
        for (name, text) in [
            ("short", &b"3d1219c7\n"[..]),
            ("nonhex", b"zz1219c7c4c5404aaa1f6d2a48adfda4\n"),
            ("empty", b""),
            ("long", &[b'a'; 10_000][..]),
            ("binary", b"\xff\xfe1219c7c4c5404aaa1f6d2a48adfda4\n"),
        ] {
            let p = write(name, text);
            assert!(
                matches!(read_host_id(&p), Err(HostIdError::Malformed { .. })),
                "{name}"
            );
        }
        assert!(matches!(
            read_host_id(&dir.join("missing")),
            Err(HostIdError::Read { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
