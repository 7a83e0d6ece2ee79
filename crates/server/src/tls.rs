//! TLS for client connections (rustls, TLS 1.2 and 1.3 only), with mongod's modes:
//! `disabled`, `allowTLS` and `preferTLS` (a connection may use TLS or not; told apart by
//! its first bytes, a TLS handshake record), `requireTLS` (a plain connection is closed).
//!
//! The server's certificate and key come from one PEM file (`--tlsCertificateKeyFile`),
//! as mongod's. With `--tlsCAFile` clients are asked for a certificate signed by that
//! CA, required unless `--tlsAllowConnectionsWithoutCertificates`; one that cannot be
//! verified fails the handshake unless `--tlsAllowInvalidCertificates` (for tests). A
//! verified client certificate's subject is what MONGODB-X509 authenticates.
//! `rotateCertificates` reads the files again; connections already open keep theirs.

use basalt_error::{Error, Result};
use parking_lot::RwLock;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DistinguishedName, RootCertStore, ServerConfig, ServerConnection, StreamOwned};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Arc;

/// The first byte of a TLS record carrying a handshake, and the major version byte that
/// follows it: what a ClientHello starts with, and no MongoDB message header does in
/// practice (it would be a message of 790 bytes or more whose length starts 0x16 0x03).
const TLS_HANDSHAKE: [u8; 2] = [0x16, 0x03];

/// mongod's `--tlsMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsMode {
    Disabled,
    Allow,
    Prefer,
    Require,
}

impl TlsMode {
    pub fn from_name(name: &str) -> Option<TlsMode> {
        match name {
            "disabled" => Some(TlsMode::Disabled),
            "allowTLS" => Some(TlsMode::Allow),
            "preferTLS" => Some(TlsMode::Prefer),
            "requireTLS" => Some(TlsMode::Require),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TlsMode::Disabled => "disabled",
            TlsMode::Allow => "allowTLS",
            TlsMode::Prefer => "preferTLS",
            TlsMode::Require => "requireTLS",
        }
    }
}

/// The TLS flags as given.
#[derive(Clone, Debug)]
pub struct TlsOptions {
    pub mode: TlsMode,
    pub certificate_key_file: Option<PathBuf>,
    pub ca_file: Option<PathBuf>,
    pub allow_connections_without_certificates: bool,
    pub allow_invalid_certificates: bool,
}

impl Default for TlsOptions {
    fn default() -> Self {
        TlsOptions {
            mode: TlsMode::Disabled,
            certificate_key_file: None,
            ca_file: None,
            allow_connections_without_certificates: false,
            allow_invalid_certificates: false,
        }
    }
}

/// TLS as the server runs it: the options and the configuration built from the files.
pub struct Tls {
    pub options: TlsOptions,
    config: RwLock<Arc<ServerConfig>>,
    /// The membership attributes of this server's own certificate.
    pub own_membership: Vec<(String, String)>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn bad(message: String) -> Error {
    Error::bad_value(message)
}

/// The certificates of a PEM file.
pub fn read_certificates(path: &PathBuf) -> Result<Vec<CertificateDer<'static>>> {
    let certificates: Vec<_> = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| {
            bad(format!(
                "cannot read certificates from {}: {e}",
                path.display()
            ))
        })?;
    if certificates.is_empty() {
        return Err(bad(format!("no certificate in {}", path.display())));
    }
    Ok(certificates)
}

/// The private key of a PEM file (unencrypted: PKCS#8, PKCS#1 or SEC1).
pub fn read_key(path: &PathBuf) -> Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| {
        bad(format!(
            "cannot read a private key from {} (an unencrypted PEM key is needed): {e}",
            path.display()
        ))
    })
}

/// The roots of `--tlsCAFile`.
pub fn read_roots(path: &PathBuf) -> Result<Arc<RootCertStore>> {
    let mut roots = RootCertStore::empty();
    for certificate in read_certificates(path)? {
        roots
            .add(certificate)
            .map_err(|e| bad(format!("bad CA certificate in {}: {e}", path.display())))?;
    }
    Ok(Arc::new(roots))
}

impl Tls {
    /// TLS as `options` ask, or `None` when disabled. Fails on unreadable files, as
    /// mongod refuses to start then.
    pub fn new(options: &TlsOptions) -> Result<Option<Tls>> {
        if options.mode == TlsMode::Disabled {
            return Ok(None);
        }
        let config = build(options)?;
        let own_membership = match &options.certificate_key_file {
            Some(path) => read_certificates(path)?
                .first()
                .map(|c| membership_attributes(c))
                .unwrap_or_default(),
            None => Vec::new(),
        };
        Ok(Some(Tls {
            options: options.clone(),
            config: RwLock::new(config),
            own_membership,
        }))
    }

