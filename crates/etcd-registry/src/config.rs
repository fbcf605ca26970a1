//! Where etcd is and how the registry uses it: [`EtcdConfig`], and [`parse_url`] for
//! the `etcd://` form a command line or a config file names it by.

use std::time::Duration;

use volo_core::context::Address;

/// The key prefix registrations go under by default.
pub const DEFAULT_PREFIX: &str = "/thrift-rpc/services";

/// The key prefix of Kitex's etcd registry (`kitex-contrib/registry-etcd`), which
/// [`EtcdConfig::kitex`] takes.
pub const KITEX_PREFIX: &str = "kitex/registry-etcd";

/// The weight Kitex reads for an instance registered with none (zero or less), and
/// the one its servers register by default. Ours register 100
/// ([`Registration::new`](volo_core::registry::Registration::new)): in a fleet of
/// both, give ours this weight so that each instance takes an even share.
pub const KITEX_DEFAULT_WEIGHT: u32 = 10;

/// How instances are written in etcd and read from it (see
/// [the keys and values](crate#the-keys-and-values)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// This crate's own: one key per instance, a value that lists every address of
    /// it and its host identity, so that a client on the same machine can take a
    /// Unix socket or shared memory.
    #[default]
    Native,
    /// Kitex's etcd registry's: one key per TCP address, a value of `network`,
    /// `address`, `weight` and `tags`. Kitex's clients find servers of ours
    /// registered so, and ours find Kitex's; there is no host identity in it, so
    /// calls go over TCP.
    Kitex,
}

impl std::str::FromStr for Layout {
    type Err = String;

    /// `native` or `kitex`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "native" => Ok(Layout::Native),
            "kitex" => Ok(Layout::Kitex),
            other => Err(format!(
                "{other:?} names no registry layout (native or kitex)"
            )),
        }
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Layout::Native => "native",
            Layout::Kitex => "kitex",
        })
    }
}

/// Where etcd is and how the registry and discovery use it.
///
/// Every field has a default ([`EtcdConfig::new`]); set the ones to change:
///
/// ```
/// use std::time::Duration;
/// use etcd_registry::EtcdConfig;
///
/// let config = EtcdConfig {
///     lease_ttl: Duration::from_secs(5),
///     ..EtcdConfig::new(vec!["10.0.0.7:2379".into()])
/// };
/// assert_eq!(config.prefix, "/thrift-rpc/services");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdConfig {
    /// The etcd members, `host:port` each, without a scheme (plain HTTP/2, no TLS).
    /// Default `["127.0.0.1:2379"]`.
    pub endpoints: Vec<String>,
    /// The key prefix: an instance of service `s` is filed at `{prefix}/{s}/{address}`.
    /// A trailing `/` is ignored. Default `/thrift-rpc/services`
    /// ([`KITEX_PREFIX`] from [`EtcdConfig::kitex`]).
    pub prefix: String,
    /// How keys and values are written and read. Default [`Layout::Native`].
    pub layout: Layout,
    /// How long a registration outlives its server's last keepalive. etcd counts
    /// leases in whole seconds: rounded up, at least 1 s. Keepalives are sent every
    /// third of it. Default 10 s.
    pub lease_ttl: Duration,
    /// The largest value discovery reads; a larger one is logged and skipped, and
    /// registering one is refused. Default 64 KiB.
    pub max_value_bytes: usize,
    /// The most instances discovery lists for one service, a bound for safety (a
    /// registry flooded with keys costs each client at most this); the others are
    /// logged (when the bound starts to bite, and when it stops) and left out: after
    /// a read, those beyond the first ones by key; after that, those that came
    /// last, each taking the place of a listed one that leaves. Discovery keeps at
    /// most four times as many keys (with bad values, or no address it can use,
    /// beside the listed ones): a read stops there, and keys put beyond it are logged
    /// and not followed, until a kept one is deleted and the service is read again.
    /// Default 10,000: a change costs in proportion to what changed, not to the
    /// number of instances, so the bound is set for fleets, not for speed.
    pub max_instances: usize,
    /// The bound on each etcd request (connecting, granting, putting, reading...).
    /// Default 3 s.
    pub timeout: Duration,
}

impl EtcdConfig {
    /// The defaults (see each field), with etcd at `endpoints`.
    pub fn new(endpoints: Vec<String>) -> Self {
        EtcdConfig {
            endpoints,
            prefix: DEFAULT_PREFIX.to_string(),
            layout: Layout::Native,
            lease_ttl: Duration::from_secs(10),
            max_value_bytes: 64 * 1024,
            max_instances: 10_000,
            timeout: Duration::from_secs(3),
        }
    }

