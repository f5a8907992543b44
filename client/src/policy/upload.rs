//! [`Upload`]: a request body — in memory, read from a `Read` (a file), or
//! an async stream.

use crate::exchange::{BodyStream, BoxError, UploadSource};
use crate::sync::Unshared;
use bytes::{Buf, Bytes};
use std::io::{Read, Seek};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// A request body.
///
/// * **In memory** — `Vec<u8>`, `String`, `&'static str`, [`Bytes`] — sent
///   with `Content-Length`, and kept, so a request may go again (a retry).
/// * **From a `Read`** ([`Upload::from_reader`], [`Upload::from_file`]) — read
///   on a thread of its own, never on an event loop, into a bounded buffer
///   the loop writes from as the socket takes it: memory stays bounded
///   whatever the size. `Content-Length` when the length is known, chunked
///   otherwise.
/// * **From an async body** ([`Upload::from_stream`], any
///   [`http_body::Body`]) — polled on the connection's loop as the socket
///   takes its bytes.
///
/// A body from a regular file ([`Upload::from_file`]) — or a multipart
/// form whose parts are in memory or regular files — is read again from
/// where it began for each exchange that sends it: like one in memory, it
/// goes again when a request does (a `307` or `308`, a retry, a hedged
/// copy, a request sent again on a fresh connection when its pooled one
/// was found closed), as curl rewinds a file.
///
/// Any other streamed body is sent once: a request with one is never
/// retried, and a `307` or `308` to it is the response. The exception,
/// over HTTP/1.1: an answer to its `Expect: 100-continue` that comes before
/// `100 Continue` (and before the delay of
/// [`expect_continue_timeout`](crate::ClientBuilder::expect_continue_timeout))
/// finds none of it gone, and the body goes whole, the same source — after
/// a `417 Expectation Failed` on the request sent again once without the
/// `Expect`, after a redirect that keeps the body (a `307`, a `308`) on
/// the hop it leads to.
///
/// A 2xx answer that comes whole before a streamed body's end lets the
/// upload go on (RFC 9113 §8.1; over HTTP/1.1 too, RFC 9112 §9.5 asks only
/// a refusal to stop it), and its body's end waits for the upload's: the
/// response's bytes can be read, but reading it to its end (`bytes()`, a
/// read that wants the end) waits until the source ends, or the server
/// resets the stream or closes the connection (over HTTP/1.1, the
/// connection is pooled once both are done). A source that
/// has nothing more to give and never ends holds that end for as long:
/// nothing else bounds it — the read timeout is off (nothing is left to
/// read), the write timeout counts only a server that takes no more — but
/// the request timeout (60 s by default: it stops the upload, and the
/// answer, whole, stands — its end comes then), a cancel, or dropping the
/// response's body (which stops the upload). A refusal (any other final
/// status) stops the upload at once.
pub struct Upload {
    pub(crate) kind: UploadKind,
}

pub(crate) enum UploadKind {
    Bytes(Bytes),
    /// A regular file's, or a form's of bytes and regular files: read
    /// anew by each exchange that sends it.
    File(FileBody),
    Reader {
        reader: Unshared<Box<dyn Read + Send + 'static>>,
        length: Option<u64>,
    },
    Stream {
        body: BodyStream,
        length: Option<u64>,
    },
    /// A streamed body an exchange set up (a `Read`'s pump runs already)
    /// and never sent — answered with a `417` or a redirect, it waited for
    /// `100 Continue` — for the exchange that repeats the request or
    /// follows the redirect. `length`: as that exchange declared it.
    Unsent {
        source: UploadSource,
        length: Option<u64>,
    },
}

impl Upload {
    /// No body.
    pub fn empty() -> Upload {
        Upload::from(Bytes::new())
    }

    /// A body read from `reader`, of `length` bytes if known (then it is
    /// sent with `Content-Length`, and a reader that gives more or fewer
    /// fails the request with [`Error::RequestBody`](crate::Error::RequestBody);
    /// once it has given `length` bytes the body is whole, and the reader
    /// is not read further); chunked when `None`.
    pub fn from_reader(reader: impl Read + Send + 'static, length: Option<u64>) -> Upload {
        Upload {
            kind: UploadKind::Reader {
                reader: Unshared::new(Box::new(reader)),
                length,
            },
        }
    }

