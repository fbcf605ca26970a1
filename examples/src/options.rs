//! The command-line values the programs share, as clap value types and parsers:
//! framing, protocol and socket-transport names, addresses, etcd URLs, durations in
//! seconds, shares, metainfo pairs; and the access log's output.
//!
//! The framing, protocol and transport names wrap volo-core's own types (the name
//! table is written once, here, and serves both parsing and printing).

use std::time::Duration;

use clap::ValueEnum;
use clap::builder::{PossibleValue, RangedU64ValueParser};
use netpoll_rs::Driver;
use volo_core::codec::{Framing, Protocol};
use volo_core::config::TransportConfig;
use volo_core::context::{Address, AddressError};
use volo_core::transport::TransportKind;

/// A clap value type around a volo-core enum: its command-line names and help, one
/// line per value; `.0` is the volo-core value.
macro_rules! named {
    (
        $(#[$doc:meta])*
        $name:ident($inner:ty) { $($value:expr => $text:literal: $help:literal,)+ }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name(pub $inner);

        impl ValueEnum for $name {
            fn value_variants<'a>() -> &'a [Self] {
                &[$($name($value)),+]
            }

            fn to_possible_value(&self) -> Option<PossibleValue> {
                $(if self.0 == $value {
                    return Some(PossibleValue::new($text).help($help));
                })+
                None
            }
        }

        impl $name {
            /// The command-line name.
            pub fn name(self) -> &'static str {
                $(if self.0 == $value {
                    return $text;
                })+
                "?"
            }
        }
    };
}

named! {
    /// `--framing` (rpc-bench): how messages are framed.
    FramingArg(Framing) {
        Framing::TTHeader => "ttheader": "Kitex's TTHeader (metainfo, many calls per connection)",
        Framing::THeader => "theader": "Apache Thrift's THeader, bare, without zlib",
        Framing::Framed => "framed": "a 4-byte length, then the message",
        Framing::Buffered => "buffered": "the message alone",
    }
}

named! {
    /// echo-client's `--transport`: a [`FramingArg`] name, or `ttheader-framed`
    /// (TTHeader with a 4-byte length before the payload inside, Kitex's
    /// "TTHeaderFramed" and its clients' default). `.0` is the framing and
    /// [`WireFormat::ttheader_framed`](volo_core::client::WireFormat::ttheader_framed).
    ClientFramingArg((Framing, bool)) {
        (Framing::TTHeader, false) => "ttheader": "Kitex's TTHeader (metainfo, many calls per connection)",
        (Framing::TTHeader, true) => "ttheader-framed": "TTHeader around a Framed payload (Kitex's client default)",
        (Framing::THeader, false) => "theader": "Apache Thrift's THeader, bare, without zlib",
        (Framing::Framed, false) => "framed": "a 4-byte length, then the message",
        (Framing::Buffered, false) => "buffered": "the message alone",
    }
}

named! {
    /// `--protocol`: the Thrift protocol.
    ProtocolArg(Protocol) {
        Protocol::Binary => "binary": "Thrift Binary",
        Protocol::Compact => "compact": "Thrift Compact",
        Protocol::Json => "json": "Thrift JSON (not over ttheader, which has no id for it)",
    }
}

named! {
    /// `--io`: which sockets carry the calls. `.0` is the transport and, for
    /// netpoll-rs, the driver (`None`: `netpoll_rs::Driver::from_env`, epoll unless
    /// `NETPOLL_DRIVER` says otherwise).
    IoArg((TransportKind, Option<Driver>)) {
        (TransportKind::Netpoll, None) => "netpoll": "netpoll-rs, on epoll (or NETPOLL_DRIVER's driver)",
        (TransportKind::Netpoll, Some(Driver::IoUring)) => "uring": "netpoll-rs on io_uring (epoll where the kernel refuses it)",
        (TransportKind::Tokio, None) => "tokio": "tokio's own sockets",
    }
}

impl IoArg {
    /// Sets `transport` to carry the calls this way.
    pub fn apply(self, transport: &mut TransportConfig) {
        let (kind, driver) = self.0;
        transport.kind = kind;
        if let Some(driver) = driver {
            transport.reactor.driver = driver;
        }
    }
}

named! {
    /// `--server-io` (rpc-bench): the driver of our server's reactor.
    DriverArg(Driver) {
        Driver::Epoll => "epoll": "epoll readiness, a system call per read and write",
        Driver::IoUring => "uring": "io_uring: a multishot receive per connection, sends on the ring",
    }
}

