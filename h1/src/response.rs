//! Response heads: parsing with httparse, and the framing decision.

use bytes::Bytes;
use http::header::{CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Version};

use super::body::BodyKind;
use super::error::DecodeError;
use super::limits::Limits;

/// A decoded response head (status line and headers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    /// The status code: 1xx only in [`Decoded::Interim`](crate::Decoded::Interim).
    pub status: StatusCode,
    /// `HTTP_10` or `HTTP_11`.
    pub version: Version,
    /// The header fields, in order.
    pub headers: HeaderMap,
    /// The reason phrase as the server sent it, byte for byte (obs-text,
    /// 0x80-0xFF, included; maybe empty), when it is not the status's
    /// canonical one ([`StatusCode::canonical_reason`]); `None` when it is.
    /// Kept only then, so that the common response costs no copy of it.
    pub reason: Option<Bytes>,
}

/// Room for the header fields of `window`: `max_headers` of them, or as
/// many as its bytes can hold (a field line is at least `a:` and a bare
/// LF, which httparse takes) when that is fewer — so a huge limit
/// allocates nothing huge, and a window with more fields than the limit
/// still reads as too many.
fn header_slots(window: &[u8], limits: &Limits) -> usize {
    let fit = window.len() / 3 + 1;
    limits.max_headers.min(fit)
}

/// Field slots kept on the stack: a head with no more fields than this
/// (most have a dozen) is parsed without allocating them.
const STACK_SLOTS: usize = 32;

/// Runs `parse` with room for `slots` fields: first with at most
/// [`STACK_SLOTS`] on the stack, and only if those were too few, again
/// with all `slots` on the heap.
fn with_slots<'b, R>(
    slots: usize,
    mut parse: impl FnMut(&mut [httparse::Header<'b>]) -> Result<R, DecodeError>,
) -> Result<R, DecodeError> {
    let mut on_stack: [httparse::Header<'b>; STACK_SLOTS] = [httparse::EMPTY_HEADER; STACK_SLOTS];
    match parse(&mut on_stack[..slots.min(STACK_SLOTS)]) {
        Err(DecodeError::TooManyHeaders { .. }) if slots > STACK_SLOTS => {
            parse(&mut vec![httparse::EMPTY_HEADER; slots])
        }
        parsed => parsed,
    }
}

/// How much of a head (or trailer section) in progress was parsed and
/// found incomplete, so that bytes trickling in are not all parsed again
/// from the start each time: that is quadratic — a 60 KiB head sent a byte
/// at a time took half a second of the loop's CPU.
///
/// Parsing the longer input again can change its outcome only if
/// - the new bytes end a line (hold a `\n`): that may complete the section,
///   or a malformed line, which [`classify`] mostly reports only once it is
///   whole;
/// - a line began with them (what was seen ended with `\n`): httparse might
///   find a field one too many on its first byte (today it waits for the
///   line's end, but nothing promises that);
/// - the input reached its limit, where an unfinished line is judged too;
/// - the status line's first bytes rule out `HTTP/`, which [`classify`]
///   reports before the line is whole.
///
/// Otherwise it is incomplete again, whatever the new bytes are, and is not
/// parsed. Nor is a head of which nothing but empty lines has come (or a
/// CR after them): httparse skips those before the status line — from the
/// start, on every call.
///
/// This rests on the decoder's contract that each call's input is the
/// unconsumed tail of the last one plus new bytes; an input shorter than
/// what was seen breaks it and is scanned afresh.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Scanned {
    /// Bytes of the input found incomplete.
    seen: usize,
    /// Bytes of empty lines (CRLF or LF) at the start of a head's input.
    blank: usize,
}

/// Which section [`Scanned`] follows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    /// A response head: empty lines before it are skipped.
    Head,
    /// A trailer section: an empty line ends it.
    Trailers,
}

