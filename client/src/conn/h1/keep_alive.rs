//! The `Keep-Alive` response header (RFC 2068 §19.7.1; MDN's
//! "Keep-Alive"): `Keep-Alive: timeout=5, max=100`, a server announcing
//! that it closes the connection after it has been idle `timeout` seconds
//! (nginx's `keepalive_timeout` with its header parameter, Apache's
//! `KeepAliveTimeout`, many proxies), and how many more requests it takes
//! on it (`max`). A request sent on the connection about when the server
//! closes it races the close, and fails or goes again: the pool keeps the
//! connection idle a margin less than the server's timeout.
//!
//! * Parameters are `name=value`, in a comma-separated list (RFC 9110
//!   §5.6.1), in any order, names in any case, with optional whitespace
//!   around each part; a value may be a quoted-string (§5.6.4), inside
//!   which a comma does not end the parameter. Other parameters are
//!   ignored, and so is a `timeout` or `max` whose value is not a whole
//!   number of decimal digits (`-3`, `2.5`, empty, too large, or quoted
//!   with a backslash in it).
//! * `timeout=N` allows `N` − [`MARGIN`] of idle time, none for `N` ≤ 1.
//!   A response that says none leaves the last one's word standing.
//! * `max=N` is the number of requests the server still takes on the
//!   connection after this response (RFC 2068 §19.7.1.1; MDN: "the
//!   maximum number of requests that can be sent on this connection
//!   before closing it"), and each response says it anew. Apache counts
//!   it down — `max=100`, `max=99`, …, `max=1`, then a last response with
//!   `Connection: close` — and Node.js states its per-connection total on
//!   each response; either way the last word holds. A response that
//!   does not restate it used up one of the requests the last one allowed
//!   (it answered one of them): after `max=1` the connection carries one
//!   more request and is not reused after it, whether or not its response
//!   says `Connection: close` (a server that closes after its count
//!   without saying so would have the next request fail on a dead
//!   connection, or race the close). `max=0` allows none at once.
//! * With several values in one response (repeated parameters, several
//!   header lines), the shortest timeout and the smallest `max` hold.

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

/// What a connection's server has said, in its responses' `Keep-Alive`
/// headers, of how long the connection may sit idle and how many more
/// requests it may carry. Starts saying nothing (a new connection).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(in crate::conn) struct ServerKeepAlive {
    /// The idle time the last `timeout` said allows ([`MARGIN`] off).
    idle: Option<Duration>,
    /// The requests the connection may still carry: what the last `max`
    /// said, less one for each response since (each answered one of
    /// them). `None`: no response has said.
    requests_left: Option<u64>,
}

impl ServerKeepAlive {
    /// Takes in the headers of a final response on the connection (every
    /// one: a response without `Keep-Alive` counts a request down). Costs
    /// a header lookup without the header, and never allocates.
    pub(in crate::conn) fn heed(&mut self, headers: &HeaderMap) {
        let said = Said::of(headers);
        if said.idle.is_some() {
            self.idle = said.idle;
        }
        self.requests_left = said
            .max
            .or_else(|| self.requests_left.map(|left| left.saturating_sub(1)));
    }

    /// How long the connection may sit idle in the pool: `None` without a
    /// usable word (the client's own idle timeout alone holds),
    /// `Some(ZERO)` if it must not be reused (no time or no requests left).
    pub(in crate::conn) fn idle_limit(&self) -> Option<Duration> {
        if self.requests_left == Some(0) {
            return Some(Duration::ZERO);
        }
        self.idle
    }

    /// Whether the connection must not be reused: no idle time or no
    /// requests left (the pool would refuse it at once).
    pub(in crate::conn) fn spent(&self) -> bool {
        self.idle_limit() == Some(Duration::ZERO)
    }
}

/// What one response's `Keep-Alive` headers say.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Said {
    /// The shortest `timeout`'s idle time ([`MARGIN`] off).
    idle: Option<Duration>,
    /// The smallest `max`.
    max: Option<u64>,
}

impl Said {
    /// What the `Keep-Alive` values among `headers` say.
    fn of(headers: &HeaderMap) -> Said {
        let mut said = Said::default();
        for value in headers.get_all(KEEP_ALIVE) {
            for param in list_elements(value.as_bytes()) {
                said.take(param);
            }
        }
        said
    }

    /// Takes in one parameter (`timeout=5`, `max=0`), if it is one of the
    /// two and its value a whole number.
    fn take(&mut self, param: &[u8]) {
        let Some(eq) = param.iter().position(|&byte| byte == b'=') else {
            return;
        };
        let (name, value) = (param[..eq].trim_ascii(), param[eq + 1..].trim_ascii());
        let value = value
            .strip_prefix(b"\"")
            .and_then(|quoted| quoted.strip_suffix(b"\""))
            .unwrap_or(value);
        let Some(n) = number(value) else {
            return;
        };
        if name.eq_ignore_ascii_case(b"timeout") {
            let idle = Duration::from_secs(n).saturating_sub(MARGIN);
            self.idle = Some(self.idle.map_or(idle, |shortest| shortest.min(idle)));
        } else if name.eq_ignore_ascii_case(b"max") {
            self.max = Some(self.max.map_or(n, |smallest| smallest.min(n)));
        }
    }
}

