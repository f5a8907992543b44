//! Cookies: a [`CookieStore`] keeps what responses set (`Set-Cookie`) and
//! gives each request the cookies its URL should carry. Off unless asked
//! for ([`ClientBuilder::cookie_store`](crate::ClientBuilder::cookie_store),
//! or [`cookie_provider`](crate::ClientBuilder::cookie_provider) with a
//! store of one's own). [`Jar`] is the one the client brings: RFC 6265
//! (domain, path, `Secure`, `Max-Age` and `Expires`, its date read as
//! leniently as §5.1.1 and the browsers read it; no public-suffix
//! list, but a `Domain` that is a top-level domain is refused, as curl
//! does; a `Secure` cookie set over plain http is ignored, and so is a
//! cookie set over plain http that would overwrite or shadow a `Secure`
//! one, a `__Secure-` or `__Host-` one without the attributes its
//! prefix asks for, and one whose name and value pass 4096 bytes, as RFC
//! 6265bis has it, which also has an attribute whose value passes 1024
//! bytes ignored; at most 50 cookies per domain and 3000 in all, the
//! least recently set or sent evicted past them), on the `cookie_store`
//! crate.

use http::HeaderValue;

#[cfg(feature = "cookies")]
mod date;
#[cfg(feature = "cookies")]
mod stamps;

#[cfg(feature = "cookies")]
use stamps::{borrowed, key_of, owned, OwnedKey, StampsByKey};

/// Where a client keeps cookies. Called on the thread that waits for or
/// polls a response, for every hop of a redirect chain.
pub trait CookieStore: Send + Sync {
    /// Keeps the cookies a response to `url` set (its `Set-Cookie` values).
    fn set_cookies(&self, url: &url::Url, set_cookie: &mut dyn Iterator<Item = &HeaderValue>);

    /// The `Cookie` header a request to `url` carries, if any.
    fn cookies(&self, url: &url::Url) -> Option<HeaderValue>;

    /// Whether the store holds no cookie at all, so that no request
    /// carries one: the client then asks it for none, and spares each
    /// request the [`url::Url`] it would build to ask. Asked before every
    /// request's [`cookies`](Self::cookies): best answered without a
    /// lock (the client's [`Jar`] keeps a count). `false` unless a store
    /// says so (the default asks for every request).
    fn is_empty(&self) -> bool {
        false
    }
}

/// The client's cookie store: RFC 6265 rules, in memory, shared by every
/// request of the clients given it. An `Expires` date is read as leniently
/// as RFC 6265 §5.1.1 and the browsers read it (`UTC`, `+0000` or no zone,
/// a one-digit day, a two-digit year, dashes), so a server deleting a
/// cookie with a past date in any such layout deletes it.
///
/// The jar keeps at most 50 cookies per domain — the domain a cookie is
/// for: its `Domain` attribute, or the host that set it for a host-only
/// cookie (no public-suffix list tells registrable domains apart) — and
/// 3000 in all, the least RFC 6265 §6.1 asks for. Past either limit it
/// drops, as the browsers do, expired cookies first (those it also drops
/// when it takes a cookie once the earliest expiry it holds has passed),
/// then those set or sent least recently: a server, or many sibling
/// subdomains, cannot grow the jar or the `Cookie` header without bound.
#[cfg(feature = "cookies")]
#[derive(Debug, Default)]
pub struct Jar {
    cookies: std::sync::RwLock<Cookies>,
    /// How many cookies `cookies` holds (its stamps' count), for
    /// [`is_empty`](CookieStore::is_empty) to answer without the lock.
    /// Invariant: `held == cookies.stamps.len()` whenever the write lock is
    /// free. Kept by [`store_at`](Jar::store_at), the only code that
    /// changes the cookies (sets, deletes, sweeps and evicts them; tests
    /// also seed them through [`write`](Jar::write), and ask nothing of
    /// this after): it stores their count last, under the lock, so it is
    /// the count as of the last change. (A store that panicked midway
    /// leaves the count of the one before, until the next: a hint.)
    held: std::sync::atomic::AtomicUsize,
}

/// The most cookies a [`Jar`] keeps for one domain (RFC 6265 §6.1: at
/// least 50).
#[cfg(feature = "cookies")]
const MAX_COOKIES_PER_DOMAIN: usize = 50;

/// The most cookies a [`Jar`] keeps in all (RFC 6265 §6.1: at least 3000).
#[cfg(feature = "cookies")]
const MAX_COOKIES: usize = 3000;

/// A [`Jar`]'s cookies, when each was created and when last set or sent.
#[cfg(feature = "cookies")]
#[derive(Debug, Default)]
struct Cookies {
    store: cookie_store::CookieStore,
    /// When each cookie `store` holds was created and last set or sent, on
    /// `clock`. Its keys are exactly the cookies `store` holds, those
    /// expired since the last sweep too (the next one sweeps them from
    /// both).
    stamps: StampsByKey,
    /// No cookie `store` holds expires before this (`None`: none has an
    /// expiry): until the time passes it none has expired, and taking a
    /// cookie need not go through them all for expired ones. Lowered as
    /// cookies are taken, made exact by each sweep of the whole store.
    earliest_expiry: Option<time::OffsetDateTime>,
    /// Counts the cookies set and the requests given cookies: a later one
    /// reads a larger count — a count, not the time, so no two cookies set
    /// are alike and the order needs no clock to test. Atomic, as each
    /// stamp's `used`: a request is given its cookies under the jar's
    /// shared lock, beside others.
    clock: std::sync::atomic::AtomicU64,
}

#[cfg(feature = "cookies")]
impl Cookies {
    /// The next count of the clock.
    fn tick(&self) -> u64 {
        self.clock
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1
    }

    /// Puts `cookie`, set by `url`, in the store as of `now` (RFC 6265
    /// §5.3: one of its domain, path and name replaces the held one; an
    /// expired one deletes it), and marks it the most recently set. The
    /// domain it is kept for, if it is kept.
    ///
    /// Expired or not is `now`'s answer, for the cookie set (its
    /// `Max-Age` counts from `now`) and the one it replaces: the
    /// response's one reading of the clock, which its eviction takes too.
    /// `cookie_store` reads the wall clock itself when it takes a cookie:
    /// one expired by `now` is handed to it expired (its `expire`), so
    /// that it deletes the held one whatever its own reading. One alive
    /// at `now` it may still find expired if `now` is earlier than its
    /// reading by more than the cookie has left (a test's `now` in the
    /// past): it is then not kept — tests pass a later `now`.
    fn insert(
        &mut self,
        raw: &cookie_store::RawCookie<'_>,
        url: &url::Url,
        now: time::OffsetDateTime,
    ) -> Option<String> {
        let mut cookie = cookie_store::Cookie::try_from_raw_cookie(raw, url).ok()?;
        if let Some(max_age) = raw.max_age() {
            cookie.expires = expiry_after(max_age, now);
        }
        if cookie.expires_by(&now) {
            cookie.expire();
        }
        let owned_key = owned(key_of(&cookie));
        let key = borrowed(&owned_key);
        let expiry = expiry_of(&cookie);
        // A held cookie that has expired is gone (§5.3: evicted whenever
        // there is one), though not swept until the next sweep: one set
        // in its place is created now, not when that one was.
        if self
            .store
            .get_any(key.0, key.1, key.2)
            .is_some_and(|held| held.expires_by(&now))
        {
            self.stamps.remove(key);
        }
        match self.store.insert(cookie.into_owned(), url) {
            Ok(
                cookie_store::StoreAction::Inserted | cookie_store::StoreAction::UpdatedExisting,
            ) => {
                let count = self.tick();
                // §5.3 step 11.3: one that replaces a held one keeps its
                // creation time.
                self.stamps.set(key, count);
                if let Some(at) = expiry {
                    self.earliest_expiry =
                        Some(self.earliest_expiry.map_or(at, |held| held.min(at)));
                }
                Some(owned_key.0)
            }
            // The store keeps a deleted cookie, expired, where it was.
            Ok(cookie_store::StoreAction::ExpiredExisting) => {
                self.remove(&owned_key);
                None
            }
            Err(_) => None,
        }
    }

