//! The tickless HTTP/1.1 client.
#![deny(missing_docs)]
pub mod h1;
