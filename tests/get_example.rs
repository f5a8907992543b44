//! `examples/get`, the command-line face of the client, run as a process
//! against loopback servers: redirects followed by default and bounded by
//! `--max-redirects`, `--no-decompress`, `--cookies` and `--cookie`,
//! `--max-body-bytes`, `-A`, `-e`, `-u` and URL credentials (and curl's names for the
//! same), `--proxy`, `--proxy-user`, `--no-proxy`, `--noproxy` and the proxy environment, `--resolve`,
//! `--cert`/`--key`, `--cacert` and `--ca`, `--write-timeout`, `--connect-timeout` (TLS too),
//! `-O`, `-G`, `--data`/`--data-binary` (`--data-raw` as given, `--data-urlencode` encoded) from a file or standard input and `-T -`, `-v`, `-i`, `-w`,
//! `-F` and `--form-string`, and its exit
//! statuses (0 for any response, 1 for an error, 2 for bad arguments, 22
//! for `-f` and an error status).

mod support;

use std::io::Write;
use std::process::{Command, Output};
use support::*;

fn get(args: &[&str]) -> Output {
    Command::new(example_binary("get"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `get URL --resolve ENTRY --no-proxy`, which must succeed: its output.
fn get_resolved(url: &str, entry: &str) -> String {
    let output = get(&[url, "--resolve", entry, "--no-proxy"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{entry} for {url}: {output:?}"
    );
    stdout(&output)
}

fn server() -> TestServer {
    TestServer::respond(|request| match request.target.as_str() {
        "/old" => response(302, &[("Location", "/new")], b""),
        "/app/start" => response(302, &[("Location", "/landing")], b""),
        "/login" => response(
            303,
            &[("Location", "/home"), ("Set-Cookie", "token=t1; Path=/")],
            b"",
        ),
        "/gz" => {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(b"unzipped text").unwrap();
            response(
                200,
                &[("Content-Encoding", "gzip")],
                &encoder.finish().unwrap(),
            )
        }
        "/big" => ok(&"x".repeat(10_000)),
        "/moved-echo" => response(307, &[("Location", "/echo")], b""),
        // The body as it came, and how it was framed.
        "/echo" => ok(&format!(
            "{} {} length={} chunked={}",
            request.method,
            String::from_utf8_lossy(&request.body),
            request.header("content-length").unwrap_or("-"),
            request.header("transfer-encoding").is_some(),
        )),
        _ => ok(&format!(
            "{} auth={} cookie={}",
            request.target,
            request.header("authorization").unwrap_or("-"),
            request.header("cookie").unwrap_or("-"),
        )),
    })
}

#[test]
fn redirects_are_followed_unless_max_redirs_says_zero() {
    let server = server();
    let followed = get(&[&server.url("/old")]);
    assert!(followed.status.success());
    let text = stdout(&followed);
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    assert!(text.ends_with("/new auth=- cookie=-"), "{text}");

    for flag in ["--max-redirects", "--max-redirs"] {
        let first = get(&[&server.url("/old"), flag, "0"]);
        assert!(first.status.success(), "a 3xx is a response: exit 0");
        let text = stdout(&first);
        assert!(text.starts_with("HTTP/1.1 302 Found"), "{text}");
        assert!(text.contains("location: /new"), "{text}");
    }
}

/// A redirect chain stopped by `--max-redirs` is an error (exit 1), and
/// with `-i` the heads that came are written first, where the heads go,
/// as `curl -iL --max-redirs` writes them before its error: each hop
/// followed, then the one not followed.
#[test]
fn include_writes_the_heads_of_a_redirect_chain_stopped_before_its_error() {
    let server = TestServer::respond(|request| match request.target.as_str() {
        "/r1" => response(302, &[("Location", "/r2")], b""),
        "/r2" => response(302, &[("Location", "/r3")], b""),
        _ => ok("the end"),
    });
    let url = server.url("/r1");
    let hops = "HTTP/1.1 302 Found\nlocation: /r2\ncontent-length: 0\n\n\
                HTTP/1.1 302 Found\nlocation: /r3\ncontent-length: 0\n\n";
    let output = get(&[&url, "-i", "--max-redirs", "1"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(stdout(&output), hops);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("redirect stopped after"), "{stderr}");
    let dir = support::real::TempDir::new("get-stopped");
    let file = dir.path().join("out");
    let output = get(&[
        &url,
        "-iL",
        "--max-redirs",
        "1",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), hops);
    // Without `-i`, the error alone.
    let output = get(&[&url, "--max-redirs", "1"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(output.stdout.is_empty(), "{output:?}");
}

#[test]
fn raw_prints_the_body_as_it_was_encoded() {
    let server = server();
    let decoded = stdout(&get(&[&server.url("/gz")]));
    assert!(decoded.ends_with("\n\nunzipped text"), "{decoded}");
    assert!(!decoded.contains("content-encoding"), "{decoded}");
    let raw = get(&[&server.url("/gz"), "--raw"]);
    assert!(
        raw.stdout.windows(2).any(|w| w == [0x1f, 0x8b]),
        "gzip magic"
    );
    assert!(stdout(&raw).contains("content-encoding: gzip"));
}

/// `-i` prints the final head as the server sent it, as `curl -i
/// --compressed` does (`get` asks for compressed bodies and decodes them
/// as curl's `--compressed`): its `Content-Encoding` and `Content-Length`
/// kept above the decoded body, as they are in a redirect hop's head, in
/// `-I`'s and in `-v`'s `<` lines. Without `-i`, the head of the body
/// printed (`raw_prints_the_body_as_it_was_encoded`).
#[test]
fn include_prints_the_final_head_as_the_server_sent_it() {
    let server = server();
    let length = format!("content-length: {}\n", gzip(b"unzipped text").len());
    for args in [&["-i"][..], &["--include"], &["-i", "-X", "GET"]] {
        let output = get(&[&[&server.url("/gz")[..]], args].concat());
        assert_eq!(output.status.code(), Some(0), "{args:?}: {output:?}");
        let text = stdout(&output);
        assert!(text.starts_with("HTTP/1.1 200 OK\n"), "{args:?}: {text}");
        assert!(
            text.contains("content-encoding: gzip\n"),
            "{args:?}: {text}"
        );
        assert!(text.contains(&length), "{args:?}: {text}");
        assert!(text.ends_with("\n\nunzipped text"), "{args:?}: {text}");
    }
    // `-I -X GET`: the head alone, as sent.
    let output = get(&[&server.url("/gz"), "-I", "-X", "GET"]);
    let text = stdout(&output);
    assert!(text.contains("content-encoding: gzip\n"), "{text}");
    assert!(text.ends_with(&format!("{length}\n")), "{text:?}");
}

#[test]
fn cookies_and_credentials() {
    let server = server();
    // The cookie set by the 303 goes to the next hop, with the caller's.
    let text = stdout(&get(&[&server.url("/login"), "--cookie", "lang=en"]));
    assert!(text.contains("/home auth=- cookie="), "{text}");
    assert!(
        text.contains("token=t1") && text.contains("lang=en"),
        "{text}"
    );

    // A cookie given on the command line is for the URL's host, whatever
    // the URL's path: it goes to the hop out of the URL's directory too.
    let text = stdout(&get(&[&server.url("/app/start"), "-b", "lang=en"]));
    assert!(text.ends_with("/landing auth=- cookie=lang=en"), "{text}");

    let expected = support::real::basic_auth("alice", "pw");
    let text = stdout(&get(&[&server.url("/who"), "-u", "alice:pw"]));
    assert!(
        text.ends_with(&format!("/who auth={expected} cookie=-")),
        "{text}"
    );
    let in_url = server.url("/who").replace("://", "://alice:pw@");
    let text = stdout(&get(&[&in_url]));
    assert!(
        text.ends_with(&format!("/who auth={expected} cookie=-")),
        "{text}"
    );
}

#[test]
fn retries_and_hedging() {
    // The first connection is reset: an error, unless retried.
    let resetting = || {
        TestServer::start(Behaviour::per_connection(|index| match index {
            0 => Behaviour::Reset,
            _ => Behaviour::respond(|_| ok("second")),
        }))
    };
    let server = resetting();
    assert_eq!(get(&[&server.url("/")]).status.code(), Some(1));
    let server = resetting();
    let retried = get(&[&server.url("/"), "--retries", "2"]);
    assert_eq!(retried.status.code(), Some(0));
    assert!(stdout(&retried).ends_with("second"));
    // The first connection never answers: the copy does.
    let server = TestServer::start(Behaviour::silent_first("the copy"));
    let hedged = get(&[
        &server.url("/"),
        "--hedge-after",
        "20",
        "--request-timeout",
        "5000",
    ]);
    assert_eq!(hedged.status.code(), Some(0));
    assert!(stdout(&hedged).ends_with("the copy"));
}

/// Runs `get` with `stdin` on its standard input.
fn get_with_stdin(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(example_binary("get"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn data_and_uploads_from_files_and_standard_input_as_curl_reads_them() {
    let server = server();
    let url = server.url("/echo");
    let path = std::env::temp_dir().join(format!("tickless-get-data-{}", std::process::id()));
    std::fs::write(&path, "a=1\r\n&b=2\n").unwrap();
    let file = format!("@{}", path.display());
    let cases: [(&[&str], &[u8], &str); 6] = [
        // --data: the text as given; @FILE and @- without CR and LF.
        (&["-d", "a b"], b"", "POST a b length=3 chunked=false"),
        (&["-d", &file], b"", "POST a=1&b=2 length=7 chunked=false"),
        (
            &["--data", "@-"],
            b"x\ny\n",
            "POST xy length=2 chunked=false",
        ),
        // --data-binary: a file's bytes as they are.
        (
            &["--data-binary", &file],
            b"",
            "POST a=1\r\n&b=2\n length=10 chunked=false",
        ),
        // -T -: standard input, chunked, a PUT.
        (
            &["-T", "-"],
            b"from stdin",
            "PUT from stdin length=- chunked=true",
        ),
        (
            &["-X", "POST", "--upload-file", "-"],
            b"",
            "POST  length=- chunked=true",
        ),
    ];
    for (args, stdin, expected) in cases {
        let mut argv = vec![url.as_str()];
        argv.extend_from_slice(args);
        let output = get_with_stdin(&argv, stdin);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {output:?}");
        assert!(
            stdout(&output).ends_with(expected),
            "{args:?}: {}",
            stdout(&output)
        );
    }
    // --data-raw: an `@` is sent as it is, never read as a file's name;
    // joined with the others' parts as they are.
    let raw = get(&[&url, "--data-raw", &file, "-d", &file]);
    assert_eq!(raw.status.code(), Some(0), "{raw:?}");
    let sent = format!("{file}&a=1&b=2");
    assert!(
        stdout(&raw).ends_with(&format!("POST {sent} length={} chunked=false", sent.len())),
        "{}",
        stdout(&raw)
    );
    // --data-urlencode: the content encoded as curl 7.88 encodes it (a
    // space as `+`), after its name; a file's bytes as they are.
    let named_file = format!("f@{}", path.display());
    let encoded = get_with_stdin(
        &[
            &url,
            "--data-urlencode",
            "q=a b&c~*",
            "--data-urlencode",
            &named_file,
            "--data-urlencode",
            "=é/",
            "--data-urlencode",
            "s@-",
        ],
        b"in\n",
    );
    assert_eq!(encoded.status.code(), Some(0), "{encoded:?}");
    let sent = "q=a+b%26c~%2A&f=a%3D1%0D%0A%26b%3D2%0A&%C3%A9%2F&s=in%0A";
    assert!(
        stdout(&encoded).ends_with(&format!("POST {sent} length={} chunked=false", sent.len())),
        "{}",
        stdout(&encoded)
    );
    std::fs::remove_file(&path).unwrap();
    // A file that cannot be read is an error, named with the flag that
    // named it.
    for flag in ["--data", "--data-binary"] {
        let missing = get(&[&url, flag, "@/nonexistent/tickless-data"]);
        assert_eq!(missing.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&missing.stderr);
        assert!(
            stderr.contains(&format!("{flag} @/nonexistent/tickless-data:")),
            "{stderr}"
        );
    }
}

/// `-T FILE` and `--data-binary @FILE` to a URL that answers `307`: the
/// file goes again, whole, to where it points — as curl rewinds it — not
/// the 307 for the answer.
#[test]
fn a_file_uploaded_to_a_307_goes_again_whole() {
    let server = server();
    let path = std::env::temp_dir().join(format!("tickless-get-moved-{}", std::process::id()));
    std::fs::write(&path, "file body").unwrap();
    let file = path.to_str().unwrap();
    let at_file = format!("@{file}");
    for (args, expected) in [
        (["-T", file], "PUT file body length=9 chunked=false"),
        (
            ["--data-binary", at_file.as_str()],
            "POST file body length=9 chunked=false",
        ),
    ] {
        let url = server.url("/moved-echo");
        let output = get(&[&url, args[0], args[1]]);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {output:?}");
        assert!(
            stdout(&output).ends_with(expected),
            "{args:?}: {}",
            stdout(&output)
        );
    }
    std::fs::remove_file(&path).unwrap();
}

/// `-T -` with a regular file on standard input (`get URL -T - < FILE`)
/// to a URL that answers `307`: the file goes again, whole, from where
/// standard input stood, as curl rewinds it — not the 307 for the answer.
/// A pipe's bytes cannot go twice: sent once, chunked, the 307 is the
/// answer (curl fails, its rewind refused).
#[test]
fn standard_input_a_file_uploaded_to_a_307_goes_again_whole() {
    use std::io::{Seek, SeekFrom};
    let server = server();
    let url = server.url("/moved-echo");
    let path = std::env::temp_dir().join(format!("tickless-get-stdin-{}", std::process::id()));
    std::fs::write(&path, "skip|file body").unwrap();
    let mut stdin = std::fs::File::open(&path).unwrap();
    stdin.seek(SeekFrom::Start("skip|".len() as u64)).unwrap();
    let output = Command::new(example_binary("get"))
        .args([url.as_str(), "-T", "-"])
        .stdin(stdin)
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let text = stdout(&output);
    assert!(
        text.ends_with("PUT file body length=9 chunked=false"),
        "{text}"
    );
    let piped = get_with_stdin(&[&url, "-T", "-"], b"piped body");
    assert_eq!(piped.status.code(), Some(0), "{piped:?}");
    let text = stdout(&piped);
    assert!(text.starts_with("HTTP/1.1 307 "), "{text}");
    assert_eq!(server.requests().len(), 3, "{text}");
}

#[test]
fn write_timeout_fails_an_upload_the_server_never_reads() {
    // A listener that never accepts takes the connection and a few MiB.
    let listener = UnacceptingListener::new();
    let url = format!("http://{}/put", listener.addr());
    let path = std::env::temp_dir().join(format!("tickless-get-put-{}", std::process::id()));
    std::fs::write(&path, vec![0u8; 48 << 20]).unwrap();
    let output = get(&[
        &url,
        "--upload-file",
        path.to_str().unwrap(),
        "--write-timeout",
        "200",
        "--request-timeout",
        "30000",
    ]);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("Write timeout"), "{stderr}");
    assert!(stderr.contains("after 200 ms"), "{stderr}");
}

#[test]
fn errors_exit_1_and_bad_arguments_2() {
    let server = server();
    for flag in ["--max-body-bytes", "--max-filesize"] {
        let too_big = get(&[&server.url("/big"), flag, "1000"]);
        assert_eq!(too_big.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&too_big.stderr);
        assert!(stderr.contains("1000"), "{stderr}");
        let fits = get(&[&server.url("/big"), flag, "10000"]);
        assert_eq!(fits.status.code(), Some(0));
    }

    let refused = get(&[&format!("http://{}/", refused_addr())]);
    assert_eq!(refused.status.code(), Some(1));
    // The message says why, once: the error's causes, each said once.
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(stderr.matches("Connection refused").count(), 1, "{stderr}");
    // A URL that does not parse is a bad argument (2), with the usage,
    // as any other: nothing was tried.
    let unparsable = get(&["http://a b/"]);
    assert_eq!(unparsable.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&unparsable.stderr);
    assert!(
        stderr.contains(r#"get: invalid URI "http://a b/": invalid uri character"#),
        "{stderr}"
    );
    assert!(stderr.contains("usage: get URL"), "{stderr}");
    // Whichever check meets the URL first: the client's, or the cookie
    // jar's (`-b`, `--cookies`).
    let cookie_flags: [&[&str]; 3] = [&[], &["-b", "a=1"], &["--cookies"]];
    for url in ["http://exa mple/", "://x", "ftp://x", "http://x:99999/"] {
        for flags in cookie_flags {
            let unparsable = get(&[&[url][..], flags].concat());
            let stderr = String::from_utf8_lossy(&unparsable.stderr);
            assert_eq!(
                unparsable.status.code(),
                Some(2),
                "{url} {flags:?}: {stderr}"
            );
            assert!(
                stderr.contains("usage: get URL"),
                "{url} {flags:?}: {stderr}"
            );
        }
    }

    // curl's -m/--max-time, in seconds (a fraction allowed): the request
    // timeout, an error.
    let silent = TestServer::start(Behaviour::NeverAnswer);
    for flag in ["-m", "--max-time"] {
        let timed_out = get(&[&silent.url("/"), flag, "0.3"]);
        assert_eq!(timed_out.status.code(), Some(1), "{flag}");
        let stderr = String::from_utf8_lossy(&timed_out.stderr);
        assert!(
            stderr.contains("Request timeout") && stderr.contains("after 300 ms"),
            "{flag}: {stderr}"
        );
    }
    // As curl, any positive value is a timeout: one under a nanosecond is
    // not rounded down to zero, which would be none. (The read timeout
    // only ends the request if that were lost.)
    let tiny = get(&[
        &silent.url("/"),
        "-m",
        "0.0000000001",
        "--read-timeout",
        "10000",
    ]);
    assert_eq!(tiny.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&tiny.stderr);
    assert!(stderr.contains("Request timeout"), "{stderr}");

    // A flag value that cannot be used is a bad argument, found before
    // anything is sent.
    for bad in [
        vec!["-m", "soon", "http://127.0.0.1/"],
        vec!["--max-time", "-1", "http://127.0.0.1/"],
        vec!["--max-redirects", "many", "http://127.0.0.1/"],
        vec!["--cookie", "no-equals-sign", "http://127.0.0.1/"],
        vec!["-X", "NOT A METHOD", "http://127.0.0.1/"],
        vec!["-H", "bad name: value", "http://127.0.0.1/"],
        vec!["-H", "X-Line: one\nbreak\r", "http://127.0.0.1/"],
        vec!["-x", "ftp://proxy.invalid", "http://127.0.0.1/"],
        vec!["--proxy", "https://proxy.invalid", "http://127.0.0.1/"],
        vec!["--bogus", "http://127.0.0.1/"],
    ] {
        let output = get(&bad);
        assert_eq!(output.status.code(), Some(2), "{bad:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("usage: get URL"), "{bad:?}: {stderr}");
    }
}

/// `-s`, as curl's: no error message (nor `-k`'s warning, nor the head
/// `-o` puts on standard error), the exit status alone says it failed;
/// with `-S` too, the error is told. A bad argument is told either way,
/// as curl tells an option it cannot read.
#[test]
fn silent_tells_no_error_unless_show_error_says_so() {
    let refused = format!("http://{}/", refused_addr());
    for flag in ["-s", "--silent"] {
        let output = get(&[&refused, flag]);
        assert_eq!(output.status.code(), Some(1), "{flag}: {output:?}");
        assert!(output.stderr.is_empty(), "{flag}: {output:?}");
    }
    for args in [&["-sS"][..], &["-s", "--show-error"], &[]] {
        let output = get(&[&[&refused[..]], args].concat());
        assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("Connection refused"), "{args:?}: {stderr}");
    }
    let server = TestServer::respond(|_| response(404, &[], b"the error page"));
    let output = get(&[&server.url("/"), "-sf"]);
    assert_eq!(output.status.code(), Some(22), "{output:?}");
    assert!(output.stderr.is_empty(), "{output:?}");
    assert!(stdout(&output).starts_with("HTTP/1.1 404 "), "{output:?}");
    let output = get(&[&server.url("/"), "-sSf"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("returned error: 404"), "{stderr}");
    // Nor does the head `--output` would put on standard error go there.
    let dir = support::real::TempDir::new("get-silent");
    let file = dir.path().join("out");
    let output = get(&[&server.url("/"), "-s", "-o", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(output.stderr.is_empty(), "{output:?}");
    assert_eq!(std::fs::read(&file).unwrap(), b"the error page");
    // A URL the client refuses: a bad argument (2), told no more than
    // curl's (3) is.
    let output = get(&["-s", "http://exa mple/"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(output.stderr.is_empty(), "{output:?}");
    let output = get(&["-s", "-m", "soon", &refused]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("usage: get URL"), "{stderr}");
    {
        use support::tls::{certs, TlsBehaviour, TlsServer};
        let server = TlsServer::start(&certs().valid, TlsBehaviour::respond(|_| ok("any")));
        let output = get(&[&server.url("/"), "-sk"]);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        assert!(output.stderr.is_empty(), "{output:?}");
        let output = get(&[&server.url("/"), "-k"]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("--insecure"), "{stderr}");
    }
}

#[test]
fn an_argument_that_is_not_utf8_is_a_bad_argument_not_a_panic() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    // A byte that is not UTF-8 (Latin-1's `ÿ`) in the URL, in a header
    // value, in a file name: each a bad argument (2), never a panic (101).
    let server = server();
    let url = server.url("/");
    let latin1 = |text: &[u8]| OsStr::from_bytes(text).to_owned();
    for args in [
        vec![latin1(b"http://127.0.0.1/\xff")],
        vec![url.clone().into(), "-H".into(), latin1(b"X-Name: \xff")],
        vec![url.clone().into(), "-o".into(), latin1(b"out-\xff.bin")],
    ] {
        let output = Command::new(example_binary("get"))
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("not UTF-8") && stderr.contains("\\xFF"),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("usage: get URL"), "{args:?}: {stderr}");
    }
    assert_eq!(server.connections_accepted(), 0, "nothing is sent");
}

/// curl's `-x HOST`: a proxy named without a port is at port 1080. The
/// double listens there on a loopback address of its own (the first of a
/// few that is free: 127.0.0.0/8 is all loopback), the port being fixed.
#[test]
fn a_proxy_without_a_port_is_at_curls_1080() {
    let (host, proxy) = proxy_at_1080();
    for spelled in [
        host.clone(),
        format!("http://{host}"),
        format!("http://u:p@{host}/"),
    ] {
        let text = stdout(&get(&["http://far.invalid/x", "-x", &spelled]));
        assert!(
            text.ends_with("proxy got http://far.invalid/x"),
            "{spelled}: {text}"
        );
    }
    assert_eq!(proxy.connections_accepted(), 3);
}

/// `-x` with blanks around the proxy: trimmed, as a proxy of the
/// environment is (see
/// [`a_proxy_of_the_environment_without_a_port_is_at_curls_1080_too`]),
/// before curl's 1080 is added — not `HOST :1080`, which does not parse.
#[test]
fn a_proxy_given_with_blanks_around_it_is_trimmed() {
    let (host, proxy) = proxy_at_1080();
    for spelled in [format!(" {host} "), format!("\thttp://{host}:\n")] {
        let output = get(&["http://far.invalid/x", "-x", &spelled]);
        assert!(
            stdout(&output).ends_with("proxy got http://far.invalid/x"),
            "{spelled:?}: {output:?}"
        );
    }
    assert_eq!(proxy.connections_accepted(), 2);
}

/// A proxy double that says what it got, listening at port 1080 on a
/// loopback address of its own (the first of a few that is free:
/// 127.0.0.0/8 is all loopback), the port being fixed: that address, and
/// the double.
fn proxy_at_1080() -> (String, TestServer) {
    let listener = (1..=20)
        .find_map(|last| {
            std::net::TcpListener::bind(("127.61.80.".to_owned() + &last.to_string(), 1080)).ok()
        })
        .expect("no free 127.61.80.x:1080");
    let host = listener.local_addr().unwrap().ip().to_string();
    let proxy = TestServer::start_on(
        listener,
        Behaviour::respond(|request| ok(&format!("proxy got {}", request.target))),
    );
    (host, proxy)
}

/// `-x http://HOST:` names no port either — a colon with no digits after
/// it, which curl's URL parser drops, the default port taken — so it is at
/// curl's 1080 as well, not at the port the URL standard gives an empty
/// one (the scheme's, 80).
#[test]
fn a_proxy_with_an_empty_port_is_at_curls_1080() {
    let (host, proxy) = proxy_at_1080();
    for spelled in [format!("http://{host}:"), format!("http://u:p@{host}:/")] {
        let output = get(&["http://far.invalid/x", "-x", &spelled]);
        assert!(
            stdout(&output).ends_with("proxy got http://far.invalid/x"),
            "{spelled}: {output:?}"
        );
    }
    assert_eq!(proxy.connections_accepted(), 2);
}

/// A proxy of the environment named without a port is at curl's 1080 as
/// well: curl reads `http_proxy` and the others as it reads `-x`, where
/// the client's own default for an `http` proxy is 80. Each variable the
/// client reads a proxy from, in each spelling of a missing port (in a
/// value that is not Unicode too: the client reads it with U+FFFD for what
/// is not UTF-8), with the environment otherwise clear of proxies.
#[test]
fn a_proxy_of_the_environment_without_a_port_is_at_curls_1080_too() {
    use std::os::unix::ffi::OsStringExt;
    let (host, proxy) = proxy_at_1080();
    let not_unicode =
        std::ffi::OsString::from_vec([&b"http://u:p\xff@"[..], host.as_bytes(), b"/"].concat());
    let spellings = [
        ("http_proxy", host.clone().into()),
        ("HTTP_PROXY", format!("http://{host}").into()),
        ("all_proxy", format!("http://u:p@{host}/").into()),
        ("ALL_PROXY", format!("http://{host}:").into()),
        ("http_proxy", format!(" {host} ").into()),
        ("http_proxy", not_unicode),
    ];
    for (variable, value) in &spellings {
        let mut command = Command::new(example_binary("get"));
        command.arg("http://far.invalid/x");
        for name in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"] {
            command.env_remove(name);
        }
        for name in ["all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"] {
            command.env_remove(name);
        }
        let output = command
            .env_remove("REQUEST_METHOD")
            .env(variable, value)
            .output()
            .unwrap();
        assert!(
            stdout(&output).ends_with("proxy got http://far.invalid/x"),
            "{variable}={value:?}: {output:?}"
        );
    }
    assert_eq!(proxy.connections_accepted(), spellings.len());
}

#[test]
fn proxy_resolve_and_no_proxy_flags() {
    let origin = server();
    // A forwarding proxy double: it answers itself, saying what it got.
    let proxy = TestServer::respond(|request| {
        ok(&format!(
            "proxy got {} auth={}",
            request.target,
            request.header("proxy-authorization").unwrap_or("-")
        ))
    });
    let proxy_url = format!("http://u:p@{}", proxy.addr());
    let text = stdout(&get(&["http://far.invalid/x", "--proxy", &proxy_url]));
    let auth = support::real::basic_auth("u", "p");
    assert!(
        text.ends_with(&format!("proxy got http://far.invalid/x auth={auth}")),
        "{text}"
    );
    // The last --proxy wins, as curl's: one before it is not read.
    let args = ["http://far.invalid/x", "-x", "ftp://not-read", "--proxy"];
    let text = stdout(&get(&[&args[..], &[proxy_url.as_str()]].concat()));
    assert!(
        text.ends_with(&format!("proxy got http://far.invalid/x auth={auth}")),
        "{text}"
    );
    // --resolve, curl's form (IPv6 in brackets; the first is dead): the
    // name is never looked up.
    let port = origin.addr().port();
    let entry = format!("named.invalid:{port}:[::1],127.0.0.1");
    let url = format!("http://named.invalid:{port}/hi");
    assert!(get_resolved(&url, &entry).ends_with("/hi auth=- cookie=-"));
    // The environment is honoured unless --no-proxy says otherwise.
    let via_env = Command::new(example_binary("get"))
        .arg(origin.url("/env"))
        .env("http_proxy", format!("http://{}", proxy.addr()))
        .env_remove("no_proxy")
        .env_remove("NO_PROXY")
        .output()
        .unwrap();
    assert!(
        stdout(&via_env).contains("proxy got http://127.0.0.1:"),
        "{via_env:?}"
    );
    let ignored = Command::new(example_binary("get"))
        .args([origin.url("/env").as_str(), "--no-proxy"])
        .env("http_proxy", format!("http://{}", proxy.addr()))
        .output()
        .unwrap();
    assert!(
        stdout(&ignored).ends_with("/env auth=- cookie=-"),
        "{ignored:?}"
    );
    // The environment's no_proxy bypasses --proxy's proxy too, one that is
    // not Unicode read as the client reads it (U+FFFD for what is not UTF-8).
    let bypassed = Command::new(example_binary("get"))
        .args([origin.url("/bypassed").as_str(), "--proxy", &proxy_url])
        .env("no_proxy", {
            use std::os::unix::ffi::OsStrExt;
            std::ffi::OsStr::from_bytes(b"\xff.invalid,127.0.0.1")
        })
        .env_remove("NO_PROXY")
        .output()
        .unwrap();
    assert!(
        stdout(&bypassed).ends_with("/bypassed auth=- cookie=-"),
        "{bypassed:?}"
    );
    for bad in [
        vec!["--resolve", "no-port", "http://127.0.0.1/"],
        vec!["--resolve", "h:80:not-an-ip", "http://127.0.0.1/"],
        vec!["--cert", "only-a-cert.pem", "http://127.0.0.1/"],
        vec!["--proxy", "ftp://x", "http://127.0.0.1/"],
    ] {
        let output = get(&bad);
        assert_ne!(output.status.code(), Some(0), "{bad:?}");
    }
}

#[test]
fn cert_and_key_authenticate_to_a_server_that_asks() {
    use support::tls::{certs, server_config_with, TlsBehaviour, TlsServer};
    let server = TlsServer::start_with(
        server_config_with(&certs().valid, rustls::ALL_VERSIONS, true),
        TlsBehaviour::respond(|_| ok("mutual")),
    );
    let pem = support::real::PemFiles::of(&certs().valid);
    let dir = support::real::TempDir::new("get-ca");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &certs().ca_pem).unwrap();
    let ca = ca.to_str().unwrap();
    let without = get(&[&server.url("/"), "--ca", ca]);
    assert_eq!(without.status.code(), Some(1), "{without:?}");
    let with = get(&[
        &server.url("/"),
        "--ca",
        ca,
        "--cert",
        pem.cert().to_str().unwrap(),
        "--key",
        pem.key().to_str().unwrap(),
    ]);
    assert!(stdout(&with).ends_with("mutual"), "{with:?}");
    assert!(server.handshake_details()[0].client_certified);
}

/// `--cacert FILE` trusts the CA certificates of `FILE` alone, as curl's
/// replaces its default bundle; `--ca FILE`, `get`'s own, trusts them
/// besides the bundled roots. No loopback server can show the bundled
/// roots gone (none holds the key of a Mozilla root), so `-v` tells the
/// roots trusted when a TLS handshake starts, in curl's words (`*  CAfile:
/// FILE`, `*  CApath: none`): what the client was given.
#[test]
fn cacert_trusts_its_file_alone_and_ca_its_file_besides_the_bundled_roots() {
    use support::tls::{certs, TlsBehaviour, TlsServer};
    let server = TlsServer::start(&certs().valid, TlsBehaviour::respond(|_| ok("trusted")));
    let dir = support::real::TempDir::new("get-cacert");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &certs().ca_pem).unwrap();
    let ca = ca.to_str().unwrap();
    let file = format!("*  CAfile: {ca}\n");
    for (args, trusted) in [
        (&["--cacert", ca][..], "*  CApath: none\n"),
        (
            &["--ca", ca],
            "*  CApath: none, and the bundled Mozilla roots\n",
        ),
    ] {
        let output = get(&[&[&server.url("/"), "-v"][..], args].concat());
        assert_eq!(output.status.code(), Some(0), "{args:?}: {output:?}");
        assert!(stdout(&output).ends_with("trusted"), "{args:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!("{file}{trusted}")),
            "{args:?}: {stderr}"
        );
    }
    let output = get(&[&server.url("/"), "-v"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("*  CA: the bundled Mozilla roots\n"),
        "{stderr}"
    );
    assert!(!stderr.contains("CAfile"), "{stderr}");
}

/// `--cert FILE` alone, as curl takes it: `FILE` holds the key and the
/// certificate chain together (curl's `-E` assumes that much), and the
/// client authenticates with both. (It was refused as a bad argument,
/// "--cert and --key go together", exit 2.) `--key` alone is still one.
#[test]
fn cert_alone_names_a_file_with_the_key_and_the_chain_together() {
    use support::tls::{certs, server_config_with, TlsBehaviour, TlsServer};
    let server = TlsServer::start_with(
        server_config_with(&certs().valid, rustls::ALL_VERSIONS, true),
        TlsBehaviour::respond(|_| ok("mutual")),
    );
    let pem = support::real::PemFiles::of(&certs().valid);
    let dir = support::real::TempDir::new("get-cert-alone");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &certs().ca_pem).unwrap();
    let combined = dir.path().join("me.pem");
    let mut both = std::fs::read(pem.key()).unwrap();
    both.extend(std::fs::read(pem.cert()).unwrap());
    std::fs::write(&combined, both).unwrap();
    let (ca, combined) = (ca.to_str().unwrap(), combined.to_str().unwrap());
    for flag in ["--cert", "-E"] {
        let output = get(&[&server.url("/"), "--cacert", ca, flag, combined]);
        assert_eq!(output.status.code(), Some(0), "{flag}: {output:?}");
        assert!(stdout(&output).ends_with("mutual"), "{flag}: {output:?}");
    }
    assert!(server
        .handshake_details()
        .iter()
        .all(|handshake| handshake.client_certified));
    // A file with the chain alone has no key: the client cannot be built.
    let output = get(&[
        &server.url("/"),
        "--cacert",
        ca,
        "--cert",
        pem.cert().to_str().unwrap(),
    ]);
    assert_ne!(output.status.code(), Some(0), "{output:?}");
    let output = get(&[
        &server.url("/"),
        "--cacert",
        ca,
        "--key",
        pem.key().to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
}

#[test]
fn http2_prior_knowledge_prints_http2_and_the_version_flags_are_exclusive() {
    let server = support::h2_server::H2Server::start(|stream| {
        support::h2_server::answer(stream, 200, b"over h2\n")
    });
    let output = get(&[&server.url("/"), "--http2-prior-knowledge"]);
    assert!(output.status.success(), "{output:?}");
    let out = stdout(&output);
    assert_eq!(out.lines().next(), Some("HTTP/2 200"), "{out}");
    assert!(out.ends_with("\nover h2\n"), "{out}");
    // Without the flag the same URL is HTTP/1.1, which this server does
    // not speak: the request fails (exit 1).
    let output = get(&[&server.url("/"), "--http1.1"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let output = get(&[&server.url("/"), "--http2", "--http1.1"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
}

/// `--http2` against a TLS server that offers HTTP/1.1 alone: the request
/// fails (exit 1), and the error says the server did not negotiate h2 —
/// not a TLS protocol error; without the flag the same server answers.
#[test]
fn http2_against_a_server_without_h2_says_it_did_not_negotiate_h2() {
    use support::tls::{certs, TlsServer};
    let server = TlsServer::respond(&certs().valid, |_| ok("h1 only"));
    let dir = support::real::TempDir::new("get-ca");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &certs().ca_pem).unwrap();
    let ca = ca.to_str().unwrap();
    let output = get(&[&server.url("/"), "--ca", ca, "--http2"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let port = server.addr().port();
    assert_eq!(
        stderr.trim_end(),
        format!(
            "get: 127.0.0.1/127.0.0.1:{port} did not negotiate h2 (the client is HTTP/2 \
             only): it refused the TLS handshake with no_application_protocol"
        ),
    );
    assert!(stdout(&output).is_empty(), "{output:?}");
    let output = get(&[&server.url("/"), "--ca", ca]);
    assert!(output.status.success(), "{output:?}");
    assert!(stdout(&output).ends_with("h1 only"), "{output:?}");
}

#[test]
fn a_reader_gone_from_standard_output_is_an_error_that_names_it() {
    let server = TestServer::respond(|_| ok(&"x".repeat(256 * 1024)));
    let mut child = Command::new(example_binary("get"))
        .arg(server.url("/big"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // As `get URL | head -c 0` does: the reader goes before anything is read.
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("get: standard output: Broken pipe"),
        "{stderr}"
    );
}

/// A body that cannot be written to `--output`'s file (`/dev/full`: the
/// disk full) is an error, exit 1, that names the file, as one to
/// standard output names that: not to be taken for the body's own read
/// error, which comes through the same copy.
#[test]
fn a_write_error_to_the_output_file_is_an_error_that_names_it() {
    let server = TestServer::respond(|_| ok(&"x".repeat(256 * 1024)));
    let output = get(&[&server.url("/big"), "-o", "/dev/full"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("get: --output /dev/full: No space left on device"),
        "{stderr}"
    );
}

/// `-f`, `--fail`: an answer of 400 or over exits 22, as curl's, its head
/// printed as always but not its body, and no `--output` file made; one
/// under 400 is a success, as without it.
#[test]
fn fail_exits_22_on_an_error_status_without_its_body() {
    let server = TestServer::respond(|request| match request.target.as_str() {
        "/moved" => response(302, &[("Location", "/missing")], b"moved"),
        "/missing" => response(404, &[], b"the error page"),
        "/broken" => response(500, &[], b"the error page"),
        _ => ok("the page"),
    });
    for args in [
        &["-f"][..],
        &["--fail"],
        &["-fsSL"],
        &["-f", "-i"],
        &["-f", "-X", "POST"],
    ] {
        for path in ["/missing", "/moved", "/broken"] {
            let output = get(&[&[&server.url(path)[..]], args].concat());
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(22), "{path} {args:?}: {stderr}");
            let code = if path == "/broken" { "500" } else { "404" };
            assert!(
                stderr.contains(&format!("get: the requested URL returned error: {code}")),
                "{path} {args:?}: {stderr}"
            );
            let text = stdout(&output);
            // The final head (after the redirect's, with `-i`).
            assert!(text.contains(&format!("HTTP/1.1 {code} ")), "{text}");
            assert!(!text.contains("the error page"), "{path} {args:?}: {text}");
        }
    }
    let dir = support::real::TempDir::new("get-fail");
    let file = dir.path().join("out");
    let output = get(&[&server.url("/missing"), "-f", "-o", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(22), "{output:?}");
    assert!(!file.exists(), "an --output file was made");
    let output = get(&[&server.url("/"), "-f"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout(&output).ends_with("\n\nthe page"), "{output:?}");
    // Without it, any answer is a success.
    let output = get(&[&server.url("/missing")]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout(&output).ends_with("the error page"), "{output:?}");
}

/// `-O`, `--remote-name`: the body goes to a file in the current
/// directory named as the URL's path ends, as written (no query, not
/// decoded), as curl 7.88 names it; a URL that names no file is a bad
/// argument, and nothing is sent.
#[test]
fn remote_name_writes_the_body_to_the_urls_file_name() {
    let server = TestServer::respond(|request| match request.target.as_str() {
        "/moved" => response(302, &[("Location", "/elsewhere")], b""),
        target => ok(&format!("body of {target}")),
    });
    let dir = support::real::TempDir::new("get-remote-name");
    let get_in_dir = |args: &[&str]| {
        Command::new(example_binary("get"))
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    for (path, args, name) in [
        ("/dir/file.txt?v=1#part", &["-O"][..], "file.txt"),
        ("/a%20b.txt", &["--remote-name"], "a%20b.txt"),
        ("/moved", &["-sLO"], "moved"),
    ] {
        let output = get_in_dir(&[&[&server.url(path)[..]], args].concat());
        assert_eq!(output.status.code(), Some(0), "{path}: {output:?}");
        let target = server.requests().pop().unwrap().target;
        let written = std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert_eq!(written, format!("body of {target}"), "{path}");
        assert!(output.stdout.is_empty(), "{path}: {output:?}");
    }
    let sent = server.requests().len();
    for path in ["/", "/dir/", "/dir/..", "/.", "?q=/x"] {
        let output = get_in_dir(&[&server.url(path), "-O"]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{path}: {stderr}");
        assert!(stderr.contains("names no file"), "{path}: {stderr}");
    }
    let output = get_in_dir(&[&server.url("/f"), "-O", "-o", "other"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert_eq!(
        server.requests().len(),
        sent,
        "a bad argument sends nothing"
    );
}

#[test]
fn a_reader_gone_from_standard_error_changes_no_exit_status() {
    // As `get URL 2>&1 | head -c 0` (or `2>&-`): what `get` has to say has
    // nowhere to go, and its exit status still says what happened.
    // Standard error closed before `get` starts: its first write there
    // fails, whenever it comes.
    let get = example_binary("get");
    let without_stderr = |args: &[&str]| {
        Command::new("sh")
            .args(["-c", r#"exec "$0" "$@" 2>&-"#])
            .arg(&get)
            .args(args)
            .output()
            .unwrap()
    };
    let refused = format!("http://{}/", refused_addr());
    assert_eq!(without_stderr(&[&refused]).status.code(), Some(1));
    let bad = without_stderr(&["--bogus", "http://127.0.0.1/"]);
    assert_eq!(bad.status.code(), Some(2));
    // `-k` warns on standard error, then the request goes as ever.
    let server = server();
    let output = without_stderr(&[&server.url("/fine"), "-k"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout(&output).ends_with("/fine auth=- cookie=-"));
    // With `-o`, the head meant for standard error is lost, and the body
    // still goes whole to its file.
    let dir = support::real::TempDir::new("get-no-stderr");
    let file = dir.path().join("body");
    let output = without_stderr(&[&server.url("/big"), "-o", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(std::fs::read(&file).unwrap(), "x".repeat(10_000).as_bytes());
}

/// The request `get` sent to a fresh server with `args` after its URL
/// (`path` on it), and its exit status.
fn sent(path: &str, args: &[&str]) -> (RecordedRequest, Option<i32>) {
    let server = TestServer::respond(|_| ok("seen"));
    let url = server.url(path);
    let mut argv = vec![url.as_str()];
    argv.extend_from_slice(args);
    let output = get(&argv);
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{args:?}: {output:?}");
    (requests[0].clone(), output.status.code())
}

#[test]
fn data_is_a_form_post_and_data_given_again_joins_with_ampersands() {
    let dir = support::real::TempDir::new("get-data");
    let file = dir.path().join("part");
    std::fs::write(&file, "c=3\n").unwrap();
    let file = format!("@{}", file.display());
    // As curl: each part as its own flag reads it, joined with `&`, sent
    // as a form unless a Content-Type is given.
    let (request, status) = sent("/", &["-d", "a=1", "--data-binary", "b=2", "-d", &file]);
    assert_eq!(status, Some(0));
    assert_eq!(request.method, "POST");
    assert_eq!(String::from_utf8_lossy(&request.body), "a=1&b=2&c=3");
    assert_eq!(
        request.header_all("content-type"),
        ["application/x-www-form-urlencoded"]
    );
    let (request, _) = sent("/", &["-d", "{}", "-H", "Content-Type: application/json"]);
    assert_eq!(request.header_all("content-type"), ["application/json"]);
    // `Content-Type:` (curl's way to drop a header): none.
    let (request, _) = sent("/", &["-d", "x", "-H", "Content-Type:"]);
    assert_eq!(request.header("content-type"), None, "{request:?}");
}

/// `-G`, `--get`: the `--data` parts go as the URL's query, after its own,
/// before its fragment, with no body and a GET (HEAD with `-I`, `-X`'s
/// method if given), as curl sends them — a `#` or a space in them
/// percent-encoded, where curl cuts or refuses.
#[test]
fn get_sends_the_data_as_the_urls_query() {
    let (request, status) = sent(
        "/p?y=1#part",
        &[
            "-G",
            "-d",
            "x=1",
            "--data-urlencode",
            "q=a b",
            "-d",
            "c d#e",
        ],
    );
    assert_eq!(status, Some(0), "{request:?}");
    assert_eq!(request.method, "GET");
    assert_eq!(request.target, "/p?y=1&x=1&q=a+b&c%20d%23e");
    assert!(request.body.is_empty(), "{request:?}");
    assert_eq!(request.header("content-type"), None, "{request:?}");
    assert_eq!(request.header("content-length"), None, "{request:?}");
    let (request, _) = sent("/", &["-sGd", "a", "-I"]);
    assert_eq!(
        (request.method.as_str(), request.target.as_str()),
        ("HEAD", "/?a")
    );
    let (request, _) = sent("/", &["--get", "-d", "a", "-X", "DELETE"]);
    assert_eq!(
        (request.method.as_str(), request.target.as_str()),
        ("DELETE", "/?a")
    );
    assert!(request.body.is_empty(), "{request:?}");
}

#[test]
fn headers_in_curls_forms_empty_and_dropped() {
    // `Name;` sends Name empty; `Name:` sends no Name — not even the
    // client's own User-Agent.
    let (request, status) = sent(
        "/",
        &["-H", "X-Empty;", "-H", "X-Gone:", "-H", "User-Agent:"],
    );
    assert_eq!(status, Some(0));
    assert_eq!(request.header("x-empty"), Some(""), "{request:?}");
    assert_eq!(request.header("x-gone"), None, "{request:?}");
    assert_eq!(request.header("user-agent"), None, "{request:?}");
    // A value with a semicolon in it is a value.
    let (request, _) = sent("/", &["-H", "X-List: a;"]);
    assert_eq!(request.header("x-list"), Some("a;"));
    // Blanks around the value are no part of it.
    let (request, _) = sent("/", &["-H", "X-Padded:   v  "]);
    assert_eq!(request.header("x-padded"), Some("v"));
}

/// A blank before a header's name or its colon (`'X : v'`, `' X: v'`):
/// curl sends the line as written, which a server must refuse (RFC 9112,
/// 5.1) or reads as a folded line; `get` cannot send it, and refuses it
/// as a bad argument that says why, rather than send another header.
#[test]
fn a_header_with_a_blank_in_its_name_is_refused_saying_why() {
    for header in ["X : v", " X: v", "X\t: v", "X ;", "X :"] {
        let output = get(&["http://127.0.0.1/", "-H", header]);
        assert_eq!(output.status.code(), Some(2), "{header:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("a blank in the header's name"),
            "{header:?}: {stderr}"
        );
    }
}

#[test]
fn a_header_given_for_authorization_wins_over_user_as_in_curl() {
    // curl: a header given with the name of one of its own is sent
    // instead of it, and `Name:` drops it — `--user`'s `Authorization`
    // among them.
    let (request, status) = sent("/", &["-u", "alice:pw", "-H", "Authorization: Bearer t"]);
    assert_eq!(status, Some(0));
    assert_eq!(request.header_all("authorization"), ["Bearer t"]);
    let (request, status) = sent("/", &["-u", "alice:pw", "-H", "Authorization:"]);
    assert_eq!(status, Some(0));
    assert!(
        request.header_all("authorization").is_empty(),
        "{request:?}"
    );
}

#[test]
fn authorization_dropped_with_a_header_sends_none_for_the_urls_credentials() {
    // The URL's credentials are dropped with it, the URL sent without
    // them (an `@` in the query is no userinfo).
    let server = TestServer::respond(|_| ok("seen"));
    let url = server.url("/who?q=a@b").replace("://", "://alice:pw@");
    let output = get(&[&url, "-H", "Authorization:"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{output:?}");
    assert_eq!(requests[0].target, "/who?q=a@b");
    assert!(
        requests[0].header_all("authorization").is_empty(),
        "{requests:?}"
    );
}

/// `-A`, `--user-agent` and `-e`, `--referer`: curl's shorthands for
/// those headers, empty for none; a `--header` for the same name, or
/// dropping it, wins, as in curl, whatever the order.
#[test]
fn user_agent_and_referer_are_sent_as_curl_sends_them() {
    let (request, status) = sent("/", &["-A", "agent/1", "--referer", "http://from.test/"]);
    assert_eq!(status, Some(0), "{request:?}");
    assert_eq!(request.header_all("user-agent"), ["agent/1"], "{request:?}");
    assert_eq!(request.header_all("referer"), ["http://from.test/"]);
    let (request, _) = sent("/", &["-sAbundled", "--user-agent", "last"]);
    assert_eq!(request.header_all("user-agent"), ["last"], "{request:?}");
    let (request, _) = sent("/", &["-A", "", "-e", ""]);
    assert_eq!(request.header("user-agent"), None, "{request:?}");
    assert_eq!(request.header("referer"), None, "{request:?}");
    for args in [
        &["-A", "agent", "-H", "User-Agent: header"][..],
        &["-H", "User-Agent: header", "--user-agent", "agent"],
    ] {
        let (request, _) = sent("/", args);
        assert_eq!(request.header_all("user-agent"), ["header"], "{args:?}");
    }
    let (request, _) = sent(
        "/",
        &[
            "-A",
            "agent",
            "-H",
            "User-Agent:",
            "-e",
            "r",
            "-H",
            "Referer:",
        ],
    );
    assert_eq!(request.header("user-agent"), None, "{request:?}");
    assert_eq!(request.header("referer"), None, "{request:?}");
    // curl's `;auto` is not done; a value no header can hold is refused.
    for bad in [["-e", "http://from.test/;auto"], ["-A", "two\nlines"]] {
        let output = get(&[&["http://127.0.0.1/"][..], &bad].concat());
        assert_eq!(output.status.code(), Some(2), "{bad:?}: {output:?}");
    }
}

/// curl sends `Accept: */*` unless a `--header` gives one or drops it
/// (`'Accept:'`); a server that negotiates the type of its answer reads
/// its absence otherwise than curl's request.
#[test]
fn accept_is_curls_unless_a_header_gives_or_drops_it() {
    let (request, status) = sent("/", &[]);
    assert_eq!(status, Some(0));
    assert_eq!(request.header_all("accept"), ["*/*"], "{request:?}");
    let (request, _) = sent("/", &["-H", "Accept: application/json"]);
    assert_eq!(request.header_all("accept"), ["application/json"]);
    let (request, _) = sent("/", &["-H", "Accept;"]);
    assert_eq!(request.header_all("accept"), [""], "{request:?}");
    let (request, _) = sent("/", &["-H", "Accept:"]);
    assert!(request.header_all("accept").is_empty(), "{request:?}");
}

#[test]
fn accept_encoding_dropped_or_replaced_as_curl_does() {
    // By default, the client's own.
    let (request, status) = sent("/", &[]);
    assert_eq!(status, Some(0));
    assert!(request.header("accept-encoding").is_some(), "{request:?}");
    // `Accept-Encoding:` sends none, as `--no-decompress` does.
    let (request, status) = sent("/", &["-H", "Accept-Encoding:"]);
    assert_eq!(status, Some(0));
    assert!(
        request.header_all("accept-encoding").is_empty(),
        "{request:?}"
    );
    // And, as curl without `--compressed`, decodes nothing.
    let raw = get(&[&server().url("/gz"), "-H", "Accept-Encoding:"]);
    assert!(stdout(&raw).contains("content-encoding: gzip"), "{raw:?}");
    // A value of the caller's is sent instead of the client's, once.
    let (request, _) = sent("/", &["-H", "Accept-Encoding: identity"]);
    assert_eq!(request.header_all("accept-encoding"), ["identity"]);
    // `--compressed` (curl's) after `--no-decompress` asks again.
    let (request, _) = sent("/", &["--no-decompress"]);
    assert!(
        request.header_all("accept-encoding").is_empty(),
        "{request:?}"
    );
    let (request, _) = sent("/", &["--no-decompress", "--compressed"]);
    assert!(request.header("accept-encoding").is_some(), "{request:?}");
}

#[test]
fn cookies_given_again_are_all_sent() {
    let (request, status) = sent("/", &["-b", "a=1", "-b", "b=2; c=3"]);
    assert_eq!(status, Some(0));
    let cookie = request.header("cookie").unwrap_or_default();
    for pair in ["a=1", "b=2", "c=3"] {
        assert!(cookie.contains(pair), "{pair} missing: {cookie:?}");
    }
}

#[test]
fn cookie_dropped_with_a_header_sends_none_of_the_cookies_given() {
    // curl: `-H 'Cookie:'` drops the `Cookie` that `-b NAME=VALUE` makes.
    let (request, status) = sent("/", &["-b", "a=1", "-H", "Cookie:"]);
    assert_eq!(status, Some(0));
    assert!(request.header_all("cookie").is_empty(), "{request:?}");
}

#[test]
fn an_upload_to_a_directory_url_goes_to_the_files_name_there() {
    let dir = support::real::TempDir::new("get-upload");
    let file = dir.path().join("my file.txt");
    std::fs::write(&file, "up").unwrap();
    let file = file.to_str().unwrap();
    // As curl: the file's name, percent-encoded, after the URL's `/`.
    let (request, status) = sent("/dir/?q=1", &["-T", file]);
    assert_eq!(status, Some(0));
    assert_eq!(request.target, "/dir/my%20file.txt?q=1");
    assert_eq!(request.body, b"up");
    // A URL that names a file keeps it.
    let (request, _) = sent("/dir/name", &["-T", file]);
    assert_eq!(request.target, "/dir/name");
}

/// A URL's path and query go percent-encoded in UTF-8 where a
/// request-target cannot hold them — a character that is not ASCII, a
/// space — as the library sends them, and reqwest: not as curl 7.88 does,
/// which encodes a path's UTF-8 but sends a query's raw, and refuses a
/// space. The fragment is not sent. To a directory URL so encoded, an
/// upload goes to the file's name there.
#[test]
fn a_path_and_query_go_percent_encoded_as_the_library_sends_them() {
    let (request, status) = sent("/\u{e4} b/?q=\u{e9} f#fr\u{e4}g", &[]);
    assert_eq!(status, Some(0));
    assert_eq!(request.target, "/%C3%A4%20b/?q=%C3%A9%20f");
    let dir = support::real::TempDir::new("get-encoded");
    let file = dir.path().join("n\u{e4}me");
    std::fs::write(&file, "up").unwrap();
    let (request, status) = sent("/d\u{e4}/?q", &["-T", file.to_str().unwrap()]);
    assert_eq!(status, Some(0));
    assert_eq!(request.target, "/d%C3%A4/n%C3%A4me?q");
}

/// A directory URL `http` refuses as written — a space in its path, a
/// host that is not ASCII — which the client takes (percent-encoded, the
/// host in its IDNA form), gets the file's name after its `/` all the
/// same: an upload goes to the file, not to the directory.
#[test]
fn an_upload_to_a_directory_url_http_refuses_as_written_goes_to_the_files_name_there() {
    let dir = support::real::TempDir::new("get-upload-space");
    let file = dir.path().join("n\u{e4}me");
    std::fs::write(&file, "up").unwrap();
    let (request, status) = sent("/a b/?q=x y#f g", &["-T", file.to_str().unwrap()]);
    assert_eq!(status, Some(0));
    assert_eq!(request.target, "/a%20b/n%C3%A4me?q=x%20y");
    assert_eq!(request.body, b"up");
    // A URL that names a file keeps it.
    let (request, _) = sent("/a b/c d?q", &["-T", file.to_str().unwrap()]);
    assert_eq!(request.target, "/a%20b/c%20d?q");
}

#[test]
fn a_flag_given_again_and_curls_values_are_taken_as_curl_takes_them() {
    // The same version twice is no conflict.
    let (request, status) = sent("/", &["--http1.1", "--http1.1"]);
    assert_eq!(status, Some(0), "{request:?}");
    // `--max-redirs -1`: no limit, as curl reads it.
    let server = server();
    let output = get(&[&server.url("/old"), "--max-redirs", "-1"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout(&output).ends_with("/new auth=- cookie=-"));
    // `-h` as a flag's value is that value, not a call for help.
    let (request, status) = sent("/", &["-d", "-h"]);
    assert_eq!(status, Some(0));
    assert_eq!(request.body, b"-h");
}

/// `--` ends the flags, as in curl: what follows is the URL, even if it
/// begins with `-`.
#[test]
fn a_double_dash_ends_the_flags_as_in_curl() {
    let server = TestServer::respond(|_| ok("seen"));
    let output = get(&["-s", "--", &server.url("/after")]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(server.requests()[0].target, "/after");
    // A flag's name after it is the URL, which the client refuses: a bad
    // argument, and not an option.
    let output = get(&["--", "-s"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(r#""-s""#), "{stderr}");
    assert!(!stderr.contains("unknown option"), "{stderr}");
    // The one URL given, nothing after it is read as a flag.
    let output = get(&["--", &server.url("/"), "-s"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(r#"unexpected argument "-s""#), "{stderr}");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_url_without_a_scheme_is_http_as_curl_takes_it() {
    let server = server();
    // `get 127.0.0.1:PORT/path`, `get localhost:PORT/path`: curl's
    // shorthand for `http://` — not a bad argument (`localhost:` would
    // otherwise read as a scheme of its own).
    let addr = server.url("/");
    let addr = addr
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let port = addr.rsplit(':').next().unwrap();
    for (url, host) in [
        (format!("{addr}/new"), addr.clone()),
        (format!("localhost:{port}/new"), format!("localhost:{port}")),
        // A `://` in the query is no scheme.
        (
            format!("localhost:{port}/new?next=http://a.test/"),
            format!("localhost:{port}"),
        ),
    ] {
        let output = get(&[&url, "--no-proxy"]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{url}: {stderr}");
        assert!(stdout(&output).starts_with("HTTP/1.1 200 OK"), "{url}");
        let request = server.requests().pop().unwrap();
        assert_eq!(request.target, url[url.find('/').unwrap()..], "{url}");
        assert_eq!(request.header("host"), Some(host.as_str()), "{url}");
    }
    // `-b`, whose cookies are keyed by the URL read before it is sent,
    // reads it as `http://` too: they go to its host.
    let output = get(&[&format!("{addr}/home"), "--no-proxy", "-b", "k=v"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(
        stdout(&output).ends_with("/home auth=- cookie=k=v"),
        "{output:?}"
    );
}

#[test]
fn resolve_applies_to_a_proxy_given_without_a_scheme() {
    // The proxy double answers itself, saying what it got.
    let proxy = TestServer::respond(|request| ok(&format!("proxy got {}", request.target)));
    let port = proxy.addr().port();
    let entry = format!("proxy.invalid:{port}:127.0.0.1");
    // `-x HOST:PORT` is an HTTP proxy (the client's reading and curl's):
    // `--resolve` for that HOST:PORT is where it is, with or without the
    // scheme written out.
    for proxy_arg in [
        format!("proxy.invalid:{port}"),
        format!("http://proxy.invalid:{port}"),
    ] {
        let output = get(&[
            "http://far.invalid/x",
            "-x",
            &proxy_arg,
            "--resolve",
            &entry,
        ]);
        assert_eq!(output.status.code(), Some(0), "{proxy_arg}: {output:?}");
        assert!(
            stdout(&output).ends_with("proxy got http://far.invalid/x"),
            "{proxy_arg}: {output:?}"
        );
    }
}

#[test]
fn header_values_are_printed_as_the_bytes_that_came() {
    // A Latin-1 `é` (obs-text): not UTF-8, and printed as it came, as curl
    // prints it, to standard output or (with `-o`) standard error.
    let server = TestServer::respond(|_| {
        b"HTTP/1.1 200 OK\r\nX-Name: caf\xe9\r\nContent-Length: 2\r\n\r\nok".to_vec()
    });
    let output = get(&[&server.url("/")]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let line = b"\nx-name: caf\xe9\n";
    assert!(
        output.stdout.windows(line.len()).any(|w| w == line),
        "{output:?}"
    );
    assert!(output.stdout.ends_with(b"\n\nok"), "{output:?}");
    let output = get(&[&server.url("/"), "-o", "-"]);
    assert!(
        output.stderr.windows(line.len()).any(|w| w == line),
        "{output:?}"
    );
    assert_eq!(output.stdout, b"ok");
}

#[test]
fn curls_short_forms_and_names_are_taken() {
    use support::tls::{certs, server_config_with, TlsBehaviour, TlsServer};
    // `-I`, `--head`: a HEAD request, whose head is printed.
    for flag in ["-I", "--head"] {
        let (request, status) = sent("/", &[flag]);
        assert_eq!(status, Some(0), "{flag}");
        assert_eq!(request.method, "HEAD", "{flag}");
    }
    // With a body to send, a bad argument (as curl has it), found before
    // anything is sent.
    let output = get(&["http://127.0.0.1/", "-I", "-d", "x"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    // `-L`, `--location`: redirects, followed as by default; `-i`,
    // `-s` and `--compressed` change nothing there either.
    let server = server();
    for flag in [
        "-L",
        "--location",
        "-i",
        "--include",
        "-s",
        "--silent",
        "--compressed",
    ] {
        let output = get(&[&server.url("/old"), flag]);
        assert_eq!(output.status.code(), Some(0), "{flag}: {output:?}");
        assert!(stdout(&output).ends_with("/new auth=- cookie=-"), "{flag}");
    }
    // `--cacert` (which trusts its file alone, as curl's:
    // `cacert_trusts_its_file_alone_and_ca_its_file_besides_the_bundled_roots`),
    // `-E` and `-k`: curl's names, the last two for `--cert` and
    // `--insecure`.
    let server = TlsServer::start_with(
        server_config_with(&certs().valid, rustls::ALL_VERSIONS, true),
        TlsBehaviour::respond(|_| ok("mutual")),
    );
    let pem = support::real::PemFiles::of(&certs().valid);
    let dir = support::real::TempDir::new("get-curl-names");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &certs().ca_pem).unwrap();
    let (cert, key) = (pem.cert(), pem.key());
    let (ca, cert, key) = (
        ca.to_str().unwrap(),
        cert.to_str().unwrap(),
        key.to_str().unwrap(),
    );
    let url = server.url("/");
    for args in [
        ["--cacert", ca, "-E", cert, "--key", key],
        ["-k", "-E", cert, "--key", key, "--no-proxy"],
    ] {
        let mut argv = vec![url.as_str()];
        argv.extend_from_slice(&args);
        let output = get(&argv);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {output:?}");
        assert!(stdout(&output).ends_with("mutual"), "{args:?}: {output:?}");
    }
}

/// An entry's HOST is matched as the URL's host is: in any case, with or
/// without a final dot, and an IP literal (an IPv6 one in brackets, as
/// curl 8.13 takes it) is replaced too — `127.0.0.2` and `2001:db8::1`
/// have no server, the override's address has.
#[test]
fn resolve_matches_a_host_however_the_url_spells_it_ip_literals_included() {
    let origin = server();
    let port = origin.addr().port();
    for (host, url_host) in [
        ("Named.Invalid.", "named.invalid"),
        ("named.invalid", "NAMED.invalid."),
        ("127.0.0.2", "127.0.0.2"),
        ("[2001:db8::1]", "[2001:DB8:0::1]"),
    ] {
        let entry = format!("{host}:{port}:127.0.0.1");
        let text = get_resolved(&format!("http://{url_host}:{port}/hi"), &entry);
        assert!(text.ends_with("/hi auth=- cookie=-"), "{entry}: {text}");
    }
    for bad in ["[::1:80:127.0.0.1", "[::1]80:127.0.0.1", "[]:80:127.0.0.1"] {
        let output = get(&["--resolve", bad, "http://127.0.0.1:1/"]);
        assert_eq!(output.status.code(), Some(2), "{bad}: {output:?}");
    }
}

/// A URL's host that is not ASCII goes as its IDNA ASCII form, as curl
/// sends it: the name looked up (so an entry matches it written either
/// way) and the `Host` header. (`.invalid` never resolves: no name
/// leaves the machine.)
#[test]
fn a_url_host_that_is_not_ascii_is_resolved_and_sent_in_its_ascii_form() {
    let origin = TestServer::respond(|request| ok(request.header("host").unwrap_or("-")));
    let port = origin.addr().port();
    for (host, url_host) in [
        ("xn--bcher-kva.invalid", "bücher.invalid"),
        ("Bücher.invalid", "BÜCHER.invalid"),
        ("bücher.invalid", "xn--bcher-kva.invalid"),
    ] {
        let entry = format!("{host}:{port}:127.0.0.1");
        let text = get_resolved(&format!("http://{url_host}:{port}/"), &entry);
        assert!(
            text.ends_with(&format!("xn--bcher-kva.invalid:{port}")),
            "{entry} for {url_host}: {text}"
        );
    }
}

#[test]
fn resolve_applies_to_every_host_of_the_transfer_redirects_included() {
    // Each server says which it is. The redirects go to host names that
    // resolve only through `--resolve` (`.invalid` never resolves).
    let second = TestServer::respond(|request| ok(&format!("second got {}", request.target)));
    let second_port = second.addr().port();
    let first = TestServer::respond(move |request| match request.target.as_str() {
        "/other-name" => {
            let location = format!("http://second.invalid:{second_port}/there");
            response(302, &[("Location", &location)], b"")
        }
        "/same-name" => {
            let location = format!("http://both.invalid:{second_port}/there");
            response(302, &[("Location", &location)], b"")
        }
        target => ok(&format!("first got {target}")),
    });
    let first_port = first.addr().port();

    // A redirect to a host named only in an entry: its address.
    let entry = format!("second.invalid:{second_port}:127.0.0.1");
    let output = get(&[&first.url("/other-name"), "--resolve", &entry, "--no-proxy"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout(&output).ends_with("second got /there"), "{output:?}");

    // One name at two ports, an entry for each: the redirect to the other
    // port reaches the other server — an entry is for its HOST:PORT, not
    // for every port of HOST.
    let output = get(&[
        &format!("http://both.invalid:{first_port}/same-name"),
        "--resolve",
        &format!("both.invalid:{first_port}:127.0.0.1"),
        "--resolve",
        &format!("both.invalid:{second_port}:127.0.0.1"),
        "--no-proxy",
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout(&output).ends_with("second got /there"), "{output:?}");
}

#[test]
fn the_status_line_has_the_reason_phrase_the_server_sent() {
    for (sent, printed) in [
        (
            &b"HTTP/1.1 200 Fine Thanks"[..],
            &b"HTTP/1.1 200 Fine Thanks\n"[..],
        ),
        (b"HTTP/1.1 200 OK", b"HTTP/1.1 200 OK\n"),
        // Empty: none printed, nor the canonical one in its place.
        (b"HTTP/1.1 200", b"HTTP/1.1 200\n"),
        (b"HTTP/1.1 404 ", b"HTTP/1.1 404\n"),
        // Obs-text (Latin-1), as it came.
        (b"HTTP/1.0 503 Ferm\xe9", b"HTTP/1.0 503 Ferm\xe9\n"),
    ] {
        let head = sent.to_vec();
        let server = TestServer::respond(move |_| {
            [
                &head[..],
                b"\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
            ]
            .concat()
        });
        let output = get(&[&server.url("/"), "--no-proxy"]);
        let shown = String::from_utf8_lossy(sent);
        assert_eq!(output.status.code(), Some(0), "{shown}: {output:?}");
        assert!(output.stdout.starts_with(printed), "{shown}: {output:?}");
    }
}

/// An entry is for its HOST:PORT (curl's rule), an IP address's too: two
/// entries for one address at two ports each hold at their own, neither
/// replacing the other. (They were refused: the client's overrides held
/// at every port of a host.)
#[test]
fn resolve_entries_for_one_ip_address_at_two_ports_each_hold_at_their_own() {
    let origin = server();
    let port = origin.addr().port();
    let other_port = if port == u16::MAX { port - 1 } else { port + 1 };
    for first in ["127.0.0.2", "127.2"] {
        // Nothing listens at 127.0.0.5: the other port's entry, taken
        // for this port, would fail the request.
        let output = get(&[
            &format!("http://127.0.0.2:{port}/hi"),
            "--resolve",
            &format!("{first}:{port}:127.0.0.1"),
            "--resolve",
            &format!("127.0.0.2:{other_port}:127.0.0.5"),
            "--no-proxy",
        ]);
        assert_eq!(output.status.code(), Some(0), "{first}: {output:?}");
        assert!(
            stdout(&output).ends_with("/hi auth=- cookie=-"),
            "{first}: {output:?}"
        );
    }
    assert_eq!(origin.requests().len(), 2);
}

/// "`HOST` matches as the URL's host does" — and the URL's
/// `127.2` is `127.0.0.2` (the client's origin, and its own
/// `ClientBuilder::resolve("127.2", ..)`, read it so). An entry naming
/// the address in that spelling, for a URL spelling it the same way, must
/// take effect (it went to the example's resolver table, which the client
/// never asks for an address).
#[test]
fn resolve_an_ip_literal_in_another_spelling_matches_the_same_url() {
    let origin = server();
    let port = origin.addr().port();
    let output = get(&[
        &format!("http://127.2:{port}/hi"),
        "--resolve",
        &format!("127.2:{port}:127.0.0.1"),
        "--no-proxy",
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(
        stdout(&output).ends_with("/hi auth=- cookie=-"),
        "{output:?}"
    );
}

/// An IPv6 `ADDR` with a zone id (`getaddrinfo`'s form: the interface's
/// name or index after a `%`) is used: the connection goes to it. (It was
/// refused as "not an IP address".) On `::1` any zone connects — Linux
/// reads a scope id for link-local addresses only — so what shows it is
/// read, not dropped, are the zones refused as bad arguments: one naming
/// no interface, one on an IPv4 address, and a URL's `%25` for `%`.
#[test]
fn resolve_takes_an_ipv6_address_with_a_zone_id_or_refuses_it() {
    let Ok(listener) = std::net::TcpListener::bind("[::1]:0") else {
        return; // No IPv6 loopback here.
    };
    let port = listener.local_addr().unwrap().port();
    let entries = [
        format!("zoned.invalid:{port}:[::1%lo]"),
        format!("zoned.invalid:{port}:::1%1"),
        // An IP address's entry: the client's own override, at port 0.
        format!("127.0.0.2:{port}:[::1%lo]"),
    ];
    let served = entries.len();
    let server = std::thread::spawn(move || {
        for index in 0..served {
            let mut stream = accept_in_time(&listener);
            let request = RequestReader::new(index).read_request(&mut stream).unwrap();
            stream.write_all(&ok(&request.target)).unwrap();
        }
    });
    for entry in &entries {
        let host = entry.split_once(':').unwrap().0;
        let url = format!("http://{host}:{port}/zoned");
        let output = get(&[&url, "--resolve", entry, "--no-proxy"]);
        assert_eq!(output.status.code(), Some(0), "{entry}: {output:?}");
        assert!(stdout(&output).ends_with("/zoned"), "{entry}: {output:?}");
    }
    server.join().unwrap();

    for (addr, says) in [
        (
            "[fe80::1%no-such-if0]",
            "no network interface \"no-such-if0\"",
        ),
        ("fe80::1%", "no network interface \"\""),
        ("127.0.0.1%lo", "a zone id is for an IPv6 address"),
        ("[fe80::1%25lo]", "here it is %lo"),
    ] {
        let entry = format!("zoned.invalid:{port}:{addr}");
        let output = get(&[
            &format!("http://zoned.invalid:{port}/"),
            "--resolve",
            &entry,
        ]);
        assert_eq!(output.status.code(), Some(2), "{entry}: {output:?}");
        let shown = String::from_utf8_lossy(&output.stderr);
        assert!(shown.contains(says), "{entry}: {shown}");
    }
}

/// `--connect-timeout SECS` (curl's: seconds, a fraction allowed) bounds
/// each connect attempt: to a listener whose accept queue is full (a
/// connect to it hangs, as to an address that drops SYNs) the request
/// fails with that timeout, not the client's default of 5 s nor the
/// request timeout. A value that is no number of seconds is a bad
/// argument.
#[test]
fn connect_timeout_in_seconds_bounds_a_connect_that_hangs() {
    let mut listener = UnacceptingListener::new();
    if !listener.backlog_filled(4096) {
        // See client_timeouts.rs, connect_timeout_against_a_full_backlog.
        eprintln!("backlog could not be filled; connect-timeout assertion skipped");
    } else {
        let url = format!("http://{}/", listener.addr());
        let output = get(&[&url, "--connect-timeout", "0.3", "--max-time", "60"]);
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("Connect timeout") && stderr.contains("after 300 ms"),
            "{stderr}"
        );
    }
    for (value, says) in [
        (
            Some("soon"),
            "--connect-timeout: not a number of seconds: \"soon\"",
        ),
        (
            Some("-1"),
            "--connect-timeout: not a number of seconds: \"-1\"",
        ),
        (None, "--connect-timeout needs a value in seconds"),
    ] {
        let mut bad = vec!["http://127.0.0.1/", "--connect-timeout"];
        bad.extend(value);
        let output = get(&bad);
        assert_eq!(output.status.code(), Some(2), "{bad:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(says) && stderr.contains("usage: get URL"),
            "{bad:?}: {stderr}"
        );
    }
}

/// `--connect-timeout SECS` bounds the TLS handshake too, as curl's
/// bounds the whole opening: a server that accepts and never answers the
/// ClientHello fails the request with a handshake timeout of SECS, not of
/// the client's default of 10 s (nor the request timeout).
#[test]
fn connect_timeout_in_seconds_bounds_a_tls_handshake_that_stalls() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let url = format!("https://{}/", server.addr());
    let output = get(&[&url, "--connect-timeout", "0.3", "--max-time", "60", "-k"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("TLS handshake timeout") && stderr.contains("after 300 ms"),
        "{stderr}"
    );
}

/// curl's `-x ""`: no proxy for the transfer, not even the environment's
/// (curl's manual: "you can set proxy to \"\" to override it"), where
/// an empty proxy URL is no error. A blank one, trimmed as any `-x` is
/// ([`a_proxy_given_with_blanks_around_it_is_trimmed`]), is empty too.
#[test]
fn an_empty_proxy_overrides_the_environments_as_curl_does() {
    let origin = server();
    let proxy = TestServer::respond(|request| ok(&format!("proxy got {}", request.target)));
    for spelled in ["", " \t "] {
        let output = Command::new(example_binary("get"))
            .args([origin.url("/direct").as_str(), "-x", spelled])
            .env("http_proxy", format!("http://{}", proxy.addr()))
            .env_remove("no_proxy")
            .env_remove("NO_PROXY")
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{spelled:?}: {output:?}");
        assert!(
            stdout(&output).ends_with("/direct auth=- cookie=-"),
            "{spelled:?}: {output:?}"
        );
    }
}

/// `--noproxy LIST` (curl's): the hosts it lists go straight to their
/// origin, past the proxy — `--proxy`'s, or the environment's, whose
/// `no_proxy` the list replaces (`""`: none bypasses); any other goes
/// through the proxy. Without a LIST it is a bad argument.
#[test]
fn noproxy_sends_the_hosts_it_lists_straight_past_the_proxy() {
    let origin = server();
    // A forwarding proxy double: it answers itself, saying what it got.
    let proxy = TestServer::respond(|request| ok(&format!("proxy got {}", request.target)));
    let proxy_url = format!("http://{}", proxy.addr());
    let url = origin.url("/direct");
    let straight = "/direct auth=- cookie=-";
    let proxied = format!("proxy got {url}");
    let with_env = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = Command::new(example_binary("get"));
        command.args(args);
        for name in ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"] {
            command.env_remove(name);
        }
        for name in ["no_proxy", "NO_PROXY"] {
            command.env_remove(name);
        }
        command.envs(env.iter().copied());
        let output = command.output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?} {env:?}: {output:?}"
        );
        stdout(&output)
    };
    for (list, expected) in [
        ("127.0.0.1", straight),
        ("*", straight),
        ("other.invalid, 127.0.0.0/8", straight),
        ("other.invalid", proxied.as_str()),
        ("", proxied.as_str()),
        (" ", proxied.as_str()),
    ] {
        let text = with_env(&[&url, "-x", &proxy_url, "--noproxy", list], &[]);
        assert!(text.ends_with(expected), "-x, --noproxy {list:?}: {text}");
        // The environment's proxy, its own list replaced.
        for no_proxy in ["NO_PROXY", "no_proxy"] {
            let env = [("http_proxy", proxy_url.as_str()), (no_proxy, "127.0.0.1")];
            let text = with_env(&[&url, "--noproxy", list], &env);
            assert!(
                text.ends_with(expected),
                "{no_proxy}, --noproxy {list:?}: {text}"
            );
        }
    }
    let output = get(&["http://127.0.0.1/", "--noproxy"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--noproxy needs a LIST"), "{stderr}");
}

/// curl's rule for a proxy given with `-x`: the environment's `no_proxy`
/// (else `NO_PROXY`) still names the hosts that bypass it (curl's manual:
/// hosts "that do not require a proxy to get reached, even if one is
/// specified"), unless `--noproxy` replaces the list — and, `get`'s own
/// `--no-proxy` ignoring the environment, not then either.
#[test]
fn the_environments_no_proxy_bypasses_a_proxy_given_with_x_too() {
    let origin = server();
    let proxy = TestServer::respond(|request| ok(&format!("proxy got {}", request.target)));
    let proxy_url = format!("http://{}", proxy.addr());
    let url = origin.url("/direct");
    let straight = "/direct auth=- cookie=-";
    let proxied = format!("proxy got {url}");
    let run = |flags: &[&str], env: &[(&str, &str)]| {
        let mut command = Command::new(example_binary("get"));
        command
            .args([url.as_str(), "-x", proxy_url.as_str()])
            .args(flags);
        for name in ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"] {
            command.env_remove(name);
        }
        for name in ["no_proxy", "NO_PROXY"] {
            command.env_remove(name);
        }
        let output = command.envs(env.iter().copied()).output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(0),
            "{flags:?} {env:?}: {output:?}"
        );
        stdout(&output)
    };
    for (flags, env, expected) in [
        (&[][..], &[("no_proxy", "127.0.0.1")][..], straight),
        (&[], &[("NO_PROXY", "127.0.0.0/8")], straight),
        (&[], &[("no_proxy", "other.invalid")], proxied.as_str()),
        // The lowercase name first, as curl reads them.
        (
            &[],
            &[("no_proxy", "other.invalid"), ("NO_PROXY", "*")],
            proxied.as_str(),
        ),
        // An empty one is none (curl's `curl_getenv` reads it so): the
        // uppercase name is read.
        (
            &[],
            &[("no_proxy", ""), ("NO_PROXY", "127.0.0.1")],
            straight,
        ),
        // A blank one too, as the client reads the environment's for the
        // proxies it finds there itself.
        (
            &[],
            &[("no_proxy", " \t"), ("NO_PROXY", "127.0.0.1")],
            straight,
        ),
        (
            &["--noproxy", ""],
            &[("no_proxy", "127.0.0.1")],
            proxied.as_str(),
        ),
        (
            &["--noproxy", "*"],
            &[("no_proxy", "other.invalid")],
            straight,
        ),
        (
            &["--no-proxy"],
            &[("no_proxy", "127.0.0.1")],
            proxied.as_str(),
        ),
    ] {
        let text = run(flags, env);
        assert!(text.ends_with(expected), "{flags:?} {env:?}: {text}");
    }
}

/// The lines of `text` that start with `prefix`.
fn lines_with<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|line| line.starts_with(prefix))
        .collect()
}

/// `request`'s head as `-v` shows it, in curl's shape: its request line and
/// a line per field as the server got them, each after `> `, then a blank
/// `> ` line — with the fields `but` names left out.
fn request_lines(request: &RecordedRequest, but: &[&str]) -> Vec<String> {
    let lines = request.head_lines(but).into_iter();
    lines
        .chain([String::new()])
        .map(|line| format!("> {line}"))
        .collect()
}

/// `-v`, `--verbose` (curl's): on standard error, `*` lines for what the
/// client tells, `>` lines for the request's head as it was sent — its
/// line and every field, the client's own among them (`Host`,
/// `User-Agent`, the body's length), as the server got them — then `<`
/// lines for the response's head, each head ended by a blank line, in
/// that order; standard output as without it.
#[test]
fn verbose_shows_the_request_sent_and_the_response_head_on_standard_error() {
    let server = server();
    let port = server.addr().port();
    let quiet = get(&[&server.url("/who"), "-H", "X-Given: yes", "-d", "a=1"]);
    let quiet_out = stdout(&quiet);
    for flag in ["-v", "--verbose"] {
        let output = get(&[&server.url("/who"), flag, "-H", "X-Given: yes", "-d", "a=1"]);
        assert_eq!(output.status.code(), Some(0), "{flag}: {output:?}");
        assert_eq!(output.stdout, quiet.stdout, "{flag}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let request = server.requests().pop().unwrap();
        let expected = request_lines(&request, &[]);
        assert_eq!(lines_with(&stderr, "> "), expected, "{flag}: {stderr}");
        for line in [
            "> POST /who HTTP/1.1".to_string(),
            format!("> Host: 127.0.0.1:{port}"),
            "> content-type: application/x-www-form-urlencoded".into(),
            "> x-given: yes".into(),
            "> Content-Length: 3".into(),
        ] {
            assert!(expected.contains(&line), "{flag}: {line} in {stderr}");
        }
        assert!(
            stderr.contains("\n> user-agent: tickless/"),
            "{flag}: {stderr}"
        );
        // The head printed on standard output, line for line, and the
        // blank line that ends it.
        let (printed, _body) = quiet_out.split_once("\n\n").unwrap();
        let mut expected: Vec<String> = printed.lines().map(|line| format!("< {line}")).collect();
        expected.push("< ".into());
        assert_eq!(lines_with(&stderr, "< "), expected, "{flag}: {stderr}");
        assert_eq!(expected[0], "< HTTP/1.1 200 OK");
        for info in [
            format!("*   Trying 127.0.0.1:{port}..."),
            format!("* Connected to 127.0.0.1 port {port} (#"),
            "* using HTTP/1.1".into(),
        ] {
            assert!(stderr.contains(&info), "{flag}: {info} in {stderr}");
        }
        let at = |line: &str| stderr.find(line).unwrap();
        assert!(at("* Connected") < at("> POST") && at("> POST") < at("< HTTP/1.1"));
        // Each head whole before the next: its blank line ends it.
        assert!(at("\n> \n") < at("< HTTP/1.1"), "{flag}: {stderr}");
        assert!(stderr.ends_with("\n< \n"), "{flag}: {stderr}");
    }

    // A redirect: each request's head and each response's, in the order
    // they went and came, the redirect's `*` line between.
    let output = get(&[&server.url("/old"), "-v", "-H", "X-Given: yes"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let requests = server.requests();
    let hops = &requests[requests.len() - 2..];
    assert_eq!(hops[0].target, "/old");
    assert_eq!(hops[1].target, "/new");
    let expected: Vec<String> = hops
        .iter()
        .flat_map(|hop| request_lines(hop, &[]))
        .collect();
    assert_eq!(lines_with(&stderr, "> "), expected, "{stderr}");
    assert_eq!(
        lines_with(&stderr, "< HTTP/"),
        ["< HTTP/1.1 302 Found", "< HTTP/1.1 200 OK"],
        "{stderr}"
    );
    let redirect =
        format!("* 302: issue another request to this URL: 'http://127.0.0.1:{port}/new'");
    let at = |line: &str| stderr.find(line).unwrap();
    assert!(
        at("> GET /old") < at("< HTTP/1.1 302")
            && at("< HTTP/1.1 302") < at(&redirect)
            && at(&redirect) < at("> GET /new")
            && at("> GET /new") < at("< HTTP/1.1 200"),
        "{stderr}"
    );

    // With -o the head goes to standard error once, as `<` lines.
    let dir = support::real::TempDir::new("get-verbose");
    let file = dir.path().join("body");
    let output = get(&[&server.url("/who"), "-v", "-o", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.matches("HTTP/1.1 200 OK").count(), 1, "{stderr}");
    assert!(output.stdout.is_empty(), "{output:?}");
}

/// `-v` shows each interim head as curl does, `<` lines ended by a blank
/// one, after the request's head and before the final head: the
/// `100 Continue` an upload that said `Expect: 100-continue` waits for,
/// and a `103 Early Hints` with its field.
#[test]
fn verbose_shows_an_interim_100_continue_and_103_before_the_final_head() {
    let server = TestServer::start(Behaviour::continue_and_early_hints(|body| {
        ok(&format!("got {}", String::from_utf8_lossy(body)))
    }));
    let dir = support::real::TempDir::new("get-continue");
    let file = dir.path().join("up");
    std::fs::write(&file, "payload").unwrap();
    let file = format!("@{}", file.display());
    let url = server.url("/up");
    let output = get(&[&url, "-v", "-d", &file, "-H", "Expect: 100-continue"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout(&output).ends_with("got payload"), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("\n> expect: 100-continue\n"), "{stderr}");
    let answers = lines_with(&stderr, "< ");
    assert_eq!(
        answers[..5],
        [
            "< HTTP/1.1 100 Continue",
            "< ",
            "< HTTP/1.1 103 Early Hints",
            "< link: </s.css>",
            "< ",
        ],
        "{stderr}"
    );
    assert_eq!(answers[5], "< HTTP/1.1 200 OK", "{stderr}");
    assert!(stderr.ends_with("\n< \n"), "{stderr}");
    let at = |line: &str| stderr.find(line).unwrap();
    assert!(at("\n> \n") < at("< HTTP/1.1 100"), "{stderr}");
}

/// `-i`, `--include` (curl's) prints each interim head the answer had — a
/// `100 Continue` and a `103 Early Hints` with its field — as curl does,
/// its status line, its fields and a blank line, before the final head and
/// the body; with `--output`, on standard error with the final head. Not
/// those of a redirect followed: the heads printed are the last answer's.
/// Without it, the final head alone.
#[test]
fn include_prints_each_interim_head_before_the_final_one() {
    const INTERIM: &str = "HTTP/1.1 100 Continue\n\nHTTP/1.1 103 Early Hints\nlink: </s.css>\n\n";
    let server = TestServer::start(Behaviour::continue_and_early_hints(|_| ok("final")));
    let url = server.url("/");
    for flag in ["-i", "--include"] {
        let output = get(&[&url, flag]);
        assert_eq!(output.status.code(), Some(0), "{flag}: {output:?}");
        let printed = stdout(&output);
        assert!(
            printed.starts_with(&format!("{INTERIM}HTTP/1.1 200 OK\n")),
            "{flag}: {printed}"
        );
        assert!(printed.ends_with("\n\nfinal"), "{flag}: {printed}");
    }
    // With `--output`, the heads go where the body goes, as curl writes
    // them (`include_with_output_writes_the_heads_into_the_file`).
    let dir = support::real::TempDir::new("get-include");
    let file = dir.path().join("body");
    let output = get(&[&url, "-i", "-o", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let written = String::from_utf8(std::fs::read(&file).unwrap()).unwrap();
    assert!(
        written.starts_with(&format!("{INTERIM}HTTP/1.1 200 OK\n")),
        "{written}"
    );
    assert!(written.ends_with("\n\nfinal"), "{written}");
    // A redirect hop's heads come first, each interim one and its own,
    // as `curl -iL` prints them.
    let target = TestServer::respond(|_| ok("moved here"));
    let location = target.url("/");
    let redirecting = TestServer::start(Behaviour::continue_and_early_hints({
        let location = location.clone();
        move |_| response(302, &[("Location", &location)], b"")
    }));
    let printed = stdout(&get(&[&redirecting.url("/"), "-i"]));
    let hop = format!("{INTERIM}HTTP/1.1 302 Found\nlocation: {location}\n");
    assert!(printed.starts_with(&hop), "{printed}");
    let last = printed
        .find("HTTP/1.1 200 OK\n")
        .expect("the last answer's head");
    assert!(last > hop.len(), "{printed}");
    assert_eq!(printed.matches("Early Hints").count(), 1, "{printed}");
    assert!(printed.ends_with("\n\nmoved here"), "{printed}");
    let printed = stdout(&get(&[&url]));
    assert!(printed.starts_with("HTTP/1.1 200 OK\n"), "{printed}");
    assert!(!printed.contains("Early Hints"), "{printed}");
}

/// `-i` (and `-I`) with `-o FILE` write the heads into the file, before
/// the body, as curl writes them — each redirect hop's too — and nothing
/// of them to standard error; with `-o -`, to standard output. With `-f`,
/// an error status's head is written there and its body is not, as curl
/// 7.88 does. Without `-i`, the head still goes to standard error, the
/// file holding the body alone.
#[test]
fn include_with_output_writes_the_heads_into_the_file() {
    let server = TestServer::respond(|request| match request.target.as_str() {
        "/moved" => response(302, &[("Location", "/page")], b""),
        "/missing" => response(404, &[], b"the error page"),
        _ => ok("the page"),
    });
    let dir = support::real::TempDir::new("get-include-output");
    let file = dir.path().join("out");
    let path = file.to_str().unwrap();
    let hop = "HTTP/1.1 302 Found\nlocation: /page\ncontent-length: 0\n\n";
    let cases: [(&str, &[&str], Option<i32>, &str); 5] = [
        ("/moved", &["-i", "-o", path], Some(0), "\n\nthe page"),
        ("/moved", &["-iLso", path], Some(0), "\n\nthe page"),
        (
            "/moved",
            &["--include", "--output", path],
            Some(0),
            "\n\nthe page",
        ),
        (
            "/moved",
            &["-I", "-o", path],
            Some(0),
            "content-length: 8\n\n",
        ),
        (
            "/missing",
            &["-f", "-i", "-o", path],
            Some(22),
            "content-length: 14\n\n",
        ),
    ];
    for (target, args, status, end) in cases {
        let _ = std::fs::remove_file(&file);
        let output = get(&[&[&server.url(target)[..]], args].concat());
        assert_eq!(output.status.code(), status, "{args:?}: {output:?}");
        let written = String::from_utf8(std::fs::read(&file).unwrap()).unwrap();
        let first = match target {
            "/moved" => hop,
            _ => "HTTP/1.1 404 Not Found\n",
        };
        assert!(written.starts_with(first), "{args:?}: {written}");
        assert!(written.ends_with(end), "{args:?}: {written:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("HTTP/1.1"), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}: {output:?}");
    }
    let output = get(&[&server.url("/moved"), "-i", "-o", "-"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let text = stdout(&output);
    assert!(text.starts_with(hop), "{text}");
    assert!(text.ends_with("\n\nthe page"), "{text}");
    assert!(output.stderr.is_empty(), "{output:?}");
    // Without `-i`: the body alone in the file, the head on standard error.
    let output = get(&[&server.url("/"), "-o", path]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(std::fs::read(&file).unwrap(), b"the page");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("HTTP/1.1 200 OK\n"), "{stderr}");
}

/// `-i` with `--hedge-after` prints the heads of the attempt whose answer
/// it gives, as curl prints those of the transfer it returns: the first
/// attempt tells an interim head (`100 Continue`, marked `lost`) and then
/// never answers; the hedged copy answers with a `103` (marked `answer`)
/// and a `303` whose hop is printed before the last answer's head. The
/// loser's head is nowhere. Ordered, not timed: the copy is answered only
/// once the first attempt's body has come, which the client sends only
/// after it was told the `100 Continue`, so the loser's head is always
/// told before the winner's.
#[test]
fn include_with_hedging_prints_only_the_answering_attempts_heads() {
    use std::io::Read;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Condvar, Mutex};
    use std::time::Duration;
    // Whether the first attempt's body has been read.
    let body_read = Arc::new((Mutex::new(false), Condvar::new()));
    let hops = Arc::new(AtomicUsize::new(0));
    let (read, arrived) = (body_read.clone(), hops.clone());
    let server = TestServer::start(Behaviour::custom(move |mut stream, _| {
        let Some(head) = read_head(&mut stream) else {
            return;
        };
        if !head.starts_with("PUT /hop ") {
            let _ = stream.write_all(&response(200, &[("Connection", "close")], b"landed"));
            return drain(&mut stream);
        }
        let (flag, changed) = &*read;
        if arrived.fetch_add(1, Ordering::SeqCst) == 0 {
            // The first attempt: an interim head, its body read, then silence.
            let _ = stream.write_all(b"HTTP/1.1 100 Continue\r\nX-Attempt: lost\r\n\r\n");
            let mut body = vec![0; content_length(&head)];
            if stream.read_exact(&mut body).is_ok() {
                *flag.lock().unwrap() = true;
                changed.notify_all();
            }
            return drain(&mut stream);
        }
        // The copy: answered once the first attempt's body has come (else
        // not at all: the assertions below then fail).
        let (flag, _) = changed
            .wait_timeout_while(flag.lock().unwrap(), Duration::from_secs(60), |read| !*read)
            .unwrap();
        if *flag {
            let _ = stream.write_all(
                b"HTTP/1.1 103 Early Hints\r\nX-Attempt: answer\r\n\r\n\
                  HTTP/1.1 303 See Other\r\nLocation: /landed\r\n\
                  Content-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
        drop(flag);
        drain(&mut stream);
    }));
    let output = get(&[
        &server.url("/hop"),
        "-i",
        "-X",
        "PUT",
        "-d",
        "payload",
        "-H",
        "Expect: 100-continue",
        "--hedge-after",
        "100",
        "--request-timeout",
        "60000",
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(hops.load(Ordering::SeqCst), 2, "one copy sent");
    assert!(
        *body_read.0.lock().unwrap(),
        "the first attempt sent its body"
    );
    let printed = stdout(&output);
    assert!(
        printed.starts_with(
            "HTTP/1.1 103 Early Hints\nx-attempt: answer\n\n\
             HTTP/1.1 303 See Other\nlocation: /landed\n"
        ),
        "{printed}"
    );
    assert!(!printed.contains("lost"), "{printed}");
    assert!(!printed.contains("100 Continue"), "{printed}");
    let last = printed
        .find("HTTP/1.1 200 OK\n")
        .expect("the answer's head");
    assert!(last > printed.find("303").unwrap(), "{printed}");
    assert!(printed.ends_with("\n\nlanded"), "{printed}");
}

/// `-i` prints the interim heads of the send that answered, not those of
/// a send the client gave up and made again by itself under the same
/// attempt: a redirect leaves the connection pooled, the hop goes on it,
/// and the server answers a `103` (marked `first`) and then `408 Request
/// Timeout`, closing — the client sends the hop again on a new connection
/// (no retry: the same attempt), which answers a `103` (marked `again`)
/// and the final head. Only the second `103` is printed.
#[test]
fn include_prints_no_interim_head_of_a_send_made_again_after_a_408() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    // Whether the hop came on the pooled connection (the 302's).
    let hop_on_pooled = Arc::new(AtomicBool::new(false));
    let pooled = hop_on_pooled.clone();
    let server = TestServer::start(Behaviour::custom(move |mut stream, index| {
        let Some(head) = read_head(&mut stream) else {
            return;
        };
        if index == 0 {
            let _ = stream.write_all(&response(302, &[("Location", "/hop")], b""));
            let Some(head) = read_head(&mut stream) else {
                return;
            };
            if head.starts_with("GET /hop ") {
                pooled.store(true, Ordering::SeqCst);
                let _ = stream.write_all(
                    b"HTTP/1.1 103 Early Hints\r\nX-Send: first\r\n\r\n\
                      HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\
                      Connection: close\r\n\r\n",
                );
                let _ = stream.shutdown(std::net::Shutdown::Write);
            }
        } else if head.starts_with("GET /hop ") {
            let _ = stream.write_all(b"HTTP/1.1 103 Early Hints\r\nX-Send: again\r\n\r\n");
            let _ = stream.write_all(&response(200, &[("Connection", "close")], b"final"));
        }
        drain(&mut stream);
    }));
    let output = get(&[&server.url("/start"), "-i"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(
        hop_on_pooled.load(Ordering::SeqCst),
        "the hop went first on the pooled connection"
    );
    assert_eq!(server.connections_accepted(), 2);
    let printed = stdout(&output);
    assert!(printed.starts_with("HTTP/1.1 302 Found\n"), "{printed}");
    assert!(!printed.contains("first"), "{printed}");
    assert!(!printed.contains("408"), "{printed}");
    assert_eq!(printed.matches("Early Hints").count(), 1, "{printed}");
    let again = printed
        .find("HTTP/1.1 103 Early Hints\nx-send: again\n\n")
        .expect("the answer's interim head");
    let last = printed
        .find("HTTP/1.1 200 OK\n")
        .expect("the answer's head");
    assert!(printed.find("location: /hop").unwrap() < again, "{printed}");
    assert!(again < last, "{printed}");
    assert!(printed.ends_with("\n\nfinal"), "{printed}");
}

/// Over HTTP/2 as over HTTP/1.1 (see the test above), `-i` prints the
/// interim heads of the send that answered only: the server answers the
/// first stream a `103` (marked `first`) and then refuses it
/// (`REFUSED_STREAM`) — the client sends the request again by itself, on
/// the same connection and under the same attempt, its head told again
/// (`-v` shows it twice) — and answers the second stream a `103` (marked
/// `again`) and the final head.
#[test]
fn include_prints_no_interim_head_of_an_http2_stream_refused_after_a_103() {
    use support::h2_server::*;
    let server = RawH2Server::start(|mut conn| {
        let Some(&first) = conn.read_requests(1).first() else {
            return;
        };
        conn.send(&marked_early_hints(first, "first"));
        conn.send(&rst_stream(first, 0x7));
        let Some(&again) = conn.read_requests(1).first() else {
            return;
        };
        let mut out = marked_early_hints(again, "again");
        out.extend(frame(HEADERS, END_HEADERS, again, &[0x88]));
        out.extend(frame(DATA, END_STREAM, again, b"final"));
        conn.send(&out);
        conn.drain(std::time::Duration::from_secs(5));
    });
    let output = get(&[&server.url("/"), "--http2-prior-knowledge", "-i", "-v"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        server.connections.load(std::sync::atomic::Ordering::SeqCst),
        1
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.matches("> GET / HTTP/2\n").count(), 2, "{stderr}");
    let printed = stdout(&output);
    assert!(!printed.contains("first"), "{printed}");
    assert_eq!(printed.matches("HTTP/2 103").count(), 1, "{printed}");
    assert!(
        printed.starts_with("HTTP/2 103\nx-send: again\n\nHTTP/2 200\n"),
        "{printed}"
    );
    assert!(printed.ends_with("\n\nfinal"), "{printed}");
}

/// Through an HTTP proxy that forwards the request, `-v` shows the head
/// the proxy got — the whole URL as its target — but the proxy's
/// credentials: neither its `Proxy-Authorization` nor its URL's password
/// appears, nor the origin URL's userinfo (which goes as `Authorization`,
/// shown, as curl shows it).
#[test]
fn verbose_never_shows_a_proxys_credentials() {
    // A forwarding proxy double: it answers itself.
    let proxy = TestServer::respond(|_| ok("from the proxy"));
    let proxy_url = format!("http://bob:s3cret@{}", proxy.addr());
    let output = get(&["http://alice:pw@origin.test/x", "-v", "--proxy", &proxy_url]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let request = proxy.requests().pop().unwrap();
    // The credentials went, to the proxy.
    let credentials = support::real::basic_auth("bob", "s3cret");
    assert_eq!(
        request.header("proxy-authorization"),
        Some(credentials.as_str())
    );
    assert_eq!(request.target, "http://origin.test/x");
    assert_eq!(
        lines_with(&stderr, "> "),
        request_lines(&request, &["proxy-authorization"]),
        "{stderr}"
    );
    let origin_auth = support::real::basic_auth("alice", "pw");
    assert!(
        stderr.contains(&format!("\n> authorization: {origin_auth}\n")),
        "{stderr}"
    );
    let secret = credentials.trim_start_matches("Basic ");
    for never in ["s3cret", secret, "alice:pw", "bob:", "@"] {
        assert!(!stderr.contains(never), "{never} in {stderr}");
    }
    assert!(
        !stderr.to_ascii_lowercase().contains("proxy-authorization"),
        "{stderr}"
    );
    assert!(stdout(&output).ends_with("from the proxy"), "{output:?}");
}

/// `-U`, `--proxy-user`: the proxy's credentials, for one of `-x` or of
/// the environment whose URL has none, percent-decoded — as curl 7.88
/// sends them (its `-U` loses to a proxy URL's own `user:pass@`).
#[test]
fn proxy_user_gives_the_proxy_credentials_as_curl_does() {
    // A forwarding proxy double: it answers itself.
    let proxy = TestServer::respond(|_| ok("from the proxy"));
    let (bare, with_its_own) = (
        format!("http://{}", proxy.addr()),
        format!("http://u:p@{}", proxy.addr()),
    );
    let cases: [(&[&str], &str, &str); 5] = [
        (&["-x", &bare, "-U", "a%20b:c%3Ad@e"], "a b", "c:d@e"),
        (&["--proxy-user", "a:b", "--proxy", &bare], "a", "b"),
        (&["-x", &bare, "-sUuser"], "user", ""),
        (&["-x", &with_its_own, "-U", "a:b"], "u", "p"),
        (&["-x", &bare, "-U", "a%zz:b%"], "a%zz", "b%"),
    ];
    for (args, user, password) in cases {
        let output = get(&[&["http://origin.test/x"], args].concat());
        assert_eq!(output.status.code(), Some(0), "{args:?}: {output:?}");
        let request = proxy.requests().pop().unwrap();
        assert_eq!(
            request.header("proxy-authorization"),
            Some(support::real::basic_auth(user, password).as_str()),
            "{args:?}"
        );
    }
    // A proxy of the environment takes them too, unless it has its own.
    for (proxy_url, user, password) in [(&bare, "a", "b"), (&with_its_own, "u", "p")] {
        let output = Command::new(example_binary("get"))
            .args(["http://origin.test/x", "-U", "a:b"])
            .env("http_proxy", proxy_url)
            .env_remove("HTTP_PROXY")
            .env_remove("all_proxy")
            .env_remove("ALL_PROXY")
            .env_remove("no_proxy")
            .env_remove("NO_PROXY")
            .env_remove("REQUEST_METHOD")
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{proxy_url}: {output:?}");
        let request = proxy.requests().pop().unwrap();
        assert_eq!(
            request.header("proxy-authorization"),
            Some(support::real::basic_auth(user, password).as_str()),
            "{proxy_url}"
        );
    }
}

/// Over HTTP/2 the request line and the status line say so, as curl's;
/// the `:authority` is shown as `Host`, then the fields the server got.
#[test]
fn verbose_says_http2_when_the_connection_speaks_it() {
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = got.clone();
    let server = support::h2_server::H2Server::start(move |stream| {
        let fields = stream
            .request
            .headers()
            .iter()
            .map(|(name, value)| format!("> {name}: {}", value.to_str().unwrap()));
        seen.lock().unwrap().extend(fields);
        support::h2_server::answer(stream, 200, b"over h2\n")
    });
    let output = get(&[&server.url("/two"), "--http2-prior-knowledge", "-v"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("* using HTTP/2\n"), "{stderr}");
    let port = server.addr().port();
    let mut expected = vec![
        "> GET /two HTTP/2".to_string(),
        format!("> Host: 127.0.0.1:{port}"),
    ];
    expected.extend(got.lock().unwrap().iter().cloned());
    expected.push("> ".into());
    assert_eq!(lines_with(&stderr, "> "), expected, "{stderr}");
    assert!(stderr.contains("\n> user-agent: tickless/"), "{stderr}");
    assert_eq!(lines_with(&stderr, "< HTTP/"), ["< HTTP/2 200"], "{stderr}");
    assert!(stderr.ends_with("\n< \n"), "{stderr}");
}

/// As curl, short flags go together in one argument: a letter that takes
/// a value takes the rest of the argument (`-XPUT`, `-dbody`), else the
/// next argument (`-sLd body`); `-S` is accepted (`-sS`). A flag's value
/// is taken as it is, never read as flags (`-d -sS` posts `-sS`).
#[test]
fn short_flags_go_together_as_in_curl() {
    let server = server();
    let echo = server.url("/echo");
    let bundled = get(&["-sSXPUT", "-dgathered", &echo]);
    assert_eq!(bundled.status.code(), Some(0), "{bundled:?}");
    assert!(
        stdout(&bundled).ends_with("PUT gathered length=8 chunked=false"),
        "{}",
        stdout(&bundled)
    );
    let value_next = get(&["-sLd", "next", &echo]);
    assert_eq!(value_next.status.code(), Some(0), "{value_next:?}");
    assert!(
        stdout(&value_next).ends_with("POST next length=4 chunked=false"),
        "{}",
        stdout(&value_next)
    );
    let flags_as_a_value = get(&["-d", "-sS", &echo]);
    assert_eq!(
        flags_as_a_value.status.code(),
        Some(0),
        "{flags_as_a_value:?}"
    );
    assert!(
        stdout(&flags_as_a_value).ends_with("POST -sS length=3 chunked=false"),
        "{}",
        stdout(&flags_as_a_value)
    );
    // Each short flag that takes a value takes the rest of its bundle.
    let (request, status) = sent(
        "/",
        &[
            "-sHX-Bundled:1",
            "-sbc=2",
            "-suuser:pw",
            "-sm30",
            "-sXPATCH",
        ],
    );
    assert_eq!(status, Some(0), "{request:?}");
    assert_eq!(request.method, "PATCH");
    assert_eq!(request.header("x-bundled"), Some("1"), "{request:?}");
    assert_eq!(request.header("cookie"), Some("c=2"), "{request:?}");
    assert_eq!(
        request.header("authorization"),
        Some("Basic dXNlcjpwdw=="),
        "{request:?}"
    );
    // A redirect followed under a bundle with `-L` in it.
    let followed = get(&["-sSL", &server.url("/old")]);
    assert_eq!(followed.status.code(), Some(0), "{followed:?}");
    assert!(stdout(&followed).contains("/new"), "{}", stdout(&followed));
    // An unknown letter in a bundle is an unknown option, as alone.
    let unknown = get(&["-sq", &echo]);
    assert_eq!(unknown.status.code(), Some(2), "{unknown:?}");
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("unknown option -q"),
        "{unknown:?}"
    );
    // A `-` in a bundle is no option either, as curl 7.88 says ("option
    // -s-: is unknown", exit 2): not a `--` that ends the options, nor the
    // start of a long one (`-s-verbose` is not `-s --verbose`).
    let requests = server.requests().len();
    for bundle in ["-s-", "-s-verbose", "-sS-"] {
        let output = get(&[bundle, &echo]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{bundle}: {stderr}");
        let told = format!("unknown option - in the bundle {bundle}");
        assert!(stderr.contains(&told), "{bundle}: {stderr}");
    }
    assert_eq!(server.requests().len(), requests);
}

/// `-I` with another method (`-I -X GET`), as curl's: that method is sent,
/// and the head alone is printed — not the body its answer has.
#[test]
fn head_with_another_method_prints_the_head_alone_as_curl() {
    let server = TestServer::respond(|_| ok("the body"));
    let output = get(&[&server.url("/"), "-I", "-X", "GET"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(server.requests()[0].method, "GET");
    let text = stdout(&output);
    assert!(text.starts_with("HTTP/1.1 200 OK\n"), "{text}");
    assert!(text.ends_with("\n\n"), "the head alone: {text:?}");
    assert!(!text.contains("the body"), "{text:?}");
}

/// `-I` prints each redirect hop's head before the last one, as `curl
/// -IL` does (curl's `-I` shows the heads as `-i` does), and no body.
#[test]
fn head_prints_each_redirect_hops_head_as_curl_does() {
    let server = TestServer::respond(|request| match request.target.as_str() {
        "/go" => response(302, &[("Location", "/end")], b""),
        _ => ok("the body"),
    });
    for args in [&["-I"][..], &["-I", "-X", "GET"]] {
        let mut argv = vec![server.url("/go")];
        argv.extend(args.iter().map(|arg| arg.to_string()));
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let output = get(&argv);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {output:?}");
        let text = stdout(&output);
        assert!(
            text.starts_with("HTTP/1.1 302 Found\nlocation: /end\n"),
            "{args:?}: {text}"
        );
        let last = text.find("HTTP/1.1 200 OK\n").expect("the last head");
        assert!(text[last..].ends_with("\n\n"), "{args:?}: {text:?}");
        assert!(!text.contains("the body"), "{args:?}: {text:?}");
    }
}

/// `-w`, `--write-out`, as curl's: once the transfer has ended, its
/// format on standard output with the variables replaced by what the
/// transfer came to — the final answer's status, version, type and
/// server, the body's bytes written, the redirects followed, the URL
/// given and the one that answered, the exit status and error — also
/// after an error (no answer: 000), also with `-s`; curl 7.88's escapes
/// (`%%`, `\n`, `\t`; `\\` and `%x` as they are), `%{stderr}`, a format
/// read from a file with `@FILE`, and an unknown variable written as
/// nothing and told.
#[test]
fn write_out_tells_what_the_transfer_came_to() {
    let server = TestServer::respond(|request| match request.target.as_str() {
        "/old" => response(302, &[("Location", "/new")], b"moved"),
        "/missing" => response(404, &[], b"the error page"),
        _ => response(200, &[("Content-Type", "text/plain")], b"the page"),
    });
    let dir = support::real::TempDir::new("get-write-out");
    let body = dir.path().join("body");
    let format = "%{http_code} %{http_version} %{size_download} %{num_redirects} \
                  %{url_effective} %{url} %{content_type} %{remote_ip}:%{remote_port} \
                  %{exitcode} [%{errormsg}]\\n";
    let output = get(&[
        &server.url("/old"),
        "-s",
        "-o",
        body.to_str().unwrap(),
        "-w",
        format,
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let port = server.addr().port();
    assert_eq!(
        stdout(&output),
        format!(
            "200 1.1 8 1 http://127.0.0.1:{port}/new http://127.0.0.1:{port}/old text/plain \
             127.0.0.1:{port} 0 []\n"
        )
    );
    assert_eq!(std::fs::read(&body).unwrap(), b"the page");

    // The times, in seconds: the head's before the end.
    let output = get(&[
        &server.url("/"),
        "-w",
        "%{time_starttransfer} %{time_total}",
    ]);
    let text = stdout(&output);
    let times = text
        .strip_prefix("HTTP/1.1 200 OK")
        .and_then(|t| t.rsplit_once("the page"));
    let (head, total) = times.unwrap().1.split_once(' ').unwrap();
    let (head, total): (f64, f64) = (head.parse().unwrap(), total.parse().unwrap());
    assert!(0.0 < head && head <= total && total < 60.0, "{text}");

    // An error status with -f, and no answer at all.
    let output = get(&[
        &server.url("/missing"),
        "-sf",
        "-w",
        "%{http_code} %{exitcode}",
    ]);
    assert_eq!(output.status.code(), Some(22), "{output:?}");
    assert!(stdout(&output).ends_with("\n\n404 22"), "{output:?}");
    let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", refused.local_addr().unwrap());
    drop(refused);
    let output = get(&[
        &url,
        "-s",
        "-w",
        "%{http_code} %{http_version} %{exitcode} %{errormsg}",
    ]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let text = stdout(&output);
    assert!(text.starts_with("000 0 1 connect to "), "{text}");
    assert!(output.stderr.is_empty(), "-s: {output:?}");

    // Escapes, an unknown variable, standard error, and a file's format.
    let output = get(&[
        &server.url("/"),
        "-o",
        body.to_str().unwrap(),
        "-w",
        "100%% a\\tb \\\\n %x %{nope}|%{stderr}to stderr%{stdout}|\\",
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(stdout(&output), "100% a\tb \\\\n %x ||\\");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("get: unknown --write-out variable: 'nope'"),
        "{stderr}"
    );
    assert!(stderr.contains("to stderr"), "{stderr}");
    let format = dir.path().join("format");
    std::fs::write(&format, "%{http_code} from a file").unwrap();
    let at_file = format!("@{}", format.display());
    let output = get(&[
        &server.url("/"),
        "-s",
        "-o",
        body.to_str().unwrap(),
        "-w",
        &at_file,
    ]);
    assert_eq!(stdout(&output), "200 from a file", "{output:?}");
}

/// `-w` as curl 7.88 reads two odd formats (checked against curl here):
/// a `%{` no `}` closes is written as it is and what follows it is read
/// on (`\t` a tab); and a variable get does not know is told on standard
/// error even with `-s`, as curl tells it.
#[test]
fn write_out_reads_on_after_an_unclosed_brace_and_tells_unknown_names_even_silent() {
    let server = TestServer::respond(|_| ok("the page"));
    let dir = support::real::TempDir::new("get-write-out-odd");
    let body = dir.path().join("body");
    let body = body.to_str().unwrap();
    let output = get(&[&server.url("/"), "-s", "-o", body, "-w", "a%{b\\tc"]);
    assert_eq!(stdout(&output), "a%{b\tc", "{output:?}");
    let output = get(&[&server.url("/"), "-s", "-o", body, "-w", "[%{nope}]"]);
    assert_eq!(stdout(&output), "[]", "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("get: unknown --write-out variable: 'nope'"),
        "{output:?}"
    );
}

/// `-F`, `--form`, and `--form-string`, as curl 7.88 reads them: a
/// `multipart/form-data` POST whose parts are text values, files
/// uploaded as files (`@FILE`: named by the path's end, a `.txt` typed
/// `text/plain`), a file's contents as a value (`<FILE`), each with
/// `;type=` and `;filename=`, a quoted value holding a `;`, and
/// `--form-string`'s value taken as it is; a part without `=` or beside
/// `-d` is a bad argument, a file that cannot be read an error, and an
/// unknown `;` field is skipped with a warning.
#[test]
fn form_sends_multipart_parts_as_curl_reads_them() {
    let server = TestServer::respond(|request| {
        ok(&format!(
            "{} {}\n{}",
            request.method,
            request.header("content-type").unwrap_or("-"),
            String::from_utf8_lossy(&request.body)
        ))
    });
    let dir = support::real::TempDir::new("get-form");
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "file text").unwrap();
    let notes = notes.to_str().unwrap();
    let output = get(&[
        &server.url("/"),
        "-s",
        "-F",
        "title=holiday",
        "-F",
        &format!("notes=@{notes}"),
        "-F",
        &format!("typed=@{notes};type=application/x-notes;filename=n.bin"),
        "-F",
        &format!("inline=<{notes}"),
        "-F",
        "quoted=\"a;b\";type=text/x-q",
        "-F",
        "odd=v;nonsense",
        "--form-string",
        "literal=@not-a-file;type=x",
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let text = stdout(&output);
    // After get's head of the answer, the echo's first line, then the body.
    let (_, echo) = text.split_once("\n\n").unwrap();
    let (head, body) = echo.split_once('\n').unwrap();
    let boundary = head
        .strip_prefix("POST multipart/form-data; boundary=")
        .unwrap_or_else(|| panic!("{text}"));
    let part = |name: &str, extra: &str, value: &str| {
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"{extra}\r\n\r\n{value}\r\n"
        )
    };
    let expected = [
        part("title", "", "holiday"),
        part(
            "notes",
            "; filename=\"notes.txt\"\r\nContent-Type: text/plain",
            "file text",
        ),
        part(
            "typed",
            "; filename=\"n.bin\"\r\nContent-Type: application/x-notes",
            "file text",
        ),
        part("inline", "", "file text"),
        part("quoted", "\r\nContent-Type: text/x-q", "a;b"),
        part("odd", "", "v"),
        part("literal", "", "@not-a-file;type=x"),
        format!("--{boundary}--\r\n"),
    ]
    .concat();
    assert_eq!(body, expected);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.is_empty(), "-s: {stderr}");
    let told = get(&[&server.url("/"), "-F", "odd=v;nonsense"]);
    let stderr = String::from_utf8_lossy(&told.stderr);
    assert!(
        stderr.contains("get: warning: skip unknown form field: nonsense"),
        "{stderr}"
    );

    for bad in [&["-F", "no-equals"][..], &["-F", "a=1", "-d", "x"]] {
        let output = get(&[&[&server.url("/")[..]], bad].concat());
        assert_eq!(output.status.code(), Some(2), "{bad:?}: {output:?}");
    }
    let missing = format!("a=@{}", dir.path().join("missing").display());
    let output = get(&[&server.url("/"), "-F", &missing]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--form a=@"),
        "{output:?}"
    );
}

/// `-F`'s odd spellings, read as curl 7.88 reads them (each checked byte
/// for byte against curl here): white space around a value, and around
/// each `;` field, is not the value's, but inside quotes it is; a `;type=`
/// keeps its parameters (`; charset=utf-8`) and is named in any case
/// (`TYPE=`); what follows a closing quote up to the next `;` is skipped,
/// not the fields after it; a quote never closed is the value's first
/// character; a `;type=` that is no `major/minor` is a bad argument, as
/// curl's "option -F: is badly used here".
#[test]
fn form_reads_spaces_quotes_and_type_parameters_as_curl_does() {
    let server =
        TestServer::respond(|request| ok(&format!("\n{}", String::from_utf8_lossy(&request.body))));
    let output = get(&[
        &server.url("/"),
        "-s",
        "-F",
        "spaced= x y ",
        "-F",
        "charset=v;type=text/plain; charset=utf-8",
        "-F",
        "upper=v;TYPE=text/x-up",
        "-F",
        "after=\"q\" ;type=text/x-after",
        "-F",
        "unclosed=\"u;type=text/x-u",
        "-F",
        "named=v; filename= \"f;g\" ;type=text/x-f",
        "-F",
        "quoted=\" in \"",
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let text = stdout(&output);
    let (_, body) = text.split_once("\n\n\n").unwrap();
    let boundary = &body[2..body.find("\r\n").unwrap()];
    let part = |name: &str, extra: &str, value: &str| {
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"{extra}\r\n\r\n{value}\r\n"
        )
    };
    let expected = [
        part("spaced", "", "x y"),
        part(
            "charset",
            "\r\nContent-Type: text/plain; charset=utf-8",
            "v",
        ),
        part("upper", "\r\nContent-Type: text/x-up", "v"),
        part("after", "\r\nContent-Type: text/x-after", "q"),
        part("unclosed", "\r\nContent-Type: text/x-u", "\"u"),
        part("named", "; filename=\"f;g\"\r\nContent-Type: text/x-f", "v"),
        part("quoted", "", " in "),
        format!("--{boundary}--\r\n"),
    ]
    .concat();
    assert_eq!(body, expected);
    assert!(output.stderr.is_empty(), "{output:?}");

    for bad in ["a=v;type=text", "a=v;type=/plain", "a=@x;type= "] {
        let output = get(&[&server.url("/"), "-F", bad]);
        assert_eq!(output.status.code(), Some(2), "{bad}: {output:?}");
    }
}
