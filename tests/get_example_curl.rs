//! `examples/get` beside curl itself (7.88, as `scripts/test` installs
//! it): the same arguments to each, against the same loopback server, and
//! what each sent compared byte for byte — `-F`'s parts read from
//! standard input (`@-`, `<-`).
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
