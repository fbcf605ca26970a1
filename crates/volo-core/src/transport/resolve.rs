//! Host names to socket addresses, with the system's resolver.

use std::io;
use std::net::SocketAddr;

/// A host name that did not resolve to any address: the cause of the `io::Error` a
/// connect or a bind to it fails with (`io::ErrorKind::NotFound`, this error inside).
///
/// A client's call fails with an [`ErrorKind::Connect`](crate::client::ErrorKind)
/// error whose source is that `io::Error`:
///
/// ```
/// use volo_core::transport::ResolveError;
///
/// fn unresolved(e: &volo_core::client::Error) -> Option<&ResolveError> {
///     let io = std::error::Error::source(e)?.downcast_ref::<std::io::Error>()?;
///     io.get_ref()?.downcast_ref::<ResolveError>()
/// }
/// # let _ = unresolved;
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{name}:{port} does not resolve{}", cause.as_ref().map(|c| format!(": {c}")).unwrap_or_default())]
pub struct ResolveError {
    name: String,
    port: u16,
    /// What the resolver said (`None`: it answered with no address).
    #[source]
    cause: Option<io::Error>,
}

impl ResolveError {
    /// The host name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

fn not_found(name: &str, port: u16, cause: Option<io::Error>) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        ResolveError {
            name: name.to_string(),
            port,
            cause,
        },
    )
}

/// The error of a name whose addresses are none.
pub(super) fn no_address(name: &str, port: u16) -> io::Error {
    not_found(name, port, None)
}

/// The addresses of `name`, in the resolver's order; at least one. The system's
/// resolver blocks, so it runs on tokio's blocking threads. Not bounded in time here:
/// callers bound it.
pub(super) async fn resolve(name: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    match tokio::net::lookup_host((name, port)).await {
        Ok(addrs) => {
            let addrs: Vec<SocketAddr> = addrs.collect();
            if addrs.is_empty() {
                tracing::debug!(%name, "the name resolves to no address");
                return Err(no_address(name, port));
            }
            Ok(addrs)
        }
        Err(e) => Err(not_found(name, port, Some(e))),
    }
}
