//! Deciding whether to trust the peer's certificate: pinned certificates first, then
//! webpki's chain verification (see the [module docs](super) for why both).

use std::path::Path;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, SubjectPublicKeyInfoDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, PeerMisbehaved, RootCertStore,
    SignatureScheme,
};

use super::TlsConfigError;
use super::der::cert_fields;

/// A certificate of a trust file, with what is needed to trust it as it is.
#[derive(Debug)]
struct Pinned {
    der: CertificateDer<'static>,
    not_before: UnixTime,
    not_after: UnixTime,
    /// The whole `SubjectPublicKeyInfo`.
    spki: Vec<u8>,
    /// The contents of the key's `AlgorithmIdentifier`.
    key_algorithm: Vec<u8>,
    /// The `subjectPublicKey` bits.
    key: Vec<u8>,
}

impl Pinned {
    /// Within its validity period at `now`.
    fn check_validity(&self, now: UnixTime) -> Result<(), rustls::Error> {
        if now < self.not_before {
            return Err(CertificateError::NotValidYetContext {
                time: now,
                not_before: self.not_before,
            }
            .into());
        }
        if now > self.not_after {
            return Err(CertificateError::ExpiredContext {
                time: now,
                not_after: self.not_after,
            }
            .into());
        }
        Ok(())
    }

    /// A TLS 1.2 handshake signature made with this certificate's key: by any of the
    /// provider's algorithms for the scheme that takes a key of its type (in TLS 1.2
    /// an ECDSA scheme does not name the curve).
    fn verify_tls12(
        &self,
        message: &[u8],
        dss: &DigitallySignedStruct,
        algorithms: &WebPkiSupportedAlgorithms,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let candidates = algorithms
            .mapping
            .iter()
            .find(|(scheme, _)| *scheme == dss.scheme)
            .map(|(_, algs)| *algs)
            .ok_or(PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme)?;
        let alg = candidates
            .iter()
            .find(|alg| alg.public_key_alg_id().as_ref() == self.key_algorithm.as_slice())
            .ok_or(CertificateError::BadSignature)?;
        alg.verify_signature(&self.key, message, dss.signature())
            .map(|()| HandshakeSignatureValid::assertion())
            .map_err(|_| CertificateError::BadSignature.into())
    }

    /// A TLS 1.3 handshake signature made with this certificate's key (rustls checks
    /// that the scheme is one of TLS 1.3 and fits the key, curve included).
    fn verify_tls13(
        &self,
        message: &[u8],
        dss: &DigitallySignedStruct,
        algorithms: &WebPkiSupportedAlgorithms,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let spki = SubjectPublicKeyInfoDer::from(self.spki.as_slice());
        rustls::crypto::verify_tls13_signature_with_raw_key(message, &spki, dss, algorithms)
    }
}