    /// The `Cookie` header's value for a request to `url`, `None` for no
    /// cookie; what it sends counts as used. Called under the jar's lock,
    /// shared: requests are given theirs side by side.
    ///
    /// Expired or not is `now`'s answer, read once for the request — and
    /// only if some cookie is held for its host: not once a cookie, as
    /// `cookie_store`'s `is_expired` reads the wall clock (for a session
    /// cookie too).
    fn header_for(
        &self,
        url: &url::Url,
        now: impl FnOnce() -> time::OffsetDateTime,
    ) -> Option<String> {
        // The domains a cookie sent to the host can be kept for: the host
        // (a host-only cookie's, or a `Domain` the same), and each domain
        // it is under (RFC 6265 §5.1.3). Only theirs are looked at, found
        // by the stamps, which are kept as the store keeps the cookies —
        // not every domain of the jar, as `cookie_store`'s `matches` goes
        // through them (a new string for each domain and path it passes).
        let host = url.host_str()?;
        let domains = std::iter::once(host).chain(
            host.match_indices('.')
                .map(|(at, _)| &host[at + 1..])
                .filter(|domain| !domain.is_empty()),
        );
        let held = domains
            .clone()
            .map(|domain| self.stamps.len_of(domain))
            .sum();
        if held == 0 {
            return None;
        }
        let now = now();
        let count = self.tick();
        let mut matching = Vec::with_capacity(held);
        for ((domain, path, name), stamps) in domains.flat_map(|domain| self.stamps.iter_of(domain))
        {
            let Some(cookie) = self.store.get_any(domain, path, name) else {
                continue;
            };
            // The store's own test of a cookie against a URL: domain,
            // path, `Secure` and `HttpOnly` (§5.4 step 1).
            if cookie.expires_by(&now) || !cookie.matches(url) {
                continue;
            }
            // §5.4 step 3: what is sent counts as used, and is evicted last.
            stamps.mark_sent(count);
            matching.push((cookie, stamps.created));
        }
        // RFC 6265 §5.4 step 2: longer paths first, then those created
        // earlier. A server reads the first of two cookies of one name
        // (`sid` for `/` and for `/app`; a host's own and its parent
        // domain's), and the one for the deeper path, or the older one,
        // is the one meant; `cookie_store` gives them in its hash maps'
        // order, which differs from jar to jar.
        matching.sort_unstable_by_key(|&(cookie, created)| {
            (std::cmp::Reverse(cookie.path.len()), created)
        });
        // `name=value` joined by `; `, in a string of its exact length,
        // which becomes the header value without a copy.
        let pair_len = |cookie: &cookie_store::Cookie<'_>| {
            let (name, value) = cookie.name_value();
            name.len() + 1 + value.len()
        };
        let len = matching
            .iter()
            .map(|&(cookie, _)| pair_len(cookie))
            .sum::<usize>()
            + 2 * matching.len().saturating_sub(1);
        let mut joined = String::with_capacity(len);
        for (cookie, _) in &matching {
            let (name, value) = cookie.name_value();
            if !joined.is_empty() {
                joined.push_str("; ");
            }
            joined.push_str(name);
            joined.push('=');
            joined.push_str(value);
        }
        (!joined.is_empty()).then_some(joined)
    }

    fn remove(&mut self, key: &OwnedKey) {
        self.store.remove(&key.0, &key.1, &key.2);
        self.stamps.remove(borrowed(key));
    }

    /// Drops the cookies expired by `now` (RFC 6265 §5.3 has them evicted
    /// whenever there are any: once the earliest expiry has passed, there
    /// may be), then, while the cookies for one of `domains` or those of
    /// all pass their limit, the least recently set or sent of them
    /// (§5.3's order: expired, then those of a domain with too many, then
    /// any). Past a limit the expired go first even if the earliest expiry
    /// is not known to have passed: that order does not rest on the bound.
    fn evict_at<'a>(&mut self, domains: impl Iterator<Item = &'a str>, now: time::OffsetDateTime) {
        if self.stamps.len() > MAX_COOKIES || self.earliest_expiry.is_some_and(|at| at <= now) {
            self.sweep_expired(now);
        }
        for domain in domains {
            if self.stamps.len_of(domain) > MAX_COOKIES_PER_DOMAIN {
                self.sweep_expired_of(domain, now);
                self.evict_least_recently_used(Some(domain), MAX_COOKIES_PER_DOMAIN);
            }
        }
        if self.stamps.len() > MAX_COOKIES {
            self.evict_least_recently_used(None, MAX_COOKIES);
        }
    }

    /// Drops every cookie expired by `now`, and makes `earliest_expiry`
    /// the earliest of those left.
    fn sweep_expired(&mut self, now: time::OffsetDateTime) {
        let mut expired: Vec<OwnedKey> = Vec::new();
        let mut earliest: Option<time::OffsetDateTime> = None;
        for cookie in self.store.iter_any() {
            if cookie.expires_by(&now) {
                expired.push(owned(key_of(cookie)));
            } else if let Some(at) = expiry_of(cookie) {
                earliest = Some(earliest.map_or(at, |held| held.min(at)));
            }
        }
        for key in &expired {
            self.remove(key);
        }
        self.earliest_expiry = earliest;
    }

    /// Drops the cookies for `domain` expired by `now`, going through that
    /// domain's alone.
    fn sweep_expired_of(&mut self, domain: &str, now: time::OffsetDateTime) {
        let expired: Vec<OwnedKey> = self
            .stamps
            .iter_of(domain)
            .map(|(key, _)| key)
            .filter(|&(domain, path, name)| {
                self.store
                    .get_any(domain, path, name)
                    .is_some_and(|cookie| cookie.expires_by(&now))
            })
            .map(owned)
            .collect();
        for key in &expired {
            self.remove(key);
        }
    }

    /// Of the cookies for `domain` (for any, if `None`), drops the least
    /// recently set or sent until `keep` are left.
    fn evict_least_recently_used(&mut self, domain: Option<&str>, keep: usize) {
        let held = domain.map_or(self.stamps.len(), |domain| self.stamps.len_of(domain));
        if held <= keep {
            return;
        }
        let mut candidates: Vec<_> = match domain {
            Some(domain) => self.stamps.iter_of(domain).collect(),
            None => self.stamps.iter().collect(),
        };
        // Cookies sent together share a count: the key settles the order.
        candidates.sort_unstable_by_key(|&(key, stamps)| (stamps.used(), key));
        // Bounded by the list itself, not by the count above: were the two
        // ever to disagree, fewer would go, and no slice past the end
        // would panic on a server's `Set-Cookie`.
        let excess = candidates.len().saturating_sub(keep);
        let evicted: Vec<OwnedKey> = candidates[..excess]
            .iter()
            .map(|&(key, _)| owned(key))
            .collect();
        for key in &evicted {
            self.remove(key);
        }
    }
}

/// When a cookie with `max_age` set at `now` expires (RFC 6265 §5.2.2: at
/// the earliest time there is for none or less, as `cookie_store` has it;
/// past what a date holds, at its latest, 9999's end).
#[cfg(feature = "cookies")]
fn expiry_after(
    max_age: time::Duration,
    now: time::OffsetDateTime,
) -> cookie_store::CookieExpiration {
    if max_age <= time::Duration::ZERO {
        return cookie_store::CookieExpiration::from(time::OffsetDateTime::UNIX_EPOCH);
    }
    let at = now
        .checked_add(max_age)
        .unwrap_or(time::PrimitiveDateTime::MAX.assume_utc());
    // Clamped to the end of 9999 by `cookie_store`.
    cookie_store::CookieExpiration::from(at)
}

/// When `cookie` expires, if it does (not a session cookie).
#[cfg(feature = "cookies")]
fn expiry_of(cookie: &cookie_store::Cookie<'_>) -> Option<time::OffsetDateTime> {
    match cookie.expires {
        cookie_store::CookieExpiration::AtUtc(at) => Some(at),
        cookie_store::CookieExpiration::SessionEnd => None,
    }
}

#[cfg(feature = "cookies")]
impl Jar {
    /// An empty jar.
    pub fn new() -> Jar {
        Jar::default()
    }

    /// Adds a cookie as if `url` had set it (`cookie` is a `Set-Cookie`
    /// value, such as `"id=7; Path=/"`). An invalid one is ignored.
    pub fn add_cookie_str(&self, cookie: &str, url: &url::Url) {
        if let Some(cookie) = parse_set_cookie(cookie) {
            self.store(vec![cookie], url);
        }
    }

    /// Keeps the cookies `url` set, but for those it may not set, within
    /// the jar's limits, as of now.
    fn store(&self, cookies: Vec<cookie_store::RawCookie<'static>>, url: &url::Url) {
        self.store_at(cookies, url, time::OffsetDateTime::now_utc());
    }

    /// [`store`](Self::store) as of `now`: one reading of the clock for
    /// every cookie of a response — whether each has expired, when its
    /// `Max-Age` ends, what is evicted — which a test gives rather than
    /// waits for.
    fn store_at(
        &self,
        mut cookies: Vec<cookie_store::RawCookie<'static>>,
        url: &url::Url,
        now: time::OffsetDateTime,
    ) {
        let mut jar = self.write();
        cookies.retain(|cookie| {
            header_safe(cookie)
                && !too_long(cookie)
                && !for_a_top_level_domain(cookie, url)
                && !breaks_its_prefix(cookie)
                && !secure_over_plain_http(cookie, url)
                && !shadows_a_secure_cookie(&jar.store, cookie, url, now)
        });
        if cookies.is_empty() {
            return;
        }
        let mut domains: Vec<String> = cookies
            .iter()
            .filter_map(|cookie| jar.insert(cookie, url, now))
            .collect();
        domains.sort_unstable();
        domains.dedup();
        jar.evict_at(domains.iter().map(String::as_str), now);
        // The last change is made: `held` is the count again (see
        // [`Jar::held`]). Stored under the lock, so the counts stored are
        // in the order of the changes. Relaxed: the count is a hint, read
        // beside no other data — a request racing a response that sets
        // its first cookie may go without it either way, and one that
        // comes after it (ordered by whatever made it come after) reads
        // this store or a later one.
        self.held
            .store(jar.stamps.len(), std::sync::atomic::Ordering::Relaxed);
    }

