//! [`Upload`]: where the next bytes of a streamed request body come from —
//! a pumped `Read`'s pipe, or an async body polled on this loop — for the
//! protocol that sends them (framed by [`h1`](super::h1) as HTTP/1.1, or as
//! DATA frames by [`h2`](super::h2)).

use crate::error::Error;
use crate::event_loop::{LoopContext, SourceWaker};
use crate::exchange::{BodyStream, Exchange, Taken, UploadSource, Waiter, GATHER};
use bytes::{Bytes, BytesMut};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// The source of a streamed body, and the waker an HTTP/1.1 connection is
/// woken with when it has more ([`pull`](Upload::pull); HTTP/2 polls with a
/// waker of its own, [`pull_with`](Upload::pull_with)).
pub(super) struct Upload {
    source: UploadSource,
    /// Made at the first [`pull`](Upload::pull), for the running source,
    /// and kept: many wakes before the loop gets to the connection cost one
    /// task (see [`SourceWaker`]) — a pump giving a byte a read wakes it as
    /// often as the connection takes.
    waker: Option<Arc<SourceWaker>>,
}

/// What a pull found.
pub(super) enum Pulled {
    /// Never empty.
    Data(Bytes),
    End,
    /// The end, with the body's trailers (never empty; none of them a
    /// field that may not go in trailers, see [`trailers_of`]): they go
    /// as HTTP/1.1 chunked trailers, or HTTP/2's trailing HEADERS. A body
    /// framed by its `Content-Length` has no room for them: see
    /// [`Declared::check`].
    Trailers(http::HeaderMap),
    /// Nothing yet: the connection is woken when there is.
    Pending,
    Failed(Error),
}

impl Upload {
    /// Takes the streamed body of `exchange` (once): `None` if it was
    /// taken already (the exchange ended meanwhile).
    pub(super) fn take(exchange: &Exchange) -> Option<Upload> {
        let source = exchange.request.take_source()?;
        Some(Upload {
            source,
            waker: None,
        })
    }

    /// Where the body's bytes come from.
    #[cfg(test)]
    pub(super) fn source(&self) -> &UploadSource {
        &self.source
    }

    /// The next piece of the body, if there is one now; `waker` is woken
    /// when there is.
    pub(super) fn pull_with(&mut self, waker: &Waker) -> Pulled {
        match &mut self.source {
            UploadSource::Pumped(body) => taken(body.pipe().take(|| Waiter::Task(waker.clone()))),
            UploadSource::Stream(body) => poll_body(body, waker),
        }
    }

    /// The next piece of the body, if there is one now: the running source
    /// is woken on its loop when there is.
    pub(super) fn pull(&mut self, cx: &LoopContext<'_>) -> Pulled {
        let waker = self
            .waker
            .get_or_insert_with(|| SourceWaker::new(cx.event_loop(), cx.me()))
            .waker();
        self.pull_with(&waker)
    }
}

/// A streamed body held to the length it declared (`Content-Length`), by
/// both protocols (HTTP/1.1 also frames by it, chunked without one; the
/// `h2` crate sends what it is given): a source that gives more bytes fails
/// before any byte past the length goes, and one that gives fewer before
/// the end does — as [`Error::RequestBody`].
///
/// Its small pieces are gathered ([`next`](Declared::next)).
pub(super) struct Declared {
    length: Option<u64>,
    given: u64,
    /// What a pull found past the pieces the last [`next`](Declared::next)
    /// gathered (checked already): what the next one gives.
    after: Option<Pulled>,
}

impl Declared {
    /// `length`: the declared length, `None` for none (nothing is checked).
    pub(super) fn new(length: Option<u64>) -> Declared {
        Declared {
            length,
            given: 0,
            after: None,
        }
    }

