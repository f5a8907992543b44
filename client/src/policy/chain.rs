//! [`Chain`]: one request across its hops — the first exchange, then one
//! per redirect followed — and what every hop adds to it: a `User-Agent`,
//! `Accept-Encoding`, credentials from the URL, cookies.

use super::attempts::{Attempts, Sender, View};
use super::hop::{Hop, HopBody, HopSettings};
use super::redirect::{self, Attempt, Decision};
use super::upload::Upload;
use super::{decode, CookieStore, Policies};
use super::{hedge, retry};
use crate::basic_auth;
use crate::dispatch::Dispatcher;
use crate::error::{Error, InvalidRequest, RedirectError};
use crate::event_loop::EventLoop;
use crate::events::EventListener;
use crate::exchange::{park_for_news, Deadlines, Exchange, Head};
use http::header::{AUTHORIZATION, COOKIE, HOST, LOCATION, SET_COOKIE};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// A request as the caller built it, before its first hop.
pub(crate) struct Request {
    pub(crate) method: http::Method,
    pub(crate) uri: http::Uri,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: Upload,
    pub(crate) deadlines: Deadlines,
    pub(crate) listener: Arc<dyn EventListener>,
    /// The request's own redirect policy, over the client's.
    pub(crate) redirect: Option<redirect::Policy>,
    /// The request's own say on decompression, over the client's.
    pub(crate) decompress: Option<bool>,
    /// The request's own retry policy, over the client's.
    pub(crate) retry: Option<retry::Policy>,
    /// The request's own hedging policy, over the client's.
    pub(crate) hedge: Option<hedge::Policy>,
}

/// A request made before, for loop detection: its method, its URL, and
/// how many responses of the chain had set cookies by then.
struct Visit {
    method: http::Method,
    uri: http::Uri,
    cookies_set: usize,
}

/// One request across its hops: the caller's future polls
/// ([`poll`](Self::poll)) or waits ([`wait`](Self::wait)) for the head of
/// the last hop; each hop's [`Attempts`] give its head, which
/// [`on_head`](Self::on_head) follows if it is a redirect.
pub(crate) struct Chain {
    dispatcher: Arc<Dispatcher>,
    policies: Arc<Policies>,
    redirect: redirect::Policy,
    hop: Hop,
    settings: HopSettings,
    /// The hops before the current one, oldest first: none until a
    /// redirect is followed (see [`visits`](Self::visits)).
    earlier: Vec<Visit>,
    /// Responses of the chain that had set cookies when the current hop
    /// was sent.
    hop_cookies_set: usize,
    /// Responses of the chain that set cookies.
    cookies_set: usize,
    retry: retry::Policy,
    hedge: hedge::Policy,
    attempts: Attempts,
    /// The current hop's head became a response, whose body owns its
    /// exchange from then on (see [`body_made`](Self::body_made)).
    body_made: bool,
    /// The request's span, when a `tracing` subscriber wants it: its
    /// `status` is the head given to the caller's (see
    /// [`head_given`](Self::head_given)), not any attempt's, as a hedged
    /// copy that lost may answer after the winner. (Never one without the
    /// `tracing` feature.)
    span: Option<Span>,
}

impl Chain {
    /// Sends the first hop of `request`; its request deadline is fixed now.
    pub(crate) fn start(
        dispatcher: &Arc<Dispatcher>,
        policies: &Arc<Policies>,
        request: Request,
    ) -> Result<Chain, Error> {
        let decompress = request.decompress.unwrap_or(policies.decompress);
        let (uri, headers) = if request.headers.is_empty() && !has_userinfo(&request.uri) {
            (request.uri, policies.default_headers(decompress))
        } else {
            let mut headers = request.headers;
            // The URI's credentials are the request's own `Authorization`,
            // which a default of the client's does not replace.
            let uri = credentials_to_header(request.uri, &mut headers)?;
            policies.add_default_headers(&mut headers, decompress);
            (uri, Arc::new(headers))
        };
        let mut hop = Hop {
            method: request.method,
            uri,
            headers,
            cookie: None,
            body: HopBody::from_upload(request.body),
        };
        hop.cookie = store_cookies(policies.cookies.as_deref(), &hop);
        let (listener, span) = traced(request.listener, &hop);
        let settings = HopSettings {
            deadlines: request.deadlines,
            listener,
            submitted: dispatcher.clock().now(),
            request_id: next_request_id(),
            decompress,
        };
        let retry = request.retry.unwrap_or_else(|| policies.retry.clone());
        let hedge = request.hedge.unwrap_or_else(|| policies.hedge.clone());
        let sender = Sender {
            dispatcher,
            policies,
            settings: &settings,
            hop: &mut hop,
        };
        let submitted = Some(settings.submitted);
        let attempts = Attempts::first(
            retry.clone(),
            hedge.clone(),
            sender,
            submitted,
            |exchange| dispatcher.submit_at(exchange, submitted),
        )?;
        Ok(Chain {
            dispatcher: dispatcher.clone(),
            policies: policies.clone(),
            redirect: request
                .redirect
                .unwrap_or_else(|| policies.redirect.clone()),
            hop,
            settings,
            earlier: Vec::new(),
            hop_cookies_set: 0,
            cookies_set: 0,
            retry,
            hedge,
            attempts,
            body_made: false,
            span,
        })
    }

