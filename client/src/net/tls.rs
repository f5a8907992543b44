//! TLS configuration: the one `rustls::ClientConfig` a client shares across
//! its connections, built once by [`ClientBuilder::build`](crate::ClientBuilder::build)
//! from the builder's options.
//!
//! * Crypto: rustls' `ring` provider (it builds with a C compiler alone),
//!   TLS 1.2 and 1.3 (narrowed by [`min_tls_version`](crate::ClientBuilder::min_tls_version)
//!   and [`max_tls_version`](crate::ClientBuilder::max_tls_version)),
//!   rustls' safe defaults.
//! * ALPN: the protocol layer's list, whatever config it goes into: the
//!   client sets it from its HTTP versions when it starts (`h2` and
//!   `http/1.1` by default); a server that picks anything else fails the
//!   handshake: rustls refuses a protocol that was not offered, a check
//!   set in a caller-made config too, since the protocol the client
//!   speaks is the one picked.
//! * Session resumption: rustls' in-memory cache of 256 sessions, on unless
//!   [`tls_session_resumption(false)`](crate::ClientBuilder::tls_session_resumption).
//! * Client authentication (mTLS): the PEM chain and key of
//!   [`client_identity_pem`](crate::ClientBuilder::client_identity_pem), if given.
//! * A caller-made config ([`tls_config`](crate::ClientBuilder::tls_config))
//!   replaces all of the above but ALPN (its list and its check).
//! * Server authentication, in order of precedence:
//!   1. [`danger_accept_invalid_certs(true)`](crate::ClientBuilder::danger_accept_invalid_certs):
//!      any certificate is accepted (its handshake signatures are still
//!      checked, so the peer must hold the key of the certificate it sent);
//!   2. with the `platform-verifier` feature and
//!      `platform_verifier(true)`: the operating system's verifier, plus the
//!      roots given to [`add_root_certificate`](crate::ClientBuilder::add_root_certificate);
//!   3. otherwise webpki: the Mozilla roots of `webpki-roots` (or the store
//!      given to [`tls_roots`](crate::ClientBuilder::tls_roots), which
//!      replaces them), plus the added roots. Host names are always checked
//!      (DNS names and IP addresses alike) and server name indication is
//!      sent for DNS names. A server's certificate that is a CA certificate
//!      (a self-signed one `openssl req -x509` makes) is refused, added as
//!      a root or not: webpki takes none for a server's, and the error says
//!      so ([`TlsFailureKind::CaCertificate`](crate::TlsFailureKind::CaCertificate)).
//!
//! A root certificate that does not parse is an `io::Error` of kind
//! `InvalidInput` from `build()`, before any thread starts.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::io;
use std::sync::Arc;

/// The ALPN protocol offered.
pub(crate) const ALPN_HTTP11: &[u8] = b"http/1.1";

/// A TLS protocol version, for [`ClientBuilder::min_tls_version`](crate::ClientBuilder::min_tls_version)
/// and [`ClientBuilder::max_tls_version`](crate::ClientBuilder::max_tls_version).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum TlsVersion {
    /// TLS 1.2 (RFC 5246).
    Tls12,
    /// TLS 1.3 (RFC 8446).
    Tls13,
}

impl TlsVersion {
    fn rustls(self) -> &'static rustls::SupportedProtocolVersion {
        match self {
            TlsVersion::Tls12 => &rustls::version::TLS12,
            TlsVersion::Tls13 => &rustls::version::TLS13,
        }
    }
}

