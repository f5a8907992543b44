//! Real servers and proxies, as users meet them, started by the test itself on
//! loopback: nginx (files, gzip, chunked, HTTP/2 cleartext and over TLS),
//! tinyproxy (forward proxy and CONNECT), microsocks (SOCKS5), httpbin on
//! gunicorn (redirects, codings, cookies) and hypercorn (HTTP/2, serving
//! `asgi_app.py` beside this file).
//!
//! `scripts/test` installs them (Debian packages; a virtualenv for the PyPI
//! ones, found through `TICKLESS_TEST_VENV`, else `target/test-venv`). A
//! missing binary or virtualenv is a panic that says so, never a skip.
//!
//! Each type starts its own process, with its own config in its own temporary
//! directory (under cargo's `CARGO_TARGET_TMPDIR`, i.e. `target/tmp`),
//! listening on free ports of 127.0.0.1 only, and returns once every port is
//! listened on by that process and accepts (the Python servers: once a first
//! request is answered too), within a bounded wait; a server that exits or
//! does not come up is a panic with its stderr and logs. Outgoing
//! connections of the proxies are bound to 127.0.0.1 too, so nothing they are
//! asked for can leave the machine.
//!
//! Dropping one stops its whole process group (gunicorn first gets SIGINT, its
//! quick shutdown, so its master reaps its worker; the others are single
//! processes and get SIGKILL), reaps the process and removes the directory.
//! A server also gets the kernel's parent-death signal, so a test process
//! that is killed leaves none running. That signal is tied to the *thread*
//! that started the server: start one per test and drop it there; do not
//! keep one in a static for other tests' threads.

use super::tls::Leaf;
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// What a missing server's panic tells the reader to do.
pub const SETUP_HINT: &str = "run `scripts/test` (it installs nginx, tinyproxy and microsocks \
     with apt-get, and httpbin, gunicorn and hypercorn into the virtualenv target/test-venv, \
     then runs the tests with TICKLESS_TEST_VENV set)";

/// How long a server gets to come up: generous, for a loaded 2-core machine.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long gunicorn gets to stop its worker before its group is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts at starting, for when another process took a free port between
/// our probe and the server's bind.
const ATTEMPTS: usize = 3;

// ---------------------------------------------------------------- lookup ---

/// The absolute path of a server binary: on `PATH`, else in the usual
/// directories (`/usr/sbin` is not on a normal user's `PATH`, and nginx is
/// there). Panics with [`SETUP_HINT`] when it is not installed.
pub fn binary(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let usual = [
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
        "/usr/local/sbin",
        "/usr/local/bin",
    ];
    std::env::split_paths(&path)
        .chain(usual.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
        .unwrap_or_else(|| {
            panic!(
                "`{name}` is not installed (not on PATH, nor in /usr/sbin, /usr/bin): {SETUP_HINT}"
            )
        })
}

/// The virtualenv holding httpbin, gunicorn and hypercorn:
/// `TICKLESS_TEST_VENV` (which `scripts/test` exports), else
/// `target/test-venv` of this package (where `scripts/test` makes it).
pub fn venv() -> PathBuf {
    match std::env::var_os("TICKLESS_TEST_VENV") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-venv"),
    }
}

/// An executable of the virtualenv (`gunicorn`, `hypercorn`); panics with
/// [`SETUP_HINT`] when it is missing.
pub fn venv_binary(name: &str) -> PathBuf {
    let dir = venv();
    let candidate = dir.join("bin").join(name);
    if !is_executable(&candidate) {
        panic!(
            "`{name}` is not in the test virtualenv {} ({}): {SETUP_HINT}",
            dir.display(),
            if dir.is_dir() {
                "it exists but lacks it"
            } else {
                "no such directory"
            },
        );
    }
    candidate
}

