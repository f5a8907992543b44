//! `examples/get` beside curl itself (7.88, as `scripts/test` installs
//! it): the same arguments to each, against the same loopback server, and
//! what each sent compared byte for byte — `-F`'s parts read from
//! standard input (`@-`, `<-`), the fields `;headers=` adds to a part's
//! head, and each part's type — or what each wrote: `-w`'s `%{json}` and
//! `%{header_json}`.
//!
//! Where `get` parts from curl on purpose, the test says so and asserts
//! `get`'s own answer (with the bytes curl 7.88 gives beside it, checked
//! here).

mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use support::*;

/// Runs `program` with `args` and `stdin` on its standard input.
fn run(program: &Path, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn get() -> std::path::PathBuf {
    example_binary("get")
}

fn curl() -> std::path::PathBuf {
    support::real::binary("curl")
}

/// The `multipart/form-data` body `program` sent for `args` (after the
/// URL, and `-s`), `stdin` on its standard input: its boundary, which
/// each program draws anew, written `BOUNDARY`.
fn form_sent(program: &Path, args: &[&str], stdin: &[u8]) -> String {
    let server = TestServer::respond(|_| ok("seen"));
    let url = server.url("/");
    let output = run(program, &[&[url.as_str(), "-s"][..], args].concat(), stdin);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{program:?} {args:?}: {output:?}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{program:?} {args:?}: {output:?}");
    let content_type = requests[0].header("content-type").unwrap_or_default();
    let boundary = content_type
        .strip_prefix("multipart/form-data; boundary=")
        .unwrap_or_else(|| panic!("{program:?} {args:?}: {content_type:?}"));
    String::from_utf8_lossy(&requests[0].body).replace(boundary, "BOUNDARY")
}

/// What `get` and curl send for `args`, `stdin` on standard input: the
/// same bytes.
fn assert_form_sent_as_curls(args: &[&str], stdin: &[u8]) {
    let (got, curls) = (
        form_sent(&get(), args, stdin),
        form_sent(&curl(), args, stdin),
    );
    assert_eq!(got, curls, "{args:?}");
}

/// `-F name=@-`: standard input read whole and sent as a file named `-`
/// — with no `Content-Type`, as curl types a part by the name its head
/// gives alone, and `-` has no extension — or named by `;filename=` and
/// typed by it as curl types it (ten extensions, in any case), or typed
/// by `;type=`; `-F name=<-`: standard input as a text value.
#[test]
fn form_parts_from_standard_input_are_sent_as_curls() {
    let stdin = b"from\r\nstandard input \xe9";
    for args in [
        &["-F", "f=@-"][..],
        &["-F", "t=before", "-F", "f=@-", "-F", "u=after"],
        &["-F", "f=@-;filename=s.txt"],
        &["-F", "f=@-;filename=photo.PNG"],
        &["-F", "f=@-;filename=s.json"],
        &["-F", "f=@-;type=text/x-s;filename=s.bin"],
        &["-F", "f=@-;type=text/x-s"],
        &["-F", "f=<-"],
    ] {
        assert_form_sent_as_curls(args, stdin);
    }
}

/// `;headers=Name: value` and `;headers=@FILE` (or `<FILE`) add fields to
/// a part's head, after its own, names as written, as curl adds them: a
/// file's lines with `#` comments skipped, folded lines joined, carriage
/// returns and trailing blanks dropped; a quoted field may hold a `;`; a
/// `Content-Type` among them is the part's type unless `;type=` gives one
/// (the first, written where curl writes its own), a `Content-Disposition`
/// replaces the form's own; the fields after `;type=` are no longer its
/// parameters; a file that cannot be read is a warning, and no field.
#[test]
fn form_part_headers_are_sent_as_curls() {
    let dir = support::real::TempDir::new("get-curl-form-headers");
    let file = dir.path().join("fields");
    std::fs::write(
        &file,
        "X-File: one\r\n# a comment\nX-Fold: a\n   folded\n\n\tmore\nX-Last: trail   \n\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let missing = dir.path().join("missing");
    let missing = missing.to_str().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "file text").unwrap();
    let text = text.to_str().unwrap();
    for args in [
        vec!["-F".to_string(), "a=v;headers=X-Foo: bar".into()],
        vec![
            "-F".into(),
            "a=v;HEADERS=X-Up: 1;headers=\"X-Q: a;b\"".into(),
        ],
        vec!["-F".into(), format!("a=v;headers=@{file}")],
        vec!["-F".into(), format!("a=v;headers=< {file} ;type=text/x")],
        vec![
            "-F".into(),
            format!("a=@{text};headers=@{file};filename=n.bin"),
        ],
        vec![
            "-F".into(),
            "a=v;headers=Content-Type: text/h;type=text/t".into(),
        ],
        vec![
            "-F".into(),
            "a=v;headers=content-type: text/h;headers=X-A: 1".into(),
        ],
        vec![
            "-F".into(),
            format!("a=@{text};headers=content-type: text/h;headers=Content-Type: text/i"),
        ],
        vec![
            "-F".into(),
            "a=v;headers=Content-Disposition: attachment".into(),
        ],
        vec![
            "-F".into(),
            "a=v;type=text/plain;headers=X-A: 1; charset=x".into(),
        ],
        vec!["-F".into(), "a=v;headers=X-Empty:".into()],
        vec!["-F".into(), format!("a=<-;headers=@{missing}")],
        vec!["-F".into(), "a=@-;headers=X-In: 1".into()],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_form_sent_as_curls(&args, b"standard input");
    }
}

/// Where `get` parts from curl's `;headers=`: a field is sent as `Name:
/// value`, one space after the colon, where curl sends it as written
/// (`X:1`, and curl 7.88's `X:   1`); a field that is no `Name: value`
/// (no colon, a blank before it: a line a server cannot read as a field,
/// which curl sends) is a bad argument. A file too long a field in it is
/// cut at 998 bytes, as curl's, and says so; one that cannot be read is
/// a warning, as curl's.
#[test]
fn form_part_headers_that_curl_sends_as_written_are_sent_as_fields_or_refused() {
    let server = TestServer::respond(|request| ok(&String::from_utf8_lossy(&request.body)));
    let url = server.url("/");
    let output = run(
        &get(),
        &[&url, "-s", "-F", "a=v;headers=X-A:1;headers=X-B:   2  "],
        b"",
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let body = String::from_utf8_lossy(&output.stdout);
    assert!(
        body.contains("name=\"a\"\r\nX-A: 1\r\nX-B: 2\r\n\r\nv\r\n"),
        "{body}"
    );
    for bad in [
        "a=v;headers=NoColon",
        "a=v;headers=X-A : 1",
        "a=v;headers=",
        "a=v;headers=: v",
    ] {
        let output = run(&get(), &[&url, "-F", bad], b"");
        assert_eq!(output.status.code(), Some(2), "{bad}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("expected headers=Name: value"),
            "{bad}: {stderr}"
        );
    }
    let dir = support::real::TempDir::new("get-curl-form-headers-long");
    let long = dir.path().join("long");
    std::fs::write(&long, format!("X-Long: {}\nX-Next: 1\n", "y".repeat(1200))).unwrap();
    let output = run(
        &get(),
        &[&url, "-F", &format!("a=v;headers=@{}", long.display())],
        b"",
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let body = String::from_utf8_lossy(&output.stdout);
    let field = format!(
        "X-Long: {}\r\nX-Next: 1\r\n",
        "y".repeat(998 - "X-Long: ".len())
    );
    assert!(body.contains(&field), "{body}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("line 1: header too long (truncated)"),
        "{stderr}"
    );
    let missing = dir.path().join("missing");
    let output = run(
        &get(),
        &[&url, "-F", &format!("a=v;headers=@{}", missing.display())],
        b"",
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("get: warning: cannot read from "),
        "{stderr}"
    );
}

/// A server for `-w`: fields of several kinds, a redirect, an error
/// status.
fn write_out_server() -> TestServer {
    TestServer::respond(|request| match request.target.as_str() {
        "/older" => response(302, &[("Location", "/hop")], b""),
        "/hop" => response(
            302,
            &[("Location", "/fields"), ("Content-Type", "text/x-hop")],
            b"",
        ),
        "/old" => response(302, &[("Location", "/fields"), ("X-Hop", "1")], b""),
        "/missing" => response(404, &[("Content-Type", "text/html")], b"no"),
        "/gz" => response(
            200,
            &[("Content-Encoding", "gzip"), ("X-Gz", "1")],
            &gzip(b"unzipped"),
        ),
        _ => response(
            200,
            &[
                ("Content-Type", "text/plain; charset=utf-8"),
                ("X-Multi", "a"),
                ("X-Multi", "b, c"),
                ("X-Quote", "\"q\" \\ back\ttab"),
                ("Set-Cookie", "c=1; Path=/"),
            ],
            b"the page",
        ),
    })
}

/// What `program` wrote on standard output for `url`, `-s -L -o
/// /dev/null -w FORMAT` and `args`, and its exit status.
fn written_out(program: &Path, url: &str, format: &str, args: &[&str]) -> (String, Option<i32>) {
    let base = [url, "-s", "-L", "-o", "/dev/null", "-w", format];
    let output = run(program, &[&base[..], args].concat(), b"");
    (
        String::from_utf8(output.stdout).unwrap(),
        output.status.code(),
    )
}

/// A URL at which nothing listens.
fn refused_url() -> String {
    format!("http://{}/", refused_addr())
}

/// `%{header_json}`: the answer's fields as curl writes them, byte for
/// byte — lower-case names in the order they came, each with the array
/// of its values, one a line — the last hop's after redirects, an error
/// status's with `-f`, a decoded body's `Content-Encoding` kept (as the
/// server sent it), and `{\n}` without an answer — or for a chain longer
/// than `--max-redirs`, whose redirect not followed curl tells of
/// otherwise (`%{http_code}` its status, `%{content_type}` its type); and
/// beside it three variables alone, as curl writes them (without an
/// answer, a port of 0).
#[test]
fn write_out_header_json_is_curls() {
    let server = write_out_server();
    let refused = refused_url();
    for (url, args) in [
        (server.url("/fields"), &[][..]),
        (server.url("/old"), &[]),
        (server.url("/missing"), &["-f"]),
        (server.url("/gz"), &["--compressed"]),
        (server.url("/older"), &["--max-redirs", "1"]),
        (refused, &[]),
    ] {
        let format = "%{header_json}|%{http_code}|%{remote_port}|%{content_type}";
        let got = written_out(&get(), &url, format, args);
        let curls = written_out(&curl(), &url, format, args);
        assert_eq!(got.0, curls.0, "{url} {args:?}");
        assert!(got.0.starts_with('{'), "{url}: {got:?}");
    }
}

/// The keys of `%{json}` get writes: the variables it knows, as curl
/// names them, in curl's order.
const JSON_KEYS: [&str; 14] = [
    "content_type",
    "errormsg",
    "exitcode",
    "http_code",
    "http_version",
    "num_redirects",
    "remote_ip",
    "remote_port",
    "response_code",
    "size_download",
    "time_starttransfer",
    "time_total",
    "url",
    "url_effective",
];

/// `%{json}`: the variables get knows, each under curl's name, in curl's
/// order and of curl's JSON type, with curl's value — but the times (each
/// a number of seconds, `get`'s own), the text of an error (`null` for
/// none, in both) and, after an error, the exit status (get's are 1 for
/// any error, curl's its own: 7, 47) — for an answer, a redirect followed,
/// an error status with `-f`, a chain longer than `--max-redirs` (the
/// redirect not followed is the answer they tell of), and no answer at
/// all. curl's other keys are
/// not written (what `get` does not track: see `write_out_json`).
#[test]
fn write_out_json_has_curls_keys_types_and_values() {
    let server = write_out_server();
    let refused = refused_url();
    for (url, args, same_exit) in [
        (server.url("/fields"), &[][..], true),
        (server.url("/old"), &[], true),
        (server.url("/missing"), &["-f"], true),
        (server.url("/older"), &["--max-redirs", "1"], false),
        (refused, &[], false),
    ] {
        let (got_text, _) = written_out(&get(), &url, "%{json}", args);
        let (curls_text, _) = written_out(&curl(), &url, "%{json}", args);
        let got: serde_json::Value = serde_json::from_str(&got_text).unwrap();
        let curls: serde_json::Value = serde_json::from_str(&curls_text).unwrap();
        let (got, curls) = (got.as_object().unwrap(), curls.as_object().unwrap());
        let keys: Vec<&str> = got.keys().map(String::as_str).collect();
        let mut in_order = JSON_KEYS.to_vec();
        in_order.sort_by_key(|key| got_text.find(&format!("\"{key}\":")));
        assert_eq!(in_order, JSON_KEYS, "get's order: {got_text}");
        let mut curls_order = JSON_KEYS.to_vec();
        curls_order.sort_by_key(|key| curls_text.find(&format!("\"{key}\":")));
        assert_eq!(curls_order, JSON_KEYS, "curl's order: {curls_text}");
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, JSON_KEYS, "{got_text}");
        for key in JSON_KEYS {
            let (value, curls_value) = (&got[key], &curls[key]);
            let (url, args) = (&url, args);
            match key {
                "time_starttransfer" | "time_total" => {
                    assert!(value.is_f64() && curls_value.is_f64(), "{key}: {got_text}");
                    assert!(value.as_f64().unwrap() >= 0.0, "{key}: {got_text}");
                }
                "errormsg" => assert_eq!(
                    value.is_null(),
                    curls_value.is_null(),
                    "{url} {args:?} {key}: {got_text} / {curls_text}"
                ),
                "exitcode" if !same_exit => assert!(value.is_u64(), "{got_text}"),
                _ => assert_eq!(
                    value, curls_value,
                    "{url} {args:?} {key}: {got_text} / {curls_text}"
                ),
            }
        }
    }
}

/// `%{url}` is the URL as it was given, as curl writes it — one without a
/// `scheme://` too (`127.0.0.1:PORT/old`, fetched as an `http://` one,
/// which `%{url_effective}` says) — alone and in `%{json}`.
#[test]
fn write_out_url_is_the_url_as_given_as_curls() {
    let server = write_out_server();
    let with_scheme = server.url("/old");
    let given = with_scheme.strip_prefix("http://").unwrap();
    for url in [given, with_scheme.as_str()] {
        let format = "%{url}|%{url_effective}";
        let (got, exit) = written_out(&get(), url, format, &[]);
        assert_eq!(exit, Some(0), "{url}: {got}");
        assert_eq!(got, written_out(&curl(), url, format, &[]).0, "{url}");
        let effective = server.url("/fields");
        assert_eq!(got, format!("{url}|{effective}"));
        let (json, _) = written_out(&get(), url, "%{json}", &[]);
        let json: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(json["url"], url, "{json}");
    }
}

/// Where curl 7.88's `%{header_json}` errs, get writes what later curls
/// do (checked here, curl 7.88 writing what each comment says): every
/// field, those between two of one name too (7.88 loses `x-c`); an empty
/// value as `""` (7.88: `"\r"`); UTF-8 as it is (7.88:
/// `cafuffffffc3uffffffa9`) and a byte that is not UTF-8 as U+FFFD (7.88:
/// `cafuffffffe9`). (A control character, which 7.88 writes as `u0001`,
/// no backslash, is `\u0001` here; but no field can hold one.)
#[test]
fn write_out_header_json_is_valid_json_where_curl_7_88_errs() {
    let server = TestServer::respond(|_| {
        b"HTTP/1.1 200 OK\r\nX-B: 1\r\nX-C: 2\r\nX-B: 3\r\nX-Empty:\r\n\
          X-Utf: caf\xc3\xa9\r\nX-Latin: caf\xe9\r\nContent-Length: 2\r\n\r\nok"
            .to_vec()
    });
    let (text, exit) = written_out(&get(), &server.url("/"), "%{header_json}", &[]);
    assert_eq!(exit, Some(0));
    assert_eq!(
        text,
        "{\"x-b\":[\"1\",\"3\"],\n\"x-c\":[\"2\"],\n\"x-empty\":[\"\"],\n\
         \"x-utf\":[\"caf\u{e9}\"],\n\"x-latin\":[\"caf\u{fffd}\"],\n\
         \"content-length\":[\"2\"]\n}"
    );
    let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(parsed["x-utf"][0], "caf\u{e9}");
}

/// A part no `;type=` types is typed as curl types it: by the file name
/// its head gives, from libcurl's ten extensions (in any case), a file
/// also by its path, else `application/octet-stream` — not by the
/// client's wider table (`.json`, `.csv`) — and a text part named by
/// `;filename=` too; a part that no name types has no type.
#[test]
fn form_parts_are_typed_as_curl_types_them() {
    let dir = support::real::TempDir::new("get-curl-form-types");
    let mut files = Vec::new();
    for name in ["a.json", "b.csv", "c.TXT", "noext", "d.html", "e.txt"] {
        let path = dir.path().join(name);
        std::fs::write(&path, name).unwrap();
        files.push(path.to_str().unwrap().to_string());
    }
    let [json, csv, txt, noext, html, plain] = &files[..] else {
        unreachable!()
    };
    for args in [
        vec![
            format!("a=@{json}"),
            format!("b=@{csv}"),
            format!("c=@{txt}"),
        ],
        vec![format!("a=@{noext}"), format!("b=@{noext};filename=y.txt")],
        vec![
            format!("a=@{html};filename=z.bin"),
            format!("b=@{json};filename=p.PDF"),
        ],
        vec!["a=v;filename=x.txt".into(), "b=v;filename=x.json".into()],
        vec![
            format!("a=<{plain}"),
            format!("b=@{plain};type=text/x-mine"),
        ],
        vec![format!("a=@{json};headers=Content-Type: text/x-field")],
    ] {
        let args: Vec<String> = args.into_iter().flat_map(|a| ["-F".into(), a]).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_form_sent_as_curls(&args, b"");
    }
}
