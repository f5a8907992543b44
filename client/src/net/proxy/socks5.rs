//! SOCKS5 client handshake (RFC 1928) with username/password authentication
//! (RFC 1929), as a sans-IO state machine: bytes in, bytes out, no sockets,
//! no clock, no threads.
//!
//! # Protocol, top-down
//!
//! A handshake runs these steps over one freshly connected stream to the proxy:
//!
//! 1. **Greeting** (client → proxy): `VER=05 NMETHODS METHODS...`. We offer
//!    `00` (no authentication) always, and `02` (username/password) as well
//!    when credentials were given: `05 01 00` or `05 02 00 02`.
//! 2. **Method selection** (proxy → client): `VER=05 METHOD`, 2 bytes. `FF`
//!    means none of our methods is acceptable ([`SocksError::NoAcceptableMethods`]);
//!    a method we did not offer is [`SocksError::UnexpectedMethod`].
//! 3. **Sub-negotiation**, only if the proxy chose `02` (RFC 1929):
//!    client → proxy `VER=01 ULEN UNAME PLEN PASSWD`; proxy → client
//!    `VER=01 STATUS`, 2 bytes, where `STATUS=00` is success and anything else
//!    is [`SocksError::AuthFailed`].
//! 4. **CONNECT request** (client → proxy):
//!    `VER=05 CMD=01 RSV=00 ATYP DST.ADDR DST.PORT` with `ATYP` `01` (IPv4,
//!    4 bytes), `03` (domain: 1 length byte, then the name) or `04` (IPv6,
//!    16 bytes), and the port in network byte order.
//! 5. **Reply** (proxy → client): `VER=05 REP RSV ATYP BND.ADDR BND.PORT`.
//!    `REP=00` is success: the handshake is [`Progress::Done`] with the bound
//!    address, and from the next byte on the stream is the tunnel. Any other
//!    `REP` is a typed error (`01`..=`08` each have their own variant, any
//!    other code is [`SocksError::UnknownReply`]).
//!
//! # Driving it
//!
//! [`Socks5Handshake::new`] validates everything that can be validated up
//! front (credential and domain lengths), so a bad configuration fails before
//! a single byte is sent, and queues the greeting. Then, on an event loop:
//!
//! * whenever [`Socks5Handshake::wants_write`] is non-empty, write as much of
//!   it as the socket takes and report the count with
//!   [`Socks5Handshake::written`];
//! * whenever bytes arrive, append them to a receive buffer and call
//!   [`Socks5Handshake::received`] with the whole unconsumed buffer. It
//!   returns how many bytes it consumed (drop them from the buffer) and a
//!   [`Progress`]: [`Progress::NeedMore`] (wait for more input; nothing was
//!   consumed), [`Progress::Send`] (a new request was queued: write it out,
//!   then call `received` again with whatever is left in the buffer, which
//!   is normally nothing), or [`Progress::Done`].
//!
//! # Invariants
//!
//! * Messages are consumed whole or not at all: a truncated message is
//!   `NeedMore` with 0 bytes consumed, so the caller never has to re-split
//!   bytes it already handed over.
//! * The reply is consumed exactly: on `Done` the bytes after the reply are
//!   left unconsumed — they are the tunnel's first bytes.
//! * Failures are reported as soon as they are certain (a wrong version on
//!   the first byte, a failure `REP` on the second byte of the reply), without
//!   waiting for the rest of the message: some proxies send short failure
//!   replies and close.
//! * Once failed, every later call returns the same error; once done, every
//!   later call returns `Done` again and consumes nothing.
//! * No input makes it panic, and nothing it does blocks.
//!
//! # Choices
//!
//! * The `RSV` byte of the reply is not checked (RFC 1928 says it is `00`;
//!   curl ignores it too, and a quirky proxy should not break the tunnel).
//! * The sub-negotiation reply version must be `01` as RFC 1929 says; `05`
//!   there is rejected as [`SocksError::BadAuthVersion`].
//! * Empty usernames and passwords are sent as zero-length fields (RFC 1929
//!   draws them as 1..=255 bytes, but curl sends an empty password and
//!   servers accept it); over 255 bytes is an error.
//! * A bound domain name in the reply is returned as raw bytes, not converted
//!   to UTF-8, so nothing is lost or guessed.

use crate::error::{SocksError, SocksStage};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// The SOCKS protocol version byte (`05`).
const SOCKS_VERSION: u8 = 0x05;
/// The RFC 1929 sub-negotiation version byte (`01`).
const AUTH_VERSION: u8 = 0x01;
/// Method `00`: no authentication required.
const METHOD_NO_AUTH: u8 = 0x00;
/// Method `02`: username/password (RFC 1929).
const METHOD_USER_PASS: u8 = 0x02;
/// Method `FF`: no acceptable methods.
const METHOD_NONE_ACCEPTABLE: u8 = 0xFF;
/// Command `01`: CONNECT.
const CMD_CONNECT: u8 = 0x01;
/// Address type `01`: IPv4.
const ATYP_IPV4: u8 = 0x01;
/// Address type `03`: domain name.
const ATYP_DOMAIN: u8 = 0x03;
/// Address type `04`: IPv6.
const ATYP_IPV6: u8 = 0x04;
/// Longest username, password or domain name a one-byte length can carry.
const MAX_FIELD_LEN: usize = 255;

/// Where the proxy should connect to.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) enum Target {
    /// An address resolved on our side (`socks5://`); sent as `ATYP` `01` or `04`.
    Addr(SocketAddr),
    /// A name the proxy resolves (`socks5h://`); sent as `ATYP` `03`.
    Domain {
        /// The host name, at most 255 bytes, without brackets or port.
        host: String,
        /// The destination port.
        port: u16,
    },
}