fn is_executable(path: &Path) -> bool {
    fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

// ------------------------------------------------------------ small kit ---

/// A directory `PREFIX-PID-N` under `CARGO_TARGET_TMPDIR/real-servers`,
/// removed on drop. The first one a process makes also removes those left by
/// test processes that no longer run (killed before their drops ran).
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        static SWEPT: std::sync::Once = std::sync::Once::new();
        let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("real-servers");
        fs::create_dir_all(&base).expect("create CARGO_TARGET_TMPDIR/real-servers");
        SWEPT.call_once(|| sweep(&base));
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = base.join(format!("{prefix}-{}-{n}", std::process::id()));
            match fs::create_dir(&dir) {
                Ok(()) => return TempDir(dir),
                // Left over from an earlier process with the same pid.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => panic!("create {}: {e}", dir.display()),
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A file holding `bytes`, alone in a [`TempDir`] (removed with it — when
/// the test ends, or fails): the directory to keep, and the file's path.
pub fn temp_file(prefix: &str, bytes: &[u8]) -> (TempDir, PathBuf) {
    let dir = TempDir::new(prefix);
    let path = dir.path().join("body");
    fs::write(&path, bytes).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    (dir, path)
}

/// Remove the directories of processes that are gone.
fn sweep(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.rsplit('-').nth(1))
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// A certificate chain and its key written as PEM files (what nginx and
/// hypercorn read), in a directory removed on drop. The servers read them
/// when they start, so these may be dropped once the server is up.
pub struct PemFiles {
    dir: TempDir,
}

impl PemFiles {
    /// The leaf's chain (leaf first, then the CA) and its PKCS#8 key.
    pub fn of(leaf: &Leaf) -> PemFiles {
        let dir = TempDir::new("pem");
        let mut chain = String::new();
        for cert in &leaf.chain {
            chain.push_str(&pem("CERTIFICATE", cert.as_ref()));
        }
        fs::write(dir.path().join("chain.pem"), chain).expect("write chain.pem");
        let key = leaf.key();
        fs::write(
            dir.path().join("key.pem"),
            pem("PRIVATE KEY", key.secret_der()),
        )
        .expect("write key.pem");
        PemFiles { dir }
    }

    pub fn cert(&self) -> PathBuf {
        self.dir.path().join("chain.pem")
    }

    pub fn key(&self) -> PathBuf {
        self.dir.path().join("key.pem")
    }
}

fn pem(label: &str, der: &[u8]) -> String {
    let text = base64(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in text.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        out.push('\n');
    }
    let _ = writeln!(out, "-----END {label}-----");
    out
}

/// Standard base64 with padding (RFC 4648 §4).
pub fn base64(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(TABLE[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A `Proxy-Authorization` / `Authorization` value: `Basic base64(user:pass)`.
pub fn basic_auth(user: &str, password: &str) -> String {
    format!("Basic {}", base64(format!("{user}:{password}").as_bytes()))
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// `n` distinct ports that were free on 127.0.0.1 a moment ago.
fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("local_addr").port())
        .collect()
}

/// A config value in double quotes (nginx, tinyproxy).
fn quoted(path: &Path) -> String {
    let text = path.to_str().expect("temporary paths are UTF-8");
    assert!(
        !text.contains('"') && !text.contains('\\'),
        "unusable path for a config file: {text}"
    );
    format!("\"{text}\"")
}

// --------------------------------------------------------------- process ---

/// How to tell that a server is up, once its ports accept.
#[derive(Clone, Copy)]
enum Ready {
    /// Every port accepts.
    Accepts,
    /// Every port accepts and a plain HTTP/1.1 `GET path` to `port` gets a
    /// status line: the app behind the socket is loaded.
    Answers { port: usize, path: &'static str },
}

/// What the caller of [`launch`] prepares for each attempt.
struct Plan {
    command: Command,
    /// Log files (besides stdout and stderr) to show if it fails.
    logs: Vec<PathBuf>,
    /// Sent first on drop (and as the parent-death signal); `None`: SIGKILL.
    polite: Option<libc::c_int>,
}

/// One running server process, in its own process group, and its directory.
struct Process {
    name: &'static str,
    child: Child,
    polite: Option<libc::c_int>,
    logs: Vec<PathBuf>,
    command_line: String,
    // Dropped after the process is reaped (fields drop after `Drop::drop`).
    dir: TempDir,
}

/// Start a server: fresh directory and free ports for each attempt, `plan`
/// writes its config and gives the command; retried only when the process
/// exits early saying a port was taken.
fn launch(
    name: &'static str,
    ports: usize,
    ready: Ready,
    mut plan: impl FnMut(&Path, &[u16]) -> Plan,
) -> (Process, Vec<u16>) {
    let mut earlier = String::new();
    for attempt in 1..=ATTEMPTS {
        let dir = TempDir::new(name);
        let ports = free_ports(ports);
        let Plan {
            mut command,
            logs,
            polite,
        } = plan(dir.path(), &ports);
        let command_line = format!("{command:?}");
        let stdout = File::create(dir.path().join("stdout.log")).expect("create stdout.log");
        let stderr = File::create(dir.path().join("stderr.log")).expect("create stderr.log");
        command
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .process_group(0);
        let parent = std::process::id() as libc::pid_t;
        let death = polite.unwrap_or(libc::SIGKILL);
        // SAFETY: only async-signal-safe calls (prctl, getppid) between
        // fork and exec.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, death as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                if libc::getppid() != parent {
                    return Err(io::Error::other("the test process is gone"));
                }
                Ok(())
            });
        }
        let child = match command.spawn() {
            Ok(child) => child,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                panic!("{name}: cannot run {command_line}: {e}: {SETUP_HINT}")
            }
            Err(e) => panic!("{name}: cannot run {command_line}: {e}"),
        };
        let mut process = Process {
            name,
            child,
            polite,
            logs,
            command_line,
            dir,
        };
        match process.wait_ready(&ports, ready) {
            Ok(()) => return (process, ports),
            Err(Failure::Exited(why)) => {
                let output = process.output();
                // nginx, gunicorn, hypercorn, microsocks: "… in use";
                // tinyproxy says only this on stderr.
                let port_taken = output.contains("in use")
                    || output.contains("Could not create listening sockets");
                if port_taken && attempt < ATTEMPTS {
                    let _ = writeln!(earlier, "attempt {attempt}: {why}, a port was taken");
                    continue;
                }
                panic!(
                    "{name} did not start: {why}\n{earlier}command: {}\n{output}",
                    process.command_line
                );
            }
            Err(Failure::Timeout(why)) => panic!(
                "{name} did not start: {why}\n{earlier}command: {}\n{}",
                process.command_line,
                process.output()
            ),
        }
    }
    unreachable!("the last attempt returns or panics")
}

enum Failure {
    Exited(String),
    Timeout(String),
}

impl Process {
    /// Wait (bounded) until every port accepts, and for `Ready::Answers`
    /// until a first request is answered.
    fn wait_ready(&mut self, ports: &[u16], ready: Ready) -> Result<(), Failure> {
        let deadline = Instant::now() + START_TIMEOUT;
        let mut pending: Vec<u16> = ports.to_vec();
        loop {
            if let Some(status) = self.exit_status() {
                return Err(Failure::Exited(format!(
                    "it exited ({status}) before accepting on {}",
                    list(ports)
                )));
            }
            // Ours (not another process's that took the port meanwhile) and
            // accepting.
            let listening = self.listening_ports();
            pending.retain(|&port| {
                !listening.contains(&port)
                    || TcpStream::connect_timeout(&loopback(port), Duration::from_secs(1)).is_err()
            });
            if pending.is_empty() {
                match ready {
                    Ready::Accepts => return Ok(()),
                    Ready::Answers { port, path } => {
                        if http_answers(ports[port], path) {
                            return Ok(());
                        }
                    }
                }
            }
            if Instant::now() >= deadline {
                let what = if pending.is_empty() {
                    "to answer a first request".to_string()
                } else {
                    format!("for {} to accept", list(&pending))
                };
                return Err(Failure::Timeout(format!(
                    "gave up waiting {} s {what}",
                    START_TIMEOUT.as_secs()
                )));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// The exit status if the process has exited, *without reaping it*: its
    /// pid, and so its process group's id, stays reserved until `Drop`.
    fn exit_status(&self) -> Option<String> {
        // SAFETY: waitid on our own child with WNOWAIT only reads its state
        // into a zeroed siginfo_t.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
            if libc::waitid(libc::P_PID, self.child.id(), &mut info, flags) != 0 {
                return Some(format!("waitid: {}", io::Error::last_os_error()));
            }
            if info.si_pid() == 0 {
                return None;
            }
            let status = info.si_status();
            Some(match info.si_code {
                libc::CLD_EXITED => format!("exit status {status}"),
                _ => format!("killed by signal {status}"),
            })
        }
    }

    /// The ports of 127.0.0.1 on which a socket held by the process listens:
    /// the socket inodes among its file descriptors, looked up in
    /// /proc/net/tcp (`local_address` `0100007F:PORT`, state `0A`).
    fn listening_ports(&self) -> Vec<u16> {
        let Ok(fds) = fs::read_dir(format!("/proc/{}/fd", self.child.id())) else {
            return Vec::new();
        };
        let inodes: Vec<String> = fds
            .flatten()
            .filter_map(|fd| fs::read_link(fd.path()).ok())
            .filter_map(|link| {
                let link = link.to_str()?;
                Some(
                    link.strip_prefix("socket:[")?
                        .strip_suffix(']')?
                        .to_string(),
                )
            })
            .collect();
        let table = fs::read_to_string("/proc/net/tcp").unwrap_or_default();
        table
            .lines()
            .skip(1)
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let (address, port) = fields.get(1)?.split_once(':')?;
                let listening = *fields.get(3)? == "0A";
                let inode = *fields.get(9)?;
                let ours = inodes.iter().any(|ours| ours == inode);
                (address == "0100007F" && listening && ours)
                    .then(|| u16::from_str_radix(port, 16).ok())?
            })
            .collect()
    }

    /// stderr, stdout and the server's own logs, for a panic message.
    fn output(&self) -> String {
        let mut out = String::new();
        let files = [
            self.dir.path().join("stderr.log"),
            self.dir.path().join("stdout.log"),
        ];
        for file in files.iter().chain(&self.logs) {
            let text = fs::read_to_string(file).unwrap_or_default();
            let text = text.trim_end();
            let name = file.file_name().and_then(OsStr::to_str).unwrap_or("?");
            if text.is_empty() {
                let _ = writeln!(out, "--- {name}: (empty)");
            } else {
                // The end is where the reason is.
                let start = text.len().saturating_sub(6000);
                let start = (start..text.len())
                    .find(|&i| text.is_char_boundary(i))
                    .unwrap_or(0);
                let _ = writeln!(out, "--- {name}:\n{}", &text[start..]);
            }
        }
        out
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let pid = self.child.id() as libc::pid_t;
        if let (Some(signal), None) = (self.polite, self.exit_status()) {
            // SAFETY: plain kill(2) on our own unreaped child.
            unsafe { libc::kill(pid, signal) };
            let deadline = Instant::now() + STOP_TIMEOUT;
            while self.exit_status().is_none() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(5));
            }
        }
        // The leader is not reaped yet (alive or a zombie), so no other
        // process group can have this id: kill whatever is left of ours.
        // SAFETY: as above.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        if let Err(e) = self.child.wait() {
            eprintln!("{}: reaping pid {pid}: {e}", self.name);
        }
    }
}

