//! `thrift-test-client`: builds the clients the options ask for.
//!
//! The client stack is the one `<Service>Client::builder()` builds, set for a test
//! run: one connection (Apache's `TSimpleServer`, which Python's test server is,
//! serves one connection at a time), no retries and no circuit breakers (a failure
//! must show, not be retried away), the suite's framing and protocol, and a
//! [`SeqWatch`] around each attempt. With a multiplexed protocol both clients share
//! that one connection, bound to `ThriftTest` and `SecondService`.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use volo_core::client::{BreakerConfig, ClientConfig, DefaultStack, RetryPolicy, Transport};
use volo_core::codec::{Framing, Protocol, theader};
use volo_core::context::Address;
use volo_core::transport::tls::ClientTls;

use crate::Setup;
use crate::checks::{Clients, SeqWatch, Watched};
use crate::options::{ClientOptions, Encoding, Keys, Socket, Transport as SuiteTransport};
use crate::thrift_test::{SecondServiceClient, ThriftTestClient};
use volo_core::client::{ClientTimeouts, ConnectionPool};

/// The client stack of a test run.
pub type Stack = DefaultStack<Watched<Transport>>;

/// How long one call may take. Apache's runner gives a whole client run 6 to 15 s.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a connect may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The clients of one connection, as `opts` ask. Must run inside a tokio runtime.
pub fn connect(opts: &ClientOptions) -> Result<Clients<Stack>, Setup> {
    let common = &opts.common;
    let (framing, protocol) = match (common.protocol.encoding(), common.transport) {
        (Encoding::Binary, SuiteTransport::Buffered) => (Framing::Buffered, Protocol::Binary),
        (Encoding::Binary, SuiteTransport::Framed) => (Framing::Framed, Protocol::Binary),
        (Encoding::Compact, SuiteTransport::Buffered) => (Framing::Buffered, Protocol::Compact),
        (Encoding::Compact, SuiteTransport::Framed) => (Framing::Framed, Protocol::Compact),
        (Encoding::Json, SuiteTransport::Buffered) => (Framing::Buffered, Protocol::Json),
        (Encoding::Json, SuiteTransport::Framed) => (Framing::Framed, Protocol::Json),
        // Binary inside, as Apache's THeaderProtocol writes by default; over the
        // framed transport the whole THeader frame goes inside a Framed length.
        (Encoding::Header, _) => (Framing::THeader, Protocol::Binary),
    };
    let addr = match &common.socket() {
        Socket::Domain(path) => Address::Unix(path.as_path().into()),
        Socket::Ip(port) => tcp_address(&opts.host, *port)?,
    };
    let config = ClientConfig {
        format: volo_core::client::WireFormat {
            framing,
            protocol,
            theader: theader::Options {
                zlib: false,
                framed: common.transport == SuiteTransport::Framed,
            },
            ..Default::default()
        },
        tls: common.tls().as_ref().map(client_tls).transpose()?,
        timeouts: ClientTimeouts {
            connect: CONNECT_TIMEOUT,
            rpc: Some(CALL_TIMEOUT),
        },
        pool: ConnectionPool {
            max_per_instance: 1,
            ..Default::default()
        },
        ..ClientConfig::default()
    };
    let seq = SeqWatch::new();
    let mut builder = ThriftTestClient::builder()
        .address(addr)
        .config(config)
        .retry(RetryPolicy::new().max_retries(0))
        .service_breaker(BreakerConfig::disabled())
        .instance_breaker(None);
    if common.protocol.multiplexed() {
        builder = builder.multiplexed_service("ThriftTest");
    }
    let test = builder
        .layer_inner(seq.clone())
        .build()
        .map_err(|e| Setup::Failed(format!("building the client: {e}")))?;
    // The same stack, so the same connection, as Apache's clients share one
    // transport between the two services.
    let second = common.protocol.multiplexed().then(|| {
        SecondServiceClient::new(
            test.client()
                .clone()
                .with_multiplexed_service("SecondService"),
        )
    });
    Ok(Clients { test, second, seq })
}

/// The suite's client TLS: trusts the server by `CA.pem` (the suite's self-signed
/// `server.crt`) and presents `client.crt` and `client.key` when the directory has
/// them (Apache's Python test server requires a client certificate; its other test
/// servers ask for none), no certificate otherwise.
fn client_tls(keys: &Keys) -> Result<ClientTls, Setup> {
    let mut tls = ClientTls::builder(keys.file("CA.pem"));
    let (cert, key) = (keys.file("client.crt"), keys.file("client.key"));
    if cert.exists() || key.exists() {
        tls = tls.client_cert(cert, key);
    }
    tls.build()
        .map_err(|e| Setup::Failed(format!("TLS from {}: {e}", keys.dir.display())))
}

/// `host:port` as an address: an IP address as it is, a name looked up on connect.
fn tcp_address(host: &str, port: u16) -> Result<Address, Setup> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(Address::Tcp(SocketAddr::new(ip, port)));
    }
    format!("{host}:{port}")
        .parse()
        .map_err(|e| Setup::Failed(format!("--host={host}: {e}")))
}