    /// The defaults, but with Kitex's [layout](Layout::Kitex) under Kitex's prefix
    /// ([`KITEX_PREFIX`]): servers registered so are found by Kitex's clients, and
    /// clients so find Kitex's servers.
    ///
    /// ```
    /// use etcd_registry::{EtcdConfig, Layout};
    ///
    /// let config = EtcdConfig::kitex(vec!["10.0.0.7:2379".into()]);
    /// assert_eq!((config.layout, config.prefix.as_str()), (Layout::Kitex, "kitex/registry-etcd"));
    /// ```
    pub fn kitex(endpoints: Vec<String>) -> Self {
        EtcdConfig {
            prefix: KITEX_PREFIX.to_string(),
            layout: Layout::Kitex,
            ..EtcdConfig::new(endpoints)
        }
    }

    /// The prefix without a trailing `/`.
    pub(crate) fn trimmed_prefix(&self) -> &str {
        self.prefix.trim_end_matches('/')
    }

    /// The key prefix of `service`'s instances: `{prefix}/{service}/`.
    pub(crate) fn service_prefix(&self, service: &str) -> String {
        format!("{}/{service}/", self.trimmed_prefix())
    }
}

impl Default for EtcdConfig {
    /// The defaults, with etcd at `127.0.0.1:2379`.
    fn default() -> Self {
        EtcdConfig::new(vec!["127.0.0.1:2379".to_string()])
    }
}

/// Why [`parse_url`] refused a URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// It does not start with `etcd://`.
    #[error("{url:?} is not an etcd URL (etcd://host:port[,host:port...])")]
    Scheme {
        /// The URL.
        url: String,
    },
    /// It names no endpoint, or has an empty one between commas.
    #[error("{url:?} has an empty endpoint (etcd://host:port[,host:port...])")]
    EmptyEndpoint {
        /// The URL.
        url: String,
    },
    /// One endpoint is not `host:port` (an IP address or a DNS name, and a port
    /// from 1 to 65535); paths, queries and user names are not taken either.
    #[error("{endpoint:?} is not an etcd endpoint (host:port)")]
    Endpoint {
        /// The endpoint as written.
        endpoint: String,
    },
}

/// The endpoints of an `etcd://host:port[,host:port...]` URL, as written, in order.
///
/// Hosts are IP addresses (IPv6 in brackets) or DNS names; every endpoint needs a
/// port. Anything else (another scheme, a path, a query, user information, an empty
/// endpoint) is an error.
///
/// ```
/// use etcd_registry::parse_url;
///
/// assert_eq!(
///     parse_url("etcd://10.0.0.1:2379,etcd-2.local:2379").unwrap(),
///     ["10.0.0.1:2379", "etcd-2.local:2379"]
/// );
/// assert!(parse_url("http://10.0.0.1:2379").is_err());
/// ```
pub fn parse_url(url: &str) -> Result<Vec<String>, UrlError> {
    let rest = url
        .get(..7)
        .filter(|scheme| scheme.eq_ignore_ascii_case("etcd://"))
        .map(|_| &url[7..])
        .ok_or_else(|| UrlError::Scheme {
            url: url.to_string(),
        })?;
    rest.split(',')
        .map(|endpoint| {
            if endpoint.is_empty() {
                return Err(UrlError::EmptyEndpoint {
                    url: url.to_string(),
                });
            }
            // volo-core's address grammar is the one for `ip:port` and `name:port`;
            // a Unix or shared-memory path is not an etcd endpoint, nor is port 0.
            match endpoint.parse::<Address>() {
                Ok(Address::Tcp(a)) if a.port() != 0 => Ok(endpoint.to_string()),
                Ok(Address::Host { port, .. }) if port != 0 => Ok(endpoint.to_string()),
                _ => Err(UrlError::Endpoint {
                    endpoint: endpoint.to_string(),
                }),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_ones() {
        let c = EtcdConfig::default();
        assert_eq!(c.endpoints, ["127.0.0.1:2379"]);
        assert_eq!(c.prefix, DEFAULT_PREFIX);
        assert_eq!(c.layout, Layout::Native);
        assert_eq!(c.lease_ttl, Duration::from_secs(10));
        assert_eq!(c.max_value_bytes, 65536);
        assert_eq!(c.max_instances, 10_000);
        assert_eq!(c.timeout, Duration::from_secs(3));
    }

    #[test]
    fn layouts_are_named_both_ways() {
        for layout in [Layout::Native, Layout::Kitex] {
            assert_eq!(layout.to_string().parse::<Layout>(), Ok(layout));
        }
        assert!(
            "Kitex"
                .parse::<Layout>()
                .unwrap_err()
                .contains("native or kitex")
        );
        let k = EtcdConfig::kitex(vec!["e:2379".into()]);
        assert_eq!(k.service_prefix("echo"), "kitex/registry-etcd/echo/");
    }

    #[test]
    fn a_service_prefix_has_one_slash_between_parts() {
        let mut c = EtcdConfig::default();
        assert_eq!(c.service_prefix("echo"), "/thrift-rpc/services/echo/");
        c.prefix = "/p//".into();
        assert_eq!(c.service_prefix("echo"), "/p/echo/");
    }
}
