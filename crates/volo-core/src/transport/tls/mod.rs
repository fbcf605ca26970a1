//! TLS over TCP, with [rustls](https://docs.rs/rustls), on both transports (netpoll-rs
//! and tokio), for servers and clients.
//!
//! # Turning it on
//!
//! A server gets a certificate chain and its key, from PEM files, and optionally a
//! file of certificates to verify its clients' certificates against:
//!
//! ```no_run
//! use volo_core::server::ServerConfig;
//! use volo_core::transport::tls::{ClientAuth, ServerTls};
//!
//! # fn main() -> Result<(), volo_core::transport::tls::TlsConfigError> {
//! let tls = ServerTls::builder("keys/server.crt", "keys/server.key")
//!     // Optional: ask clients for a certificate and verify it against this file.
//!     .client_certs("keys/clients.pem", ClientAuth::Required)
//!     .build()?;
//! let config = ServerConfig {
//!     tls: Some(tls),
//!     ..ServerConfig::default()
//! };
//! # let _ = config;
//! # Ok(())
//! # }
//! ```
//!
//! A client gets the file of certificates it trusts its servers by, and optionally a
//! certificate of its own and the name to expect in the server's certificate:
//!
//! ```no_run
//! use volo_core::client::ClientConfig;
//! use volo_core::transport::tls::ClientTls;
//!
//! # fn main() -> Result<(), volo_core::transport::tls::TlsConfigError> {
//! let tls = ClientTls::builder("keys/ca.pem")
//!     // Optional: a certificate for servers that ask for one.
//!     .client_cert("keys/client.crt", "keys/client.key")
//!     // Optional: by default the host of the address called (`echo.internal` of
//!     // `echo.internal:9090`, or the IP address).
//!     .server_name("echo.internal")
//!     .build()?;
//! let config = ClientConfig {
//!     tls: Some(tls),
//!     ..ClientConfig::default()
//! };
//! # let _ = config;
//! # Ok(())
//! # }
//! ```
//!
//! Everything else is rustls' defaults with the *ring* provider: TLS 1.3 and 1.2, its
//! cipher suites and key exchange groups, session resumption on the client. For other
//! settings, build a `rustls` configuration and wrap it ([`ServerTls::from_rustls`],
//! [`ClientTls::from_rustls`]; this crate's `rustls` is re-exported as [`rustls`]).
//!
//! TLS applies to TCP addresses (`ip:port` and `name:port`). Unix-socket and
//! shared-memory connections of a server or client configured for TLS stay in the
//! clear: they do not leave the machine, and the file system's permissions guard who
//! may connect.
//!
//! # Which certificates are trusted
//!
//! A peer's certificate is trusted in one of two ways, on both sides:
//!
//! - **Pinned**: it is byte for byte one of the certificates of the trust file. It is
//!   then trusted as it is, as OpenSSL trusts a certificate found in its trust store:
//!   its validity dates are checked, and the handshake's signature is verified with
//!   its key, but nothing else about it: not its version, its extensions, whether it
//!   is a CA, nor (on a client) the server name. This is what self-signed
//!   certificates need, such as those of Apache Thrift's cross-language test suite:
//!   its `server.crt` is a CA certificate (a CA used as its own end entity) and its
//!   `client.crt` a version 1 certificate without extensions, both of which webpki
//!   (rustls' verifier) refuses, while OpenSSL-based peers accept them. The name is
//!   not checked because the certificate itself is what is trusted, not a name an
//!   authority vouched for: a trust file that pins the certificates of several
//!   servers lets each of them pass for any other.
//! - **Chained**: otherwise the certificate must chain to one of the trust file's
//!   certificates, as webpki verifies it (extensions, key usage, dates), and on a
//!   client it must name the server: the DNS name or IP address of
//!   [`ClientTlsBuilder::server_name`], by default the host of the address called.
//!
//! # Client certificates
//!
//! A server without [`ServerTlsBuilder::client_certs`] does not ask for client
//! certificates. With it, it asks every client for one during the handshake, and:
//!
//! - [`ClientAuth::Required`] (Apache's Python test server, and the choice when
//!   client certificates are the access control): a client that sends none fails the
//!   handshake;
//! - [`ClientAuth::Optional`]: a client that sends none is served, and one that sends
//!   a certificate the server does not trust fails the handshake.
//!
//! # Handshakes and failures
//!
//! A server runs each handshake on the connection's own task, within
//! [`ServerTimeouts::read`](crate::server::ServerTimeouts::read), so a
//! slow or silent client holds up no one else. A handshake that fails (bytes that are
//! not TLS, a plain-text Thrift client, a certificate not trusted, a peer that went
//! away or stayed silent) closes that connection only, after one `tracing` warning
//! that names the peer and the reason. A client's handshake counts towards its
//! connect timeout ([`ClientTimeouts::connect`]), with resolving the host and
//! connecting: a failure is an
//! [`ErrorKind::Connect`](crate::client::ErrorKind::Connect) error whose cause is an
//! `io::Error` holding the `rustls::Error`. One exception comes from TLS 1.3 itself: a
//! client finishes its handshake before the server has judged its certificate, so a
//! server that refuses it is heard of (by its alert) when the first reply is read, and
//! that call fails with an [`ErrorKind::Io`](crate::client::ErrorKind::Io) error.
//!
//! A connection that ends on this side (a server closing an idle or stalled
//! connection, or draining; a client letting a connection go, or dropped) sends
//! TLS's close_notify alert first, as RFC 8446 (section 6.1) asks: a peer that gets
//! none sees the connection cut, which OpenSSL-based peers log as an error. It is
//! handed to the socket without waiting, and not sent on a session that failed.
//!
//! On netpoll-rs, a server's TLS connections are served by a task each, whatever
//! [`ServerConfig::inline_dispatch`](crate::server::ServerConfig::inline_dispatch)
//! says: calls are started on the poller only for plain connections.
//!
//! [`ClientTimeouts::connect`]: crate::client::ClientTimeouts::connect
//!
//! # How it fits the transports
//!
//! rustls is sans-I/O: it takes ciphertext and gives plaintext, takes plaintext and
//! gives ciphertext, and leaves the sockets alone. A TLS connection wraps a connection
//! of either transport: ciphertext read by the transport (into netpoll-rs's linked
//! buffers, or a tokio socket's buffer) is handed to rustls as it lies there, and the
//! plaintext comes out in a buffer of the TLS connection, where frames are cut as on a
//! plain connection; replies are encoded into a plaintext buffer and encrypted, at
//! flush, into the transport's output, which goes out in one vectored write as before.

