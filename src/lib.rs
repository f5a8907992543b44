//! tickless: an HTTP client whose deadlines are exact.
//!
//! A 20 ms request timeout fires at 20 ms, not at the next tick of a shared
//! wheel: with [`ClientBuilder::use_event_loop_timeouts`], request and read
//! timeouts are armed on the event loop that owns the connection.
//!
//! This crate re-exports [`tickless_client`] at its root, and the timer
//! crate as [`timer`]. Every example below runs as a test, against a
//! loopback server it starts itself.
//!
//! # The first request
//!
//! Blocking — the future is waited on; it resolves when the response's
//! head has come, and the body is read after:
//!
//! ```
//! # let url = tickless::doc_support::serve_text("hello");
//! let client = tickless::Client::new();
//! let response = client.get(&url).send().wait()?;
//! println!("{}", response.status());
//! assert_eq!(response.text().wait()?, "hello");
//! # Ok::<(), tickless::Error>(())
//! ```
//!
//! Async — [`ResponseFuture`] is a `std::future::Future` that needs no
//! particular runtime (here tokio's), and so are the body's:
//!
//! ```
//! # let url = tickless::doc_support::serve_text("hello");
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let client = tickless::Client::new();
//! let response = client.get(&url).send().await?;
//! assert_eq!(response.text().await?, "hello");
//! # Ok::<(), tickless::Error>(())
//! # }).unwrap();
//! ```
//!
//! # Timeouts, and the two places they are armed
//!
//! A request timeout bounds the whole request (every redirect, retry and
//! body byte), fixed when it is sent; a read timeout the server's silence.
//! Both are set on the client and may be overridden per request. By default
//! they are armed on one shared hashed-wheel timer (its tick — 100 ms by
//! default, as the Java client's; [`ClientBuilder::wheel_tick`] sets it —
//! is the lateness); with [`ClientBuilder::use_event_loop_timeouts`] on the
//! deadline heap of the loop that owns the connection, which wakes for them
//! exactly. The README's "Where timeouts are armed" says what each costs and
//! when to choose it; `tick-lag` measures it.
//!
//! ```
//! # let url = tickless::doc_support::silent();
//! use std::time::Duration;
//!
//! let client = tickless::Client::builder()
//!     .request_timeout(Duration::from_millis(20))
//!     .read_timeout(Duration::from_millis(10))
//!     .use_event_loop_timeouts(true)
//!     .build()?;
//! let error = client.get(&url).send().wait().unwrap_err();
//! assert!(error.is_timeout());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Streaming
//!
//! Bodies are streams both ways, in bounded memory: a response [`Body`] is a
//! `std::io::Read`, a chunk at a time, or an `http_body::Body`; an
//! [`Upload`] is bytes, a `Read`, a file or a stream.
//!
//! ```
//! # let url = tickless::doc_support::serve(|_, _, body| {
//! #     tickless::doc_support::ok(&body.len().to_string())
//! # });
//! use std::io::Read;
//!
//! let client = tickless::Client::new();
//! let upload = tickless::Upload::from_reader(std::io::repeat(7).take(1 << 20), Some(1 << 20));
//! let mut response = client.put(&url).body(upload).send().wait()?;
//! let mut answer = String::new();
//! response.body_mut().read_to_string(&mut answer)?;
//! assert_eq!(answer, "1048576");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # HTTP/2
//!
//! Over TLS the client offers `h2` and `http/1.1` by ALPN and speaks what the
//! server picks; over cleartext, [`ClientBuilder::http2_prior_knowledge`]
//! speaks HTTP/2 from the first byte ([`ClientBuilder::http1_only`] and
//! [`ClientBuilder::http2_only`] narrow the offer). One connection per origin
//! carries every request to it as a stream, driven on its event loop with no
//! async runtime; each stream keeps its own request and read deadlines, and
//! one that expires resets that stream alone. [`Response::version`] says
//! which protocol answered. The README's "HTTP/2" has the details.
//!
//! Three requests to a cleartext HTTP/2 server, sent at once (`send()`
//! submits), awaited in turn; one connection carries them all:
//!
#![cfg_attr(feature = "http2", doc = "```")]
#![cfg_attr(not(feature = "http2"), doc = "```ignore")]
//! # let url = tickless::doc_support::serve_h2("hello");
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let client = tickless::Client::builder().http2_prior_knowledge().build()?;
//! let requests = ["/a", "/b", "/c"].map(|path| client.get(format!("{url}{path}")).send());
//! for request in requests {
//!     let response = request.await?;
//!     assert_eq!(response.version(), http::Version::HTTP_2);
//!     assert_eq!(response.text().await?, "hello");
//! }
//! assert_eq!(client.stats().open_connections, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # Errors
//!
//! [`Error`] has one variant per kind of failure, each naming the remote;
//! a timeout names its kind and duration, and [`timeout_kind`] finds it
//! through any wrapping. Nothing a server sends panics the client: bad
//! framing, a body that lies about its coding or is cut short, a hostile
//! head — each is an error where it is read.
//!
//! ```
//! let client = tickless::Client::new();
//! let error = client.get("not a url").send().wait().unwrap_err();
//! assert!(matches!(error, tickless::Error::InvalidRequest(_)));
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub use tickless_client::*;
pub use tickless_timer as timer;