impl Scanned {
    /// Whether parsing `input` again could end otherwise than incomplete.
    fn worth_parsing(&mut self, input: &[u8], limit: usize, section: Section) -> bool {
        if input.len() < self.seen {
            *self = Scanned::default();
        }
        if input.len() >= limit {
            return true;
        }
        if section == Section::Head {
            self.blank = skip_empty_lines(input, self.blank);
            let line = &input[self.blank..];
            if matches!(line, b"" | b"\r") {
                return false;
            }
            // First bytes that rule out `HTTP/` fail the line before it
            // ends (see `classify`).
            if !may_begin_status_line(line) {
                return true;
            }
        }
        let seen = self.seen;
        seen == 0 || input[seen - 1] == b'\n' || input[seen..].contains(&b'\n')
    }

    /// Parses `input` with `parse` unless that could not end otherwise than
    /// incomplete (`Ok(None)`); remembers how much was found incomplete.
    fn parse<T>(
        &mut self,
        input: &[u8],
        limit: usize,
        section: Section,
        parse: impl FnOnce() -> Result<Option<T>, DecodeError>,
    ) -> Result<Option<T>, DecodeError> {
        let parsed = if self.worth_parsing(input, limit, section) {
            #[cfg(test)]
            counts::add(&counts::PARSES);
            parse()?
        } else {
            None
        };
        if parsed.is_none() {
            self.seen = input.len();
        } else {
            *self = Scanned::default();
        }
        Ok(parsed)
    }
}

/// The end of the empty lines (CRLF or LF) at the start of `input`, going
/// on from `from`, the end of some of them.
fn skip_empty_lines(input: &[u8], mut from: usize) -> usize {
    loop {
        match &input[from..] {
            [b'\n', ..] => from += 1,
            [b'\r', b'\n', ..] => from += 2,
            _ => return from,
        }
    }
}

/// Parses one response head at the start of `input`; `scanned` is what of
/// it earlier calls found incomplete. `Ok(None)`: not complete yet;
/// `Ok(Some((n, head)))`: a head of `n` bytes.
pub(crate) fn parse_head(
    input: &[u8],
    limits: &Limits,
    scanned: &mut Scanned,
) -> Result<Option<(usize, ResponseHead)>, DecodeError> {
    scanned.parse(input, limits.max_head_bytes, Section::Head, || {
        // Parse at most `max_head_bytes`: bounds the work and the buffering.
        let window = &input[..input.len().min(limits.max_head_bytes)];
        with_slots(header_slots(window, limits), |slots| {
            parse_head_in(input, window, slots, limits)
        })
    })
}

fn parse_head_in<'b>(
    input: &[u8],
    window: &'b [u8],
    slots: &mut [httparse::Header<'b>],
    limits: &Limits,
) -> Result<Option<(usize, ResponseHead)>, DecodeError> {
    // httparse's default configuration, which `to_header_map`'s
    // unchecked values rely on: no obs-fold (a CR LF inside a value).
    let mut res = httparse::Response::new(slots);
    match res.parse(window) {
        Ok(httparse::Status::Partial) => {
            if input.len() > limits.max_head_bytes {
                Err(DecodeError::HeadTooLarge {
                    limit: limits.max_head_bytes,
                })
            } else {
                Ok(None)
            }
        }
        Ok(httparse::Status::Complete(n)) => {
            let version = match res.version {
                Some(0) => Version::HTTP_10,
                Some(1) => Version::HTTP_11,
                _ => return Err(DecodeError::BadVersion),
            };
            let status = res
                .code
                .and_then(|c| StatusCode::from_u16(c).ok())
                .ok_or(DecodeError::InvalidStatusCode)?;
            let headers = to_header_map(window, res.headers)?;
            let canonical = status.canonical_reason();
            let reason = match res.reason {
                // The common answer: told from httparse's reason alone.
                Some(sent) if !sent.is_empty() && Some(sent) == canonical => None,
                Some(sent) if !sent.is_empty() => Some(Bytes::copy_from_slice(sent.as_bytes())),
                // httparse gives a reason with obs-text as "" (and none
                // as ""): the bytes are taken from the status line itself.
                _ => {
                    let sent = reason_phrase(window);
                    (Some(sent) != canonical.map(str::as_bytes))
                        .then(|| Bytes::copy_from_slice(sent))
                }
            };
            Ok(Some((
                n,
                ResponseHead {
                    status,
                    version,
                    headers,
                    reason,
                },
            )))
        }
        Err(httparse::Error::TooManyHeaders) => Err(DecodeError::TooManyHeaders {
            limit: limits.max_headers,
        }),
        // Classify only once the offending line is complete (or the window is
        // full, or a status line's first bytes rule out `HTTP/`): the error
        // must not depend on how the input was split.
        Err(e) => match classify(window, true, e, input.len() >= limits.max_head_bytes) {
            Some(e) => Err(e),
            None => Ok(None),
        },
    }
}