fn list(ports: &[u16]) -> String {
    ports
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether a plain `GET path` to the port gets an HTTP/1.x status line.
fn http_answers(port: u16, path: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&loopback(port), Duration::from_secs(1)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 7];
    stream.read_exact(&mut head).is_ok() && &head == b"HTTP/1."
}

// ----------------------------------------------------------------- nginx ---

/// nginx (Debian's package, single process: `master_process off`) serving
/// a directory the test fills ([`Nginx::write_file`]) on three ports of
/// 127.0.0.1: plain HTTP/1.1, HTTP/2 with prior knowledge (cleartext, h2c:
/// HTTP/2 only), and optionally TLS with ALPN `h2` and `http/1.1`.
///
/// Locations, all over the same files:
/// - `/NAME`: the file as is, with `Content-Length`.
/// - `/gzip/NAME`: gzip-compressed when the request accepts gzip (any type,
///   any size), so without a length: chunked over HTTP/1.1.
/// - `/chunked/NAME`: identity but chunked over HTTP/1.1 (passed through
///   the SSI filter, which drops the length; a file should not contain
///   `<!--#`).
/// - `/slow/NAME`: sent at 1 KiB/s (`limit_rate`).
///
/// [`Nginx::access_log`] has one line per request:
/// `CONNECTION REQUESTS-ON-IT PROTOCOL METHOD URI STATUS BODY-BYTES`
/// (written as nginx finishes the request, which may be a moment after the
/// client has its response).
pub struct Nginx {
    process: Process,
    http: u16,
    h2c: u16,
    tls: Option<u16>,
}