impl Target {
    /// Builds a target from a URI host: an IP literal (IPv6 may be
    /// bracketed, as `http::Uri::host` returns it) becomes [`Target::Addr`],
    /// anything else [`Target::Domain`].
    ///
    /// This is what `socks5h://` wants: a literal needs no resolving, so it is
    /// sent as an address (curl does the same).
    pub(crate) fn from_host(host: &str, port: u16) -> Target {
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        match bare.parse::<IpAddr>() {
            Ok(ip) => Target::Addr(SocketAddr::new(ip, port)),
            Err(_) => Target::Domain {
                host: host.to_owned(),
                port,
            },
        }
    }

    /// The destination port.
    pub(crate) fn port(&self) -> u16 {
        match self {
            Target::Addr(addr) => addr.port(),
            Target::Domain { port, .. } => *port,
        }
    }
}

impl From<SocketAddr> for Target {
    fn from(addr: SocketAddr) -> Self {
        Target::Addr(addr)
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Addr(addr) => write!(f, "Target({addr})"),
            Target::Domain { host, port } => write!(f, "Target({host}:{port})"),
        }
    }
}

/// The address the proxy reports it bound for the tunnel (`BND.ADDR`,
/// `BND.PORT`). Mostly informational for CONNECT.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum BoundAddr {
    /// `ATYP` `01` or `04`.
    Addr(SocketAddr),
    /// `ATYP` `03`: the name exactly as the proxy sent it (not necessarily
    /// UTF-8).
    Domain {
        /// The raw name bytes.
        name: Vec<u8>,
        /// The bound port.
        port: u16,
    },
}

/// What [`Socks5Handshake::received`] made of its input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Progress {
    /// The current message is incomplete; nothing was consumed. Call again
    /// with more bytes.
    NeedMore,
    /// A message was consumed and the next request was queued: write out
    /// [`Socks5Handshake::wants_write`].
    Send,
    /// The proxy accepted the CONNECT. Bytes after the consumed count belong
    /// to the tunnel.
    Done {
        /// The address the proxy reported.
        bound: BoundAddr,
    },
}

/// Internal state: which message we wait for.
#[derive(Clone)]
enum State {
    /// Greeting queued; waiting for the 2-byte method selection.
    MethodSelection,
    /// Username/password request queued; waiting for the 2-byte status.
    Authentication,
    /// CONNECT request queued; waiting for the reply.
    ConnectReply,
    /// Finished successfully.
    Done(BoundAddr),
    /// Finished with an error.
    Failed(SocksError),
}

/// A SOCKS5 client handshake in progress. See the [module docs](self).
pub(crate) struct Socks5Handshake {
    state: State,
    /// Bytes queued for the proxy; `out[out_pos..]` is still unwritten.
    out: Vec<u8>,
    out_pos: usize,
    /// The encoded RFC 1929 request, until the proxy asks for it.
    auth_request: Option<Vec<u8>>,
    /// The encoded CONNECT request, until it is queued.
    connect_request: Vec<u8>,
}

impl fmt::Debug for Socks5Handshake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the queued bytes: they may hold the password.
        f.debug_struct("Socks5Handshake")
            .field("stage", &self.stage())
            .field("pending_write", &self.wants_write().len())
            .field("with_auth", &self.auth_request.is_some())
            .finish()
    }
}

impl Socks5Handshake {
    /// Starts a handshake for `target`, offering username/password
    /// authentication when `auth` is `Some((username, password))`.
    ///
    /// The greeting is queued at once (see [`wants_write`](Self::wants_write)).
    /// Fails, before anything is sent, when the username, password or target
    /// domain is over 255 bytes or the domain is empty.
    pub(crate) fn new(target: Target, auth: Option<(String, String)>) -> Result<Self, SocksError> {
        let connect_request = encode_connect(&target)?;
        let auth_request = match &auth {
            Some((user, pass)) => Some(encode_auth(user, pass)?),
            None => None,
        };
        let out = if auth_request.is_some() {
            vec![SOCKS_VERSION, 2, METHOD_NO_AUTH, METHOD_USER_PASS]
        } else {
            vec![SOCKS_VERSION, 1, METHOD_NO_AUTH]
        };
        Ok(Socks5Handshake {
            state: State::MethodSelection,
            out,
            out_pos: 0,
            auth_request,
            connect_request,
        })
    }

    /// Bytes still to be written to the proxy (empty when there are none).
    pub(crate) fn wants_write(&self) -> &[u8] {
        self.out.get(self.out_pos..).unwrap_or(&[])
    }

    /// Records that the first `n` bytes of [`wants_write`](Self::wants_write)
    /// were written. Counts beyond what is pending are clamped.
    pub(crate) fn written(&mut self, n: usize) {
        self.out_pos = self.out_pos.saturating_add(n).min(self.out.len());
        if self.out_pos == self.out.len() {
            // Drop sent bytes (they may include the password) right away.
            self.out.clear();
            self.out_pos = 0;
        }
    }

    /// Feeds bytes received from the proxy: pass everything received and not
    /// yet consumed. Returns how many bytes were consumed and what happened.
    ///
    /// See the [module docs](self) for the contract; in short, `NeedMore`
    /// consumes nothing, and on `Done` the unconsumed rest is tunnel data.
    pub(crate) fn received(&mut self, input: &[u8]) -> Result<(usize, Progress), SocksError> {
        let result = match &self.state {
            State::Failed(err) => return Err(err.clone()),
            State::Done(bound) => {
                return Ok((
                    0,
                    Progress::Done {
                        bound: bound.clone(),
                    },
                ))
            }
            State::MethodSelection => self.on_method_selection(input),
            State::Authentication => self.on_auth_reply(input),
            State::ConnectReply => self.on_connect_reply(input),
        };
        if let Err(err) = &result {
            self.fail(err.clone());
        }
        result
    }