    /// The cookies, to set: one setter at a time, and no request given
    /// its cookies meanwhile. A change keeps [`Jar::held`] too.
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Cookies> {
        self.cookies
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The cookies, to send: requests are given theirs side by side (each
    /// cookie sent marks its own stamp, atomically).
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Cookies> {
        self.cookies
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(feature = "cookies")]
impl CookieStore for Jar {
    fn set_cookies(&self, url: &url::Url, set_cookie: &mut dyn Iterator<Item = &HeaderValue>) {
        let parsed: Vec<_> = set_cookie
            .filter_map(|value| std::str::from_utf8(value.as_bytes()).ok())
            .filter_map(parse_set_cookie)
            .collect();
        self.store(parsed, url);
    }

    fn cookies(&self, url: &url::Url) -> Option<HeaderValue> {
        let joined = self.read().header_for(url, time::OffsetDateTime::now_utc)?;
        HeaderValue::from_maybe_shared(bytes::Bytes::from(joined)).ok()
    }

    fn is_empty(&self) -> bool {
        // Its stamps' keys are the cookies the store holds (those expired
        // since the last sweep too): none, and it holds none. Their count
        // as of the last change, without the lock: a request does not
        // wait behind a response's cookies being stored.
        self.held.load(std::sync::atomic::Ordering::Relaxed) == 0
    }
}

/// `set_cookie` (a `Set-Cookie` value) as a cookie, its `Max-Age` and
/// `Expires` read as RFC 6265 §5.2.2 and §5.1.1 have them; `None` if it is
/// no cookie. Of several of either, the last that is a number (a date)
/// counts (§5.2: one that is not is ignored). The `cookie` crate reads an
/// empty `Max-Age` as the longest age there is, and a `-` alone as none:
/// a server deleting a cookie with one and a past `Expires` would see it
/// kept until the year 9999. It reads only a few layouts of a date:
/// without this the cookie would be a session cookie, and one a server
/// deletes with a past date the crate does not read (`UTC` for `GMT`, a
/// one-digit day, no zone) would stay and go on being sent — nor, of
/// several, the last (a far date it reads, then a past one it does not:
/// the cookie is deleted, not kept). `Max-Age` wins over `Expires` (§5.3
/// step 3), so with one the date is not looked at. An attribute whose
/// value is longer than [`MAX_ATTRIBUTE_VALUE`] is ignored (RFC 6265bis
/// §5.6). The cookie holds its parts alone ([`parts_of`]), not the text.
#[cfg(feature = "cookies")]
fn parse_set_cookie(set_cookie: &str) -> Option<cookie_store::RawCookie<'static>> {
    let kept = |attribute: &&str| {
        attribute
            .split_once('=')
            .is_none_or(|(_, value)| value.trim().len() <= MAX_ATTRIBUTE_VALUE)
    };
    let kept_attributes = || set_cookie.split(';').skip(1).filter(kept);
    let text = if set_cookie
        .split(';')
        .skip(1)
        .all(|attribute| kept(&attribute))
    {
        std::borrow::Cow::Borrowed(set_cookie)
    } else {
        let pair = set_cookie.split(';').take(1);
        std::borrow::Cow::Owned(pair.chain(kept_attributes()).collect::<Vec<_>>().join(";"))
    };
    let mut cookie = parts_of(&cookie_store::RawCookie::parse(&*text).ok()?)?;
    let attributes = |wanted: &'static str| {
        kept_attributes()
            .filter_map(|attribute| attribute.split_once('='))
            .filter(move |(name, _)| name.trim().eq_ignore_ascii_case(wanted))
            .map(|(_, value)| value.trim())
    };
    let max_age = attributes("max-age").filter_map(delta_seconds).last();
    cookie.set_max_age(max_age);
    if max_age.is_some() {
        return Some(cookie);
    }
    let expires = attributes("expires")
        .filter_map(date::CookieDate::parse)
        .last();
    if let Some(expiry) = expires.and_then(date::CookieDate::to_expiry) {
        cookie.set_expires(expiry);
    }
    Some(cookie)
}

/// The longest attribute value a `Set-Cookie` may have, in bytes: RFC
/// 6265bis §5.6 has a longer one ignored, as the browsers do.
#[cfg(feature = "cookies")]
const MAX_ATTRIBUTE_VALUE: usize = 1024;

/// `parsed` as a cookie of its own parts — name, value and the attributes
/// the `cookie` crate reads — without the rest of the text it was parsed
/// from, which the crate keeps whole in the cookie (and `cookie_store` in
/// the jar): the junk attributes of a hostile server's `Set-Cookie`, some
/// 64 KiB for each of the jar's 3000 cookies, would stay with it. The
/// parts are parsed again from a text of their own (its allocation, and
/// the crate's own for each attribute it reads, a `Domain` and a `Path`),
/// `None` if that fails. `Max-Age` is its caller's to set (RFC 6265's
/// reading, not the crate's).
#[cfg(feature = "cookies")]
fn parts_of(parsed: &cookie_store::RawCookie<'_>) -> Option<cookie_store::RawCookie<'static>> {
    const DOMAIN: &str = "; Domain=.";
    const PATH: &str = "; Path=";
    let (name, value) = (parsed.name(), parsed.value());
    let (domain, path) = (parsed.domain(), parsed.path());
    let mut text = String::with_capacity(
        name.len()
            + 1
            + value.len()
            + domain.map_or(0, |domain| DOMAIN.len() + domain.len())
            + path.map_or(0, |path| PATH.len() + path.len()),
    );
    text.push_str(name);
    text.push('=');
    text.push_str(value);
    // `domain` drops one leading dot of the attribute's value: one put
    // back, the cookie's `domain` reads the same (`..a.test` is `.a.test`).
    if let Some(domain) = domain {
        text.push_str(DOMAIN);
        text.push_str(domain);
    }
    if let Some(path) = path {
        text.push_str(PATH);
        text.push_str(path);
    }
    let mut cookie = cookie_store::RawCookie::parse(text).ok()?;
    cookie.set_secure(parsed.secure());
    cookie.set_http_only(parsed.http_only());
    cookie.set_same_site(parsed.same_site());
    cookie.set_partitioned(parsed.partitioned());
    if let Some(expires) = parsed.expires() {
        cookie.set_expires(expires);
    }
    Some(cookie)
}

/// A `Max-Age` value as RFC 6265 §5.2.2 reads it: digits, or a `-` and
/// digits (none or less: expired at once, as `cookie_store` takes zero);
/// more seconds than a duration holds, the longest it holds. `None` for
/// anything else, an empty value too: the attribute is ignored.
#[cfg(feature = "cookies")]
fn delta_seconds(value: &str) -> Option<time::Duration> {
    let (negative, digits) = match value.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, value),
    };
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    if negative {
        return Some(time::Duration::ZERO);
    }
    Some(
        digits
            .parse()
            .map_or(time::Duration::MAX, time::Duration::seconds),
    )
}

/// Whether `cookie` is `Secure` and `url` is not secure: RFC 6265bis §5.7
/// has it ignored (`cookie_store` keeps it), as the browsers and curl do —
/// kept, it would go with the site's https requests, set by whoever could
/// answer in clear. Secure is https, and loopback (`localhost`, 127.0.0.0/8,
/// `::1`), which is what `cookie_store` counts as secure when it sends
/// (as curl and the browsers do): what it would send, it may take.
#[cfg(feature = "cookies")]
fn secure_over_plain_http(cookie: &cookie_store::RawCookie<'_>, url: &url::Url) -> bool {
    cookie.secure() == Some(true) && !is_secure(url)
}

/// The longest name and value a cookie may have together, in bytes (RFC
/// 6265bis §5.6).
#[cfg(feature = "cookies")]
const MAX_NAME_AND_VALUE: usize = 4096;

/// Whether `cookie`'s name and value together are longer than
/// [`MAX_NAME_AND_VALUE`]: RFC 6265bis §5.6 has it ignored, as the browsers
/// and curl do (`cookie_store` keeps it). Kept, it would go with every
/// request to its domain: a few, set by a sibling subdomain for the parent
/// domain, make every request there larger than servers take.
#[cfg(feature = "cookies")]
fn too_long(cookie: &cookie_store::RawCookie<'_>) -> bool {
    cookie.name().len() + cookie.value().len() > MAX_NAME_AND_VALUE
}

/// Whether `cookie`'s name and value can go in a `Cookie` header: no
/// control character but a tab. A `Set-Cookie` header cannot hold one; a
/// cookie added by hand ([`Jar::add_cookie_str`]) can, and kept, it would
/// make the header of every request to its domain invalid — dropped, with
/// every other cookie for it.
#[cfg(feature = "cookies")]
fn header_safe(cookie: &cookie_store::RawCookie<'_>) -> bool {
    let fits = |text: &str| {
        text.bytes()
            .all(|byte| byte == b'\t' || (byte >= 0x20 && byte != 0x7f))
    };
    fits(cookie.name()) && fits(cookie.value())
}