mod conn;
mod der;
mod verify;

pub(crate) use conn::TlsConn;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// The rustls this crate is built with, for [`ServerTls::from_rustls`] and
/// [`ClientTls::from_rustls`].
pub use rustls;

use crate::context::Address;
use verify::{ClientVerifier, ServerVerifier, Trust};

/// Why a TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsConfigError {
    /// A PEM file could not be read or is not PEM.
    #[error("reading {}: {source}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// A certificate file holds no certificate.
    #[error("{} holds no certificate", path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// A key file holds no private key (PKCS#8, PKCS#1 or SEC1, unencrypted).
    #[error("{} holds no private key", path.display())]
    NoKey {
        /// The file.
        path: PathBuf,
    },
    /// A certificate of a trust file is not a certificate that can be trusted either
    /// way (it does not parse).
    #[error("certificate {index} (from 0) of {} is malformed", path.display())]
    BadCertificate {
        /// The file.
        path: PathBuf,
        /// Its place in the file.
        index: usize,
    },
    /// A server name that is neither a DNS name nor an IP address.
    #[error("{0:?} is not a server name (a DNS name or an IP address)")]
    ServerName(String),
    /// rustls refused the settings (a key that does not match its certificate, a key
    /// type it does not support...).
    #[error("TLS settings: {0}")]
    Rustls(#[from] rustls::Error),
}

impl From<TlsConfigError> for io::Error {
    fn from(e: TlsConfigError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidInput, e)
    }
}

/// The crypto provider: *ring* (aws-lc-rs, rustls' default, needs cmake and NASM to
/// build).
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn pem_error(path: &Path, source: rustls::pki_types::pem::Error) -> TlsConfigError {
    TlsConfigError::Pem {
        path: path.to_path_buf(),
        source,
    }
}

/// Every certificate of a PEM file, in order; at least one. Text around the PEM
/// sections and sections of other kinds are skipped.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| pem_error(path, e))?;
    if certs.is_empty() {
        return Err(TlsConfigError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

/// The first private key of a PEM file.
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsConfigError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => TlsConfigError::NoKey {
            path: path.to_path_buf(),
        },
        e => pem_error(path, e),
    })
}

/// Whether a server asks for client certificates and requires one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ClientAuth {
    /// A client must present a certificate the server trusts (the default).
    #[default]
    Required,
    /// A client may present none; one it presents must be trusted.
    Optional,
}

