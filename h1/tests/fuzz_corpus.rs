//! Replays the `h1_response` fuzz corpus (`fuzz/corpus/h1_response/`, found
//! and minimized by `cargo fuzz`) and the named seeds (`fuzz/seeds/`) through
//! the fuzz target's own checks, so CI catches a regression on any input the
//! fuzzer once found interesting without running the fuzzer. Also: any split
//! of a valid seed response decodes to the same result as the whole.

use std::fs;
use std::panic;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use tickless_h1::{decode_all, decode_pieces};

#[path = "../../fuzz/fuzz_targets/h1_response_check.rs"]
mod check;

/// The regular files of `fuzz/<sub>`, sorted. Panics if the directory is
/// missing or empty: a replay of nothing must not pass.
fn files(sub: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz")
        .join(sub);
    let entries =
        fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no files in {}", dir.display());
    files
}

/// Runs the fuzz target's checks on every file of `fuzz/<sub>`, reporting
/// all failing files at once.
fn replay(sub: &str) {
    let files = files(sub);
    let mut failures = Vec::new();
    for path in &files {
        let bytes = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if let Err(payload) = panic::catch_unwind(|| check::check(&bytes)) {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            failures.push(format!("{}: {message}", path.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} inputs in fuzz/{sub} failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

#[test]
fn fuzz_corpus_replays_clean() {
    replay("corpus/h1_response");
}

#[test]
fn fuzz_seeds_replay_clean() {
    replay("seeds");
}

/// The seeds that decode whole without error, as (file, fuzz input).
fn valid_seeds() -> Vec<(PathBuf, Vec<u8>)> {
    files("seeds")
        .into_iter()
        .map(|path| {
            let bytes = fs::read(&path).unwrap();
            (path, bytes)
        })
        .filter(|(_, bytes)| {
            let case = check::parse(bytes);
            decode_all(case.limits, case.is_head, case.data, case.eof_at_end).is_ok()
        })
        .collect()
}

#[test]
fn most_seeds_are_valid_responses() {
    // Guards the split properties below against seeds that all fail early.
    assert!(valid_seeds().len() >= 10, "{:?}", valid_seeds());
}

#[test]
fn every_two_way_split_of_a_valid_seed_decodes_the_same() {
    for (path, bytes) in valid_seeds() {
        let case = check::parse(&bytes);
        let whole = decode_all(case.limits, case.is_head, case.data, case.eof_at_end).unwrap();
        for k in 0..=case.data.len() {
            let (a, b) = case.data.split_at(k);
            let split = decode_pieces(case.limits, case.is_head, &[a, b], case.eof_at_end);
            assert_eq!(
                split.as_ref(),
                Ok(&whole),
                "{} split at {k}",
                path.display()
            );
        }
        let bytewise: Vec<&[u8]> = case.data.chunks(1).collect();
        let split = decode_pieces(case.limits, case.is_head, &bytewise, case.eof_at_end);
        assert_eq!(
            split.as_ref(),
            Ok(&whole),
            "{} byte by byte",
            path.display()
        );
    }
}

#[path = "../src/test_pieces.rs"]
mod test_pieces;
use test_pieces::split_at_points;

proptest! {
    #[test]
    fn any_split_of_a_valid_seed_decodes_the_same(
        which in any::<prop::sample::Index>(),
        points in prop::collection::vec(any::<usize>(), 0..24),
    ) {
        let seeds = valid_seeds();
        let (path, bytes) = &seeds[which.index(seeds.len())];
        let case = check::parse(bytes);
        let whole = decode_all(case.limits, case.is_head, case.data, case.eof_at_end);
        prop_assert!(whole.is_ok(), "{}: {:?}", path.display(), whole);
        let pieces = split_at_points(case.data, &points);
        let split = decode_pieces(case.limits, case.is_head, &pieces, case.eof_at_end);
        prop_assert_eq!(whole, split, "{} split at {:?}", path.display(), points);
    }
}
