//! When each cookie a [`Jar`](super::Jar) holds was created and last set
//! or sent, kept by domain, path and name as `cookie_store` keeps the
//! cookies: a request's cookies are found through them, by the domains of
//! its host, with the strs they hold (its `Cookie` header allocates
//! nothing per cookie, nor per domain of the jar), and one domain's
//! cookies are counted and ranked without going through the others'.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where `cookie_store` keeps a cookie: its domain (the host, for a
/// host-only cookie), path and name. The domain is what RFC 6265 §5.3
/// counts cookies per. Ordered as the strs are, the key breaks ties of
/// the eviction order.
pub(super) type CookieKey<'a> = (&'a str, &'a str, &'a str);

/// A [`CookieKey`] that owns its strs: one kept past a change to the store
/// it was read from.
pub(super) type OwnedKey = (String, String, String);

/// `cookie`'s key.
pub(super) fn key_of<'a>(cookie: &'a cookie_store::Cookie<'_>) -> CookieKey<'a> {
    let domain = match &cookie.domain {
        cookie_store::CookieDomain::HostOnly(domain)
        | cookie_store::CookieDomain::Suffix(domain) => domain.as_str(),
        cookie_store::CookieDomain::NotPresent | cookie_store::CookieDomain::Empty => "",
    };
    (domain, &cookie.path, cookie.name())
}

/// `key`, owning its strs.
pub(super) fn owned((domain, path, name): CookieKey<'_>) -> OwnedKey {
    (domain.to_owned(), path.to_owned(), name.to_owned())
}

/// `key`'s strs.
pub(super) fn borrowed(key: &OwnedKey) -> CookieKey<'_> {
    (&key.0, &key.1, &key.2)
}

/// When a cookie was created and last used, on the jar's clock (a count).
#[derive(Debug)]
pub(super) struct Stamps {
    /// When it was first set: a cookie set again keeps it (RFC 6265 §5.3
    /// step 11.3). Of cookies with paths of one length, the earlier created
    /// is sent first (§5.4 step 2).
    pub(super) created: u64,
    /// When it was last set or sent: the order in which cookies are
    /// evicted (§5.3: the earliest last-access first). Sending marks it
    /// under the jar's shared lock ([`Stamps::mark_sent`]).
    used: AtomicU64,
}

impl Stamps {
    pub(super) fn new(created: u64, used: u64) -> Stamps {
        Stamps {
            created,
            used: AtomicU64::new(used),
        }
    }

    /// When it was last set or sent.
    pub(super) fn used(&self) -> u64 {
        // The jar's lock orders a set after every send before it: none
        // is read while another marks it.
        self.used.load(Ordering::Relaxed)
    }

    /// Marks it sent at `now`, a count taken from the clock. Requests
    /// given their cookies side by side take their counts in one order
    /// and may mark in the other: the later count stays, as if they had
    /// marked in turn.
    pub(super) fn mark_sent(&self, now: u64) {
        self.used.fetch_max(now, Ordering::Relaxed);
    }
}

/// The names of one domain and path's cookies.
type ByName = HashMap<String, Stamps>;

/// The paths of one domain's cookies.
type ByPath = HashMap<String, ByName>;

/// The [`Stamps`] of a jar's cookies, by domain, then path, then name.
#[derive(Debug, Default)]
pub(super) struct StampsByKey {
    /// No map in it is empty: a domain's count is its paths' counts.
    domains: HashMap<String, ByPath>,
    /// How many stamps `domains` holds.
    len: usize,
}

impl StampsByKey {
    /// How many stamps it holds.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// How many stamps the cookies for `domain` have.
    pub(super) fn len_of(&self, domain: &str) -> usize {
        self.domains
            .get(domain)
            .map_or(0, |paths| paths.values().map(HashMap::len).sum())
    }

    fn get_mut(&mut self, (domain, path, name): CookieKey<'_>) -> Option<&mut Stamps> {
        self.domains.get_mut(domain)?.get_mut(path)?.get_mut(name)
    }