/// Parses a trailer section (header lines up to and including the empty
/// line) at the start of `input`; `scanned` is what of it earlier calls
/// found incomplete. `Ok(None)`: not complete yet.
pub(crate) fn parse_trailers(
    input: &[u8],
    limits: &Limits,
    scanned: &mut Scanned,
) -> Result<Option<(usize, HeaderMap)>, DecodeError> {
    scanned.parse(input, limits.max_trailer_bytes, Section::Trailers, || {
        parse_trailers_in(input, limits)
    })
}

fn parse_trailers_in(
    input: &[u8],
    limits: &Limits,
) -> Result<Option<(usize, HeaderMap)>, DecodeError> {
    let window = &input[..input.len().min(limits.max_trailer_bytes)];
    with_slots(
        header_slots(window, limits),
        // The default configuration, as for a head (see `to_header_map`).
        |slots| match httparse::parse_headers(window, slots) {
            Ok(httparse::Status::Partial) if input.len() > limits.max_trailer_bytes => {
                Err(DecodeError::TrailersTooLarge {
                    limit: limits.max_trailer_bytes,
                })
            }
            Ok(httparse::Status::Partial) => Ok(None),
            Ok(httparse::Status::Complete((n, fields))) => {
                Ok(Some((n, to_header_map(window, fields)?)))
            }
            Err(httparse::Error::TooManyHeaders) => Err(DecodeError::TooManyHeaders {
                limit: limits.max_headers,
            }),
            Err(e) => match classify(window, false, e, input.len() >= limits.max_trailer_bytes) {
                Some(e) => Err(e),
                None => Ok(None),
            },
        },
    )
}