/// The builder's TLS options, settled into a config at `build()`.
#[derive(Clone)]
pub(crate) struct TlsOptions {
    /// Replaces the webpki roots, if set.
    pub(crate) roots: Option<RootCertStore>,
    /// Added roots, PEM (one or more certificates) or DER, as given.
    pub(crate) extra_roots: Vec<Vec<u8>>,
    /// Verify with the operating system's verifier.
    #[cfg(feature = "platform-verifier")]
    pub(crate) platform_verifier: bool,
    /// Accept any certificate.
    pub(crate) danger_accept_invalid_certs: bool,
    /// The client's certificate chain and key, PEM, for mTLS.
    pub(crate) identity: Option<(Vec<u8>, Vec<u8>)>,
    pub(crate) min_version: Option<TlsVersion>,
    pub(crate) max_version: Option<TlsVersion>,
    pub(crate) resumption: bool,
    /// A caller-made config: used as it is but for ALPN.
    pub(crate) custom: Option<Arc<rustls::ClientConfig>>,
}

impl Default for TlsOptions {
    fn default() -> Self {
        TlsOptions {
            roots: None,
            extra_roots: Vec::new(),
            #[cfg(feature = "platform-verifier")]
            platform_verifier: false,
            danger_accept_invalid_certs: false,
            identity: None,
            min_version: None,
            max_version: None,
            resumption: true,
            custom: None,
        }
    }
}

fn invalid_input(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// Parses one added root: every `CERTIFICATE` block of a PEM text, or a
/// single DER certificate. Each must be a certificate webpki can take as a
/// trust anchor, whatever verifier the config ends up with: with
/// `danger_accept_invalid_certs` the roots are never used, but a root that
/// is garbage is still the caller's mistake, and `build()` says so in every
/// mode alike (`InvalidInput`).
fn parse_root(bytes: &[u8]) -> io::Result<Vec<CertificateDer<'static>>> {
    // As DER it would be "invalid peer certificate: BadEncoding".
    if bytes.trim_ascii().is_empty() {
        return Err(invalid_input(
            "root certificate: empty (neither a PEM text nor a DER certificate)".into(),
        ));
    }
    let looks_pem = bytes
        .windows(b"-----BEGIN".len())
        .any(|w| w == b"-----BEGIN");
    let certs = if looks_pem {
        CertificateDer::pem_slice_iter(bytes)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid_input(format!("root certificate: bad PEM: {}", pem_problem(&e))))?
    } else {
        vec![CertificateDer::from(bytes.to_vec())]
    };
    if certs.is_empty() {
        return Err(invalid_input(
            "root certificate: the PEM text holds no CERTIFICATE block".into(),
        ));
    }
    for cert in &certs {
        RootCertStore::empty().add(cert.clone()).map_err(|e| {
            invalid_input(format!("not a valid root certificate (PEM or DER): {e}"))
        })?;
    }
    Ok(certs)
}

/// What is wrong with a PEM text, in words: the parser's own message
/// shows a missing end line, or a bad first line of a block, as a list of
/// byte values (`[67, 69, 82, ...]`); here they are the text they are
/// (a file cut short lacks `-----END CERTIFICATE-----`).
fn pem_problem(error: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error;
    match error {
        Error::MissingSectionEnd { end_marker } => format!(
            "no -----END {}----- line (is the file cut short?)",
            String::from_utf8_lossy(end_marker)
        ),
        Error::IllegalSectionStart { line } => {
            format!(
                "a bad first line of a block: {}",
                String::from_utf8_lossy(line)
            )
        }
        other => other.to_string(),
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

/// Builds the client's TLS config from its options.
pub(crate) fn client_config(options: &TlsOptions) -> io::Result<Arc<rustls::ClientConfig>> {
    if let Some(custom) = &options.custom {
        let mut config = rustls::ClientConfig::clone(custom);
        config.alpn_protocols = vec![ALPN_HTTP11.to_vec()];
        // A pick not offered would be spoken as it is (`h2` to a client
        // that is HTTP/1.1 only) or as HTTP/1.1 (anything else).
        config.check_selected_alpn = true;
        return Ok(Arc::new(config));
    }
    let provider = provider();
    let mut extra = Vec::new();
    for bytes in &options.extra_roots {
        extra.extend(parse_root(bytes)?);
    }
    let identity = options
        .identity
        .as_ref()
        .map(|(chain, key)| parse_identity(chain, key))
        .transpose()?;
    let versions = versions(options.min_version, options.max_version)?;
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| io::Error::other(format!("TLS configuration: {e}")))?;
    let builder = if options.danger_accept_invalid_certs {
        // The added roots were still parsed and checked above, so a bad one
        // is reported whatever the mode.
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate { provider }))
    } else {
        verifying_config(builder, options, extra, provider)?
    };
    let mut config = match identity {
        Some((chain, key)) => builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| invalid_input(format!("client certificate: {e}")))?,
        None => builder.with_no_client_auth(),
    };
    if !options.resumption {
        config.resumption = rustls::client::Resumption::disabled();
    }
    config.alpn_protocols = vec![ALPN_HTTP11.to_vec()];
    Ok(Arc::new(config))
}

