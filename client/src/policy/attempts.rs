//! [`Attempts`]: the exchanges of one hop — the first attempt, its retries
//! ([`retry`]) and its hedged copies ([`hedge`]) — and which of them the
//! caller's head comes from.
//!
//! ```text
//!   start ──> current ──head──> (status retried? → backoff) ──> the hop's head
//!               │  └─ hedge delay rings ─> copy ─┐ first head wins, the
//!               │                                │ others are cancelled
//!               └─ fails ─> (retryable, fits the deadline and the budget?)
//!                             yes: backoff alarm ─> a new current
//!                             no:  the error (Error::Retried if several)
//! ```
//!
//! Invariants: at most one backoff is armed, and then nothing is in flight
//! (the attempt before it has ended) — but for the answer of a status
//! retried, which keeps its connection until the retry has been submitted
//! (see [`retry_status`](Attempts::retry_status)); `copies` are only ever
//! in flight beside a live `current`; the next copy's delay is held by an
//! attempt in flight (when its holder fails and another goes on, it moves
//! to that one); every attempt after the first shares the request deadline fixed
//! at submission (their `HopSettings`); an attempt that lost is cancelled
//! as soon as another's head is taken, which ends it (its connection
//! closed, or over HTTP/2 its stream reset; its timers disarmed). Since
//! that deadline is every attempt's, an attempt it ends ends the hop —
//! unless another's answer came in time, which wins as ever: the others
//! are cancelled, and the outcome is the one request timeout, not one per
//! attempt in flight ([`end_at_deadline`](Attempts::end_at_deadline)).

use super::hedge;
use super::hop::{self, Hop, HopBody, HopSettings};
use super::retry;
use super::upload::Upload;
use super::Policies;
use crate::dispatch::Dispatcher;
use crate::error::Error;
use crate::event_loop::EventLoop;
use crate::exchange::alarm::{self, ArmedAlarm};
use crate::exchange::{deadline_after, Alarm, Exchange, Head};
use crate::sync::lock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

/// What sending an attempt needs: the client's parts and the hop.
pub(crate) struct Sender<'a> {
    pub(crate) dispatcher: &'a Arc<Dispatcher>,
    pub(crate) policies: &'a Policies,
    pub(crate) settings: &'a HopSettings,
    pub(crate) hop: &'a mut Hop,
}

/// What telling whether a failure will be retried needs, without sending
/// anything: the client's parts and the hop, read only.
pub(crate) struct View<'a> {
    pub(crate) dispatcher: &'a Arc<Dispatcher>,
    pub(crate) policies: &'a Policies,
    pub(crate) settings: &'a HopSettings,
    pub(crate) hop: &'a Hop,
}

/// The exchanges of one hop. See the [module documentation](self).
pub(crate) struct Attempts {
    retry: retry::Policy,
    hedge: hedge::Policy,
    /// The attempt waited for first: the latest retry, or a copy that
    /// outlived it; the winner once a head is taken.
    current: Arc<Exchange>,
    /// Hedged copies in flight besides `current`.
    copies: Vec<Arc<Exchange>>,
    /// A retry waiting for its backoff: nothing is in flight meanwhile.
    backoff: Option<(Arc<Alarm>, ArmedAlarm)>,
    /// The next copy's delay, if one is armed.
    hedge_alarm: Option<HedgeDelay>,
    /// Attempts started (retries included, copies not).
    started: u32,
    /// The backoff before a retry of `current`'s failure ([`backoff`](Self::backoff)),
    /// once drawn (jitter and all): what tells whether a failure will be
    /// retried ([`would_retry`](Self::would_retry)) and what arms the
    /// retry ([`retry_after_failure`](Self::retry_after_failure)) read the
    /// same wait — one drawn twice could fit the deadline once and not the
    /// other time. Drawn when first asked for: an attempt that succeeds
    /// draws none. (In a mutex, and `budget_refused` atomic, for what is
    /// asked through `&self` — `is_settled`, `cancel` — from any thread:
    /// a `ResponseFuture` is `Sync`.)
    backoff_drawn: Mutex<Option<Duration>>,
    /// The budget had no room for a retry of the failures in flight when
    /// [`would_retry`](Self::would_retry) looked: what was told then (the
    /// request done, a cancel cancelling nothing) holds. The poll that
    /// meets those failures retries none and does not ask the budget
    /// again — room another request brought since (its deposit, the window
    /// sliding) would turn a request told done into one pending on a retry.
    /// Set only once every attempt in flight has failed: that poll ends
    /// the hop.
    budget_refused: AtomicBool,
    copies_sent: u32,
    /// The errors of the attempts that failed, in order.
    failures: Vec<Error>,
    /// When the attempt waited for first was sent — the hop's first, or
    /// the retry or repeat that followed it, never a copy — if head
    /// latencies are tracked for the hedge delay: a head's latency runs
    /// from here (a copy's too: how long the attempt it backs up had been
    /// waited for, at least). Not from the hop's first attempt, once
    /// another followed it: a backoff or a `Retry-After` waited for between
    /// them is no latency of the origin's, and counted as one it would put
    /// every later copy off by as much.
    attempt_started: Option<Instant>,
    cancelled: AtomicBool,
}