/// A server's TLS settings: its certificate and key, and how it verifies clients (see
/// the [module docs](self)). Cheap to clone.
#[derive(Debug, Clone)]
pub struct ServerTls {
    config: Arc<rustls::ServerConfig>,
}

impl ServerTls {
    /// A builder for a server presenting the certificate chain in the PEM file
    /// `cert_chain` (its own certificate first) with the private key in the PEM file
    /// `key`.
    pub fn builder(cert_chain: impl AsRef<Path>, key: impl AsRef<Path>) -> ServerTlsBuilder {
        ServerTlsBuilder {
            cert_chain: cert_chain.as_ref().to_path_buf(),
            key: key.as_ref().to_path_buf(),
            client_certs: None,
        }
    }

    /// A rustls configuration made by hand, used as it is.
    pub fn from_rustls(config: Arc<rustls::ServerConfig>) -> ServerTls {
        ServerTls { config }
    }

    /// The rustls configuration.
    pub fn rustls_config(&self) -> &Arc<rustls::ServerConfig> {
        &self.config
    }

    /// A session for one accepted connection.
    pub(crate) fn session(&self) -> io::Result<rustls::Connection> {
        rustls::ServerConnection::new(Arc::clone(&self.config))
            .map(rustls::Connection::Server)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
    }
}

/// Builds a [`ServerTls`] (see [`ServerTls::builder`]).
#[derive(Debug, Clone)]
#[must_use]
pub struct ServerTlsBuilder {
    cert_chain: PathBuf,
    key: PathBuf,
    client_certs: Option<(PathBuf, ClientAuth)>,
}

impl ServerTlsBuilder {
    /// Asks clients for a certificate, verified against the certificates of the PEM
    /// file `trust` (pinned or chained, see the [module docs](self)); `auth` says
    /// whether a client without one is served. Default: clients are not asked.
    pub fn client_certs(mut self, trust: impl AsRef<Path>, auth: ClientAuth) -> Self {
        self.client_certs = Some((trust.as_ref().to_path_buf(), auth));
        self
    }

    /// Reads the files and builds the settings.
    pub fn build(self) -> Result<ServerTls, TlsConfigError> {
        let provider = provider();
        let chain = certificates(&self.cert_chain)?;
        let key = private_key(&self.key)?;
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()?;
        let builder = match &self.client_certs {
            Some((trust, auth)) => {
                let trust = Trust::load(trust, &provider)?;
                let mandatory = *auth == ClientAuth::Required;
                builder.with_client_cert_verifier(Arc::new(ClientVerifier::new(
                    trust,
                    Arc::clone(&provider),
                    mandatory,
                )))
            }
            None => builder.with_no_client_auth(),
        };
        let config = builder.with_single_cert(chain, key)?;
        Ok(ServerTls {
            config: Arc::new(config),
        })
    }
}

/// A client's TLS settings: whom it trusts, its own certificate if any, the server
/// name it expects (see the [module docs](self)). Cheap to clone.
#[derive(Debug, Clone)]
pub struct ClientTls {
    config: Arc<rustls::ClientConfig>,
    /// `None`: the host of each address called.
    server_name: Option<ServerName<'static>>,
}

impl ClientTls {
    /// A builder for a client that trusts the certificates of the PEM file `trust`
    /// (its servers' own, pinned, or the authorities that issued them).
    pub fn builder(trust: impl AsRef<Path>) -> ClientTlsBuilder {
        ClientTlsBuilder {
            trust: trust.as_ref().to_path_buf(),
            identity: None,
            server_name: None,
        }
    }

    /// A rustls configuration made by hand, used as it is; the server name is the host
    /// of each address called unless [`with_server_name`](Self::with_server_name)
    /// sets one.
    pub fn from_rustls(config: Arc<rustls::ClientConfig>) -> ClientTls {
        ClientTls {
            config,
            server_name: None,
        }
    }

    /// The same settings, expecting `name` (a DNS name or an IP address) in every
    /// server's certificate.
    pub fn with_server_name(mut self, name: &str) -> Result<ClientTls, TlsConfigError> {
        self.server_name = Some(server_name(name)?);
        Ok(self)
    }

    /// The rustls configuration.
    pub fn rustls_config(&self) -> &Arc<rustls::ClientConfig> {
        &self.config
    }