/// The fields httparse found in `window` as a map. The values share one
/// copy of the bytes they span (one allocation for a head's values, not
/// one each, as hyper's decoder does with its read buffer).
///
/// A value httparse found is not validated again: httparse, with the
/// default configuration both callers parse with (no obs-fold, so no CR or
/// LF inside a value), takes in a value only HTAB, SP, 0x21-0x7E and
/// 0x80-0xFF — the bytes [`HeaderValue`] takes. Checking them again cost
/// some 800 instructions a response.
#[allow(unsafe_code)]
fn to_header_map(window: &[u8], fields: &[httparse::Header<'_>]) -> Result<HeaderMap, DecodeError> {
    let mut map = HeaderMap::with_capacity(fields.len());
    // Where a value lies in `window`, if it is a slice of it (httparse's
    // values are).
    let base = window.as_ptr() as usize;
    let span = |value: &[u8]| {
        let start = (value.as_ptr() as usize).checked_sub(base)?;
        let end = start.checked_add(value.len())?;
        (end <= window.len()).then_some(start..end)
    };
    let covered = fields
        .iter()
        .filter_map(|h| span(h.value))
        .reduce(|all, one| all.start.min(one.start)..all.end.max(one.end));
    let (start, values) = match covered {
        Some(all) => (all.start, Bytes::copy_from_slice(&window[all])),
        None => (0, Bytes::new()),
    };
    let mut known = KnownNames::take();
    for (i, h) in fields.iter().enumerate() {
        let name = known.name(i, h.name)?;
        let value = match span(h.value) {
            // SAFETY: the bytes are a value httparse took (see above), each
            // one HeaderValue takes; the test
            // `every_value_byte_httparse_takes_is_one_header_value_takes`
            // checks this of every byte at every offset (httparse checks
            // long runs with SIMD). Debug builds check it again (`http`
            // validates an unchecked value under `debug_assertions`).
            Some(r) => Ok(unsafe {
                HeaderValue::from_maybe_shared_unchecked(
                    values.slice(r.start - start..r.end - start),
                )
            }),
            None => HeaderValue::from_bytes(h.value),
        }
        .map_err(|_| DecodeError::InvalidHeaderValue)?;
        map.append(name, value);
    }
    known.put_back();
    Ok(map)
}

/// Most names kept by [`KnownNames`]: a head's usual fields, and a bound
/// on what a thread keeps.
const KNOWN_NAMES: usize = 32;

/// The longest name [`KnownNames`] keeps (a thread keeps at most
/// [`KNOWN_NAMES`] of them): a server's usual names are far shorter.
const KNOWN_NAME_BYTES: usize = 64;

/// A field's name as a server sent it, the [`HeaderName`] made of it, and
/// how many sections in a row sent another name at its position.
type KnownName = (Box<str>, HeaderName, u8);

thread_local! {
    /// The names of the fields this thread parsed, by position (see
    /// [`KnownNames`]).
    static LAST_NAMES: std::cell::Cell<Vec<KnownName>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The names of the fields a thread parsed, by position, as sent and as
/// made: a server sends the same fields, spelt the same, in the same order
/// in answer after answer. A name sent as the one kept at its position,
/// byte for byte, is that [`HeaderName`], copied — not made again with
/// [`HeaderName::from_bytes`], which lowers and matches every byte (some
/// 120 instructions a name, a response's names some 950), and allocates
/// a name it does not know. (Comparing them but for case cost more than
/// it saved.)
///
/// A loop's thread reads the heads of many servers, and a section's
/// trailers after its head: a kept name gives way only to another sent at
/// its position in two sections in a row, so that one server's heads
/// between another's, or a response's trailers, cost a comparison a name
/// and leave the names kept.
struct KnownNames {
    names: Vec<KnownName>,
}

impl KnownNames {
    /// This thread's names, taken for one section (and put back after it;
    /// a section that fails leaves none). None on a thread whose
    /// thread-locals have gone (a decoder driven from a destructor as the
    /// thread exits).
    fn take() -> KnownNames {
        KnownNames {
            names: LAST_NAMES
                .try_with(std::cell::Cell::take)
                .unwrap_or_default(),
        }
    }

    /// The name of field `i`, `sent` as the server sent it.
    fn name(&mut self, i: usize, sent: &str) -> Result<HeaderName, DecodeError> {
        if let Some((known, name, misses)) = self.names.get_mut(i) {
            if **known == *sent {
                #[cfg(test)]
                counts::add(&counts::KNOWN_NAMES);
                *misses = 0;
                return Ok(name.clone());
            }
        }
        let name =
            HeaderName::from_bytes(sent.as_bytes()).map_err(|_| DecodeError::InvalidHeaderName)?;
        if sent.len() > KNOWN_NAME_BYTES {
            return Ok(name);
        }
        if let Some(slot) = self.names.get_mut(i) {
            match slot.2 {
                0 => slot.2 = 1,
                _ => *slot = (Box::from(sent), name.clone(), 0),
            }
        } else if i == self.names.len() && i < KNOWN_NAMES {
            self.names.push((Box::from(sent), name.clone(), 0));
        }
        Ok(name)
    }

    /// Keeps the names for the thread's next section.
    fn put_back(self) {
        let _ = LAST_NAMES.try_with(|names| names.set(self.names));
    }
}

/// httparse says only what kind of thing failed; find the offending line and
/// say precisely what is wrong with it. `None`: the offending line is not
/// complete yet and `input` can still grow (`!full`), so what is wrong with it
/// (say, a missing colon or a bad name byte) depends on bytes still to come.
fn classify(
    input: &[u8],
    has_status_line: bool,
    fallback: httparse::Error,
    full: bool,
) -> Option<DecodeError> {
    let mut rest = input;
    if has_status_line {
        // httparse skips empty lines before the status line.
        while let Some(r) = rest
            .strip_prefix(b"\r\n")
            .or_else(|| rest.strip_prefix(b"\n"))
        {
            rest = r;
        }
        let (line, complete, r) = split_line(rest);
        if !complete && !full {
            // Unended, it fails now if its first bytes already rule out
            // `HTTP/`: however it ends, it is an invalid status line
            // (`check_status_line`). A server speaking something else
            // (HTTP/2's SETTINGS frame) may never send a line end.
            return (!may_begin_status_line(line)).then_some(DecodeError::InvalidStatusLine);
        }
        if let Some(e) = check_status_line(line) {
            return Some(e);
        }
        rest = r;
    }
    let mut first = true;
    loop {
        let (line, complete, r) = split_line(rest);
        if line.is_empty() && complete {
            break;
        }
        if !complete && !full {
            return None;
        }
        if let Some(e) = check_field_line(line, complete, first) {
            return Some(e);
        }
        if !complete {
            break;
        }
        first = false;
        rest = r;
    }
    Some(match fallback {
        httparse::Error::HeaderName => DecodeError::InvalidHeaderName,
        httparse::Error::HeaderValue | httparse::Error::NewLine => DecodeError::InvalidHeaderValue,
        httparse::Error::Status => DecodeError::InvalidStatusCode,
        httparse::Error::Version => DecodeError::BadVersion,
        _ => DecodeError::InvalidStatusLine,
    })
}

/// The reason phrase of the status line at the start of `head`, byte for
/// byte (maybe empty), for a response head `httparse` has found complete
/// and valid (after the empty lines it skips, which are skipped here too):
/// `HTTP/1.x SP 3DIGIT`, 12 bytes, then nothing, or a SP and the reason up
/// to the line's end (CR LF or a bare LF).
///
/// `httparse` gives a reason that holds obs-text (bytes 0x80-0xFF) as
/// empty; this takes it from the line itself, as [`ResponseHead::reason`]
/// is. For other bytes it returns what follows the first line's 13th
/// byte, or nothing: it slices with `get` and never panics.
///
/// ```
/// let head = b"HTTP/1.1 403 Interdit \xe9\r\nContent-Length: 0\r\n\r\n";
/// assert_eq!(tickless_h1::reason_phrase(head), b"Interdit \xe9");
/// assert_eq!(tickless_h1::reason_phrase(b"\r\nHTTP/1.0 204\r\n\r\n"), b"");
/// ```
pub fn reason_phrase(head: &[u8]) -> &[u8] {
    let start = skip_empty_lines(head, 0);
    let (line, _, _) = split_line(head.get(start..).unwrap_or_default());
    line.get(13..).unwrap_or_default()
}

/// Splits off one line: (line without CR LF, whether a LF ended it, rest).
fn split_line(input: &[u8]) -> (&[u8], bool, &[u8]) {
    match input.iter().position(|&b| b == b'\n') {
        Some(i) => {
            let line = &input[..i];
            (
                line.strip_suffix(b"\r").unwrap_or(line),
                true,
                &input[i + 1..],
            )
        }
        None => (input, false, &[]),
    }
}

/// Whether `line`, the start of a status line (what follows it is not
/// looked at), may still begin with `HTTP/` — or be the CR of an empty
/// line httparse skips.
fn may_begin_status_line(line: &[u8]) -> bool {
    let start = line.len().min(STATUS_LINE_START.len());
    line == b"\r" || line[..start] == STATUS_LINE_START[..start]
}

/// What every status line begins with.
const STATUS_LINE_START: &[u8] = b"HTTP/";

fn check_status_line(line: &[u8]) -> Option<DecodeError> {
    let Some(after) = line.strip_prefix(STATUS_LINE_START) else {
        return Some(DecodeError::InvalidStatusLine);
    };
    let (version, after) = match after.iter().position(|&b| b == b' ') {
        Some(i) => (&after[..i], &after[i + 1..]),
        None => (after, &[][..]),
    };
    if version != b"1.0" && version != b"1.1" {
        return Some(DecodeError::BadVersion);
    }
    let code_len = after.iter().position(|&b| b == b' ').unwrap_or(after.len());
    let code = &after[..code_len];
    if code.is_empty() && after.is_empty() && !line.ends_with(b" ") {
        return Some(DecodeError::InvalidStatusLine); // no status code at all
    }
    if code.len() != 3 || !code.iter().all(u8::is_ascii_digit) {
        return Some(DecodeError::InvalidStatusCode);
    }
    let reason = &after[code_len..];
    if reason
        .iter()
        .any(|&b| b != b'\t' && (b < 0x20 || b == 0x7f))
    {
        return Some(DecodeError::InvalidStatusLine);
    }
    None
}

fn check_field_line(line: &[u8], complete: bool, first: bool) -> Option<DecodeError> {
    if line.first().is_some_and(|&b| b == b' ' || b == b'\t') {
        return Some(if first {
            DecodeError::InvalidHeaderName
        } else {
            DecodeError::ObsFold
        });
    }
    let Some(colon) = line.iter().position(|&b| b == b':') else {
        if complete {
            return Some(DecodeError::HeaderWithoutColon);
        }
        // An unfinished line: httparse stopped at a byte that cannot be in a name.
        return (!line.iter().all(|&b| is_tchar(b))).then_some(DecodeError::InvalidHeaderName);
    };
    let name = &line[..colon];
    if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
        return Some(DecodeError::InvalidHeaderName);
    }
    let value = &line[colon + 1..];
    if value.iter().any(|&b| b != b'\t' && (b < 0x20 || b == 0x7f)) {
        return Some(DecodeError::InvalidHeaderValue);
    }
    None
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// How the body of a response is framed, and whether the connection can be
/// reused after it.
pub(crate) fn framing(
    head: &ResponseHead,
    is_head: bool,
    request_keep_alive: bool,
) -> Result<(BodyKind, bool), DecodeError> {
    let headers = &head.headers;
    let FramingFields {
        content_length,
        has_te,
        close,
        keep_alive_token,
    } = FramingFields::of(headers);

    // An HTTP/1.0 message with `Transfer-Encoding` (unknown to 1.0) was
    // likely forwarded by something that did not undo it: its framing
    // cannot be trusted to end where the next response begins, so the
    // connection closes after it, `keep-alive` or not (RFC 9112 §6.1).
    let te_in_http10 = has_te && head.version == Version::HTTP_10;
    let mut keep_alive = request_keep_alive
        && !close
        && !te_in_http10
        && (head.version == Version::HTTP_11 || keep_alive_token);

    let bodiless = is_head
        || head.status.is_informational()
        || head.status == StatusCode::NO_CONTENT
        || head.status == StatusCode::NOT_MODIFIED;
    if bodiless {
        // No body, whatever the framing fields say (RFC 9112 §6.3 rule 1,
        // which comes before the rules that read them): the head's empty
        // line ends the response, so fields that could frame no body — a
        // `Content-Length` that is not a number, differing ones, one
        // beside `Transfer-Encoding` — do not fail it, as they do not in
        // curl or hyper. Unlike them, the connection is then not reused:
        // such fields come from a broken sender, or from a chain of
        // proxies that disagree on framing, and one of them may have
        // taken a length as a body it forwards after this head — bytes a
        // reused connection would read as the next request's response.
        // Closing costs one connection per such (rare) response.
        let framing_sound = match content_length {
            Ok(None) => true,
            Ok(Some(_)) => !has_te,
            Err(_) => false,
        };
        return Ok((BodyKind::Length(0), keep_alive && framing_sound));
    }
    // A body follows: its framing must be unambiguous, or the response
    // would end where one reader (a proxy, this client) says and not
    // where another does — the stuff of request smuggling.
    let content_length = content_length?;
    if has_te && content_length.is_some() {
        return Err(DecodeError::ContentLengthWithTransferEncoding);
    }
    let kind = if has_te {
        let kind = transfer_framing(headers)?;
        if kind == BodyKind::Eof {
            keep_alive = false;
        }
        kind
    } else if let Some(n) = content_length {
        // A length over `max_body_bytes` fails the body, not the head (see
        // `BodyDecoder`): the head is the response's, and what a redirect
        // or a caller acts on.
        BodyKind::Length(n)
    } else {
        keep_alive = false;
        BodyKind::Eof
    };
    Ok((kind, keep_alive))
}

/// What the framing decision reads of a head's fields, read in one pass
/// over them: three lookups by name (`Content-Length`,
/// `Transfer-Encoding`, `Connection`) cost more than a pass over a
/// response's dozen fields — some 350 instructions a response.
#[derive(Debug, PartialEq, Eq)]
struct FramingFields {
    /// What [`content_length`] says.
    content_length: Result<Option<u64>, DecodeError>,
    /// Whether there is a `Transfer-Encoding` field.
    has_te: bool,
    /// Whether a `Connection` field lists `close`
    /// ([`has_connection_token`]).
    close: bool,
    /// Whether a `Connection` field lists `keep-alive`.
    keep_alive_token: bool,
}

impl FramingFields {
    fn of(headers: &HeaderMap) -> FramingFields {
        let mut fields = FramingFields {
            content_length: Ok(None),
            has_te: false,
            close: false,
            keep_alive_token: false,
        };
        // A map yields a name's values together, in the order they came,
        // as `get_all` does: the lengths are read in `content_length`'s
        // order, and its first error is the one kept.
        for (name, value) in headers {
            if name == CONTENT_LENGTH {
                if let Ok(found) = fields.content_length {
                    fields.content_length = take_length(found, value);
                }
            } else if name == TRANSFER_ENCODING {
                fields.has_te = true;
            } else if name == CONNECTION {
                fields.close |= lists_token(value, b"close");
                fields.keep_alive_token |= lists_token(value, b"keep-alive");
            }
        }
        fields
    }
}

/// The single `Content-Length` value of `headers`, if any: the length
/// [`ResponseDecoder`](crate::ResponseDecoder) frames a body by when there
/// is no `Transfer-Encoding`. Repeated identical values (in several fields
/// or a comma list) are one value (RFC 9112 §6.3); differing ones, or one
/// that is not a number, are an error.
pub fn content_length(headers: &HeaderMap) -> Result<Option<u64>, DecodeError> {
    let mut found: Option<u64> = None;
    for value in headers.get_all(CONTENT_LENGTH) {
        found = take_length(found, value)?;
    }
    Ok(found)
}

/// The length `found` in the `Content-Length` values before `value`, with
/// `value`'s (see [`content_length`]).
fn take_length(mut found: Option<u64>, value: &HeaderValue) -> Result<Option<u64>, DecodeError> {
    for item in value.as_bytes().split(|&b| b == b',') {
        let item = item.trim_ascii();
        if item.is_empty() || !item.iter().all(u8::is_ascii_digit) {
            return Err(DecodeError::InvalidContentLength);
        }
        let n = item.iter().try_fold(0u64, |acc, &d| {
            acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        });
        let n = n.ok_or(DecodeError::InvalidContentLength)?;
        match found {
            Some(first) if first != n => {
                return Err(DecodeError::ConflictingContentLength { first, second: n })
            }
            _ => found = Some(n),
        }
    }
    Ok(found)
}

/// How `Transfer-Encoding` frames a body (RFC 9112 §6.3, rules 4 and 7):
/// `chunked` alone is chunked; codings that do not end in `chunked` leave
/// the body to run until the server closes. Codings that end in `chunked`
/// after others (`gzip, chunked`) would have to be undone to read the body:
/// refused, as is `chunked` applied twice, or with parameters
/// (`chunked;x=1`: it defines none, and RFC 9112 §7.1 has their presence
/// treated as an error) — taken as a coding other than `chunked`, such a
/// field would frame the body by the close and hand out the chunk framing
/// as body bytes. So is a coding whose name is not a token (RFC 9112
/// §7: `"chunked"` quoted, `chun ked`): it names no coding, and a reader
/// that unquotes it would frame the body as chunked.
fn transfer_framing(headers: &HeaderMap) -> Result<BodyKind, DecodeError> {
    let codings: Vec<&[u8]> = headers
        .get_all(TRANSFER_ENCODING)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .map(<[u8]>::trim_ascii)
        .filter(|c| !c.is_empty())
        .collect();
    // A transfer-coding is a name (a token), then maybe `;` and parameters.
    fn name_of(coding: &[u8]) -> &[u8] {
        let name = coding.split(|&b| b == b';').next().unwrap_or_default();
        name.trim_ascii()
    }
    let names_chunked = |c: &&[u8]| name_of(c).eq_ignore_ascii_case(b"chunked");
    let all_named = codings.iter().all(|c| {
        let name = name_of(c);
        !name.is_empty() && name.iter().all(|&b| is_tchar(b))
    });
    match codings.as_slice() {
        [only] if only.eq_ignore_ascii_case(b"chunked") => Ok(BodyKind::Chunked),
        [_, ..] if all_named && !codings.iter().any(names_chunked) => Ok(BodyKind::Eof),
        _ => {
            let all: Vec<String> = headers
                .get_all(TRANSFER_ENCODING)
                .iter()
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .collect();
            Err(DecodeError::UnknownTransferCoding(all.join(", ")))
        }
    }
}

/// Whether a `Connection` field of `headers` lists `token` (compared
/// case-insensitively), e.g. `close` or `keep-alive`.
pub fn has_connection_token(headers: &HeaderMap, token: &[u8]) -> bool {
    headers
        .get_all(CONNECTION)
        .iter()
        .any(|value| lists_token(value, token))
}

/// Whether the value of one `Connection` field lists `token`: its
/// comma-separated tokens, trimmed, compared case-insensitively (what
/// [`has_connection_token`] asks of each field, for a caller that goes
/// over the fields itself).
pub fn lists_token(value: &HeaderValue, token: &[u8]) -> bool {
    value
        .as_bytes()
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// Counts this thread keeps of what the decoder does, for the tests to
/// measure: [`add`](counts::add) where it happens, [`during`](counts::during)
/// around what a test runs.
#[cfg(test)]
pub(crate) mod counts {
    use std::cell::Cell;
    use std::thread::LocalKey;

    thread_local! {
        /// Head and trailer sections parsed: the work bytes trickling in
        /// cause.
        pub(crate) static PARSES: Cell<usize> = const { Cell::new(0) };
        /// Field names taken from [`KnownNames`](super::KnownNames) rather
        /// than made: what it saves.
        pub(crate) static KNOWN_NAMES: Cell<usize> = const { Cell::new(0) };
    }

    pub(crate) fn add(count: &'static LocalKey<Cell<usize>>) {
        count.with(|n| n.set(n.get() + 1));
    }

    /// How much `count` grew while `f` ran.
    pub(crate) fn during(count: &'static LocalKey<Cell<usize>>, f: impl FnOnce()) -> usize {
        let before = count.with(Cell::get);
        f();
        count.with(Cell::get) - before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One pass over a head's fields says what the lookups by name say:
    /// lengths repeated, differing, malformed (the first error is the one
    /// kept), in several fields and in lists; tokens in any case, in
    /// lists, among other fields.
    #[test]
    fn the_framing_fields_read_in_one_pass_are_what_the_lookups_say() {
        let heads: &[&[(&str, &str)]] = &[
            &[],
            &[("server", "x"), ("content-length", "5"), ("date", "d")],
            &[("content-length", "5"), ("content-length", " 5 , 5")],
            &[
                ("content-length", "5"),
                ("via", "v"),
                ("content-length", "6"),
            ],
            &[("content-length", "x"), ("content-length", "6, 7")],
            &[("content-length", "6, 7"), ("content-length", "x")],
            &[
                ("content-length", ""),
                ("content-length", "99999999999999999999"),
            ],
            &[("transfer-encoding", "chunked"), ("content-length", "3")],
            &[("connection", "Keep-Alive"), ("connection", "te, CLOSE")],
            &[("connection", "closed, keep-alive-ish"), ("server", "s")],
            &[("Connection", "upgrade,close"), ("transfer-encoding", "")],
        ];
        for fields in heads {
            let mut headers = HeaderMap::new();
            for &(name, value) in *fields {
                headers.append(
                    HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    HeaderValue::from_str(value).unwrap(),
                );
            }
            let looked_up = FramingFields {
                content_length: content_length(&headers),
                has_te: headers.contains_key(TRANSFER_ENCODING),
                close: has_connection_token(&headers, b"close"),
                keep_alive_token: has_connection_token(&headers, b"keep-alive"),
            };
            assert_eq!(FramingFields::of(&headers), looked_up, "{headers:?}");
        }
    }
}
