//! What TLS session resumption saves on a reconnect:
//! `cargo bench --bench tls_resumption`.
//!
//! A loopback HTTPS server (rustls, ring, a CA and a leaf for `localhost`
//! made at start with rcgen) answers one request per connection and closes;
//! the client, with `keep_alive(false)`, opens a new connection for every
//! request, so every request after the first is a reconnect to a server it
//! has met. For each setting (TLS 1.3 and TLS 1.2, resumption on and off)
//! it makes `ROUNDS` requests after a warm-up and reports the handshake's
//! duration as the client's listener sees it — from the TCP connect's end
//! to the handshake's (`on_tls_handshake_attempt` to
//! `on_tls_handshake_success`) — as median and 90th percentile, and how
//! many handshakes the server saw resumed.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tickless::{Client, ConnectionInfo, EventListener, RequestInfo, TlsVersion};

const WARMUP: usize = 20;
const ROUNDS: usize = 300;

/// Handshake durations, from attempt to success.
#[derive(Default)]
struct Handshakes {
    started: Mutex<Option<Instant>>,
    took: Mutex<Vec<Duration>>,
}

impl EventListener for Handshakes {
    fn on_tls_handshake_attempt(&self, _: &RequestInfo, _: &ConnectionInfo) {
        *self.started.lock().unwrap() = Some(Instant::now());
    }
    fn on_tls_handshake_success(&self, _: &RequestInfo, _: &ConnectionInfo, _: Option<&[u8]>) {
        if let Some(started) = self.started.lock().unwrap().take() {
            self.took.lock().unwrap().push(started.elapsed());
        }
    }
}

struct Server {
    addr: std::net::SocketAddr,
    resumed: Arc<AtomicUsize>,
}

fn certificates() -> (String, Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name.push(DnType::CommonName, "bench CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let chain = vec![leaf.der().clone(), ca_cert.der().clone()];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    (ca_cert.pem(), chain, key)
}

fn serve(chain: Vec<CertificateDer<'static>>, key: PrivateKeyDer<'static>) -> Server {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let resumed = Arc::new(AtomicUsize::new(0));
    let counter = resumed.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = stream.set_nodelay(true);
            let Ok(conn) = ServerConnection::new(config.clone()) else {
                continue;
            };
            let mut tls = StreamOwned::new(conn, stream);
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match tls.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            if tls.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                counter.fetch_add(1, Ordering::Relaxed);
            }
            let _ = tls
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
    Server { addr, resumed }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let (ca_pem, chain, key) = certificates();
    let server = serve(chain, key);
    let url = format!("https://localhost:{}/", server.addr.port());
    println!(
        "{:<6} {:<11} {:>12} {:>12} {:>8}",
        "TLS", "resumption", "median µs", "p90 µs", "resumed"
    );
    for version in [TlsVersion::Tls13, TlsVersion::Tls12] {
        for resumption in [true, false] {
            let handshakes = Arc::new(Handshakes::default());
            let client = Client::builder()
                .event_loops(1)
                .no_proxy()
                .keep_alive(false)
                .add_root_certificate(&ca_pem)
                .resolve("localhost", &[server.addr])
                .min_tls_version(version)
                .max_tls_version(version)
                .tls_session_resumption(resumption)
                .listener(handshakes.clone())
                .build()
                .unwrap();
            let resumed_before = server.resumed.load(Ordering::Relaxed);
            for _ in 0..WARMUP + ROUNDS {
                let response = client.get(&url).send().wait().unwrap();
                assert_eq!(response.bytes().wait().unwrap().as_ref(), b"ok");
            }
            let resumed = server.resumed.load(Ordering::Relaxed) - resumed_before;
            let mut took = handshakes.took.lock().unwrap().split_off(WARMUP);
            took.sort();
            println!(
                "{:<6} {:<11} {:>12} {:>12} {:>8}",
                format!("{version:?}"),
                if resumption { "on" } else { "off" },
                percentile(&took, 0.5).as_micros(),
                percentile(&took, 0.9).as_micros(),
                resumed
            );
            client.close();
        }
    }
}
