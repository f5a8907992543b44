//! Passes the locked versions of the clients to the binary, for the
//! report's header (`PEER_VERSIONS`, e.g. `ureq 3.5.2, hyper 1.7.0, ...`).

fn main() {
    println!("cargo:rerun-if-changed=Cargo.lock");
    let lock = std::fs::read_to_string("Cargo.lock").unwrap_or_default();
    let wanted = [
        "tickless",
        "ureq",
        "hyper",
        "hyper-util",
        "reqwest",
        "tokio",
    ];
    let mut found = Vec::new();
    let mut name: Option<&str> = None;
    for line in lock.lines() {
        if let Some(n) = line.strip_prefix("name = ") {
            name = Some(n.trim_matches('"'));
        } else if let (Some(v), Some(n)) = (line.strip_prefix("version = "), name.take()) {
            if wanted.contains(&n) {
                found.push((n, v.trim_matches('"').to_string()));
            }
        }
    }
    found.sort_by_key(|(n, _)| wanted.iter().position(|w| w == n));
    let text: Vec<String> = found.iter().map(|(n, v)| format!("{n} {v}")).collect();
    println!("cargo:rustc-env=PEER_VERSIONS={}", text.join(", "));
}