    /// The error to report when the proxy closes the stream before the
    /// handshake is done (a read of 0 bytes); marks the handshake failed.
    ///
    /// After a failure it returns that failure. After `Done` the stream is
    /// the tunnel's and an end of stream is not a handshake error: this then
    /// returns `UnexpectedEof { stage: Finished }` and changes nothing.
    pub(crate) fn eof_error(&mut self) -> SocksError {
        let err = match &self.state {
            State::Failed(err) => return err.clone(),
            State::Done(_) => {
                return SocksError::UnexpectedEof {
                    stage: SocksStage::Finished,
                }
            }
            _ => SocksError::UnexpectedEof {
                stage: self.stage(),
            },
        };
        self.fail(err.clone());
        err
    }

    /// Which step the handshake is waiting in.
    pub(crate) fn stage(&self) -> SocksStage {
        match self.state {
            State::MethodSelection => SocksStage::MethodSelection,
            State::Authentication => SocksStage::Authentication,
            State::ConnectReply => SocksStage::ConnectReply,
            State::Done(_) | State::Failed(_) => SocksStage::Finished,
        }
    }

    /// Whether the proxy accepted the CONNECT.
    #[cfg(test)]
    pub(crate) fn is_done(&self) -> bool {
        matches!(self.state, State::Done(_))
    }

    /// Step 2: `VER METHOD`.
    fn on_method_selection(&mut self, input: &[u8]) -> Result<(usize, Progress), SocksError> {
        let Some(&ver) = input.first() else {
            return Ok((0, Progress::NeedMore));
        };
        if ver != SOCKS_VERSION {
            return Err(SocksError::BadVersion { got: ver });
        }
        let Some(&method) = input.get(1) else {
            return Ok((0, Progress::NeedMore));
        };
        match method {
            METHOD_NO_AUTH => {
                // We may have offered 02 as well; the proxy is free to pick 00.
                self.auth_request = None;
                self.queue_connect();
            }
            METHOD_USER_PASS => match self.auth_request.take() {
                Some(request) => {
                    self.queue(&request);
                    self.state = State::Authentication;
                }
                None => return Err(SocksError::UnexpectedMethod { method }),
            },
            METHOD_NONE_ACCEPTABLE => return Err(SocksError::NoAcceptableMethods),
            method => return Err(SocksError::UnexpectedMethod { method }),
        }
        Ok((2, Progress::Send))
    }

    /// Step 3: `VER=01 STATUS`.
    fn on_auth_reply(&mut self, input: &[u8]) -> Result<(usize, Progress), SocksError> {
        let Some(&ver) = input.first() else {
            return Ok((0, Progress::NeedMore));
        };
        if ver != AUTH_VERSION {
            return Err(SocksError::BadAuthVersion { got: ver });
        }
        let Some(&status) = input.get(1) else {
            return Ok((0, Progress::NeedMore));
        };
        if status != 0 {
            return Err(SocksError::AuthFailed { status });
        }
        self.queue_connect();
        Ok((2, Progress::Send))
    }

    /// Step 5: `VER REP RSV ATYP BND.ADDR BND.PORT`.
    fn on_connect_reply(&mut self, input: &[u8]) -> Result<(usize, Progress), SocksError> {
        let Some(&ver) = input.first() else {
            return Ok((0, Progress::NeedMore));
        };
        if ver != SOCKS_VERSION {
            return Err(SocksError::BadVersion { got: ver });
        }
        let Some(&rep) = input.get(1) else {
            return Ok((0, Progress::NeedMore));
        };
        if rep != 0 {
            return Err(SocksError::from_reply(rep));
        }
        // input[2] is RSV, deliberately not checked.
        let Some(&atyp) = input.get(3) else {
            return Ok((0, Progress::NeedMore));
        };
        let (addr_start, addr_len) = match atyp {
            ATYP_IPV4 => (4, 4),
            ATYP_IPV6 => (4, 16),
            ATYP_DOMAIN => match input.get(4) {
                Some(&len) => (5, usize::from(len)),
                None => return Ok((0, Progress::NeedMore)),
            },
            atyp => return Err(SocksError::BadAddressType { atyp }),
        };
        let total = addr_start + addr_len + 2;
        let Some(reply) = input.get(..total) else {
            return Ok((0, Progress::NeedMore));
        };
        let addr = &reply[addr_start..addr_start + addr_len];
        let port = u16::from_be_bytes([reply[total - 2], reply[total - 1]]);
        let bound = match atyp {
            ATYP_IPV4 => {
                let octets: [u8; 4] = addr.try_into().unwrap_or_default();
                BoundAddr::Addr(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(octets),
                    port,
                )))
            }
            ATYP_IPV6 => {
                let octets: [u8; 16] = addr.try_into().unwrap_or_default();
                BoundAddr::Addr(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(octets),
                    port,
                    0,
                    0,
                )))
            }
            _ => BoundAddr::Domain {
                name: addr.to_vec(),
                port,
            },
        };
        self.state = State::Done(bound.clone());
        self.out.clear();
        self.out_pos = 0;
        Ok((total, Progress::Done { bound }))
    }

    /// Queues the CONNECT request and waits for its reply.
    fn queue_connect(&mut self) {
        let request = std::mem::take(&mut self.connect_request);
        self.queue(&request);
        self.state = State::ConnectReply;
    }

    /// Appends `bytes` after whatever is still unwritten.
    fn queue(&mut self, bytes: &[u8]) {
        self.out.drain(..self.out_pos);
        self.out_pos = 0;
        self.out.extend_from_slice(bytes);
    }

    /// Enters the failed state and drops everything queued.
    fn fail(&mut self, err: SocksError) {
        self.state = State::Failed(err);
        self.out.clear();
        self.out_pos = 0;
        self.auth_request = None;
        self.connect_request.clear();
    }
}

