//! A tunnel through a proxy, on the connection's loop: `CONNECT` through an
//! HTTP proxy, or the SOCKS5 handshake (RFC 1928, with RFC 1929
//! credentials), driven by readiness events over the plain socket to the
//! proxy. The sans-IO halves are in [`crate::net::proxy`].
//!
//! The handshake timeout is armed when the tunnel starts and, for
//! `https://`, bounds TLS after it as well; the request deadline bounds it
//! from this loop (the exchange is attached ready since the TCP connect).
//! Every failure the proxy reports is an
//! [`Error::Proxy`] naming the proxy and what it said — unless the request
//! can go on the origin's shared HTTP/2 connection instead (this one was a
//! spare), as after a failed connect or TLS handshake.
//!
//! # `socks5://`: one address of the origin per proxy connection
//!
//! The origin's name is resolved here ([`SocksTargets`]), and a SOCKS5
//! CONNECT carries one address. When the proxy answers that it could not
//! reach it (unreachable, refused, timed out, an address family it lacks:
//! `SocksError::blames_the_address`), the connection
//! connects to the proxy again and asks for the next address, as a direct
//! connection would try it — the same connection, so with the same permit,
//! under the request deadline; the last failure is the error. Other
//! failures (credentials, rules, a general failure, a stalled proxy) end
//! the request at once: another address would meet them too.

use super::{Conn, State};
use crate::error::ProxyError;
use crate::error::{Error, InvalidRequest};
use crate::event_loop::LoopContext;
use crate::exchange::Exchange;
use crate::net::proxy::{connect_request, ConnectResponse, InvalidConnectHost};
use crate::net::proxy::{Progress, Socks5Handshake, Target};
use crate::net::proxy::{ProxyScheme, ProxyUrl};
use crate::net::Route;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;

/// The most a proxy may send before its answer is complete (CONNECT's head
/// limit is smaller; a SOCKS reply is at most 262 bytes).
const MAX_ANSWER: usize = 64 * 1024;

pub(super) struct Tunnelling {
    pub(super) exchange: Arc<Exchange>,
    step: Step,
    /// Where the tunnel goes, `host:port`, as errors name it.
    target: String,
    /// What the proxy sent that is not consumed yet.
    received: Vec<u8>,
    /// For `socks5://`: the origin's addresses still to ask for.
    socks: Option<SocksTargets>,
}

/// For a `socks5://` proxy: the origin's addresses, resolved here, asked
/// for one per connection to the proxy (see the [module documentation](self)).
pub(crate) struct SocksTargets {
    /// The proxy's addresses, to connect to it again.
    pub(super) proxy: Vec<SocketAddr>,
    /// The origin's addresses not asked for yet, in the order to ask.
    remaining: VecDeque<SocketAddr>,
}

impl SocksTargets {
    /// `origin`'s addresses in the order happy eyeballs would try them
    /// (alternating families), through the proxy at `proxy`. `None` if
    /// there is none: the proxy is then given the origin's name.
    pub(crate) fn new(proxy: &[SocketAddr], origin: Vec<SocketAddr>) -> Option<SocksTargets> {
        let remaining = super::open::interleave(origin);
        (!remaining.is_empty()).then(|| SocksTargets {
            proxy: proxy.to_vec(),
            remaining,
        })
    }
}

enum Step {
    /// The CONNECT request, `request[written..]` still to send.
    Connect {
        request: Vec<u8>,
        written: usize,
    },
    Socks(Socks5Handshake),
}

/// What one look at the tunnel found.
enum Turn {
    /// Waiting for the socket.
    Pending,
    /// Open: bytes after the proxy's answer belong to the origin.
    Open(Vec<u8>),
    Failed(ProxyError),
}