    /// `rotateCertificates`: reads the files again; new connections use them.
    pub fn reload(&self) -> Result<()> {
        let config = build(&self.options)?;
        *self.config.write() = config;
        Ok(())
    }

    /// Starts TLS on an accepted connection when the client speaks it (or must).
    /// `Ok(None)`: a plain connection that `requireTLS` refuses.
    pub fn accept(&self, stream: TcpStream) -> std::io::Result<Option<Transport>> {
        let mut first = [0u8; 2];
        let mut peeked = stream.peek(&mut first)?;
        // The two bytes may arrive apart; the read timeout bounds the wait.
        while peeked == 1 {
            std::thread::sleep(std::time::Duration::from_millis(1));
            peeked = stream.peek(&mut first)?;
        }
        if peeked < 2 || first != TLS_HANDSHAKE {
            return Ok(match self.options.mode {
                TlsMode::Require => None,
                _ => Some(Transport::Plain(stream)),
            });
        }
        let config = self.config.read().clone();
        let connection = ServerConnection::new(config).map_err(std::io::Error::other)?;
        let mut tls = StreamOwned::new(connection, stream);
        // The handshake now, so that its failure is the connection's end, logged.
        while tls.conn.is_handshaking() {
            tls.conn.complete_io(&mut tls.sock)?;
        }
        Ok(Some(Transport::Tls(Box::new(tls))))
    }
}

fn build(options: &TlsOptions) -> Result<Arc<ServerConfig>> {
    let Some(path) = &options.certificate_key_file else {
        return Err(bad(format!(
            "--tlsMode {} needs --tlsCertificateKeyFile",
            options.mode.name()
        )));
    };
    let certificates = read_certificates(path)?;
    let key = read_key(path)?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| bad(format!("TLS configuration: {e}")))?;
    let builder = match &options.ca_file {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let roots = read_roots(ca)?;
            let verifier = if options.allow_invalid_certificates {
                Arc::new(AnyClientCertificate {
                    subjects: roots.subjects(),
                    optional: options.allow_connections_without_certificates,
                }) as Arc<dyn ClientCertVerifier>
            } else {
                let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider());
                let verifier = if options.allow_connections_without_certificates {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                verifier
                    .build()
                    .map_err(|e| bad(format!("TLS client verification: {e}")))?
            };
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder.with_single_cert(certificates, key).map_err(|e| {
        bad(format!(
            "the certificate and key of {}: {e}",
            path.display()
        ))
    })?;
    Ok(Arc::new(config))
}

/// The TLS a replica set member uses to reach the others: none with `allowTLS` (mongod's
/// members then talk plainly), else this member's certificate, verified against
/// `--tlsCAFile` (or not at all with `--tlsAllowInvalidCertificates`).
pub fn member_client_config(options: &TlsOptions) -> Result<Option<Arc<rustls::ClientConfig>>> {
    if matches!(options.mode, TlsMode::Disabled | TlsMode::Allow) {
        return Ok(None);
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| bad(format!("TLS configuration: {e}")))?;
    let builder = match (&options.ca_file, options.allow_invalid_certificates) {
        (_, true) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServerCertificate)),
        (Some(ca), false) => builder.with_root_certificates(read_roots(ca)?),
        (None, false) => {
            return Err(bad(
                "replica set members using TLS need --tlsCAFile to verify each other \
                 (or --tlsAllowInvalidCertificates)"
                    .into(),
            ))
        }
    };
    let config = match &options.certificate_key_file {
        Some(path) => builder
            .with_client_auth_cert(read_certificates(path)?, read_key(path)?)
            .map_err(|e| {
                bad(format!(
                    "the certificate and key of {}: {e}",
                    path.display()
                ))
            })?,
        None => builder.with_no_client_auth(),
    };
    Ok(Some(Arc::new(config)))
}

/// The handshake-signature methods both certificate verifiers share: whatever they think
/// of the certificate, the peer must still prove it holds its key.
macro_rules! handshake_signatures {
    () => {
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &rustls::DigitallySignedStruct,
        ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            verify_signature(message, cert, dss, false)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &rustls::DigitallySignedStruct,
        ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            verify_signature(message, cert, dss, true)
        }

        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            provider()
                .signature_verification_algorithms
                .supported_schemes()
        }
    };
}

