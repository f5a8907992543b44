//! [`Resolve`]: the seam name resolution goes through — host and port in,
//! addresses out, answered from any thread through a [`ResolveAnswer`].

use std::fmt;
use std::io;
use std::net::SocketAddr;

/// A blocking lookup of one name: its addresses, with port 0 (what the
/// default resolver's threads do: `getaddrinfo`, or a test's stand-in).
pub(crate) type Lookup = dyn Fn(&str) -> io::Result<Vec<SocketAddr>> + Send + Sync;

/// Resolves host names for a client's connections
/// ([`ClientBuilder::resolver`](crate::ClientBuilder::resolver)). The
/// default resolves with the operating system's `getaddrinfo` on a small
/// pool of threads of its own.
///
/// A resolver is asked only for DNS names: IP literals, and hosts given to
/// [`ClientBuilder::resolve`](crate::ClientBuilder::resolve), never reach
/// it. It is asked for the origin's host, the proxy's host, and for a
/// `socks5://` proxy both — each in lower case, as a URL's host is read (a
/// name that is not ASCII in IDNA's ASCII form), with its final dot if the
/// URL had one.
///
/// # Examples
///
/// A resolver that answers from a table of its own:
///
/// ```
/// use std::net::SocketAddr;
/// use tickless_client::{Resolve, ResolveAnswer};
///
/// struct Table;
///
/// impl Resolve for Table {
///     fn resolve(&self, host: &str, port: u16, answer: ResolveAnswer) {
///         match host {
///             "db.internal" => answer.addresses([SocketAddr::from(([10, 0, 0, 7], port))]),
///             _ => answer.failed(std::io::ErrorKind::NotFound.into()),
///         }
///     }
/// }
/// ```
pub trait Resolve: Send + Sync + 'static {
    /// Resolves `host` (a DNS name) for a connection to `port`, and
    /// completes `answer` with the addresses — now, or later from any
    /// thread. It is called on the thread that needs a connection, which
    /// may be an event loop: it must not block (hand a slow lookup to a
    /// thread of its own). An answer dropped without completing fails the
    /// request, as a lookup that failed — as does a panic here, which
    /// goes no further than the request it was asked for.
    fn resolve(&self, host: &str, port: u16, answer: ResolveAnswer);
}

/// What a lookup's answer runs: the client's next step.
type Done = Box<dyn FnOnce(io::Result<Vec<SocketAddr>>) + Send>;

/// How a [`Resolve`] answers one lookup: exactly once, from any thread.
#[must_use = "a lookup not answered fails its request when the answer is dropped"]
pub struct ResolveAnswer {
    done: Option<Done>,
}

impl ResolveAnswer {
    pub(crate) fn new(done: impl FnOnce(io::Result<Vec<SocketAddr>>) + Send + 'static) -> Self {
        ResolveAnswer {
            done: Some(Box::new(done)),
        }
    }

    /// The host's addresses, in the order to try them (happy eyeballs
    /// interleaves the families, keeping the order within each, and tries
    /// an address given twice once). None at
    /// all fails the lookup with `NotFound`. An address with port 0 (as
    /// `getaddrinfo` answers) takes the port of the connection; any other
    /// port is used as given.
    pub fn addresses(mut self, addresses: impl IntoIterator<Item = SocketAddr>) {
        let addresses: Vec<SocketAddr> = addresses.into_iter().collect();
        let result = match addresses.is_empty() {
            true => Err(io::Error::new(
                io::ErrorKind::NotFound,
                "the resolver found no address",
            )),
            false => Ok(addresses),
        };
        self.complete(result);
    }

    /// The lookup failed with `error`.
    pub fn failed(mut self, error: io::Error) {
        self.complete(Err(error));
    }

    fn complete(&mut self, result: io::Result<Vec<SocketAddr>>) {
        if let Some(done) = self.done.take() {
            done(result);
        }
    }
}

impl Drop for ResolveAnswer {
    fn drop(&mut self) {
        self.complete(Err(io::Error::other(
            "the resolver dropped the lookup without answering",
        )));
    }
}

impl fmt::Debug for ResolveAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResolveAnswer")
            .field("answered", &self.done.is_none())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    type Seen = Arc<Mutex<Vec<io::Result<Vec<SocketAddr>>>>>;

    fn recorded() -> (ResolveAnswer, Seen) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let answer = ResolveAnswer::new(move |result| sink.lock().unwrap().push(result));
        (answer, seen)
    }

    #[test]
    fn an_answer_completes_once_and_a_dropped_one_fails() {
        let addr: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let (answer, seen) = recorded();
        answer.addresses([addr]);
        assert_eq!(seen.lock().unwrap().len(), 1);
        assert_eq!(seen.lock().unwrap()[0].as_ref().unwrap(), &vec![addr]);
        let (answer, seen) = recorded();
        answer.addresses([]);
        let kind = seen.lock().unwrap()[0].as_ref().unwrap_err().kind();
        assert_eq!(kind, io::ErrorKind::NotFound);
        let (answer, seen) = recorded();
        drop(answer);
        assert_eq!(seen.lock().unwrap().len(), 1);
        assert!(seen.lock().unwrap()[0].is_err());
    }
}
