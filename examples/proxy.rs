//! A request through a forward HTTP proxy: the example starts an origin and
//! a small forward proxy on loopback (the crate documentation's own,
//! `tickless::doc_support`, which adds `Via: 1.1 doc-proxy`), or uses
//! `--proxy URL` (an `http://`, `socks5://` or `socks5h://` proxy, with
//! `user:pass@` credentials if it needs them) and `--url URL`.
//!
//! ```sh
//! cargo run --release --example proxy
//! cargo run --release --example proxy -- --proxy socks5h://127.0.0.1:1080 --url http://example.lan/
//! ```
//!
//! Without `--proxy`, the environment (`http_proxy`, `no_proxy`, …) is
//! ignored here so that the example shows its own proxy; a client built
//! without `.proxy(…)` or `.no_proxy()` honours it.

#[path = "common/unicode_args.rs"]
mod unicode_args;

use std::process::ExitCode;
use tickless::WithCauses;

const USAGE: &str = "usage: proxy [--proxy URL] [--url URL]";

fn main() -> ExitCode {
    let (mut proxy, mut url) = (None, None);
    let mut args = unicode_args::or_exit("proxy", USAGE);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--proxy", Some(value)) => proxy = Some(value),
            ("--url", Some(value)) => url = Some(value),
            _ => {
                eprintln!("proxy: bad argument {arg:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    match run(proxy, url) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("proxy: {}", WithCauses(&*error));
            ExitCode::from(1)
        }
    }
}

fn run(proxy: Option<String>, url: Option<String>) -> Result<(), Box<dyn std::error::Error>> {
    let url = url.unwrap_or_else(|| tickless::doc_support::serve_text("hello through the proxy"));
    let proxy = proxy.unwrap_or_else(tickless::doc_support::forward_proxy);
    let client = tickless::Client::builder()
        .proxy(tickless::Proxy::all(&proxy)?)
        .build()?;
    let response = client.get(url.as_str()).send().wait()?;
    println!("{} via {}", response.status(), without_password(&proxy));
    for (name, value) in response.headers() {
        println!("{name}: {}", String::from_utf8_lossy(value.as_bytes()));
    }
    println!();
    println!("{}", response.text().wait()?);
    client.close();
    Ok(())
}

/// `proxy` as the client's errors name a proxy: its credentials, if any,
/// shown as `***` — the password is the user's, not the output's, which
/// goes to terminals and logs. They are what comes before the last `@` of
/// the authority (after `scheme://`, if any, up to the first `/`, `?` or
/// `#`), as a URL is read.
fn without_password(proxy: &str) -> String {
    let start = proxy.find("://").map_or(0, |scheme_end| scheme_end + 3);
    let authority = &proxy[start..];
    let authority = &authority[..authority.find(['/', '?', '#']).unwrap_or(authority.len())];
    match authority.rfind('@') {
        Some(at) => format!("{}***{}", &proxy[..start], &proxy[start + at..]),
        None => proxy.to_owned(),
    }
}