impl DriverArg {
    /// The label our server gets in report lines: `ours`, or `ours-uring`.
    pub fn server_label(self) -> &'static str {
        match self.0 {
            Driver::Epoll => "ours",
            Driver::IoUring => "ours-uring",
        }
    }
}

/// `on` or `off`, alone or in a comma-separated list (`on,off`: both, compared).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    /// On.
    On,
    /// Off.
    Off,
}

impl OnOff {
    /// Whether it is `on`.
    pub fn is_on(self) -> bool {
        self == OnOff::On
    }
}

/// How a netpoll-rs reactor polls between events (`--spin`, `--server-spin`): see
/// `netpoll_rs::Config::busy_poll`, `spin` and `adaptive_spin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SpinArg {
    /// Spins only while events come close together (the default).
    Adaptive,
    /// Spins 50 µs after every burst of events (the behaviour before the adaptive
    /// spin).
    Fixed,
    /// Blocks as soon as a batch is handled.
    Off,
}

impl SpinArg {
    /// `adaptive`, `fixed` or `off`.
    pub fn name(self) -> &'static str {
        match self {
            SpinArg::Adaptive => "adaptive",
            SpinArg::Fixed => "fixed",
            SpinArg::Off => "off",
        }
    }

    /// Sets `reactor` to poll this way.
    pub fn apply(self, reactor: &mut netpoll_rs::Config) {
        reactor.busy_poll = self != SpinArg::Off;
        reactor.adaptive_spin = self == SpinArg::Adaptive;
    }
}

/// One address of a comma-separated `--addr` list: `host:port`, `unix:PATH` or
/// `shm:PATH` (blanks around it ignored). An empty piece is not an address, so a list
/// names one address at least.
pub fn address(piece: &str) -> Result<Address, AddressError> {
    piece.trim().parse()
}

/// A whole number from 1 on (callers, rounds).
pub fn at_least_one() -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(1..)
}

/// A time in seconds, fractions allowed, 0 or more (`--warmup 0.5`).
pub fn seconds(value: &str) -> Result<Duration, String> {
    let secs: f64 = value.trim().parse().map_err(|e| format!("{e}"))?;
    Duration::try_from_secs_f64(secs).map_err(|e| format!("not a time in seconds: {e}"))
}

/// A time in seconds above 0 (`--duration SECS`).
pub fn positive_seconds(value: &str) -> Result<Duration, String> {
    match seconds(value)? {
        d if d.is_zero() => Err("must be above 0".into()),
        d => Ok(d),
    }
}

/// Calls a second, above 0 and finite (`--rate 30000`).
pub fn rate(value: &str) -> Result<f64, String> {
    let rate: f64 = value.trim().parse().map_err(|e| format!("{e}"))?;
    if rate.is_finite() && rate > 0.0 {
        Ok(rate)
    } else {
        Err("must be a number of calls a second above 0".into())
    }
}

/// A share of the calls, 0 to 1.
pub fn share(value: &str) -> Result<f64, String> {
    let share: f64 = value.trim().parse().map_err(|e| format!("{e}"))?;
    if (0.0..=1.0).contains(&share) {
        Ok(share)
    } else {
        Err("a share is 0 to 1".into())
    }
}

/// A metainfo value, `KEY=VALUE`, neither empty (metainfo drops empty keys and values,
/// so such a pair would silently not be sent).
pub fn key_value(pair: &str) -> Result<(String, String), String> {
    match pair.split_once('=') {
        Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err("expected KEY=VALUE, neither empty".into()),
    }
}

/// `k=v,k2=v2` for metainfo pairs, `-` for none: one field of a `key=value` line.
pub fn pairs_field<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let list: Vec<String> = pairs.map(|(k, v)| format!("{k}={v}")).collect();
    if list.is_empty() {
        "-".into()
    } else {
        list.join(",")
    }
}

/// An etcd endpoint list, `etcd://HOST:PORT[,HOST:PORT...]` (`--registry`,
/// `--discover`, `--etcd`).
#[cfg(feature = "etcd")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdUrl {
    /// As given.
    pub url: String,
    /// Its `HOST:PORT` endpoints.
    pub endpoints: Vec<String>,
}

/// An etcd endpoint list. This build has no etcd support (the `etcd` feature is off):
/// no value of this type exists, as the flags that take one are refused while the
/// command line is read, so the compiler knows no etcd code can run.
#[cfg(not(feature = "etcd"))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EtcdUrl {}