    /// The current hop's head became a response: its body owns the
    /// exchange (and lets it go when dropped), not the chain.
    pub(crate) fn body_made(&mut self) {
        self.body_made = true;
    }

    /// The current hop's head, with `status`, is given to the caller as
    /// the response: the request span's `status`, once (see
    /// [`response_given`](crate::trace::response_given)). Not in the
    /// listener's `on_status`, told of every attempt's head, a losing
    /// hedged copy's too.
    pub(crate) fn head_given(&self, status: http::StatusCode) {
        #[cfg(feature = "tracing")]
        if let Some(span) = &self.span {
            crate::trace::response_given(span, status, self.current().id);
        }
        #[cfg(not(feature = "tracing"))]
        let _ = status;
    }

    /// The exchange of the hop under way (whose head is waited for first).
    pub(crate) fn current(&self) -> &Arc<Exchange> {
        self.attempts.current()
    }

    /// Cancels what is in flight, or what a head come and not taken would
    /// have sent next; whether anything was.
    pub(crate) fn cancel(&self) -> bool {
        self.attempts.cancel(self.view())
            || self
                .attempts
                .cancel_before_following(|head| self.may_follow(head))
    }

    /// Whether the next poll may follow `head` rather than give it back: a
    /// 417 repeated, a status retried, a redirect whose body, if it takes
    /// one, can go (see [`redirect_of`](Self::redirect_of)) — counting a
    /// stream kept unsent for the hop after it, which is put back only then
    /// (see [`on_head`](Self::on_head)).
    fn may_follow(&self, head: &Head) -> bool {
        self.attempts.may_send_again_for(head, &self.hop)
            || self.redirect_target(head).is_some_and(|(_, _, keep_body)| {
                !keep_body || self.attempts.body_goes_on(&self.hop)
            })
    }

    /// Whether the next poll has an outcome at once.
    pub(crate) fn is_settled(&self) -> bool {
        self.attempts.is_settled(self.view())
    }

