//! `thrift-test-client`: builds the clients the options ask for.
//!
//! The client stack is the one `<Service>Client::builder()` builds, set for a test
//! run: one connection (Apache's `TSimpleServer`, which Python's test server is,
//! serves one connection at a time), no retries and no circuit breakers (a failure
//! must show, not be retried away), the suite's framing and protocol, and a
//! [`SeqWatch`] around each attempt.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use volo_core::client::{BreakerConfig, ClientConfig, DefaultStack, RetryPolicy, Transport};
use volo_core::codec::{Framing, Protocol};
use volo_core::context::Address;

use crate::Setup;
use crate::checks::{Clients, SeqWatch, Watched};
use crate::options::{ClientOptions, Encoding, Socket, Transport as SuiteTransport};
use crate::thrift_test::ThriftTestClient;

/// The client stack of a test run.
pub type Stack = DefaultStack<Watched<Transport>>;

/// How long one call may take. Apache's runner gives a whole client run 6 to 15 s.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a connect may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The clients of one connection, as `opts` ask. Must run inside a tokio runtime.
pub fn connect(opts: &ClientOptions) -> Result<Clients<Stack>, Setup> {
    let common = &opts.common;
    let protocol = match common.protocol.encoding {
        Encoding::Binary => Protocol::Binary,
        Encoding::Compact => Protocol::Compact,
        Encoding::Json => return Err(Setup::not_yet("the JSON protocol (TJSONProtocol)")),
        Encoding::Header => return Err(Setup::not_yet("Apache's THeader protocol")),
    };
    if common.protocol.multiplexed {
        return Err(Setup::not_yet(
            "the multiplexed protocol (clients bound to a service name)",
        ));
    }
    if common.tls.is_some() {
        return Err(Setup::not_yet("TLS (--ssl)"));
    }
    let framing = match common.transport {
        SuiteTransport::Buffered => Framing::Buffered,
        SuiteTransport::Framed => Framing::Framed,
    };
    let addr = match &common.socket {
        Socket::Domain(path) => Address::Unix(path.as_path().into()),
        Socket::Ip(port) => tcp_address(&opts.host, *port)?,
    };
    let config = ClientConfig {
        framing,
        protocol,
        connect_timeout: CONNECT_TIMEOUT,
        rpc_timeout: Some(CALL_TIMEOUT),
        max_connections: 1,
        ..ClientConfig::default()
    };
    let seq = SeqWatch::new();
    let test = ThriftTestClient::builder()
        .address(addr)
        .config(config)
        .retry(RetryPolicy::new().max_retries(0))
        .service_breaker(BreakerConfig::disabled())
        .instance_breaker(None)
        .layer_inner(seq.clone())
        .build()
        .map_err(|e| Setup::Failed(format!("building the client: {e}")))?;
    Ok(Clients {
        test,
        second: None,
        seq,
    })
}

/// `host:port` as an address: an IP address as it is.
fn tcp_address(host: &str, port: u16) -> Result<Address, Setup> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    match bare.parse::<IpAddr>() {
        Ok(ip) => Ok(Address::Tcp(SocketAddr::new(ip, port))),
        Err(_) => Err(Setup::Unsupported(format!(
            "host names are not yet supported (--host={host}): give an IP address such as \
             127.0.0.1"
        ))),
    }
}
