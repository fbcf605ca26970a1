//! What a call carries besides its arguments: who calls whom, the method, the deadline,
//! the peer's address, and metainfo.
//!
//! # Metainfo
//!
//! Key-value strings that travel in TTHeader's string block, in three kinds (the
//! prefixes on the wire are Kitex's and Volo's, so metainfo crosses frameworks):
//!
//! - **persistent** (`RPC_PERSIST_<key>`): goes with the call to the callee and on with
//!   every call the callee makes, hop after hop, until a service removes it (a log id,
//!   a traffic tag).
//! - **transient** (`RPC_TRANSIT_<key>`): goes one hop. A service sets it for the calls
//!   it makes; the callee reads it ([`MetaInfo::transient`]) but does not pass it on.
//! - **backward** (`RPC_BACKWARD_<key>`, or the plain key: see below): goes back one
//!   hop, from a callee to its caller, in the reply.
//!
//! A handler passes metainfo on by building the next call's context from its own:
//! [`MetaInfo::forward`] keeps the persistent values and drops the received transient
//! ones. Framed and Buffered calls have no header, so metainfo needs TTHeader or
//! THeader (whose key-value info headers carry it with the same prefixes).
//!
//! # Backward values on the wire
//!
//! Kitex and Volo disagree on how a TTHeader reply carries backward values. A Kitex
//! server writes each under its plain key (`cost=3ms`), and a Kitex client takes
//! every string key of a reply for a backward value. Volo writes and reads them
//! prefixed (`RPC_BACKWARD_cost=3ms`) and passes over the rest. So this crate:
//!
//! - **writes both** in a TTHeader reply ([`MetaInfo::ttheader_reply_pairs`]): a Volo
//!   client reads `cost`; a Kitex client reads `cost`, and also sees
//!   `RPC_BACKWARD_cost` among its backward values (it keeps every key it is sent);
//! - **reads both** from a TTHeader reply ([`MetaInfo::read_ttheader_reply`]): from a
//!   Kitex server, every plain key (including the ones Kitex's framework sends itself,
//!   such as `crrst` while it shuts down, as a Kitex client would); from a Volo server
//!   or this crate's, the prefixed keys, which win over a plain key of the same name.
//!
//! A THeader reply carries them prefixed only: its plain keys are headers (below).
//!
//! # Headers
//!
//! Apache Thrift's THeader carries key-value info headers that are no metainfo: any
//! key, unprefixed, one hop. A handler reads those of its request with
//! [`MetaInfo::header`] (every pair, metainfo ones included, as received) and sets
//! those of its reply with [`MetaInfo::set_header`]; a client sets those of its
//! request the same way and reads the reply's after the call. They go with THeader
//! calls only, and are never passed on by [`MetaInfo::forward`].

use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use thrift_wire::Utf8Bytes;

use crate::codec::ttheader::StrPair;
use crate::codec::{Framing, Protocol};

/// Wire prefix of persistent metainfo keys.
pub const PREFIX_PERSISTENT: &str = "RPC_PERSIST_";
/// Wire prefix of transient metainfo keys.
pub const PREFIX_TRANSIENT: &str = "RPC_TRANSIT_";
/// Wire prefix of backward metainfo keys.
pub const PREFIX_BACKWARD: &str = "RPC_BACKWARD_";

