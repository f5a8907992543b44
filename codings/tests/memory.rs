//! Peak memory of the decoders on decompression bombs, and what a decoder
//! holds before its first byte, measured by a counting global allocator.
//!
//! Each bomb is 1 GiB of zeros (256 MiB stacked, 64 MiB for the runs to
//! completion),
//! compressed lazily by an encoder reading `io::repeat(0)`: only the part the
//! decoder asks for is ever generated, and nothing large is held. The
//! allocator counts, per thread, only what is allocated and freed *inside*
//! decoder calls (construction, `decode`, `finish`, drop), so the encoder's
//! own memory and the test's buffers are left out and the tests can run in
//! parallel.
//!
//! This is the one place with `unsafe`: a `GlobalAlloc` cannot be written
//! without it. The module under test forbids it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
#[allow(unused_imports)]
use std::io::{self, Read};
use tickless_codings::{Coding, ContentDecoder, DecodeError, DecoderConfig};

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;
const GIB: u64 = 1 << 30;
/// The decoded-size limit of the bomb runs.
const LIMIT: u64 = 1 << 20;
/// What a decoder may hold at most, for codings whose window is at most
/// 1 MiB (all of them but the large-window runs below).
const BOUND: usize = 4 * MIB;

thread_local! {
    static TRACKING: Cell<bool> = const { Cell::new(false) };
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn grew(size: usize) {
    let _ = TRACKING.try_with(|tracking| {
        if tracking.get() {
            LIVE.with(|live| {
                let now = live.get() + size;
                live.set(now);
                PEAK.with(|peak| peak.set(peak.get().max(now)));
            });
        }
    });
}

fn shrank(size: usize) {
    let _ = TRACKING.try_with(|tracking| {
        if tracking.get() {
            LIVE.with(|live| live.set(live.get().saturating_sub(size)));
        }
    });
}

/// The system allocator, counting the bytes live on this thread while
/// [`TRACKING`] is set.
struct Counting;

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; the counting only touches thread-local `Cell`s, which neither
// allocate nor unwind.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        // SAFETY: the caller guarantees `layout` has a non-zero size.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grew(new_size);
        shrank(layout.size());
        // SAFETY: the caller guarantees `ptr` came from this allocator (so
        // from `System`) with `layout`, and that `new_size` is valid for it.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shrank(layout.size());
        // SAFETY: the caller guarantees `ptr` was allocated by this
        // allocator, that is by `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` with its allocations counted.
fn tracked<R>(f: impl FnOnce() -> R) -> R {
    TRACKING.with(|t| t.set(true));
    let r = f();
    TRACKING.with(|t| t.set(false));
    r
}

/// What one run measured.
#[derive(Debug)]
struct Run {
    result: Result<(), DecodeError>,
    total_in: u64,
    total_out: u64,
    /// The most the decoder held at once.
    peak: usize,
    /// What it still held after being dropped (should be nothing).
    leaked: usize,
}

/// Streams `source` through a decoder for `header` in 16 KiB pieces, into a
/// 64 KiB output buffer, counting the decoder's memory.
fn measure(header: &str, config: DecoderConfig, mut source: impl Read) -> Run {
    let mut input = vec![0u8; 16 * KIB];
    let mut out = vec![0u8; 64 * KIB];
    LIVE.with(|l| l.set(0));
    PEAK.with(|p| p.set(0));
    let mut dec = tracked(|| ContentDecoder::with_config(header, &config))
        .expect("supported")
        .expect("encoded");
    let result = (|| {
        loop {
            let n = source.read(&mut input).expect("encoder");
            if n == 0 {
                break;
            }
            let mut rest = &input[..n];
            loop {
                let (c, p) = tracked(|| dec.decode(rest, &mut out))?;
                rest = &rest[c..];
                if p < out.len() {
                    break;
                }
            }
        }
        while !tracked(|| dec.finish(&mut out))?.1 {}
        Ok(())
    })();
    let (total_in, total_out) = (dec.total_in(), dec.total_out());
    tracked(|| drop(dec));
    Run {
        result,
        total_in,
        total_out,
        peak: PEAK.with(Cell::get),
        leaked: LIVE.with(Cell::get),
    }
}

/// Checks a bomb run stopped at the limit within `bound` bytes.
fn assert_stopped(name: &str, run: &Run, bound: usize) {
    eprintln!(
        "{name}: peak {} KiB, {} bytes in, {} out, {:?}",
        run.peak / KIB,
        run.total_in,
        run.total_out,
        run.result
    );
    assert_eq!(
        run.result,
        Err(DecodeError::TooLarge { limit: LIMIT }),
        "{name}"
    );
    assert_eq!(run.total_out, LIMIT, "{name}");
    assert!(run.peak <= bound, "{name}: peak {} > {bound}", run.peak);
    assert!(
        run.leaked < KIB,
        "{name}: {} bytes left after drop",
        run.leaked
    );
}

fn zeros(len: u64) -> io::Take<io::Repeat> {
    io::repeat(0).take(len)
}

fn limited() -> DecoderConfig {
    DecoderConfig::new().max_decoded_bytes(LIMIT)
}

#[cfg(feature = "gzip")]
fn gzip_reader<R: Read>(r: R) -> flate2::read::GzEncoder<R> {
    flate2::read::GzEncoder::new(r, flate2::Compression::best())
}

#[allow(dead_code)]
fn brotli_reader<R: Read>(r: R, lgwin: u32) -> brotli::CompressorReader<R> {
    brotli::CompressorReader::new(r, 4096, 5, lgwin)
}

#[cfg(feature = "zstd")]
fn zstd_reader<R: Read>(
    r: R,
    window_log: u32,
) -> zstd::stream::read::Encoder<'static, io::BufReader<R>> {
    let mut e = zstd::stream::read::Encoder::new(r, 3).expect("zstd encoder");
    e.window_log(window_log).expect("window log");
    e
}

