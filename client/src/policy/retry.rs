//! Retries inside the request deadline: which failures are retried
//! ([`Policy`]), how long to wait before each ([`Policy::backoff`]), and
//! the client-wide [`Budget`] that keeps a failing server from a retry
//! storm.
//!
//! * **What**: a failure before any response (a connect error or timeout
//!   — the origin's, or the proxy's report of one: a SOCKS5 proxy's
//!   network or host unreachable, connection refused or TTL expired, a
//!   `CONNECT` answered 502 or 504 —, a TLS or proxy handshake
//!   timeout, a reset or close before the head or before a proxy's
//!   answer — over
//!   HTTP/2 a stream reset or a `GOAWAY` with an error from the server
//!   ([`Error::Http2`]) too, or a keep-alive PING unanswered —, a read
//!   timeout before the head), and the
//!   statuses named with [`Policy::on_status`] (e.g. 503), whose
//!   `Retry-After` (seconds, or an HTTP date: counted from the response's
//!   `Date`, the server's clock, if it has one) is honoured up to
//!   [`Policy::max_retry_after`] (60 s): one that asks for longer is not
//!   waited for, the response is the outcome. Not a server
//!   that broke the protocol: an HTTP/1.1 response that does not parse
//!   ([`Error::Protocol`]), an HTTP/2 error the client ended the stream or
//!   connection with, a server that does not speak HTTP/2
//!   ([`Error::NotHttp2`], or over TLS one that negotiates no `h2` with an
//!   [`http2_only`](crate::ClientBuilder::http2_only) client:
//!   [`Error::Http2NotNegotiated`], though nothing of the request was
//!   sent); nor a reset the same request cannot cure (`ENHANCE_YOUR_CALM`,
//!   `HTTP_1_1_REQUIRED`).
//! * **Which methods**: idempotent ones (RFC 9110 §9.2.2); others only
//!   when the request provably never reached the server (it never
//!   connected, nor did its proxy, its TLS handshake was cut short — an
//!   [`Error::Connect`] — or did not finish in time, or its proxy failed
//!   before the tunnel was up:
//!   [`Error::is_unprocessed`]) or the server provably did not
//!   process it ([`Error::is_unprocessed`] too: an HTTP/2 stream refused with
//!   `REFUSED_STREAM` or above a `GOAWAY`'s last stream id — the client
//!   sends such a request again by itself once; this is what comes after),
//!   or with [`Policy::any_method`]. Only bodies held in memory, or read
//!   from a regular file ([`Upload::from_file`](crate::Upload::from_file):
//!   read again from where it began), are sent again; any other streamed
//!   body is sent once, and its error is the attempt's own (a refused one
//!   still [`is_unprocessed`](Error::is_unprocessed), for the caller to
//!   send again from a new source).
//! * **Inside the deadline**: the request deadline is the one fixed when
//!   the request was sent, for every attempt. A retry is started only if,
//!   after its backoff, at least [`Policy::min_remaining`] of that deadline
//!   is left; a backoff or a `Retry-After` that would end past it is not
//!   waited for: the last failure (or response) is the outcome.
//! * **Backoff**: exponential with jitter — before retry `n` (from 1) a
//!   delay drawn between half and all of `min(max, base · 2ⁿ⁻¹)` —, armed
//!   like the timeouts: on the loop of the connection that failed in
//!   event-loop mode, else on the wheel.
//! * **Told**: each retry to the listener
//!   ([`EventListener::on_retry`](crate::EventListener::on_retry): what
//!   the client sends again by itself, without a policy — a `417` repeated
//!   without `Expect`, a request whose pooled connection closed or
//!   answered `408` — is no retry, and not told there); a
//!   request that failed after several attempts fails with
//!   [`Error::Retried`], which lists every
//!   attempt's error.

use crate::error::{Error, Http2Initiator, Http2Reason, ProxyError, SocksError};
use http::StatusCode;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// Which failed attempts are tried again, how often and after how long.
/// See the [module documentation](self). The default retries nothing.
#[derive(Clone, Debug)]
pub struct Policy {
    attempts: u32,
    /// Shared: a policy is cloned into every request that uses it.
    statuses: Arc<[StatusCode]>,
    any_method: bool,
    base: Duration,
    max: Duration,
    jitter: bool,
    min_remaining: Duration,
    /// The longest `Retry-After` waited for.
    max_retry_after: Duration,
}

impl Default for Policy {
    /// [`Policy::none`].
    fn default() -> Policy {
        Policy::none()
    }
}

impl Policy {
    /// No retries: one attempt.
    pub fn none() -> Policy {
        Policy::attempts(1)
    }

    /// Up to `attempts` attempts in all (the first and `attempts - 1`
    /// retries; 0 counts as 1), with a backoff from 5 ms to 250 ms, jitter,
    /// at least 1 ms of the deadline left for a retry, and a `Retry-After`
    /// of at most 60 s waited for.
    pub fn attempts(attempts: u32) -> Policy {
        Policy {
            attempts: attempts.max(1),
            statuses: Arc::from([]),
            any_method: false,
            base: Duration::from_millis(5),
            max: Duration::from_millis(250),
            jitter: true,
            min_remaining: Duration::from_millis(1),
            max_retry_after: Duration::from_secs(60),
        }
    }