/// Where a service listens or a client connects: `ip:port` or `name:port` (TCP),
/// `unix:/path` (a Unix-domain socket) or `shm:/path` (shared memory, through the Unix
/// socket at that path).
///
/// A host name (`localhost:9090`, `echo.internal:9090`) is kept as written and looked
/// up each time a connection is made or a server binds, with the system's resolver
/// (off the runtime's threads); a client tries the addresses it resolves to in turn,
/// all within its connect timeout, and a server listens on the first that it can
/// bind. So a name follows its DNS records as they change, and one name is one
/// instance to a balancer or a breaker, whatever it resolves to. A name that does
/// not resolve fails the connect with a [`ResolveError`](crate::transport::ResolveError).
/// IP addresses are parsed first, as before, and never looked up.
///
/// Two path addresses are the same when their paths are spelled the same, byte for
/// byte (as Kitex compares address strings): `unix:/run/a.sock` and
/// `unix:/run//a.sock` name one socket but are two instances to a balancer or a
/// breaker. Comparing and hashing the bytes costs a pass over them, where `Path`'s own
/// comparison splits the path into components first; a client does it on every call.
#[derive(Debug, Clone)]
pub enum Address {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A host name and a TCP port, resolved when used. The name is checked when
    /// parsed (letters, digits, `-` and `_` in dot-separated labels, as DNS names are
    /// written) and kept in lower case, as DNS compares names.
    Host {
        /// The host name, in lower case (shared: an address is cloned on every call).
        name: Arc<str>,
        /// The port.
        port: u16,
    },
    /// A Unix-domain socket path (shared: an address is cloned on every call).
    Unix(Arc<Path>),
    /// A shared-memory session's control socket path (shared, likewise).
    Shm(Arc<Path>),
}

/// A path's bytes, as spelled.
fn spelled(path: &Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    path.as_os_str().as_bytes()
}

impl PartialEq for Address {
    fn eq(&self, other: &Address) -> bool {
        match (self, other) {
            (Address::Tcp(a), Address::Tcp(b)) => a == b,
            (
                Address::Host { name, port },
                Address::Host {
                    name: other_name,
                    port: other_port,
                },
            ) => port == other_port && name == other_name,
            (Address::Unix(a), Address::Unix(b)) | (Address::Shm(a), Address::Shm(b)) => {
                spelled(a) == spelled(b)
            }
            _ => false,
        }
    }
}

impl Eq for Address {}

impl std::hash::Hash for Address {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Address::Tcp(a) => a.hash(state),
            Address::Host { name, port } => {
                name.hash(state);
                port.hash(state);
            }
            Address::Unix(p) | Address::Shm(p) => spelled(p).hash(state),
        }
    }
}

impl Address {
    /// Whether it is reached over TCP (an IP address or a host name, with a port),
    /// not a Unix socket or a shared-memory session on this machine.
    pub fn is_tcp(&self) -> bool {
        matches!(self, Address::Tcp(_) | Address::Host { .. })
    }
}

/// An address string that is none of the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad address {0:?}: expected ip:port, name:port, unix:/path or shm:/path")]
pub struct AddressError(pub String);

impl FromStr for Address {
    type Err = AddressError;

    fn from_str(s: &str) -> Result<Self, AddressError> {
        let path = |p: &str| {
            if p.is_empty() {
                Err(AddressError(s.to_string()))
            } else {
                Ok(Arc::from(Path::new(p)))
            }
        };
        if let Some(p) = s.strip_prefix("unix:") {
            return path(p).map(Address::Unix);
        }
        if let Some(p) = s.strip_prefix("shm:") {
            return path(p).map(Address::Shm);
        }
        if let Ok(a) = s.parse() {
            return Ok(Address::Tcp(a));
        }
        host_port(s).ok_or_else(|| AddressError(s.to_string()))
    }
}

/// `name:port` as an [`Address::Host`], when the name is one DNS could hold: at most
/// 253 characters, labels of 1 to 63 letters, digits, `-` (not first or last) and `_`
/// (found in service names), and a last label that is not all digits (so that
/// `1.2.3:80` or `256.1.1.1:80` is a bad address, not a name to look up).
fn host_port(s: &str) -> Option<Address> {
    let (name, port) = s.rsplit_once(':')?;
    let port = port.parse().ok()?;
    if name.is_empty() || name.len() > 253 {
        return None;
    }
    let label_ok = |l: &str| {
        (1..=63).contains(&l.len())
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if !name.split('.').all(label_ok) {
        return None;
    }
    let last = name.rsplit('.').next()?;
    if last.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(Address::Host {
        name: Arc::from(name.to_ascii_lowercase()),
        port,
    })
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Tcp(a) => write!(f, "{a}"),
            Address::Host { name, port } => write!(f, "{name}:{port}"),
            Address::Unix(p) => write!(f, "unix:{}", p.display()),
            Address::Shm(p) => write!(f, "shm:{}", p.display()),
        }
    }
}

