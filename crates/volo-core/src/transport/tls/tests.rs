//! TLS end to end on loopback, with certificates made for each test: the chained path
//! (a CA and its leaves), the pinned path (self-signed certificates used as they are),
//! both transports on both sides, client certificates, and hostile clients.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};

use super::verify::{ServerVerifier, Trust};
use super::*;
use crate::client::ClientTimeouts;
use crate::client::{Client, ClientConfig, ClientContext, Error, ErrorKind};
use crate::codec::Framing;
use crate::config::TransportConfig;
use crate::server::ServerConfig;
use crate::server::ServerTimeouts;
use crate::test_support::*;
use crate::transport::TransportKind;

/// Certificates and keys as PEM files in a directory of their own, removed on drop:
///
/// - `ca.crt`: a CA; `server.crt`/`.key` (SAN `localhost` and `127.0.0.1`) and
///   `client.crt`/`.key`: leaves it issued;
/// - `other-ca.crt`, and `other-client.crt`/`.key`, a leaf it issued;
/// - `pinned-server.crt`/`.key`, `pinned-client.crt`/`.key`: self-signed CA
///   certificates without subject alternative names, used as end entities (what
///   webpki refuses and pinning accepts); `pinned-server-twin.crt`, another self-signed
///   certificate with the same key and subject; `expired.crt`/`.key`, self-signed and
///   out of date.
struct Certs {
    dir: PathBuf,
}

fn leaf_params(names: &[&str], purpose: ExtendedKeyUsagePurpose) -> CertificateParams {
    let mut params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    params.extended_key_usages = vec![purpose];
    params
}

fn ca_params(name: &str) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params
}

