//! `thrift-test-server`: serves `ThriftTest` (and `SecondService`, multiplexed) the way
//! the options ask.
//!
//! The server detects each connection's framing and protocol from its first bytes and
//! answers in kind (that is how volo-core serves), so `--transport` and `--protocol`
//! do not narrow what it accepts: they are checked, and a multiplexed protocol
//! (`multi*`) decides that `SecondService` is served next to `ThriftTest`, with
//! unprefixed calls going to `ThriftTest`, as Apache's `TMultiplexedProcessor` with a
//! default.

use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use volo_core::context::Address;
use volo_core::server::{BoundServer, Multiplex, Server, ServerConfig};
use volo_core::transport::tls::{ClientAuth, ServerTls};

use crate::Setup;
use crate::handler::{SecondHandler, TestHandler};
use crate::options::{Keys, ServerOptions, Socket};
use crate::thrift_test::{SecondServiceServer, ThriftTestServer};

/// Binds as `opts` say, writes the port file, and serves until `shutdown` completes.
/// `ready` is called with the address once the server listens.
pub async fn serve(
    opts: &ServerOptions,
    shutdown: impl Future<Output = ()>,
    ready: impl FnOnce(&Address),
) -> Result<(), Setup> {
    let common = &opts.common;
    let config = ServerConfig {
        tls: common.tls().as_ref().map(server_tls).transpose()?,
        ..ServerConfig::default()
    };
    let socket = common.socket();
    let addr = match &socket {
        Socket::Ip(port) => Address::Tcp(SocketAddr::from((Ipv4Addr::LOCALHOST, *port))),
        Socket::Domain(path) => {
            remove_stale_socket(path)?;
            Address::Unix(path.as_path().into())
        }
    };
    let handler = TestHandler::new();
    let bound = if common.protocol.multiplexed() {
        // As Apache's test servers: both services by name, ThriftTest the default.
        let both = Multiplex::new()
            .default_service(ThriftTestServer::new(handler))
            .service(SecondServiceServer::new(SecondHandler));
        Server::multiplexed(both)
            .config(config)
            .bind(&addr)
            .await
            .map(Bound::Two)
    } else {
        Server::new(ThriftTestServer::new(handler))
            .config(config)
            .bind(&addr)
            .await
            .map(Bound::One)
    };
    let server = bound.map_err(|e| Setup::Failed(format!("cannot listen on {addr}: {e}")))?;
    let local = match &server {
        Bound::One(s) => s.local_addr().clone(),
        Bound::Two(s) => s.local_addr().clone(),
    };
    if let Some(file) = &opts.port_file {
        let Address::Tcp(sa) = &local else {
            return Err(Setup::Failed(
                "--port-file needs a TCP port, not --domain-socket".into(),
            ));
        };
        std::fs::write(file, sa.port().to_string()).map_err(|e| {
            Setup::Failed(format!("cannot write the port to {}: {e}", file.display()))
        })?;
    }
    tracing::info!(
        "serving {} on {local} ({} {}{})",
        if common.protocol.multiplexed() {
            "ThriftTest and SecondService"
        } else {
            "ThriftTest"
        },
        common.transport.name(),
        common.protocol.name(),
        if common.ssl { " over TLS" } else { "" }
    );
    ready(&local);
    let served = match server {
        Bound::One(s) => s.serve_with_shutdown(shutdown).await,
        Bound::Two(s) => s.serve_with_shutdown(shutdown).await,
    };
    if let Socket::Domain(path) = &socket {
        // Ours: bound above, no one else's.
        let _ = std::fs::remove_file(path);
    }
    served.map_err(|e| Setup::Failed(format!("serving on {local}: {e}")))
}

/// The server of either kind, bound.
enum Bound<A, B> {
    /// `ThriftTest` alone.
    One(BoundServer<A>),
    /// `ThriftTest` and `SecondService`, multiplexed.
    Two(BoundServer<B>),
}

/// The suite's server TLS: `server.crt` and `server.key`; a client certificate is asked
/// for but not required, and one that is presented must be the suite's `client.crt` (a
/// self-signed X.509 v1 certificate, trusted as it is).
///
/// Not required, as in Apache's C++, Go and Rust test servers, whose clients present
/// none (Go's and Rust's test clients have no client certificate at all); only
/// Python's `TestServer.py` requires one, which is why Apache's own suite lists every
/// Go client against the Python server over `ip-ssl` as a known failure.
fn server_tls(keys: &Keys) -> Result<ServerTls, Setup> {
    ServerTls::builder(keys.file("server.crt"), keys.file("server.key"))
        .client_certs(keys.file("client.crt"), ClientAuth::Optional)
        .build()
        .map_err(|e| Setup::Failed(format!("TLS from {}: {e}", keys.dir.display())))
}

/// Removes a Unix socket file that no server listens on any more (one a killed server
/// left), as Apache's servers do; a live one, or any other file, is left for the bind
/// to fail on.
fn remove_stale_socket(path: &Path) -> Result<(), Setup> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    if !meta.file_type().is_socket() {
        return Ok(());
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            tracing::info!("removing the stale socket {}", path.display());
            std::fs::remove_file(path)
                .map_err(|e| Setup::Failed(format!("removing {}: {e}", path.display())))
        }
        _ => Ok(()),
    }
}