    /// A file's contents from where it is read (the start, unless it was
    /// read or sought into), its length from its metadata, as it is now:
    /// bytes written to the file later (a log still growing) are not the
    /// body's, and are not sent, as `curl -T` sends the size it measured
    /// (a file cut shorter meanwhile fails the request with
    /// [`Error::RequestBody`](crate::Error::RequestBody)). A regular
    /// file's body is read again from there by each exchange that sends
    /// it, so it may go again as one in memory does — after a `307` or
    /// `308`, by a retry or a hedged copy (see [`Upload`]); each reads it
    /// at its own offsets (`pread`), never moving the `File`'s position.
    ///
    /// A file that is not a regular one (a pipe, a FIFO, `/dev/stdin`, a
    /// character device) has no length there: its body goes chunked, to
    /// its end, once. Nor has a regular file whose metadata says nothing is
    /// left that still holds bytes — every file of `/proc` says it is
    /// empty, whatever it holds: such a file is read here for a byte, and
    /// goes chunked, once, if it gives one (empty, with its length, if
    /// not).
    ///
    /// # Errors
    ///
    /// What the file's `metadata`, its position (`stream_position`), or
    /// the read of that one byte fail with.
    pub fn from_file(mut file: std::fs::File) -> std::io::Result<Upload> {
        let metadata = file.metadata()?;
        if !metadata.is_file() {
            return Ok(Upload::from_reader(file, None));
        }
        let start = file.stream_position()?;
        let length = metadata.len().saturating_sub(start);
        let mut first = [0; 1];
        if length == 0 && read_retrying(&mut file, &mut first)? > 0 {
            return Ok(Upload::from_reader(
                Read::chain(std::io::Cursor::new(first), file),
                None,
            ));
        }
        Ok(Upload {
            kind: UploadKind::File(FileBody::of_pieces(vec![Piece::File {
                file: Arc::new(file),
                start,
                length,
            }])),
        })
    }

    /// A body polled from `body`; its length is its exact size hint, if it
    /// has one (chunked otherwise). That length holds as for
    /// [`from_reader`](Self::from_reader): sent with `Content-Length`, a
    /// frame that takes the body past it, or an end short of it, fails the
    /// request with [`Error::RequestBody`](crate::Error::RequestBody); once
    /// it has given that many bytes the body is whole, and `body` is not
    /// polled further.
    ///
    /// Its trailers (a frame of trailers, its last) go after it when it
    /// has no length: as the trailer section of its last chunk over
    /// HTTP/1.1, as a trailing HEADERS frame over HTTP/2. A body with a
    /// length ends with its last byte, before its trailers are polled: they
    /// are not sent (a body framed by `Content-Length` has no room for
    /// them). Trailers that hold a field that may not go in trailers — one
    /// that frames or routes the message, or belongs to the connection
    /// (`Content-Length`, `Transfer-Encoding`, `Trailer`, `Host`,
    /// `Connection`, `Keep-Alive`, `Proxy-Connection`, `Upgrade`, `TE`), or
    /// credentials (`Authorization`, `Cookie`, `Proxy-Authorization`: no
    /// server reads them there, and the client could not keep them from
    /// another origin a redirect leads the body to, nor a proxy's from
    /// the origin behind a tunnel) — fail the request with
    /// [`Error::RequestBody`](crate::Error::RequestBody).
    /// Empty frames are skipped, and small ones it has ready at once go
    /// together (as one chunk, or one DATA frame), up to 16 KiB: a frame
    /// is not a unit the server sees.
    ///
    /// Made inside a tokio runtime, `body` is polled inside it (its
    /// context entered, on the client's loop): a body that needs one — a
    /// tokio timer, a file of `tokio::fs`, a tokio socket — goes as it
    /// would under hyper. (With neither the `http2` nor the `tokio`
    /// feature, the client has no tokio to enter a runtime with.) That
    /// runtime must keep running while the body goes: one whose every
    /// thread is blocked — a current-thread runtime whose thread blocks in
    /// a [`wait`](crate::ResponseFuture::wait) of this request, inside or
    /// outside `block_on` — fires none of the body's timers, and the body
    /// waits until the request timeout (for ever without one); `.await`
    /// the response there instead.
    pub fn from_stream<B>(body: B) -> Upload
    where
        B: http_body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<BoxError>,
    {
        let length = body.size_hint().exact();
        let body = http_body_map(body);
        Upload {
            kind: UploadKind::Stream { body, length },
        }
    }

    /// A streamed body an exchange never sent, from its `source` as it
    /// left it, of `length` bytes if known.
    pub(crate) fn unsent(source: UploadSource, length: Option<u64>) -> Upload {
        Upload {
            kind: UploadKind::Unsent { source, length },
        }
    }

    /// The body's length, when known.
    pub fn length(&self) -> Option<u64> {
        match &self.kind {
            UploadKind::Bytes(bytes) => Some(bytes.len() as u64),
            UploadKind::File(file) => Some(file.length()),
            UploadKind::Reader { length, .. }
            | UploadKind::Stream { length, .. }
            | UploadKind::Unsent { length, .. } => *length,
        }
    }
}