    /// The hop and the client's parts, for the attempts to look at.
    fn view(&self) -> View<'_> {
        View {
            dispatcher: &self.dispatcher,
            policies: &self.policies,
            settings: &self.settings,
            hop: &self.hop,
        }
    }

    /// The hop's attempts, and what sending one needs.
    fn parts(&mut self) -> (&mut Attempts, Sender<'_>) {
        let sender = Sender {
            dispatcher: &self.dispatcher,
            policies: &self.policies,
            settings: &self.settings,
            hop: &mut self.hop,
        };
        (&mut self.attempts, sender)
    }

    /// The last hop's head, or the chain's error.
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<Head, Error>> {
        loop {
            let (attempts, sender) = self.parts();
            let head = match attempts.poll(sender, cx) {
                Poll::Ready(Ok(head)) => head,
                Poll::Ready(Err(error)) => return Poll::Ready(Err(self.failure(error))),
                Poll::Pending => return Poll::Pending,
            };
            if let Some(head) = self.on_head(head)? {
                return Poll::Ready(Ok(head));
            }
        }
    }

    /// [`poll`](Self::poll), blocking: on the exchange's own wait (which
    /// spins briefly before it sleeps) while one attempt is all there is,
    /// else parked between polls.
    ///
    /// [`Error::WouldDeadlock`], at once, if the head has not come and the
    /// wait would stop the loop the calling thread runs (see
    /// [`stalls_here`](Self::stalls_here)).
    pub(crate) fn wait(&mut self) -> Result<Head, Error> {
        loop {
            if self.stalls_here() {
                return Err(Error::WouldDeadlock);
            }
            if !self.attempts.single() {
                let group = self.dispatcher.group().clone();
                return block_on(group.loops(), |cx| self.poll(cx));
            }
            let (attempts, sender) = self.parts();
            match attempts.wait_single(sender) {
                Some(Ok(head)) => {
                    if let Some(head) = self.on_head(head)? {
                        return Ok(head);
                    }
                }
                Some(Err(error)) => return Err(self.failure(error)),
                None => {}
            }
        }
    }

    /// Whether a blocking wait for the current attempt's head, on the
    /// calling thread, would never end: no outcome is there to give, and the thread
    /// runs the turns of the loop it needs — its connection's, or the one
    /// it is bound for ([`Exchange::stalls_here`]); or, with a group of
    /// one loop, that loop, which every exchange of the client needs,
    /// wherever it waits (for a connection the host's limit holds, for one
    /// being opened, for a retry to be sent). With several loops, one still
    /// to be placed is not refused: a new connection never goes on the
    /// loop it is opened from (see
    /// [`EventLoopGroup`](crate::event_loop::EventLoopGroup)).
    ///
    /// Two thread-local reads on a thread that runs no loop: a blocking
    /// caller's wait costs no more.
    fn stalls_here(&self) -> bool {
        if !crate::event_loop::on_any_loop() {
            return false;
        }
        if self.is_settled() {
            return false;
        }
        let current = self.current();
        match self.dispatcher.group().loops() {
            [only] => only.stalls_here(),
            _ => !current.is_settled() && current.stalls_here(),
        }
    }

    /// The chain's error, from the current hop's: after a redirect, the
    /// server answered the request (a hop before), so nothing says it was
    /// not processed ([`Error::is_unprocessed`]).
    fn failure(&self, error: Error) -> Error {
        if self.earlier.is_empty() {
            error
        } else {
            error.with_unprocessed(false)
        }
    }

    /// The URL of the hop under way (the final URL once a head is given
    /// back).
    pub(crate) fn url(&self) -> &http::Uri {
        &self.hop.uri
    }

    /// The current hop's head has come: keeps its cookies, then follows it
    /// if it is a redirect to follow (`None`: wait on the new current
    /// exchange), or gives it back as the response's.
    fn on_head(&mut self, head: Head) -> Result<Option<Head>, Error> {
        // A hop sent again (a status retried, a 417 repeated) takes the
        // cookies its answer set, as a redirect's next hop does.
        if self.keep_cookies(&head) {
            self.choose_store_cookies();
        }
        // A streamed body none of which went, kept for a 417 or a redirect
        // that answered the hop's `Expect`, is the hop's again: whole, for
        // the hop that answer leads to. If none took it, the chain ends
        // with this answer, and the body goes now (a reader's pump, its
        // source), not with the future.
        self.attempts.take_back_unsent(&mut self.hop);
        let followed = self.follow(head);
        self.hop.body.let_go_unsent();
        followed
    }

    /// [`on_head`](Self::on_head), its cookies kept: follows `head` — a
    /// 417 repeated, a status retried, a redirect — or gives it back.
    fn follow(&mut self, head: Head) -> Result<Option<Head>, Error> {
        // A 417 to the hop's `Expect` goes again without it before any
        // status retry: retried as it was, it would meet the same 417.
        let (attempts, sender) = self.parts();
        if attempts.repeat_without_expectation(&head, sender) {
            return Ok(None);
        }
        let (attempts, sender) = self.parts();
        if attempts.retry_status(&head, sender) {
            return Ok(None);
        }
        let Some(next) = self.redirect_of(&head) else {
            return Ok(Some(head));
        };
        let (next, method, keep_body) = next;
        if self.hop.uri.scheme() == Some(&http::uri::Scheme::HTTPS)
            && next.scheme() == Some(&http::uri::Scheme::HTTP)
            && !self.redirect.allows_downgrade()
        {
            return Err(self.stopped(next, RedirectError::Downgrade));
        }
        let previous: Vec<http::Uri> = self.visits().map(|(_, uri, _)| uri.clone()).collect();
        let attempt = Attempt {
            status: head.status,
            next: &next,
            previous: &previous,
        };
        match self.redirect.decide(attempt) {
            Decision::Stop => return Ok(Some(head)),
            Decision::Fail(reason) => return Err(self.stopped(next, reason)),
            Decision::Follow => {}
        }
        if self.redirect.detects_loops() && self.visited(&method, &next) {
            return Err(self.stopped(next, RedirectError::Loop));
        }
        let target = next.clone();
        match self.next_hop(head.status, next, method, keep_body) {
            Ok(()) => Ok(None),
            Err(error) => {
                // No hop will take its connection: it goes now.
                self.current().body_dropped();
                Err(self.hop_refused(error, target))
            }
        }
    }

    /// The chain's error when the hop to `next` could not be made: one
    /// refused before it was sent is no [`Error::InvalidRequest`] — that
    /// says nothing was sent, and the hops before it were — but the chain
    /// stopped at it ([`RedirectError::InvalidHop`]), listing them (the one
    /// that answered last among them: [`next_hop`](Self::next_hop) has put
    /// it there).
    fn hop_refused(&self, error: Error, next: http::Uri) -> Error {
        let Error::InvalidRequest(invalid) = error else {
            return self.failure(error);
        };
        let earlier = self.earlier.iter().map(|visit| visit.uri.clone());
        stopped_chain(earlier, next, RedirectError::InvalidHop(invalid))
    }

    /// The decoding of the response whose head this is, if it is to be
    /// decoded (see [`decode::decoder_for`]); its headers lose what
    /// described the encoded body. A response refused for its codings lets
    /// its connection go, as a dropped body does (none will be made), and
    /// its exchange fails with the caller's error — told so even if it had
    /// completed (see `Exchange::body_checked`), as is one whose body the
    /// reader fails as it decodes it.
    pub(crate) fn decoding(&self, head: &mut Head) -> Result<Option<decode::Decoding>, Error> {
        // The exchange has read the head already: it is to be decoded only
        // where decompression is on and `is_decoded` says so (most heads
        // are not, and are not looked at again).
        let decoder = if self.current().is_encoded() {
            let limit = self.dispatcher.config().limits.max_body_bytes;
            let remote = || self.current().remote_name();
            decode::decoder_for(
                &self.hop.method,
                head.status,
                &mut head.headers,
                limit,
                remote,
            )
        } else {
            Ok(None)
        };
        match decoder {
            Ok(Some(decoder)) => {
                let remote = self.current().remote_name();
                Ok(Some(decode::Decoding::new(decoder, remote)))
            }
            // Not decoded: nothing of the body will be checked for its
            // coding (see `Exchange::body_checked`).
            Ok(None) => {
                self.current().body_checked();
                Ok(None)
            }
            Err(error) => {
                self.current().body_failed(&error);
                Err(error)
            }
        }
    }

    /// The length of the body the caller will read, if the head tells it:
    /// the declared one ([`Head::declared_length`]) of a body delivered as
    /// it came, none of one `decoding` undoes (which has its
    /// `Content-Length` taken off: see [`decoding`](Self::decoding)) —
    /// what [`declared_body_length`](crate::exchange::declared_body_length)
    /// says of the head's headers then, as debug builds check.
    pub(crate) fn body_length(&self, head: &Head, decoding: bool) -> Option<u64> {
        let length = if decoding { None } else { head.declared_length };
        debug_assert_eq!(
            length,
            crate::exchange::declared_body_length(&self.hop.method, head.status, &head.headers),
            "the length declared, as the connection framed it and as the headers say"
        );
        length
    }

    /// Where a redirect to follow points, the method to follow it with and
    /// whether the body goes along; `None` if `head` is the response.
    fn redirect_of(&self, head: &Head) -> Option<(http::Uri, http::Method, bool)> {
        let (next, method, keep_body) = self.redirect_target(head)?;
        // A streamed body cannot go twice: the redirect is the response —
        // unless none of it went (it waited for `100 Continue`, and was put
        // back: `Attempts::take_back_unsent`).
        if keep_body && !self.hop.body.sendable() {
            return None;
        }
        Some((next, method, keep_body))
    }

    /// Where a redirect the policy follows points, the method to follow
    /// it with and whether the body goes along — whether or not that body
    /// can go (see [`redirect_of`](Self::redirect_of)).
    fn redirect_target(&self, head: &Head) -> Option<(http::Uri, http::Method, bool)> {
        if !self.redirect.follows_any() {
            return None;
        }
        let (method, keep_body) = redirect::next_method(head.status, &self.hop.method)?;
        let next = redirect::resolve(&self.hop.uri, head.headers.get(LOCATION)?)?;
        Some((next, method, keep_body))
    }

    /// Whether the chain has made this request already (same method and
    /// URL, normalised) with no cookie set since.
    fn visited(&self, method: &http::Method, uri: &http::Uri) -> bool {
        self.visits().any(|(visit_method, visit_uri, cookies_set)| {
            visit_method == method
                && cookies_set == self.cookies_set
                && redirect::same_url(visit_uri, uri)
        })
    }

    /// The chain's hops so far, the current one last: method, URL, and how
    /// many responses had set cookies when it was sent.
    fn visits(&self) -> impl Iterator<Item = (&http::Method, &http::Uri, usize)> {
        let current = (&self.hop.method, &self.hop.uri, self.hop_cookies_set);
        self.earlier
            .iter()
            .map(|visit| (&visit.method, &visit.uri, visit.cookies_set))
            .chain(std::iter::once(current))
    }

    /// The chain, with `next` at its end, stopped for `reason`. No
    /// response is made of the redirect that answered, so no body will
    /// read it: its connection is let go now (it drains or closes), as at
    /// a dropped body — else it would stay with the exchange until a body
    /// that may never end had come.
    fn stopped(&self, next: http::Uri, reason: RedirectError) -> Error {
        self.current().body_dropped();
        stopped_chain(self.visits().map(|(_, uri, _)| uri.clone()), next, reason)
    }

    /// Sends the hop to `next`, the current one having answered `status`;
    /// that one is among the [`earlier`](Self::earlier) hops first,
    /// whatever comes after (see [`hop_refused`](Self::hop_refused)).
    /// Listeners are told of the redirect once the next hop is an exchange,
    /// just before it is submitted: a hop refused before (its URL is no
    /// request) is not followed, and no events would follow it.
    fn next_hop(
        &mut self,
        status: http::StatusCode,
        next: http::Uri,
        method: http::Method,
        keep_body: bool,
    ) -> Result<(), Error> {
        // Listeners log it (the tracing one does): without the Location's
        // credentials, as the next hop goes (they become a header).
        let redirect = (self.hop.uri.clone(), without_credentials(next.clone()));
        self.earlier.push(Visit {
            method: self.hop.method.clone(),
            uri: self.hop.uri.clone(),
            cookies_set: self.hop_cookies_set,
        });
        let hop = &mut self.hop;
        if !redirect::same_origin(&hop.uri, &next) {
            let headers = Arc::make_mut(&mut hop.headers);
            redirect::strip_sensitive(headers);
            headers.remove(HOST);
        }
        if !keep_body {
            hop.body = HopBody::Replayable(bytes::Bytes::new());
            redirect::strip_body_headers(Arc::make_mut(&mut hop.headers));
        }
        hop.method = method;
        hop.uri = credentials_to_header(next, Arc::make_mut(&mut hop.headers))?;
        self.choose_store_cookies();
        let hop = &mut self.hop;
        // Submitted after what the last hop's loop is doing: a redirect
        // read whole there has its connection back in the pool by then,
        // for this hop to take. Its own body is not wanted: only then is
        // the redirect's connection told (it drains it, if small, and goes
        // back to the pool, else closes) — this hop, in the pool's queue
        // at its request's place, ahead of the requests sent after it,
        // takes it or its permit. Were they served first, one of them
        // could hold it with a body nobody reads before this request ends.
        let previous = self.attempts.current().clone();
        let dispatcher = self.dispatcher.clone();
        let sender = Sender {
            dispatcher: &self.dispatcher,
            policies: &self.policies,
            settings: &self.settings,
            hop,
        };
        self.attempts = Attempts::first(
            self.retry.clone(),
            self.hedge.clone(),
            sender,
            None,
            move |exchange| {
                let (from, to) = redirect;
                previous.listener.on_redirect(status, &from, &to);
                exchange.follows(&previous);
                let answered = previous.clone();
                previous.after_its_loop(move || {
                    dispatcher.submit(exchange);
                    answered.body_dropped();
                });
            },
        )?;
        self.hop_cookies_set = self.cookies_set;
        Ok(())
    }

    /// Keeps the cookies `head` sets, if the client has a store; whether it
    /// set any.
    fn keep_cookies(&mut self, head: &Head) -> bool {
        let Some(store) = &self.policies.cookies else {
            return false;
        };
        let mut set = head.headers.get_all(SET_COOKIE).iter().peekable();
        if set.peek().is_none() {
            return false;
        }
        let Some(url) = as_url(&self.hop.uri) else {
            return false;
        };
        store.set_cookies(&url, &mut set);
        self.cookies_set += 1;
        true
    }

    /// The hop's `Cookie` header chosen again from the store for its URL,
    /// unless the caller set one.
    fn choose_store_cookies(&mut self) {
        self.hop.cookie = store_cookies(self.policies.cookies.as_deref(), &self.hop);
    }
}