/// One side of a call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoint {
    /// The service's name (empty when unknown): a static name, or shared with the
    /// client that made it or the frame that carried it (a clone costs no allocation).
    pub service: Utf8Bytes,
    /// Its address, when known.
    pub address: Option<Address>,
}

/// Metainfo of one call (see the [module docs](self)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetaInfo {
    persistent: Vec<(Utf8Bytes, Utf8Bytes)>,
    transient: Vec<(Utf8Bytes, Utf8Bytes)>,
    /// Transient values received from the caller: readable, never sent on.
    upstream: Vec<(Utf8Bytes, Utf8Bytes)>,
    backward: Vec<(Utf8Bytes, Utf8Bytes)>,
    /// Headers received as they were on the wire (THeader info).
    received_headers: Vec<(Utf8Bytes, Utf8Bytes)>,
    /// Headers to send as they are.
    headers: Vec<(Utf8Bytes, Utf8Bytes)>,
}

fn get<'a>(list: &'a [(Utf8Bytes, Utf8Bytes)], key: &str) -> Option<&'a str> {
    list.iter()
        .find(|(k, _)| k.as_str() == key)
        .map(|(_, v)| v.as_str())
}

/// Sets `key` in `list`; an empty key or value is ignored (Kitex's rule).
fn set(list: &mut Vec<(Utf8Bytes, Utf8Bytes)>, key: Utf8Bytes, value: Utf8Bytes) {
    if key.is_empty() || value.is_empty() {
        return;
    }
    match list.iter_mut().find(|(k, _)| *k == key) {
        Some((_, v)) => *v = value,
        None => list.push((key, value)),
    }
}

impl MetaInfo {
    /// No values.
    pub fn new() -> Self {
        Self::default()
    }

    /// A persistent value.
    pub fn persistent(&self, key: &str) -> Option<&str> {
        get(&self.persistent, key)
    }

    /// Sets a persistent value (passed on hop after hop).
    pub fn set_persistent(&mut self, key: impl Into<Utf8Bytes>, value: impl Into<Utf8Bytes>) {
        set(&mut self.persistent, key.into(), value.into());
    }

    /// Removes a persistent value, so it goes no further.
    pub fn remove_persistent(&mut self, key: &str) {
        self.persistent.retain(|(k, _)| k.as_str() != key);
    }

    /// A transient value: one set here for the next call, or else one the caller sent.
    pub fn transient(&self, key: &str) -> Option<&str> {
        get(&self.transient, key).or_else(|| get(&self.upstream, key))
    }