/// Whether `cookie`'s name has a prefix (RFC 6265bis §4.1.3, matched in
/// any case) whose rules it does not keep: `__Secure-` asks for `Secure`,
/// `__Host-` for `Secure`, no `Domain` and `Path=/`. RFC 6265bis §5.7 has
/// such a cookie ignored, as the browsers and curl do (`cookie_store` keeps
/// it): a site trusts a `__Host-` cookie to be one it set itself, over
/// https, for its host alone — not one a sibling subdomain set for the
/// whole domain.
#[cfg(feature = "cookies")]
fn breaks_its_prefix(cookie: &cookie_store::RawCookie<'_>) -> bool {
    let name = cookie.name().as_bytes();
    let has = |prefix: &[u8]| {
        name.get(..prefix.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(prefix))
    };
    let secure = cookie.secure() == Some(true);
    if has(b"__Secure-") {
        return !secure;
    }
    if has(b"__Host-") {
        // An empty `Domain` is no attribute at all (RFC 6265 §5.2.3).
        let host_only = cookie.domain().is_none_or(str::is_empty);
        return !(secure && host_only && cookie.path() == Some("/"));
    }
    false
}

/// Whether `url` is secure for cookies: https, or loopback (see
/// [`secure_over_plain_http`]).
#[cfg(feature = "cookies")]
fn is_secure(url: &url::Url) -> bool {
    let loopback = match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    url.scheme() == "https" || loopback
}

/// Whether `cookie`, not `Secure` and set over plain http, would overwrite
/// or stand in for a `Secure` cookie `store` holds, alive at `now`: the same name, domains
/// that match either way, and a path within the held one's. RFC 6265bis
/// §5.7 has it ignored, as the browsers and curl do: otherwise whoever
/// answers in clear could replace a session cookie the site set over https,
/// or put one before it in the requests that carry both.
#[cfg(feature = "cookies")]
fn shadows_a_secure_cookie(
    store: &cookie_store::CookieStore,
    cookie: &cookie_store::RawCookie<'_>,
    url: &url::Url,
    now: time::OffsetDateTime,
) -> bool {
    if cookie.secure() == Some(true) || is_secure(url) {
        return false;
    }
    let Ok(new) = cookie_store::Cookie::try_from_raw_cookie(cookie, url) else {
        return false;
    };
    let Some(new_domain) = new.domain.as_cow() else {
        return false;
    };
    store.iter_any().any(|held| {
        !held.expires_by(&now)
            && held.secure() == Some(true)
            && held.name() == new.name()
            && held.domain.as_cow().is_some_and(|domain| {
                domain_matches(&domain, &new_domain) || domain_matches(&new_domain, &domain)
            })
            && path_matches(&new.path, &held.path)
    })
}

/// RFC 6265 §5.1.3: `name` is `domain` or a host name under it.
#[cfg(feature = "cookies")]
fn domain_matches(name: &str, domain: &str) -> bool {
    name.eq_ignore_ascii_case(domain)
        || (name.len() > domain.len()
            && name.is_char_boundary(name.len() - domain.len())
            && name[name.len() - domain.len()..].eq_ignore_ascii_case(domain)
            && name[..name.len() - domain.len()].ends_with('.')
            && name.parse::<std::net::IpAddr>().is_err())
}

/// RFC 6265 §5.1.4: `path` is `within` or under it.
#[cfg(feature = "cookies")]
fn path_matches(path: &str, within: &str) -> bool {
    path == within
        || (path.starts_with(within)
            && (within.ends_with('/') || path[within.len()..].starts_with('/')))
}

/// Whether `cookie`'s `Domain` is a top-level domain (`com`, `.test`,
/// `test.`: no dot inside but the root's at the end) other than the host
/// that set it. Without a public-suffix list these are the public suffixes
/// known for sure, and a cookie for one would go to every other site under
/// it; `cookie_store` takes it, as any domain the host is under (`test.`
/// for a fully qualified `shop.a.test.`). `localhost` is let through, as
/// curl does: its hosts are all this machine's.
#[cfg(feature = "cookies")]
fn for_a_top_level_domain(cookie: &cookie_store::RawCookie<'_>, url: &url::Url) -> bool {
    let Some(domain) = cookie.domain() else {
        return false;
    };
    // An empty `Domain` is no attribute at all (RFC 6265 §5.2.3).
    if domain.is_empty() {
        return false;
    }
    let unrooted = |name: &str| name.trim_end_matches('.').to_ascii_lowercase();
    let domain = unrooted(domain);
    let the_hosts_own = url.host_str().is_some_and(|host| unrooted(host) == domain);
    !domain.contains('.') && domain != "localhost" && !the_hosts_own
}

#[cfg(all(test, feature = "cookies"))]
mod tests {
    use super::stamps::Stamps;
    use super::*;

    fn url(s: &str) -> url::Url {
        url::Url::parse(s).unwrap()
    }

    fn set(jar: &Jar, at: &str, values: &[&str]) {
        let values: Vec<HeaderValue> = values
            .iter()
            .map(|v| HeaderValue::from_str(v).unwrap())
            .collect();
        jar.set_cookies(&url(at), &mut values.iter());
    }

    /// The cookies sent to `to`, sorted (a store keeps no order).
    fn sent(jar: &Jar, to: &str) -> Option<String> {
        jar.cookies(&url(to)).map(|v| {
            let mut pairs: Vec<&str> = v.to_str().unwrap().split("; ").collect();
            pairs.sort_unstable();
            pairs.join("; ")
        })
    }

    /// A jar is empty until a cookie is kept, and again once the server
    /// has deleted it: the client then asks it for no request's cookies.
    #[test]
    fn a_jar_is_empty_while_it_holds_no_cookie() {
        let jar = Jar::new();
        assert!(jar.is_empty());
        set(&jar, "http://a.test/", &["id=7"]);
        assert!(!jar.is_empty());
        set(&jar, "http://a.test/", &["id=; Max-Age=0"]);
        assert!(jar.is_empty());
        assert_eq!(sent(&jar, "http://a.test/"), None);
    }

    /// A jar says whether it is empty without its lock: asked before
    /// every request's cookies, it does not wait behind cookies being
    /// stored (here the lock held by the test, on another thread, with a
    /// ceiling: a jar that took the lock would answer only once the
    /// test let it go).
    #[test]
    fn a_jar_says_it_is_empty_while_cookies_are_being_stored() {
        let jar = std::sync::Arc::new(Jar::new());
        set(&jar, "http://a.test/", &["id=7"]);
        let storing = jar.write();
        let (told, answer) = std::sync::mpsc::channel();
        let asker = std::thread::spawn({
            let jar = jar.clone();
            move || told.send(jar.is_empty()).unwrap()
        });
        let empty = answer.recv_timeout(std::time::Duration::from_secs(20));
        drop(storing);
        asker.join().unwrap();
        assert_eq!(empty, Ok(false), "is_empty waited for the lock");
    }

    /// A cookie for a domain goes to every host under it, however deep,
    /// and to the domain itself; a host-only one to its host alone — not
    /// to a host under it, nor to a host that merely ends as its name
    /// does. (The jar looks up a request's cookies by the domains its host
    /// is under.)
    #[test]
    fn a_domain_cookie_goes_to_hosts_under_it_and_a_host_only_one_to_its_host() {
        let jar = Jar::new();
        set(
            &jar,
            "http://shop.a.test/",
            &["host=1", "domain=2; Domain=a.test"],
        );
        assert_eq!(sent(&jar, "http://a.test/").as_deref(), Some("domain=2"));
        assert_eq!(
            sent(&jar, "http://shop.a.test/").as_deref(),
            Some("domain=2; host=1")
        );
        assert_eq!(
            sent(&jar, "http://x.y.shop.a.test/").as_deref(),
            Some("domain=2")
        );
        assert_eq!(sent(&jar, "http://ba.test/"), None);
        assert_eq!(sent(&jar, "http://a.test.b/"), None);
    }

    #[test]
    fn cookies_go_back_where_their_domain_and_path_say() {
        let jar = Jar::new();
        set(
            &jar,
            "http://shop.a.test/cart/add",
            &["id=7; Path=/cart", "theme=dark; Domain=a.test; Path=/"],
        );
        assert_eq!(
            sent(&jar, "http://shop.a.test/cart/view").as_deref(),
            Some("id=7; theme=dark")
        );
        assert_eq!(
            sent(&jar, "http://shop.a.test/other").as_deref(),
            Some("theme=dark")
        );
        assert_eq!(
            sent(&jar, "http://www.a.test/").as_deref(),
            Some("theme=dark")
        );
        assert_eq!(sent(&jar, "http://b.test/cart/view"), None);
    }

    #[test]
    fn secure_cookies_only_go_over_https_and_expired_ones_go_away() {
        let jar = Jar::new();
        set(&jar, "https://a.test/", &["token=s; Secure", "plain=p"]);
        assert_eq!(
            sent(&jar, "https://a.test/").as_deref(),
            Some("plain=p; token=s")
        );
        assert_eq!(sent(&jar, "http://a.test/").as_deref(), Some("plain=p"));
        set(&jar, "https://a.test/", &["plain=gone; Max-Age=0"]);
        assert_eq!(sent(&jar, "https://a.test/").as_deref(), Some("token=s"));
    }

    /// RFC 6265bis §5.7: a `Secure` cookie set over plain http is ignored
    /// (a hand-added one too), so it can neither go over https later nor
    /// replace one the site set over https; loopback and `localhost` are
    /// secure, as the store counts them when it sends.
    #[test]
    fn a_secure_cookie_set_over_plain_http_is_ignored() {
        let jar = Jar::new();
        set(&jar, "https://a.test/", &["token=real; Secure"]);
        set(&jar, "http://a.test/", &["token=forged; Secure", "plain=p"]);
        jar.add_cookie_str("hand=h; Secure", &url("http://a.test/"));
        assert_eq!(
            sent(&jar, "https://a.test/").as_deref(),
            Some("plain=p; token=real")
        );
        for local in [
            "http://127.0.0.1:8080/",
            "http://[::1]/",
            "http://localhost/",
        ] {
            set(&jar, local, &["local=l; Secure"]);
            assert_eq!(sent(&jar, local).as_deref(), Some("local=l"), "{local}");
        }
    }

