//! A loopback TLS server for tests, and the certificates it serves, made at
//! test time with rcgen (no key is committed): a CA, a leaf for
//! 127.0.0.1/localhost signed by it, the same leaf expired, a leaf for
//! another name, one for names a URL may spell otherwise, and a CA
//! certificate for 127.0.0.1/localhost signed by itself.
//!
//! The server is a [`TestServer`] with a `Custom` behaviour: each accepted
//! stream is wrapped in a rustls `ServerConnection` (`StreamOwned`, blocking
//! std I/O on the connection's own thread), so dropping the server stops and
//! joins everything the way it does for plain servers, and connection counts
//! (`connections_accepted`, `wait_for_open`) work the same.

use super::{response_closes, Behaviour, RecordedRequest, RequestReader, Responder, TestServer};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use std::io::Write;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// A certificate chain (leaf first) and its key.
pub struct Leaf {
    pub chain: Vec<CertificateDer<'static>>,
    key_der: Vec<u8>,
}

impl Leaf {
    pub fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()))
    }
}

/// Everything the tests serve and trust.
pub struct TestCerts {
    /// The CA certificate, PEM: what a client adds as a root.
    pub ca_pem: String,
    /// The same, DER.
    pub ca_der: Vec<u8>,
    /// For 127.0.0.1, ::1 and localhost, signed by the CA, valid now.
    pub valid: Leaf,
    /// The same names, signed by the CA, expired in 2001.
    pub expired: Leaf,
    /// For other.example only, signed by the CA.
    pub other_name: Leaf,
    /// For xn--bcher-kva.test (`bücher.test` in IDNA's ASCII form) and
    /// example.test, signed by the CA: names a URL may spell otherwise.
    pub ascii_names: Leaf,
    /// For 127.0.0.1, ::1 and localhost, signed by itself and a CA
    /// certificate (`CA:TRUE`), as `openssl req -x509` makes one by
    /// default: served as it is, the chain is this one certificate.
    pub self_signed_ca: Leaf,
    /// The same, PEM: what a client adds as a root to trust it.
    pub self_signed_ca_pem: String,
}

/// The test binary's certificates, made on first use.
pub fn certs() -> &'static TestCerts {
    static CERTS: OnceLock<TestCerts> = OnceLock::new();
    CERTS.get_or_init(make_certs)
}

fn make_certs() -> TestCerts {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "tickless test CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf = |names: &[&str], expired: bool| {
        let key = KeyPair::generate().expect("leaf key");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("leaf params");
        params
            .distinguished_name
            .push(DnType::CommonName, "tickless test server");
        if expired {
            params.not_before = rcgen::date_time_ymd(2000, 1, 1);
            params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        }
        let cert = params.signed_by(&key, &issuer).expect("leaf certificate");
        Leaf {
            chain: vec![cert.der().clone(), ca_cert.der().clone()],
            key_der: key.serialize_der(),
        }
    };
    let here = ["127.0.0.1", "::1", "localhost"];
    let self_signed_key = KeyPair::generate().expect("self-signed key");
    let mut self_signed_params =
        CertificateParams::new(here.map(str::to_owned).to_vec()).expect("self-signed params");
    self_signed_params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    self_signed_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let self_signed = self_signed_params
        .self_signed(&self_signed_key)
        .expect("self-signed certificate");
    TestCerts {
        ca_pem: ca_cert.pem(),
        ca_der: ca_cert.der().to_vec(),
        valid: leaf(&here, false),
        expired: leaf(&here, true),
        other_name: leaf(&["other.example"], false),
        ascii_names: leaf(&["xn--bcher-kva.test", "example.test"], false),
        self_signed_ca: Leaf {
            chain: vec![self_signed.der().clone()],
            key_der: self_signed_key.serialize_der(),
        },
        self_signed_ca_pem: self_signed.pem(),
    }
}

/// What the TLS server does on each connection, once the handshake is done.
#[derive(Clone)]
pub enum TlsBehaviour {
    /// Keep-alive: answer each request with the closure's bytes; close
    /// (with close_notify) when the request or the response says close.
    Respond(Responder),
    /// Answer one request, then close_notify and close, without having
    /// said `Connection: close`: an idle pooled connection closed by the
    /// server.
    RespondThenClose(Responder),
    /// Read one request, write these bytes, then close the TCP connection
    /// *without* close_notify (a truncation, as an attacker would make it).
    SendThenCut(Vec<u8>),
    /// Read one request, write these bytes, then close_notify and close.
    SendThenCloseNotify(Vec<u8>),
    /// Read one request, then write these bytes to the TCP stream as they
    /// are, outside TLS (a record that does not decrypt), and close.
    SendRawThenClose(Vec<u8>),
    /// Read one request, then send these bytes and a fatal alert after them
    /// in one write (one flight: the client's read takes both), and keep the
    /// connection open until the client closes it: the alert alone must
    /// end it, no later event. The alert is the one rustls sends for a
    /// record that does not decrypt (`bad_record_mac`), provoked by
    /// feeding the server's connection such a record.
    SendThenAlert(Vec<u8>),
    /// Read a request's head only, write these bytes, then close_notify
    /// and close with the body unread, so that the kernel resets the
    /// connection: an early refusal of an upload (RFC 9112 §9.5).
    AnswerHeadThenClose(Vec<u8>),
}