/// Whether `error` is the request deadline's (the same for every attempt
/// of a hop), rather than one attempt's own failure.
fn is_the_deadline(error: &Error) -> bool {
    matches!(error, Error::RequestTimeout(_))
}

/// The delay before the next hedged copy: one of an attempt's named
/// timers, which rings `alarm`.
struct HedgeDelay {
    alarm: Arc<Alarm>,
    /// The id of the exchange whose timers hold it.
    on: u64,
    /// When it ends.
    at: Instant,
}

impl Attempts {
    /// The hop's first attempt, submitted by `submit` (at once, or after
    /// the previous hop's loop is done). `now`: a reading of the clock
    /// just taken, if the caller has one (the request's submission, for
    /// its first hop).
    pub(crate) fn first(
        retry: retry::Policy,
        hedge: hedge::Policy,
        sender: Sender<'_>,
        now: Option<Instant>,
        submit: impl FnOnce(Arc<Exchange>),
    ) -> Result<Attempts, Error> {
        let exchange = hop::exchange_for(sender.dispatcher, sender.hop, sender.settings)?;
        let mut attempts = Attempts {
            retry,
            hedge,
            current: exchange.clone(),
            copies: Vec::new(),
            backoff: None,
            hedge_alarm: None,
            started: 1,
            backoff_drawn: Mutex::new(None),
            budget_refused: AtomicBool::new(false),
            copies_sent: 0,
            failures: Vec::new(),
            attempt_started: None,
            cancelled: AtomicBool::new(false),
        };
        // The clock is read only for a request that may go again.
        if attempts.may_go_again(sender.hop) {
            let now = now.unwrap_or_else(|| sender.dispatcher.clock().now());
            sender.policies.budget.deposit(now);
            attempts.attempt_started = attempts.hedge.tracks_latency().then_some(now);
        }
        attempts.arm_hedge(&sender, &exchange);
        submit(exchange);
        Ok(attempts)
    }

    /// The attempt whose head is waited for (or was taken).
    pub(crate) fn current(&self) -> &Arc<Exchange> {
        &self.current
    }

    /// Whether waiting on [`current`](Self::current) alone is all there is
    /// to do: no backoff, no copy, no hedge delay armed.
    pub(crate) fn single(&self) -> bool {
        self.backoff.is_none() && self.copies.is_empty() && self.hedge_alarm.is_none()
    }

    /// Whether the next poll has an outcome to give at once (not a failure
    /// the next poll would retry: see [`would_retry`](Self::would_retry)).
    pub(crate) fn is_settled(&self, view: View<'_>) -> bool {
        if self.cancelled.load(Ordering::Acquire) {
            return true;
        }
        if self.backoff.is_some() {
            return false;
        }
        // A head from any attempt, a copy's too, is the next poll's: the
        // others lose to it, however long they would have taken.
        let mut in_flight = std::iter::once(&self.current).chain(&self.copies);
        if in_flight
            .clone()
            .any(|attempt| attempt.is_settled() && !attempt.failed_untaken())
        {
            return true;
        }
        // The request deadline ended one (and no answer came in time): it
        // ends them all.
        if self.deadline_passed() {
            return true;
        }
        // Every attempt failed: the last failure is the outcome, unless a
        // retry follows it.
        in_flight.all(|attempt| attempt.is_settled()) && !self.would_retry(&view)
    }

    /// Whether another attempt may follow a failure: the policy retries,
    /// and an attempt is left.
    fn may_retry(&self) -> bool {
        self.retry.retries() && self.started < self.retry.max_attempts()
    }

