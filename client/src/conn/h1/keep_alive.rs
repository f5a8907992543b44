//! The `Keep-Alive` response header (RFC 2068 §19.7.1; MDN's
//! "Keep-Alive"): `Keep-Alive: timeout=5, max=100`, a server announcing
//! that it closes the connection after it has been idle `timeout` seconds
//! (nginx's `keepalive_timeout` with its header parameter, Apache's
//! `KeepAliveTimeout`, many proxies), and how many more requests it takes
//! on it (`max`). A request sent on the connection about when the server
//! closes it races the close, and fails or goes again: the pool keeps the
//! connection idle a margin less than the server's timeout.
//!
//! * Parameters are `name=value`, separated by commas, in any order, names
//!   in any case, with optional whitespace around each part; a value may be
//!   quoted. Other parameters are ignored, and so is a `timeout` or `max`
//!   whose value is not a whole number of decimal digits (`-3`, `2.5`,
//!   empty, too large).
//! * `timeout=N` allows `N` − [`MARGIN`] of idle time, none for `N` ≤ 1.
//! * `max=0` (no requests left) allows none. `max=1` allows one more
//!   request: Apache announces the requests it still takes (`max=1` on the
//!   response before the last, which carries `Connection: close`); Node.js
//!   its per-connection total, and closes with `Connection: close` too. A
//!   last response is thus known by its `Connection: close`, which the
//!   decoder reads.
//! * With several values (repeated parameters, several header lines), the
//!   shortest holds.

use http::header::HeaderName;
use http::HeaderMap;
use std::time::Duration;

/// `Keep-Alive` (the `http` crate has no constant for this HTTP/1.0-era
/// header).
const KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");

/// What is taken off the server's announced timeout. The server counts
/// idle time from when it wrote its last byte, the client from when it read
/// it, and the client's next request reaches the server a one-way trip
/// after it is sent: the gap between the two clocks is a round trip plus
/// scheduling delays. A whole second covers that on any network short of a
/// satellite link, and is the header's own unit (servers truncate their
/// timeout to whole seconds, which errs the safe way). A tenth of the
/// timeout would leave 0.2 s for a 2 s timeout, less than a round trip
/// across the world; for timeouts of 10 s and more the two agree.
pub(super) const MARGIN: Duration = Duration::from_secs(1);

/// How long the connection that carried a response with `headers` may sit
/// idle in the pool, as its `Keep-Alive` header says: `None` without a
/// usable one (the client's own idle timeout alone holds), `Some(ZERO)` if
/// it must not be reused. Costs a header lookup without the header, and
/// never allocates.
pub(super) fn idle_limit(headers: &HeaderMap) -> Option<Duration> {
    let mut limit: Option<Duration> = None;
    for value in headers.get_all(KEEP_ALIVE) {
        for param in value.as_bytes().split(|&byte| byte == b',') {
            let Some(this) = param_limit(param) else {
                continue;
            };
            limit = Some(limit.map_or(this, |limit| limit.min(this)));
        }
    }
    limit
}

/// The idle time one parameter (`timeout=5`, `max=0`) allows, if it is one
/// of the two and its value a whole number.
fn param_limit(param: &[u8]) -> Option<Duration> {
    let eq = param.iter().position(|&byte| byte == b'=')?;
    let (name, value) = (param[..eq].trim_ascii(), param[eq + 1..].trim_ascii());
    let value = value
        .strip_prefix(b"\"")
        .and_then(|quoted| quoted.strip_suffix(b"\""))
        .unwrap_or(value);
    if name.eq_ignore_ascii_case(b"timeout") {
        let seconds = number(value)?;
        Some(Duration::from_secs(seconds).saturating_sub(MARGIN))
    } else if name.eq_ignore_ascii_case(b"max") {
        (number(value)? == 0).then_some(Duration::ZERO)
    } else {
        None
    }
}

/// `digits` as a number, if it is 1 to 19 decimal digits (so within
/// `u64`) and nothing else.
fn number(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        digits
            .iter()
            .fold(0, |n, &digit| n * 10 + u64::from(digit - b'0')),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn limit_of(values: &[&'static str]) -> Option<Duration> {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(KEEP_ALIVE, HeaderValue::from_static(value));
        }
        idle_limit(&headers)
    }

    const fn secs(n: u64) -> Option<Duration> {
        Some(Duration::from_secs(n))
    }

    #[test]
    fn the_timeout_less_the_margin() {
        assert_eq!(limit_of(&["timeout=5"]), secs(4));
        assert_eq!(limit_of(&["timeout=5, max=100"]), secs(4));
        assert_eq!(limit_of(&["max=100, timeout=75"]), secs(74));
        assert_eq!(limit_of(&["Timeout=5"]), secs(4));
        assert_eq!(limit_of(&["TIMEOUT = 5 ,MAX= 3"]), secs(4));
        assert_eq!(limit_of(&["timeout=\"5\""]), secs(4));
        assert_eq!(limit_of(&["timeout=0005"]), secs(4));
        assert_eq!(limit_of(&["timeout=2"]), secs(1));
    }

    #[test]
    fn no_time_or_no_requests_left_is_no_reuse() {
        assert_eq!(limit_of(&["timeout=1"]), secs(0));
        assert_eq!(limit_of(&["timeout=0"]), secs(0));
        assert_eq!(limit_of(&["max=0"]), secs(0));
        assert_eq!(limit_of(&["timeout=30, max=0"]), secs(0));
        assert_eq!(limit_of(&["max=1"]), None, "one more request");
        assert_eq!(limit_of(&["timeout=30, max=1"]), secs(29));
    }

    #[test]
    fn the_shortest_of_several_holds() {
        assert_eq!(limit_of(&["timeout=10, timeout=5"]), secs(4));
        assert_eq!(limit_of(&["timeout=5", "timeout=10"]), secs(4));
        assert_eq!(limit_of(&["timeout=5", "timeout=x"]), secs(4));
    }

    #[test]
    fn what_is_not_a_timeout_or_max_says_nothing() {
        assert_eq!(limit_of(&[]), None);
        for value in [
            "",
            ",",
            "timeout",
            "timeout=",
            "timeout=-3",
            "timeout=+3",
            "timeout=2.5",
            "timeout=5s",
            "timeout=\"5",
            "timeout=99999999999999999999",
            "timeout=0x10",
            "max=",
            "max=-1",
            "foo=1, bar",
            "time-out=5",
            "=5",
        ] {
            assert_eq!(limit_of(&[value]), None, "{value:?}");
        }
        // The largest number taken: no overflow.
        assert_eq!(
            limit_of(&["timeout=9999999999999999999"]),
            secs(9_999_999_999_999_999_998)
        );
    }
}