impl Nginx {
    /// Plain and h2c ports only.
    pub fn start() -> Nginx {
        Nginx::launch(None)
    }

    /// With a TLS port too, serving this certificate chain and key (PEM
    /// files, e.g. [`PemFiles::of`]`(&tls::certs().valid)`).
    pub fn start_tls(cert_pem: &Path, key_pem: &Path) -> Nginx {
        Nginx::launch(Some((cert_pem, key_pem)))
    }

    fn launch(tls: Option<(&Path, &Path)>) -> Nginx {
        let nginx = binary("nginx");
        let ports = if tls.is_some() { 3 } else { 2 };
        let (process, ports) = launch("nginx", ports, Ready::Accepts, |dir, ports| {
            for sub in ["www", "tmp"] {
                fs::create_dir_all(dir.join(sub)).expect("create nginx dirs");
            }
            let conf = nginx_conf(dir, ports, tls);
            fs::write(dir.join("nginx.conf"), conf).expect("write nginx.conf");
            let mut command = Command::new(&nginx);
            command
                .arg("-p")
                .arg(dir)
                .arg("-c")
                .arg(dir.join("nginx.conf"))
                .arg("-e")
                .arg(dir.join("error.log"))
                .current_dir(dir);
            Plan {
                command,
                logs: vec![dir.join("error.log")],
                polite: None,
            }
        });
        Nginx {
            process,
            http: ports[0],
            h2c: ports[1],
            tls: ports.get(2).copied(),
        }
    }