    /// RFC 6265bis §5.7: a cookie set over plain http does not overwrite,
    /// nor stand beside, a `Secure` one of the same name whose domain and
    /// path it falls within. One that does not is kept: another name,
    /// another path, or a path above the held one's (the RFC's note: for
    /// `/login`, `/` and `/foo` may be set, `/login` and `/login/en` not).
    #[test]
    fn a_cookie_set_over_plain_http_leaves_a_secure_one_alone() {
        let jar = Jar::new();
        set(
            &jar,
            "https://shop.test/",
            &["sid=real; Secure; Path=/account"],
        );
        set(
            &jar,
            "http://shop.test/",
            &[
                "sid=forged; Path=/account",
                "sid=deeper; Path=/account/settings",
                "sid=parent; Domain=shop.test; Path=/account",
                "sid=root",
                "sid=elsewhere; Path=/help",
                "lang=en",
            ],
        );
        set(&jar, "http://www.shop.test/", &["sid=sub; Path=/account"]);
        let sorted = |url: &str| {
            let mut cookies: Vec<String> = sent(&jar, url)
                .unwrap_or_default()
                .split("; ")
                .map(str::to_owned)
                .collect();
            cookies.sort();
            cookies
        };
        assert_eq!(
            sorted("https://shop.test/account/settings"),
            ["lang=en", "sid=real", "sid=root"]
        );
        assert_eq!(sorted("https://www.shop.test/account"), [""]);
        assert_eq!(
            sorted("http://shop.test/help"),
            ["lang=en", "sid=elsewhere", "sid=root"]
        );
        // Over https the site may replace its own.
        set(&jar, "https://shop.test/", &["sid=renewed; Path=/account"]);
        assert_eq!(
            sorted("https://shop.test/account"),
            ["lang=en", "sid=renewed", "sid=root"]
        );
    }

    /// A site may not set a cookie for a whole top-level domain: it would
    /// go to every other site under it (curl refuses it too; the browsers
    /// through their public-suffix list).
    #[test]
    fn a_cookie_for_a_top_level_domain_is_refused_unless_it_is_the_host() {
        let jar = Jar::new();
        set(
            &jar,
            "http://shop.a.test/",
            &[
                "wide=1; Domain=test",
                "dotted=2; Domain=.TEST",
                "site=3; Domain=a.test",
                "empty=4; Domain=",
            ],
        );
        assert_eq!(sent(&jar, "http://b.test/"), None);
        assert_eq!(
            sent(&jar, "http://shop.a.test/").as_deref(),
            Some("empty=4; site=3")
        );
        jar.add_cookie_str("wide=5; Domain=test", &url("http://a.test/"));
        assert_eq!(sent(&jar, "http://b.test/"), None);
        // A host with no dot in its name may name itself, and `localhost`
        // is this machine's alone.
        set(&jar, "http://intranet/", &["own=6; Domain=intranet"]);
        assert_eq!(sent(&jar, "http://intranet/").as_deref(), Some("own=6"));
        set(
            &jar,
            "http://app.localhost/",
            &["local=7; Domain=localhost"],
        );
        assert_eq!(
            sent(&jar, "http://api.localhost/").as_deref(),
            Some("local=7")
        );
    }

    /// A fully qualified host name ends with the root's dot
    /// (`shop.a.test.`), and so may a `Domain`: `test.` is the top-level
    /// domain `test` all the same, and a cookie for it would go to every
    /// other site under it written that way.
    #[test]
    fn a_top_level_domain_is_refused_with_the_roots_dot_too() {
        let jar = Jar::new();
        set(
            &jar,
            "http://shop.a.test./",
            &[
                "wide=1; Domain=test.",
                "dotted=2; Domain=.test.",
                "doubled=3; Domain=test..",
                "site=4; Domain=a.test.",
            ],
        );
        assert_eq!(sent(&jar, "http://b.test./"), None);
        assert_eq!(
            sent(&jar, "http://shop.a.test./").as_deref(),
            Some("site=4")
        );
        // A host with no dot in its name may still name itself.
        set(&jar, "http://intranet./", &["own=5; Domain=intranet."]);
        assert_eq!(sent(&jar, "http://intranet./").as_deref(), Some("own=5"));
    }

    /// RFC 6265 §5.4: cookies with longer paths go first. Servers read the
    /// first of two cookies of one name, and the one for the request's
    /// deeper path is the one meant (as the browsers and curl send it).
    #[test]
    fn cookies_with_longer_paths_go_first() {
        // Each jar's maps are hashed with keys of their own.
        for _ in 0..32 {
            let jar = Jar::new();
            set(
                &jar,
                "http://a.test/app/login",
                &[
                    "sid=root; Path=/",
                    "sid=app; Path=/app",
                    "lang=en; Path=/app/x",
                ],
            );
            let sent = jar.cookies(&url("http://a.test/app/x/y")).unwrap();
            assert_eq!(sent, "lang=en; sid=app; sid=root");
        }
    }

    /// RFC 6265 §5.4 step 2: of cookies with paths of one length, those
    /// created earlier go first — a host's own `sid` before the one a
    /// sibling set later for the parent domain, whichever a server reads
    /// — and a cookie set again keeps its creation time (§5.3 step 11.3).
    /// `cookie_store` gives them in its hash maps' order, which differs
    /// from jar to jar.
    #[test]
    fn cookies_with_paths_of_one_length_go_in_the_order_they_were_created() {
        for _ in 0..32 {
            let jar = Jar::new();
            set(&jar, "http://www.a.test/", &["sid=own"]);
            set(&jar, "http://x.a.test/", &["sid=parent; Domain=a.test"]);
            set(&jar, "http://www.a.test/", &["b=1", "a=2", "c=3"]);
            set(&jar, "http://www.a.test/", &["sid=renewed"]);
            let sent = jar.cookies(&url("http://www.a.test/x")).unwrap();
            assert_eq!(sent, "sid=renewed; sid=parent; b=1; a=2; c=3");
        }
    }

    /// RFC 6265 §5.3: a cookie that has expired is no longer held (step
    /// 11 finds none to take the creation time of), though the jar sweeps
    /// it only when a cookie is next taken: one of its name, domain and
    /// path set after it expired is created then, and goes after a cookie
    /// of a path as long created meanwhile (§5.4 step 2).
    #[test]
    fn a_cookie_set_again_after_it_expired_is_created_anew() {
        let at = url("http://www.a.test/");
        // `sid` for the host, set first and expired since; the parent
        // domain's `sid`, set later and live.
        let expired =
            cookie_store::Cookie::parse("sid=own; Expires=Thu, 01 Jan 1970 00:00:00 GMT", &at)
                .unwrap();
        let parent =
            cookie_store::Cookie::parse("sid=parent; Domain=a.test", &url("http://x.a.test/"))
                .unwrap();
        let jar = Jar::new();
        {
            let mut cookies = jar.write();
            for (cookie, created) in [(&expired, 1), (&parent, 2)] {
                cookies
                    .stamps
                    .insert(key_of(cookie), Stamps::new(created, created));
            }
            *cookies.clock.get_mut() = 2;
            cookies.store = cookie_store::CookieStore::from_cookies(
                [expired.into_owned(), parent.into_owned()].map(Ok::<_, ()>),
                true,
            )
            .unwrap();
        }
        set(&jar, "http://www.a.test/", &["sid=renewed"]);
        let sent = jar.cookies(&url("http://www.a.test/")).unwrap();
        assert_eq!(sent, "sid=parent; sid=renewed");
    }

    /// RFC 6265bis §4.1.3: a `__Secure-` cookie must be `Secure`; a
    /// `__Host-` one `Secure`, without `Domain` and with `Path=/` — the
    /// prefix matched in any case. Otherwise it is ignored, as the browsers
    /// and curl do: a site that takes such a cookie for one it set itself
    /// over https, for its own host, would take one planted by a sibling
    /// subdomain (`Domain`) or a hand-made one.
    #[test]
    fn a_cookie_with_a_prefix_is_kept_only_with_the_attributes_it_asks_for() {
        let jar = Jar::new();
        set(
            &jar,
            "https://a.test/login",
            &[
                "__Secure-ok=1; Secure",
                "__Secure-plain=2",
                "__Host-ok=3; Secure; Path=/",
                "__Host-nopath=4; Secure",
                "__Host-deep=5; Secure; Path=/x",
                "__Host-domain=6; Secure; Path=/; Domain=a.test",
                "__Host-insecure=7; Path=/",
                "__host-lower=8; Path=/",
                "__SECURE-upper=9",
                "__Securely=10",
            ],
        );
        assert_eq!(
            sent(&jar, "https://a.test/x").as_deref(),
            Some("__Host-ok=3; __Secure-ok=1; __Securely=10")
        );
        // A sibling cannot give the host a cookie that claims to be its own.
        set(
            &jar,
            "https://www.a.test/",
            &["__Host-sid=planted; Secure; Path=/; Domain=a.test"],
        );
        assert_eq!(
            sent(&jar, "https://a.test/").as_deref(),
            Some("__Host-ok=3; __Secure-ok=1; __Securely=10")
        );
        jar.add_cookie_str("__Secure-hand=11", &url("https://a.test/"));
        assert_eq!(
            sent(&jar, "https://a.test/").as_deref(),
            Some("__Host-ok=3; __Secure-ok=1; __Securely=10")
        );
    }

