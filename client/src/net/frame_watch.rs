//! [`FrameWatch`]: what `h2` keeps to itself of the server's HTTP/2
//! frames, read off them as they pass to it — the server's
//! `SETTINGS_MAX_HEADER_LIST_SIZE` (0.4 neither honours it when it sends
//! a request nor shows it), and how many empty DATA frames that do not
//! end their stream have come (0.4.20 ends the connection past 100 of
//! them over its life, and shows no count).
//!
//! The server's bytes are frames from the first (RFC 9113 §3.4: its
//! preface is a `SETTINGS` frame): a frame's 9-byte header says its
//! length, type and flags, and only a `SETTINGS` frame's payload — not an
//! acknowledgement's — is read, a parameter (6 bytes) at a time, and the
//! first byte of a padded DATA frame's, its padding's length; any other
//! is skipped by its length. A frame may come split across reads
//! anywhere, its header too.

/// A frame header's length (RFC 9113 §4.1).
const HEADER_LEN: usize = 9;

/// The `DATA` frame type (RFC 9113 §6.1).
const DATA: u8 = 0x0;

/// The `END_STREAM` flag of a `DATA` frame.
const END_STREAM: u8 = 0x1;

/// The `PADDED` flag of a `DATA` frame: its payload's first byte is the
/// length of the padding that ends it.
const PADDED: u8 = 0x8;

/// The `SETTINGS` frame type (RFC 9113 §6.5).
const SETTINGS: u8 = 0x4;

/// The `ACK` flag of a `SETTINGS` frame.
const ACK: u8 = 0x1;

/// A `SETTINGS` parameter's length: a 16-bit identifier, a 32-bit value.
const PARAMETER_LEN: usize = 6;

/// `SETTINGS_MAX_HEADER_LIST_SIZE` (RFC 9113 §6.5.2).
const MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// Where the server's frames are, for [`FrameWatch::read`].
#[derive(Debug, Default)]
pub(crate) struct FrameWatch {
    /// The header of the frame being read, `header_read` bytes of it.
    header: [u8; HEADER_LEN],
    header_read: usize,
    /// The frame's payload bytes still to come, once its header is read.
    payload_left: usize,
    /// What the frame's payload is read for.
    payload: Payload,
    /// The parameter being read, `parameter_read` bytes of it.
    parameter: [u8; PARAMETER_LEN],
    parameter_read: usize,
    /// Empty DATA frames that did not end their stream, so far (see
    /// [`FrameWatch::empty_data_frames`]).
    empty_data: usize,
}

/// What a frame's payload is read for.
#[derive(Debug, Default, Clone, Copy)]
enum Payload {
    /// Nothing: it is skipped by its length.
    #[default]
    Skipped,
    /// A `SETTINGS` frame's parameters.
    Settings,
    /// A padded DATA frame that does not end its stream, `len` bytes of
    /// payload in all: empty if its padding fills all but the byte that
    /// says the padding's length, its first.
    PaddedData { len: usize },
}

impl FrameWatch {
    /// Reads `bytes`, the next of the server's: the last
    /// `SETTINGS_MAX_HEADER_LIST_SIZE` they set, if they set one.
    pub(crate) fn read(&mut self, mut bytes: &[u8]) -> Option<u32> {
        let mut set = None;
        while !bytes.is_empty() {
            if self.header_read < HEADER_LEN {
                let n = (HEADER_LEN - self.header_read).min(bytes.len());
                self.header[self.header_read..][..n].copy_from_slice(&bytes[..n]);
                self.header_read += n;
                bytes = &bytes[n..];
                if self.header_read == HEADER_LEN {
                    self.begin_payload();
                }
                continue;
            }
            // At least a byte: a frame with no payload ended at its header.
            let n = self.payload_left.min(bytes.len());
            match self.payload {
                Payload::Settings => {
                    for &byte in &bytes[..n] {
                        set = self.parameter_byte(byte).or(set);
                    }
                }
                Payload::PaddedData { len } => {
                    // Its first byte: the padding's length.
                    if usize::from(bytes[0]) + 1 == len {
                        self.empty_data += 1;
                    }
                    self.payload = Payload::Skipped;
                }
                Payload::Skipped => {}
            }
            self.payload_left -= n;
            bytes = &bytes[n..];
            if self.payload_left == 0 {
                self.end_frame();
            }
        }
        set
    }

    /// The DATA frames read so far that carry nothing once their padding
    /// is taken off and do not end their stream — what `h2` counts, on
    /// the streams it still has, towards its limit of 100 over a
    /// connection's life (`MAX_RECV_EMPTY_DATA_FRAMES`, h2 #935).
    pub(crate) fn empty_data_frames(&self) -> usize {
        self.empty_data
    }

    /// The frame's header is whole: its payload comes next (none: the
    /// next frame does).
    fn begin_payload(&mut self) {
        let [l0, l1, l2, kind, flags, s0, s1, s2, s3] = self.header;
        self.payload_left = u32::from_be_bytes([0, l0, l1, l2]) as usize;
        let stream = u32::from_be_bytes([s0, s1, s2, s3]) & 0x7fff_ffff;
        let open_data = kind == DATA && flags & END_STREAM == 0 && stream != 0;
        self.payload = if kind == SETTINGS && flags & ACK == 0 && stream == 0 {
            Payload::Settings
        } else if open_data && flags & PADDED != 0 && self.payload_left > 0 {
            Payload::PaddedData {
                len: self.payload_left,
            }
        } else {
            Payload::Skipped
        };
        if open_data && self.payload_left == 0 {
            self.empty_data += 1;
        }
        if self.payload_left == 0 {
            self.end_frame();
        }
    }