    /// The directory served.
    pub fn docroot(&self) -> PathBuf {
        self.process.dir.path().join("www")
    }

    /// Write a file to serve at `/NAME` (and `/gzip/NAME`, …); `name` may
    /// have directories, which are created.
    pub fn write_file(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let name = name.trim_start_matches('/');
        assert!(
            !name.split('/').any(|part| part == ".."),
            "stay inside the docroot: {name}"
        );
        let path = self.docroot().join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("create docroot subdirectory");
        }
        fs::write(&path, contents).expect("write served file");
        path
    }

    pub fn http_addr(&self) -> SocketAddr {
        loopback(self.http)
    }

    pub fn h2c_addr(&self) -> SocketAddr {
        loopback(self.h2c)
    }

    /// The TLS port; panics if started without TLS.
    pub fn tls_addr(&self) -> SocketAddr {
        loopback(self.tls.expect("this nginx was started without TLS"))
    }

    /// `http://127.0.0.1:PORT/path`, the plain port.
    pub fn url(&self, path: &str) -> String {
        url("http", "127.0.0.1", self.http, path)
    }

    /// `http://127.0.0.1:PORT/path`, the h2c (prior knowledge) port.
    pub fn h2c_url(&self, path: &str) -> String {
        url("http", "127.0.0.1", self.h2c, path)
    }

    /// `https://127.0.0.1:PORT/path`.
    pub fn https_url(&self, path: &str) -> String {
        self.https_url_for("127.0.0.1", path)
    }

    /// `https://HOST:PORT/path`, e.g. `localhost` to send SNI.
    pub fn https_url_for(&self, host: &str, path: &str) -> String {
        url("https", host, self.tls_addr().port(), path)
    }

    pub fn access_log(&self) -> String {
        fs::read_to_string(self.process.dir.path().join("access.log")).unwrap_or_default()
    }

    pub fn error_log(&self) -> String {
        fs::read_to_string(self.process.dir.path().join("error.log")).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }
}

fn url(scheme: &str, host: &str, port: u16, path: &str) -> String {
    let slash = if path.starts_with('/') { "" } else { "/" };
    format!("{scheme}://{host}:{port}{slash}{path}")
}