    /// The backoff before a retry of `current`'s failure: drawn the first
    /// time it is asked for, the same after (see `backoff_drawn`).
    fn backoff(&self) -> Duration {
        *lock(&self.backoff_drawn).get_or_insert_with(|| self.retry.delay(self.started))
    }

    /// Whether the next poll, meeting the failure of every attempt in
    /// flight, would arm a retry (`retry_after_failure`, `arm_retry`) —
    /// told without arming or counting one: an attempt is left, the
    /// policy retries the failure that decides for the hop's method (the
    /// last one that poll meets: the first copy's if copies are in flight,
    /// else `current`'s), the body can go again, the backoff drawn for the
    /// retry fits the deadline, and the budget has room now. (A budget
    /// other requests spend first may still make that poll give the
    /// failure; one found without room stays so, see `budget_refused`.)
    /// A failure the policy does
    /// not retry — a POST reset once sent, a response that broke the
    /// protocol — is the outcome at once, as without a policy.
    fn would_retry(&self, view: &View<'_>) -> bool {
        if self.budget_refused.load(Ordering::Acquire)
            || !self.may_retry()
            || !view.hop.body.replayable()
        {
            return false;
        }
        let deciding = self.copies.first().unwrap_or(&self.current);
        let method = &view.hop.method;
        if !deciding.failed_untaken_with(|error| self.retry.retries_error(error, method)) {
            return false;
        }
        let now = view.dispatcher.clock().now();
        let fits = now
            .checked_add(self.backoff())
            .is_some_and(|at| self.fits(at, view.settings));
        if !fits {
            return false;
        }
        let room = view.policies.budget.has_room(now);
        self.budget_refused.store(!room, Ordering::Release);
        room
    }

    /// Cancels every attempt in flight and a backoff under way, and what
    /// would follow a failure not yet seen (a copy, a retry); returns
    /// whether anything was cancelled. Once it has, nothing more goes: no
    /// copy when the hedge delay rings, no retry — nor, for a head that
    /// came before the cancel and was not taken, its redirect, status retry
    /// or 417 repeat (see `on_outcome`).
    pub(crate) fn cancel(&self, view: View<'_>) -> bool {
        // During a backoff nothing is in flight: the waiter is woken to
        // find the request cancelled, and the backoff's entry leaves the
        // wheel or the loop now, not at its deadline (a `Retry-After` may
        // be far off) or whenever the caller next polls or drops the future.
        // The answer of a status retried, kept until its retry was sent
        // (see `retry_status`), is let go now too: no retry will be.
        if let Some((alarm, armed)) = &self.backoff {
            let first = !self.cancelled.swap(true, Ordering::AcqRel);
            armed.disarm();
            alarm.ring();
            self.let_go_of_answer();
            return first;
        }
        if self.current.head_taken() {
            return false;
        }
        // The request deadline ended an attempt, and so the request: the
        // next poll gives its timeout. The others, due to end with it, go
        // now; nothing was cancelled.
        if self.deadline_passed() {
            for attempt in std::iter::once(&self.current).chain(&self.copies) {
                attempt.cancel();
            }
            return false;
        }
        // A failure the next poll would follow with a copy or a retry: the
        // request has not ended, and ends now. Nothing in flight tells this
        // call from a second one (the failure stays untaken until that
        // poll): the first to set `cancelled` ended it, and a call after
        // it, or at once on another thread, ended nothing.
        let failure_followed =
            self.current.failed_untaken() && (!self.copies.is_empty() || self.would_retry(&view));
        let mut cancelled = self.current.cancel();
        for copy in &self.copies {
            cancelled |= copy.cancel();
        }
        if !cancelled && !failure_followed {
            return false;
        }
        let first = !self.cancelled.swap(true, Ordering::AcqRel);
        self.let_go_unsent();
        cancelled || first
    }

    /// A streamed body the exchange of a 417 or a redirect kept past its
    /// end for the hop after it (`Exchange::take_unsent_body`) will not go
    /// now, the request cancelled (see `on_outcome`): its pump and source
    /// go at once, not when the future does.
    fn let_go_unsent(&self) {
        drop(self.current.request.take_unsent());
    }