    /// Retries responses with these statuses too (e.g. `[503]`), after
    /// their `Retry-After` if it is longer than the backoff — and not at
    /// all if it is longer than [`max_retry_after`](Self::max_retry_after):
    /// that response is then the outcome. The last such response is the
    /// outcome once no retry is left.
    pub fn on_status(mut self, statuses: impl IntoIterator<Item = StatusCode>) -> Policy {
        self.statuses = statuses.into_iter().collect::<Vec<_>>().into();
        self
    }

    /// Retries every method, idempotent or not (the caller knows the server
    /// takes the request twice without harm).
    pub fn any_method(mut self, any: bool) -> Policy {
        self.any_method = any;
        self
    }

    /// The backoff before retry `n` (from 1): `min(max, base · 2ⁿ⁻¹)`,
    /// jittered.
    pub fn backoff(mut self, base: Duration, max: Duration) -> Policy {
        self.base = base;
        self.max = max.max(base);
        self
    }

    /// Whether the backoff is jittered (default: yes, a delay drawn between
    /// half and all of it, so that clients that failed together do not
    /// retry together). Without, it is exact.
    pub fn jitter(mut self, jitter: bool) -> Policy {
        self.jitter = jitter;
        self
    }

    /// How much of the request deadline must be left, after the backoff,
    /// for a retry to start (default 1 ms).
    pub fn min_remaining(mut self, slice: Duration) -> Policy {
        self.min_remaining = slice;
        self
    }

    /// The longest `Retry-After` a retried status is retried after
    /// (default 60 s). A response that asks for longer (`Retry-After:
    /// 86400`, or a date a year ahead) is the outcome at once, not retried:
    /// without a request timeout nothing else would bound the wait, and
    /// retrying sooner than the server asked is what it asked not to get
    /// (RFC 9110 §10.2.3) — the caller has its answer, and its
    /// `Retry-After`, to decide on. No status retry then waits longer than
    /// this or the backoff's `max`, whichever is longer.
    pub fn max_retry_after(mut self, max: Duration) -> Policy {
        self.max_retry_after = max;
        self
    }

    /// Whether the policy retries anything.
    pub(crate) fn retries(&self) -> bool {
        self.attempts > 1
    }

    pub(crate) fn max_attempts(&self) -> u32 {
        self.attempts
    }

    pub(crate) fn min_slice(&self) -> Duration {
        self.min_remaining
    }

    /// Whether `error`, the failure of an attempt before any response, may
    /// be retried for a request with `method`. (Whether its body can go
    /// again is the caller's to check: a streamed one cannot.)
    pub(crate) fn retries_error(&self, error: &Error, method: &http::Method) -> bool {
        // Never reached the server, or the server says it did not process
        // it (an HTTP/2 stream refused, or above a GOAWAY's last stream id).
        let refused = matches!(
            error,
            Error::Http2 {
                unprocessed: true,
                ..
            }
        );
        // Not a server that does not speak HTTP/2 (`Error::NotHttp2`, or
        // `Error::Http2NotNegotiated` over TLS, though the request was
        // never sent), which would answer again as it did: neither this
        // nor below.
        let never_sent = refused
            || matches!(
                error,
                Error::Connect { .. }
                    | Error::ConnectTimeout(_)
                    | Error::HandshakeTimeout(_)
                    | Error::Resolve { .. }
                    | Error::Proxy {
                        source: ProxyError::Connect(_)
                            | ProxyError::ConnectTimeout(_)
                            | ProxyError::Resolve(_),
                        ..
                    }
            )
            || proxy_could_not_connect(error);
        // A proxy's handshake timeout, close or reset before its answer,
        // as a server's before its head (a POST goes again only while
        // nothing of it can have gone past the proxy: unprocessed, below).
        // A TLS handshake timeout is above, and a handshake the server
        // closed or reset (`Error::Connect`): no byte of the request goes
        // before the handshake is done (no early data).
        // An HTTP/2 stream reset or connection ended by the server is the
        // HTTP/1.1 connection reset under another name; one the client
        // ended, the server having broken the protocol, is the HTTP/1.1
        // malformed response (`Error::Protocol`), not retried either.
        // A connection closed before the head was whole (`Truncated` in
        // the head) is the reset above with a FIN: a close before the
        // head, not a response that broke the protocol.
        let before_response = matches!(
            error,
            Error::Io { .. }
                | Error::ReadTimeout(_)
                | Error::WriteTimeout(_)
                | Error::KeepAliveTimeout(_)
                | Error::Proxy {
                    source: ProxyError::HandshakeTimeout(_)
                        | ProxyError::Io(_)
                        | ProxyError::Socks(SocksError::UnexpectedEof { .. }),
                    ..
                }
                | Error::Http2 {
                    initiator: Http2Initiator::Remote,
                    ..
                }
                | Error::Protocol {
                    source: crate::h1::DecodeError::Truncated {
                        stage: crate::h1::Stage::Head
                    },
                    ..
                }
        );
        // What sending the same request again cannot cure: two resets (the
        // server asks for calm, or for HTTP/1.1).
        let futile = matches!(
            error,
            Error::Http2 {
                reason: Http2Reason::ENHANCE_YOUR_CALM | Http2Reason::HTTP_1_1_REQUIRED,
                ..
            }
        );
        // A failure before the response that provably never reached the
        // origin (a proxy's close or stall before its tunnel was up) goes
        // again whatever the method.
        let method_allows = self.any_method || method.is_idempotent() || error.is_unprocessed();
        never_sent || (before_response && method_allows && !futile)
    }

