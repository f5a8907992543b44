//! [`Form`]: a `multipart/form-data` body (RFC 7578) — fields and files,
//! as an HTML form with a file input sends them, and `curl -F`.
//!
//! A form is encoded as it is sent: each part's head (its boundary line,
//! `Content-Disposition`, `Content-Type`, the fields given with
//! [`Part::header`]) is written when the part is added, and its data is
//! read only when the request goes — a file part streams from its file,
//! never copied whole into memory.

use super::upload::{FileBody, Piece, Upload, UploadKind};
use bytes::Bytes;
use http::HeaderValue;
use std::io::{Cursor, Read};
use std::path::Path;

/// A `multipart/form-data` body, for
/// [`RequestBuilder::multipart`](crate::RequestBuilder::multipart), which
/// sets the request's `Content-Type` to `multipart/form-data;
/// boundary=…` with this form's [`boundary`](Self::boundary).
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use tickless_client::multipart::{Form, Part};
/// let client = tickless_client::Client::builder().build()?;
/// let form = Form::new()
///     .text("title", "holiday")
///     .file("photo", "beach.jpg")?
///     .part("notes", Part::text("{}").mime_str("application/json")?);
/// let response = client.post("http://127.0.0.1:8080/upload").multipart(form).send().wait()?;
/// # Ok(()) }
/// ```
///
/// Its length is known, and sent as `Content-Length`, unless a part is a
/// reader of unknown length ([`Part::reader`]): then it goes chunked
/// (over HTTP/1.1). A form whose parts are in memory or regular files
/// ([`Part::file`]) goes again as a body in memory does (a `307` or `308`,
/// a retry), each file read again from its start, as
/// [`Upload::from_file`]'s; one with a reader (or a file that is not a
/// regular one: a pipe) is a streamed body, sent once (see [`Upload`]).
pub struct Form {
    boundary: String,
    /// Each part, after the head written for it.
    parts: Vec<(Vec<u8>, Part)>,
}

/// One part of a [`Form`]: its data, and the file name, media type and
/// other fields its head gives.
pub struct Part {
    data: Data,
    file_name: Option<String>,
    mime: Option<HeaderValue>,
    /// [`Part::header`]'s fields, in order, each name as given.
    headers: Vec<(String, HeaderValue)>,
}

/// A part's data.
enum Data {
    Bytes(Bytes),
    /// A regular file's, read again by each exchange that sends it.
    File(FileBody),
    Reader {
        reader: Box<dyn Read + Send + 'static>,
        length: Option<u64>,
    },
}

impl Default for Form {
    fn default() -> Self {
        Form::new()
    }
}

impl Form {
    /// An empty form, with a boundary of its own: 64 random hexadecimal
    /// digits, which no part's data will hold by chance.
    pub fn new() -> Form {
        Form {
            boundary: random_boundary(),
            parts: Vec::new(),
        }
    }

    /// The boundary between the form's parts, as the `Content-Type`
    /// names it.
    pub fn boundary(&self) -> &str {
        &self.boundary
    }

    /// Adds a text field.
    pub fn text(self, name: impl Into<String>, value: impl Into<String>) -> Form {
        self.part(name, Part::text(value))
    }

    /// Adds the file at `path` as a file field: [`Part::file`].
    ///
    /// # Errors
    ///
    /// What opening the file, or reading its metadata, fails with.
    pub fn file(self, name: impl Into<String>, path: impl AsRef<Path>) -> std::io::Result<Form> {
        Ok(self.part(name, Part::file(path)?))
    }