    /// Cancels the request if `current`'s head has come, not yet taken,
    /// and the next poll may send the hop again or on for it (`follows`
    /// says so: a redirect, a status retry, a 417 repeat) rather than give
    /// it back: [`cancel`](Self::cancel) finds nothing in flight once that
    /// head's body has come whole too, yet the request has not ended. It
    /// ends now (see `on_outcome`); returns whether this call ended it.
    pub(crate) fn cancel_before_following(&self, follows: impl FnOnce(&Head) -> bool) -> bool {
        let ended =
            self.current.head_untaken_with(follows) && !self.cancelled.swap(true, Ordering::AcqRel);
        if ended {
            self.let_go_unsent();
        }
        ended
    }

    /// Whether `head` may have the hop sent again rather than be its
    /// answer: a 417 to its `Expect` whose body can go again (see
    /// [`repeat_without_expectation`](Self::repeat_without_expectation)),
    /// or a status the policy retries for its method with an attempt left
    /// and a body that can go twice (see [`retry_status`](Self::retry_status),
    /// which also weighs the deadline and the budget: a head retried but
    /// for those is taken as followed).
    pub(crate) fn may_send_again_for(&self, head: &Head, hop: &Hop) -> bool {
        let repeated = expectation_refused(head, hop) && self.body_goes_on(hop);
        let retried =
            self.attempt_left_for(hop) && self.retry.retries_status(head.status, &hop.method);
        repeated || retried
    }

    /// Whether an attempt is left, and `hop`'s body can go again: what any
    /// retry needs, before the deadline and the budget have their say
    /// ([`retry_allowed`](Self::retry_allowed)).
    fn attempt_left_for(&self, hop: &Hop) -> bool {
        self.started < self.retry.max_attempts() && hop.body.replayable()
    }

    /// Whether the hop's body can go whole on the hop after the current
    /// attempt's answer: it can go again, or it is a stream the attempt
    /// kept unsent (it waited for `100 Continue`), which `on_head` puts
    /// back ([`take_back_unsent`](Self::take_back_unsent)).
    pub(crate) fn body_goes_on(&self, hop: &Hop) -> bool {
        hop.body.sendable() || self.current.request.holds_unsent()
    }

    /// Whether the hop may be sent again (a retry or a copy): its policy
    /// says so and its body can go twice.
    fn may_go_again(&self, hop: &Hop) -> bool {
        (self.retry.retries() || self.hedge.hedges()) && hop.body.replayable()
    }

    /// The next head of the hop (a status retried is not one), or its
    /// error once no attempt is left.
    pub(crate) fn poll(
        &mut self,
        mut sender: Sender<'_>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Head, Error>> {
        loop {
            if let Some((alarm, _)) = &self.backoff {
                if alarm.poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.backoff = None;
                if self.cancelled.load(Ordering::Acquire) {
                    return Poll::Ready(Err(Error::Cancelled));
                }
                if let Err(error) = self.start_retry(&mut sender) {
                    return Poll::Ready(Err(self.outcome(error)));
                }
            }
            self.end_at_deadline();
            match self.current.poll_head(cx) {
                Poll::Ready(outcome) => match self.on_outcome(outcome, &mut sender) {
                    Some(done) => return Poll::Ready(done),
                    None => continue,
                },
                Poll::Pending => {}
            }
            let settled = (0..self.copies.len()).find_map(|i| match self.copies[i].poll_head(cx) {
                Poll::Ready(outcome) => Some((i, outcome)),
                Poll::Pending => None,
            });
            let Some((i, outcome)) = settled else {
                // No attempt has its head (looked at first: a caller that
                // polls after the delay, its head come meanwhile, must not
                // send a copy for a request already answered).
                if let Some(delay) = &self.hedge_alarm {
                    if delay.alarm.poll(cx).is_ready() {
                        self.hedge_alarm = None;
                        // Rung before a cancel was seen: no copy after it.
                        if !self.cancelled.load(Ordering::Acquire) {
                            self.send_copy(&mut sender);
                            continue;
                        }
                    }
                }
                return Poll::Pending;
            };
            let copy = self.copies.swap_remove(i);
            match outcome {
                // The copy wins: the attempt waited for first is cancelled
                // with the others.
                Ok(head) => {
                    let loser = std::mem::replace(&mut self.current, copy);
                    loser.cancel();
                    return Poll::Ready(Ok(self.won(head, &sender)));
                }
                Err(error) => {
                    self.failures.push(error);
                    self.move_hedge_delay(&copy);
                }
            }
        }
    }