    fn end_frame(&mut self) {
        self.header_read = 0;
        self.payload = Payload::Skipped;
        self.parameter_read = 0;
    }

    /// One more byte of a `SETTINGS` payload: the value of the parameter
    /// it completes, if that is `SETTINGS_MAX_HEADER_LIST_SIZE`.
    fn parameter_byte(&mut self, byte: u8) -> Option<u32> {
        self.parameter[self.parameter_read] = byte;
        self.parameter_read += 1;
        if self.parameter_read < PARAMETER_LEN {
            return None;
        }
        self.parameter_read = 0;
        let [i0, i1, v0, v1, v2, v3] = self.parameter;
        (u16::from_be_bytes([i0, i1]) == MAX_HEADER_LIST_SIZE)
            .then(|| u32::from_be_bytes([v0, v1, v2, v3]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut frame = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        frame.extend_from_slice(&[kind, flags]);
        frame.extend_from_slice(&stream.to_be_bytes());
        frame.extend_from_slice(payload);
        frame
    }

    fn parameter(id: u16, value: u32) -> Vec<u8> {
        [&id.to_be_bytes()[..], &value.to_be_bytes()].concat()
    }

    /// The server's frames: SETTINGS without the parameter, a PING, a
    /// HEADERS and a DATA frame whose payloads look like a SETTINGS
    /// parameter, an acknowledgement, then SETTINGS with it among others
    /// — and later a SETTINGS that changes it.
    fn frames() -> (Vec<u8>, usize) {
        let lookalike = parameter(MAX_HEADER_LIST_SIZE, 1);
        let mut bytes = frame(SETTINGS, 0, 0, &parameter(0x3, 100));
        bytes.extend(frame(0x6, 0, 0, &[&lookalike[..], &[0, 0]].concat()));
        bytes.extend(frame(0x1, 0x4, 1, &lookalike));
        bytes.extend(frame(0x0, 0x0, 1, &[lookalike.clone(), lookalike].concat()));
        bytes.extend(frame(SETTINGS, ACK, 0, &[]));
        let first = [
            parameter(0x4, 65_535),
            parameter(MAX_HEADER_LIST_SIZE, 4096),
            parameter(0x5, 16_384),
        ]
        .concat();
        bytes.extend(frame(SETTINGS, 0, 0, &first));
        let end_of_first = bytes.len();
        bytes.extend(frame(0x0, 0x1, 1, b"body"));
        bytes.extend(frame(
            SETTINGS,
            0,
            0,
            &parameter(MAX_HEADER_LIST_SIZE, 1024),
        ));
        (bytes, end_of_first)
    }

    #[test]
    fn the_servers_max_header_list_size_is_read_whatever_the_reads_split() {
        let (bytes, end_of_first) = frames();
        let mut whole = FrameWatch::default();
        assert_eq!(whole.read(&bytes[..end_of_first]), Some(4096));
        assert_eq!(whole.read(&bytes[end_of_first..]), Some(1024));
        for size in [1, 2, 5, 6, 7, 9, 10, 13] {
            let mut watch = FrameWatch::default();
            let mut seen = Vec::new();
            for read in bytes.chunks(size) {
                seen.extend(watch.read(read));
            }
            assert_eq!(seen, [4096, 1024], "reads of {size} bytes");
        }
        let mut watch = FrameWatch::default();
        assert_eq!(watch.read(&frame(SETTINGS, 0, 0, &parameter(0x3, 1))), None);
    }

    /// Empty DATA frames that leave their stream open are counted, padded
    /// or not, whatever the reads split: not one that ends its stream,
    /// carries a byte past its padding, or is no DATA frame.
    #[test]
    fn empty_data_frames_that_leave_their_stream_open_are_counted_whatever_the_reads_split() {
        let mut bytes = frame(SETTINGS, 0, 0, &parameter(0x3, 100));
        bytes.extend(frame(DATA, 0, 1, b""));
        bytes.extend(frame(DATA, PADDED, 1, &[3, 0, 0, 0]));
        bytes.extend(frame(DATA, PADDED, 1, &[0]));
        // Not empty, or ending their stream.
        bytes.extend(frame(DATA, END_STREAM, 1, b""));
        bytes.extend(frame(DATA, END_STREAM | PADDED, 3, &[2, 0, 0]));
        bytes.extend(frame(DATA, PADDED, 5, &[2, b'x', 0, 0]));
        bytes.extend(frame(DATA, 0, 5, b"x"));
        // A padded frame whose first byte, its padding's length, looks
        // like a frame's.
        bytes.extend(frame(DATA, PADDED, 5, &[0, 0, 0, 0, 0, 0]));
        // Not DATA: a PING, a WINDOW_UPDATE on a stream.
        bytes.extend(frame(0x6, 0, 0, &[0; 8]));
        bytes.extend(frame(0x8, 0, 5, &1u32.to_be_bytes()));
        bytes.extend(frame(DATA, 0, 5, b""));
        for size in [1, 2, 5, 9, 10, 13, bytes.len()] {
            let mut watch = FrameWatch::default();
            for read in bytes.chunks(size) {
                watch.read(read);
            }
            assert_eq!(watch.empty_data_frames(), 4, "reads of {size} bytes");
        }
    }
}
