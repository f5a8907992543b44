//! A benchmark binary's server, run as a child process of the binary
//! itself (`BINARY --serve`), so that none of its CPU or memory counts as
//! the client's. Shared by the binaries in `src/bin/` (`#[path]`).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

/// Whether this process was started as the server (`--serve` first).
pub fn is_server(args: &[String]) -> bool {
    args.first().map(String::as_str) == Some("--serve")
}

/// The running child; killed when dropped.
pub struct ChildServer {
    child: Child,
    /// Where it listens: the first line it prints.
    pub addr: SocketAddr,
}

impl ChildServer {
    /// Starts this binary again with `--serve` and reads the address it
    /// prints once it listens.
    pub fn start() -> ChildServer {
        let mut child = Command::new(std::env::current_exe().expect("this binary"))
            .arg("--serve")
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("its stdout"))
            .read_line(&mut line)
            .expect("its address");
        let addr = line.trim().parse().expect("the server's address");
        ChildServer { child, addr }
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
