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
use volo_core::server::Server;

use crate::Setup;
use crate::handler::TestHandler;
use crate::options::{Encoding, ServerOptions, Socket};
use crate::thrift_test::ThriftTestServer;

/// Binds as `opts` say, writes the port file, and serves until `shutdown` completes.
/// `ready` is called with the address once the server listens.
pub async fn serve(
    opts: &ServerOptions,
    shutdown: impl Future<Output = ()>,
    ready: impl FnOnce(&Address),
) -> Result<(), Setup> {
    let common = &opts.common;
    match common.protocol.encoding {
        Encoding::Binary | Encoding::Compact => {}
        Encoding::Json => return Err(Setup::not_yet("the JSON protocol (TJSONProtocol)")),
        Encoding::Header => return Err(Setup::not_yet("Apache's THeader protocol")),
    }
    if common.protocol.multiplexed {
        return Err(Setup::not_yet(
            "the multiplexed protocol (one server for ThriftTest and SecondService)",
        ));
    }
    if common.tls.is_some() {
        return Err(Setup::not_yet("TLS (--ssl)"));
    }
    let addr = match &common.socket {
        Socket::Ip(port) => Address::Tcp(SocketAddr::from((Ipv4Addr::LOCALHOST, *port))),
        Socket::Domain(path) => {
            remove_stale_socket(path)?;
            Address::Unix(path.as_path().into())
        }
    };
    let server = Server::new(ThriftTestServer::new(TestHandler::new()))
        .bind(&addr)
        .await
        .map_err(|e| Setup::Failed(format!("cannot listen on {addr}: {e}")))?;
    let local = server.local_addr().clone();
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
        "serving ThriftTest on {local} ({} {}{})",
        common.transport.name(),
        common.protocol.name(),
        if common.tls.is_some() {
            " over TLS"
        } else {
            ""
        }
    );
    ready(&local);
    let served = server.serve_with_shutdown(shutdown).await;
    if let Socket::Domain(path) = &common.socket {
        // Ours: bound above, no one else's.
        let _ = std::fs::remove_file(path);
    }
    served.map_err(|e| Setup::Failed(format!("serving on {local}: {e}")))
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