impl Drop for Chain {
    /// A head taken and made into no response leaves nobody to read its
    /// body: a panic in the caller's own code called from
    /// [`on_head`](Self::on_head) — a custom redirect policy, a cookie
    /// store — unwound through it, and the caller survived (a tokio task's
    /// panic is caught, its future dropped). Its connection is let go now
    /// (it drains or closes), as at a dropped body, not held with the
    /// exchange until a body that may never end has come. (The chain's
    /// own failures after a head let it go already; once more is nothing.)
    fn drop(&mut self) {
        let current = self.attempts.current();
        if !self.body_made && current.head_taken() {
            current.body_dropped();
        }
    }
}

/// A new request id: unique in the process.
fn next_request_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// `listener`, with a [`Traced`](crate::trace::Traced) one in front when a
/// `tracing` subscriber wants the request's span, and that span (else
/// `listener` as it is and no span: nothing allocated).
fn traced(listener: Arc<dyn EventListener>, hop: &Hop) -> (Arc<dyn EventListener>, Option<Span>) {
    #[cfg(feature = "tracing")]
    {
        let span = crate::trace::request_span(&hop.method, &hop.uri);
        if !span.is_disabled() {
            let traced = Arc::new(crate::trace::Traced { span: span.clone() });
            return (Arc::new(crate::events::Both(traced, listener)), Some(span));
        }
    }
    #[cfg(not(feature = "tracing"))]
    let _ = hop;
    (listener, None)
}