    /// Adds `part` under `name`: its head is its boundary line, the
    /// form's `Content-Disposition` (unless the part has one of its own:
    /// [`Part::header`]), its `Content-Type` if it has a media type, then
    /// its other fields in order.
    pub fn part(mut self, name: impl Into<String>, part: Part) -> Form {
        let mut head = format!("--{}\r\n", self.boundary);
        let its_own_disposition = part
            .headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("content-disposition"));
        if !its_own_disposition {
            head.push_str(&format!(
                "Content-Disposition: form-data; name=\"{}\"",
                quoted(&name.into())
            ));
            if let Some(file_name) = &part.file_name {
                head.push_str(&format!("; filename=\"{}\"", quoted(file_name)));
            }
            head.push_str("\r\n");
        }
        let mut head = head.into_bytes();
        if let Some(mime) = &part.mime {
            head.extend_from_slice(b"Content-Type: ");
            head.extend_from_slice(mime.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
        for (name, value) in &part.headers {
            head.extend_from_slice(name.as_bytes());
            head.push(b':');
            // `Name:` for an empty value, as curl writes one.
            if !value.is_empty() {
                head.push(b' ');
                head.extend_from_slice(value.as_bytes());
            }
            head.extend_from_slice(b"\r\n");
        }
        head.extend_from_slice(b"\r\n");
        self.parts.push((head, part));
        self
    }

    /// The `Content-Type` of a request with this body.
    pub(crate) fn content_type(&self) -> HeaderValue {
        HeaderValue::try_from(format!("multipart/form-data; boundary={}", self.boundary))
            .expect("a boundary is hexadecimal digits")
    }

    /// The form as a request body: in memory if every part is; read again
    /// from its start by each exchange that sends it if every part is in
    /// memory or a regular file's; else read part after part, once, as it
    /// is sent.
    pub(crate) fn into_upload(self) -> Upload {
        let end = Bytes::from(format!("--{}--\r\n", self.boundary));
        // Each part's data ends with a line end, before the next boundary.
        const LINE_END: &[u8] = b"\r\n";
        let all = |kind: fn(&Data) -> bool| self.parts.iter().all(|(_, part)| kind(&part.data));
        if all(|data| matches!(data, Data::Bytes(_))) {
            let mut body = Vec::new();
            for (head, part) in self.parts {
                let Data::Bytes(data) = part.data else {
                    unreachable!("every part is in memory")
                };
                body.extend_from_slice(&head);
                body.extend_from_slice(&data);
                body.extend_from_slice(LINE_END);
            }
            body.extend_from_slice(&end);
            return Upload::from(body);
        }
        if all(|data| matches!(data, Data::Bytes(_) | Data::File(_))) {
            let mut pieces = Vec::new();
            for (head, part) in self.parts {
                pieces.push(Piece::Bytes(head.into()));
                match part.data {
                    Data::Bytes(data) => pieces.push(Piece::Bytes(data)),
                    Data::File(file) => pieces.extend_from_slice(file.pieces()),
                    Data::Reader { .. } => unreachable!("every part is bytes or a file's"),
                }
                pieces.push(Piece::Bytes(Bytes::from_static(LINE_END)));
            }
            pieces.push(Piece::Bytes(end));
            return Upload {
                kind: UploadKind::File(FileBody::of_pieces(pieces)),
            };
        }
        let mut length = Some(end.len() as u64);
        let mut body: Box<dyn Read + Send> = Box::new(std::io::empty());
        for (head, part) in self.parts {
            let fixed = (head.len() + LINE_END.len()) as u64;
            let (data, data_length): (Box<dyn Read + Send>, _) = match part.data {
                Data::Bytes(bytes) => {
                    let len = bytes.len() as u64;
                    (Box::new(Cursor::new(bytes)), Some(len))
                }
                Data::File(file) => (Box::new(file.reader()), Some(file.length())),
                Data::Reader { reader, length } => (reader, length),
            };
            length = length
                .zip(data_length)
                .map(|(sum, data)| sum + fixed + data);
            body = Box::new(body.chain(Cursor::new(head)).chain(data).chain(LINE_END));
        }
        Upload::from_reader(body.chain(Cursor::new(end)), length)
    }
}

impl Part {
    /// A text field's value.
    pub fn text(value: impl Into<String>) -> Part {
        Part::bytes(value.into())
    }

    /// Bytes in memory.
    pub fn bytes(data: impl Into<Bytes>) -> Part {
        Part {
            data: Data::Bytes(data.into()),
            file_name: None,
            mime: None,
            headers: Vec::new(),
        }
    }

    /// Data read from `reader` as the request is sent, `length` bytes if
    /// known — as [`Upload::from_reader`]: a reader that gives more or
    /// fewer fails the request with
    /// [`Error::RequestBody`](crate::Error::RequestBody); with `None`, the
    /// whole form goes chunked.
    pub fn reader(reader: impl Read + Send + 'static, length: Option<u64>) -> Part {
        Part {
            data: Data::Reader {
                reader: Box::new(reader),
                length,
            },
            file_name: None,
            mime: None,
            headers: Vec::new(),
        }
    }

    /// The file at `path`, as a browser sends a file input's: named by
    /// the last component of the path, its media type guessed from its
    /// extension (`application/octet-stream` for one not known), its body
    /// as [`Upload::from_file`] makes one: its length as it is now (the
    /// bytes written to it later are not sent), read again from its start
    /// when the form goes again. A file that is not a regular one (a
    /// pipe) is read to its end, once, and the form goes chunked.
    ///
    /// # Errors
    ///
    /// What opening the file fails with, or [`Upload::from_file`].
    pub fn file(path: impl AsRef<Path>) -> std::io::Result<Part> {
        let path = path.as_ref();
        let data = match Upload::from_file(std::fs::File::open(path)?)?.kind {
            UploadKind::File(file) => Data::File(file),
            UploadKind::Reader { reader, length } => Data::Reader {
                reader: reader.into_inner(),
                length,
            },
            _ => unreachable!("a file's body is a regular file's or a reader"),
        };
        let part = Part {
            data,
            file_name: None,
            mime: None,
            headers: Vec::new(),
        };
        let mime = mime_guess::from_path(path).first_or_octet_stream();
        let part = part.mime(HeaderValue::try_from(mime.as_ref()).expect("a media type"));
        Ok(match path.file_name() {
            Some(name) => part.file_name(name.to_string_lossy()),
            None => part,
        })
    }