/// Encodes `VER=01 ULEN UNAME PLEN PASSWD` (RFC 1929).
fn encode_auth(user: &str, pass: &str) -> Result<Vec<u8>, SocksError> {
    let ulen =
        u8::try_from(user.len()).map_err(|_| SocksError::UsernameTooLong { len: user.len() })?;
    let plen =
        u8::try_from(pass.len()).map_err(|_| SocksError::PasswordTooLong { len: pass.len() })?;
    let mut request = Vec::with_capacity(3 + user.len() + pass.len());
    request.push(AUTH_VERSION);
    request.push(ulen);
    request.extend_from_slice(user.as_bytes());
    request.push(plen);
    request.extend_from_slice(pass.as_bytes());
    Ok(request)
}

/// Encodes `VER=05 CMD=01 RSV=00 ATYP DST.ADDR DST.PORT`.
fn encode_connect(target: &Target) -> Result<Vec<u8>, SocksError> {
    let mut request = vec![SOCKS_VERSION, CMD_CONNECT, 0x00];
    match target {
        Target::Addr(SocketAddr::V4(addr)) => {
            request.push(ATYP_IPV4);
            request.extend_from_slice(&addr.ip().octets());
        }
        Target::Addr(SocketAddr::V6(addr)) => {
            request.push(ATYP_IPV6);
            request.extend_from_slice(&addr.ip().octets());
        }
        Target::Domain { host, .. } => {
            if host.is_empty() {
                return Err(SocksError::EmptyDomain);
            }
            if host.len() > MAX_FIELD_LEN {
                return Err(SocksError::DomainTooLong { len: host.len() });
            }
            request.push(ATYP_DOMAIN);
            // Checked above: fits in a byte.
            request.push(host.len() as u8);
            request.extend_from_slice(host.as_bytes());
        }
    }
    request.extend_from_slice(&target.port().to_be_bytes());
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v4(a: u8, b: u8, c: u8, d: u8, port: u16) -> Target {
        Target::Addr(SocketAddr::new(IpAddr::V4(Ipv4Addr::new(a, b, c, d)), port))
    }

    fn domain(host: &str, port: u16) -> Target {
        Target::Domain {
            host: host.to_owned(),
            port,
        }
    }

    fn creds(user: &str, pass: &str) -> Option<(String, String)> {
        Some((user.to_owned(), pass.to_owned()))
    }

    /// Writes everything pending, returning it.
    fn drain(hs: &mut Socks5Handshake) -> Vec<u8> {
        let out = hs.wants_write().to_vec();
        hs.written(out.len());
        assert!(hs.wants_write().is_empty());
        out
    }

    /// A handshake with no auth, already past the greeting and method
    /// selection, waiting for the CONNECT reply.
    fn at_connect_reply(target: Target) -> Socks5Handshake {
        let mut hs = Socks5Handshake::new(target, None).unwrap();
        drain(&mut hs);
        assert_eq!(hs.received(&[5, 0]).unwrap(), (2, Progress::Send));
        drain(&mut hs);
        assert_eq!(hs.stage(), SocksStage::ConnectReply);
        hs
    }

    const IPV4_OK: [u8; 10] = [5, 0, 0, 1, 192, 0, 2, 7, 0x1f, 0x90];

    #[test]
    fn no_auth_ipv4_full_exchange() {
        let mut hs = Socks5Handshake::new(v4(93, 184, 216, 34, 443), None).unwrap();
        assert_eq!(hs.stage(), SocksStage::MethodSelection);
        assert_eq!(drain(&mut hs), [5, 1, 0]);
        assert_eq!(hs.received(&[]).unwrap(), (0, Progress::NeedMore));
        assert_eq!(hs.received(&[5]).unwrap(), (0, Progress::NeedMore));
        assert_eq!(hs.received(&[5, 0]).unwrap(), (2, Progress::Send));
        assert_eq!(drain(&mut hs), [5, 1, 0, 1, 93, 184, 216, 34, 0x01, 0xbb]);
        let mut input = IPV4_OK.to_vec();
        input.extend_from_slice(b"tunnel bytes");
        let (n, progress) = hs.received(&input).unwrap();
        assert_eq!(n, 10);
        assert_eq!(
            progress,
            Progress::Done {
                bound: BoundAddr::Addr("192.0.2.7:8080".parse().unwrap())
            }
        );
        assert_eq!(&input[n..], b"tunnel bytes");
        assert!(hs.is_done());
        assert_eq!(hs.stage(), SocksStage::Finished);
        // Idempotent once done; tunnel bytes are never consumed.
        assert_eq!(hs.received(b"more").unwrap().0, 0);
        assert!(hs.wants_write().is_empty());
    }

    #[test]
    fn user_pass_domain_full_exchange() {
        let mut hs =
            Socks5Handshake::new(domain("example.com", 80), creds("alice", "s3cret")).unwrap();
        assert_eq!(drain(&mut hs), [5, 2, 0, 2]);
        assert_eq!(hs.received(&[5, 2]).unwrap(), (2, Progress::Send));
        assert_eq!(hs.stage(), SocksStage::Authentication);
        let mut expected = vec![1, 5];
        expected.extend_from_slice(b"alice");
        expected.push(6);
        expected.extend_from_slice(b"s3cret");
        assert_eq!(drain(&mut hs), expected);
        assert_eq!(hs.received(&[1]).unwrap(), (0, Progress::NeedMore));
        assert_eq!(hs.received(&[1, 0]).unwrap(), (2, Progress::Send));
        let mut expected = vec![5, 1, 0, 3, 11];
        expected.extend_from_slice(b"example.com");
        expected.extend_from_slice(&[0, 80]);
        assert_eq!(drain(&mut hs), expected);
        let reply = [5, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            hs.received(&reply).unwrap(),
            (
                10,
                Progress::Done {
                    bound: BoundAddr::Addr("0.0.0.0:0".parse().unwrap())
                }
            )
        );
    }

    #[test]
    fn credentials_offered_but_proxy_picks_no_auth() {
        let mut hs = Socks5Handshake::new(v4(10, 0, 0, 1, 22), creds("u", "p")).unwrap();
        assert_eq!(drain(&mut hs), [5, 2, 0, 2]);
        assert_eq!(hs.received(&[5, 0]).unwrap(), (2, Progress::Send));
        assert_eq!(drain(&mut hs), [5, 1, 0, 1, 10, 0, 0, 1, 0, 22]);
        assert_eq!(hs.stage(), SocksStage::ConnectReply);
    }

    #[test]
    fn ipv6_target_encoding() {
        let target = Target::Addr("[2001:db8::1]:8443".parse().unwrap());
        let mut hs = Socks5Handshake::new(target, None).unwrap();
        drain(&mut hs);
        hs.received(&[5, 0]).unwrap();
        let mut expected = vec![5, 1, 0, 4, 0x20, 0x01, 0x0d, 0xb8];
        expected.extend_from_slice(&[0; 11]);
        expected.push(1);
        expected.extend_from_slice(&8443u16.to_be_bytes());
        assert_eq!(drain(&mut hs), expected);
    }

    #[test]
    fn reply_with_ipv6_bound() {
        let mut hs = at_connect_reply(v4(1, 2, 3, 4, 5));
        let mut reply = vec![5, 0, 0, 4];
        reply.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
        reply.extend_from_slice(&[0x04, 0x38]);
        reply.extend_from_slice(&[0xde, 0xad]);
        let (n, p) = hs.received(&reply).unwrap();
        assert_eq!(n, 22);
        assert_eq!(
            p,
            Progress::Done {
                bound: BoundAddr::Addr("[::1]:1080".parse().unwrap())
            }
        );
    }

    #[test]
    fn reply_with_domain_bound() {
        let mut hs = at_connect_reply(domain("x.test", 1));
        let mut reply = vec![5, 0, 0, 3, 9];
        reply.extend_from_slice(b"proxy.lan");
        reply.extend_from_slice(&[0x1f, 0x90, 0xff]);
        let (n, p) = hs.received(&reply).unwrap();
        assert_eq!(n, 16);
        assert_eq!(
            p,
            Progress::Done {
                bound: BoundAddr::Domain {
                    name: b"proxy.lan".to_vec(),
                    port: 8080
                }
            }
        );
    }

    #[test]
    fn reply_with_empty_and_non_utf8_domain_bound() {
        let mut hs = at_connect_reply(domain("x.test", 1));
        assert_eq!(
            hs.received(&[5, 0, 0, 3, 0, 0, 1]).unwrap(),
            (
                7,
                Progress::Done {
                    bound: BoundAddr::Domain {
                        name: vec![],
                        port: 1
                    }
                }
            )
        );
        let mut hs = at_connect_reply(domain("x.test", 1));
        let (n, p) = hs.received(&[5, 0, 0, 3, 2, 0xff, 0xfe, 0, 2]).unwrap();
        assert_eq!(n, 9);
        assert_eq!(
            p,
            Progress::Done {
                bound: BoundAddr::Domain {
                    name: vec![0xff, 0xfe],
                    port: 2
                }
            }
        );
    }

    #[test]
    fn reply_rsv_is_ignored() {
        let mut hs = at_connect_reply(v4(1, 2, 3, 4, 5));
        let mut reply = IPV4_OK;
        reply[2] = 0x7f;
        assert_eq!(hs.received(&reply).unwrap().0, 10);
    }

    /// Every strict prefix of a success reply is NeedMore with nothing
    /// consumed; the full reply is Done with exactly its length consumed.
    #[test]
    fn every_truncation_of_success_replies_needs_more() {
        let mut domain_reply = vec![5, 0, 0, 3, 255];
        domain_reply.extend(std::iter::repeat_n(b'a', 255));
        domain_reply.extend_from_slice(&[1, 2]);
        let mut v6_reply = vec![5, 0, 0, 4];
        v6_reply.extend_from_slice(&[7; 16]);
        v6_reply.extend_from_slice(&[0, 1]);
        for reply in [IPV4_OK.to_vec(), v6_reply, domain_reply] {
            for cut in 0..reply.len() {
                let mut hs = at_connect_reply(v4(1, 2, 3, 4, 5));
                assert_eq!(
                    hs.received(&reply[..cut]).unwrap(),
                    (0, Progress::NeedMore),
                    "cut at {cut} of {reply:?}"
                );
                // Still usable: the whole reply then succeeds.
                let (n, p) = hs.received(&reply).unwrap();
                assert_eq!(n, reply.len());
                assert!(matches!(p, Progress::Done { .. }));
            }
        }
    }

    #[test]
    fn every_truncation_of_method_and_auth_replies_needs_more() {
        let mut hs = Socks5Handshake::new(domain("h", 1), creds("u", "p")).unwrap();
        assert_eq!(hs.received(&[]).unwrap(), (0, Progress::NeedMore));
        assert_eq!(hs.received(&[5]).unwrap(), (0, Progress::NeedMore));
        assert_eq!(hs.received(&[5, 2]).unwrap(), (2, Progress::Send));
        assert_eq!(hs.received(&[]).unwrap(), (0, Progress::NeedMore));
        assert_eq!(hs.received(&[1]).unwrap(), (0, Progress::NeedMore));
        assert_eq!(hs.received(&[1, 0]).unwrap(), (2, Progress::Send));
    }

    #[test]
    fn every_failure_reply_is_typed() {
        let cases = [
            (1, SocksError::GeneralFailure, "general failure"),
            (
                2,
                SocksError::NotAllowed,
                "connection not allowed by ruleset",
            ),
            (3, SocksError::NetworkUnreachable, "network unreachable"),
            (4, SocksError::HostUnreachable, "host unreachable"),
            (5, SocksError::ConnectionRefused, "connection refused"),
            (6, SocksError::TtlExpired, "TTL expired"),
            (7, SocksError::CommandNotSupported, "command not supported"),
            (
                8,
                SocksError::AddressTypeNotSupported,
                "address type not supported",
            ),
        ];
        for (code, err, text) in cases {
            let mut hs = at_connect_reply(v4(1, 2, 3, 4, 5));
            let mut reply = IPV4_OK;
            reply[1] = code;
            assert_eq!(hs.received(&reply).unwrap_err(), err);
            assert!(err.to_string().contains(text), "{err}");
            assert_eq!(err.reply_code(), Some(code));
            // Reported as soon as REP is known, even from a short reply.
            let mut hs = at_connect_reply(v4(1, 2, 3, 4, 5));
            assert_eq!(hs.received(&reply[..2]).unwrap_err(), err);
            // And sticky afterwards.
            assert_eq!(hs.received(&IPV4_OK).unwrap_err(), err);
            assert_eq!(hs.eof_error(), err);
            assert!(hs.wants_write().is_empty());
        }
        for code in 9..=255u8 {
            let mut hs = at_connect_reply(v4(1, 2, 3, 4, 5));
            assert_eq!(
                hs.received(&[5, code]).unwrap_err(),
                SocksError::UnknownReply { code }
            );
        }
        assert_eq!(SocksError::NoAcceptableMethods.reply_code(), None);
    }

    #[test]
    fn failure_reply_with_bad_atyp_reports_the_failure() {
        let mut hs = at_connect_reply(v4(1, 2, 3, 4, 5));
        assert_eq!(
            hs.received(&[5, 4, 0, 9]).unwrap_err(),
            SocksError::HostUnreachable
        );
    }

    #[test]
    fn bad_address_type_in_success_reply() {
        for atyp in [0u8, 2, 5, 0xff] {
            let mut hs = at_connect_reply(v4(1, 2, 3, 4, 5));
            assert_eq!(
                hs.received(&[5, 0, 0, atyp, 0, 0, 0, 0, 0, 0]).unwrap_err(),
                SocksError::BadAddressType { atyp }
            );
        }
    }

    #[test]
    fn wrong_version_bytes() {
        let mut hs = Socks5Handshake::new(v4(1, 2, 3, 4, 5), None).unwrap();
        assert_eq!(
            hs.received(&[4]).unwrap_err(),
            SocksError::BadVersion { got: 4 }
        );
        // An HTTP proxy answering a SOCKS greeting.
        let mut hs = Socks5Handshake::new(v4(1, 2, 3, 4, 5), None).unwrap();
        assert_eq!(
            hs.received(b"HTTP/1.1 400 Bad Request\r\n").unwrap_err(),
            SocksError::BadVersion { got: b'H' }
        );
        let mut hs = at_connect_reply(v4(1, 2, 3, 4, 5));
        assert_eq!(
            hs.received(&[0, 0, 0, 1]).unwrap_err(),
            SocksError::BadVersion { got: 0 }
        );
        let mut hs = Socks5Handshake::new(v4(1, 2, 3, 4, 5), creds("u", "p")).unwrap();
        hs.received(&[5, 2]).unwrap();
        assert_eq!(
            hs.received(&[5, 0]).unwrap_err(),
            SocksError::BadAuthVersion { got: 5 }
        );
    }

    #[test]
    fn method_selection_failures() {
        let mut hs = Socks5Handshake::new(v4(1, 2, 3, 4, 5), creds("u", "p")).unwrap();
        assert_eq!(
            hs.received(&[5, 0xff]).unwrap_err(),
            SocksError::NoAcceptableMethods
        );
        assert!(hs.wants_write().is_empty(), "queued greeting dropped");
        // 02 is unexpected when we offered no credentials.
        let mut hs = Socks5Handshake::new(v4(1, 2, 3, 4, 5), None).unwrap();
        assert_eq!(
            hs.received(&[5, 2]).unwrap_err(),
            SocksError::UnexpectedMethod { method: 2 }
        );
        for method in [1u8, 3, 0x80, 0xfe] {
            let mut hs = Socks5Handshake::new(v4(1, 2, 3, 4, 5), creds("u", "p")).unwrap();
            assert_eq!(
                hs.received(&[5, method]).unwrap_err(),
                SocksError::UnexpectedMethod { method }
            );
        }
    }

    #[test]
    fn auth_rejected() {
        for status in [1u8, 2, 0xff] {
            let mut hs = Socks5Handshake::new(v4(1, 2, 3, 4, 5), creds("u", "p")).unwrap();
            hs.received(&[5, 2]).unwrap();
            assert_eq!(
                hs.received(&[1, status]).unwrap_err(),
                SocksError::AuthFailed { status }
            );
        }
    }

    #[test]
    fn length_limits_fail_before_sending() {
        let long = "x".repeat(256);
        let max = "x".repeat(255);
        assert_eq!(
            Socks5Handshake::new(v4(1, 2, 3, 4, 5), creds(&long, "p")).unwrap_err(),
            SocksError::UsernameTooLong { len: 256 }
        );
        assert_eq!(
            Socks5Handshake::new(v4(1, 2, 3, 4, 5), creds("u", &long)).unwrap_err(),
            SocksError::PasswordTooLong { len: 256 }
        );
        assert_eq!(
            Socks5Handshake::new(domain(&long, 1), None).unwrap_err(),
            SocksError::DomainTooLong { len: 256 }
        );
        assert_eq!(
            Socks5Handshake::new(domain("", 1), None).unwrap_err(),
            SocksError::EmptyDomain
        );
        // Non-ASCII length counts bytes: 128 two-byte chars = 256 bytes.
        let wide = "é".repeat(128);
        assert_eq!(
            Socks5Handshake::new(v4(1, 2, 3, 4, 5), creds(&wide, "")).unwrap_err(),
            SocksError::UsernameTooLong { len: 256 }
        );
        // Exactly 255 is fine, and so are empty credentials.
        let mut hs = Socks5Handshake::new(domain(&max, 1), creds(&max, &max)).unwrap();
        drain(&mut hs);
        hs.received(&[5, 2]).unwrap();
        let auth = drain(&mut hs);
        assert_eq!(auth.len(), 3 + 255 + 255);
        assert_eq!((auth[1], auth[257]), (255, 255));
        hs.received(&[1, 0]).unwrap();
        let connect = drain(&mut hs);
        assert_eq!(&connect[..5], &[5, 1, 0, 3, 255]);
        assert_eq!(connect.len(), 5 + 255 + 2);
        let mut hs = Socks5Handshake::new(v4(1, 2, 3, 4, 5), creds("", "")).unwrap();
        drain(&mut hs);
        hs.received(&[5, 2]).unwrap();
        assert_eq!(drain(&mut hs), [1, 0, 0]);
    }

    #[test]
    fn partial_writes() {
        let mut hs = Socks5Handshake::new(v4(1, 2, 3, 4, 5), creds("u", "p")).unwrap();
        assert_eq!(hs.wants_write(), [5, 2, 0, 2]);
        hs.written(1);
        assert_eq!(hs.wants_write(), [2, 0, 2]);
        hs.written(0);
        assert_eq!(hs.wants_write(), [2, 0, 2]);
        hs.written(100); // clamped
        assert!(hs.wants_write().is_empty());
        hs.written(5);
        assert!(hs.wants_write().is_empty());
    }

    #[test]
    fn reply_before_request_fully_written_keeps_order() {
        // A misbehaving proxy answers before our greeting is fully written:
        // the next request goes after the unwritten rest, never instead of it.
        let mut hs = Socks5Handshake::new(v4(1, 2, 3, 4, 5), None).unwrap();
        hs.written(1);
        hs.received(&[5, 0]).unwrap();
        assert_eq!(hs.wants_write(), [1, 0, 5, 1, 0, 1, 1, 2, 3, 4, 0, 5]);
    }

    #[test]
    fn pipelined_input_leaves_the_rest_unconsumed() {
        let mut hs = Socks5Handshake::new(v4(1, 2, 3, 4, 5), None).unwrap();
        let mut input = vec![5, 0];
        input.extend_from_slice(&IPV4_OK);
        input.extend_from_slice(b"GET");
        let (n, p) = hs.received(&input).unwrap();
        assert_eq!((n, p), (2, Progress::Send));
        let (m, p) = hs.received(&input[n..]).unwrap();
        assert_eq!(m, 10);
        assert!(matches!(p, Progress::Done { .. }));
        assert_eq!(&input[n + m..], b"GET");
    }

    #[test]
    fn eof_errors_name_the_stage() {
        let mut hs = Socks5Handshake::new(v4(1, 2, 3, 4, 5), creds("u", "p")).unwrap();
        assert_eq!(
            hs.eof_error(),
            SocksError::UnexpectedEof {
                stage: SocksStage::MethodSelection
            }
        );
        assert!(hs.received(&[5, 0]).is_err(), "failed after eof");
        let mut hs = Socks5Handshake::new(v4(1, 2, 3, 4, 5), creds("u", "p")).unwrap();
        hs.received(&[5, 2]).unwrap();
        assert_eq!(
            hs.eof_error().to_string(),
            "SOCKS5 proxy closed the connection during username/password authentication"
        );
        let mut hs = at_connect_reply(v4(1, 2, 3, 4, 5));
        assert_eq!(
            hs.eof_error(),
            SocksError::UnexpectedEof {
                stage: SocksStage::ConnectReply
            }
        );
        // After Done an EOF belongs to the tunnel: the handshake stays done.
        let mut hs = at_connect_reply(v4(1, 2, 3, 4, 5));
        hs.received(&IPV4_OK).unwrap();
        assert_eq!(
            hs.eof_error(),
            SocksError::UnexpectedEof {
                stage: SocksStage::Finished
            }
        );
        assert!(hs.is_done());
        assert_eq!(hs.received(&[]).unwrap().0, 0);
    }

    #[test]
    fn target_from_host() {
        assert_eq!(
            Target::from_host("[::1]", 443),
            Target::Addr("[::1]:443".parse().unwrap())
        );
        assert_eq!(
            Target::from_host("::1", 443),
            Target::Addr("[::1]:443".parse().unwrap())
        );
        assert_eq!(Target::from_host("10.1.2.3", 80), v4(10, 1, 2, 3, 80));
        assert_eq!(
            Target::from_host("example.com", 80),
            domain("example.com", 80)
        );
        assert_eq!(Target::from_host("example.com", 80).port(), 80);
        let t: Target = "127.0.0.1:9".parse::<SocketAddr>().unwrap().into();
        assert_eq!(format!("{t:?}"), "Target(127.0.0.1:9)");
    }

    #[test]
    fn debug_never_shows_the_password() {
        let hs = Socks5Handshake::new(v4(1, 2, 3, 4, 5), creds("user", "hunter2")).unwrap();
        let dbg = format!("{hs:?}");
        assert!(!dbg.contains("hunter2"), "{dbg}");
        assert!(!dbg.contains("104"), "{dbg}"); // no raw bytes either
    }

    /// The whole exchange the way an event loop sees it: the proxy's bytes
    /// arrive one at a time (all three replies plus tunnel data, as one
    /// stream), our writes go out one byte at a time, and the receive buffer
    /// is re-offered after every byte.
    #[test]
    fn byte_at_a_time_event_loop() {
        let target = domain("example.com", 443);
        let mut hs = Socks5Handshake::new(target, creds("alice", "pw")).unwrap();
        let mut from_proxy = vec![5, 2, 1, 0, 5, 0, 0, 3, 4];
        from_proxy.extend_from_slice(b"bind");
        from_proxy.extend_from_slice(&[0, 9]);
        let reply_end = from_proxy.len();
        from_proxy.extend_from_slice(b"HTTP/1.1 200 OK\r\n");

        let mut sent = Vec::new();
        let mut buf = Vec::new();
        let mut done = None;
        for &byte in &from_proxy {
            // Flush our side a byte at a time before the proxy "answers".
            while let Some(&b) = hs.wants_write().first() {
                sent.push(b);
                hs.written(1);
            }
            buf.push(byte);
            loop {
                let (n, progress) = hs.received(&buf).unwrap();
                buf.drain(..n);
                match progress {
                    Progress::NeedMore => break,
                    Progress::Send => continue,
                    Progress::Done { bound } => {
                        done.get_or_insert(bound);
                        break;
                    }
                }
            }
        }
        let mut expected = vec![5, 2, 0, 2, 1, 5];
        expected.extend_from_slice(b"alice");
        expected.push(2);
        expected.extend_from_slice(b"pw");
        expected.extend_from_slice(&[5, 1, 0, 3, 11]);
        expected.extend_from_slice(b"example.com");
        expected.extend_from_slice(&[1, 187]);
        assert_eq!(sent, expected);
        assert_eq!(
            done,
            Some(BoundAddr::Domain {
                name: b"bind".to_vec(),
                port: 9
            })
        );
        assert_eq!(buf, &from_proxy[reply_end..], "tunnel bytes untouched");
    }

    /// Drives a handshake through every state, feeding `garbage` at the
    /// state selected by `at`; it must never panic, and must either error,
    /// need more, or consume within bounds.
    fn feed_garbage(at: u8, with_auth: bool, garbage: &[u8]) {
        let auth = with_auth.then(|| ("u".to_owned(), "p".to_owned()));
        let mut hs = Socks5Handshake::new(domain("example.com", 443), auth).unwrap();
        let prefix: &[&[u8]] = match (at % 3, with_auth) {
            (0, _) => &[],
            (1, true) => &[&[5, 2]],
            (_, false) => &[&[5, 0]],
            (_, true) => &[&[5, 2], &[1, 0]],
        };
        for msg in prefix {
            hs.received(msg).unwrap();
            let pending = hs.wants_write().len();
            hs.written(pending);
        }
        let mut rest = garbage;
        for _ in 0..8 {
            match hs.received(rest) {
                Ok((n, p)) => {
                    assert!(n <= rest.len());
                    if p == Progress::NeedMore {
                        assert_eq!(n, 0);
                        break;
                    }
                    rest = &rest[n..];
                }
                Err(_) => {
                    assert!(hs.received(rest).is_err());
                    break;
                }
            }
        }
    }

    proptest! {
        #[test]
        fn garbage_never_panics(at in 0u8..3, with_auth: bool,
                                garbage in proptest::collection::vec(any::<u8>(), 0..300)) {
            feed_garbage(at, with_auth, &garbage);
        }

        #[test]
        fn chunked_reply_equals_whole_reply(
            atyp in prop_oneof![Just(1u8), Just(3u8), Just(4u8)],
            addr in proptest::collection::vec(any::<u8>(), 0..=255),
            port: u16,
            tail in proptest::collection::vec(any::<u8>(), 0..16),
            split in any::<prop::sample::Index>(),
        ) {
            let mut reply = vec![5, 0, 0, atyp];
            match atyp {
                1 => reply.extend(addr.iter().copied().chain(std::iter::repeat(0)).take(4)),
                4 => reply.extend(addr.iter().copied().chain(std::iter::repeat(0)).take(16)),
                _ => { reply.push(addr.len() as u8); reply.extend_from_slice(&addr); }
            }
            reply.extend_from_slice(&port.to_be_bytes());
            let reply_len = reply.len();
            reply.extend_from_slice(&tail);

            let mut whole = at_connect_reply(v4(1, 2, 3, 4, 5));
            let (n, done) = whole.received(&reply).unwrap();
            prop_assert_eq!(n, reply_len);
            let Progress::Done { bound } = done.clone() else { panic!("not done") };
            match &bound {
                BoundAddr::Addr(a) => prop_assert_eq!(a.port(), port),
                BoundAddr::Domain { name, port: p } => {
                    prop_assert_eq!(name, &addr);
                    prop_assert_eq!(*p, port);
                }
            }

            // Feed in two pieces, the way a caller's buffer grows.
            let cut = split.index(reply.len() + 1);
            let mut chunked = at_connect_reply(v4(1, 2, 3, 4, 5));
            let (n1, p1) = chunked.received(&reply[..cut]).unwrap();
            if cut < reply_len {
                prop_assert_eq!((n1, p1), (0, Progress::NeedMore));
                prop_assert_eq!(chunked.received(&reply).unwrap(), (reply_len, done));
            } else {
                prop_assert_eq!((n1, p1), (reply_len, done));
            }
        }
    }
}