/// A body read again from its start by each exchange that sends it: a
/// regular file's (one range of it), or a multipart form's whose parts are
/// in memory or regular files (its parts' heads and bytes between the
/// files' ranges). Each exchange that sends it reads it with a
/// [`reader`](Self::reader) of its own, so it may go again — and two may
/// read it at once (a hedged copy; an earlier hop's pump not yet let go).
#[derive(Clone)]
pub(crate) struct FileBody {
    pieces: Arc<[Piece]>,
    /// The pieces' lengths added up.
    length: u64,
}

/// A piece of a [`FileBody`].
#[derive(Clone)]
pub(crate) enum Piece {
    Bytes(Bytes),
    /// `length` bytes of a regular file from `start`, the length it had
    /// when measured: what it holds past them (written since) is not the
    /// body's.
    File {
        file: Arc<std::fs::File>,
        start: u64,
        length: u64,
    },
}

impl Piece {
    fn len(&self) -> u64 {
        match self {
            Piece::Bytes(bytes) => bytes.len() as u64,
            Piece::File { length, .. } => *length,
        }
    }
}

impl FileBody {
    /// The body of `pieces`, one after the other.
    pub(crate) fn of_pieces(pieces: Vec<Piece>) -> FileBody {
        FileBody {
            length: pieces.iter().map(Piece::len).sum(),
            pieces: pieces.into(),
        }
    }

    /// Its pieces, in order.
    pub(crate) fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// Its length.
    pub(crate) fn length(&self) -> u64 {
        self.length
    }

    /// A reader of the body from its start.
    pub(crate) fn reader(&self) -> FileReader {
        FileReader {
            pieces: self.pieces.clone(),
            piece: 0,
            at: 0,
        }
    }
}

/// Reads a [`FileBody`] from where it has got to: `at` bytes into its
/// piece `piece`. A file's piece is read by offset (`pread`), since the
/// file's one position is shared by every reader of it — and no further
/// than the piece's length: what the file holds past it is not the
/// body's, and a read that took some would fail the body as longer than
/// its `Content-Length`. A file cut shorter meanwhile ends the body
/// there, short (which fails it as shorter than its `Content-Length`):
/// nothing after it is read.
pub(crate) struct FileReader {
    pieces: Arc<[Piece]>,
    piece: usize,
    at: u64,
}

impl Read for FileReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        while let Some(piece) = self.pieces.get(self.piece) {
            let left = piece.len() - self.at;
            if left == 0 {
                (self.piece, self.at) = (self.piece + 1, 0);
                continue;
            }
            let room = usize::try_from(left).map_or(buf.len(), |left| left.min(buf.len()));
            let read = match piece {
                Piece::Bytes(bytes) => {
                    let at = self.at as usize;
                    buf[..room].copy_from_slice(&bytes[at..at + room]);
                    room
                }
                Piece::File { file, start, .. } => {
                    file.read_at(&mut buf[..room], start + self.at)?
                }
            };
            if read == 0 {
                // The file is shorter than when measured: the body's end.
                self.piece = self.pieces.len();
                return Ok(0);
            }
            self.at += read as u64;
            return Ok(read);
        }
        Ok(0)
    }
}

/// One read of `reader` into `buf`, again if interrupted.
fn read_retrying(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match reader.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            read => return read,
        }
    }
}

/// The tokio runtime an async body was made in, if any: the body is
/// polled on the client's loop, most often a thread of no runtime, and a
/// body of tokio's own (a timer, `tokio::fs`, a socket) panics when polled
/// outside one ("there is no reactor running"). So its context is entered
/// around each poll, as hyper polls a body inside the runtime that drives
/// it.
/// Without tokio (neither the `http2` nor the `tokio` feature) there is
/// none to enter.
struct CallersRuntime {
    #[cfg(any(feature = "http2", feature = "tokio"))]
    handle: Option<tokio::runtime::Handle>,
}

impl CallersRuntime {
    /// The runtime of the calling thread, if it is in one.
    fn current() -> CallersRuntime {
        CallersRuntime {
            #[cfg(any(feature = "http2", feature = "tokio"))]
            handle: tokio::runtime::Handle::try_current().ok(),
        }
    }

    /// Runs `poll` inside the runtime, if there is one.
    fn enter<T>(&self, poll: impl FnOnce() -> T) -> T {
        #[cfg(any(feature = "http2", feature = "tokio"))]
        let _entered = self.handle.as_ref().map(tokio::runtime::Handle::enter);
        poll()
    }
}

