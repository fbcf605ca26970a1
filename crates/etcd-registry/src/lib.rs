//! A service registry over etcd v3 for volo-core: servers register their instances
//! ([`EtcdRegistry`], a [`Registry`](volo_core::registry::Registry)), clients find
//! them and follow their changes ([`EtcdDiscover`], a
//! [`Discover`](volo_core::client::Discover)).
//!
//! A server's instance registered, a client following the list, the instance gone
//! from it once deregistered (run against an etcd the test starts; in production,
//! your etcd's URL):
//!
//! ```
//! use std::time::Duration;
//! use etcd_registry::{EtcdConfig, EtcdDiscover, EtcdRegistry, parse_url};
//! use volo_core::client::Discover;
//! use volo_core::registry::{Registration, Registry, Route};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let Some(etcd) = etcd_registry::testing::Etcd::start() else { return Ok(()) };
//! # let url = etcd.url();
//! let config = EtcdConfig::new(parse_url(&url)?); // "etcd://127.0.0.1:2379"
//!
//! // A server: register, serve, deregister.
//! let registry = EtcdRegistry::connect(config.clone()).await?;
//! let me = Registration::new("echo", vec!["10.0.0.7:9000".parse()?]);
//! registry.register(&me).await?;
//!
//! // A client: the instances of "echo", kept up to date by a watch.
//! let echo = EtcdDiscover::connect(config, "echo", Route::for_this_host()).await?;
//! assert_eq!(echo.instances().len(), 1);
//!
//! registry.deregister(&me).await?;
//! for _ in 0..100 {
//!     if echo.instances().is_empty() {
//!         break;
//!     }
//!     tokio::time::sleep(Duration::from_millis(50)).await;
//! }
//! assert!(echo.instances().is_empty(), "the watch saw the instance go");
//! # Ok(())
//! # }
//! ```
//!
//! # Why
//!
//! A fixed list of addresses does not survive deploys, autoscaling or a machine
//! dying. With a registry, a server announces itself when it starts listening,
//! stays announced while it lives (its key is tied to an etcd lease it keeps alive),
//! and disappears when it stops or dies (the lease runs out). Clients read the
//! service's instances once and then watch them, so the balancer always has the
//! current list without asking etcd on the call path. Both sides ride out etcd
//! outages: servers register again when their lease is lost, clients keep the last
//! list and read it again when etcd is back.
//!
//! # The keys and values
//!
//! One key per instance, under its service's prefix, in one of two
//! [layouts](Layout). This crate's own ([`Layout::Native`], the default) is described
//! here; Kitex's ([`Layout::Kitex`], from [`EtcdConfig::kitex`]) is the one of
//! Kitex's etcd registry (`kitex-contrib/registry-etcd`):
//! `kitex/registry-etcd/{service}/{host:port}` holding
//! `{"network":"tcp","address":"10.0.0.7:9000","weight":10,"tags":{}}`. In that
//! layout a server registers its first TCP address only (one with none is refused),
//! with no host identity, and Kitex's clients find it; a client reads Kitex's
//! servers (and takes a weight of zero or less as 10, as Kitex does). The two layouts
//! do not read each other's keys. Ours lists every address of an instance, so a
//! co-located client can pick the local one.
//!
//! ```text
//! {prefix}/{service}/{first address}
//! /thrift-rpc/services/echo/10.0.0.7:9000
//! ```
//!
//! holding JSON, with the addresses as volo-core's
//! [`Address`](volo_core::context::Address) writes them (`ip:port`, `name:port`,
//! `unix:/path`, `shm:/path`) and the host identity of
//! [`host_id`](volo_core::registry::host_id) (or `null`), which lets a client on the
//! same machine call over shared memory or a Unix socket ([`Route`](volo_core::registry::Route)):
//!
//! ```json
//! {"addresses":["10.0.0.7:9000","unix:/run/echo.sock","shm:/run/echo.shm"],
//!  "weight":100,"tags":{"zone":"a"},"host":"3d1219c7c4c5404aaa1f6d2a48adfda4"}
//! ```
//!
//! The key is attached to a lease of [`lease_ttl`](EtcdConfig::lease_ttl), one lease
//! per registration. Service names may not be empty or contain `/`.
//!
//! Readers are lenient where it is safe and strict where it is not: a missing
//! `weight` is 100, missing `tags` and `host` are none, unknown fields are ignored,
//! an address that does not parse is left out (a newer server may register a kind
//! of address an older client does not know) and the instance kept when another
//! one does. A value over [`max_value_bytes`](EtcdConfig::max_value_bytes), one
//! that is not such JSON, or one without an address that parses is skipped, as is
//! a key outside the service's prefix: each is logged (`tracing::warn!`, naming the
//! key and why) and counted ([`DiscoverStats`]). Nothing in etcd can make discovery
//! panic.
//!
//! # Time
//!
//! Every etcd request is bounded by [`timeout`](EtcdConfig::timeout). Keepalives go
//! every third of the lease TTL; retries back off from 50 ms, doubling, up to 2 s.
//! A connection that carries a watch or keepalive stream is checked with HTTP/2
//! pings every 10 s, so an etcd member that vanishes without closing it is noticed.

#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]
#![forbid(unsafe_code)]

mod config;
mod discover;
mod entries;
mod etcd;
mod follow;
pub mod governance;
mod keeper;
mod registry;
#[cfg(feature = "testing")]
pub mod testing;
mod timing;
mod value;

pub use config::{
    DEFAULT_PREFIX, EtcdConfig, KITEX_DEFAULT_WEIGHT, KITEX_PREFIX, Layout, UrlError, parse_url,
};
pub use discover::{DiscoverStats, EtcdDiscover};
pub use governance::{GovernanceWatch, KITEX_CONFIG_PREFIX};
pub use registry::EtcdRegistry;