    /// Every persistent value, in the order they were set or received.
    pub fn persistent_values(&self) -> impl Iterator<Item = (&str, &str)> {
        self.persistent
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Every transient value the caller sent (on a server), in the order received.
    /// Those set here for the next call are not among them.
    pub fn received_transient_values(&self) -> impl Iterator<Item = (&str, &str)> {
        self.upstream.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Sets a transient value for the next call only.
    pub fn set_transient(&mut self, key: impl Into<Utf8Bytes>, value: impl Into<Utf8Bytes>) {
        set(&mut self.transient, key.into(), value.into());
    }

    /// A backward value (on a client, after the call: what the callee sent back).
    pub fn backward(&self, key: &str) -> Option<&str> {
        get(&self.backward, key)
    }

    /// Sets a backward value (on a server: sent back to the caller with the reply).
    pub fn set_backward(&mut self, key: impl Into<Utf8Bytes>, value: impl Into<Utf8Bytes>) {
        set(&mut self.backward, key.into(), value.into());
    }

    /// Every backward value, in the order they were set.
    pub fn backward_values(&self) -> impl Iterator<Item = (&str, &str)> {
        self.backward.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// A header received (see [Headers](self#headers)): on a server, the request's; on
    /// a client after the call, the reply's. The first, if the key was sent twice.
    pub fn header(&self, key: &str) -> Option<&str> {
        get(&self.received_headers, key)
    }

    /// Every header received, in the order they came.
    pub fn headers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.received_headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Sets a header to send as it is (see [Headers](self#headers)): on a client with
    /// the request, on a server with the reply. Unlike metainfo values, an empty key or
    /// value is sent too.
    pub fn set_header(&mut self, key: impl Into<Utf8Bytes>, value: impl Into<Utf8Bytes>) {
        let (key, value) = (key.into(), value.into());
        match self.headers.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => *v = value,
            None => self.headers.push((key, value)),
        }
    }

    /// The headers to send, in the order they were set.
    pub fn header_pairs(&self) -> impl Iterator<Item = &(Utf8Bytes, Utf8Bytes)> {
        self.headers.iter()
    }

    /// Records the headers a request or reply carried, as they were on the wire.
    pub fn read_headers<'a>(
        &mut self,
        pairs: impl IntoIterator<Item = &'a (Utf8Bytes, Utf8Bytes)>,
    ) {
        self.received_headers.extend(pairs.into_iter().cloned());
    }

    /// The metainfo for a call made while handling this one: the persistent values, and
    /// no transient ones (those went one hop) nor backward ones, nor headers.
    pub fn forward(&self) -> MetaInfo {
        MetaInfo {
            persistent: self.persistent.clone(),
            ..MetaInfo::default()
        }
    }

    /// The request's string pairs: persistent and transient values, prefixed.
    pub fn request_pairs(&self) -> impl Iterator<Item = (String, &Utf8Bytes)> {
        let persistent = self
            .persistent
            .iter()
            .map(|(k, v)| (format!("{PREFIX_PERSISTENT}{k}"), v));
        let transient = self
            .transient
            .iter()
            .map(|(k, v)| (format!("{PREFIX_TRANSIENT}{k}"), v));
        persistent.chain(transient)
    }

    /// The reply's string pairs: backward values, prefixed (Volo's form, and
    /// THeader's).
    pub fn reply_pairs(&self) -> impl Iterator<Item = (String, &Utf8Bytes)> {
        self.backward
            .iter()
            .map(|(k, v)| (format!("{PREFIX_BACKWARD}{k}"), v))
    }

    /// A TTHeader reply's string pairs: each backward value twice, under its plain
    /// key (Kitex's form) and prefixed (Volo's), so that both kinds of client receive
    /// it (see [Backward values on the wire](self#backward-values-on-the-wire)).
    pub fn ttheader_reply_pairs(&self) -> impl Iterator<Item = (Utf8Bytes, Utf8Bytes)> + '_ {
        self.backward.iter().flat_map(|(k, v)| {
            [
                (k.clone(), v.clone()),
                (Utf8Bytes::from(format!("{PREFIX_BACKWARD}{k}")), v.clone()),
            ]
        })
    }

    /// Takes metainfo from a request's string pairs (a server receiving): persistent
    /// values stay persistent, transient ones become readable but are not sent on.
    /// Other keys are not metainfo and are left alone.
    pub fn read_request(&mut self, pairs: impl IntoIterator<Item = impl HeaderPair>) {
        for p in pairs {
            if let Some(key) = strip(&p, PREFIX_PERSISTENT) {
                set(&mut self.persistent, key, p.value_shared());
            } else if let Some(key) = strip(&p, PREFIX_TRANSIENT) {
                set(&mut self.upstream, key, p.value_shared());
            }
        }
    }

    /// Takes backward values from a reply's string pairs (a client receiving): the
    /// prefixed keys (Volo's form; THeader's info headers are read so).
    pub fn read_reply(&mut self, pairs: impl IntoIterator<Item = impl HeaderPair>) {
        for p in pairs {
            if let Some(key) = strip(&p, PREFIX_BACKWARD) {
                set(&mut self.backward, key, p.value_shared());
            }
        }
    }

    /// Takes backward values from a TTHeader reply's string pairs in both forms:
    /// every key without one of the three prefixes is a backward value (Kitex's form:
    /// a Kitex server sends them so, and a Kitex client reads every key so), and a
    /// prefixed one (Volo's) is too, winning over a plain key of the same name.
    pub fn read_ttheader_reply<P: HeaderPair>(
        &mut self,
        pairs: impl IntoIterator<Item = P> + Clone,
    ) {
        for p in pairs.clone() {
            let s = p.key();
            let prefixed = [PREFIX_PERSISTENT, PREFIX_TRANSIENT, PREFIX_BACKWARD]
                .iter()
                .any(|pre| s.starts_with(pre));
            if !prefixed && !s.is_empty() && !p.value().is_empty() {
                set(&mut self.backward, p.key_shared(), p.value_shared());
            }
        }
        self.read_reply(pairs);
    }
}

/// A key-value pair of a header as metainfo reads it: its strings to compare, and
/// shared copies of the ones it keeps (for a pair of a decoded TTHeader, only those
/// take a reference count).
pub trait HeaderPair {
    /// The key.
    fn key(&self) -> &str;
    /// The value.
    fn value(&self) -> &str;
    /// The key, shared.
    fn key_shared(&self) -> Utf8Bytes;
    /// The value, shared.
    fn value_shared(&self) -> Utf8Bytes;
}

impl HeaderPair for &(Utf8Bytes, Utf8Bytes) {
    fn key(&self) -> &str {
        self.0.as_str()
    }
    fn value(&self) -> &str {
        self.1.as_str()
    }
    fn key_shared(&self) -> Utf8Bytes {
        self.0.clone()
    }
    fn value_shared(&self) -> Utf8Bytes {
        self.1.clone()
    }
}

impl HeaderPair for StrPair<'_> {
    fn key(&self) -> &str {
        StrPair::key(self)
    }
    fn value(&self) -> &str {
        StrPair::value(self)
    }
    fn key_shared(&self) -> Utf8Bytes {
        StrPair::key_shared(self)
    }
    fn value_shared(&self) -> Utf8Bytes {
        StrPair::value_shared(self)
    }
}

/// The key of `pair` without `prefix`, as a slice of the same bytes (no copy), when
/// it has the prefix and a value (`set` would pass over an empty one).
fn strip(pair: &impl HeaderPair, prefix: &str) -> Option<Utf8Bytes> {
    if pair.key().starts_with(prefix) && !pair.value().is_empty() {
        pair.key_shared().slice_from(prefix.len())
    } else {
        None
    }
}

/// The call's description, common to both sides.
#[derive(Debug, Clone, Default)]
pub struct RpcInfo {
    /// The calling side.
    pub caller: Endpoint,
    /// The called side.
    pub callee: Endpoint,
    /// The method's name as sent on the wire.
    pub method: Utf8Bytes,
    /// The message's sequence id.
    pub seq_id: i32,
    /// When the call must be done by: on a client, from its timeout; on a server, from
    /// the caller's timeout when it sent one (TTHeader's RPC timeout).
    pub deadline: Option<Instant>,
}

/// A server handler's context.
#[derive(Debug, Clone)]
pub struct ServerContext {
    /// The call.
    pub rpc: RpcInfo,
    /// Metainfo received, and backward values to send.
    pub metainfo: MetaInfo,
    /// How the request was framed (the reply is framed the same way).
    pub framing: Framing,
    /// The request's protocol (the reply's too).
    pub protocol: Protocol,
    /// When the server took the call's frame: what the server's limiter counts its
    /// rate from, and what the caller's timeout counts from. The connection's core sets
    /// it; `None` in a context made by hand (a layer then reads the clock).
    pub arrived: Option<Instant>,
}

impl ServerContext {
    /// A context for a request framed and encoded as given.
    pub fn new(framing: Framing, protocol: Protocol) -> Self {
        ServerContext {
            rpc: RpcInfo::default(),
            metainfo: MetaInfo::default(),
            framing,
            protocol,
            arrived: None,
        }
    }