/// The request span [`traced`] gives: none without the `tracing` feature.
#[cfg(feature = "tracing")]
type Span = tracing::Span;
#[cfg(not(feature = "tracing"))]
type Span = std::convert::Infallible;

/// Runs `poll` to its outcome on this thread, parked between polls —
/// each park a blocking wait for news of exchanges that may be on any of
/// the client's `loops` ([`park_for_news`]): on a tokio worker, while an
/// executor drives them, the task of a loop waiting in that worker's slots
/// (the post of a copy or a retry put it there) runs on another thread
/// meanwhile; on a thread firing a wheel's entry, the wheel's due entries
/// fire.
fn block_on<T>(loops: &[Arc<EventLoop>], mut poll: impl FnMut(&mut Context<'_>) -> Poll<T>) -> T {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        match poll(&mut cx) {
            Poll::Ready(outcome) => return outcome,
            // A wake before the park makes the park return at once.
            Poll::Pending => park_for_news(loops),
        }
    }
}

/// The `url` crate's form of `uri`, for cookie stores: parsed from the
/// text `uri` displays as, written on the stack when it fits (`Url::parse`
/// copies it into a string of its own, so the text needs no allocation).
/// Measured by `tests/allocations_per_request.rs` (2026-12-05): the text
/// in a string of its exact length costs 1 more allocation per request
/// carrying cookies and 3 per exchange setting one; `uri.to_string()`
/// (grown as written) 3 and 9.
fn as_url(uri: &http::Uri) -> Option<url::Url> {
    /// The longest URI written on the stack: most are far shorter.
    const ON_STACK: usize = 256;
    // As `http::Uri` displays itself.
    let scheme = uri.scheme_str();
    let authority = uri.authority().map_or("", |authority| authority.as_str());
    let query = uri.query();
    let parts = [
        scheme.unwrap_or(""),
        if scheme.is_some() { "://" } else { "" },
        authority,
        uri.path(),
        if query.is_some() { "?" } else { "" },
        query.unwrap_or(""),
    ];
    let len: usize = parts.iter().map(|part| part.len()).sum();
    if len > ON_STACK {
        return url::Url::parse(&parts.concat()).ok();
    }
    let mut text = [0u8; ON_STACK];
    let mut at = 0;
    for part in parts {
        text[at..at + part.len()].copy_from_slice(part.as_bytes());
        at += part.len();
    }
    url::Url::parse(std::str::from_utf8(&text[..at]).ok()?).ok()
}