#[cfg(feature = "gzip")]
#[test]
fn gzip_bomb() {
    let run = measure("gzip", limited(), gzip_reader(zeros(GIB)));
    assert_stopped("gzip", &run, BOUND);
    // The inflater is about 43 KB; nothing else grows.
    assert!(run.peak <= 128 * KIB, "{run:?}");
}

#[cfg(feature = "deflate")]
#[test]
fn deflate_bombs() {
    let zlib = flate2::read::ZlibEncoder::new(zeros(GIB), flate2::Compression::best());
    let run = measure("deflate", limited(), zlib);
    assert_stopped("deflate (zlib)", &run, BOUND);
    assert!(run.peak <= 128 * KIB, "{run:?}");
    let raw = flate2::read::DeflateEncoder::new(zeros(GIB), flate2::Compression::best());
    let run = measure("deflate", limited(), raw);
    assert_stopped("deflate (raw)", &run, BOUND);
    assert!(run.peak <= 128 * KIB, "{run:?}");
}

#[cfg(feature = "brotli")]
#[test]
fn brotli_bomb() {
    // A 1 MiB window: the ring buffer is at most 1 MiB (+ slack).
    let run = measure("br", limited(), brotli_reader(zeros(GIB), 20));
    assert_stopped("br (1 MiB window)", &run, BOUND);
}

#[cfg(feature = "brotli")]
#[test]
fn brotli_bomb_with_the_largest_window() {
    // A 16 MiB window, as RFC 7932 allows: by default the ring buffer may
    // take all of it (1.5x while it regrows).
    let run = measure("br", limited(), brotli_reader(zeros(GIB), 24));
    assert_stopped("br (16 MiB window)", &run, 16 * MIB * 3 / 2 + 2 * MIB);
    // Capped at 4 MiB, the same stream is refused before the 16 MiB buffer.
    let capped = limited().max_window_bytes(4 << 20);
    let run = measure("br", capped, brotli_reader(zeros(GIB), 24));
    eprintln!(
        "br (16 MiB window, 4 MiB cap): peak {} KiB, {:?}",
        run.peak / KIB,
        run.result
    );
    assert_eq!(
        run.result,
        Err(DecodeError::WindowTooLarge {
            coding: Coding::Brotli,
            window: 16 << 20,
            max: 4 << 20
        })
    );
    assert!(run.peak <= 4 * MIB * 3 / 2 + 2 * MIB, "{run:?}");
    assert!(run.leaked < KIB, "{run:?}");
}

#[cfg(feature = "zstd")]
#[test]
fn zstd_bomb() {
    let run = measure("zstd", limited(), zstd_reader(zeros(GIB), 20));
    assert_stopped("zstd (1 MiB window)", &run, BOUND);
}

#[cfg(feature = "zstd")]
#[test]
fn zstd_bomb_with_the_largest_default_window() {
    // 8 MiB, the RFC 9659 maximum: libzstd's buffers are the window plus
    // two blocks.
    let run = measure("zstd", limited(), zstd_reader(zeros(GIB), 23));
    assert_stopped("zstd (8 MiB window)", &run, 8 * MIB + 2 * MIB);
    // A 16 MiB window is refused from the frame header, before libzstd
    // allocates anything for it.
    let run = measure("zstd", limited(), zstd_reader(zeros(GIB), 24));
    eprintln!(
        "zstd (16 MiB window): peak {} KiB, {:?}",
        run.peak / KIB,
        run.result
    );
    assert!(
        matches!(run.result, Err(DecodeError::WindowTooLarge { .. })),
        "{run:?}"
    );
    assert!(run.peak <= 512 * KIB, "{run:?}");
}