impl Certs {
    fn new(tag: &str) -> Certs {
        let dir = std::env::temp_dir().join(format!("volo-core-tls-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let certs = Certs { dir };
        let write = |name: &str, text: &str| std::fs::write(certs.path(name), text).unwrap();

        for (ca, leaves) in [
            ("ca", &[("server", true), ("client", false)][..]),
            ("other-ca", &[("other-client", false)][..]),
        ] {
            let ca_key = KeyPair::generate().unwrap();
            let params = ca_params(ca);
            write(
                &format!("{ca}.crt"),
                &params.self_signed(&ca_key).unwrap().pem(),
            );
            let issuer = Issuer::new(params, ca_key);
            for &(leaf, server) in leaves {
                let key = KeyPair::generate().unwrap();
                let params = if server {
                    leaf_params(
                        &["localhost", "127.0.0.1"],
                        ExtendedKeyUsagePurpose::ServerAuth,
                    )
                } else {
                    leaf_params(&[], ExtendedKeyUsagePurpose::ClientAuth)
                };
                write(
                    &format!("{leaf}.crt"),
                    &params.signed_by(&key, &issuer).unwrap().pem(),
                );
                write(&format!("{leaf}.key"), &key.serialize_pem());
            }
        }
        for name in ["pinned-server", "pinned-client", "expired"] {
            let key = KeyPair::generate().unwrap();
            let mut params = ca_params(name);
            if name == "expired" {
                params.not_before = rcgen::date_time_ymd(2000, 1, 1);
                params.not_after = rcgen::date_time_ymd(2001, 1, 1);
            }
            write(
                &format!("{name}.crt"),
                &params.self_signed(&key).unwrap().pem(),
            );
            if name == "pinned-server" {
                // Same key, same subject, another serial number: other bytes.
                let twin = params.self_signed(&key).unwrap().pem();
                write("pinned-server-twin.crt", &twin);
            }
            write(&format!("{name}.key"), &key.serialize_pem());
        }
        certs
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn server(&self, cert: &str) -> ServerTlsBuilder {
        ServerTls::builder(
            self.path(&format!("{cert}.crt")),
            self.path(&format!("{cert}.key")),
        )
    }

    fn client(&self, trust: &str, cert: Option<&str>) -> ClientTls {
        let mut b = ClientTls::builder(self.path(trust));
        if let Some(cert) = cert {
            b = b.client_cert(
                self.path(&format!("{cert}.crt")),
                self.path(&format!("{cert}.key")),
            );
        }
        b.build().unwrap()
    }
}

impl Certs {
    /// Like [`client`](Self::client), but offering TLS 1.2 only.
    fn tls12_client(&self, trust: &str, cert: Option<&str>) -> ClientTls {
        let provider = provider();
        let trust = Trust::load(&self.path(trust), &provider).unwrap();
        let verifier = Arc::new(ServerVerifier::new(trust, Arc::clone(&provider)));
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS12])
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match cert {
            Some(cert) => builder
                .with_client_auth_cert(
                    certificates(&self.path(&format!("{cert}.crt"))).unwrap(),
                    private_key(&self.path(&format!("{cert}.key"))).unwrap(),
                )
                .unwrap(),
            None => builder.with_no_client_auth(),
        };
        ClientTls::from_rustls(Arc::new(config))
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn server_config(tls: ServerTls, transport: TransportKind, inline: bool) -> ServerConfig {
    ServerConfig {
        tls: Some(tls),
        transport: TransportConfig {
            kind: transport,
            ..Default::default()
        },
        inline_dispatch: inline,
        ..ServerConfig::default()
    }
}

fn client(addr: Address, tls: ClientTls, transport: TransportKind) -> Client {
    client_with(addr, tls, |c| c.transport.kind = transport)
}

fn client_with(addr: Address, tls: ClientTls, tune: impl FnOnce(&mut ClientConfig)) -> Client {
    let mut config = ClientConfig {
        tls: Some(tls),
        timeouts: ClientTimeouts {
            connect: Duration::from_secs(10),
            ..Default::default()
        },
        ..ClientConfig::default()
    };
    tune(&mut config);
    Client::builder("Test")
        .address(addr)
        .config(config)
        // Each failure below must be the first attempt's, seen as it is.
        .retry(crate::client::RetryPolicy::default().max_retries(0))
        .instance_breaker(None)
        .build()
        .unwrap()
}

async fn echo(client: &Client, t: &str) -> Result<Text, Error> {
    client
        .call::<Text, Text>(&mut ClientContext::new(), "echo", text(1, t))
        .await
}

/// The `rustls::Error` a failed call carries, wherever it is in the chain.
fn rustls_cause(e: &Error) -> Option<&rustls::Error> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cause {
        if let Some(tls) = c.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        if let Some(io) = c.downcast_ref::<io::Error>()
            && let Some(inner) = io.get_ref()
            && let Some(tls) = inner.downcast_ref::<rustls::Error>()
        {
            return Some(tls);
        }
        cause = c.source();
    }
    None
}

fn assert_refused(e: &Error, what: &str, want: impl Fn(&rustls::Error) -> bool) {
    assert_eq!(e.kind(), ErrorKind::Connect, "{what}: {e:?}");
    let cause = rustls_cause(e).unwrap_or_else(|| panic!("{what}: no rustls error in {e:?}"));
    assert!(want(cause), "{what}: {cause:?}");
}

const LAYOUTS: [(TransportKind, bool); 3] = [
    (TransportKind::Netpoll, true),
    (TransportKind::Netpoll, false),
    (TransportKind::Tokio, false),
];

/// A CA-issued server certificate, with and without a client certificate required,
/// for every server layout and client transport: single calls, a frame of 1 MiB
/// (many TLS records each way), and a mux client's concurrent calls.
#[test]
fn calls_go_over_tls_on_both_transports_with_and_without_client_certs() {
    let certs = Certs::new("both");
    let big = "x".repeat(1 << 20);
    run_bounded(Duration::from_secs(120), async {
        for (server_kind, inline) in LAYOUTS {
            for with_client_cert in [false, true] {
                let mut tls = certs.server("server");
                if with_client_cert {
                    tls = tls.client_certs(certs.path("ca.crt"), ClientAuth::Required);
                }
                let config = server_config(tls.build().unwrap(), server_kind, inline);
                let server = start(config).await;
                for client_kind in [TransportKind::Netpoll, TransportKind::Tokio] {
                    let what = format!(
                        "server {server_kind:?} inline={inline}, client {client_kind:?}, \
                         client cert {with_client_cert}"
                    );
                    let identity = with_client_cert.then_some("client");
                    let tls = certs.client("ca.crt", identity);
                    let c = client(Address::Tcp(server.addr), tls.clone(), client_kind);
                    for t in ["hello", big.as_str(), "after"] {
                        let got = echo(&c, t).await.unwrap_or_else(|e| panic!("{what}: {e}"));
                        assert_eq!(got, text(0, t), "{what}");
                    }
                    let mux = client_with(Address::Tcp(server.addr), tls, |c| {
                        c.transport.kind = client_kind;
                        c.format.framing = Framing::TTHeader;
                        c.pool.mux = true;
                    });
                    let calls: Vec<_> = (0..20)
                        .map(|i| {
                            let mux = mux.clone();
                            tokio::spawn(async move { echo(&mux, &i.to_string()).await })
                        })
                        .collect();
                    for (i, call) in calls.into_iter().enumerate() {
                        let got = call
                            .await
                            .unwrap()
                            .unwrap_or_else(|e| panic!("{what}: {e}"));
                        assert_eq!(got, text(0, &i.to_string()), "{what}");
                    }
                }
                assert!(!server.peers.lock().unwrap().is_empty());
                server.stop().await;
            }
        }
    });
}

/// Streams run over TLS too, on both transports, with a client certificate.
#[test]
fn streams_go_over_tls() {
    let certs = Certs::new("streams");
    run_bounded(Duration::from_secs(60), async {
        for kind in [TransportKind::Netpoll, TransportKind::Tokio] {
            let tls = certs
                .server("server")
                .client_certs(certs.path("ca.crt"), ClientAuth::Required);
            let config = server_config(tls.build().unwrap(), kind, false);
            let at: Address = "127.0.0.1:0".parse().unwrap();
            let server = crate::stream::tests::start_streaming(config, &at).await;
            let mut config = ClientConfig::default();
            config.transport.kind = kind;
            config.tls = Some(certs.client("ca.crt", Some("client")));
            let c = crate::client::StreamClient::new("Test", server.address.clone(), &config)
                .expect("a client");
            crate::stream::tests::bidi_round_trip(&c, 20, 2000).await;
            server.stop().await;
        }
    });
}

/// The chained path checks the name: the IP address called, the host name called, or
/// the name set in the settings.
#[test]
fn a_chained_certificate_must_name_the_server_called() {
    let certs = Certs::new("names");
    run_bounded(Duration::from_secs(120), async {
        let server = start(server_config(
            certs.server("server").build().unwrap(),
            TransportKind::Netpoll,
            true,
        ))
        .await;
        let port = server.addr.port();
        for kind in [TransportKind::Netpoll, TransportKind::Tokio] {
            let by_ip = client(
                Address::Tcp(server.addr),
                certs.client("ca.crt", None),
                kind,
            );
            assert_eq!(echo(&by_ip, "ip").await.unwrap(), text(0, "ip"));
            let at: Address = format!("localhost:{port}").parse().unwrap();
            let by_name = client(at, certs.client("ca.crt", None), kind);
            assert_eq!(echo(&by_name, "name").await.unwrap(), text(0, "name"));
            let named = ClientTls::builder(certs.path("ca.crt"))
                .server_name("elsewhere.test")
                .build()
                .unwrap();
            let wrong = client(Address::Tcp(server.addr), named, kind);
            let e = echo(&wrong, "x").await.unwrap_err();
            assert_refused(&e, "another name", |c| {
                matches!(
                    c,
                    rustls::Error::InvalidCertificate(
                        rustls::CertificateError::NotValidForNameContext { .. }
                    )
                )
            });
        }
        server.stop().await;
    });
}

/// A self-signed CA certificate without a SAN, on both sides: refused by webpki, taken
/// as it is when the trust file holds those very bytes, over TLS 1.3 and 1.2 (whose
/// handshake signatures are checked apart). A certificate with the same key and
/// subject but other bytes is not pinned, and webpki refuses it.
#[test]
fn pinned_certificates_are_trusted_as_they_are() {
    let certs = Certs::new("pinned");
    run_bounded(Duration::from_secs(120), async {
        let tls = certs
            .server("pinned-server")
            .client_certs(certs.path("pinned-client.crt"), ClientAuth::Required)
            .build()
            .unwrap();
        for (kind, inline) in LAYOUTS {
            let server = start(server_config(tls.clone(), kind, inline)).await;
            let addr = Address::Tcp(server.addr);
            let tls13 = certs.client("pinned-server.crt", Some("pinned-client"));
            let c = client(addr.clone(), tls13, kind);
            assert_eq!(echo(&c, "1.3").await.unwrap(), text(0, "1.3"));

            let tls12 = certs.tls12_client("pinned-server.crt", Some("pinned-client"));
            let c = client(addr.clone(), tls12, kind);
            assert_eq!(echo(&c, "1.2").await.unwrap(), text(0, "1.2"));

            let twin = certs.client("pinned-server-twin.crt", Some("pinned-client"));
            let e = echo(&client(addr, twin, kind), "x").await.unwrap_err();
            // It chains to the twin (same subject and key), but is a CA certificate.
            assert_refused(&e, "a twin certificate", |c| {
                format!("{c:?}").contains("CaUsedAsEndEntity")
            });
            server.stop().await;
        }
    });
}

/// Presents one certificate and signs with the key of another.
#[derive(Debug)]
struct Impostor(Arc<rustls::sign::CertifiedKey>);

impl rustls::server::ResolvesServerCert for Impostor {
    fn resolve(
        &self,
        _hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(Arc::clone(&self.0))
    }
}

/// A server that presents a pinned certificate without its key fails the handshake
/// signature check, over TLS 1.3 and 1.2.
#[test]
fn a_pinned_certificate_presented_with_another_key_is_refused() {
    let certs = Certs::new("impostor");
    let provider = provider();
    let key = provider
        .key_provider
        .load_private_key(private_key(&certs.path("pinned-client.key")).unwrap())
        .unwrap();
    let chain = certificates(&certs.path("pinned-server.crt")).unwrap();
    let impostor = Impostor(Arc::new(rustls::sign::CertifiedKey::new(chain, key)));
    let config = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(impostor));
    let tls = ServerTls::from_rustls(Arc::new(config));
    run_bounded(Duration::from_secs(120), async {
        let server = start(server_config(tls, TransportKind::Tokio, false)).await;
        let addr = Address::Tcp(server.addr);
        let tls13 = certs.client("pinned-server.crt", None);
        for (what, tls) in [
            ("TLS 1.3", tls13),
            ("TLS 1.2", certs.tls12_client("pinned-server.crt", None)),
        ] {
            let e = echo(&client(addr.clone(), tls, TransportKind::Tokio), "x")
                .await
                .unwrap_err();
            assert_refused(&e, what, |c| {
                matches!(
                    c,
                    rustls::Error::InvalidCertificate(rustls::CertificateError::BadSignature)
                )
            });
        }
        server.stop().await;
    });
}

#[test]
fn an_expired_pinned_certificate_is_refused() {
    let certs = Certs::new("expired");
    run_bounded(Duration::from_secs(120), async {
        let server = start(server_config(
            certs.server("expired").build().unwrap(),
            TransportKind::Tokio,
            false,
        ))
        .await;
        let c = client(
            Address::Tcp(server.addr),
            certs.client("expired.crt", None),
            TransportKind::Tokio,
        );
        let e = echo(&c, "x").await.unwrap_err();
        assert_refused(&e, "expired", |c| {
            matches!(
                c,
                rustls::Error::InvalidCertificate(rustls::CertificateError::ExpiredContext { .. })
            )
        });
        server.stop().await;
    });
}

/// A client that trusts another CA refuses the server; a server that requires a client
/// certificate refuses a client without one or with one from another CA (the call
/// fails and the handler never runs); an optional one serves a client without one.
#[test]
fn certificates_from_another_ca_are_refused_both_ways() {
    let certs = Certs::new("wrong-ca");
    run_bounded(Duration::from_secs(120), async {
        for (kind, inline) in LAYOUTS {
            let required = certs
                .server("server")
                .client_certs(certs.path("ca.crt"), ClientAuth::Required)
                .build()
                .unwrap();
            let server = start(server_config(required, kind, inline)).await;
            let addr = Address::Tcp(server.addr);
            let e = echo(
                &client(
                    addr.clone(),
                    certs.client("other-ca.crt", Some("client")),
                    kind,
                ),
                "x",
            )
            .await
            .unwrap_err();
            assert_refused(&e, "another CA's server", |c| {
                matches!(
                    c,
                    rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer)
                )
            });
            for identity in [None, Some("other-client")] {
                let c = client(addr.clone(), certs.client("ca.crt", identity), kind);
                assert!(echo(&c, "x").await.is_err(), "{identity:?} was served");
            }
            assert!(server.peers.lock().unwrap().is_empty(), "a handler ran");
            server.stop().await;

            let optional = certs
                .server("server")
                .client_certs(certs.path("ca.crt"), ClientAuth::Optional)
                .build()
                .unwrap();
            let server = start(server_config(optional, kind, inline)).await;
            let addr = Address::Tcp(server.addr);
            let c = client(addr.clone(), certs.client("ca.crt", None), kind);
            assert_eq!(echo(&c, "none").await.unwrap(), text(0, "none"));
            let c = client(addr.clone(), certs.client("ca.crt", Some("client")), kind);
            assert_eq!(echo(&c, "good").await.unwrap(), text(0, "good"));
            let c = client(addr, certs.client("ca.crt", Some("other-client")), kind);
            assert!(echo(&c, "bad").await.is_err());
            server.stop().await;
        }
    });
}