    /// RFC 6265bis §5.6: a cookie whose name and value together are longer
    /// than 4096 bytes is ignored (as the browsers and curl do): kept, it
    /// would go with every request to its domain — set by a sibling for the
    /// parent domain, a few such cookies make each request's head larger
    /// than servers take (nginx answers 400 past 8 KiB), for good.
    #[test]
    fn a_cookie_longer_than_4096_bytes_is_ignored() {
        let jar = Jar::new();
        let fits = format!("fits={}", "v".repeat(4096 - 4));
        let too_long = format!("long={}", "v".repeat(4096 - 4 + 1));
        set(&jar, "http://a.test/", &[&fits, &too_long]);
        jar.add_cookie_str(
            &format!("hand={}", "v".repeat(4096)),
            &url("http://a.test/"),
        );
        let sent = sent(&jar, "http://a.test/").unwrap_or_default();
        let names: Vec<&str> = sent
            .split("; ")
            .map(|c| &c[..c.find('=').unwrap_or(0)])
            .collect();
        assert_eq!(names, ["fits"]);
        assert_eq!(sent, fits);
    }

    /// RFC 6265bis §5.6: an attribute whose value is longer than 1024 bytes
    /// is ignored, the cookie kept as without it — a `Path` too: the
    /// cookie takes the default path of the URL that set it.
    #[test]
    fn an_attribute_value_longer_than_1024_bytes_is_ignored() {
        let jar = Jar::new();
        let path_of = |length: usize| format!("/{}", "p".repeat(length - 1));
        set(
            &jar,
            "http://a.test/dir/page",
            &[
                &format!("fits=1; Path={}", path_of(1024)),
                &format!("long=2; Path={}", path_of(1025)),
            ],
        );
        assert_eq!(
            sent(&jar, "http://a.test/dir/other").as_deref(),
            Some("long=2")
        );
        assert_eq!(
            sent(&jar, &format!("http://a.test{}", path_of(1024))).as_deref(),
            Some("fits=1")
        );
    }

    /// A cookie whose value is UTF-8 (a server's `Set-Cookie` may carry
    /// any octets past ASCII, and RFC 6265 §5.2 has them taken) goes back
    /// as it came, with the others, as the browsers and curl send it —
    /// whichever of `HeaderValue`'s constructors makes the header (one
    /// for static strs takes visible ASCII only).
    #[test]
    fn a_cookie_value_past_ascii_goes_back_as_it_came_with_the_others() {
        let jar = Jar::new();
        let at = url("http://a.test/");
        let utf8 = HeaderValue::from_bytes("name=café; Path=/".as_bytes()).unwrap();
        jar.set_cookies(&at, &mut [HeaderValue::from_static("a=1"), utf8].iter());
        jar.add_cookie_str("hand=ü", &at);
        let sent = jar.cookies(&at).expect("a Cookie header");
        let mut pairs: Vec<&str> = std::str::from_utf8(sent.as_bytes())
            .unwrap()
            .split("; ")
            .collect();
        pairs.sort_unstable();
        assert_eq!(pairs, ["a=1", "hand=ü", "name=café"]);
    }

    /// A cookie added by hand with a control character in it could not go
    /// in a `Cookie` header, and took every other cookie for the URL with
    /// it (the header was dropped whole): it is not kept.
    #[test]
    fn a_cookie_no_header_can_carry_is_not_kept_and_the_others_still_go() {
        let jar = Jar::new();
        let at = url("http://a.test/");
        jar.add_cookie_str("a=1", &at);
        jar.add_cookie_str("b=x\u{1}y", &at);
        jar.add_cookie_str("c\u{7f}=2", &at);
        assert_eq!(sent(&jar, "http://a.test/").as_deref(), Some("a=1"));
    }

    /// The past dates servers delete a cookie with, standard or not: the
    /// `cookie` crate reads only the first few, and took a cookie with any
    /// other for a session cookie, which stayed in the jar.
    const PAST_DATES: [&str; 9] = [
        "Thu, 01 Jan 1970 00:00:00 GMT",
        "Thu, 01-Jan-70 00:00:00 GMT",
        "Thu, 01 Jan 1970 00:00:00 UTC",
        "Thu, 1 Jan 1970 00:00:00 GMT",
        "Thu, 01 Jan 1970 00:00:00 +0000",
        "Thu, 01 Jan 1970 00:00:00",
        "Thu, 01 Jan 70 00:00:00 GMT",
        "Thursday, 01-Jan-1970 00:00:00 GMT",
        "Thu, 01-Jan-1970 00:00:00 UTC",
    ];

    /// RFC 6265 §5.1.1: `Expires` is read leniently, as the browsers read
    /// it, so a cookie deleted with a past date in any of the layouts
    /// servers use is gone — set by a response or by hand.
    #[test]
    fn a_cookie_deleted_with_a_past_date_in_any_layout_is_gone() {
        for past in PAST_DATES {
            let jar = Jar::new();
            set(&jar, "http://a.test/", &["x=1", "hand=2", "keep=3"]);
            set(&jar, "http://a.test/", &[&format!("x=; Expires={past}")]);
            jar.add_cookie_str(&format!("hand=; expires = {past}"), &url("http://a.test/"));
            assert_eq!(
                sent(&jar, "http://a.test/").as_deref(),
                Some("keep=3"),
                "{past}"
            );
        }
    }

    /// `Max-Age` wins over `Expires` (RFC 6265 §5.3 step 3), read or not;
    /// an `Expires` that is no date is ignored (the cookie a session one),
    /// and of several the last date counts.
    #[test]
    fn max_age_wins_over_a_lenient_expires_and_a_non_date_is_ignored() {
        let jar = Jar::new();
        set(
            &jar,
            "http://a.test/",
            &[
                "aged=1; Max-Age=600; Expires=Thu, 01 Jan 1970 00:00:00 UTC",
                "nodate=2; Expires=someday",
                "last=3; Expires=Thu, 01 Jan 1970 00:00:00 UTC; Expires=Fri, 31 Dec 9999 23:59:59 UTC",
                "future=4; Expires=Fri, 31 Dec 9999 23:59:59 UTC",
            ],
        );
        assert_eq!(
            sent(&jar, "http://a.test/").as_deref(),
            Some("aged=1; future=4; last=3; nodate=2")
        );
        let cookies = jar.read();
        let persistent = |name: &str| {
            cookies
                .store
                .iter_any()
                .find(|cookie| cookie.name() == name)
                .is_some_and(|cookie| cookie.is_persistent())
        };
        assert!(persistent("future") && persistent("last") && persistent("aged"));
        assert!(!persistent("nodate"));
    }

    /// A lenient date is the cookie's expiry to the second, UTC, whatever
    /// its zone says (RFC 6265 §5.1.1 ignores it), in a layout the `cookie`
    /// crate reads or not.
    #[test]
    fn a_lenient_expires_is_the_cookies_expiry_to_the_second() {
        for set_cookie in [
            "x=1; Expires=Wed, 09 Jun 2021 10:18:14 UTC",
            "x=1; Expires=Wed, 09 Jun 2021 10:18:14 GMT",
            "x=1; Expires=9 june 21 10:18:14",
            "x=1; Expires=Wed, 09-Jun-2021 10:18:14 +0200",
        ] {
            let cookie = parse_set_cookie(set_cookie).unwrap();
            assert_eq!(
                cookie.expires_datetime().map(|at| at.unix_timestamp()),
                Some(1_623_233_894),
                "{set_cookie}"
            );
        }
    }

    /// RFC 6265 §5.2, §5.3 step 3: of several `Expires`, the last that is
    /// a date counts, though the `cookie` crate reads only an earlier one —
    /// a far date in its layout, then a past one in another: the cookie is
    /// deleted, not kept until the far date.
    #[test]
    fn of_several_expires_the_last_date_counts_though_the_crate_reads_an_earlier() {
        let jar = Jar::new();
        set(&jar, "http://a.test/", &["x=1", "keep=2"]);
        set(
            &jar,
            "http://a.test/",
            &["x=; Expires=Fri, 31 Dec 9999 23:59:59 GMT; Expires=Thu, 01 Jan 1970 00:00:00 UTC"],
        );
        assert_eq!(sent(&jar, "http://a.test/").as_deref(), Some("keep=2"));
        // The other way round: the far date, the last, keeps it.
        set(
            &jar,
            "http://a.test/",
            &["y=3; Expires=Thu, 01 Jan 1970 00:00:00 UTC; Expires=Fri, 31 Dec 9999 23:59:59 GMT"],
        );
        assert_eq!(sent(&jar, "http://a.test/").as_deref(), Some("keep=2; y=3"));
    }