impl Conn {
    /// Starts the tunnel's handshake on the socket just connected to the
    /// proxy. `socks`: the origin's addresses, for `socks5://`; the next
    /// one is asked for.
    pub(super) fn start_tunnel(
        &mut self,
        cx: &mut LoopContext<'_>,
        exchange: Arc<Exchange>,
        mut socks: Option<SocksTargets>,
    ) {
        let Route::Tunnel { proxy, origin } = &*self.route else {
            return self.connected(cx, exchange, Vec::new());
        };
        let socks_target = socks.as_mut().and_then(|s| s.remaining.pop_front());
        let user_agent = exchange.request.headers.get(http::header::USER_AGENT);
        let step = match first_step(proxy, &origin.host, origin.port, socks_target, user_agent) {
            Ok(step) => step,
            Err(failure) => {
                let error = match failure {
                    NoFirstStep::Proxy(source) => exchange.proxy_failure(source),
                    NoFirstStep::Request(error) => error,
                };
                self.close(cx);
                exchange.finish_err(error);
                return;
            }
        };
        let target = origin.to_string();
        self.arm_handshake_timer(cx);
        self.state = State::Tunnelling(Tunnelling {
            exchange,
            step,
            target,
            received: Vec::new(),
            socks,
        });
        // The socket is writable: the first message goes now.
        self.drive_tunnel(cx);
    }

    /// Moves the tunnel's handshake on as far as the socket allows.
    pub(super) fn drive_tunnel(&mut self, cx: &mut LoopContext<'_>) {
        let State::Tunnelling(tunnelling) = &mut self.state else {
            return;
        };
        let exchange = tunnelling.exchange.clone();
        if exchange.is_done() {
            return self.close(cx);
        }
        let Some(transport) = self.transport.as_mut() else {
            return;
        };
        let turn = turn(tunnelling, transport.tcp_mut());
        match turn {
            Turn::Pending => {}
            Turn::Open(early) => {
                self.disarm_timer_keeping_handshake(cx);
                self.connected(cx, exchange, early);
            }
            Turn::Failed(source) => {
                if let Some(socks) = next_address_after(tunnelling, &source) {
                    return self.connect_again(cx, exchange, socks);
                }
                // Nothing of the request went through: as when a connect
                // or a TLS handshake fails, it may still go on the
                // origin's shared HTTP/2 connection (this one was a spare).
                let error = exchange.proxy_failure(source);
                self.opening_failed(cx, exchange, error);
            }
        }
    }

    /// After the tunnel, TLS goes on under the same handshake timer; a
    /// plain tunnel has nothing left for it to bound.
    fn disarm_timer_keeping_handshake(&mut self, cx: &mut LoopContext<'_>) {
        if self.route.tls_origin().is_none() {
            self.disarm_timer(cx);
        }
    }
}

/// The origin's addresses still to ask for, if the proxy's `failure` says
/// only the address it was given is out of reach and another is left.
fn next_address_after(tunnelling: &mut Tunnelling, failure: &ProxyError) -> Option<SocksTargets> {
    let blames_the_address =
        matches!(failure, ProxyError::Socks(error) if error.blames_the_address());
    let more = tunnelling
        .socks
        .as_ref()
        .is_some_and(|s| !s.remaining.is_empty());
    (blames_the_address && more)
        .then(|| tunnelling.socks.take())
        .flatten()
}

/// Why a tunnel could not start: what the proxy's protocol refused (a
/// target SOCKS5 cannot carry), or the request itself.
#[derive(Debug)]
enum NoFirstStep {
    Proxy(ProxyError),
    Request(Error),
}

