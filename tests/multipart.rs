//! `multipart/form-data` bodies (`RequestBuilder::multipart`): read by a
//! real form parser (httpbin's, werkzeug's) as fields and files, framed
//! on the wire with `Content-Length` or chunked, and sent again on a
//! `307` when every part is in memory or a regular file.

mod support;

use std::time::Duration;
use support::real::{Httpbin, TempDir};
use support::*;
use tickless::multipart::{Form, Part};
use tickless::Client;

fn client() -> Client {
    Client::builder()
        .event_loops(1)
        .request_timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// httpbin parses the form as a browser's: its text fields in `form`,
/// its file parts (those with a file name) in `files` — a file from
/// disk, bytes named as a file, a reader of known length — with the
/// names and values as given, quotes and non-ASCII included.
#[test]
fn httpbin_reads_the_fields_and_files_of_a_form() {
    let httpbin = Httpbin::start();
    let dir = TempDir::new("multipart");
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "first line\r\nsecond line\n").unwrap();
    let form = Form::new()
        .text("title", "holiday — été")
        .text("say \"hi\"", "a \"quoted\" value")
        .file("notes", &notes)
        .unwrap()
        .part(
            "data",
            Part::bytes(&b"{\"k\": 1}"[..])
                .file_name("data.json")
                .mime_str("application/json")
                .unwrap(),
        )
        .part(
            "streamed",
            Part::reader(std::io::Cursor::new(vec![b'z'; 100_000]), Some(100_000))
                .file_name("z.bin"),
        );
    let boundary = form.boundary().to_string();
    let client = client();
    let response = client
        .post(httpbin.url("/post"))
        .multipart(form)
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 200);
    let echoed: serde_json::Value =
        serde_json::from_slice(&response.bytes().wait().unwrap()).unwrap();
    let form = &echoed["form"];
    assert_eq!(form["title"], "holiday — été", "{form}");
    // A quote in a name goes as browsers send it, %22, which a form
    // parser reads back as the quote.
    assert_eq!(form["say \"hi\""], "a \"quoted\" value", "{form}");
    let files = &echoed["files"];
    assert_eq!(files["notes"], "first line\r\nsecond line\n");
    assert_eq!(files["data"], "{\"k\": 1}");
    assert!(
        files["streamed"] == "z".repeat(100_000),
        "the streamed part"
    );
    assert_eq!(
        echoed["headers"]["Content-Type"],
        format!("multipart/form-data; boundary={boundary}")
    );
}

/// A form the server reads whole: what came on the wire, and how it was
/// framed.
fn served() -> TestServer {
    TestServer::respond(|request| match request.target.as_str() {
        "/moved" => response(307, &[("Location", "/echo")], b""),
        _ => ok(&format!(
            "{} length={} chunked={} type={}\n{}",
            request.target,
            request.header("content-length").unwrap_or("-"),
            request.header("transfer-encoding").is_some(),
            request.header("content-type").unwrap_or("-"),
            String::from_utf8_lossy(&request.body),
        )),
    })
}

/// A reader of unknown length makes the whole form go chunked; with
/// lengths all known it goes with `Content-Length`; the body is the same
/// either way, every part between boundary lines and the closing one
/// last; a `Content-Type` the request had is replaced (it could not name
/// the boundary).
#[test]
fn a_form_goes_with_its_length_or_chunked_the_same_bytes_either_way() {
    let server = served();
    let client = client();
    let send = |part: Part| {
        let form = Form::new().text("a", "1").part("b", part);
        let boundary = form.boundary().to_string();
        let text = client
            .post(server.url("/echo"))
            .header("content-type", "text/plain")
            .multipart(form)
            .send()
            .wait()
            .unwrap()
            .text()
            .wait()
            .unwrap();
        text.replace(&boundary, "BOUNDARY")
    };
    let body = "--BOUNDARY\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n\
                --BOUNDARY\r\nContent-Disposition: form-data; name=\"b\"\r\n\r\n22\r\n\
                --BOUNDARY--\r\n";
    let head = |framing: &str| {
        format!("/echo {framing} type=multipart/form-data; boundary=BOUNDARY\n{body}")
    };
    // Three boundaries of 64 digits where BOUNDARY stands.
    let length = body.len() + 3 * (64 - "BOUNDARY".len());
    let length = format!("length={length} chunked=false");
    assert_eq!(send(Part::text("22")), head(&length));
    assert_eq!(send(Part::reader(&b"22"[..], Some(2))), head(&length));
    assert_eq!(
        send(Part::reader(&b"22"[..], None)),
        head("length=- chunked=true")
    );
}

/// A `307` sends the form again to where it leads, whole, when its parts
/// are all in memory — and when some are regular files, each read again
/// from its start, as `curl -F name=@file -L` sends it again (and
/// `Upload::from_file`); with a reader's part, the form is a streamed
/// body, sent once, and the `307` is the response.
#[test]
fn a_form_in_memory_or_of_files_goes_again_on_a_307_one_with_a_reader_is_sent_once() {
    let server = served();
    let client = client();
    let moved = |form: Form| {
        let response = client
            .post(server.url("/moved"))
            .multipart(form)
            .send()
            .wait()
            .unwrap();
        let status = response.status();
        (status, response.text().wait().unwrap())
    };
    let (status, text) = moved(Form::new().text("a", "1"));
    assert_eq!(status, 200);
    assert!(text.starts_with("/echo length=185 chunked=false"), "{text}");
    assert!(text.contains("name=\"a\"\r\n\r\n1\r\n"), "{text}");

    let dir = TempDir::new("multipart-307");
    let file = dir.path().join("f.bin");
    std::fs::write(&file, b"file bytes").unwrap();
    let (status, text) = moved(Form::new().text("a", "1").file("f", &file).unwrap());
    assert_eq!(status, 200);
    assert!(text.starts_with("/echo length=367 chunked=false"), "{text}");
    assert!(
        text.contains(
            "name=\"f\"; filename=\"f.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n\
             file bytes\r\n"
        ),
        "{text}"
    );

    let reader = Part::reader(&b"read once"[..], Some(9));
    let (status, _) = moved(Form::new().part("r", reader));
    assert_eq!(status, 307);
}