    /// The body's next piece, from `pull` (the source's), held to the
    /// length ([`check`](Declared::check)) — with the pieces after it that
    /// the source has ready at once gathered into one, up to [`GATHER`]
    /// bytes. A source that gives its bytes a line or a record at a time
    /// goes in chunks (HTTP/1.1) or DATA frames (HTTP/2) of many: one each
    /// cost three writes over HTTP/1.1, and over HTTP/2 a frame each in
    /// `h2`'s queue, which bounds what it holds by data bytes alone — some
    /// 340 bytes of memory per byte of body, for one-byte pieces, against a
    /// server that reads nothing. The source is not pulled past its length
    /// (once whole), nor again once it has nothing ready: what it gave goes
    /// then, not held back for more. What ends the gathering (a piece that
    /// would pass [`GATHER`], the end, a failure) is the next call's.
    pub(super) fn next(&mut self, mut pull: impl FnMut() -> Pulled) -> Pulled {
        let first = match self.after.take() {
            Some(after) => after,
            None => self.check(pull()),
        };
        let Pulled::Data(first) = first else {
            return first;
        };
        if first.len() >= GATHER {
            return Pulled::Data(first);
        }
        let mut gathered: Option<BytesMut> = None;
        let mut len = first.len();
        while !self.whole() {
            match self.check(pull()) {
                Pulled::Data(data) if len + data.len() <= GATHER => {
                    len += data.len();
                    // Sized by what came, grown as more does: a piece
                    // queued (in `h2`'s queue, bounded by data bytes alone)
                    // keeps at most about twice its bytes allocated, not
                    // `GATHER` for two of them.
                    gathered
                        .get_or_insert_with(|| {
                            let mut gathered = BytesMut::with_capacity(first.len() + data.len());
                            gathered.extend_from_slice(&first);
                            gathered
                        })
                        .extend_from_slice(&data);
                }
                Pulled::Pending => break,
                after => {
                    self.after = Some(after);
                    break;
                }
            }
        }
        Pulled::Data(gathered.map_or(first, BytesMut::freeze))
    }

    /// The declared length, if any.
    pub(super) fn length(&self) -> Option<u64> {
        self.length
    }

    /// Whether the body has given all of its declared length, and all of
    /// it has been taken ([`next`](Declared::next)): it is
    /// whole, and its end goes without waiting for the source to say so —
    /// over HTTP/1.1 the server has it whole then too, whatever the source
    /// does after.
    pub(super) fn whole(&self) -> bool {
        self.length == Some(self.given) && self.after.is_none()
    }

    /// What a pull found, held to the length: data past it, or an end
    /// short of it, is a failure.
    fn check(&mut self, pulled: Pulled) -> Pulled {
        let Some(length) = self.length else {
            return pulled;
        };
        match pulled {
            Pulled::Data(data) => {
                self.given += data.len() as u64;
                if self.given > length {
                    return Pulled::Failed(length_mismatch("longer", length));
                }
                Pulled::Data(data)
            }
            Pulled::End | Pulled::Trailers(_) if self.given != length => {
                Pulled::Failed(length_mismatch("shorter", length))
            }
            // Only a frame of trailers given when the length is whole
            // (though the body is then not polled): the end, and they are
            // dropped — a body framed by its length has nowhere to put
            // them (as `Upload::from_stream` says).
            Pulled::Trailers(_) => Pulled::End,
            other => other,
        }
    }
}

/// The error of a body `which` ("longer", "shorter") than its declared
/// `length`.
fn length_mismatch(which: &str, length: u64) -> Error {
    Error::RequestBody {
        source: format!("the request body was {which} than its Content-Length of {length}").into(),
    }
}

fn taken(taken: Taken) -> Pulled {
    match taken {
        Taken::Chunk(bytes) => Pulled::Data(bytes),
        Taken::End(_) => Pulled::End,
        Taken::Failed(error) => Pulled::Failed(error),
        Taken::Pending => Pulled::Pending,
    }
}

/// Empty frames (and empty trailers) one pull takes at most
/// before it yields: a body always ready with them would otherwise hold
/// the loop — and every connection and timeout on it — for as long.
const MAX_EMPTY_FRAMES_PER_PULL: usize = 64;