/// The versions from `min` to `max` (each end open if `None`).
fn versions(
    min: Option<TlsVersion>,
    max: Option<TlsVersion>,
) -> io::Result<Vec<&'static rustls::SupportedProtocolVersion>> {
    let versions: Vec<_> = [TlsVersion::Tls12, TlsVersion::Tls13]
        .into_iter()
        .filter(|v| min.is_none_or(|min| *v >= min) && max.is_none_or(|max| *v <= max))
        .map(TlsVersion::rustls)
        .collect();
    if versions.is_empty() {
        return Err(invalid_input(format!(
            "no TLS version from {min:?} to {max:?}"
        )));
    }
    Ok(versions)
}

/// A PEM certificate chain (leaf first) and its private key (PKCS#8,
/// PKCS#1 or SEC1).
fn parse_identity(
    chain: &[u8],
    key: &[u8],
) -> io::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let chain = CertificateDer::pem_slice_iter(chain)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid_input(format!("client certificate: bad PEM: {}", pem_problem(&e))))?;
    if chain.is_empty() {
        return Err(invalid_input(
            "client certificate: the PEM text holds no CERTIFICATE block".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(key)
        .map_err(|e| invalid_input(format!("client key: {}", pem_problem(&e))))?;
    Ok((chain, key))
}

/// A config that verifies certificates: with the platform verifier if it is
/// asked for (and built in), else with webpki and the roots.
fn verifying_config(
    builder: rustls::ConfigBuilder<rustls::ClientConfig, rustls::WantsVerifier>,
    options: &TlsOptions,
    extra: Vec<CertificateDer<'static>>,
    provider: Arc<CryptoProvider>,
) -> io::Result<rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert>> {
    #[cfg(feature = "platform-verifier")]
    if options.platform_verifier {
        let verifier = rustls_platform_verifier::Verifier::new_with_extra_roots(extra, provider)
            .map_err(|e| invalid_input(format!("platform certificate verifier: {e}")))?;
        return Ok(builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier)));
    }
    let _ = provider; // the builder already holds it
    let mut roots = options.roots.clone().unwrap_or_else(|| RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    });
    for cert in extra {
        roots.add(cert).map_err(|e| {
            invalid_input(format!("not a valid root certificate (PEM or DER): {e}"))
        })?;
    }
    Ok(builder.with_root_certificates(roots))
}

/// `danger_accept_invalid_certs(true)`: any certificate chain, any name.
/// The handshake signatures are still verified against the certificate the
/// server sent.
#[derive(Debug)]
struct AcceptAnyCertificate {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_roots_are_invalid_input() {
        let options = |root: &[u8]| TlsOptions {
            extra_roots: vec![root.to_vec()],
            ..TlsOptions::default()
        };
        for bad in [
            &b"not a certificate"[..],
            b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
            b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
            // Good PEM and base64, but no certificate inside.
            b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        ] {
            let error = client_config(&options(bad)).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{error}");
            // The same when no certificate will be checked: the root is
            // the caller's mistake all the same.
            let error = client_config(&TlsOptions {
                danger_accept_invalid_certs: true,
                ..options(bad)
            })
            .unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{error}");
        }
    }