    /// Blocks on [`current`](Self::current) alone (see
    /// [`single`](Self::single)): its head, or `None` if a retry was
    /// armed.
    pub(crate) fn wait_single(&mut self, mut sender: Sender<'_>) -> Option<Result<Head, Error>> {
        let outcome = self.current.wait_head(sender.dispatcher.group().loops());
        self.on_outcome(outcome, &mut sender)
    }

    /// `current`'s outcome: the hop's head, its final error, or `None` when
    /// another attempt goes on (a copy in flight, or a retry armed).
    fn on_outcome(
        &mut self,
        outcome: Result<Head, Error>,
        sender: &mut Sender<'_>,
    ) -> Option<Result<Head, Error>> {
        match outcome {
            // Cancelled: no copy takes over, no retry goes — and a head
            // that came before the cancel (which ended its exchange, its
            // body failing) is followed nowhere either: no redirect, no
            // status retry, no repeat of a 417 (whose streamed body its
            // exchange may keep past its end for one). The request ends with
            // the cancel, as `ResponseFuture::cancel` says when it
            // returns true.
            _ if self.cancelled.load(Ordering::Acquire) => {
                for copy in self.copies.drain(..) {
                    copy.cancel();
                }
                Some(Err(Error::Cancelled))
            }
            Ok(head) => Some(Ok(self.won(head, sender))),
            Err(error) => {
                if let Some(copy) = self.copies.pop() {
                    self.failures.push(error);
                    let failed = std::mem::replace(&mut self.current, copy);
                    self.move_hedge_delay(&failed);
                    return None;
                }
                // The hedge delay was the failed attempt's, and ends with
                // it, rung or not: a retry arms its own, from its start.
                self.hedge_alarm = None;
                match self.retry_after_failure(error, sender) {
                    Ok(()) => None,
                    Err(error) => Some(Err(self.outcome(error))),
                }
            }
        }
    }

    /// The attempt in flight the request deadline has ended (its failure
    /// not yet taken; 0 is `current`, then the copies), if no attempt has
    /// an answer that came in time (a head not yet taken, which wins as
    /// ever). Asked only with copies in flight: a lone attempt's timeout is
    /// its outcome anyway (never retried), and a poll asks no lock more.
    fn ended_by_deadline(&self) -> Option<usize> {
        if self.copies.is_empty() {
            return None;
        }
        let mut in_flight = std::iter::once(&self.current).chain(&self.copies);
        if in_flight
            .clone()
            .any(|attempt| attempt.head_untaken_with(|_| true))
        {
            return None;
        }
        in_flight.position(|attempt| attempt.failed_untaken_with(is_the_deadline))
    }

    /// Whether the request deadline has ended the request
    /// ([`ended_by_deadline`](Self::ended_by_deadline)).
    fn deadline_passed(&self) -> bool {
        self.ended_by_deadline().is_some()
    }

    /// If the request deadline has ended an attempt in flight (and no
    /// answer came in time: [`ended_by_deadline`](Self::ended_by_deadline)),
    /// makes that attempt `current` and cancels the others, so that its request
    /// timeout is the hop's outcome (a request timeout is never retried:
    /// no time is left). The deadline is every attempt's: it is one
    /// failure, the request's, not one per attempt in flight, each of
    /// which it ends at the same instant — failing over to a copy, the hop
    /// ended with an [`Error::Retried`] that listed the one timeout twice.
    fn end_at_deadline(&mut self) {
        let Some(index) = self.ended_by_deadline() else {
            return;
        };
        if index > 0 {
            let ended = self.copies.swap_remove(index - 1);
            std::mem::replace(&mut self.current, ended).cancel();
        }
        for copy in self.copies.drain(..) {
            copy.cancel();
        }
    }

    /// `current`'s head was taken: the copies lose, the hedge delay is
    /// disarmed, the latency noted.
    fn won(&mut self, head: Head, sender: &Sender<'_>) -> Head {
        for copy in self.copies.drain(..) {
            copy.cancel();
        }
        if self.hedge_alarm.take().is_some() {
            self.current.disarm_hedge();
        }
        if let Some(attempt_started) = self.attempt_started {
            let latency = sender
                .dispatcher
                .clock()
                .now()
                .saturating_duration_since(attempt_started);
            sender
                .policies
                .latencies
                .record(&self.current.origin, latency);
        }
        head
    }