fn poll_body(body: &mut BodyStream, waker: &Waker) -> Pulled {
    let mut task = Context::from_waker(waker);
    let mut empty_frames = 0;
    loop {
        if empty_frames == MAX_EMPTY_FRAMES_PER_PULL {
            // Run again after the loop's other work: the waker posts the
            // connection's readiness to its loop (a task of the next
            // turn), as a source that has something does.
            waker.wake_by_ref();
            return Pulled::Pending;
        }
        // The caller's code, run on the loop: its panic fails this body
        // alone, as its error would — not the connection and every
        // exchange on it (over HTTP/2, many share one).
        let polled = catch_unwind(AssertUnwindSafe(|| {
            body.get_mut().as_mut().poll_frame(&mut task)
        }));
        let Ok(polled) = polled else {
            return Pulled::Failed(Error::RequestBody {
                source: "the upload's body panicked".into(),
            });
        };
        return match polled {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                // An empty frame is nothing (`http_body` allows them): to
                // HTTP/2 an empty piece is the end of the body.
                Ok(data) if data.is_empty() => {
                    empty_frames += 1;
                    continue;
                }
                Ok(data) => Pulled::Data(data),
                // The trailers: the last frame of the body (`http_body`
                // says so), and the end, unless there are none.
                Err(frame) => match frame.into_trailers() {
                    Ok(trailers) if trailers.is_empty() => {
                        empty_frames += 1;
                        continue;
                    }
                    Ok(trailers) => trailers_of(trailers),
                    // Neither data nor trailers: a kind of frame a later
                    // `http_body` may add, nothing this client can send.
                    Err(_) => {
                        empty_frames += 1;
                        continue;
                    }
                },
            },
            Poll::Ready(Some(Err(source))) => Pulled::Failed(Error::RequestBody { source }),
            Poll::Ready(None) => Pulled::End,
            Poll::Pending => Pulled::Pending,
        };
    }
}

/// Fields that may not go in a request's trailers besides those of the
/// connection ([`connection_specific`](super::connection_specific)) (RFC
/// 9110 §6.5.1): those that frame the message, and credentials — the
/// fields a redirect to another origin drops from the head. A server
/// authenticates a request by its head, not its trailers, and the client
/// keeps credentials from where they were not meant for only in the
/// head: a streamed body put back unsent goes whole, trailers and all, to
/// where a redirect leads; and through a tunnel no proxy reads the
/// request, so a proxy's `Proxy-Authorization` would reach the origin,
/// where the client never sends it (see [`Proxy`](crate::Proxy)).
const NOT_IN_TRAILERS: [http::HeaderName; 5] = [
    http::header::CONTENT_LENGTH,
    http::header::TRAILER,
    http::header::AUTHORIZATION,
    http::header::COOKIE,
    http::header::PROXY_AUTHORIZATION,
];