/// Every enabled coding stacked, each wrapping the bomb again. (256 MiB:
/// an outer encoder only emits once the inner ones have squeezed a lot of
/// zeros, so the whole inner bomb gets generated, which takes a while in a
/// debug build.)
#[test]
fn stacked_bomb() {
    #[allow(unused_mut)]
    let mut header: Vec<&str> = Vec::new();
    #[allow(unused_mut)]
    let mut source: Box<dyn Read> = Box::new(zeros(GIB / 4));
    #[cfg(feature = "gzip")]
    {
        source = Box::new(gzip_reader(source));
        header.push("gzip");
    }
    #[cfg(feature = "deflate")]
    {
        source = Box::new(flate2::read::ZlibEncoder::new(
            source,
            flate2::Compression::best(),
        ));
        header.push("deflate");
    }
    #[cfg(feature = "brotli")]
    {
        source = Box::new(brotli_reader(source, 20));
        header.push("br");
    }
    #[cfg(feature = "zstd")]
    {
        source = Box::new(zstd_reader(source, 20));
        header.push("zstd");
    }
    if header.len() < 2 {
        return; // nothing to stack in this build
    }
    let header = header.join(", ");
    let run = measure(&header, limited(), source);
    assert_stopped(&header, &run, 2 * BOUND);
}

/// Decoded to the end, with no limit: memory does not grow with the output.
#[test]
fn whole_bomb_without_limit_stays_bounded() {
    const LEN: u64 = 64 << 20;
    #[allow(unused_mut)]
    let mut sources: Vec<(&str, Box<dyn Read>)> = Vec::new();
    #[cfg(feature = "gzip")]
    sources.push((
        "gzip",
        Box::new(flate2::read::GzEncoder::new(
            zeros(LEN),
            flate2::Compression::fast(),
        )),
    ));
    #[cfg(feature = "brotli")]
    sources.push(("br", Box::new(brotli_reader(zeros(LEN), 20))));
    #[cfg(feature = "zstd")]
    sources.push(("zstd", Box::new(zstd_reader(zeros(LEN), 20))));
    for (header, source) in sources {
        let run = measure(header, DecoderConfig::new(), source);
        eprintln!(
            "{header} whole: peak {} KiB, {} bytes in",
            run.peak / KIB,
            run.total_in
        );
        assert_eq!(run.result, Ok(()), "{header}");
        assert_eq!(run.total_out, LEN, "{header}");
        assert!(run.peak <= BOUND, "{header}: {run:?}");
        assert!(run.leaked < KIB, "{header}: {run:?}");
    }
}

/// What a decoder holds between its construction and its first byte: a
/// response's head is parsed (and its decoder made) long before its body
/// is read, if it ever is — a caller that looks at the status and drops
/// the response, or many responses in flight whose bodies wait their
/// turn. Until a byte of the body comes, the decoder holds its list of
/// codings and a few words per stage, not a codec's state (a gzip
/// inflater is 43 KB) nor a link between stacked codings (16 KiB); an
/// empty body, finished without a byte, never makes them.
#[test]
fn a_decoder_holds_no_codec_until_its_first_byte() {
    /// A decoder's bookkeeping: far below any codec's state.
    const BOOKKEEPING: usize = 2 * KIB;
    let mut headers: Vec<&str> = Coding::ALL
        .iter()
        .filter(|coding| coding.is_enabled())
        .map(|coding| coding.token())
        .collect();
    let stacked = headers.join(", ");
    if headers.len() > 1 {
        headers.push(&stacked);
    }
    let mut out = vec![0u8; 64 * KIB];
    for header in headers {
        LIVE.with(|l| l.set(0));
        let mut decoder = tracked(|| ContentDecoder::new(header))
            .expect("supported")
            .expect("encoded");
        let made = LIVE.with(Cell::get);
        eprintln!("{header}: {made} bytes before the first byte");
        assert!(
            made < BOOKKEEPING,
            "{header}: {made} bytes held before the first byte"
        );
        assert_eq!(tracked(|| decoder.finish(&mut out)), Ok((0, true)));
        let finished = LIVE.with(Cell::get);
        assert!(
            finished < BOOKKEEPING,
            "{header}: {finished} bytes held by an empty body finished"
        );
        tracked(|| drop(decoder));
    }
    // The codec comes with the first byte: what the bound above would see.
    #[cfg(feature = "gzip")]
    {
        LIVE.with(|l| l.set(0));
        let mut decoder = tracked(|| ContentDecoder::new("gzip"))
            .expect("supported")
            .expect("encoded");
        let mut gzip = gzip_reader(zeros(1));
        let mut first = [0u8; 1];
        gzip.read_exact(&mut first).expect("encoder");
        assert_eq!(tracked(|| decoder.decode(&first, &mut out)), Ok((1, 0)));
        let reading = LIVE.with(Cell::get);
        assert!(
            reading > 32 * KIB,
            "gzip: {reading} bytes held once reading, no inflater"
        );
        tracked(|| drop(decoder));
    }
}