/// Reads an [`EtcdUrl`]; without the `etcd` feature, refuses any, saying how to build
/// with it.
pub fn etcd_url(url: &str) -> Result<EtcdUrl, String> {
    #[cfg(feature = "etcd")]
    {
        let endpoints = etcd_registry::parse_url(url).map_err(|e| e.to_string())?;
        Ok(EtcdUrl {
            url: url.to_string(),
            endpoints,
        })
    }
    #[cfg(not(feature = "etcd"))]
    {
        let _ = url;
        Err(NO_ETCD.into())
    }
}

/// Why an etcd flag is refused in a build without the `etcd` feature.
pub const NO_ETCD: &str = "this build has no etcd support; build the examples with the \
                           `etcd` feature (`cargo run -p examples --features etcd --bin ...`), \
                           which needs protoc";

/// `--access-log N`: one call in `N` logged by a subscriber on stderr that shows
/// `INFO` and above, plainly (no terminal colours, so the lines can be read by a
/// program). `None`: nothing is installed.
pub fn access_log(every: Option<u64>) -> Option<volo_core::trace::AccessLog> {
    let every = every?;
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .init();
    Some(volo_core::trace::AccessLog { every })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print_alike() {
        for f in FramingArg::value_variants() {
            assert_eq!(FramingArg::from_str(f.name(), false), Ok(*f));
        }
        assert_eq!(ProtocolArg(Protocol::Json).name(), "json");
        assert_eq!(
            IoArg::from_str("tokio", false),
            Ok(IoArg((TransportKind::Tokio, None)))
        );
        assert_eq!(
            IoArg::from_str("uring", false),
            Ok(IoArg((TransportKind::Netpoll, Some(Driver::IoUring))))
        );
        assert!(FramingArg::from_str("http", false).is_err());
        for f in ClientFramingArg::value_variants() {
            assert_eq!(ClientFramingArg::from_str(f.name(), false), Ok(*f));
        }
        assert_eq!(
            ClientFramingArg::from_str("ttheader-framed", false),
            Ok(ClientFramingArg((Framing::TTHeader, true)))
        );
        // The plain names mean what they mean for the other programs.
        for f in FramingArg::value_variants() {
            let client = ClientFramingArg::from_str(f.name(), false).unwrap();
            assert_eq!(client.0, (f.0, false));
        }
    }

    #[test]
    fn values_are_checked() {
        assert!(address(" unix:/tmp/x.sock").is_ok());
        assert!(address("").is_err());
        assert_eq!(seconds("0.25"), Ok(Duration::from_millis(250)));
        assert_eq!(seconds("0"), Ok(Duration::ZERO));
        for bad in ["-1", "NaN", "inf", "x"] {
            assert!(seconds(bad).is_err(), "{bad}");
        }
        assert!(positive_seconds("0").is_err());
        assert_eq!(rate("2500.5"), Ok(2500.5));
        for (spin, busy, adaptive) in [
            (SpinArg::Adaptive, true, true),
            (SpinArg::Fixed, true, false),
            (SpinArg::Off, false, false),
        ] {
            let mut reactor = netpoll_rs::Config::default();
            spin.apply(&mut reactor);
            assert_eq!((reactor.busy_poll, reactor.adaptive_spin), (busy, adaptive));
        }
        for bad in ["0", "-1", "inf", "NaN", "x"] {
            assert!(rate(bad).is_err(), "{bad}");
        }
        assert_eq!(share("0.8"), Ok(0.8));
        assert!(share("1.5").is_err() && share("-0.1").is_err());
        assert_eq!(key_value("a=b=c"), Ok(("a".into(), "b=c".into())));
        for bad in ["a", "=b", "a="] {
            assert!(key_value(bad).is_err(), "{bad}");
        }
        assert_eq!(pairs_field([("a", "1"), ("b", "2")].into_iter()), "a=1,b=2");
        assert_eq!(pairs_field(std::iter::empty()), "-");
    }

    #[test]
    fn etcd_urls_need_the_feature() {
        let parsed = etcd_url("etcd://127.0.0.1:2379");
        #[cfg(feature = "etcd")]
        assert_eq!(
            parsed.map(|u| u.endpoints),
            Ok(vec!["127.0.0.1:2379".into()])
        );
        #[cfg(not(feature = "etcd"))]
        assert_eq!(parsed, Err(NO_ETCD.to_string()));
    }
}