/// The certificates of a trust file, both as pinned certificates and as webpki roots.
#[derive(Debug)]
pub(super) struct Trust {
    pinned: Vec<Pinned>,
    /// The certificates webpki takes as roots (all but malformed ones; version 1
    /// certificates too).
    roots: Arc<RootCertStore>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl Trust {
    /// Reads every certificate of the PEM file at `path`. Fails when there is none, or
    /// when one can be neither pinned nor a root.
    pub(super) fn load(path: &Path, provider: &CryptoProvider) -> Result<Trust, TlsConfigError> {
        let certs = super::certificates(path)?;
        let mut pinned = Vec::with_capacity(certs.len());
        let mut roots = RootCertStore::empty();
        for (index, der) in certs.into_iter().enumerate() {
            let root = roots.add(der.clone()).is_ok();
            let fields = cert_fields(&der).map(|f| {
                let (not_before, not_after) = f.validity();
                (
                    not_before,
                    not_after,
                    f.spki.to_vec(),
                    f.key_algorithm.to_vec(),
                    f.key.to_vec(),
                )
            });
            match fields {
                Some((not_before, not_after, spki, key_algorithm, key)) => pinned.push(Pinned {
                    der,
                    not_before,
                    not_after,
                    spki,
                    key_algorithm,
                    key,
                }),
                None if root => {}
                None => {
                    return Err(TlsConfigError::BadCertificate {
                        path: path.to_path_buf(),
                        index,
                    });
                }
            }
        }
        Ok(Trust {
            pinned,
            roots: Arc::new(roots),
            algorithms: provider.signature_verification_algorithms,
        })
    }

    /// The pinned certificate byte-identical to `cert`, if any.
    fn pinned(&self, cert: &CertificateDer<'_>) -> Option<&Pinned> {
        self.pinned.iter().find(|p| p.der.as_ref() == cert.as_ref())
    }

    /// A handshake signature made with `cert`'s key, in TLS 1.3 or (`tls13` false)
    /// 1.2: by the pinned path's checks when `cert` is pinned, by rustls' otherwise.
    fn verify(
        &self,
        tls13: bool,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.algorithms;
        match (self.pinned(cert), tls13) {
            (Some(p), true) => p.verify_tls13(message, dss, algs),
            (Some(p), false) => p.verify_tls12(message, dss, algs),
            (None, true) => rustls::crypto::verify_tls13_signature(message, cert, dss, algs),
            (None, false) => rustls::crypto::verify_tls12_signature(message, cert, dss, algs),
        }
    }

    fn schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The handshake signature checks both verifiers share: through their [`Trust`].
macro_rules! handshake_signatures {
    () => {
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.trust.verify(false, message, cert, dss)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.trust.verify(true, message, cert, dss)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.trust.schemes()
        }
    };
}

/// A client's verifier of its server: a pinned certificate is trusted as it is (its
/// validity dates checked, not its name); any other goes through webpki, name
/// included.
#[derive(Debug)]
pub(super) struct ServerVerifier {
    trust: Trust,
    /// `None` when no certificate of the trust file can be a webpki root.
    webpki: Option<Arc<WebPkiServerVerifier>>,
}

impl ServerVerifier {
    pub(super) fn new(trust: Trust, provider: Arc<CryptoProvider>) -> Self {
        let webpki =
            WebPkiServerVerifier::builder_with_provider(Arc::clone(&trust.roots), provider)
                .build()
                .ok();
        ServerVerifier { trust, webpki }
    }
}

impl ServerCertVerifier for ServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(pinned) = self.trust.pinned(end_entity) {
            return pinned
                .check_validity(now)
                .map(|()| ServerCertVerified::assertion());
        }
        match &self.webpki {
            Some(webpki) => webpki.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            ),
            None => Err(CertificateError::UnknownIssuer.into()),
        }
    }

    handshake_signatures!();
}

/// A server's verifier of its clients' certificates: pinned first, then webpki (no
/// name to check); asks every client for a certificate, and requires one or not.
#[derive(Debug)]
pub(super) struct ClientVerifier {
    trust: Trust,
    webpki: Option<Arc<dyn ClientCertVerifier>>,
    /// The subjects of the trust file's certificates, sent to the client as the
    /// authorities it may pick a certificate by.
    subjects: Vec<DistinguishedName>,
    mandatory: bool,
}

impl ClientVerifier {
    pub(super) fn new(trust: Trust, provider: Arc<CryptoProvider>, mandatory: bool) -> Self {
        let webpki =
            WebPkiClientVerifier::builder_with_provider(Arc::clone(&trust.roots), provider)
                .build()
                .ok();
        ClientVerifier {
            subjects: trust.roots.subjects(),
            trust,
            webpki,
            mandatory,
        }
    }
}

impl ClientCertVerifier for ClientVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.subjects
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if let Some(pinned) = self.trust.pinned(end_entity) {
            return pinned
                .check_validity(now)
                .map(|()| ClientCertVerified::assertion());
        }
        match &self.webpki {
            Some(webpki) => webpki.verify_client_cert(end_entity, intermediates, now),
            None => Err(CertificateError::UnknownIssuer.into()),
        }
    }

    handshake_signatures!();
}