/// The tunnel's first message to `proxy`, for the target `host:port`
/// (`socks_target`: the address asked for through `socks5://`), from a
/// client that says it is `user_agent` (a CONNECT says so).
fn first_step(
    proxy: &ProxyUrl,
    host: &str,
    port: u16,
    socks_target: Option<SocketAddr>,
    user_agent: Option<&http::HeaderValue>,
) -> Result<Step, NoFirstStep> {
    let credentials = proxy
        .credentials()
        .map(|(user, password)| (user.to_owned(), password.to_owned()));
    match proxy.scheme() {
        ProxyScheme::Http => {
            // The host is all that can make the request fail, and it is
            // not reached: a CONNECT goes for an https:// origin only
            // (`Route::new`), whose host passed `ServerName::try_from`
            // when its exchange was made (`hop::exchange_for`) — a DNS
            // name of letters, digits, `-`, `_` and dots, or an IP address
            // as it displays, each a valid authority. Were it reached, the
            // host would not be a TLS server name either: the request is
            // refused as the check would have, nothing sent to the proxy
            // (not taken for a malformed answer from a proxy that has not
            // answered).
            let auth = proxy.authorization();
            let request = connect_request(host, port, auth.as_ref(), user_agent).map_err(
                |InvalidConnectHost| {
                    NoFirstStep::Request(InvalidRequest::ServerName(host.to_owned()).into())
                },
            )?;
            Ok(Step::Connect {
                request,
                written: 0,
            })
        }
        ProxyScheme::Socks5 | ProxyScheme::Socks5h => {
            let target = match (proxy.scheme(), socks_target) {
                (ProxyScheme::Socks5, Some(addr)) => Target::Addr(addr),
                _ => Target::from_host(host, port),
            };
            Socks5Handshake::new(target, credentials)
                .map(Step::Socks)
                .map_err(|error| NoFirstStep::Proxy(error.into()))
        }
    }
}

/// Writes what is due, parses what came, and reads more, until the socket
/// would block or the answer is complete.
///
/// What came is parsed only once everything due is written: a proxy's
/// answer is taken for the message it answers only after that message
/// went out (a SOCKS5 proxy may send its reply with its method selection,
/// before the CONNECT request: the request still goes first, and the tunnel
/// never opens with it unsent).
fn turn(tunnelling: &mut Tunnelling, tcp: &mut mio::net::TcpStream) -> Turn {
    loop {
        if let Err(error) = write_due(tunnelling, tcp) {
            return Turn::Failed(error);
        }
        if pending(&tunnelling.step).is_empty() && !tunnelling.received.is_empty() {
            if let Some(turn) = parse(tunnelling) {
                return turn;
            }
            if !pending(&tunnelling.step).is_empty() {
                // The next message is queued: it goes before more is read.
                continue;
            }
        }
        let mut chunk = [0u8; 4096];
        let read = match tcp.read(&mut chunk) {
            Ok(0) => return Turn::Failed(eof(tunnelling)),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Turn::Pending,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Turn::Failed(ProxyError::Io(e)),
        };
        tunnelling.received.extend_from_slice(&chunk[..read]);
        if tunnelling.received.len() > MAX_ANSWER {
            return Turn::Failed(ProxyError::MalformedAnswer(format!(
                "more than {MAX_ANSWER} bytes before the end of its answer"
            )));
        }
    }
}

/// What is still to be written to the proxy.
fn pending(step: &Step) -> &[u8] {
    match step {
        Step::Connect { request, written } => &request[*written..],
        Step::Socks(socks) => socks.wants_write(),
    }
}

/// Writes what is due, as far as the socket takes it.
fn write_due(tunnelling: &mut Tunnelling, tcp: &mut mio::net::TcpStream) -> Result<(), ProxyError> {
    loop {
        let due = pending(&tunnelling.step);
        if due.is_empty() {
            return Ok(());
        }
        let n = match tcp.write(due) {
            Ok(0) => return Err(ProxyError::Io(io::ErrorKind::WriteZero.into())),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ProxyError::Io(e)),
        };
        match &mut tunnelling.step {
            Step::Connect { written, .. } => *written += n,
            Step::Socks(socks) => socks.written(n),
        }
    }
}

/// Parses what the proxy sent: `Some` once its answer is complete (or
/// wrong), `None` while more is needed or a next message was queued (what
/// is left is parsed once it is written).
fn parse(tunnelling: &mut Tunnelling) -> Option<Turn> {
    match &mut tunnelling.step {
        Step::Connect { .. } => match ConnectResponse::parse(&tunnelling.received) {
            Ok(None) => None,
            Ok(Some((used, _established))) => Some(Turn::Open(tunnelling.received.split_off(used))),
            Err(error) => Some(Turn::Failed(
                error.into_proxy_error(tunnelling.target.clone()),
            )),
        },
        Step::Socks(socks) => match socks.received(&tunnelling.received) {
            Ok((_, Progress::NeedMore)) => None,
            Ok((used, Progress::Send)) => {
                tunnelling.received.drain(..used);
                None
            }
            Ok((used, Progress::Done { .. })) => {
                Some(Turn::Open(tunnelling.received.split_off(used)))
            }
            Err(error) => Some(Turn::Failed(error.into())),
        },
    }
}