fn nginx_conf(dir: &Path, ports: &[u16], tls: Option<(&Path, &Path)>) -> String {
    let d = |name: &str| quoted(&dir.join(name));
    // `alias` needs the trailing slash to map /gzip/x to www/x.
    let www_slash = quoted(&dir.join("www").join(""));
    let tls_lines = match tls {
        Some((cert, key)) => format!(
            "        listen 127.0.0.1:{} ssl http2;\n        \
             ssl_certificate {};\n        \
             ssl_certificate_key {};\n        \
             ssl_protocols TLSv1.2 TLSv1.3;\n",
            ports[2],
            quoted(cert),
            quoted(key)
        ),
        None => String::new(),
    };
    format!(
        r#"# Written by tests/support/real.rs; nginx 1.22 syntax.
daemon off;
master_process off;
worker_processes 1;
pid {pid};
error_log {error_log} notice;
events {{
    worker_connections 1024;
}}
http {{
    default_type application/octet-stream;
    types {{
        text/plain txt;
        text/html html;
        application/json json;
    }}
    log_format tickless '$connection $connection_requests $server_protocol $request_method $request_uri $status $body_bytes_sent';
    access_log {access_log} tickless;
    client_body_temp_path {body};
    proxy_temp_path {proxy};
    fastcgi_temp_path {fastcgi};
    uwsgi_temp_path {uwsgi};
    scgi_temp_path {scgi};
    server {{
        listen 127.0.0.1:{http};
        listen 127.0.0.1:{h2c} http2;
{tls_lines}        server_name localhost;
        root {www};
        location /gzip/ {{
            alias {www_slash};
            gzip on;
            gzip_types *;
            gzip_min_length 0;
        }}
        location /chunked/ {{
            alias {www_slash};
            ssi on;
            ssi_types *;
        }}
        location /slow/ {{
            alias {www_slash};
            limit_rate 1k;
        }}
    }}
}}
"#,
        pid = d("nginx.pid"),
        error_log = d("error.log"),
        access_log = d("access.log"),
        body = d("tmp/body"),
        proxy = d("tmp/proxy"),
        fastcgi = d("tmp/fastcgi"),
        uwsgi = d("tmp/uwsgi"),
        scgi = d("tmp/scgi"),
        http = ports[0],
        h2c = ports[1],
        www = d("www"),
    )
}

// ------------------------------------------------------------- tinyproxy ---

/// tinyproxy (Debian's package, 1.11: one process, threads) in the
/// foreground: a forward proxy for absolute-form requests and CONNECT to any
/// port (no `ConnectPort` line: tinyproxy.conf(5) says all ports are then
/// allowed), serving 127.0.0.1 only, optionally behind Basic auth (then a
/// request without `Proxy-Authorization` gets 407 with `Proxy-Authenticate`,
/// and one with wrong credentials 401: tinyproxy 1.11's answers). Its
/// outgoing connections are bound to 127.0.0.1.
pub struct Tinyproxy {
    process: Process,
    port: u16,
}

impl Tinyproxy {
    pub fn start() -> Tinyproxy {
        Tinyproxy::launch(None)
    }

    /// Clients must send `Proxy-Authorization: Basic …` ([`basic_auth`]).
    pub fn with_basic_auth(user: &str, password: &str) -> Tinyproxy {
        Tinyproxy::launch(Some((user, password)))
    }

