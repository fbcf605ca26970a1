//! The command line (see the [crate docs](crate#arguments-and-flags)), and the parsers
//! of its values.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use volo_core::codec::{Framing, Protocol};
use volo_core::context::Address;

/// Calls a Thrift service by hand: the IDL read at run time, the arguments as JSON,
/// the reply printed as JSON; streaming methods streamed, one JSON object a line
/// each way.
///
/// Exit status: 0 a reply; 1 a usage or IDL error; 2 a connection or protocol
/// failure, or a timeout; 3 an application exception; 4 a declared exception (its
/// JSON on stdout).
#[derive(Debug, Parser)]
#[command(name = "thrift-call", version)]
pub(crate) struct Cli {
    /// The IDL file that defines the service (repeatable).
    #[arg(long, value_name = "FILE", required = true)]
    pub(crate) idl: Vec<PathBuf>,

    /// A directory to look for included files in (repeatable).
    #[arg(long, value_name = "DIR")]
    pub(crate) include: Vec<PathBuf>,

    /// Prints every Service.method of the IDL, one per line, and calls nothing.
    #[arg(long, conflicts_with_all = ["addr", "target", "json"])]
    pub(crate) list: bool,

    /// Where the service listens: host:port, a Unix socket path (with a /), unix:PATH
    /// or shm:PATH.
    #[arg(value_name = "ADDR", required_unless_present = "list")]
    pub(crate) addr: Option<String>,

    /// The method to call: Service.method, or module.Service.method.
    #[arg(value_name = "SERVICE.METHOD", required_unless_present = "list")]
    pub(crate) target: Option<String>,

    /// The arguments as a JSON object keyed by argument name; `-` or absent: read
    /// from stdin. A stream's requests: the request struct as a JSON object, one a
    /// line (client and bidirectional streams read stdin's lines as they come).
    #[arg(value_name = "JSON")]
    pub(crate) json: Option<String>,

    /// How messages are framed.
    #[arg(long, value_enum, default_value_t = TransportArg::Ttheader)]
    pub(crate) transport: TransportArg,

    /// The Thrift protocol.
    #[arg(long, value_enum, default_value_t = ProtocolArg::Binary)]
    pub(crate) protocol: ProtocolArg,

    /// Prefixes the method with the service name (Apache's TMultiplexedProtocol).
    #[arg(long)]
    pub(crate) multiplexed: bool,

    /// Connects with TLS (needs --ca).
    #[arg(long, requires = "ca")]
    pub(crate) tls: bool,

    /// The certificates (PEM) to verify the server's against.
    #[arg(long, value_name = "FILE", requires = "tls")]
    pub(crate) ca: Option<PathBuf>,

    /// A client certificate chain (PEM), for servers that ask for one.
    #[arg(long, value_name = "FILE", requires_all = ["tls", "key"])]
    pub(crate) cert: Option<PathBuf>,

    /// The client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub(crate) key: Option<PathBuf>,

    /// The name expected in the server's certificate (default: ADDR's host).
    #[arg(long, value_name = "NAME", requires = "tls")]
    pub(crate) server_name: Option<String>,

    /// How long the connect, and then the call, may take: 500ms, 2s, 1.5s, 1m.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = duration)]
    pub(crate) timeout: Duration,

    /// Metainfo to send, as a transient value (one hop), as kitexcall's -meta does
    /// (repeatable; needs ttheader or theader).
    #[arg(short = 'H', long = "meta", value_name = "KEY=VALUE", value_parser = key_value)]
    pub(crate) meta: Vec<(String, String)>,
}

/// `--transport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum TransportArg {
    /// Kitex's TTHeader (metainfo).
    Ttheader,
    /// A 4-byte length, then the message.
    Framed,
    /// The message alone.
    Buffered,
    /// Apache Thrift's THeader (metainfo).
    Theader,
}

impl TransportArg {
    /// The framing it names.
    pub(crate) fn framing(self) -> Framing {
        match self {
            TransportArg::Ttheader => Framing::TTHeader,
            TransportArg::Framed => Framing::Framed,
            TransportArg::Buffered => Framing::Buffered,
            TransportArg::Theader => Framing::THeader,
        }
    }

    /// Whether it carries metainfo (a header).
    pub(crate) fn has_header(self) -> bool {
        matches!(self, TransportArg::Ttheader | TransportArg::Theader)
    }
}

/// `--protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ProtocolArg {
    /// Thrift Binary.
    Binary,
    /// Thrift Compact.
    Compact,
}

impl ProtocolArg {
    /// The protocol it names.
    pub(crate) fn protocol(self) -> Protocol {
        match self {
            ProtocolArg::Binary => Protocol::Binary,
            ProtocolArg::Compact => Protocol::Compact,
        }
    }
}

/// A duration with its unit: `500ms`, `2s`, `1.5s`, `1m`; above 0.
pub(crate) fn duration(value: &str) -> Result<Duration, String> {
    let value = value.trim();
    let (number, unit) = if let Some(n) = value.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = value.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = value.strip_suffix('m') {
        (n, 60.0)
    } else {
        return Err("expected a number and a unit, ms, s or m: 500ms, 2s, 1m".into());
    };
    let n: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{number:?} is not a number"))?;
    if !(n.is_finite() && n > 0.0) {
        return Err("must be above 0".into());
    }
    Duration::try_from_secs_f64(n * unit).map_err(|e| e.to_string())
}

/// Metainfo, `KEY=VALUE`, neither empty (metainfo drops empty keys and values, so
/// such a pair would silently not be sent).
pub(crate) fn key_value(pair: &str) -> Result<(String, String), String> {
    match pair.split_once('=') {
        Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err("expected KEY=VALUE, neither empty".into()),
    }
}

/// `ADDR`: `unix:PATH` and `shm:PATH` as written, a path with a `/` as a Unix socket,
/// anything else `host:port`.
pub(crate) fn address(value: &str) -> Result<Address, String> {
    let prefixed = value.starts_with("unix:") || value.starts_with("shm:");
    let spelled = if !prefixed && value.contains('/') {
        format!("unix:{value}")
    } else {
        value.to_string()
    };
    spelled.parse().map_err(|_| {
        format!("bad address {value:?}: expected host:port, a Unix socket path (with a /), unix:PATH or shm:PATH")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_unit_and_a_positive_number() {
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("1m"), Ok(Duration::from_secs(60)));
        for bad in ["5", "0s", "-1s", "xs", "infs", "NaNms", ""] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn addresses_are_host_port_or_paths() {
        assert!(matches!(address("127.0.0.1:80"), Ok(Address::Tcp(_))));
        assert!(matches!(address("localhost:80"), Ok(Address::Host { .. })));
        assert!(matches!(address("/tmp/a.sock"), Ok(Address::Unix(_))));
        assert!(matches!(address("./a:1.sock"), Ok(Address::Unix(_))));
        assert!(matches!(address("unix:a.sock"), Ok(Address::Unix(_))));
        assert!(matches!(address("shm:/tmp/s"), Ok(Address::Shm(_))));
        for bad in ["a.sock", "127.0.0.1", "host:", "unix:"] {
            assert!(address(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn metainfo_pairs_have_both_halves() {
        assert_eq!(key_value("a=b=c"), Ok(("a".into(), "b=c".into())));
        for bad in ["a", "=b", "a="] {
            assert!(key_value(bad).is_err(), "{bad}");
        }
    }
}