/// The proxy closed the connection before its answer was complete.
fn eof(tunnelling: &mut Tunnelling) -> ProxyError {
    match &mut tunnelling.step {
        Step::Connect { .. } => {
            let message = match tunnelling.received.len() {
                0 => "the proxy closed the connection before answering CONNECT".to_owned(),
                n => format!(
                    "the proxy closed the connection in the middle of its answer to CONNECT \
                     ({n} bytes of it came)"
                ),
            };
            ProxyError::Io(io::Error::new(io::ErrorKind::UnexpectedEof, message))
        }
        Step::Socks(socks) => socks.eof_error().into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http_proxy() -> ProxyUrl {
        ProxyUrl::parse("http://user:secret@proxy.test:3128").unwrap()
    }

    #[test]
    fn the_connect_request_goes_to_the_target_with_the_proxys_credentials() {
        let Ok(Step::Connect { request, written }) =
            first_step(&http_proxy(), "2001:db8::1", 443, None, None)
        else {
            panic!("no CONNECT");
        };
        assert_eq!(written, 0);
        assert_eq!(
            String::from_utf8(request).unwrap(),
            "CONNECT [2001:db8::1]:443 HTTP/1.1\r\nHost: [2001:db8::1]:443\r\n\
             Proxy-Authorization: Basic dXNlcjpzZWNyZXQ=\r\n\r\n"
        );
    }

    /// A host no CONNECT can name (which no request reaches the tunnel
    /// with: see `first_step`) fails the request as one the client refuses,
    /// not as a malformed answer of the proxy, which has not answered.
    #[test]
    fn a_target_no_connect_can_name_is_the_requests_error_not_the_proxys() {
        for host in ["a[b", "v1.x:y", "fe80::1%25eth0", ""] {
            match first_step(&http_proxy(), host, 443, None, None) {
                Err(NoFirstStep::Request(Error::InvalidRequest(InvalidRequest::ServerName(
                    named,
                )))) => assert_eq!(named, host),
                Err(other) => panic!("{host:?}: {other:?}"),
                Ok(_) => panic!("{host:?}: a CONNECT"),
            }
        }
    }

    /// Why no request reaches the tunnel with such a host: any an https://
    /// URI gives that is a TLS server name (the check `hop::exchange_for`
    /// makes) is a valid CONNECT target.
    #[cfg(feature = "rustls")]
    #[test]
    fn every_tls_server_name_of_an_https_uri_is_a_connect_target() {
        use proptest::prelude::*;
        let hosts = prop_oneof![
            "[a-zA-Z0-9_-]{1,8}(\\.[a-zA-Z0-9_-]{1,8}){0,3}\\.?",
            "[a-zA-Z0-9_.~!$&'()*+,;=%-]{1,24}",
            "\\[[0-9a-fA-F:.%v]{1,24}\\]",
            any::<std::net::Ipv6Addr>().prop_map(|ip| format!("[{ip}]")),
            any::<std::net::Ipv4Addr>().prop_map(|ip| ip.to_string()),
        ];
        proptest!(|(host in hosts, port: u16)| {
            let Ok(uri) = format!("https://{host}:{port}/").parse::<http::Uri>() else {
                return Ok(());
            };
            let Ok(origin) = crate::net::Origin::of(&uri) else {
                return Ok(());
            };
            if rustls::pki_types::ServerName::try_from(&*origin.host).is_ok() {
                prop_assert!(
                    connect_request(&origin.host, origin.port, None, None).is_ok(),
                    "{:?}", origin.host
                );
            }
        });
    }
}