    fn launch(auth: Option<(&str, &str)>) -> Tinyproxy {
        let tinyproxy = binary("tinyproxy");
        if let Some((user, password)) = auth {
            assert!(
                !format!("{user}{password}").contains(char::is_whitespace),
                "tinyproxy's BasicAuth takes no spaces"
            );
        }
        let (process, ports) = launch("tinyproxy", 1, Ready::Accepts, |dir, ports| {
            let log = dir.join("tinyproxy.log");
            let mut conf = format!(
                "# Written by tests/support/real.rs; tinyproxy 1.11.\n\
                 Port {port}\n\
                 Listen 127.0.0.1\n\
                 Bind 127.0.0.1\n\
                 Timeout 60\n\
                 MaxClients 100\n\
                 LogFile {log}\n\
                 LogLevel Info\n\
                 PidFile {pid}\n\
                 Allow 127.0.0.1\n\
                 # No ConnectPort line: CONNECT may go to any port.\n",
                port = ports[0],
                log = quoted(&log),
                pid = quoted(&dir.join("tinyproxy.pid")),
            );
            if let Some((user, password)) = auth {
                let _ = writeln!(conf, "BasicAuth {user} {password}");
            }
            fs::write(dir.join("tinyproxy.conf"), conf).expect("write tinyproxy.conf");
            let mut command = Command::new(&tinyproxy);
            command
                .arg("-d")
                .arg("-c")
                .arg(dir.join("tinyproxy.conf"))
                .current_dir(dir);
            Plan {
                command,
                logs: vec![log],
                polite: None,
            }
        });
        Tinyproxy {
            process,
            port: ports[0],
        }
    }

    pub fn addr(&self) -> SocketAddr {
        loopback(self.port)
    }

    /// `http://127.0.0.1:PORT`, as a proxy URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.process.dir.path().join("tinyproxy.log")).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }
}

// ------------------------------------------------------------ microsocks ---

/// microsocks (Debian's package): SOCKS5 on 127.0.0.1, optionally with
/// username/password (RFC 1929); its outgoing connections are bound to
/// 127.0.0.1 (`-b`).
pub struct Microsocks {
    process: Process,
    port: u16,
}

impl Microsocks {
    pub fn start() -> Microsocks {
        Microsocks::launch(None)
    }

    pub fn with_auth(user: &str, password: &str) -> Microsocks {
        Microsocks::launch(Some((user, password)))
    }

    fn launch(auth: Option<(&str, &str)>) -> Microsocks {
        let microsocks = binary("microsocks");
        let (process, ports) = launch("microsocks", 1, Ready::Accepts, |dir, ports| {
            let mut command = Command::new(&microsocks);
            command
                .args(["-i", "127.0.0.1", "-b", "127.0.0.1", "-p"])
                .arg(ports[0].to_string())
                .current_dir(dir);
            if let Some((user, password)) = auth {
                command.arg("-u").arg(user).arg("-P").arg(password);
            }
            Plan {
                command,
                logs: Vec::new(),
                polite: None,
            }
        });
        Microsocks {
            process,
            port: ports[0],
        }
    }

    pub fn addr(&self) -> SocketAddr {
        loopback(self.port)
    }

    /// `socks5://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("socks5://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }
}

// --------------------------------------------------------------- httpbin ---

/// httpbin served by gunicorn from the test virtualenv: one worker of the
/// `gthread` class (8 threads, keep-alive 5 s), so connections are kept
/// alive as with a production deployment. Redirects (`/redirect/N`,
/// `/redirect-to?url=`), codings (`/gzip`, `/deflate`, `/brotli`), cookies
/// (`/cookies/set?k=v`), `/status/N`, `/delay/S`, `/stream/N`, `/bytes/N`,
/// `/anything`, … Up once it has answered a first request.
pub struct Httpbin {
    process: Process,
    port: u16,
}

impl Httpbin {
    pub fn start() -> Httpbin {
        let gunicorn = venv_binary("gunicorn");
        let ready = Ready::Answers {
            port: 0,
            path: "/status/204",
        };
        let (process, ports) = launch("httpbin", 1, ready, |dir, ports| {
            let mut command = Command::new(&gunicorn);
            command
                .arg("--bind")
                .arg(format!("127.0.0.1:{}", ports[0]))
                .args(["--workers", "1", "--worker-class", "gthread"])
                .args(["--threads", "8", "--keep-alive", "5"])
                .args(["--graceful-timeout", "5", "--no-control-socket"])
                .arg("--worker-tmp-dir")
                .arg(dir)
                .arg("--access-logfile")
                .arg(dir.join("access.log"))
                .args(["--error-logfile", "-"])
                .arg("httpbin:app")
                .current_dir(dir);
            python_env(&mut command);
            Plan {
                command,
                logs: vec![dir.join("access.log")],
                // Quick shutdown: the master stops and reaps its worker.
                polite: Some(libc::SIGINT),
            }
        });
        Httpbin {
            process,
            port: ports[0],
        }
    }