    /// RFC 6265 §5.2.2: a `Max-Age` that is no number (empty, or a `-`
    /// alone) is ignored — the `cookie` crate reads an empty one as the
    /// longest age there is, a `-` alone as none. A server deleting a
    /// cookie with such a `Max-Age` and a past `Expires` deletes it; one
    /// with nothing else sets a session cookie; of several, the last
    /// number counts.
    #[test]
    fn a_max_age_that_is_no_number_is_ignored() {
        let jar = Jar::new();
        set(&jar, "http://a.test/", &["gone=1", "dash=2", "keep=3"]);
        set(
            &jar,
            "http://a.test/",
            &[
                "gone=; Max-Age=; Expires=Thu, 01 Jan 1970 00:00:00 GMT",
                "dash=6; Max-Age=-",
                "session=4; Max-Age=",
                "aged=5; Max-Age=600; Max-Age=",
            ],
        );
        assert_eq!(
            sent(&jar, "http://a.test/").as_deref(),
            Some("aged=5; dash=6; keep=3; session=4")
        );
        let aged = expiry_held(&jar, "aged").unwrap();
        let in_ten_minutes = time::OffsetDateTime::now_utc() + time::Duration::minutes(10);
        assert!(aged <= in_ten_minutes, "{aged}");
        assert_eq!(expiry_held(&jar, "session"), None);
        assert_eq!(expiry_held(&jar, "dash"), None);
    }

    /// How many cookies `jar` holds (expired or not), checked against
    /// the counts it evicts by.
    fn held(jar: &Jar) -> usize {
        let cookies = jar.read();
        let held = cookies.store.iter_any().count();
        assert_eq!(held, cookies.stamps.len());
        held
    }

    /// `values` as `set` takes them.
    fn refs(values: &[String]) -> Vec<&str> {
        values.iter().map(String::as_str).collect()
    }

    /// The cookies `jar` holds, as `name=value`, sorted — read without
    /// sending them, which would count as using them.
    fn pairs_held(jar: &Jar) -> Vec<String> {
        let mut pairs: Vec<String> = jar
            .read()
            .store
            .iter_any()
            .map(|cookie| format!("{}={}", cookie.name(), cookie.value()))
            .collect();
        pairs.sort_unstable();
        pairs
    }

    /// RFC 6265 §6.1, §5.3: at most 50 cookies per domain; past that the
    /// least recently set or sent goes first — setting a cookie again, or
    /// sending it, makes it the most recent.
    #[test]
    fn a_domain_keeps_50_cookies_and_drops_the_least_recently_set_or_sent() {
        let jar = Jar::new();
        let fifty: Vec<String> = (0..50)
            .map(|i| match i {
                0 => "c0=v; Path=/a".to_owned(),
                _ => format!("c{i}=v; Path=/b"),
            })
            .collect();
        set(&jar, "http://a.test/", &refs(&fifty));
        assert_eq!(held(&jar), 50);
        // `c0`, the first set, is sent: now the most recently used, and
        // `c1` the least.
        assert_eq!(sent(&jar, "http://a.test/a").as_deref(), Some("c0=v"));
        set(&jar, "http://a.test/", &["c50=v; Path=/b"]);
        let pairs = pairs_held(&jar);
        assert_eq!(pairs.len(), 50);
        assert!(pairs.contains(&"c0=v".to_owned()), "{pairs:?}");
        assert!(!pairs.contains(&"c1=v".to_owned()), "{pairs:?}");
        assert!(pairs.contains(&"c50=v".to_owned()), "{pairs:?}");
        // Set again, `c2` is renewed, and `c3` is the one that goes.
        set(&jar, "http://a.test/", &["c2=w; Path=/b"]);
        set(&jar, "http://a.test/", &["c51=v; Path=/b"]);
        let pairs = pairs_held(&jar);
        assert_eq!(pairs.len(), 50);
        assert!(pairs.contains(&"c2=w".to_owned()), "{pairs:?}");
        assert!(!pairs.contains(&"c3=v".to_owned()), "{pairs:?}");
        // A cookie deleted leaves room: none of those left goes.
        set(&jar, "http://a.test/", &["c4=; Max-Age=0; Path=/b"]);
        set(&jar, "http://a.test/", &["c52=v; Path=/b"]);
        let pairs = pairs_held(&jar);
        assert_eq!(pairs.len(), 50);
        assert!(!pairs.contains(&"c4=v".to_owned()), "{pairs:?}");
        assert!(pairs.contains(&"c5=v".to_owned()), "{pairs:?}");
        // And what is sent is what is held.
        assert_eq!(
            sent(&jar, "http://a.test/b").unwrap().split("; ").count(),
            49
        );
    }

