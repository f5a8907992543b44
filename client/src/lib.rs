//! The tickless HTTP/1.1 client: event loops on mio, a sans-IO codec, a
//! connection pool, and timeouts that can be armed on the loop that owns the
//! connection.
//!
//! Start with [`Client::builder`]; the option that gives the crate its name
//! is [`ClientBuilder::use_event_loop_timeouts`].
#![deny(missing_docs)]

mod client;
mod config;
mod conn;
mod error;
mod event_loop;
mod events;
mod exchange;
mod future;
pub mod h1;
mod origin;
mod pool;
mod request;
mod resolve;
mod response;
mod timeouts;

pub use client::{Client, ClientStats};
pub use config::ClientBuilder;
pub use error::{timeout_kind, Error, InvalidRequest, Timeout, TimeoutKind};
pub use event_loop::{
    EventLoop, EventLoopGroup, EventLoopGroupBuilder, LoopContext, LoopTask, LoopTimeout,
    LoopTimerKey, Rejected, SchedulerFactory, TimeoutScheduler,
};
pub use events::{ConnectionInfo, EventListener, NoopListener};
pub use exchange::BodySink;
pub use future::ResponseFuture;
pub use origin::{Origin, Scheme};
pub use request::RequestBuilder;
pub use response::Response;