/// `--tlsAllowInvalidCertificates` on a member's own connections: the other member's
/// certificate is not verified (its handshake signature still is).
#[derive(Debug)]
struct AnyServerCertificate;

impl rustls::client::danger::ServerCertVerifier for AnyServerCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    handshake_signatures!();
}

/// A handshake signature checked with the provider's algorithms.
fn verify_signature(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &rustls::DigitallySignedStruct,
    tls13: bool,
) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
    let algorithms = &provider().signature_verification_algorithms;
    if tls13 {
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    } else {
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }
}

/// `--tlsAllowInvalidCertificates`: a client's certificate is asked for but not
/// verified (its handshake signature still is).
#[derive(Debug)]
struct AnyClientCertificate {
    subjects: Vec<DistinguishedName>,
    optional: bool,
}

impl ClientCertVerifier for AnyClientCertificate {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.subjects
    }

    fn client_auth_mandatory(&self) -> bool {
        !self.optional
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> std::result::Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    handshake_signatures!();
}

/// What makes a certificate a member's under `--clusterAuthMode x509`, as mongod
/// decides it: the O, OU and DC attributes of its subject (sorted), which every member's
/// certificate shares. Empty when the certificate names none of them (then it names no
/// member).
pub fn membership_attributes(certificate: &[u8]) -> Vec<(String, String)> {
    use x509_parser::prelude::FromDer;
    let Ok((_, parsed)) = x509_parser::certificate::X509Certificate::from_der(certificate) else {
        return Vec::new();
    };
    let registry = x509_parser::objects::oid_registry();
    let mut attributes: Vec<(String, String)> = parsed
        .subject()
        .iter_attributes()
        .filter_map(|attribute| {
            let name = x509_parser::objects::oid2abbrev(attribute.attr_type(), registry).ok()?;
            matches!(name, "O" | "OU" | "DC")
                .then(|| Some((name.to_string(), attribute.as_str().ok()?.to_string())))?
        })
        .collect();
    attributes.sort();
    attributes
}

/// The subject of a certificate (DER) as RFC 2253 writes it, most specific part first
/// (`CN=client,OU=apps,O=Acme,C=US`): the user name MONGODB-X509 authenticates, as
/// mongod takes it.
pub fn subject_name(certificate: &[u8]) -> Option<String> {
    use x509_parser::prelude::FromDer;
    let (_, parsed) = x509_parser::certificate::X509Certificate::from_der(certificate).ok()?;
    let registry = x509_parser::objects::oid_registry();
    let mut parts = Vec::new();
    for rdn in parsed.subject().iter_rdn() {
        let mut attributes = Vec::new();
        for attribute in rdn.iter() {
            let name = match x509_parser::objects::oid2abbrev(attribute.attr_type(), registry) {
                Ok("Email") => "emailAddress".to_string(),
                Ok(name) => name.to_string(),
                Err(_) => attribute.attr_type().to_id_string(),
            };
            let value = attribute.as_str().ok()?;
            attributes.push(format!("{name}={}", escape_rfc2253(value)));
        }
        parts.push(attributes.join("+"));
    }
    parts.reverse();
    Some(parts.join(","))
}

/// RFC 2253's escaping of an attribute value.
fn escape_rfc2253(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A client connection's byte stream: plain TCP or TLS over it.
pub enum Transport {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ServerConnection, TcpStream>>),
}

impl Transport {
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Transport::Plain(stream) => stream,
            Transport::Tls(tls) => &tls.sock,
        }
    }

    /// The client's certificate, when it sent one over TLS.
    pub fn peer_certificate(&self) -> Option<CertificateDer<'static>> {
        match self {
            Transport::Plain(_) => None,
            Transport::Tls(tls) => tls
                .conn
                .peer_certificates()
                .and_then(|chain| chain.first())
                .map(|c| c.clone().into_owned()),
        }
    }
}

impl Read for Transport {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Transport::Plain(stream) => stream.read(buf),
            Transport::Tls(tls) => tls.read(buf),
        }
    }
}

impl Write for Transport {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Transport::Plain(stream) => stream.write(buf),
            Transport::Tls(tls) => tls.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Transport::Plain(stream) => stream.flush(),
            Transport::Tls(tls) => tls.flush(),
        }
    }
}