    /// Requests given their cookies side by side (under the jar's shared
    /// lock) each mark what they send as used: past the limit, the one
    /// cookie none of them sent goes, though it was set after all the
    /// others.
    #[test]
    fn cookies_sent_side_by_side_all_count_as_used() {
        let jar = Jar::new();
        let sent_ones: Vec<String> = (1..50).map(|i| format!("c{i}=v; Path=/b")).collect();
        set(&jar, "http://a.test/", &refs(&sent_ones));
        set(&jar, "http://a.test/", &["c0=v; Path=/a"]);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..100 {
                        let sent = jar.cookies(&url("http://a.test/b")).unwrap();
                        assert_eq!(sent.as_bytes().split(|&b| b == b';').count(), 49);
                    }
                });
            }
        });
        set(&jar, "http://a.test/", &["c50=v; Path=/b"]);
        let pairs = pairs_held(&jar);
        assert_eq!(pairs.len(), 50);
        assert!(!pairs.contains(&"c0=v".to_owned()), "{pairs:?}");
        assert!(pairs.contains(&"c1=v".to_owned()), "{pairs:?}");
        assert!(pairs.contains(&"c50=v".to_owned()), "{pairs:?}");
    }

    /// The limit is per domain as the jar keys cookies (the `Domain`, or
    /// the host of a host-only cookie): sibling subdomains setting cookies
    /// for their parent domain share its 50, so the `Cookie` header their
    /// parent's hosts get stays bounded; each host's own cookies are
    /// counted apart.
    #[test]
    fn sibling_subdomains_share_their_parent_domains_50_cookies() {
        let jar = Jar::new();
        for i in 0..60 {
            set(
                &jar,
                &format!("http://s{i}.a.test/"),
                &[&format!("sib{i}=v; Domain=a.test")],
            );
        }
        let own: Vec<String> = (0..50).map(|i| format!("own{i}=v")).collect();
        set(&jar, "http://s0.a.test/", &refs(&own));
        assert_eq!(held(&jar), 100);
        let shared = sent(&jar, "http://www.a.test/").unwrap();
        assert_eq!(shared.split("; ").count(), 50, "{shared}");
        assert!(shared.split("; ").all(|c| {
            let i: usize = c[3..c.find('=').unwrap()].parse().unwrap();
            i >= 10
        }));
        let at_s0 = sent(&jar, "http://s0.a.test/").unwrap();
        assert_eq!(at_s0.split("; ").count(), 100);
    }

    /// RFC 6265 §5.3: expired cookies are evicted first, before any that
    /// was set or sent less recently.
    #[test]
    fn expired_cookies_are_evicted_before_live_ones() {
        let at = url("http://a.test/");
        let expired =
            cookie_store::Cookie::parse("old=1; Expires=Thu, 01 Jan 1970 00:00:00 GMT", &at)
                .unwrap();
        let jar = Jar::new();
        {
            let mut cookies = jar.write();
            // Held, expired since, and marked as used after all the others.
            cookies
                .stamps
                .insert(key_of(&expired), Stamps::new(0, u64::MAX));
            cookies.store =
                cookie_store::CookieStore::from_cookies([Ok::<_, ()>(expired.into_owned())], true)
                    .unwrap();
        }
        let fifty: Vec<String> = (0..50).map(|i| format!("c{i}=v")).collect();
        set(&jar, "http://a.test/", &refs(&fifty));
        assert_eq!(held(&jar), 50);
        let mut all = fifty.clone();
        all.sort_unstable();
        assert_eq!(sent(&jar, "http://a.test/"), Some(all.join("; ")));
    }

    /// `set`, as of `now` rather than the wall clock.
    fn set_at(jar: &Jar, at: &str, values: &[&str], now: time::OffsetDateTime) {
        let parsed = values.iter().filter_map(|v| parse_set_cookie(v)).collect();
        jar.store_at(parsed, &url(at), now);
    }

    /// The count a jar answers [`is_empty`](CookieStore::is_empty) by is
    /// taken once a store has made every change, its sweep of the expired
    /// included: a jar whose last cookie expired, swept by a response that
    /// keeps none (its cookie deletes one the jar does not hold), is empty.
    #[test]
    fn a_jar_whose_last_cookie_a_store_swept_is_empty() {
        let jar = Jar::new();
        let now = time::OffsetDateTime::now_utc();
        set_at(&jar, "http://a.test/", &["old=1; Max-Age=60"], now);
        assert!(!jar.is_empty());
        let later = now + time::Duration::minutes(2);
        set_at(&jar, "http://a.test/", &["gone=; Max-Age=0"], later);
        assert_eq!(held(&jar), 0);
        assert!(jar.is_empty());
    }

    /// The expiry of the cookie named `name` that `jar` holds.
    fn expiry_held(jar: &Jar, name: &str) -> Option<time::OffsetDateTime> {
        jar.read()
            .store
            .iter_any()
            .find(|cookie| cookie.name() == name)
            .and_then(expiry_of)
    }

    /// A response's cookies are taken as of one time, the `now` it is
    /// given — the year 3000 here, past dates the wall clock has not
    /// reached: a cookie expired by then is not kept, one set to delete a
    /// held cookie deletes it, a held one expired by then is replaced by
    /// one created anew, and a `Max-Age` counts from it, to the second.
    #[test]
    fn a_responses_cookies_are_taken_as_of_its_now() {
        let now = time::OffsetDateTime::from_unix_timestamp(32_503_680_000).unwrap();
        assert_eq!(now.year(), 3000);
        let jar = Jar::new();
        set(
            &jar,
            "http://a.test/",
            &[
                "gone=1; Expires=Mon, 01 Jan 2900 00:00:00 GMT",
                "stale=1; Expires=Mon, 01 Jan 2900 00:00:00 GMT",
                "kept=1",
            ],
        );
        assert_eq!(held(&jar), 3);
        set_at(
            &jar,
            "http://a.test/",
            &[
                "gone=; Expires=Mon, 01 Jan 2900 00:00:00 GMT",
                "old=2; Expires=Mon, 01 Jan 2900 00:00:00 GMT",
                "stale=2",
                "aged=3; Max-Age=60",
            ],
            now,
        );
        assert_eq!(
            pairs_held(&jar),
            ["aged=3", "kept=1", "stale=2"].map(str::to_owned)
        );
        assert_eq!(
            expiry_held(&jar, "aged"),
            Some(now + time::Duration::MINUTE)
        );
        assert_eq!(expiry_held(&jar, "stale"), None);
        // `stale` replaced one expired by `now`: created after `kept`,
        // it is sent after it (§5.4 step 2).
        assert_eq!(
            jar.cookies(&url("http://a.test/")).unwrap(),
            "kept=1; stale=2; aged=3"
        );
    }

    /// A request's cookies are sent as of one reading of the clock, its
    /// `now` — the year 3000 here, which the wall clock has not reached:
    /// those expired by then are not sent, though the wall clock finds
    /// them alive. It is read once for the request (a `FnOnce`), and not
    /// at all for a host no cookie is held for.
    #[test]
    fn a_requests_cookies_are_sent_as_of_its_now() {
        let year_3000 = time::OffsetDateTime::from_unix_timestamp(32_503_680_000).unwrap();
        let jar = Jar::new();
        set(
            &jar,
            "http://a.test/",
            &[
                "old=1; Expires=Mon, 01 Jan 2900 00:00:00 GMT",
                "session=2",
                "later=3; Expires=Fri, 01 Jan 3100 00:00:00 GMT",
            ],
        );
        let reads = &std::cell::Cell::new(0);
        let at = |when: time::OffsetDateTime| {
            move || {
                reads.set(reads.get() + 1);
                when
            }
        };
        let to = url("http://a.test/");
        let cookies = jar.read();
        assert_eq!(
            cookies.header_for(&to, at(year_3000)).as_deref(),
            Some("session=2; later=3")
        );
        assert_eq!(
            cookies
                .header_for(&to, at(time::OffsetDateTime::now_utc()))
                .as_deref(),
            Some("old=1; session=2; later=3")
        );
        assert_eq!(reads.get(), 2);
        assert_eq!(
            cookies.header_for(&url("http://b.test/"), at(year_3000)),
            None
        );
        assert_eq!(reads.get(), 2, "no cookie held for b.test: no clock read");
    }

    /// Once the earliest expiry has passed, the next cookie taken sweeps
    /// the expired ones (its eviction, here run as of a time past that
    /// expiry rather than waited for), and the earliest expiry becomes
    /// that of those left.
    #[test]
    fn an_expired_cookie_is_swept_once_the_earliest_expiry_has_passed() {
        let jar = Jar::new();
        set(
            &jar,
            "http://a.test/",
            &["short=1; Max-Age=60", "long=2; Max-Age=600", "session=3"],
        );
        let expiry = |name: &str| {
            jar.read()
                .store
                .iter_any()
                .find(|cookie| cookie.name() == name)
                .and_then(expiry_of)
        };
        let (short, long) = (expiry("short"), expiry("long"));
        assert!(short.is_some() && short < long);
        assert_eq!(jar.read().earliest_expiry, short);
        set(&jar, "http://b.test/", &["other=4"]);
        let past_the_short = short.unwrap() + time::Duration::SECOND;
        jar.write()
            .evict_at(std::iter::once("b.test"), past_the_short);
        assert_eq!(held(&jar), 3);
        assert_eq!(
            pairs_held(&jar),
            ["long=2", "other=4", "session=3"].map(str::to_owned)
        );
        assert_eq!(jar.read().earliest_expiry, long);
    }

    /// Eviction takes as many as its list of candidates holds past the
    /// limit, whatever the count it was called on says: a count that had
    /// drifted above the cookies held would evict fewer, not panic on a
    /// server's `Set-Cookie`.
    #[test]
    fn eviction_is_bounded_by_the_cookies_not_by_their_count() {
        let jar = Jar::new();
        set(&jar, "http://a.test/", &["a=1", "b=2", "c=3"]);
        set(&jar, "http://b.test/", &["d=4"]);
        jar.write().stamps.miscount(5);
        jar.write().evict_least_recently_used(Some("a.test"), 1);
        assert_eq!(pairs_held(&jar), ["c=3", "d=4"].map(str::to_owned));
        jar.write().evict_least_recently_used(None, 1);
        assert_eq!(pairs_held(&jar), ["d=4"].map(str::to_owned));
    }

    /// Before the earliest expiry the jar is not gone through for expired
    /// cookies (one it holds against its bound stays, for the test's
    /// sake); past a limit, a domain's or the jar's, the expired still go
    /// first, before any live cookie, whatever the bound says.
    #[test]
    fn before_the_earliest_expiry_no_sweep_but_past_a_limit_the_expired_go_first() {
        let jar = Jar::new();
        {
            let mut cookies = jar.write();
            let mut expired = Vec::new();
            for host in ["a.test", "c.test"] {
                let at = url(&format!("http://{host}/"));
                let cookie = cookie_store::Cookie::parse(
                    "old=1; Expires=Thu, 01 Jan 1970 00:00:00 GMT",
                    &at,
                )
                .unwrap();
                // Marked as used after all the others.
                cookies
                    .stamps
                    .insert(key_of(&cookie), Stamps::new(0, u64::MAX));
                expired.push(cookie.into_owned());
            }
            cookies.store =
                cookie_store::CookieStore::from_cookies(expired.into_iter().map(Ok::<_, ()>), true)
                    .unwrap();
            assert_eq!(cookies.earliest_expiry, None);
        }
        set(&jar, "http://b.test/", &["b=1"]);
        let forty_nine: Vec<String> = (0..49).map(|i| format!("c{i}=v")).collect();
        set(&jar, "http://a.test/", &refs(&forty_nine));
        assert_eq!(held(&jar), 52);
        // a.test's 51st: its expired one goes, not its least recent.
        set(&jar, "http://a.test/", &["c49=v"]);
        assert_eq!(held(&jar), 52);
        assert_eq!(
            sent(&jar, "http://a.test/").unwrap().split("; ").count(),
            50
        );
        // Past 3000 in all: c.test's expired one goes, then the least
        // recent live one (b.test's).
        let fifty: Vec<String> = (0..50).map(|i| format!("c{i}=v")).collect();
        for host in 0..59 {
            set(&jar, &format!("http://h{host}.test/"), &refs(&fifty));
        }
        assert_eq!(held(&jar), 3000);
        assert_eq!(sent(&jar, "http://b.test/"), None);
        assert!(jar
            .read()
            .store
            .iter_any()
            .all(|cookie| cookie.name() != "old"));
    }

    /// RFC 6265 §6.1, §5.3: at most 3000 cookies in all; past that the
    /// least recently set or sent goes first, whichever its domain.
    #[test]
    fn the_jar_keeps_3000_cookies_and_drops_the_least_recently_set_or_sent() {
        let jar = Jar::new();
        let fifty: Vec<String> = (0..50).map(|i| format!("c{i}=v")).collect();
        for host in 0..60 {
            set(&jar, &format!("http://h{host}.test/"), &refs(&fifty));
        }
        assert_eq!(held(&jar), 3000);
        // `h0`'s, the first set, are sent: `h1`'s are the least recent.
        assert_eq!(
            sent(&jar, "http://h0.test/").unwrap().split("; ").count(),
            50
        );
        set(&jar, "http://h60.test/", &refs(&fifty));
        assert_eq!(held(&jar), 3000);
        assert_eq!(sent(&jar, "http://h1.test/"), None);
        for host in [0, 2, 59, 60] {
            let at = format!("http://h{host}.test/");
            assert_eq!(sent(&jar, &at).unwrap().split("; ").count(), 50, "{at}");
        }
    }

    #[test]
    fn a_cookie_for_another_domain_is_refused() {
        let jar = Jar::new();
        set(
            &jar,
            "http://a.test/",
            &["evil=1; Domain=b.test", "bad cookie"],
        );
        assert_eq!(sent(&jar, "http://b.test/"), None);
        assert_eq!(sent(&jar, "http://a.test/"), None);
    }
}