    /// Whether a response with `status` is retried, for `method`.
    pub(crate) fn retries_status(&self, status: StatusCode, method: &http::Method) -> bool {
        self.statuses.contains(&status) && (self.any_method || method.is_idempotent())
    }

    /// The wait before retry `retry` (from 1) of a response whose
    /// `Retry-After` asked for `asked`: the backoff, or `asked` if longer;
    /// `None` (no retry) if `asked` is past
    /// [`max_retry_after`](Self::max_retry_after).
    pub(crate) fn status_delay(&self, retry: u32, asked: Option<Duration>) -> Option<Duration> {
        let asked = asked.unwrap_or_default();
        if asked > self.max_retry_after {
            return None;
        }
        Some(self.delay(retry).max(asked))
    }

    /// The backoff before retry `retry` (from 1).
    pub(crate) fn delay(&self, retry: u32) -> Duration {
        let full = self.full_delay(retry);
        if !self.jitter {
            return full;
        }
        let half = full / 2;
        half + half.mul_f64(unit_random())
    }

    /// `min(max, base · 2ⁿ⁻¹)` before retry `n`, not jittered.
    fn full_delay(&self, retry: u32) -> Duration {
        let doublings = retry.saturating_sub(1).min(30);
        self.base.saturating_mul(1 << doublings).min(self.max)
    }
}

/// A number in `[0, 1)`, from the standard library's random hasher keys
/// (no generator crate for one draw per retry).
fn unit_random() -> f64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    );
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// How long a response's `Retry-After` asks to wait (RFC 9110 §10.2.3:
/// delay-seconds or an HTTP date), if it says.
///
/// A date is a time on the server's wall clock: the wait it asks for runs
/// from the server's now, which the response's own `Date` gives (RFC 9110
/// §6.6.1: the time it was made; an origin with a clock must send it) —
/// not from the client's wall clock, which may be off from the server's by
/// minutes or years (a date "3 s after my `Date`" would be long past, or
/// hours ahead). `received`, the client's wall clock when the response
/// came, stands in for a `Date` missing or unparsed. The wait, a duration
/// from then on, is timed on the client's clock like any backoff.
pub(crate) fn retry_after(headers: &http::HeaderMap, received: SystemTime) -> Option<Duration> {
    let value = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    // delay-seconds is a run of digits alone (`u64`'s parser would also
    // take a leading `+`): one too long for a `u64` asks for longer than
    // any wait, not for none (read as absent, the response would be
    // retried after the backoff alone).
    if !value.is_empty() && value.bytes().all(|byte| byte.is_ascii_digit()) {
        let seconds = value
            .parse::<u64>()
            .map_or(Duration::MAX, Duration::from_secs);
        return Some(seconds);
    }
    let date = httpdate::parse_http_date(value).ok()?;
    let servers_now = headers
        .get(http::header::DATE)
        .and_then(|date| httpdate::parse_http_date(date.to_str().ok()?.trim()).ok())
        .unwrap_or(received);
    Some(date.duration_since(servers_now).unwrap_or(Duration::ZERO))
}

/// The retry budget of a client: retries (and hedged copies) may be at
/// most `ratio` of the requests that could be retried, over a sliding
/// `window`, plus a floor of `floor_per_second` — Finagle's and Linkerd's
/// rule, so that a failing server is not sent a storm of retries. A retry
/// the budget refuses is not made: the failure is the outcome.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    ratio: f64,
    floor_per_second: u32,
    window: Duration,
}

impl Default for Budget {
    /// 20 % of requests, a floor of 10 retries a second, over 10 s.
    fn default() -> Budget {
        Budget::new(0.2, 10, Duration::from_secs(10))
    }
}

impl Budget {
    /// At most `ratio` retries per request over `window` (at least 1 s),
    /// plus `floor_per_second` (a negative or NaN ratio counts as 0).
    pub fn new(ratio: f64, floor_per_second: u32, window: Duration) -> Budget {
        Budget {
            ratio: if ratio > 0.0 { ratio } else { 0.0 },
            floor_per_second,
            window: window.max(Duration::from_secs(1)),
        }
    }