/// The end of a body with `trailers` (not empty) — or its failure, if
/// one of them may not go in trailers ([`NOT_IN_TRAILERS`]): the same over
/// both protocols, rather than sent over one and refused by the other.
fn trailers_of(trailers: http::HeaderMap) -> Pulled {
    match trailers
        .keys()
        .find(|name| NOT_IN_TRAILERS.contains(name) || super::connection_specific(name))
    {
        Some(name) => Pulled::Failed(Error::RequestBody {
            source: format!(
                "the request body's trailers hold {name}, which may not go in trailers"
            )
            .into(),
        }),
        None => Pulled::Trailers(trailers),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event_loop::{EventLoopGroup, Readiness, Source as LoopSource};
    use crate::exchange::{Pipe, PumpedBody};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    /// A connection's stand-in: an upload it pulls until it has nothing
    /// each time the loop hands it readiness again, counting those times.
    struct Pulls {
        upload: Upload,
        agains: Arc<AtomicUsize>,
    }

    impl Pulls {
        fn drain(&mut self, cx: &LoopContext<'_>) {
            while let Pulled::Data(_) = self.upload.pull(cx) {}
        }
    }

    impl LoopSource for Pulls {
        fn ready(&mut self, cx: &mut LoopContext<'_>, readiness: Readiness) {
            if readiness.again {
                self.agains.fetch_add(1, Ordering::SeqCst);
                self.drain(cx);
            }
        }
        fn timer(&mut self, _cx: &mut LoopContext<'_>, _tag: u64) {}
        fn abort(&mut self, _cx: &mut LoopContext<'_>, _exchange_id: u64) {}
        fn shut_down(&mut self, _cx: &mut LoopContext<'_>) {}
        fn panicked(&mut self, _cx: &mut LoopContext<'_>) {}
        fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
            self
        }
    }

    /// A pump that gives a byte a read while its connection takes as it
    /// comes — each take finding the pipe empty after it, and waiting
    /// again — wakes the connection once until the loop gets to it, not
    /// once a take: a wake-up a take ran the connection again for as many
    /// takes, tens of thousands of tasks queued on the loop before its
    /// socket filled, and the room for them kept (2–37 MB held by an
    /// upload of a 256 KiB window, `tests/streamed_body_memory.rs`). Once
    /// the loop has run it, a wake-up runs the connection again.
    #[test]
    fn a_pump_wakes_its_connection_once_until_the_loop_runs_it_however_often_it_takes() {
        let group = EventLoopGroup::builder().threads(1).build().unwrap();
        let event_loop = group.loops()[0].clone();
        let pipe = Arc::new(Pipe::new(1024, Arc::default()));
        let agains = Arc::new(AtomicUsize::new(0));
        let (made, on_made) = mpsc::channel();
        {
            let (pipe, agains) = (pipe.clone(), agains.clone());
            event_loop
                .execute(move |cx| {
                    cx.add_source(|cx| {
                        let upload = Upload {
                            source: UploadSource::Pumped(PumpedBody::new(pipe.clone())),
                            waker: None,
                        };
                        let mut pulls = Pulls { upload, agains };
                        // All in one task: the loop runs none of what the
                        // pump's wake-ups post until it is over.
                        for _ in 0..1000 {
                            assert!(matches!(pulls.upload.pull(cx), Pulled::Pending));
                            pipe.push_blocking(b"x").unwrap();
                            assert!(matches!(pulls.upload.pull(cx), Pulled::Data(_)));
                        }
                        pulls.drain(cx);
                        Box::new(pulls)
                    });
                    made.send(()).unwrap();
                })
                .unwrap();
        }
        on_made.recv_timeout(Duration::from_secs(10)).unwrap();
        // Tasks run in the order they were posted: once this one has, so
        // has every readiness the pump posted before it.
        let after = |event_loop: &crate::event_loop::EventLoop| {
            let (ran, on_ran) = mpsc::channel();
            event_loop.execute(move |_| ran.send(()).unwrap()).unwrap();
            on_ran.recv_timeout(Duration::from_secs(10)).unwrap();
        };
        after(&event_loop);
        assert_eq!(agains.load(Ordering::SeqCst), 1, "readiness handed again");
        // Run, it pulled and waits again: the pump's next byte wakes it.
        pipe.push_blocking(b"y").unwrap();
        after(&event_loop);
        assert_eq!(agains.load(Ordering::SeqCst), 2, "woken once it had run");
        group.shutdown();
    }

    /// Pieces ready at once go together, in an allocation of about their
    /// own size — not one of [`GATHER`] bytes for a few of them — and what
    /// ended the gathering comes next.
    #[test]
    fn small_pieces_go_together_in_about_their_own_size() {
        let mut ready = vec![
            Pulled::Data(Bytes::from_static(b"a")),
            Pulled::Data(Bytes::from_static(b"b")),
            Pulled::Data(Bytes::from_static(b"c")),
            Pulled::Pending,
            Pulled::End,
        ]
        .into_iter();
        let mut declared = Declared::new(None);
        let Pulled::Data(gathered) = declared.next(|| ready.next().unwrap()) else {
            panic!("the pieces ready, gathered");
        };
        assert_eq!(gathered, "abc");
        let gathered = gathered.try_into_mut().expect("the one owner");
        assert!(gathered.capacity() <= 16, "{}", gathered.capacity());
        assert!(matches!(
            declared.next(|| ready.next().unwrap()),
            Pulled::End
        ));
    }
}