    /// The final error: `error` alone, or with those of the attempts
    /// before it. An attempt the server did not process says so only if
    /// none of the others may have been processed: otherwise the request
    /// may have been, and no part of its error (its message ends with the
    /// last attempt's) may say it is safe to send again. A close ends the
    /// request as a cancel does, with that alone: it is no failed attempt
    /// (the retry it ends may not even have been sent).
    fn outcome(&mut self, error: Error) -> Error {
        if self.failures.is_empty() || matches!(error, Error::ClientClosed) {
            return error;
        }
        let mut attempts = std::mem::take(&mut self.failures);
        attempts.push(error);
        let retried = Error::Retried { attempts };
        let unprocessed = retried.is_unprocessed();
        retried.with_unprocessed(unprocessed)
    }

    /// The request deadline (the same for every attempt).
    fn deadline(&self, settings: &HopSettings) -> Option<Instant> {
        deadline_after(settings.submitted, settings.deadlines.request_timeout?)
    }

    /// Whether an attempt starting at `start` leaves the policy's minimum
    /// slice of the deadline.
    fn fits(&self, start: Instant, settings: &HopSettings) -> bool {
        self.deadline(settings).is_none_or(|deadline| {
            start
                .checked_add(self.retry.min_slice())
                .is_some_and(|end| end <= deadline)
        })
    }

    /// Arms a retry after `current` failed with `error`, if the policy,
    /// the deadline and the budget allow it; else gives the error back.
    fn retry_after_failure(&mut self, error: Error, sender: &Sender<'_>) -> Result<(), Error> {
        if !self.retry.retries_error(&error, &sender.hop.method) {
            return Err(error);
        }
        // Refused when the request was told done: refused still.
        if self.budget_refused.load(Ordering::Acquire) {
            sender.policies.budget.refuse();
            return Err(error);
        }
        self.arm_retry(self.backoff(), error, sender)
    }

    /// Whether `head` has a status the policy retries, and a retry was
    /// armed for it.
    ///
    /// Nobody reads that answer's body, yet over HTTP/1.1 its connection
    /// is let go (it drains the body, if small, and goes back to the pool,
    /// else closes) only once the retry has been submitted
    /// ([`start_retry`](Self::start_retry)), after its backoff: the retry
    /// queues at its request's place in the pool, ahead of the requests
    /// sent after it, and what that connection frees serves it. Let go
    /// before, it would serve one of those: with a per-host limit, that
    /// one could hold the connection with an answer of its own its caller
    /// does not read until this request has ended — and this request would
    /// wait for it to its deadline. Meanwhile the answer's body is read no
    /// further than its window. The cost, under a per-host limit (or the
    /// total one, whose permit the connection keeps from every origin):
    /// the requests behind this one wait for the backoff, and — the retry
    /// being sent by this request's poll — for that poll, which a caller
    /// blocked on one of them first never makes.
    pub(crate) fn retry_status(&mut self, head: &Head, sender: Sender<'_>) -> bool {
        if !self.retry.retries_status(head.status, &sender.hop.method) {
            return false;
        }
        // A `Retry-After` past the policy's maximum is no retry: this
        // response is the outcome (see `retry::Policy::max_retry_after`).
        let asked = retry::retry_after(&head.headers, SystemTime::now());
        let Some(delay) = self.retry.status_delay(self.started, asked) else {
            return false;
        };
        let Some(at) = self.retry_allowed(delay, &sender) else {
            return false;
        };
        // The attempt's body is checked before the retry is told: an
        // encoded one's completion, held for its reader, is told now, if
        // the body has all come. Over HTTP/2 the answer holds a stream of
        // a shared connection, not one the retry waits for: it goes now.
        if head.version == http::Version::HTTP_2 {
            self.current.body_dropped();
        } else {
            self.current.body_checked();
        }
        let reason = Error::Status {
            status: head.status,
            url: sender.hop.uri.clone(),
        };
        self.arm_retry_at(at, delay, reason, &sender);
        true
    }

    /// Puts the hop's streamed body back, none of it sent, if `current`
    /// kept it for its answer — a `417` or a redirect to the `Expect:
    /// 100-continue` it waited for (`Exchange::take_unsent_body`): it goes
    /// whole, the same source as it was left, on the hop that answer leads
    /// to (the 417's repeat, the redirect followed). Taken whatever comes
    /// next, so that it does not stay with a response that holds that
    /// exchange: a body put back that no hop takes is let go by the chain
    /// (`HopBody::let_go_unsent`). A body that can go again anyway (in
    /// memory, a file's) has its exchange's copy let go.
    pub(crate) fn take_back_unsent(&self, hop: &mut Hop) {
        let Some((source, length)) = self.current.take_unsent_body() else {
            return;
        };
        if !hop.body.replayable() {
            hop.body = HopBody::Streamed(Some(Upload::unsent(source, length)));
        }
    }