impl TlsBehaviour {
    pub fn respond(f: impl Fn(&RecordedRequest) -> Vec<u8> + Send + Sync + 'static) -> Self {
        TlsBehaviour::Respond(Arc::new(f))
    }
}

#[derive(Default)]
struct Seen {
    handshakes: AtomicUsize,
    requests: Mutex<Vec<RecordedRequest>>,
    server_names: Mutex<Vec<Option<String>>>,
    /// Per handshake: resumed, the version, and whether the client sent a
    /// certificate.
    details: Mutex<Vec<Handshake>>,
}

/// What the server saw of one completed handshake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handshake {
    pub resumed: bool,
    pub version: Option<rustls::ProtocolVersion>,
    pub client_certified: bool,
}

/// A loopback HTTPS server. Derefs to its [`TestServer`] for connection
/// counts and waits.
pub struct TlsServer {
    server: TestServer,
    seen: Arc<Seen>,
}

impl std::ops::Deref for TlsServer {
    type Target = TestServer;
    fn deref(&self) -> &TestServer {
        &self.server
    }
}

/// A server config for `leaf` speaking `versions`, that requires a client
/// certificate signed by the test CA if `client_auth`.
pub fn server_config_with(
    leaf: &Leaf,
    versions: &[&'static rustls::SupportedProtocolVersion],
    client_auth: bool,
) -> Arc<ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .expect("protocol versions");
    let builder = if client_auth {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from(certs().ca_der.clone()))
            .expect("CA root");
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .expect("client verifier");
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let mut config = builder
        .with_single_cert(leaf.chain.clone(), leaf.key())
        .expect("server certificate");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

pub fn server_config(leaf: &Leaf) -> Arc<ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(leaf.chain.clone(), leaf.key())
        .expect("server certificate");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

impl TlsServer {
    pub fn start(leaf: &Leaf, behaviour: TlsBehaviour) -> TlsServer {
        TlsServer::start_with(server_config(leaf), behaviour)
    }

    /// A server with a config of the test's own (see [`server_config_with`]).
    pub fn start_with(config: Arc<ServerConfig>, behaviour: TlsBehaviour) -> TlsServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        TlsServer::start_on(listener, config, behaviour)
    }

    /// A server accepting on `listener` (a loopback address of the test's
    /// choosing, `[::1]` say).
    pub fn start_on(
        listener: TcpListener,
        config: Arc<ServerConfig>,
        behaviour: TlsBehaviour,
    ) -> TlsServer {
        let seen = Arc::new(Seen::default());
        let conn_seen = seen.clone();
        let server = TestServer::start_on(
            listener,
            Behaviour::custom(move |stream, index| {
                serve(&config, &conn_seen, &behaviour, stream, index)
            }),
        );
        TlsServer { server, seen }
    }

    /// A keep-alive server answering with the closure's bytes.
    pub fn respond(
        leaf: &Leaf,
        f: impl Fn(&RecordedRequest) -> Vec<u8> + Send + Sync + 'static,
    ) -> TlsServer {
        TlsServer::start(leaf, TlsBehaviour::respond(f))
    }

    /// `https://127.0.0.1:PORT/path`.
    pub fn url(&self, path: &str) -> String {
        self.url_for("127.0.0.1", path)
    }

    /// `https://HOST:PORT/path`, e.g. with `localhost` to send SNI.
    pub fn url_for(&self, host: &str, path: &str) -> String {
        let slash = if path.starts_with('/') { "" } else { "/" };
        format!("https://{host}:{}{slash}{path}", self.server.addr().port())
    }

    /// Handshakes completed.
    pub fn handshakes(&self) -> usize {
        self.seen.handshakes.load(Ordering::SeqCst)
    }

    /// Requests read over TLS, in order.
    pub fn tls_requests(&self) -> Vec<RecordedRequest> {
        self.seen
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Each completed handshake, in order.
    pub fn handshake_details(&self) -> Vec<Handshake> {
        self.seen
            .details
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The SNI of each completed handshake.
    pub fn server_names(&self) -> Vec<Option<String>> {
        self.seen
            .server_names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

type Tls = StreamOwned<ServerConnection, TcpStream>;

fn close_notify(mut tls: Tls) {
    tls.conn.send_close_notify();
    let _ = tls.flush();
    let _ = tls.sock.shutdown(Shutdown::Write);
    // Wait for the client's close, so the close is not a reset.
    let _ = tls
        .sock
        .set_read_timeout(Some(std::time::Duration::from_secs(1)));
    super::drain(&mut tls.sock);
}

fn serve(
    config: &Arc<ServerConfig>,
    seen: &Seen,
    behaviour: &TlsBehaviour,
    stream: TcpStream,
    index: usize,
) {
    let Ok(conn) = ServerConnection::new(config.clone()) else {
        return;
    };
    let mut tls = StreamOwned::new(conn, stream);
    while tls.conn.is_handshaking() {
        // A client that refuses the certificate ends it here.
        if tls.conn.complete_io(&mut tls.sock).is_err() {
            return;
        }
    }
    seen.handshakes.fetch_add(1, Ordering::SeqCst);
    seen.server_names
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(tls.conn.server_name().map(str::to_owned));
    seen.details
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Handshake {
            resumed: tls.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
            version: tls.conn.protocol_version(),
            client_certified: tls.conn.peer_certificates().is_some(),
        });
    let mut reader = RequestReader::new(index);
    let mut read_one = |tls: &mut Tls| match reader.read_request(tls) {
        Ok(request) => {
            seen.requests
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(request.clone());
            Some(request)
        }
        Err(_) => None,
    };
    match behaviour {
        TlsBehaviour::Respond(f) => loop {
            let Some(request) = read_one(&mut tls) else {
                return;
            };
            let bytes = f(&request);
            if tls.write_all(&bytes).and_then(|()| tls.flush()).is_err() {
                return;
            }
            if request.wants_close() || response_closes(&bytes) {
                return close_notify(tls);
            }
        },
        TlsBehaviour::RespondThenClose(f) => {
            if let Some(request) = read_one(&mut tls) {
                let bytes = f(&request);
                if tls.write_all(&bytes).and_then(|()| tls.flush()).is_ok() {
                    close_notify(tls);
                }
            }
        }
        TlsBehaviour::SendThenCut(bytes) => {
            if read_one(&mut tls).is_some() && tls.write_all(bytes).is_ok() {
                let _ = tls.flush();
                // FIN with no close_notify before it.
                let _ = tls.sock.shutdown(Shutdown::Write);
                super::drain(&mut tls.sock);
            }
        }
        TlsBehaviour::SendThenCloseNotify(bytes) => {
            if read_one(&mut tls).is_some()
                && tls.write_all(bytes).and_then(|()| tls.flush()).is_ok()
            {
                close_notify(tls);
            }
        }
        TlsBehaviour::AnswerHeadThenClose(bytes) => {
            if super::read_head(&mut tls).is_some()
                && tls.write_all(bytes).and_then(|()| tls.flush()).is_ok()
            {
                tls.conn.send_close_notify();
                let _ = tls.flush();
                let _ = tls.sock.shutdown(Shutdown::Write);
                // Dropped with the body unread: the kernel resets it.
            }
        }
        TlsBehaviour::SendThenAlert(bytes) => {
            if read_one(&mut tls).is_some() {
                let _ = tls.sock.write_all(&data_then_alert(&mut tls.conn, bytes));
                let _ = tls
                    .sock
                    .set_read_timeout(Some(std::time::Duration::from_secs(30)));
                super::drain(&mut tls.sock);
            }
        }
        TlsBehaviour::SendRawThenClose(bytes) => {
            if read_one(&mut tls).is_some() && tls.sock.write_all(bytes).is_ok() {
                let _ = tls.sock.shutdown(Shutdown::Write);
                super::drain(&mut tls.sock);
            }
        }
    }
}

/// The records of `bytes` on `conn` and, after them, the fatal alert rustls
/// queues when a record does not decrypt: an application-data record of
/// zeros, which no key authenticates, fed to `conn` as if from the client.
fn data_then_alert(conn: &mut ServerConnection, bytes: &[u8]) -> Vec<u8> {
    conn.writer().write_all(bytes).expect("plaintext queued");
    let mut forged = vec![0x17, 0x03, 0x03, 0x00, 0x20];
    forged.resize(forged.len() + 0x20, 0);
    conn.read_tls(&mut forged.as_slice())
        .expect("forged record taken");
    assert!(
        conn.process_new_packets().is_err(),
        "a forged record decrypts"
    );
    let mut flight = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut flight).expect("records to memory");
    }
    flight
}