/// Reads until the server closes; what it sent back.
fn read_until_closed(s: &mut TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return all,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return all,
            Err(e) => panic!("the server did not close the connection: {e}"),
        }
    }
}

/// Bytes that are not TLS, a plain-text Thrift client, and a client that says nothing
/// each get their own connection closed (the silent one after the read timeout), with
/// one warning naming them; a TLS client's calls go on between them. The read timeout,
/// which bounds the handshake, is long enough for the good client's handshake on a
/// loaded machine.
#[test]
fn garbage_plain_text_and_silent_clients_close_only_their_own_connection() {
    let certs = Certs::new("hostile");
    let log = captured_log();
    run_bounded(Duration::from_secs(120), async {
        for (kind, inline) in LAYOUTS {
            let config = ServerConfig {
                timeouts: ServerTimeouts {
                    read: Duration::from_secs(1),
                    ..Default::default()
                },
                ..server_config(certs.server("server").build().unwrap(), kind, inline)
            };
            let server = start(config).await;
            let good = client(
                Address::Tcp(server.addr),
                certs.client("ca.crt", None),
                kind,
            );
            assert_eq!(echo(&good, "first").await.unwrap(), text(0, "first"));
            let mut plain_call = vec![0, 0, 0, 0x1d, 0x80, 1, 0, 1, 0, 0, 0, 4];
            plain_call.extend_from_slice(b"echo\0\0\0\x01\x0b\0\x01\0\0\0\x02hi\0\0");
            for (what, bytes) in [
                ("garbage", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
                ("plain text", plain_call),
                ("silence", Vec::new()),
            ] {
                let at = server.addr;
                let (from, back) = tokio::task::spawn_blocking(move || {
                    let mut bad = TcpStream::connect(at).unwrap();
                    bad.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                    bad.write_all(&bytes).unwrap();
                    let from = bad.local_addr().unwrap().to_string();
                    (from, read_until_closed(&mut bad))
                })
                .await
                .unwrap();
                // At most an alert comes back.
                assert!(back.len() < 64, "{what}: {} bytes back", back.len());
                // The socket closes as the handshake's future ends, just before the
                // warning is written: wait for it a while.
                let warned = |text: &str| {
                    text.lines().any(|l| {
                        l.contains("WARN")
                            && l.contains(&format!("peer={from} "))
                            && l.contains("TLS handshake failed")
                    })
                };
                let mut text_of_log = String::new();
                for _ in 0..500 {
                    text_of_log = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
                    if warned(&text_of_log) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                assert!(
                    warned(&text_of_log),
                    "{what}: no warning for {from} in {text_of_log}"
                );
                let got = echo(&good, what).await.unwrap();
                assert_eq!(got, text(0, what), "the good client after {what}");
            }
            server.stop().await;
        }
    });
}

/// Every misconfiguration is a typed error naming what is wrong.
#[test]
fn bad_settings_are_typed_errors() {
    let certs = Certs::new("settings");
    let missing = certs.path("missing.pem");
    let e = ServerTls::builder(&missing, certs.path("server.key"))
        .build()
        .unwrap_err();
    assert!(
        matches!(&e, TlsConfigError::Pem { path, .. } if *path == missing),
        "{e:?}"
    );
    // A key file has no certificate, a certificate file no key.
    let e = ServerTls::builder(certs.path("server.key"), certs.path("server.key"))
        .build()
        .unwrap_err();
    assert!(matches!(e, TlsConfigError::NoCertificate { .. }), "{e:?}");
    let e = ServerTls::builder(certs.path("server.crt"), certs.path("server.crt"))
        .build()
        .unwrap_err();
    assert!(matches!(e, TlsConfigError::NoKey { .. }), "{e:?}");
    let e = ServerTls::builder(certs.path("server.crt"), certs.path("client.key"))
        .build()
        .unwrap_err();
    assert!(
        matches!(e, TlsConfigError::Rustls(_)),
        "a key of another certificate: {e:?}"
    );
    // The client's own certificate with another key: checked by this crate, not by
    // webpki (which cannot read version 1 certificates).
    let e = ClientTls::builder(certs.path("ca.crt"))
        .client_cert(certs.path("client.crt"), certs.path("server.key"))
        .build()
        .unwrap_err();
    assert!(
        matches!(
            e,
            TlsConfigError::Rustls(rustls::Error::InconsistentKeys(
                rustls::InconsistentKeys::KeyMismatch
            ))
        ),
        "a client key of another certificate: {e:?}"
    );
    let e = ClientTls::builder(certs.path("ca.crt"))
        .server_name("not a name")
        .build()
        .unwrap_err();
    assert!(matches!(e, TlsConfigError::ServerName(_)), "{e:?}");
    let e = ClientTls::builder(certs.path("client.key"))
        .build()
        .unwrap_err();
    assert!(matches!(e, TlsConfigError::NoCertificate { .. }), "{e:?}");
    // A certificate section whose bytes are no certificate.
    std::fs::write(
        certs.path("junk.pem"),
        "-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let e = ClientTls::builder(certs.path("junk.pem"))
        .build()
        .unwrap_err();
    assert!(
        matches!(e, TlsConfigError::BadCertificate { index: 0, .. }),
        "{e:?}"
    );
    let io: io::Error = e.into();
    assert_eq!(io.kind(), io::ErrorKind::InvalidInput);
}

/// A server configured for TLS that listens on a Unix socket speaks plain text there.
#[test]
fn tls_leaves_unix_sockets_plain() {
    let certs = Certs::new("unix");
    let path = certs.path("s.sock");
    run_bounded(Duration::from_secs(120), async {
        let config = server_config(
            certs.server("server").build().unwrap(),
            TransportKind::Netpoll,
            true,
        );
        let server = start_on(config, &Address::Unix(path.as_path().into())).await;
        // A client configured for TLS too: it dials the socket in plain text.
        let c = client(
            server.address.clone(),
            certs.client("ca.crt", None),
            TransportKind::Netpoll,
        );
        assert_eq!(echo(&c, "plain").await.unwrap(), text(0, "plain"));
        server.stop().await;
    });
    assert!(!Path::new(&path).exists() || std::fs::remove_file(&path).is_ok());
}

/// What a plain rustls peer reads once the other side is done: `Ok(0)` after a
/// close_notify, an `UnexpectedEof` error when the socket was cut without one.
fn read_to_tls_end<C, S>(tls: &mut rustls::StreamOwned<C, TcpStream>) -> io::Result<()>
where
    C: std::ops::DerefMut + std::ops::Deref<Target = rustls::ConnectionCommon<S>>,
    S: rustls::SideData,
{
    let mut buf = [0u8; 4096];
    loop {
        if tls.read(&mut buf)? == 0 {
            return Ok(());
        }
    }
}

/// A client connection let go ends its TLS session with close_notify, on both client
/// transports, so an OpenSSL server does not log the end as an error: one whose call
/// timed out, and one idle in its pool when the client is dropped (the pool's
/// connections go before the reactor does). The timeout of the call that times out
/// leaves its handshake and request time on a loaded machine; the answered one's is
/// far off.
#[test]
fn a_client_ends_its_sessions_with_close_notify() {
    let certs = Certs::new("client-close");
    let server_tls = certs.server("server").build().unwrap();
    for kind in [TransportKind::Netpoll, TransportKind::Tokio] {
        for answer in [false, true] {
            let what = format!("{kind:?}, call answered: {answer}");
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let at = listener.local_addr().unwrap();
            let config = Arc::clone(server_tls.rustls_config());
            let peer = std::thread::spawn(move || {
                let (tcp, _) = listener.accept().unwrap();
                tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                let session = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::StreamOwned::new(session, tcp);
                // A Framed Binary call; its sequence id is after the name.
                let mut len = [0u8; 4];
                tls.read_exact(&mut len).unwrap();
                let mut call = vec![0u8; u32::from_be_bytes(len) as usize];
                tls.read_exact(&mut call).unwrap();
                if answer {
                    let name_len = u32::from_be_bytes(call[4..8].try_into().unwrap()) as usize;
                    let seq = &call[8 + name_len..12 + name_len];
                    let seq = i32::from_be_bytes(seq.try_into().unwrap());
                    let reply = message::<thrift_wire::Binary>(
                        thrift_wire::MessageType::Reply,
                        "echo",
                        seq,
                        0,
                        "answered",
                    );
                    tls.write_all(&framed(&reply)).unwrap();
                }
                read_to_tls_end(&mut tls)
            });
            run_bounded(Duration::from_secs(30), async {
                let c = client_with(Address::Tcp(at), certs.client("ca.crt", None), |c| {
                    c.transport.kind = kind;
                    c.format.framing = Framing::Framed;
                    c.format.protocol = crate::codec::Protocol::Binary;
                    c.timeouts.rpc = Some(if answer {
                        Duration::from_secs(10)
                    } else {
                        Duration::from_secs(1)
                    });
                });
                let got = echo(&c, "hello").await;
                if answer {
                    assert_eq!(got.unwrap(), text(0, "answered"), "{what}");
                } else {
                    let e = got.unwrap_err();
                    assert!(e.is_timeout(), "{what}: {e}");
                }
                drop(c);
            });
            let end = peer.join().unwrap();
            assert!(end.is_ok(), "{what}: the session ended with {end:?}");
        }
    }
}

/// A server ending a connection (here: idle too long) ends its TLS session with
/// close_notify, in every server layout. The read timeout bounds the handshake: it is
/// long enough for a loaded machine, the idle timeout that follows it short.
#[test]
fn a_server_ends_its_sessions_with_close_notify() {
    let certs = Certs::new("server-close");
    let client_tls = certs.client("ca.crt", None);
    run_bounded(Duration::from_secs(60), async {
        for (kind, inline) in LAYOUTS {
            let config = ServerConfig {
                timeouts: ServerTimeouts {
                    read: Duration::from_secs(2),
                    idle: Some(Duration::from_millis(150)),
                    ..Default::default()
                },
                ..server_config(certs.server("server").build().unwrap(), kind, inline)
            };
            let server = start(config).await;
            let at = server.addr;
            let config = Arc::clone(client_tls.rustls_config());
            let end = tokio::task::spawn_blocking(move || {
                let tcp = TcpStream::connect(at).unwrap();
                tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
                let session = rustls::ClientConnection::new(config, name).unwrap();
                let mut tls = rustls::StreamOwned::new(session, tcp);
                // Finish the handshake, then say nothing.
                tls.conn.complete_io(&mut tls.sock).unwrap();
                read_to_tls_end(&mut tls)
            })
            .await
            .unwrap();
            assert!(end.is_ok(), "{kind:?} inline={inline}: ended with {end:?}");
            server.stop().await;
        }
    });
}