    /// The peer's address, when the transport has one.
    pub fn peer(&self) -> Option<&Address> {
        self.rpc.caller.address.as_ref()
    }
}

/// A context for a Framed Binary request with nothing known of the call: what tower
/// adapters ([`crate::tower_compat::FromTower`]) leave behind when the context they lent out
/// does not come back. The server answers each call in the framing and protocol it
/// came in, whatever its context says by then.
impl Default for ServerContext {
    fn default() -> Self {
        ServerContext::new(Framing::Framed, Protocol::Binary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_in_every_form() {
        assert_eq!(
            "127.0.0.1:8080".parse(),
            Ok(Address::Tcp("127.0.0.1:8080".parse().unwrap()))
        );
        assert_eq!("[::1]:9".parse::<Address>().unwrap().to_string(), "[::1]:9");
        assert_eq!(
            "unix:/tmp/a.sock".parse(),
            Ok(Address::Unix(Path::new("/tmp/a.sock").into()))
        );
        assert_eq!(
            "shm:/tmp/s".parse(),
            Ok(Address::Shm(Path::new("/tmp/s").into()))
        );
        for bad in ["", "unix:", "shm:", "localhost", "1.2.3.4", "tcp://x:1"] {
            assert!(bad.parse::<Address>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn host_names_parse_lower_cased_and_bad_ones_do_not() {
        let host = |name: &str, port| Address::Host {
            name: Arc::from(name),
            port,
        };
        assert_eq!("localhost:9090".parse(), Ok(host("localhost", 9090)));
        assert_eq!(
            "Echo-1.Svc_A.internal:0".parse(),
            Ok(host("echo-1.svc_a.internal", 0))
        );
        assert_eq!("LOCALHOST:1".parse::<Address>(), "localhost:1".parse());
        assert_eq!(
            host("no-such-host.invalid", 7).to_string(),
            "no-such-host.invalid:7"
        );
        let long_label = format!("{}.com:1", "a".repeat(64));
        let long_name = format!("{}:1", vec!["a".repeat(50); 6].join("."));
        for bad in [
            "localhost:",
            "localhost:65536",
            "localhost:-1",
            ":80",
            "a..b:80",
            ".a:80",
            "-a.b:80",
            "a-.b:80",
            "a b:80",
            "a/b:80",
            "::1:80",
            "[::1]:x",
            "1.2.3:80",
            "256.1.1.1:80",
            "host.123:80",
            "h\u{e9}te:80",
            &long_label,
            &long_name,
        ] {
            assert!(bad.parse::<Address>().is_err(), "{bad:?}");
        }
        // Lengths at the limits are fine.
        let max_label = format!("{}.com:1", "a".repeat(63));
        assert!(max_label.parse::<Address>().is_ok());
    }

    #[test]
    fn path_addresses_are_the_same_when_spelled_the_same() {
        use std::collections::HashSet;
        let a: Address = "unix:/run/a.sock".parse().unwrap();
        let same: Address = "unix:/run/a.sock".parse().unwrap();
        let respelled: Address = "unix:/run//a.sock".parse().unwrap();
        let shm: Address = "shm:/run/a.sock".parse().unwrap();
        assert_eq!(a, same);
        assert_ne!(a, respelled, "another spelling is another instance");
        assert_ne!(a, shm, "same path, other transport");
        let set: HashSet<Address> = [a.clone(), same, respelled, shm, a].into_iter().collect();
        assert_eq!(set.len(), 3);
        let tcp: Address = "127.0.0.1:9".parse().unwrap();
        assert_eq!(tcp, "127.0.0.1:9".parse::<Address>().unwrap());
        assert_ne!(tcp, "127.0.0.1:10".parse::<Address>().unwrap());
    }

    fn pairs(list: &[(&'static str, &'static str)]) -> Vec<(Utf8Bytes, Utf8Bytes)> {
        list.iter()
            .map(|(k, v)| (Utf8Bytes::from(*k), Utf8Bytes::from(*v)))
            .collect()
    }

    /// Three services in a row: A calls B, B calls C, C answers back to B.
    #[test]
    fn persistent_goes_every_hop_transient_one_and_backward_one_back() {
        // A sets both kinds for its call to B.
        let mut a = MetaInfo::new();
        a.set_persistent("logid", "42");
        a.set_transient("color", "blue");
        let wire: Vec<_> = a
            .request_pairs()
            .map(|(k, v)| (Utf8Bytes::from(k), v.clone()))
            .collect();
        assert_eq!(
            wire,
            pairs(&[("RPC_PERSIST_logid", "42"), ("RPC_TRANSIT_color", "blue")])
        );

        // B receives: it sees both.
        let mut b = MetaInfo::new();
        b.read_request(&wire);
        assert_eq!(b.persistent("logid"), Some("42"));
        assert_eq!(b.transient("color"), Some("blue"));
        assert_eq!(b.persistent_values().collect::<Vec<_>>(), [("logid", "42")]);
        assert_eq!(
            b.received_transient_values().collect::<Vec<_>>(),
            [("color", "blue")]
        );
        assert_eq!(
            a.received_transient_values().count(),
            0,
            "set, not received"
        );

        // B calls C: only the persistent value goes on.
        let b_to_c = b.forward();
        let wire: Vec<_> = b_to_c
            .request_pairs()
            .map(|(k, v)| (Utf8Bytes::from(k), v.clone()))
            .collect();
        assert_eq!(wire, pairs(&[("RPC_PERSIST_logid", "42")]));
        let mut c = MetaInfo::new();
        c.read_request(&wire);
        assert_eq!(c.persistent("logid"), Some("42"));
        assert_eq!(c.transient("color"), None);

        // C answers with a backward value; B's client side reads it.
        c.set_backward("cost", "3ms");
        let back: Vec<_> = c
            .reply_pairs()
            .map(|(k, v)| (Utf8Bytes::from(k), v.clone()))
            .collect();
        assert_eq!(back, pairs(&[("RPC_BACKWARD_cost", "3ms")]));
        let mut b_client = b_to_c;
        b_client.read_reply(&back);
        assert_eq!(b_client.backward("cost"), Some("3ms"));
        // ...and it goes no further back: B's own reply carries only what B sets.
        assert_eq!(b.reply_pairs().count(), 0);
    }

    /// A TTHeader reply carries backward values in Kitex's form and Volo's; a client
    /// reads either, and THeader's reading stays with the prefix.
    #[test]
    fn backward_values_travel_in_kitex_and_volo_form() {
        let mut server = MetaInfo::new();
        server.set_backward("cost", "3ms");
        let wire: Vec<_> = server.ttheader_reply_pairs().collect();
        assert_eq!(
            wire,
            pairs(&[("cost", "3ms"), ("RPC_BACKWARD_cost", "3ms")])
        );
        let mut ours = MetaInfo::new();
        ours.read_ttheader_reply(&wire);
        assert_eq!(
            ours.backward_values().collect::<Vec<_>>(),
            [("cost", "3ms")]
        );

        // A Kitex server's reply: plain keys; other metainfo kinds are not backward.
        let kitex = pairs(&[("srv_back", "echo"), ("RPC_PERSIST_x", "y")]);
        let mut from_kitex = MetaInfo::new();
        from_kitex.read_ttheader_reply(&kitex);
        assert_eq!(
            from_kitex.backward_values().collect::<Vec<_>>(),
            [("srv_back", "echo")]
        );
        assert_eq!(from_kitex.persistent("x"), None);

        // A prefixed key wins over a plain one of the same name.
        let mixed = pairs(&[("k", "plain"), ("RPC_BACKWARD_k", "prefixed")]);
        let mut m = MetaInfo::new();
        m.read_ttheader_reply(&mixed);
        assert_eq!(m.backward("k"), Some("prefixed"));

        // THeader info: plain keys are headers, not backward values.
        let mut theader = MetaInfo::new();
        theader.read_reply(&kitex);
        assert_eq!(theader.backward("srv_back"), None);
    }

    #[test]
    fn unrelated_keys_and_empty_values_are_not_metainfo() {
        let mut m = MetaInfo::new();
        m.read_request(&pairs(&[
            ("isn", "EchoService"),
            ("RPC_PERSIST_", "x"),
            ("RPC_PERSIST_k", ""),
            ("RPC_BACKWARD_b", "1"),
        ]));
        assert_eq!(m, MetaInfo::new());
        m.set_persistent("k", "1");
        m.set_persistent("k", "2");
        assert_eq!(m.persistent("k"), Some("2"));
        m.remove_persistent("k");
        assert_eq!(m.persistent("k"), None);
    }
}