    /// Stamps `key` set at `now`: created then, unless it has stamps,
    /// whose creation it keeps (RFC 6265 §5.3 step 11.3).
    pub(super) fn set(&mut self, key: CookieKey<'_>, now: u64) {
        match self.get_mut(key) {
            Some(stamps) => *stamps.used.get_mut() = now,
            None => self.insert(key, Stamps::new(now, now)),
        }
    }

    /// Gives `key` `stamps`, in place of any it had.
    pub(super) fn insert(&mut self, key: CookieKey<'_>, stamps: Stamps) {
        if let Some(held) = self.get_mut(key) {
            *held = stamps;
            return;
        }
        let (domain, path, name) = key;
        self.domains
            .entry(domain.to_owned())
            .or_default()
            .entry(path.to_owned())
            .or_default()
            .insert(name.to_owned(), stamps);
        self.len += 1;
    }

    /// Drops `key`'s stamps, and the maps they leave empty.
    pub(super) fn remove(&mut self, (domain, path, name): CookieKey<'_>) -> Option<Stamps> {
        let paths = self.domains.get_mut(domain)?;
        let names = paths.get_mut(path)?;
        let removed = names.remove(name)?;
        if names.is_empty() {
            paths.remove(path);
            if paths.is_empty() {
                self.domains.remove(domain);
            }
        }
        // Reached only once a stamp was taken out: an absent key, or one
        // removed twice, returned above, and the count never goes below
        // what the maps hold.
        self.len -= 1;
        Some(removed)
    }

    /// Makes the count say `by` more stamps than it holds: a drift, for
    /// tests that nothing trusts the count further than the stamps.
    #[cfg(test)]
    pub(super) fn miscount(&mut self, by: usize) {
        self.len += by;
    }

    /// Every stamp, with its key.
    pub(super) fn iter(&self) -> impl Iterator<Item = (CookieKey<'_>, &Stamps)> {
        self.domains.iter().flat_map(stamps_of)
    }

    /// The stamps of the cookies for `domain`, with their keys.
    pub(super) fn iter_of<'a>(
        &'a self,
        domain: &str,
    ) -> impl Iterator<Item = (CookieKey<'a>, &'a Stamps)> {
        self.domains
            .get_key_value(domain)
            .into_iter()
            .flat_map(stamps_of)
    }
}

/// The stamps of one domain's cookies, with their keys.
fn stamps_of<'a>(
    (domain, paths): (&'a String, &'a ByPath),
) -> impl Iterator<Item = (CookieKey<'a>, &'a Stamps)> {
    paths.iter().flat_map(move |(path, names)| {
        names
            .iter()
            .map(move |(name, stamps)| ((domain.as_str(), path.as_str(), name.as_str()), stamps))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key removed twice, or never held, removes nothing and leaves the
    /// count as the maps have it (it cannot wrap below zero).
    #[test]
    fn removing_a_key_not_held_changes_nothing() {
        let mut stamps = StampsByKey::default();
        assert!(stamps.remove(("a.test", "/", "x")).is_none());
        stamps.set(("a.test", "/", "x"), 1);
        stamps.set(("a.test", "/b", "y"), 2);
        assert!(stamps.remove(("a.test", "/", "x")).is_some());
        for key in [
            ("a.test", "/", "x"),
            ("a.test", "/", "y"),
            ("b.test", "/", "x"),
        ] {
            assert!(stamps.remove(key).is_none());
        }
        assert_eq!((stamps.len(), stamps.len_of("a.test")), (1, 1));
        assert!(stamps.remove(("a.test", "/b", "y")).is_some());
        assert!(stamps.remove(("a.test", "/b", "y")).is_none());
        assert_eq!((stamps.len(), stamps.iter().count()), (0, 0));
    }

    /// Two requests take their counts in one order and may mark a cookie
    /// in the other: the later count stays, as if they had marked in
    /// turn — the cookie counts as sent by the later request.
    #[test]
    fn a_send_marking_late_leaves_the_later_sends_mark() {
        let stamps = Stamps::new(1, 1);
        stamps.mark_sent(5);
        stamps.mark_sent(3);
        assert_eq!(stamps.used(), 5);
        assert_eq!(stamps.created, 1);
    }
}