    /// A session for a connection to `addr`.
    pub(crate) fn session(&self, addr: &Address) -> io::Result<rustls::Connection> {
        let name = match (&self.server_name, addr) {
            (Some(name), _) => name.clone(),
            (None, Address::Tcp(a)) => ServerName::IpAddress(a.ip().into()),
            (None, Address::Host { name, .. }) => server_name(name)?,
            (None, Address::Unix(_) | Address::Shm(_)) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{addr} has no host to take a TLS server name from"),
                ));
            }
        };
        rustls::ClientConnection::new(Arc::clone(&self.config), name)
            .map(rustls::Connection::Client)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
    }
}

fn server_name(name: &str) -> Result<ServerName<'static>, TlsConfigError> {
    ServerName::try_from(name.to_string()).map_err(|_| TlsConfigError::ServerName(name.into()))
}

/// Builds a [`ClientTls`] (see [`ClientTls::builder`]).
#[derive(Debug, Clone)]
#[must_use]
pub struct ClientTlsBuilder {
    trust: PathBuf,
    identity: Option<(PathBuf, PathBuf)>,
    server_name: Option<String>,
}

impl ClientTlsBuilder {
    /// Presents the certificate chain of the PEM file `cert_chain`, with the private
    /// key of the PEM file `key`, to servers that ask for a client certificate.
    /// Default: none.
    pub fn client_cert(mut self, cert_chain: impl AsRef<Path>, key: impl AsRef<Path>) -> Self {
        self.identity = Some((
            cert_chain.as_ref().to_path_buf(),
            key.as_ref().to_path_buf(),
        ));
        self
    }

    /// The name (a DNS name or an IP address) a server's certificate must carry when
    /// it is chained, not pinned. Default: the host of the address called.
    pub fn server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }

    /// Reads the files and builds the settings.
    pub fn build(self) -> Result<ClientTls, TlsConfigError> {
        let provider = provider();
        let trust = Trust::load(&self.trust, &provider)?;
        let server_name = self.server_name.as_deref().map(server_name).transpose()?;
        let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ServerVerifier::new(
                trust,
                Arc::clone(&provider),
            )));
        let config = match &self.identity {
            Some((chain, key)) => {
                let identity = client_identity(chain, key, &provider)?;
                builder.with_client_cert_resolver(Arc::new(identity))
            }
            None => builder.with_no_client_auth(),
        };
        Ok(ClientTls {
            config: Arc::new(config),
            server_name,
        })
    }
}

/// The client's certificate chain and key, as one resolver.
///
/// Not rustls' `with_client_auth_cert`: it checks that the key matches the certificate
/// by parsing the certificate with webpki, which refuses X.509 version 1 certificates,
/// and peers that trust such a certificate as it is (OpenSSL's, the suite's
/// `client.crt`) accept it from a client. The key is checked against the certificate's
/// public key here instead, with this module's own reader.
fn client_identity(
    chain: &Path,
    key: &Path,
    provider: &Arc<rustls::crypto::CryptoProvider>,
) -> Result<rustls::sign::SingleCertAndKey, TlsConfigError> {
    let certs = certificates(chain)?;
    let signer = provider.key_provider.load_private_key(private_key(key)?)?;
    let leaf =
        der::cert_fields(certs[0].as_ref()).ok_or_else(|| TlsConfigError::BadCertificate {
            path: chain.to_path_buf(),
            index: 0,
        })?;
    match signer.public_key() {
        Some(spki) if spki.as_ref() != leaf.spki => {
            return Err(
                rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch).into(),
            );
        }
        _ => {}
    }
    Ok(rustls::sign::CertifiedKey::new(certs, signer).into())
}

/// Runs a server's handshake on an accepted connection, within `timeout`.
pub(crate) async fn accept(
    conn: crate::transport::Conn,
    tls: &ServerTls,
    timeout: std::time::Duration,
) -> io::Result<crate::transport::Conn> {
    let session = tls.session()?;
    match tokio::time::timeout(timeout, TlsConn::handshake(conn, session)).await {
        Ok(done) => done.map(|c| crate::transport::Conn::Tls(Box::new(c))),
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the TLS handshake did not finish within {timeout:?}"),
        )),
    }
}

/// Runs a client's handshake on a connection to `addr`, by `deadline`.
pub(crate) async fn connect(
    conn: crate::transport::Conn,
    tls: &ClientTls,
    addr: &Address,
    deadline: tokio::time::Instant,
) -> io::Result<crate::transport::Conn> {
    let session = tls.session(addr)?;
    match tokio::time::timeout_at(deadline, TlsConn::handshake(conn, session)).await {
        Ok(done) => done.map(|c| crate::transport::Conn::Tls(Box::new(c))),
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the TLS handshake did not finish within the connect timeout",
        )),
    }
}

#[cfg(test)]
mod tests;