    /// The error of a root that does not parse says what is wrong with it
    /// in words a user can act on: an empty file is empty (not "invalid
    /// peer certificate: BadEncoding"), and a PEM text cut short names the
    /// end line it lacks (not that line's bytes as a list of numbers).
    #[test]
    fn a_root_that_does_not_parse_says_why_in_words() {
        let message = |root: &[u8]| {
            client_config(&TlsOptions {
                extra_roots: vec![root.to_vec()],
                ..TlsOptions::default()
            })
            .unwrap_err()
            .to_string()
        };
        for empty in [&b""[..], b"\n", b" \r\n\t"] {
            let error = message(empty);
            assert!(error.contains("empty"), "{error}");
            assert!(!error.contains("peer"), "{error}");
        }
        let cut = b"-----BEGIN CERTIFICATE-----\nMIIB\n";
        let error = message(cut);
        assert!(error.contains("-----END CERTIFICATE-----"), "{error}");
        assert!(!error.contains("[67, 69"), "{error}");
        let identity = |chain: &[u8], key: &[u8]| {
            client_config(&TlsOptions {
                identity: Some((chain.to_vec(), key.to_vec())),
                ..TlsOptions::default()
            })
            .unwrap_err()
            .to_string()
        };
        let error = identity(cut, b"");
        assert!(error.contains("-----END CERTIFICATE-----"), "{error}");
    }

    #[test]
    fn versions_are_narrowed_and_an_empty_range_is_refused() {
        let v =
            |min, max| versions(min, max).map(|v| v.iter().map(|v| v.version).collect::<Vec<_>>());
        use rustls::ProtocolVersion::{TLSv1_2, TLSv1_3};
        assert_eq!(v(None, None).unwrap(), vec![TLSv1_2, TLSv1_3]);
        assert_eq!(v(Some(TlsVersion::Tls13), None).unwrap(), vec![TLSv1_3]);
        assert_eq!(v(None, Some(TlsVersion::Tls12)).unwrap(), vec![TLSv1_2]);
        let error = v(Some(TlsVersion::Tls13), Some(TlsVersion::Tls12)).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn a_caller_made_config_keeps_its_settings_but_gets_the_protocol_layers_alpn() {
        let mut own = (*client_config(&TlsOptions::default()).unwrap()).clone();
        own.alpn_protocols = vec![b"h3".to_vec()];
        own.enable_sni = false;
        let options = TlsOptions {
            custom: Some(Arc::new(own)),
            ..TlsOptions::default()
        };
        let config = client_config(&options).unwrap();
        assert_eq!(config.alpn_protocols, vec![ALPN_HTTP11.to_vec()]);
        assert!(!config.enable_sni);
    }

    /// A server's pick of a protocol not offered fails the handshake
    /// whatever the caller's config says: the client speaks what was
    /// picked, and only its versions' protocols are offered.
    #[test]
    fn a_caller_made_config_checks_that_the_server_picked_an_offered_protocol() {
        let mut own = (*client_config(&TlsOptions::default()).unwrap()).clone();
        own.check_selected_alpn = false;
        let options = TlsOptions {
            custom: Some(Arc::new(own)),
            ..TlsOptions::default()
        };
        assert!(client_config(&options).unwrap().check_selected_alpn);
    }

    #[test]
    fn a_client_identity_that_does_not_parse_is_invalid_input() {
        let options = |chain: &[u8], key: &[u8]| TlsOptions {
            identity: Some((chain.to_vec(), key.to_vec())),
            ..TlsOptions::default()
        };
        for (chain, key) in [
            (&b"no pem"[..], &b"no pem"[..]),
            (
                b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
                b"",
            ),
        ] {
            let error = client_config(&options(chain, key)).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{error}");
        }
    }

    #[test]
    fn defaults_offer_http11_with_the_webpki_roots() {
        let config = client_config(&TlsOptions::default()).unwrap();
        assert_eq!(config.alpn_protocols, vec![ALPN_HTTP11.to_vec()]);
    }
}
