//! Command-line names for framings, protocols and socket transports, and the access
//! log's output, shared by the programs.

use volo_core::codec::{Framing, Protocol};
use volo_core::context::Address;
use volo_core::transport::TransportKind;

use crate::cli::Usage;

/// `ttheader` (Kitex's), `theader` (Apache's, bare, without zlib), `framed` or
/// `buffered`.
pub fn framing(name: &str) -> Result<Framing, Usage> {
    match name {
        "ttheader" => Ok(Framing::TTHeader),
        "theader" => Ok(Framing::THeader),
        "framed" => Ok(Framing::Framed),
        "buffered" => Ok(Framing::Buffered),
        other => Err(Usage(format!(
            "--transport {other:?}: ttheader, theader, framed or buffered"
        ))),
    }
}

/// `binary`, `compact` or `json` (not with the `ttheader` transport, which has no
/// protocol id for JSON).
pub fn protocol(name: &str) -> Result<Protocol, Usage> {
    match name {
        "binary" => Ok(Protocol::Binary),
        "compact" => Ok(Protocol::Compact),
        "json" => Ok(Protocol::Json),
        other => Err(Usage(format!(
            "--protocol {other:?}: binary, compact or json"
        ))),
    }
}

/// `netpoll` or `tokio`.
pub fn io(name: &str) -> Result<TransportKind, Usage> {
    match name {
        "netpoll" => Ok(TransportKind::Netpoll),
        "tokio" => Ok(TransportKind::Tokio),
        other => Err(Usage(format!("--io {other:?}: netpoll or tokio"))),
    }
}

/// `--addr`'s comma-separated list of addresses: at least one, since splitting
/// yields at least one piece and an empty piece is not an address.
pub fn addresses(list: &str) -> Result<Vec<Address>, Usage> {
    list.split(',')
        .map(|a| {
            a.trim()
                .parse::<Address>()
                .map_err(|e| Usage(format!("--addr {a:?}: {e}")))
        })
        .collect()
}

/// An `etcd://HOST:PORT[,HOST:PORT...]` URL's endpoints.
pub fn etcd(url: &str) -> Result<Vec<String>, Usage> {
    etcd_registry::parse_url(url).map_err(|e| Usage(format!("{url:?}: {e}")))
}

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
    fn an_address_list_has_one_address_at_least() {
        let two = addresses("127.0.0.1:1, unix:/tmp/x.sock").unwrap();
        assert_eq!(two.len(), 2);
        for bad in ["", ",", "127.0.0.1:1,"] {
            assert!(addresses(bad).is_err(), "{bad:?}");
        }
    }
}