/// The elements of a comma-separated list (RFC 9110 §5.6.1), untrimmed,
/// empty ones included: split at each comma outside a quoted-string
/// (§5.6.4), in which a backslash escapes the byte after it. An unclosed
/// quoted-string runs to the end.
fn list_elements(list: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(list);
    std::iter::from_fn(move || {
        let list = rest?;
        let end = element_end(list);
        // `None` once the last element (no comma after it) is taken.
        rest = list.get(end + 1..);
        Some(&list[..end])
    })
}

/// Where the first element of `list` ends: at its first comma outside a
/// quoted-string, else at its end.
fn element_end(list: &[u8]) -> usize {
    let (mut quoted, mut escaped) = (false, false);
    for (at, &byte) in list.iter().enumerate() {
        match byte {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b',' if !quoted => return at,
            _ => {}
        }
    }
    list.len()
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

    fn headers(values: &[&'static str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(KEEP_ALIVE, HeaderValue::from_static(value));
        }
        headers
    }

    /// The idle limit of a new connection after one response with
    /// `Keep-Alive: <values>`.
    fn limit_of(values: &[&'static str]) -> Option<Duration> {
        limits_after(&[values])[0]
    }

    /// The idle limit after each response, the `i`-th with the
    /// `Keep-Alive` values `responses[i]` (none: no such header).
    fn limits_after(responses: &[&[&'static str]]) -> Vec<Option<Duration>> {
        let mut server = ServerKeepAlive::default();
        responses
            .iter()
            .map(|values| {
                server.heed(&headers(values));
                server.idle_limit()
            })
            .collect()
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
        // The smallest max, whichever comes last.
        assert_eq!(limit_of(&["max=0, max=5"]), secs(0));
        assert_eq!(limit_of(&["max=0", "max=5"]), secs(0));
        assert_eq!(limits_after(&[&["max=1, max=5"], &[]]), [None, secs(0)]);
        assert_eq!(limits_after(&[&["max=1", "max=5"], &[]]), [None, secs(0)]);
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

    /// `max` is how many more requests the connection takes, said anew by
    /// each response; a response that does not say it used one up.
    #[test]
    fn max_counts_down_the_requests_left() {
        const NONE: &[&str] = &[];
        assert_eq!(
            limits_after(&[&["max=2"], NONE, NONE]),
            [None, None, secs(0)],
            "two more requests, then none"
        );
        assert_eq!(limits_after(&[&["max=1"], NONE]), [None, secs(0)]);
        // Restated (Node.js's total on each response), it holds anew.
        assert_eq!(
            limits_after(&[&["max=1"], &["max=1"], &["max=1"], NONE]),
            [None, None, None, secs(0)]
        );
        // Apache's count-down.
        assert_eq!(
            limits_after(&[
                &["timeout=5, max=3"],
                &["timeout=5, max=2"],
                &["timeout=5, max=1"]
            ]),
            [secs(4), secs(4), secs(4)]
        );
        // A timeout alone says nothing of the count, which goes on.
        assert_eq!(
            limits_after(&[&["timeout=30, max=1"], &["timeout=10"]]),
            [secs(29), secs(0)]
        );
        // Nor does a malformed max.
        assert_eq!(limits_after(&[&["max=1"], &["max=x"]]), [None, secs(0)]);
        // Without any max, no count.
        assert_eq!(limits_after(&[NONE, NONE, NONE]), [None, None, None]);
    }

    /// A timeout said once stands until a response says another.
    #[test]
    fn the_last_timeout_said_stands() {
        assert_eq!(
            limits_after(&[&["timeout=5"], &[], &["timeout=10"], &["max=5"]]),
            [secs(4), secs(4), secs(9), secs(9)]
        );
    }

    /// A quoted-string's commas (and escaped quotes) are inside its value,
    /// not between parameters.
    #[test]
    fn commas_inside_a_quoted_value_do_not_split_it() {
        assert_eq!(limit_of(&["foo=\"a,timeout=1\", timeout=30"]), secs(29));
        assert_eq!(limit_of(&["foo=\"a, timeout=1, b\", timeout=30"]), secs(29));
        assert_eq!(limit_of(&["foo=\"a,max=0,b\""]), None);
        assert_eq!(limit_of(&["foo=\"a\\\",max=0\", max=3"]), None);
        assert_eq!(
            limit_of(&["foo=\"a\\\\\", max=0"]),
            secs(0),
            "an escaped backslash does not escape the quote after it"
        );
        assert_eq!(limit_of(&["timeout=30, foo=\"x,y\", max=0"]), secs(0));
        // An unclosed quoted-string runs to the end.
        assert_eq!(limit_of(&["foo=\"a, timeout=1"]), None);
        assert_eq!(limit_of(&["timeout=5,,, foo=\"\""]), secs(4));
    }
}
