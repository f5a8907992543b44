//! TLS options against loopback servers with certificates made at test
//! time: client certificates (mTLS), the TLS version range, a caller-made
//! `rustls::ClientConfig`, and session resumption on a reconnect.

mod support;

use std::sync::Arc;
use support::real::PemFiles;
use support::tls::{certs, server_config_with, TlsBehaviour, TlsServer};
use support::*;
use tickless::{Client, ClientBuilder, Error, TlsFailureKind, TlsVersion};

fn trusting() -> ClientBuilder {
    Client::builder()
        .event_loops(1)
        .no_proxy()
        .add_root_certificate(&certs().ca_pem)
}

fn server(versions: &[&'static rustls::SupportedProtocolVersion], client_auth: bool) -> TlsServer {
    TlsServer::start_with(
        server_config_with(&certs().valid, versions, client_auth),
        TlsBehaviour::respond(|_| ok("hello")),
    )
}

fn get(client: &Client, server: &TlsServer) -> Result<String, Error> {
    client.get(server.url("/")).send().wait()?.text().wait()
}

#[test]
fn a_server_that_wants_a_client_certificate_gets_the_pem_chain_and_key() {
    let server = server(rustls::ALL_VERSIONS, true);
    // Without one: the server refuses the handshake.
    let error = get(&trusting().build().unwrap(), &server).unwrap_err();
    assert!(
        matches!(error, Error::Tls { .. } | Error::Io { .. }),
        "{error:?}"
    );
    assert_eq!(server.handshakes(), 0);
    let pem = PemFiles::of(&certs().valid);
    let chain = std::fs::read(pem.cert()).unwrap();
    let key = std::fs::read(pem.key()).unwrap();
    let client = trusting().client_identity_pem(chain, key).build().unwrap();
    assert_eq!(get(&client, &server).unwrap(), "hello");
    assert!(server.handshake_details()[0].client_certified);
    // A key that does not parse is refused at build().
    let error = trusting()
        .client_identity_pem(std::fs::read(pem.cert()).unwrap(), "not a key")
        .build()
        .map(drop)
        .expect_err("a bad key fails build");
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
}

/// A server that wants a client certificate and gets none refuses it with
/// an alert: within the handshake in TLS 1.2, but in TLS 1.3 only after the
/// client has finished its side, so the alert comes with the first read.
/// Either way it is the same `Error::Tls` — not an I/O error that
/// `tls_failure()` does not see (and a retry policy would retry) — for a
/// request with no body and for an upload, whichever of writing and
/// reading meets the refusal first, over HTTP/1.1 and HTTP/2.
#[test]
fn a_refused_client_certificate_is_a_tls_error_in_either_version() {
    let client = trusting().build().unwrap();
    let versions = [&[&rustls::version::TLS12][..], &[&rustls::version::TLS13]];
    for (versions, alpn) in versions
        .into_iter()
        .flat_map(|v| [(v, "http/1.1"), (v, "h2")])
    {
        let mut config = (*server_config_with(&certs().valid, versions, true)).clone();
        config.alpn_protocols = vec![alpn.as_bytes().to_vec()];
        let server = TlsServer::start_with(Arc::new(config), TlsBehaviour::respond(|_| ok("")));
        for body in [0, 10, 1 << 20] {
            let error = client
                .post(server.url("/"))
                .body(vec![b'x'; body])
                .send()
                .wait()
                .and_then(|r| r.bytes().wait())
                .unwrap_err();
            match &error {
                Error::Tls { kind, source, .. } => {
                    assert_eq!(*kind, TlsFailureKind::Protocol, "{error}");
                    assert_eq!(
                        *source,
                        rustls::Error::AlertReceived(rustls::AlertDescription::CertificateRequired),
                        "{versions:?} {alpn}, body {body}: {error}"
                    );
                }
                other => {
                    panic!("{versions:?} {alpn}, body {body}: expected Error::Tls, got {other:?}")
                }
            }
        }
        assert_eq!(server.handshakes(), 0);
    }
    assert_settles(&client, std::time::Duration::from_secs(10));
}

/// The counterpart: what fails before the server's first data but is not
/// its alert — a record that does not decrypt — is the connection's
/// failure (`Error::Io`, which a retry policy may retry), not a refused
/// handshake.
#[test]
fn a_record_that_does_not_decrypt_before_any_data_is_an_io_error() {
    let client = trusting().build().unwrap();
    // An application-data record header and 32 bytes that are not one.
    let mut garbage = vec![0x17, 0x03, 0x03, 0x00, 0x20];
    garbage.extend_from_slice(&[0x5a; 32]);
    let server = TlsServer::start(&certs().valid, TlsBehaviour::SendRawThenClose(garbage));
    let error = get(&client, &server).unwrap_err();
    assert!(matches!(error, Error::Io { .. }), "{error:?}");
    assert!(error.tls_failure().is_none(), "{error:?}");
}

#[test]
fn the_version_range_is_what_is_offered() {
    let both = server(rustls::ALL_VERSIONS, false);
    let client = trusting()
        .max_tls_version(TlsVersion::Tls12)
        .build()
        .unwrap();
    assert_eq!(get(&client, &both).unwrap(), "hello");
    assert_eq!(
        both.handshake_details()[0].version,
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
    let only_12 = server(&[&rustls::version::TLS12], false);
    let client = trusting()
        .min_tls_version(TlsVersion::Tls13)
        .build()
        .unwrap();
    let error = get(&client, &only_12).unwrap_err();
    assert_eq!(
        error.tls_failure(),
        Some(TlsFailureKind::Protocol),
        "{error:?}"
    );
    let error = trusting()
        .min_tls_version(TlsVersion::Tls13)
        .max_tls_version(TlsVersion::Tls12)
        .build()
        .map(drop)
        .expect_err("an empty range fails build");
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn a_caller_made_config_is_used_with_the_protocol_layers_alpn() {
    let server = server(rustls::ALL_VERSIONS, false);
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(
            certs().ca_der.clone(),
        ))
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    // Replaced: the connection speaks HTTP/1.1.
    config.alpn_protocols = vec![b"h3".to_vec()];
    let client = Client::builder()
        .event_loops(1)
        .no_proxy()
        .tls_config(Arc::new(config))
        .build()
        .unwrap();
    assert_eq!(get(&client, &server).unwrap(), "hello");
    assert_eq!(
        server.handshake_details()[0].version,
        Some(rustls::ProtocolVersion::TLSv1_3)
    );
}

#[test]
fn a_reconnect_resumes_its_session_unless_resumption_is_off() {
    for (resumption, versions) in [
        (true, rustls::ALL_VERSIONS),
        (true, &[&rustls::version::TLS12][..]),
        (false, rustls::ALL_VERSIONS),
    ] {
        let server = server(versions, false);
        let client = trusting()
            .keep_alive(false)
            .tls_session_resumption(resumption)
            .build()
            .unwrap();
        for _ in 0..3 {
            assert_eq!(get(&client, &server).unwrap(), "hello");
        }
        let resumed: Vec<bool> = server
            .handshake_details()
            .iter()
            .map(|h| h.resumed)
            .collect();
        assert_eq!(resumed, vec![false, resumption, resumption], "{versions:?}");
    }
}
