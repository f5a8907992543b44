//! Shared by the codec's unit tests and the corpus replay in
//! `client/tests/h1_fuzz_corpus.rs` (included there by path): test code
//! only, depending on nothing but `core`.

/// Cuts `bytes` at the given (unsorted, possibly repeated) points.
pub(crate) fn split_at_points<'a>(bytes: &'a [u8], points: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = points.iter().map(|p| p % (bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut pieces = Vec::with_capacity(points.len() + 1);
    let mut start = 0;
    for p in points {
        pieces.push(&bytes[start..p]);
        start = p;
    }
    pieces.push(&bytes[start..]);
    pieces
}