/// Adapts any body to one of `Bytes` with boxed errors, polled inside the
/// runtime it was made in ([`CallersRuntime`]).
fn http_body_map<B>(body: B) -> BodyStream
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    /// The body, pinned in a box of its own (`Mapped` is then `Unpin`),
    /// and the runtime it is polled in.
    struct Mapped<B>(std::pin::Pin<Box<B>>, CallersRuntime);

    impl<B> http_body::Body for Mapped<B>
    where
        B: http_body::Body,
        B::Error: Into<BoxError>,
    {
        type Data = Bytes;
        type Error = BoxError;

        fn poll_frame(
            self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
            let Mapped(body, runtime) = self.get_mut();
            runtime.enter(|| body.as_mut().poll_frame(cx)).map(|frame| {
                frame.map(|frame| {
                    frame
                        .map(|frame| {
                            frame.map_data(|mut data| data.copy_to_bytes(data.remaining()))
                        })
                        .map_err(Into::into)
                })
            })
        }

        fn size_hint(&self) -> http_body::SizeHint {
            self.0.size_hint()
        }
    }

    Unshared::new(Box::pin(Mapped(Box::pin(body), CallersRuntime::current())))
}

impl From<Bytes> for Upload {
    fn from(bytes: Bytes) -> Upload {
        Upload {
            kind: UploadKind::Bytes(bytes),
        }
    }
}

impl From<Vec<u8>> for Upload {
    fn from(bytes: Vec<u8>) -> Upload {
        Upload::from(Bytes::from(bytes))
    }
}

impl From<String> for Upload {
    fn from(text: String) -> Upload {
        Upload::from(Bytes::from(text))
    }
}

impl From<&'static str> for Upload {
    fn from(text: &'static str) -> Upload {
        Upload::from(Bytes::from_static(text.as_bytes()))
    }
}

impl From<&'static [u8]> for Upload {
    fn from(bytes: &'static [u8]) -> Upload {
        Upload::from(Bytes::from_static(bytes))
    }
}

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.kind {
            UploadKind::Bytes(_) => "bytes",
            UploadKind::File(_) => "file",
            UploadKind::Reader { .. }
            | UploadKind::Unsent {
                source: UploadSource::Pumped(_),
                ..
            } => "reader",
            UploadKind::Stream { .. }
            | UploadKind::Unsent {
                source: UploadSource::Stream(_),
                ..
            } => "stream",
        };
        f.debug_struct("Upload")
            .field("kind", &kind)
            .field("length", &self.length())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two readers of one file's body, their reads interleaved (a hedged
    /// copy beside its attempt; a hop's pump not yet let go beside the
    /// next's): each reads the whole body, from where the file was when
    /// given — the file's one position does not carry one's reads into the
    /// other's.
    #[test]
    fn readers_of_a_files_body_each_read_it_whole_from_its_start() {
        let path = std::env::temp_dir().join(format!(
            "tickless-file-body-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::write(&path, b"skip|0123456789").unwrap();
        let mut file = std::fs::File::open(&path).unwrap();
        file.seek(std::io::SeekFrom::Start(5)).unwrap();
        let upload = Upload::from_file(file).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(upload.length(), Some(10));
        let UploadKind::File(body) = upload.kind else {
            panic!("a regular file's body: {upload:?}");
        };
        let mut readers = [body.reader(), body.reader()];
        let mut read = [Vec::new(), Vec::new()];
        let mut buf = [0; 3];
        for _ in 0..5 {
            for (reader, read) in readers.iter_mut().zip(&mut read) {
                let n = reader.read(&mut buf).unwrap();
                read.extend_from_slice(&buf[..n]);
            }
        }
        assert_eq!(read, [b"0123456789", b"0123456789"]);
    }

    /// A body of pieces (a form's) whose file was cut shorter after its
    /// length was taken ends with what the file still holds: nothing
    /// after that piece is read, and the body, short, fails as shorter
    /// than its `Content-Length` — not sent with the next piece's bytes
    /// in the file's place.
    #[test]
    fn a_body_whose_file_was_cut_shorter_ends_there() {
        let path = std::env::temp_dir().join(format!(
            "tickless-file-pieces-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::write(&path, b"0123456789").unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let body = FileBody::of_pieces(vec![
            Piece::Bytes(Bytes::from_static(b"head|")),
            Piece::File {
                file: Arc::new(file),
                start: 0,
                length: 10,
            },
            Piece::Bytes(Bytes::from_static(b"|tail")),
        ]);
        assert_eq!(body.length(), 20);
        std::fs::write(&path, b"0123").unwrap();
        let mut read = Vec::new();
        body.reader().read_to_end(&mut read).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(read, b"head|0123");
    }
}
