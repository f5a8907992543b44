//! Every example that starts its own loopback server runs to success:
//! `download` (a body to a file), `upload` (a file as a body),
//! `concurrent` (many requests at once) and `tokio` (the futures on a tokio
//! runtime), `stats` (the statistics printed while a load runs),
//! `http2_fanout` (many streams on one HTTP/2 connection), `proxy` (a
//! request through a forward proxy). `get`
//! has its own suite (tests/get_example.rs).

mod support;

use std::process::Command;
use support::example_binary;

fn run(name: &str, args: &[&str]) -> String {
    let output = Command::new(example_binary(name))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{name} {args:?}: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[test]
fn download_writes_the_whole_body_to_a_file() {
    let dir = support::real::TempDir::new("download");
    let path = dir.path().join("body.bin");
    let path = path.to_str().unwrap();
    let stdout = run("download", &["--mib", "16", "--output", path]);
    assert!(
        stdout.starts_with(&format!("{} bytes to {path}", 16 << 20)),
        "{stdout}"
    );
    assert_eq!(std::fs::metadata(path).unwrap().len(), 16 << 20);
}

#[test]
fn upload_sends_the_whole_file() {
    let dir = support::real::TempDir::new("upload");
    let path = dir.path().join("body.bin");
    std::fs::write(&path, vec![1u8; 3 << 20]).unwrap();
    let stdout = run("upload", &["--file", path.to_str().unwrap()]);
    let expected = format!("{} bytes sent, the server read {}", 3 << 20, 3 << 20);
    assert!(stdout.starts_with(&expected), "{stdout}");
}

#[test]
fn concurrent_and_tokio_succeed() {
    let stdout = run("concurrent", &["--requests", "300", "--connections", "16"]);
    assert!(stdout.starts_with("300/300 succeeded"), "{stdout}");
    run("tokio", &[]);
}

#[test]
fn stats_prints_every_second_in_its_stable_form() {
    let stdout = run("stats", &["--seconds", "2", "--threads", "2"]);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("# after")).count(),
        2,
        "{stdout}"
    );
    for prefix in [
        "wheel armed=",
        "loop=0 armed=",
        "loop=1 armed=",
        "pool open=",
        "retry_budget requests=",
        "http2 streams_open=",
    ] {
        assert_eq!(
            lines.iter().filter(|l| l.starts_with(prefix)).count(),
            2,
            "{prefix}: {stdout}"
        );
    }
    // Timeouts fired on the loops (the /slow requests), with their lag.
    let fired: u64 = lines
        .iter()
        .filter(|l| l.starts_with("loop="))
        .filter_map(|l| l.split_whitespace().find_map(|f| f.strip_prefix("fired=")))
        .map(|n| n.parse::<u64>().unwrap())
        .sum();
    assert!(fired > 0, "{stdout}");
}

#[test]
fn http2_fanout_multiplexes_on_one_connection() {
    let stdout = run("http2_fanout", &["--requests", "200"]);
    assert!(stdout.starts_with("200/200 answered"), "{stdout}");
    assert!(stdout.contains("over Some(HTTP/2.0)"), "{stdout}");
    assert!(stdout.contains("1 connection(s) opened"), "{stdout}");
}

#[test]
fn proxy_goes_through_its_forward_proxy() {
    let stdout = run("proxy", &[]);
    assert!(
        stdout.starts_with("200 OK via http://127.0.0.1:"),
        "{stdout}"
    );
    assert!(stdout.contains("via: 1.1 doc-proxy"), "{stdout}");
    assert!(
        stdout.trim_end().ends_with("hello through the proxy"),
        "{stdout}"
    );
}

/// `--proxy` with credentials: the line that says which proxy answered
/// names it as the client's errors do, its credentials shown as `***`,
/// never the password (a run's output goes to terminals and logs).
#[test]
fn proxy_never_prints_the_credentials_of_its_proxy() {
    let proxy = support::TestServer::respond(|request| {
        support::ok(&format!("forwarded {}", request.target))
    });
    let url = format!("http://user:s3cret@{}", proxy.addr());
    let stdout = run("proxy", &["--proxy", &url, "--url", "http://origin.test/"]);
    assert!(
        stdout.starts_with(&format!("200 OK via http://***@{}\n", proxy.addr())),
        "{stdout}"
    );
    assert!(!stdout.contains("s3cret"), "{stdout}");
    assert!(
        stdout.trim_end().ends_with("forwarded http://origin.test/"),
        "{stdout}"
    );
    // The proxy got the credentials all the same.
    assert_eq!(
        proxy.requests()[0].header("proxy-authorization"),
        Some(support::real::basic_auth("user", "s3cret").as_str())
    );
}

/// An argument that is not UTF-8 (a Latin-1 file name) is a bad argument:
/// each example says so with its usage and exits with 2, not a panic's
/// 101. It is given where each reads a value, after a valid option.
#[test]
fn an_argument_that_is_not_utf8_is_refused_not_a_panic() {
    use std::os::unix::ffi::OsStrExt;
    let latin1 = std::ffi::OsStr::from_bytes(b"caf\xe9");
    for (name, option) in [
        ("stats", "--seconds"),
        ("download", "--output"),
        ("upload", "--file"),
        ("concurrent", "--requests"),
        ("http2_fanout", "--requests"),
        ("proxy", "--url"),
    ] {
        let output = Command::new(example_binary(name))
            .arg(option)
            .arg(latin1)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.starts_with(&format!("{name}: an argument that is not UTF-8: ")),
            "{name}: {stderr}"
        );
        assert!(
            stderr.contains(&format!("usage: {name} ")),
            "{name}: {stderr}"
        );
    }
}