    /// No limit.
    pub fn unlimited() -> Budget {
        Budget::new(f64::INFINITY, u32::MAX, Duration::from_secs(1))
    }
}

/// A budget's counts, in [`ClientStats`](crate::ClientStats).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BudgetStats {
    /// Requests that could be retried, in the window.
    pub requests: u64,
    /// Retries and hedged copies made, in the window.
    pub retries: u64,
    /// Retries and hedged copies made since the client started.
    pub retries_total: u64,
    /// Hedged copies made since the client started.
    pub hedges_total: u64,
    /// Retries and copies the budget refused since the client started.
    pub refused_total: u64,
}

/// How many slots the window is cut into.
const SLOTS: usize = 10;

/// A budget's state: counts per slot of the window, on the client's
/// clock.
pub(crate) struct BudgetState {
    budget: Budget,
    counts: Mutex<Counts>,
}

#[derive(Default)]
struct Counts {
    /// The first instant the budget was used at: slots count from here.
    anchor: Option<Instant>,
    /// The newest slot used: a caller that read the clock before another
    /// took the lock counts in this one, not in an older one.
    newest: u64,
    /// Per slot: the slot's number since `started`, requests, retries.
    slots: [(u64, u64, u64); SLOTS],
    retries_total: u64,
    hedges_total: u64,
    refused_total: u64,
}

impl BudgetState {
    pub(crate) fn new(budget: Budget) -> BudgetState {
        BudgetState {
            budget,
            counts: Mutex::new(Counts::default()),
        }
    }

    fn slot_of(&self, anchor: Instant, now: Instant) -> u64 {
        let slot = self.budget.window / SLOTS as u32;
        (now.saturating_duration_since(anchor).as_nanos() / slot.as_nanos().max(1)) as u64
    }

    /// `now`'s slot (made current), and the requests and retries of the
    /// whole window ending there (that slot's included).
    fn window<'a>(
        &self,
        counts: &'a mut Counts,
        now: Instant,
    ) -> (&'a mut (u64, u64, u64), u64, u64) {
        let anchor = *counts.anchor.get_or_insert(now);
        // Never back to an older slot: that would clear the newer ones,
        // and with them what they counted.
        let current = self.slot_of(anchor, now).max(counts.newest);
        counts.newest = current;
        let (mut requests, mut retries) = (0, 0);
        for slot in &mut counts.slots {
            if current - slot.0 >= SLOTS as u64 {
                *slot = (0, 0, 0);
            }
        }
        for slot in &counts.slots {
            requests += slot.1;
            retries += slot.2;
        }
        let index = (current % SLOTS as u64) as usize;
        let slot = &mut counts.slots[index];
        if slot.0 != current {
            requests -= slot.1;
            retries -= slot.2;
            *slot = (current, 0, 0);
        }
        (slot, requests, retries)
    }

    /// A request that could be retried has started.
    pub(crate) fn deposit(&self, now: Instant) {
        let mut counts = crate::sync::lock(&self.counts);
        let (slot, _, _) = self.window(&mut counts, now);
        slot.1 += 1;
    }

    /// Whether one more retry (or hedged copy, `hedge`) fits; if so it is
    /// counted.
    pub(crate) fn withdraw(&self, now: Instant, hedge: bool) -> bool {
        let mut counts = crate::sync::lock(&self.counts);
        let (slot, requests, retries) = self.window(&mut counts, now);
        if !self.allows(requests, retries) {
            counts.refused_total += 1;
            return false;
        }
        slot.2 += 1;
        counts.retries_total += 1;
        if hedge {
            counts.hedges_total += 1;
        }
        true
    }

    /// A retry refused for want of the room [`has_room`](Self::has_room)
    /// found missing earlier (the request was told done then, and stays
    /// so): counted as [`withdraw`](Self::withdraw) counts a refusal.
    pub(crate) fn refuse(&self) {
        crate::sync::lock(&self.counts).refused_total += 1;
    }

    /// Whether one more retry would fit now, told without counting it
    /// (or a refusal): what [`withdraw`](Self::withdraw) would answer.
    pub(crate) fn has_room(&self, now: Instant) -> bool {
        let mut counts = crate::sync::lock(&self.counts);
        let (_, requests, retries) = self.window(&mut counts, now);
        self.allows(requests, retries)
    }

    /// Whether a window with `requests` and `retries` takes one retry more.
    fn allows(&self, requests: u64, retries: u64) -> bool {
        let budget = self.budget;
        let floor = f64::from(budget.floor_per_second) * budget.window.as_secs_f64();
        let allowed = floor + budget.ratio * requests as f64;
        // An unlimited budget's ratio is infinite: with no request in the
        // window, ∞ · 0 is NaN — which allows too.
        allowed.is_nan() || (retries + 1) as f64 <= allowed
    }

    pub(crate) fn stats(&self, now: Instant) -> BudgetStats {
        let mut counts = crate::sync::lock(&self.counts);
        let (_, requests, retries) = self.window(&mut counts, now);
        BudgetStats {
            requests,
            retries,
            retries_total: counts.retries_total,
            hedges_total: counts.hedges_total,
            refused_total: counts.refused_total,
        }
    }
}

