//! Fuzz target: the `h1` response decoder, fed arbitrary bytes split at
//! arbitrary points. The input format and the checks are in
//! `h1_response_check.rs`, shared with the corpus replay test
//! (`client/tests/h1_fuzz_corpus.rs`).

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "h1_response_check.rs"]
mod check;

fuzz_target!(|data: &[u8]| {
    check::check(data);
});
