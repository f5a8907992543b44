//! [`Occupancy`]: which of a wheel's buckets hold an entry, one bit each,
//! with a summary bit per word, so the next occupied bucket is found in a
//! few dozen word reads however large and sparse the wheel.

/// Bits per word.
const WORD_BITS: usize = u64::BITS as usize;

/// One bit per bucket, set while the bucket holds an entry.
///
/// Invariants: bit `b` of `words` is set iff bucket `b` is occupied (the
/// wheel sets and clears it as a bucket's list goes from and to empty), and
/// bit `w` of `summary` is set iff `words[w]` is not zero. No bit at or past
/// `buckets` is ever set.
///
/// At [`MAX_WHEEL_SIZE`](super::MAX_WHEEL_SIZE) buckets that is 16 384
/// words under 256 summary words: a search reads at most the summary and
/// two words, where a walk of the buckets would look at 2^20.
pub(super) struct Occupancy {
    words: Box<[u64]>,
    summary: Box<[u64]>,
}

impl Occupancy {
    /// All of `buckets` empty; `buckets` is a power of two (any size works,
    /// the wheel only makes powers of two).
    pub(super) fn new(buckets: usize) -> Self {
        let words = buckets.div_ceil(WORD_BITS).max(1);
        Occupancy {
            words: vec![0; words].into_boxed_slice(),
            summary: vec![0; words.div_ceil(WORD_BITS)].into_boxed_slice(),
        }
    }

    /// Bucket `bucket` now holds an entry.
    pub(super) fn set(&mut self, bucket: usize) {
        let word = bucket / WORD_BITS;
        self.words[word] |= 1 << (bucket % WORD_BITS);
        self.summary[word / WORD_BITS] |= 1 << (word % WORD_BITS);
    }

    /// Bucket `bucket` is empty now.
    pub(super) fn clear(&mut self, bucket: usize) {
        let word = bucket / WORD_BITS;
        self.words[word] &= !(1 << (bucket % WORD_BITS));
        if self.words[word] == 0 {
            self.summary[word / WORD_BITS] &= !(1 << (word % WORD_BITS));
        }
    }

    /// Every bucket is empty now.
    pub(super) fn clear_all(&mut self) {
        self.words.fill(0);
        self.summary.fill(0);
    }

    /// The first occupied bucket at or after `from`, going no further than
    /// the last bucket (no wrap-around).
    pub(super) fn first_from(&self, from: usize) -> Option<usize> {
        let word = from / WORD_BITS;
        let here = self.words.get(word)? & (u64::MAX << (from % WORD_BITS));
        if here != 0 {
            return Some(word * WORD_BITS + here.trailing_zeros() as usize);
        }
        let word = self.first_word_from(word + 1)?;
        Some(word * WORD_BITS + self.words[word].trailing_zeros() as usize)
    }

    /// The first non-zero word at or after `from`, by the summary.
    fn first_word_from(&self, from: usize) -> Option<usize> {
        let mut index = from / WORD_BITS;
        let mut bits = self.summary.get(index)? & (u64::MAX << (from % WORD_BITS));
        while bits == 0 {
            index += 1;
            bits = *self.summary.get(index)?;
        }
        Some(index * WORD_BITS + bits.trailing_zeros() as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The answer of a walk over the buckets, one by one.
    fn walked(occupied: &[bool], from: usize) -> Option<usize> {
        (from..occupied.len()).find(|&bucket| occupied[bucket])
    }

    proptest! {
        /// Random occupancy (dense, sparse, or nearly empty), built by sets
        /// and clears in random order: every answer is the walk's.
        #[test]
        fn answers_as_a_walk_over_the_buckets(
            size_log2 in 0u32..15,
            density in prop_oneof![Just(0.0), Just(0.0005), Just(0.01), Just(0.5)],
            seed in any::<u64>(),
            starts in proptest::collection::vec(any::<usize>(), 1..40),
        ) {
            let size = 1usize << size_log2;
            let mut occupancy = Occupancy::new(size);
            let mut occupied = vec![false; size];
            let mut state = seed | 1;
            let mut next = || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state
            };
            // Set about twice the density, then clear about half of those,
            // so clears (and words going back to zero) are exercised too.
            for (bucket, occupied) in occupied.iter_mut().enumerate() {
                if (next() as f64 / u64::MAX as f64) < density * 2.0 {
                    occupancy.set(bucket);
                    *occupied = true;
                }
            }
            for (bucket, occupied) in occupied.iter_mut().enumerate() {
                if *occupied && next() % 2 == 0 {
                    occupancy.clear(bucket);
                    *occupied = false;
                }
            }
            for start in starts {
                let from = start % size;
                prop_assert_eq!(occupancy.first_from(from), walked(&occupied, from));
            }
            prop_assert_eq!(occupancy.first_from(0), walked(&occupied, 0));
            prop_assert_eq!(occupancy.first_from(size), None);
            occupancy.clear_all();
            prop_assert_eq!(occupancy.first_from(0), None);
        }
    }

    #[test]
    fn finds_the_last_bucket_of_the_largest_wheel_from_the_first() {
        let size = crate::MAX_WHEEL_SIZE;
        let mut occupancy = Occupancy::new(size);
        occupancy.set(size - 1);
        assert_eq!(occupancy.first_from(0), Some(size - 1));
        assert_eq!(occupancy.first_from(size - 1), Some(size - 1));
        occupancy.set(5);
        occupancy.clear(5);
        assert_eq!(occupancy.first_from(0), Some(size - 1));
        occupancy.clear(size - 1);
        assert_eq!(occupancy.first_from(0), None);
    }
}