    /// The file name its head gives (`filename="…"`): a server takes the
    /// part for a file.
    pub fn file_name(mut self, name: impl Into<String>) -> Part {
        self.file_name = Some(name.into());
        self
    }

    /// Its media type (`Content-Type`). None by default for text and
    /// bytes, which a server takes as `text/plain` (RFC 7578 §4.4).
    pub fn mime(mut self, mime: HeaderValue) -> Part {
        self.mime = Some(mime);
        self
    }

    /// [`mime`](Self::mime) from a string.
    ///
    /// # Errors
    ///
    /// A string that cannot be a header's value (a line end in it).
    pub fn mime_str(self, mime: &str) -> Result<Part, http::header::InvalidHeaderValue> {
        Ok(self.mime(HeaderValue::try_from(mime)?))
    }

    /// Adds the field `name: value` to its head (`name:` alone for an
    /// empty value), after the form's own fields, in the order given —
    /// as curl's `-F 'f=v;headers=X-Trace: 1'` adds one. The name is
    /// written as given, not in lower case: a head's names are read in
    /// any case (RFC 7578, 4.8 and RFC 2045), but curl sends them as
    /// written, and a reader may compare them as written. A `Content-Type`
    /// is its media type, as [`mime`](Self::mime) sets it (the last one
    /// given wins); a `Content-Disposition` is written in place of the
    /// form's own (`form-data; name="…"`, with the file name), where it
    /// comes among the fields.
    ///
    /// # Errors
    ///
    /// A name that is not a header's (empty, or a blank or a colon in it),
    /// or a value no header can hold (a line end in it).
    pub fn header(mut self, name: &str, value: &str) -> Result<Part, http::Error> {
        let header_name = http::HeaderName::from_bytes(name.as_bytes())?;
        let value = HeaderValue::from_bytes(value.as_bytes())?;
        if header_name == http::header::CONTENT_TYPE {
            return Ok(self.mime(value));
        }
        self.headers.push((name.to_owned(), value));
        Ok(self)
    }
}

/// `text` as it may go between the double quotes of a field's name or
/// file name: `"`, CR and LF percent-encoded, as browsers encode them
/// (the HTML standard's multipart/form-data encoding), the rest as it is.
fn quoted(text: &str) -> String {
    text.replace('"', "%22")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// 64 random hexadecimal digits: four draws of the standard library's
/// randomly keyed SipHash, as the process's hash maps are keyed.
fn random_boundary() -> String {
    use std::hash::{BuildHasher, Hasher};
    let draw = |n: u64| {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(n);
        hasher.finish()
    };
    format!(
        "{:016x}{:016x}{:016x}{:016x}",
        draw(0),
        draw(1),
        draw(2),
        draw(3)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A form's body as its upload gives it.
    fn sent(form: Form) -> (Option<u64>, Vec<u8>) {
        let upload = form.into_upload();
        let length = upload.length();
        let mut body = Vec::new();
        match upload.kind {
            crate::policy::upload::UploadKind::Bytes(bytes) => body.extend_from_slice(&bytes),
            crate::policy::upload::UploadKind::File(file) => {
                file.reader().read_to_end(&mut body).unwrap();
            }
            crate::policy::upload::UploadKind::Reader { reader, .. } => {
                reader.into_inner().read_to_end(&mut body).unwrap();
            }
            _ => panic!("a form is bytes or a reader"),
        }
        (length, body)
    }

    #[test]
    fn parts_are_framed_by_the_boundary_and_end_with_its_closing_line() {
        let form = Form::new().text("title", "a \"quoted\"\r\nvalue").part(
            "na\"me\r\n",
            Part::bytes(&b"\x00\xff"[..])
                .file_name("x\".bin")
                .mime_str("application/octet-stream")
                .unwrap(),
        );
        let boundary = form.boundary().to_string();
        assert_eq!(boundary.len(), 64);
        assert!(boundary.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(
            form.content_type(),
            format!("multipart/form-data; boundary={boundary}")
        );
        let (length, body) = sent(form);
        let expected = [
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\n")
                .as_bytes(),
            b"a \"quoted\"\r\nvalue\r\n",
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"na%22me%0D%0A\"; \
                 filename=\"x%22.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
            b"\x00\xff\r\n",
            format!("--{boundary}--\r\n").as_bytes(),
        ]
        .concat();
        assert_eq!(body, expected);
        assert_eq!(length, Some(expected.len() as u64));
    }

    #[test]
    fn a_reader_part_streams_with_the_length_its_parts_add_up_to_or_none() {
        // One boundary for the three, to compare their bytes.
        let form = || {
            let form = Form {
                boundary: "b".repeat(64),
                parts: Vec::new(),
            };
            form.text("a", "1")
        };
        let in_memory = sent(form().text("b", "22"));
        let known = sent(form().part("b", Part::reader(&b"22"[..], Some(2))));
        assert_eq!(known, in_memory, "the same bytes, the same length");
        let (length, body) = sent(form().part("b", Part::reader(&b"22"[..], None)));
        assert_eq!((length, body), (None, in_memory.1));
    }

    /// A form of bytes and regular files is a body read again from its
    /// start by each exchange that sends it (a `307`, a retry), each file
    /// from where it began, as `Upload::from_file`'s: two readers of it,
    /// their reads interleaved, each read it whole — the bytes the form
    /// would be with the file's contents in memory, and its length.
    #[test]
    fn a_form_of_bytes_and_files_is_read_again_from_its_start() {
        let dir = std::env::temp_dir().join(format!(
            "tickless-multipart-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f.bin");
        std::fs::write(&path, b"file bytes").unwrap();
        let form = |file: Part| {
            let form = Form {
                boundary: "b".repeat(64),
                parts: Vec::new(),
            };
            form.text("a", "1").part("f", file).text("c", "3")
        };
        let file = Part::file(&path).unwrap();
        let in_memory = Part::bytes(&b"file bytes"[..])
            .file_name("f.bin")
            .mime_str("application/octet-stream")
            .unwrap();
        let (length, expected) = sent(form(in_memory));
        let upload = form(file).into_upload();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(upload.length(), length);
        let crate::policy::upload::UploadKind::File(body) = upload.kind else {
            panic!("a body read again: {upload:?}");
        };
        let mut readers = [body.reader(), body.reader()];
        let mut read = [Vec::new(), Vec::new()];
        let mut buf = [0; 7];
        loop {
            let mut any = false;
            for (reader, read) in readers.iter_mut().zip(&mut read) {
                let n = reader.read(&mut buf).unwrap();
                read.extend_from_slice(&buf[..n]);
                any |= n > 0;
            }
            if !any {
                break;
            }
        }
        assert_eq!(read, [expected.clone(), expected]);
    }

    /// [`Part::header`]'s fields follow the form's own in the order
    /// given, each name as written and an empty value as `Name:`; a
    /// `Content-Type` is the part's type (the last one wins), and a
    /// `Content-Disposition` replaces the form's own where it comes.
    #[test]
    fn a_parts_own_fields_follow_the_forms_and_replace_its_type_or_disposition() {
        let form = Form {
            boundary: "b".repeat(64),
            parts: Vec::new(),
        };
        let b = "b".repeat(64);
        let fields = Part::text("v")
            .file_name("f.txt")
            .header("X-Trace-Id", "1")
            .and_then(|part| part.header("content-type", "text/x-first"))
            .and_then(|part| part.header("x-empty", ""))
            .and_then(|part| part.header("Content-Type", "text/x-last"))
            .unwrap();
        let disposition = Part::text("w")
            .mime_str("text/plain")
            .unwrap()
            .header("X-Before", "2")
            .and_then(|part| part.header("Content-Disposition", "attachment"))
            .unwrap();
        let (_, body) = sent(form.part("a", fields).part("b", disposition));
        let expected = format!(
            "--{b}\r\nContent-Disposition: form-data; name=\"a\"; filename=\"f.txt\"\r\n\
             Content-Type: text/x-last\r\nX-Trace-Id: 1\r\nx-empty:\r\n\r\nv\r\n\
             --{b}\r\nContent-Type: text/plain\r\nX-Before: 2\r\n\
             Content-Disposition: attachment\r\n\r\nw\r\n--{b}--\r\n"
        );
        assert_eq!(String::from_utf8(body).unwrap(), expected);
        for (name, value) in [("", "v"), ("X Y", "v"), ("X:", "v"), ("X", "a\r\nb")] {
            assert!(
                Part::text("v").header(name, value).is_err(),
                "{name:?}: {value:?}"
            );
        }
    }

    #[test]
    fn boundaries_differ_from_form_to_form() {
        assert_ne!(Form::new().boundary(), Form::new().boundary());
    }
}