    /// Whether `head` refused the hop's `Expect: 100-continue` (`417
    /// Expectation Failed`) and the hop went again, at once, without it
    /// (RFC 9110 §10.1.1: the client SHOULD). Once per request: the hop
    /// loses the header for good. Only over HTTP/1.1 (HTTP/2 never sends
    /// it), with a body in memory or a streamed one that did not begin to
    /// go (it waited for `100 Continue`, and was put back:
    /// [`take_back_unsent`](Self::take_back_unsent)): that one goes whole.
    /// A streamed body that began to go (the expectation's delay passed
    /// first) cannot, and the 417 is the response.
    ///
    /// No retry: no attempt is counted, no budget spent, and `on_retry` is
    /// not told (see `EventListener::on_retry`).
    pub(crate) fn repeat_without_expectation(&mut self, head: &Head, sender: Sender<'_>) -> bool {
        if !expectation_refused(head, sender.hop) || !sender.hop.body.sendable() {
            return false;
        }
        Arc::make_mut(&mut sender.hop.headers).remove(http::header::EXPECT);
        let Ok(exchange) = hop::exchange_for(sender.dispatcher, sender.hop, sender.settings) else {
            return false;
        };
        self.send_next(exchange, &sender);
        true
    }

    /// Arms the backoff of the next attempt, `delay` from now, if one is
    /// left, fits the deadline and the budget; `reason` is why.
    fn arm_retry(
        &mut self,
        delay: Duration,
        reason: Error,
        sender: &Sender<'_>,
    ) -> Result<(), Error> {
        let Some(at) = self.retry_allowed(delay, sender) else {
            return Err(reason);
        };
        self.arm_retry_at(at, delay, reason, sender);
        Ok(())
    }

    /// When the next attempt would start, `delay` from now, if one is
    /// left, fits the deadline and the budget (a retry's token withdrawn).
    fn retry_allowed(&self, delay: Duration, sender: &Sender<'_>) -> Option<Instant> {
        let now = sender.dispatcher.clock().now();
        // A delay past what an `Instant` holds (a server's `Retry-After` of
        // billions of years) is no retry.
        let at = now.checked_add(delay)?;
        let allowed = self.attempt_left_for(sender.hop)
            && self.fits(at, sender.settings)
            && sender.policies.budget.withdraw(now, false);
        allowed.then_some(at)
    }

    /// Arms the backoff of the next attempt, due `at` ([`retry_allowed`](Self::retry_allowed)),
    /// and tells it; `reason` is why.
    fn arm_retry_at(&mut self, at: Instant, delay: Duration, reason: Error, sender: &Sender<'_>) {
        self.current
            .listener
            .on_retry(self.started + 1, delay, &reason);
        self.failures.push(reason);
        let home = self.alarm_home(sender);
        let alarm = Alarm::new();
        let armed = alarm::arm(&alarm, at, home.as_ref(), sender.dispatcher.wheel());
        self.backoff = Some((alarm, armed));
    }

    /// Where a backoff is armed: the loop of the attempt that failed in
    /// event-loop mode (exact), else the wheel.
    fn alarm_home(&self, sender: &Sender<'_>) -> Option<Arc<EventLoop>> {
        if !sender.settings.deadlines.on_event_loop {
            return None;
        }
        self.current.last_loop()
    }

    /// The backoff is over: the next attempt goes, at its request's place
    /// among the pool's waiters (see [`Exchange::follows`]), and only then
    /// is the answer of a status retried let go (see
    /// [`retry_status`](Self::retry_status)).
    fn start_retry(&mut self, sender: &mut Sender<'_>) -> Result<(), Error> {
        let exchange = match hop::exchange_for(sender.dispatcher, sender.hop, sender.settings) {
            Ok(exchange) => exchange,
            Err(error) => {
                self.let_go_of_answer();
                return Err(error);
            }
        };
        self.started += 1;
        *lock(&self.backoff_drawn) = None;
        self.send_next(exchange, sender);
        Ok(())
    }