    pub fn addr(&self) -> SocketAddr {
        loopback(self.port)
    }

    /// `127.0.0.1:PORT`.
    pub fn authority(&self) -> String {
        self.addr().to_string()
    }

    pub fn url(&self, path: &str) -> String {
        url("http", "127.0.0.1", self.port, path)
    }

    /// gunicorn's master; its worker is in the same process group.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }
}

fn python_env(command: &mut Command) {
    command
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .env_remove("PYTHONPATH")
        .env_remove("PYTHONHOME")
        .env_remove("GUNICORN_CMD_ARGS");
}

// ------------------------------------------------------------- hypercorn ---

/// The ASGI app hypercorn serves (`tests/support/asgi_app.py`; its
/// docstring lists the routes).
pub const ASGI_APP: &str = include_str!("asgi_app.py");

/// hypercorn (from the test virtualenv, in-process: `-w 0`) serving
/// [`ASGI_APP`]: on a cleartext port, HTTP/1.1 and HTTP/2 with prior
/// knowledge (or `Upgrade: h2c`); with [`Hypercorn::start_tls`] also on a
/// TLS port with ALPN `h2` and `http/1.1`. Every response says in
/// `x-http-version` which version the server saw. Up once it has answered a
/// first request.
pub struct Hypercorn {
    process: Process,
    plain: u16,
    tls: Option<u16>,
}

impl Hypercorn {
    /// The cleartext port only.
    pub fn start() -> Hypercorn {
        Hypercorn::launch(None)
    }

    /// A TLS port serving this chain and key (PEM files) and the cleartext
    /// port.
    pub fn start_tls(cert_pem: &Path, key_pem: &Path) -> Hypercorn {
        Hypercorn::launch(Some((cert_pem, key_pem)))
    }

    fn launch(tls: Option<(&Path, &Path)>) -> Hypercorn {
        let hypercorn = venv_binary("hypercorn");
        let ports = if tls.is_some() { 2 } else { 1 };
        let ready = Ready::Answers { port: 0, path: "/" };
        let (process, ports) = launch("hypercorn", ports, ready, |dir, ports| {
            fs::write(dir.join("asgi_app.py"), ASGI_APP).expect("write asgi_app.py");
            let mut command = Command::new(&hypercorn);
            command.args(["--workers", "0", "--error-logfile", "-"]);
            command.arg("--access-logfile").arg(dir.join("access.log"));
            let plain = format!("127.0.0.1:{}", ports[0]);
            match tls {
                Some((cert, key)) => {
                    command
                        .arg("--certfile")
                        .arg(cert)
                        .arg("--keyfile")
                        .arg(key)
                        .arg("--bind")
                        .arg(format!("127.0.0.1:{}", ports[1]))
                        .arg("--insecure-bind")
                        .arg(plain);
                }
                None => {
                    command.arg("--bind").arg(plain);
                }
            }
            command.arg("asgi_app:app").current_dir(dir);
            python_env(&mut command);
            Plan {
                command,
                logs: vec![dir.join("access.log")],
                polite: None,
            }
        });
        Hypercorn {
            process,
            plain: ports[0],
            tls: ports.get(1).copied(),
        }
    }

    /// The cleartext port: HTTP/1.1, and HTTP/2 with prior knowledge.
    pub fn plain_addr(&self) -> SocketAddr {
        loopback(self.plain)
    }

    /// The TLS port; panics if started without TLS.
    pub fn tls_addr(&self) -> SocketAddr {
        loopback(self.tls.expect("this hypercorn was started without TLS"))
    }

    /// `http://127.0.0.1:PORT/path`, the cleartext port.
    pub fn url(&self, path: &str) -> String {
        url("http", "127.0.0.1", self.plain, path)
    }

    pub fn https_url(&self, path: &str) -> String {
        self.https_url_for("127.0.0.1", path)
    }

    pub fn https_url_for(&self, host: &str, path: &str) -> String {
        url("https", host, self.tls_addr().port(), path)
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }
}