/// The store's `Cookie` header for the hop's URL ([`Hop::cookie`]), unless
/// the caller set a `Cookie` header.
fn store_cookies(store: Option<&dyn CookieStore>, hop: &Hop) -> Option<http::HeaderValue> {
    let store = store?;
    // The URL is built only for a store that may hold a cookie.
    if hop.headers.contains_key(COOKIE) || store.is_empty() {
        return None;
    }
    as_url(&hop.uri).and_then(|url| store.cookies(&url))
}

/// `uri` without its userinfo, which becomes `Authorization: Basic`
/// (percent-decoded, and only if the request has no `Authorization` and
/// the userinfo is not empty — `@` or `:@` alone is no credentials, as
/// the URL standard reads it; a decoded user name with a `:`, or a
/// control character in either part, is [`InvalidRequest::Userinfo`], as
/// RFC 7617 §2 makes it invalid):
/// credentials never go on the request line. Only the userinfo goes: the
/// rest of the URI — its path, query and port — stays as it came in, as
/// it does for a URI without one (a URL parser's normal form would remove
/// dot segments and drop a default port, which the request's `Host` and
/// `:authority` leave out; what it percent-encodes was encoded where the
/// URI came in, `api::input`).
fn credentials_to_header(
    uri: http::Uri,
    headers: &mut http::HeaderMap,
) -> Result<http::Uri, Error> {
    let Some((userinfo, host)) = uri
        .authority()
        .and_then(|authority| authority.as_str().rsplit_once('@'))
    else {
        return Ok(uri);
    };
    let invalid = || Error::InvalidRequest(InvalidRequest::Userinfo);
    let host: http::uri::Authority = host.parse().map_err(|_| invalid())?;
    if !headers.contains_key(AUTHORIZATION) {
        // The first `:` ends the user name (RFC 3986 §3.2.1); a `:` or
        // `@` in either part is percent-encoded, or the password's own.
        let (user, password) = match userinfo.split_once(':') {
            Some((user, password)) => (user, Some(password)),
            None => (userinfo, None),
        };
        let decoded = |text: &str| percent_encoding::percent_decode_str(text).collect::<Vec<u8>>();
        let (user, password) = (decoded(user), password.map(decoded));
        // Decoded, a `%3A` in the name would move where the server splits
        // name from password, sending other credentials than the URI's.
        let password = password.unwrap_or_default();
        // `@` or `:@` alone: no user name and no password, which the URL
        // standard reads as no credentials at all.
        if !user.is_empty() || !password.is_empty() {
            let header = basic_auth::header(&user, &password).ok_or_else(invalid)?;
            headers.insert(AUTHORIZATION, header);
        }
    }
    let mut parts = uri.into_parts();
    parts.authority = Some(host);
    http::Uri::from_parts(parts).map_err(|_| invalid())
}

/// The error of a chain of `hops` stopped for `reason` at `next`. The
/// hops went without their userinfo (it became a header); `next` is the
/// server's `Location` as given, and its credentials must not be printed
/// with the error.
fn stopped_chain(
    hops: impl Iterator<Item = http::Uri>,
    next: http::Uri,
    reason: RedirectError,
) -> Error {
    let mut chain: Vec<http::Uri> = hops.collect();
    chain.push(without_credentials(next));
    Error::Redirect { chain, reason }
}