    /// `exchange` goes as the attempt after `current` (a retry, a 417's
    /// repeat): at its request's place in the pool's queue, submitted
    /// first, and only then is `current`'s answer, if it has one, let go
    /// (its connection drains it, if small, else closes): what that frees
    /// serves `exchange`, not a request sent after this one (as for a
    /// redirect's next hop: see `Chain::next_hop`).
    fn send_next(&mut self, exchange: Arc<Exchange>, sender: &Sender<'_>) {
        exchange.follows(&self.current);
        self.restart_latency(sender);
        self.arm_hedge(sender, &exchange);
        sender.dispatcher.submit(exchange.clone());
        self.let_go_of_answer();
        self.current = exchange;
    }

    /// Lets go of `current`'s answer, if its head was taken — the status a
    /// backoff is armed to retry, whose body nobody reads: its connection
    /// drains it, if small, and goes back to the pool, else closes. (An
    /// attempt that failed has no answer to let go.)
    fn let_go_of_answer(&self) {
        if self.current.head_taken() {
            self.current.body_dropped();
        }
    }

    /// A retry or a repeat is now the attempt waited for first: its head's
    /// latency runs from now (see `attempt_started`).
    fn restart_latency(&mut self, sender: &Sender<'_>) {
        if self.attempt_started.is_some() {
            self.attempt_started = Some(sender.dispatcher.clock().now());
        }
    }

    /// Arms `attempt`'s hedge delay, if the request is hedged and a copy
    /// is left that would start inside the deadline.
    fn arm_hedge(&mut self, sender: &Sender<'_>, attempt: &Arc<Exchange>) {
        let hedged = self.hedge.hedges()
            && self.copies_sent < self.hedge.copies()
            && sender.hop.method.is_idempotent()
            && sender.hop.body.replayable();
        if !hedged {
            return;
        }
        let Some(delay) = self
            .hedge
            .delay(&attempt.origin, &sender.policies.latencies)
        else {
            return;
        };
        let Some(at) = sender.dispatcher.clock().now().checked_add(delay) else {
            return; // never, in effect
        };
        if !self.fits(at, sender.settings) {
            return;
        }
        let alarm = Alarm::new();
        attempt.arm_hedge(at, alarm.clone());
        self.hedge_alarm = Some(HedgeDelay {
            alarm,
            on: attempt.id,
            at,
        });
    }

    /// `ended` failed, and may hold the next copy's delay: a copy that
    /// failed while `current` is still waited for, or the attempt waited
    /// for, `current` being the copy that took over. Its timers ended with
    /// it: left there, the delay would never ring, and no copy would go
    /// again (an attempt's end sends nothing, so it starts no new delay
    /// either). The delay moves to `current` and ends when it would have:
    /// armed afresh, it would put the next copy off by however long the
    /// failed one ran. Rung already, it stays rung: the copy is due, and
    /// goes at the next look.
    fn move_hedge_delay(&mut self, ended: &Exchange) {
        let Some(delay) = &mut self.hedge_alarm else {
            return;
        };
        if delay.on != ended.id {
            return;
        }
        delay.on = self.current.id;
        if !delay.alarm.has_rung() {
            self.current.arm_hedge(delay.at, delay.alarm.clone());
        }
    }

    /// The hedge delay rang: a copy goes, on another connection than those
    /// of the attempts in flight (`current` and the copies before it: see
    /// [`Exchange::back_up`]), if the deadline and the budget still allow.
    fn send_copy(&mut self, sender: &mut Sender<'_>) {
        let now = sender.dispatcher.clock().now();
        if !self.fits(now, sender.settings) || !sender.policies.budget.withdraw(now, true) {
            return;
        }
        let Ok(copy) = hop::exchange_for(sender.dispatcher, sender.hop, sender.settings) else {
            return;
        };
        copy.back_up(&self.current, &self.copies);
        self.copies_sent += 1;
        copy.listener.on_hedge(self.copies_sent);
        self.arm_hedge(sender, &copy);
        self.copies.push(copy.clone());
        sender.dispatcher.submit(copy);
    }
}

/// Whether `head` is a 417 refusing the `Expect` of `hop`, which goes
/// again without it (not over HTTP/2, which has no such refusal).
fn expectation_refused(head: &Head, hop: &Hop) -> bool {
    head.status == http::StatusCode::EXPECTATION_FAILED
        && head.version != http::Version::HTTP_2
        && hop::expects_continue(&hop.headers)
}

impl Drop for Attempts {
    fn drop(&mut self) {
        // Copies nobody will take a head from.
        for copy in &self.copies {
            copy.cancel();
        }
    }
}