/// Whether `error` is a proxy's report that it could not reach the origin
/// — what a connect error is without a proxy: a SOCKS5 reply of network or
/// host unreachable, connection refused or TTL expired (RFC 1928 §6), or a
/// `CONNECT` answered 502 (Bad Gateway) or 504 (Gateway Timeout). The
/// request never left the client. Not a 503: that is the proxy's own
/// state, and may say with `Retry-After` when to come back (which the
/// error does not keep), as an origin's 503 does.
fn proxy_could_not_connect(error: &Error) -> bool {
    match error {
        Error::Proxy {
            source: ProxyError::Socks(socks),
            ..
        } => matches!(
            socks,
            SocksError::NetworkUnreachable
                | SocksError::HostUnreachable
                | SocksError::ConnectionRefused
                | SocksError::TtlExpired
        ),
        Error::Proxy {
            source: ProxyError::ConnectRefused { status, .. },
            ..
        } => matches!(status.as_u16(), 502 | 504),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io_error() -> Error {
        Error::Io {
            remote: "r".into(),
            source: std::io::ErrorKind::ConnectionReset.into(),
        }
    }

    /// A server that negotiated no `h2` with an HTTP/2-only client is
    /// futile to send again, though nothing of the request was sent — the
    /// opener's error, and the copy each request that waited for its
    /// connection fails with, whatever the method; an I/O failure of kind
    /// `Unsupported` before the response — a system call this kernel lacks
    /// (`ENOSYS`), which that error once was told apart from — is one like
    /// any other.
    #[test]
    fn a_server_without_h2_is_not_retried_though_nothing_was_sent() {
        let policy = Policy::attempts(3);
        for handshake_refused in [false, true] {
            let without_h2 = Error::Http2NotNegotiated {
                remote: "r".into(),
                handshake_refused,
                unprocessed: true,
            };
            assert!(without_h2.is_unprocessed());
            let copy = without_h2.copy_of_opening_failure().unwrap();
            for error in [&without_h2, &copy] {
                assert!(!policy.retries_error(error, &http::Method::GET));
                assert!(!Policy::attempts(3)
                    .any_method(true)
                    .retries_error(error, &http::Method::POST));
            }
        }
        let lacking = std::io::Error::from_raw_os_error(libc::ENOSYS);
        assert_eq!(lacking.kind(), std::io::ErrorKind::Unsupported);
        let io = Error::Io {
            remote: "r".into(),
            source: lacking,
        };
        assert!(policy.retries_error(&io, &http::Method::GET));
    }

    #[test]
    fn what_is_retried_depends_on_the_failure_and_the_method() {
        let policy = Policy::attempts(3);
        let refused = Error::Connect {
            remote: "r".into(),
            source: std::io::ErrorKind::ConnectionRefused.into(),
        };
        assert!(
            policy.retries_error(&refused, &http::Method::POST),
            "never sent"
        );
        assert!(policy.retries_error(&io_error(), &http::Method::GET));
        assert!(!policy.retries_error(&io_error(), &http::Method::POST));
        assert!(Policy::attempts(3)
            .any_method(true)
            .retries_error(&io_error(), &http::Method::POST));
        // A server that stopped taking the request: as one that went
        // silent, for an idempotent method.
        let stalled = Error::WriteTimeout(crate::error::Timeout {
            remote: "r".into(),
            duration: std::time::Duration::from_secs(1),
        });
        assert!(policy.retries_error(&stalled, &http::Method::PUT));
        assert!(!policy.retries_error(&stalled, &http::Method::POST));
        // An HTTP/2 connection whose keep-alive PING went unanswered: as
        // one that went silent — the server may have processed it.
        let unanswered_ping = Error::KeepAliveTimeout(crate::error::Timeout {
            remote: "r".into(),
            duration: std::time::Duration::from_secs(1),
        });
        assert!(policy.retries_error(&unanswered_ping, &http::Method::GET));
        assert!(!policy.retries_error(&unanswered_ping, &http::Method::POST));
        // A TLS handshake that did not finish: nothing of the request was
        // sent (it waits for the handshake, no early data), as a connect
        // that did not.
        let handshake_stalled = Error::HandshakeTimeout(crate::error::Timeout {
            remote: "r".into(),
            duration: std::time::Duration::from_secs(1),
        });
        assert!(policy.retries_error(&handshake_stalled, &http::Method::POST));
        // A proxy: not reached is never sent; a stalled handshake as a
        // TLS one.
        let proxy = |source| Error::Proxy {
            proxy: "http://p:1".into(),
            target: "o:80".into(),
            source,
            unprocessed: true,
        };
        let unreachable = proxy(ProxyError::Connect(
            std::io::ErrorKind::ConnectionRefused.into(),
        ));
        assert!(policy.retries_error(&unreachable, &http::Method::POST));
        let unresolved = proxy(ProxyError::Resolve(std::io::ErrorKind::NotFound.into()));
        assert!(policy.retries_error(&unresolved, &http::Method::POST));
        let unanswered = proxy(ProxyError::ConnectTimeout(crate::error::Timeout {
            remote: "o:80 via proxy http://p:1".into(),
            duration: std::time::Duration::from_secs(1),
        }));
        assert!(policy.retries_error(&unanswered, &http::Method::POST));
        let silent = proxy(ProxyError::HandshakeTimeout(crate::error::Timeout {
            remote: "o:80".into(),
            duration: std::time::Duration::from_secs(1),
        }));
        assert!(policy.retries_error(&silent, &http::Method::GET));
        // Nothing of it went past the proxy: a POST goes again too — not
        // once an earlier attempt may have been processed.
        assert!(policy.retries_error(&silent, &http::Method::POST));
        let silent = silent.with_unprocessed(false);
        assert!(!policy.retries_error(&silent, &http::Method::POST));
        // The proxy reports the origin out of reach: never sent, as a
        // connect error; not what a retry cannot change (a ruleset, a
        // status that is no gateway's failure).
        for socks in [
            SocksError::NetworkUnreachable,
            SocksError::HostUnreachable,
            SocksError::ConnectionRefused,
            SocksError::TtlExpired,
        ] {
            let error = proxy(ProxyError::Socks(socks));
            assert!(policy.retries_error(&error, &http::Method::POST), "{error}");
        }
        let not_allowed = proxy(ProxyError::Socks(SocksError::NotAllowed));
        assert!(!policy.retries_error(&not_allowed, &http::Method::GET));
        let answered = |code: u16| {
            proxy(ProxyError::ConnectRefused {
                target: "o:443".into(),
                status: http::StatusCode::from_u16(code).unwrap(),
                reason: String::new(),
            })
        };
        for code in [502, 504] {
            assert!(policy.retries_error(&answered(code), &http::Method::POST));
        }
        for code in [403, 500, 501, 503] {
            assert!(!policy.retries_error(&answered(code), &http::Method::GET));
            assert!(!policy.retries_error(&answered(code), &http::Method::POST));
        }
        assert!(!policy.retries_error(&Error::Cancelled, &http::Method::GET));
        // A server that does not speak HTTP/2 would answer again as it
        // did, though it did not process the request.
        for answer in [Some("HTTP/1.1 400 Bad Request".into()), None] {
            let not_http2 = Error::NotHttp2 {
                remote: "r".into(),
                answer,
            };
            assert!(!policy.retries_error(&not_http2, &http::Method::GET));
        }
        // Nor a request not sent for its header section past the server's
        // HTTP/2 limit: it would be again.
        let too_large = Error::HeadersTooLarge {
            remote: "r".into(),
            size: 2,
            limit: 1,
            unprocessed: true,
        };
        assert!(!policy.retries_error(&too_large, &http::Method::GET));
        // HTTP/2: a reset by the server as a connection reset; refused (not
        // processed) as never sent; ended by the client, the server having
        // broken the protocol, as a malformed HTTP/1.1 response.
        let h2 = |initiator, unprocessed| Error::Http2 {
            remote: "r".into(),
            reason: Http2Reason::INTERNAL_ERROR,
            initiator,
            connection: false,
            unprocessed,
        };
        let reset = h2(Http2Initiator::Remote, false);
        assert!(policy.retries_error(&reset, &http::Method::GET));
        assert!(!policy.retries_error(&reset, &http::Method::POST));
        assert!(Policy::attempts(3)
            .any_method(true)
            .retries_error(&reset, &http::Method::POST));
        let unprocessed = h2(Http2Initiator::Remote, true);
        assert!(policy.retries_error(&unprocessed, &http::Method::POST));
        // Asked to calm down, or for HTTP/1.1: the same request again cannot
        // cure it.
        for reason in [
            Http2Reason::ENHANCE_YOUR_CALM,
            Http2Reason::HTTP_1_1_REQUIRED,
        ] {
            let futile = Error::Http2 {
                remote: "r".into(),
                reason,
                initiator: Http2Initiator::Remote,
                connection: false,
                unprocessed: false,
            };
            assert!(!policy.retries_error(&futile, &http::Method::GET));
        }
        let broken = h2(Http2Initiator::Local, false);
        assert!(!policy.retries_error(&broken, &http::Method::GET));
        let malformed = Error::Protocol {
            remote: "r".into(),
            source: crate::h1::DecodeError::InvalidStatusLine,
        };
        assert!(!policy.retries_error(&malformed, &http::Method::GET));
        // Closed before the head was whole: a close before the head, as a
        // reset is; cut inside the body, after the head, it is not.
        let truncated = |stage| Error::Protocol {
            remote: "r".into(),
            source: crate::h1::DecodeError::Truncated { stage },
        };
        let closed = truncated(crate::h1::Stage::Head);
        assert!(policy.retries_error(&closed, &http::Method::GET));
        assert!(!policy.retries_error(&closed, &http::Method::POST));
        assert!(!policy.retries_error(&truncated(crate::h1::Stage::LengthBody), &http::Method::GET));
        assert!(!policy.retries_error(&Error::ClientClosed, &http::Method::GET));
        let status = Policy::attempts(2).on_status([StatusCode::SERVICE_UNAVAILABLE]);
        assert!(status.retries_status(StatusCode::SERVICE_UNAVAILABLE, &http::Method::GET));
        assert!(!status.retries_status(StatusCode::INTERNAL_SERVER_ERROR, &http::Method::GET));
        assert!(!status.retries_status(StatusCode::SERVICE_UNAVAILABLE, &http::Method::POST));
    }

    #[test]
    fn the_backoff_doubles_up_to_its_max_and_jitter_stays_in_the_upper_half() {
        let exact = Policy::attempts(10)
            .backoff(Duration::from_millis(10), Duration::from_millis(50))
            .jitter(false);
        let delays: Vec<u64> = (1..=5).map(|n| exact.delay(n).as_millis() as u64).collect();
        assert_eq!(delays, [10, 20, 40, 50, 50]);
        let jittered = exact.jitter(true);
        for _ in 0..200 {
            let delay = jittered.delay(2);
            assert!(delay >= Duration::from_millis(10) && delay <= Duration::from_millis(20));
        }
    }

    /// A `Retry-After` up to the policy's maximum is waited for (if longer
    /// than the backoff); one past it is no retry.
    #[test]
    fn a_retry_after_past_the_maximum_is_no_retry() {
        let policy = Policy::attempts(3)
            .backoff(Duration::from_millis(10), Duration::from_millis(10))
            .jitter(false);
        let secs = |s| Some(Duration::from_secs(s));
        assert_eq!(
            policy.status_delay(1, None),
            Some(Duration::from_millis(10))
        );
        assert_eq!(policy.status_delay(1, secs(60)), secs(60));
        assert_eq!(policy.status_delay(1, secs(61)), None);
        assert_eq!(policy.status_delay(1, secs(86_400)), None);
        let short = policy.max_retry_after(Duration::from_secs(2));
        assert_eq!(short.status_delay(1, secs(2)), secs(2));
        assert_eq!(short.status_delay(1, secs(3)), None);
        let none = short.max_retry_after(Duration::ZERO);
        assert_eq!(
            none.status_delay(1, Some(Duration::ZERO)),
            Some(Duration::from_millis(10))
        );
        assert_eq!(none.status_delay(1, secs(1)), None);
    }

    #[test]
    fn retry_after_takes_seconds_or_a_date() {
        let mut headers = http::HeaderMap::new();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        assert_eq!(retry_after(&headers, now), None);
        headers.insert("retry-after", "7".parse().unwrap());
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(7)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        headers.insert("retry-after", later.parse().unwrap());
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(30)));
        let past = httpdate::fmt_http_date(now - Duration::from_secs(30));
        headers.insert("retry-after", past.parse().unwrap());
        assert_eq!(retry_after(&headers, now), Some(Duration::ZERO));
        headers.insert("retry-after", "soon".parse().unwrap());
        assert_eq!(retry_after(&headers, now), None);
    }

    /// delay-seconds is any run of digits (RFC 9110 §10.2.3): one too long
    /// for a `u64` asks for longer than any maximum, and is no retry — not
    /// a value unread, retried after the backoff alone.
    #[test]
    fn a_retry_after_too_long_to_count_is_past_any_maximum() {
        let mut headers = http::HeaderMap::new();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        headers.insert("retry-after", "99999999999999999999999".parse().unwrap());
        let asked = retry_after(&headers, now);
        assert_eq!(asked, Some(Duration::MAX));
        let policy = Policy::attempts(3).max_retry_after(Duration::from_secs(u64::MAX));
        assert_eq!(policy.status_delay(1, asked), None);
        // Not digits alone: no delay-seconds, too long or not.
        for not_seconds in ["-7", "+7", "1.5", "7 s", "99999999999999999999999.5"] {
            headers.insert("retry-after", not_seconds.parse().unwrap());
            assert_eq!(retry_after(&headers, now), None, "{not_seconds}");
        }
    }

    /// A date counts from the response's `Date` (the server's clock), not
    /// from the client's: a server a year behind still asks for its 3 s.
    /// Without a usable `Date`, from the client's wall clock.
    #[test]
    fn a_retry_after_date_counts_from_the_responses_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        let servers_now = now - Duration::from_secs(365 * 86_400);
        let mut headers = http::HeaderMap::new();
        let date = |at| {
            httpdate::fmt_http_date(at)
                .parse::<http::HeaderValue>()
                .unwrap()
        };
        headers.insert("date", date(servers_now));
        headers.insert("retry-after", date(servers_now + Duration::from_secs(3)));
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(3)));
        headers.insert("retry-after", date(servers_now - Duration::from_secs(3)));
        assert_eq!(retry_after(&headers, now), Some(Duration::ZERO));
        // Seconds are seconds, whatever the `Date`.
        headers.insert("retry-after", "7".parse().unwrap());
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(7)));
        headers.insert("retry-after", date(now + Duration::from_secs(30)));
        headers.insert("date", "yesterday".parse().unwrap());
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(30)));
    }

    #[test]
    fn the_budget_allows_its_ratio_and_floor_then_recovers_as_the_window_slides() {
        let start = Instant::now();
        let state = BudgetState::new(Budget::new(0.5, 0, Duration::from_secs(10)));
        for _ in 0..10 {
            state.deposit(start);
        }
        let allowed = (0..10).filter(|_| state.withdraw(start, false)).count();
        assert_eq!(allowed, 5, "half of ten requests");
        let stats = state.stats(start);
        assert_eq!(
            (stats.requests, stats.retries, stats.refused_total),
            (10, 5, 5)
        );
        // Still inside the window: still spent.
        assert!(!state.withdraw(start + Duration::from_secs(9), false));
        // The window has slid past those requests and retries: nothing
        // deposited, nothing allowed (no floor), and nothing counted.
        let later = start + Duration::from_secs(11);
        assert_eq!(state.stats(later).requests, 0);
        assert!(!state.withdraw(later, false));
        state.deposit(later);
        state.deposit(later);
        assert!(state.withdraw(later, true));
        assert_eq!(state.stats(later).hedges_total, 1);
    }

    /// Two threads read the clock in turn, and the first takes the lock
    /// last: its earlier instant counts in the newest slot, and what the
    /// other counted there stays counted.
    #[test]
    fn a_caller_that_read_the_clock_earlier_does_not_clear_a_newer_slot() {
        let start = Instant::now();
        // One retry a window, in slots of 100 ms.
        let state = BudgetState::new(Budget::new(0.0, 1, Duration::from_secs(1)));
        state.deposit(start);
        assert!(state.withdraw(start + Duration::from_millis(150), false));
        assert!(
            !state.withdraw(start + Duration::from_millis(50), false),
            "a second retry in a window that allows one"
        );
        let stats = state.stats(start + Duration::from_millis(50));
        assert_eq!((stats.requests, stats.retries), (1, 1));
    }

    #[test]
    fn the_floor_allows_retries_without_requests() {
        let start = Instant::now();
        let state = BudgetState::new(Budget::new(0.0, 2, Duration::from_secs(1)));
        assert!(state.withdraw(start, false));
        assert!(state.withdraw(start, false));
        assert!(!state.withdraw(start, false));
        assert!(state.withdraw(start + Duration::from_secs(2), false));
    }

    /// `has_room` answers what `withdraw` would, without counting: an
    /// unlimited budget (whose ∞ · 0 requests is NaN) has room always.
    #[test]
    fn has_room_tells_what_withdraw_would_without_counting() {
        let start = Instant::now();
        let unlimited = BudgetState::new(Budget::unlimited());
        for _ in 0..3 {
            assert!(unlimited.has_room(start));
            assert!(unlimited.withdraw(start, false));
        }
        let state = BudgetState::new(Budget::new(0.0, 1, Duration::from_secs(1)));
        for _ in 0..3 {
            assert!(state.has_room(start));
        }
        assert!(state.withdraw(start, false));
        assert!(!state.has_room(start));
        assert_eq!(
            state.stats(start).refused_total,
            0,
            "has_room counts nothing"
        );
        assert!(!state.withdraw(start, false));
    }

    /// Two failures on two threads both see room for the one retry left
    /// (`has_room`, which grants nothing), then both ask for it: one gets
    /// it, the other is refused — `withdraw` checks and counts under one
    /// lock, so the budget is never overspent and no count is lost.
    #[test]
    fn two_failures_that_both_saw_room_spend_it_once() {
        use std::sync::Barrier;
        let start = Instant::now();
        // One retry a window: the floor alone.
        let state = BudgetState::new(Budget::new(0.0, 1, Duration::from_secs(1)));
        state.deposit(start);
        let saw_room = Barrier::new(2);
        let granted: Vec<bool> = std::thread::scope(|scope| {
            let failures: Vec<_> = (0..2)
                .map(|_| {
                    scope.spawn(|| {
                        assert!(state.has_room(start));
                        saw_room.wait();
                        state.withdraw(start, false)
                    })
                })
                .collect();
            failures.into_iter().map(|f| f.join().unwrap()).collect()
        });
        assert_eq!(granted.iter().filter(|&&g| g).count(), 1, "{granted:?}");
        let stats = state.stats(start);
        assert_eq!(
            (
                stats.requests,
                stats.retries,
                stats.retries_total,
                stats.refused_total
            ),
            (1, 1, 1, 1)
        );
    }
}