/// `uri` without its userinfo (`user:password@`), for an error that is
/// printed and logged. `http` takes no authority with an empty host after
/// the `@`; were there one, the path alone is kept rather than the
/// credentials.
fn without_credentials(uri: http::Uri) -> http::Uri {
    let Some((_, host)) = uri
        .authority()
        .and_then(|authority| authority.as_str().rsplit_once('@'))
    else {
        return uri;
    };
    let mut parts = uri.clone().into_parts();
    match host.parse() {
        Ok(host) => parts.authority = Some(host),
        Err(_) => {
            parts.scheme = None;
            parts.authority = None;
        }
    }
    http::Uri::from_parts(parts).unwrap_or_else(|_| http::Uri::from_static("/"))
}

/// Whether `uri` carries credentials (`user:password@host`).
fn has_userinfo(uri: &http::Uri) -> bool {
    uri.authority()
        .is_some_and(|authority| authority.as_str().contains('@'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hop asks a store for its cookies — building the URL to ask —
    /// only while the store may hold one: not for an empty jar (which
    /// answers from its count), nor when the caller set a `Cookie` of
    /// their own; and the header is the one the store gives.
    #[cfg(feature = "cookies")]
    #[test]
    fn the_url_is_built_for_the_cookies_only_while_the_jar_holds_one() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        /// The jar, counting the times it is asked for cookies.
        #[derive(Default)]
        struct Counted {
            jar: super::super::Jar,
            asked: AtomicUsize,
        }
        impl CookieStore for Counted {
            fn set_cookies(
                &self,
                url: &url::Url,
                set_cookie: &mut dyn Iterator<Item = &http::HeaderValue>,
            ) {
                self.jar.set_cookies(url, set_cookie);
            }
            fn cookies(&self, url: &url::Url) -> Option<http::HeaderValue> {
                self.asked.fetch_add(1, Ordering::Relaxed);
                self.jar.cookies(url)
            }
            fn is_empty(&self) -> bool {
                self.jar.is_empty()
            }
        }
        let hop = |headers: http::HeaderMap| Hop {
            method: http::Method::GET,
            uri: "http://a.test/x".parse().unwrap(),
            headers: Arc::new(headers),
            cookie: None,
            body: HopBody::Replayable(bytes::Bytes::new()),
        };
        let store = Counted::default();
        let set = |value: &'static str| {
            let value = http::HeaderValue::from_static(value);
            let url = url::Url::parse("http://a.test/").unwrap();
            store.set_cookies(&url, &mut std::iter::once(&value));
        };
        let asked = || store.asked.load(Ordering::Relaxed);
        assert_eq!(
            store_cookies(Some(&store), &hop(http::HeaderMap::new())),
            None
        );
        assert_eq!(asked(), 0);
        set("id=7");
        let cookie = store_cookies(Some(&store), &hop(http::HeaderMap::new()));
        assert_eq!(cookie.unwrap(), "id=7");
        assert_eq!(asked(), 1);
        let mut own = http::HeaderMap::new();
        own.insert(COOKIE, http::HeaderValue::from_static("mine=1"));
        assert_eq!(store_cookies(Some(&store), &hop(own)), None);
        assert_eq!(asked(), 1);
        // Deleted by the server: empty again.
        set("id=; Max-Age=0");
        assert_eq!(
            store_cookies(Some(&store), &hop(http::HeaderMap::new())),
            None
        );
        assert_eq!(asked(), 1);
    }

    /// `as_url` parses the text `http::Uri` displays as, on the stack or,
    /// past its room, in a string.
    #[test]
    fn as_url_reads_a_uri_as_its_text_reads() {
        let long = format!("http://a.test/{}?q={}", "p".repeat(200), "v".repeat(100));
        let uris = [
            "http://a.test",
            "http://a.test/",
            "https://A.Test:8443/x/../y?a=1&b=%20",
            "http://127.0.0.1:8080/cookies",
            "http://[::1]:80/?",
            "http://a.test?only=query",
            "http://xn--bcher-kva.test/caf%C3%A9",
            long.as_str(),
        ];
        for uri in uris {
            let uri: http::Uri = uri.parse().unwrap();
            let expected = url::Url::parse(&uri.to_string()).ok();
            assert!(expected.is_some(), "{uri}");
            assert_eq!(as_url(&uri), expected, "{uri}");
        }
    }

    #[test]
    fn userinfo_becomes_a_basic_header_and_leaves_the_uri() {
        let mut headers = http::HeaderMap::new();
        let uri: http::Uri = "http://al%20ice:p%40ss@a.test:8080/x?y".parse().unwrap();
        let bare = credentials_to_header(uri, &mut headers).unwrap();
        assert_eq!(bare.to_string(), "http://a.test:8080/x?y");
        // "al ice:p@ss"
        assert_eq!(headers[AUTHORIZATION], "Basic YWwgaWNlOnBAc3M=");
        assert!(headers[AUTHORIZATION].is_sensitive());
    }

    #[test]
    fn only_the_userinfo_leaves_the_uri_the_rest_goes_as_written() {
        // What a URL parser would normalize: dot segments, characters it
        // percent-encodes, a default port written out.
        for (with, bare) in [
            (
                "http://u:p@a.test/a/../b/./c?x=1",
                "http://a.test/a/../b/./c?x=1",
            ),
            (
                "http://u:p@a.test/{q}\"x?a='b'",
                "http://a.test/{q}\"x?a='b'",
            ),
            ("http://u:p@a.test:80/x", "http://a.test:80/x"),
            ("http://u:p@A.Test/X", "http://A.Test/X"),
            ("http://u:p@[::1]:8080/x", "http://[::1]:8080/x"),
        ] {
            let mut headers = http::HeaderMap::new();
            let uri = credentials_to_header(with.parse().unwrap(), &mut headers).unwrap();
            assert_eq!(uri.to_string(), bare, "{with}");
            // "u:p"
            assert_eq!(headers[AUTHORIZATION], "Basic dTpw", "{with}");
        }
    }

    #[test]
    fn a_userinfo_splits_at_its_first_colon_and_its_last_at() {
        let cases = [
            ("http://u@a.test/", "u:"),
            ("http://:p@a.test/", ":p"),
            ("http://u:pa:ss@a.test/", "u:pa:ss"),
            ("http://u:x%3Ap%40s@a.test/", "u:x:p@s"),
            ("http://a@b@a.test/", "a@b:"),
        ];
        for (with, pair) in cases {
            let mut headers = http::HeaderMap::new();
            let uri = credentials_to_header(with.parse().unwrap(), &mut headers).unwrap();
            assert_eq!(uri.to_string(), "http://a.test/", "{with}");
            let expected = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, pair);
            assert_eq!(
                headers[AUTHORIZATION],
                format!("Basic {expected}"),
                "{with}"
            );
        }
    }

    /// RFC 7617 §2: a user-id with a `:` is invalid (the server takes
    /// the first `:` for the end of the name), and neither part may hold a
    /// control character. Percent-decoded, such a userinfo would send other
    /// credentials than the URI's: it is refused, nothing sent.
    #[test]
    fn a_userinfo_unusable_as_basic_credentials_is_refused() {
        for with in [
            "http://u%3Ax:p@a.test/",
            "http://u%3A@a.test/",
            "http://u%0D%0Ax:p@a.test/",
            "http://u:p%0D%0AX-Injected:%20y@a.test/",
            "http://u:p%00@a.test/",
            "http://u%7F:p@a.test/",
            "http://u:%09p@a.test/",
        ] {
            let mut headers = http::HeaderMap::new();
            let result = credentials_to_header(with.parse().unwrap(), &mut headers);
            assert!(
                matches!(result, Err(Error::InvalidRequest(InvalidRequest::Userinfo))),
                "{with}: {result:?}"
            );
            assert!(headers.is_empty(), "{with}");
        }
    }

    /// An empty userinfo (`@` alone, or `:@`) is no credentials, as the
    /// URL standard reads it (no user name, no password; reqwest and
    /// requests send none): it leaves the URI, and no `Authorization`
    /// goes, where `Basic Og==` would have a server that serves anyone
    /// refuse the empty user.
    #[test]
    fn an_empty_userinfo_is_no_credentials() {
        for with in ["http://@a.test/x", "http://:@a.test/x"] {
            let mut headers = http::HeaderMap::new();
            let uri = credentials_to_header(with.parse().unwrap(), &mut headers).unwrap();
            assert_eq!(uri.to_string(), "http://a.test/x", "{with}");
            assert!(headers.is_empty(), "{with}: {headers:?}");
        }
    }

    #[test]
    fn the_callers_own_authorization_wins_over_userinfo() {
        let mut headers = http::HeaderMap::new();
        headers.insert(AUTHORIZATION, http::HeaderValue::from_static("Bearer t"));
        let uri: http::Uri = "http://u@a.test/".parse().unwrap();
        let bare = credentials_to_header(uri, &mut headers).unwrap();
        assert_eq!(bare.to_string(), "http://a.test/");
        assert_eq!(headers[AUTHORIZATION], "Bearer t");
    }

    #[test]
    fn a_stopped_redirects_url_loses_its_credentials_only() {
        let bare = |uri: &str| without_credentials(uri.parse().unwrap()).to_string();
        assert_eq!(
            bare("http://me:pw@a.test:8080/x?q=1"),
            "http://a.test:8080/x?q=1"
        );
        assert_eq!(bare("https://a@b@c.test/"), "https://c.test/");
        assert_eq!(bare("http://a.test/x?to=me@b"), "http://a.test/x?to=me@b");
        assert_eq!(bare("/relative"), "/relative");
    }

    #[test]
    fn a_uri_without_userinfo_is_left_as_it_is() {
        let mut headers = http::HeaderMap::new();
        let uri: http::Uri = "http://a.test/p%20q".parse().unwrap();
        assert_eq!(
            credentials_to_header(uri.clone(), &mut headers).unwrap(),
            uri
        );
        assert!(headers.is_empty());
    }
}
