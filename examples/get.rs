//! Fetches one URL and prints the response: status line, headers, a blank
//! line, then the body as it arrives — a small curl.
//!
//! ```sh
//! cargo run --release --example get -- http://127.0.0.1:8080/
//! cargo run --release --example get -- http://127.0.0.1:8080/ \
//!     --request-timeout 20 --read-timeout 10 --event-loop-timeouts \
//!     --header 'Accept: text/plain' --data 'posted body'
//! cargo run --release --example get -- http://127.0.0.1:8080/big -o big.bin
//! cargo run --release --example get -- http://127.0.0.1:8080/put \
//!     --upload-file big.bin --header 'Expect: 100-continue'
//! cargo run --release --example get -- https://localhost:8443/ --ca lab-ca.pem
//! cargo run --release --example get -- https://example.test/ \
//!     --proxy http://user:secret@127.0.0.1:3128 --resolve example.test:443:127.0.0.1
//! cargo run --release --example get -- https://localhost:8443/ --cert me.pem --key me.key
//! cargo run --release --example get -- https://localhost:8443/ --ca lab-ca.pem --http2
//! cargo run --release --example get -- http://127.0.0.1:8080/ --http2-prior-knowledge
//! cargo run --release --example get -- http://user:pass@127.0.0.1:8080/login \
//!     --max-redirects 3 --cookie 'session=1' --max-body-bytes 1048576
//! ```
//!
//! Options (curl's names, and its short forms where it has them). As in
//! curl, short forms go together in one argument (`-sSL`, `-sLo FILE`): a
//! letter that takes a value takes the rest of the argument if any
//! (`-XPOST`, `-d@body.json`), else the next one; a `-` among them is no
//! option (`-s-` is a bad argument, not `-s --`).
//!
//! * `--request-timeout MS`, `--read-timeout MS`, `--write-timeout MS`: the
//!   client's timeouts in milliseconds (0 disables one). As curl, `get`
//!   puts no bound on the whole request unless asked (the client's default
//!   of 60 s would cut a long download short); the read timeout (the
//!   client's default, 60 s) still ends one whose server went silent.
//! * `-m`, `--max-time SECS` (curl's): the request timeout in seconds, a
//!   fraction allowed (`0.5`); any positive value is a timeout, as curl's
//!   (one under a nanosecond is a nanosecond, not none).
//! * `--connect-timeout SECS` (curl's): the bound on the connection's
//!   opening, in seconds, a fraction allowed (`0.5`). curl's covers the
//!   whole of it (TCP, a proxy's CONNECT, TLS); here it is both the
//!   client's connect timeout (each TCP connect attempt; default 5 s) and
//!   its handshake timeout (a proxy's handshake and TLS together, from
//!   the TCP connect; default 10 s), each SECS on its own, so an opening
//!   may take longer than SECS in all where curl's may not. 0 puts none
//!   (the request timeout, if any, still bounds it: curl's 0 is its own
//!   default instead).
//! * `--event-loop-timeouts`: arm them on the connection's event loop
//!   instead of the hashed-wheel timer.
//! * `-H`, `--header 'Name: value'`: add a request header (repeatable);
//!   `Expect: 100-continue` makes an upload wait for the server's go. A
//!   blank before the name or its colon (`'X : v'`) is a bad argument:
//!   curl sends it as written, which a server must refuse. As
//!   in curl, `'Name:'` sends no `Name` (not even the client's own
//!   `User-Agent` or `Accept-Encoding`, nor curl's `Accept: */*`, which
//!   `get` sends as curl does, nor `--data`'s `Content-Type`,
//!   nor `--user`'s `Authorization` or the URL's credentials, which a
//!   given one replaces too, nor `--cookie`'s `Cookie`) —
//!   but `'Host:'`: the client always sends the URL's `Host` (HTTP/1.1
//!   requires one; curl would send none), and a body's `Content-Length`
//!   or `Transfer-Encoding` (its framing, which curl would drop) — and
//!   `'Name;'` sends it empty. `'Accept-Encoding:'` is `--no-decompress`
//!   (curl sends none and decodes nothing unless `--compressed`); a
//!   `'Accept-Encoding: VALUE'` is sent instead of the client's own.
//! * `-A`, `--user-agent STR` (curl's): send `User-Agent: STR` instead of
//!   the client's own; `''`: none. `-e`, `--referer URL` (curl's): send
//!   `Referer: URL`; `''`: none (curl's `;auto`, a `Referer` set anew on
//!   each redirect, is a bad argument: not done here). As in curl, a
//!   `--header` for the same name, or dropping it, wins over either.
//! * `-X`, `--request METHOD`: the method (default GET, or POST with
//!   `--data`, PUT with `--upload-file`, HEAD with `--head`).
//! * `-I`, `--head`: a HEAD request; the heads are printed as with `-i`
//!   (each redirect hop's too, as `curl -IL` prints them), and no body,
//!   even with another method (`-I -X GET`, as in curl); with a body to
//!   send it is a bad argument, as in curl.
//! * `-L`, `--location`: accepted, for curl's habit: redirects are
//!   followed by default (see `--max-redirects`).
//! * `-d`, `--data STR`: send `STR` as the body (a POST unless `-X` says
//!   otherwise), with `Content-Type: application/x-www-form-urlencoded`
//!   unless a `--header` gives one; `@FILE` reads it from `FILE` (`@-`:
//!   standard input) without its carriage returns and newlines, as curl
//!   does. Given again, the parts are joined with `&`.
//! * `--data-binary STR`: the same, but a file's bytes go as they are.
//! * `--data-raw STR` (curl's, as a browser's "Copy as cURL" writes it):
//!   as `--data`, but a leading `@` is sent as it is, never a file's name.
//! * `--data-urlencode [NAME]=CONTENT|[NAME]@FILE` (curl's): as `--data`,
//!   with the content (`@FILE`: the file's bytes as they are, `@-`:
//!   standard input) percent-encoded as curl encodes it (RFC 3986's
//!   unreserved characters kept, a space as `+`), after `NAME=` if a name
//!   is given; a value with neither `=` nor `@` is the content alone.
//! * `-G`, `--get` (curl's): the `--data` parts (of every kind), joined
//!   with `&`, go as the URL's query instead of a body — after its own
//!   query with a `&`, else after a `?` — and the method is GET (HEAD with
//!   `-I`) unless `-X` says otherwise; what a URL cannot hold (a space, a
//!   control, a byte not ASCII, a `#`) percent-encoded.
//! * `-F`, `--form NAME=VALUE|NAME=@FILE|NAME=<FILE` (curl's): a
//!   `multipart/form-data` POST of these parts (repeatable), read as curl
//!   7.88 reads them: `@FILE` a file part, `<FILE` the file's text as the
//!   value (`-`: standard input), then `;type=`, `;filename=` and
//!   `;headers=` (a field, or `@FILE` a file of them) — the usage text
//!   and `parse_form` have the details; `--form-string NAME=VALUE` a
//!   value taken as it is.
//! * `-T`, `--upload-file FILE`: stream `FILE` as the body, its length
//!   from the file (a PUT unless `-X` says otherwise), read again from its
//!   start for a `307` or `308`, as curl rewinds it; `-`: standard input,
//!   chunked (sent once) — but a regular file there (`-T - < FILE`) goes
//!   as `-T FILE` does, from where standard input stands: its length
//!   (curl's goes chunked), and read again for a `307` or `308`, as curl
//!   rewinds it. To a URL whose path ends with `/`, the file's
//!   name (percent-encoded) is added to it, as curl does.
//! * `-o`, `--output FILE`: write the body to `FILE` as it arrives (`-`:
//!   standard output); the status line and headers then go to standard
//!   error (nowhere with `-s`) — but with `-i` (or `-I`) into `FILE`,
//!   before the body, as curl writes them.
//! * `-O`, `--remote-name` (curl's): `--output` to a file in the current
//!   directory named as the URL's path ends, as written (its query left
//!   out, not percent-decoded: `/dir/a%20b.txt?v=1` is `a%20b.txt`), the
//!   given URL's even after a redirect, as in curl; a path that names no
//!   file (`/`, `/dir/`, `..`) is a bad argument, found before anything
//!   is sent (curl fails once the answer comes).
//! * `--cacert FILE` (curl's): trust the CA certificate(s) in `FILE` (PEM)
//!   alone for `https://` URLs, as curl's replaces its default bundle:
//!   the bundled Mozilla roots are not trusted then.
//! * `--ca FILE`: also trust the CA certificate(s) in `FILE` (PEM) for
//!   `https://` URLs, besides the bundled Mozilla roots (or `--cacert`'s).
//! * `-E`, `--cert FILE [--key FILE]`: a client certificate (PEM chain, leaf
//!   first) and its private key (PEM), for servers that ask for one (mTLS).
//!   Without `--key`, as in curl, the key is in the `--cert` file too.
//! * `-x`, `--proxy URL`: send the request through this proxy:
//!   `http://[user:pass@]host:port` (plain requests forwarded, `https://`
//!   through a CONNECT tunnel), `socks5://…` (names resolved here) or
//!   `socks5h://…` (by the proxy); without a port, curl's 1080. Without it the proxy environment
//!   variables are honoured (`http_proxy`, `https_proxy`, `all_proxy`,
//!   `no_proxy`, as curl and reqwest read them; a proxy there without a
//!   port is at 1080 too, as curl's). The environment's `no_proxy` (else,
//!   or if empty, `NO_PROXY`) names hosts that bypass a proxy given with `-x` as well,
//!   as in curl. `-x ""`, as curl's: no
//!   proxy, not even the environment's.
//! * `-U`, `--proxy-user USER[:PASSWORD]` (curl's): the credentials for
//!   the proxy, of `-x` or of the environment, when its URL gives none (as
//!   in curl, a proxy URL's own `user:pass@` wins). As curl reads them,
//!   `USER` and `PASSWORD` are percent-decoded (`%3A` for a colon in the
//!   user's name, `%25` for a `%`), and without `:PASSWORD` the password
//!   is empty (curl would ask for it).
//! * `--no-proxy`: ignore the proxy environment variables.
//! * `--noproxy LIST` (curl's): the hosts that bypass the proxy — of
//!   `--proxy` or of the environment, whose `no_proxy` it replaces — a
//!   comma-separated list of names (each with its subdomains), IP
//!   addresses and CIDR blocks, or `*` alone for all (the client's
//!   [`tickless::Proxy::no_proxy`] syntax: an entry with a port matches
//!   nothing, as in reqwest); `""`: none.
//! * `--resolve HOST:PORT:ADDR[,ADDR…]`: connect to these addresses (IPv6
//!   in brackets) for `HOST:PORT` — the URL's, the proxy's or a redirect's:
//!   any connection of the transfer — instead of resolving `HOST` (curl's
//!   form; repeatable). `HOST` matches as the URL's host does: in any
//!   case, with or without a final dot, a name that is not ASCII as it is
//!   or in IDNA's ASCII form (`bücher.test`, `xn--bcher-kva.test`); an IP address (IPv6 in brackets,
//!   `[::1]:443:127.0.0.1`, as curl 8.13 takes it; `127.2` is
//!   `127.0.0.2`, as in a URL) is replaced too. An IPv6 `ADDR` may have a
//!   zone id, its interface's name or index, written as it is
//!   (`[fe80::1%eth0]`, `fe80::1%2`, as `getaddrinfo` takes it): the
//!   connection goes out through that interface. A zone naming no
//!   interface, or on an IPv4 address, is refused.
//! * `--http2`: over TLS, offer HTTP/2 alone (ALPN `h2`), and fail if the
//!   server will not speak it; `--http1.1`: offer HTTP/1.1 alone. By
//!   default the handshake offers both and the server picks.
//! * `--http2-prior-knowledge`: speak HTTP/2 over cleartext `http://` from
//!   the first byte, for a server known to speak it.
//! * `-k`, `--insecure`: accept any server certificate (unknown issuer, expired,
//!   wrong name). For lab setups only: anyone on the path can read and
//!   change the traffic.
//! * `--max-redirects N` (curl: `--max-redirs`): follow at most `N`
//!   redirects (default 10; 0 prints the first redirect instead of
//!   following it; -1, as in curl: no limit). Redirects are followed by
//!   default, as the client does. A chain longer is an error (exit 1,
//!   where curl's is 47), told after the heads that came with `-i` (each
//!   hop's, the last one not followed), as `curl -iL` writes them.
//! * `--no-decompress` (curl: `--raw`): print the body as the server
//!   encoded it (no decompression, no `Accept-Encoding` sent).
//! * `--compressed`: accepted, as curl's: compressed bodies are asked for
//!   and decoded by default; after `--no-decompress` it turns them back on.
//! * `-v`, `--verbose`: tell what the transfer does on standard error, as
//!   curl does: `* ` lines for what the client tells of it (the addresses
//!   a name resolved to, each connect tried, made or failed, the roots a
//!   TLS handshake trusts in curl's `*  CAfile:` lines, TLS's ALPN,
//!   the protocol of a new connection, `HTTP/1.1` or `HTTP/2`, a
//!   connection reused, a redirect followed, a retry, a hedged copy);
//!   `> ` lines for each request's head as it was sent (over HTTP/1.1
//!   once written whole, before its body) — its line (`> GET /path
//!   HTTP/1.1`: the path and query, which through an HTTP proxy go as the
//!   whole URL) and its header fields as they went, the client's own
//!   (`Host`, `User-Agent`, `Accept-Encoding`, the body's framing,
//!   `--user`'s `Authorization`, cookies) among them; over HTTP/2 the
//!   `:authority` as a `Host` line first, as curl shows it. Never a
//!   proxy's credentials: its `Proxy-Authorization` is not shown. Then
//!   `< ` lines for each response's head — a redirect's too, and each
//!   interim one before the final, such as the `100 Continue` an upload
//!   sent with `-H 'Expect: 100-continue'` waits for — its status line
//!   and headers. A blank `> ` or `< ` line ends each head.
//!   Standard output is as without `-v`; with `--output`, the head goes
//!   to standard error as the `< ` lines alone.
//! * `-i`, `--include`: print each redirect hop's heads and each interim
//!   (1xx) head, as `curl -iL` does — a status line (`HTTP/1.1 103 Early
//!   Hints`), its fields and a blank line each — before the final head,
//!   where that goes: those of the attempts whose answers were taken, not
//!   those of an attempt retried or of a hedged copy that lost. The final
//!   head's status line and headers are printed with or without it; with
//!   it, as the server sent them, as curl prints them (as `curl -i
//!   --compressed`: a decoded body's `Content-Encoding` and
//!   `Content-Length` are kept above it), without it as the body printed
//!   is (those two gone once it is decoded).
//! * `-w`, `--write-out FORMAT` (curl's): once the transfer has ended
//!   (after an error too), write FORMAT with curl's variables filled in
//!   (`%{http_code}`, `%{time_total}`, `%{json}`, `%{header_json}`…: the
//!   usage text lists them; `@FILE` reads FORMAT from a file).
//! * `-s`, `--silent` (curl's): no error message, nor `--insecure`'s
//!   warning: the exit status alone says what happened (there is no
//!   progress meter to silence). A bad argument is still told, as curl
//!   tells an option it cannot read — but a URL the client refuses is
//!   not, as curl's is not. With `--output` (and no `-i`), the head is not
//!   written to standard error either; the body and `-v`'s lines are
//!   written as without it.
//! * `-S`, `--show-error` (curl's): with `-s` (`-sS`), errors are told
//!   again; without `-s`, they are anyway.
//! * `-f`, `--fail` (curl's): an answer whose status is 400 or over is a
//!   failure, exit 22, as in curl: its head is printed where it goes, as
//!   always (curl prints it with `-i`), but not its body, and no
//!   `--output` file is made (with `-i`, one holding the head alone, as
//!   curl 7.88 leaves it); the error says the status on standard error.
//! * `--cookies`: a cookie store for the run, so that cookies set on a
//!   redirect hop are sent on the next ones.
//! * `-b`, `--cookie 'NAME=VALUE; …'`: the cookie store, with these cookies
//!   in it for the URL's host (any path); repeatable.
//! * `--max-body-bytes N` (curl: `--max-filesize`): fail once the body
//!   (decoded) passes `N` bytes.
//! * `--retries N`: retry a failure before any response (a connect error,
//!   a reset) up to `N` times, inside the request deadline, with a
//!   backoff (idempotent methods; any method for a connect error).
//! * `--hedge-after MS`: send a copy of an idempotent request on another
//!   connection if no response head has come after `MS` milliseconds; the
//!   first head wins.
//! * `-u`, `--user USER[:PASSWORD]`: HTTP Basic credentials; credentials in
//!   the URL (`http://user:pass@host/`) are used the same way, and never
//!   sent on the request line.
//!
//! As in curl, `--` ends the options: the argument after it is the URL,
//! even one that begins with `-`.
//!
//! A URL without a `scheme://` is an `http://` one, as curl takes it
//! (`get localhost:8080/x`).
//!
//! The URL is read as the client reads it (reqwest and browsers alike): a
//! host that is not ASCII in its IDNA ASCII form, and what a path or query
//! holds that a request line cannot — a character that is not ASCII, a
//! space — percent-encoded (`/ä b` asks for `/%C3%A4%20b`, where curl
//! refuses the space).
//!
//! Exits 0 on any response (whatever its status; with `-f`, 22 on one of
//! 400 or over), 1 if the request failed
//! (the error goes to stderr, but with `-s`), 2 on bad arguments (usage goes to stderr) —
//! an argument that is not UTF-8 among them, and a URL the client refuses
//! before sending anything, one that does not parse or names no
//! `http`/`https` host and port (`'http://exa mple/'`, `://x`, `ftp://x`),
//! as a `-x` proxy URL it cannot use is.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::time::Duration;
use tickless::WithCauses;

const USAGE: &str = "\
usage: get URL [--request-timeout MS|-m|--max-time SECS] [--read-timeout MS]
           [--write-timeout MS] [--connect-timeout SECS]
           [--event-loop-timeouts]
           [-H|--header 'Name: value']... [-A|--user-agent STR] [-e|--referer URL]
           [-X|--request METHOD] [-I|--head] [-L]
           [-d|--data STR|@FILE] [--data-binary STR|@FILE] [--data-raw STR]
           [-F|--form NAME=VALUE|NAME=@FILE|NAME=<FILE[;type=T][;filename=N]
                    [;headers='Name: value'|;headers=@FILE]...]...
           (FILE -: standard input)
           [--form-string NAME=VALUE]...
           [--data-urlencode [NAME]=STR|[NAME]@FILE] [-G|--get]
           [-T|--upload-file FILE|-] [-o|--output FILE] [-O|--remote-name]
           [--cacert FILE] [--ca FILE]
           [-k|--insecure] [-E|--cert FILE [--key FILE]]
           [-x|--proxy URL] [-U|--proxy-user USER[:PASSWORD]] [--no-proxy]
           [--noproxy HOST[,HOST...]|'*']
           [--resolve HOST:PORT:ADDR[,ADDR...]]...
           [--max-redirects N] [--no-decompress|--compressed] [--cookies] [-i] [-s] [-S]
           [-v|--verbose] [-f|--fail] [-w|--write-out FORMAT|@FILE]
           [-b|--cookie 'NAME=VALUE; ...'] [--max-body-bytes N]
           [-u|--user USER[:PASSWORD]] [--retries N] [--hedge-after MS]
           [--http2 | --http1.1 | --http2-prior-knowledge] [-h|--help] [--]
-v shows, on standard error: '* ' lines for what the client tells of the
transfer, '> ' lines for each request's head as sent (its line, with the
path: through an HTTP proxy the whole URL; its header fields, but a
proxy's credentials) and '< ' lines for each response's head.
-w writes FORMAT on standard output once the transfer has ended, as curl's
--write-out: %{http_code} (000 without a response), %{http_version},
%{size_download} (the body's bytes written), %{time_starttransfer} and
%{time_total} (seconds since the request was sent), %{url},
%{url_effective}, %{num_redirects}, %{content_type}, %{remote_ip},
%{remote_port}, %{exitcode}, %{errormsg}; %{json}, all of these as a JSON
object, and %{header_json}, the answer's header fields as one (lower-case
names, each with an array of its values); %{stderr} and %{stdout} send
what follows there; %% is a %, and \\n, \\r, \\t what C's are.";

/// Which HTTP versions to speak.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Versions {
    #[default]
    Negotiated,
    Http2,
    Http11,
    Http2PriorKnowledge,
}

/// What `-x`, `--proxy` says.
#[derive(Debug)]
enum ProxyFlag {
    /// `-x ""` (or blanks), curl's: no proxy, not even the environment's.
    Off,
    /// Through this proxy.
    Through(tickless::Proxy),
}

#[derive(Debug, Default)]
struct Args {
    /// `-h`, `--help`: print the usage, and nothing else.
    help: bool,
    /// `-I`, `--head`: a HEAD request, whose heads are printed as with
    /// `-i`, and no body.
    head: bool,
    /// `-v`, `--verbose`: tell what the transfer does, on standard error.
    verbose: bool,
    /// `-i`, `--include`: print the interim (1xx) heads before the final
    /// one, and with `--output` write them all into its file.
    include: bool,
    /// `-f`, `--fail`: an answer of 400 or over is a failure, its body
    /// not written.
    fail: bool,
    /// `-s`, `--silent`: no error message, nor warning.
    silent: bool,
    /// `-S`, `--show-error`: with `-s`, errors told all the same.
    show_error: bool,
    /// `-w`, `--write-out FORMAT`: written once the transfer has ended
    /// (see [`written_out`]); `@FILE` read from the file (`@-` standard
    /// input) as the flag is read.
    write_out: Option<String>,
    /// The URL to fetch: as given, but with curl's `http://` if it has no
    /// `scheme://` ([`with_curls_scheme`]).
    url: String,
    /// The URL as given, which `-w`'s `%{url}` writes, as curl's does.
    given_url: String,
    request_timeout: Option<Duration>,
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
    connect_timeout: Option<Duration>,
    event_loop_timeouts: bool,
    headers: Vec<Header>,
    /// `-A`, `--user-agent`: empty for none.
    user_agent: Option<http::HeaderValue>,
    /// `-e`, `--referer`: empty for none.
    referer: Option<http::HeaderValue>,
    method: Option<http::Method>,
    /// Each `--data`, `--data-binary`, `--data-raw` or `--data-urlencode`,
    /// in order: the body.
    data: Vec<Data>,
    /// With `-G`, those parts instead: the URL's query.
    query: Vec<Data>,
    /// Each `-F`, `--form` or `--form-string`, in order: a
    /// `multipart/form-data` body.
    form: Vec<FormPart>,
    /// What reading the arguments warns of (curl's `Warning:` lines),
    /// told unless `-s`.
    warnings: Vec<String>,
    upload: Option<String>,
    output: Option<String>,
    /// `--ca FILE`: roots trusted besides the bundled ones.
    ca: Option<String>,
    /// `--cacert FILE`: roots trusted instead of the bundled ones.
    cacert: Option<String>,
    insecure: bool,
    cert: Option<String>,
    key: Option<String>,
    /// `-x`, `--proxy URL`.
    proxy: Option<ProxyFlag>,
    /// `-U`, `--proxy-user USER[:PASSWORD]`, as given.
    proxy_user: Option<String>,
    no_proxy: bool,
    /// `--noproxy LIST`: the hosts that bypass the proxy.
    noproxy: Option<String>,
    resolve: Vec<Resolve>,
    versions: Versions,
    max_redirects: Option<usize>,
    no_decompress: bool,
    cookie: Option<String>,
    /// With `cookie`: the URL given, as the cookie jar reads it to key
    /// those cookies by (see [`parse_args`]).
    cookie_url: Option<tickless::cookie::Url>,
    max_body_bytes: Option<u64>,
    user: Option<String>,
    retries: Option<u32>,
    hedge_after: Option<Duration>,
}

/// One `--resolve HOST:PORT:ADDR[,ADDR…]`.
#[derive(Debug)]
struct Resolve {
    /// As written, an IPv6 address without its brackets: the client's
    /// override matches it to a URL's host however either spells it.
    host: String,
    port: u16,
    /// At port 0, which the client takes as `port`; an IPv6 one with its
    /// zone's scope id.
    addrs: Vec<std::net::SocketAddr>,
}

fn parse_resolve(value: &str) -> Result<Resolve, String> {
    let bad = || format!("--resolve: expected HOST:PORT:ADDR[,ADDR...], got {value:?}");
    // An IPv6 HOST is in brackets, its colons its own.
    let (host, rest) = match value.strip_prefix('[') {
        Some(bracketed) => {
            let (literal, rest) = bracketed.split_once(']').ok_or_else(bad)?;
            literal.parse::<std::net::Ipv6Addr>().map_err(|_| bad())?;
            (literal.to_owned(), rest.strip_prefix(':').ok_or_else(bad)?)
        }
        None => {
            let (host, rest) = value.split_once(':').ok_or_else(bad)?;
            if host.is_empty() {
                return Err(bad());
            }
            (host.to_owned(), rest)
        }
    };
    let (port, addrs) = rest.split_once(':').ok_or_else(bad)?;
    let port = port.parse().map_err(|_| bad())?;
    let addrs = addrs
        .split(',')
        .map(parse_resolve_addr)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Resolve { host, port, addrs })
}

/// One `ADDR` of a `--resolve` entry, at port 0: an IP address (IPv6 in
/// brackets or not), an IPv6 one maybe with a zone id after a `%` — its
/// interface's name or index, as `getaddrinfo` reads it — which becomes
/// its scope id. Without the scope id a link-local address
/// (`fe80::1%eth0`) could not be reached: a zone is used or refused,
/// never dropped.
fn parse_resolve_addr(addr: &str) -> Result<std::net::SocketAddr, String> {
    let bare = addr.trim().trim_start_matches('[').trim_end_matches(']');
    let (ip, zone) = match bare.split_once('%') {
        Some((ip, zone)) => (ip, Some(zone)),
        None => (bare, None),
    };
    let ip: std::net::IpAddr = ip
        .parse()
        .map_err(|_| format!("--resolve: not an IP address: {addr:?}"))?;
    let Some(zone) = zone else {
        return Ok(std::net::SocketAddr::new(ip, 0));
    };
    let std::net::IpAddr::V6(ip) = ip else {
        return Err(format!(
            "--resolve: a zone id is for an IPv6 address: {addr:?}"
        ));
    };
    let Some(scope_id) = interface_index(zone) else {
        // A URL writes the `%` as `%25` (RFC 6874); here it is written
        // as it is, so `%25eth0` names an interface `25eth0`.
        let url_form = zone
            .strip_prefix("25")
            .filter(|rest| interface_index(rest).is_some())
            .map(|rest| format!(" (written as in a URL? here it is %{rest})"))
            .unwrap_or_default();
        return Err(format!(
            "--resolve: no network interface {zone:?}, the zone of {addr:?}{url_form}"
        ));
    };
    Ok(std::net::SocketAddr::V6(std::net::SocketAddrV6::new(
        ip, 0, 0, scope_id,
    )))
}

/// The index of the network interface a zone id names: a number as it
/// is, a name as the system knows it (`if_nametoindex`); `None` for an
/// empty zone or a name no interface has.
fn interface_index(zone: &str) -> Option<u32> {
    if !zone.is_empty() && zone.bytes().all(|byte| byte.is_ascii_digit()) {
        return zone.parse().ok();
    }
    let name = std::ffi::CString::new(zone).ok()?;
    // SAFETY: `name` is a NUL-terminated string that lives past the call,
    // which only reads it.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    (index != 0).then_some(index)
}

/// The bytes of the file `path` an argument names, `-` for standard
/// input (as curl reads `-d @-`, `-w @-`, `-F name=<-`): a failure to read
/// is told after `named`, the flag and what precedes the path (`--data @`).
fn read_named(named: &str, path: &str) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    let read = match path {
        "-" => std::io::stdin().read_to_end(&mut bytes),
        path => std::fs::File::open(path).and_then(|mut file| file.read_to_end(&mut bytes)),
    };
    read.map_err(|e| format!("{named}{path}: {e}"))?;
    Ok(bytes)
}

/// A `--data`, `--data-binary`, `--data-raw` or `--data-urlencode` value:
/// the body, or (but for `--data-raw`) `@FILE` (`@-`: standard input) to
/// read it from.
#[derive(Debug)]
struct Data {
    value: String,
    flag: DataFlag,
}

/// The flag that gave a [`Data`], which says how its value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DataFlag {
    /// `-d`, `--data`: a file's carriage returns and newlines are dropped.
    Data,
    /// `--data-binary`: a file's bytes go as they are.
    Binary,
    /// `--data-raw`: the value as it is, an `@` too.
    Raw,
    /// `--data-urlencode`: `[NAME]=CONTENT` or `[NAME]@FILE`, the content
    /// percent-encoded.
    UrlEncode,
}

impl DataFlag {
    fn name(self) -> &'static str {
        match self {
            DataFlag::Data => "--data",
            DataFlag::Binary => "--data-binary",
            DataFlag::Raw => "--data-raw",
            DataFlag::UrlEncode => "--data-urlencode",
        }
    }
}

impl Data {
    /// The body: the value, or the file's bytes — for `--data` without
    /// their carriage returns and newlines, as curl sends them — or for
    /// `--data-urlencode` either encoded.
    fn body(&self) -> Result<Vec<u8>, String> {
        let file = match self.flag {
            DataFlag::UrlEncode => return self.url_encoded(),
            DataFlag::Raw => None,
            DataFlag::Data | DataFlag::Binary => self.value.strip_prefix('@'),
        };
        let Some(path) = file else {
            return Ok(self.value.clone().into_bytes());
        };
        let mut bytes = self.read(path)?;
        if self.flag == DataFlag::Data {
            bytes.retain(|&b| b != b'\r' && b != b'\n');
        }
        Ok(bytes)
    }

    /// `--data-urlencode`'s part, as curl reads it: the name before the
    /// first `=` (else before the first `@`, which reads the content from
    /// a file, `-` for standard input, its bytes as they are) sent as it
    /// is, then `=` and the content encoded; without either, the whole
    /// value encoded, and `=CONTENT` is the content alone.
    fn url_encoded(&self) -> Result<Vec<u8>, String> {
        let value = &self.value;
        let Some(at) = value.find('=').or_else(|| value.find('@')) else {
            return Ok(form_encoded(value.as_bytes()).into_bytes());
        };
        let (name, content) = (&value[..at], &value[at + 1..]);
        let content = match value.as_bytes()[at] {
            b'@' => form_encoded(&self.read(content)?),
            _ => form_encoded(content.as_bytes()),
        };
        Ok(match name {
            "" => content,
            name => format!("{name}={content}"),
        }
        .into_bytes())
    }

    /// The bytes of `path` ([`read_named`]).
    fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        read_named(&format!("{} @", self.flag.name()), path)
    }
}

/// `bytes` as `--data-urlencode` sends them, as curl does: RFC 3986's
/// unreserved characters as they are, a space as `+`, the rest
/// percent-encoded.
fn form_encoded(bytes: &[u8]) -> String {
    // A `%20` is a space's alone: a `%` is encoded too.
    percent_encoded(bytes).replace("%20", "+")
}

/// The body of every `--data`, `--data-binary`, `--data-raw` and
/// `--data-urlencode` given, joined with `&`
/// as curl joins them.
fn data_body(data: &[Data]) -> Result<Vec<u8>, String> {
    let parts = data.iter().map(Data::body).collect::<Result<Vec<_>, _>>()?;
    Ok(parts.join(&b'&'))
}

/// One `--header`, as curl reads it.
#[derive(Debug)]
enum Header {
    /// `'Name: value'`, or `'Name;'`: sent (empty, for the latter).
    Send(http::HeaderName, http::HeaderValue),
    /// `'Name:'`: no `Name` is sent, not even one the client or `get`
    /// would add.
    Suppress(http::HeaderName),
}

/// One `--header`, checked: a name and a value HTTP allows.
fn parse_header(header: &str) -> Result<Header, String> {
    let bad = || format!("--header: expected 'Name: value', got {header:?}");
    // curl sends a blank before the name or the colon as written (`X :
    // v`), a line a server must refuse (RFC 9112, 5.1) or reads as folded;
    // sending `X: v` instead would be another header than the one asked.
    let name = |name: &str| {
        if name.contains([' ', '\t']) {
            return Err(format!(
                "--header: a blank in the header's name {name:?}, which no server \
                 takes (curl sends it as written), in {header:?}"
            ));
        }
        http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())
    };
    // curl's form for an empty value: `Name:` says "send none".
    if let Some(empty) = header.strip_suffix(';').filter(|h| !h.contains(':')) {
        return Ok(Header::Send(
            name(empty)?,
            http::HeaderValue::from_static(""),
        ));
    }
    let (named, value) = header.split_once(':').ok_or_else(bad)?;
    let value = value.trim();
    if value.is_empty() {
        return Ok(Header::Suppress(name(named)?));
    }
    let value = http::HeaderValue::from_str(value).map_err(|_| bad())?;
    Ok(Header::Send(name(named)?, value))
}

/// `value`, given with `flag`, as a header's value: one HTTP allows.
fn header_value(flag: &str, value: &str) -> Result<http::HeaderValue, String> {
    http::HeaderValue::from_str(value)
        .map_err(|_| format!("{flag}: not a header's value: {value:?}"))
}

/// Whether a `--header 'Name:'` says not to send `name`.
fn suppressed(headers: &[Header], name: &http::HeaderName) -> bool {
    headers
        .iter()
        .any(|header| matches!(header, Header::Suppress(n) if n == name))
}

/// `get`'s own `value` for the header `name` (curl's `Accept`, `-A`'s,
/// `-e`'s, a form's `Content-Type`, `--user`'s `Authorization`), unless a
/// `--header` sends `name` or drops it: either way, that one wins.
fn unless_given<T>(headers: &[Header], name: &http::HeaderName, value: Option<T>) -> Option<T> {
    let given = headers.iter().any(|header| match header {
        Header::Send(n, _) | Header::Suppress(n) => n == name,
    });
    value.filter(|_| !given)
}

/// The `NAME=VALUE` pairs of a `--cookie` value.
fn cookie_pairs(cookies: &str) -> impl Iterator<Item = &str> {
    cookies.split(';').map(str::trim).filter(|c| !c.is_empty())
}

/// The command line's arguments, with bundles of short flags (`-sSL`) read
/// one flag at a time, as curl reads them ([`next_flag`](Self::next_flag)).
/// A flag's value is taken as it is ([`next`](Iterator::next)), never
/// read as flags (`-d -sS` posts `-sS`).
struct ShortFlags<I> {
    args: I,
    /// The argument read last, whole: the bundle its flags come from.
    bundle: String,
    /// The rest of the bundle whose flag was read last: that flag's value,
    /// if it takes one and reads it (`-XPOST`: `-X`, then `POST`), else
    /// the bundle's next flags (`-sSL`: `-s`, then `-SL`).
    bundle_rest: Option<String>,
}

impl<I: Iterator<Item = String>> ShortFlags<I> {
    fn new(args: I) -> Self {
        ShortFlags {
            args,
            bundle: String::new(),
            bundle_rest: None,
        }
    }

    /// The next flag: the next argument, or the next of a bundle of short
    /// flags — its first letter, the rest kept for what comes next. Whether
    /// that rest is a value is for the flag to say, by reading one: the
    /// flag's own arm of the parser is all there is to tell it. A `-` in a
    /// bundle is no flag, as in curl: `-s-` is not `-s --`, nor
    /// `-s-verbose` `-s --verbose`.
    fn next_flag(&mut self) -> Result<Option<String>, String> {
        let arg = match self.bundle_rest.take() {
            Some(rest) if rest.starts_with('-') => {
                return Err(format!("unknown option - in the bundle {}", self.bundle))
            }
            Some(rest) => format!("-{rest}"),
            None => match self.args.next() {
                Some(arg) => {
                    self.bundle.clone_from(&arg);
                    arg
                }
                None => return Ok(None),
            },
        };
        let mut letters = arg.chars();
        let bundle = letters.next() == Some('-')
            && letters.next().is_some_and(|c| c.is_ascii_alphabetic())
            && letters.next().is_some();
        if !bundle {
            return Ok(Some(arg));
        }
        let (flag, rest) = arg.split_at(2);
        self.bundle_rest = Some(rest.to_owned());
        Ok(Some(flag.to_owned()))
    }
}

impl<I: Iterator<Item = String>> Iterator for ShortFlags<I> {
    type Item = String;

    /// A flag's value: the rest of its bundle (`-d@body.json`), else the
    /// next argument.
    fn next(&mut self) -> Option<String> {
        self.bundle_rest.take().or_else(|| self.args.next())
    }
}

/// `url` as curl reads a URL that does not begin with a `scheme://`: an
/// `http://` one (`localhost:8080/x`, `127.0.0.1/`, `a.test/?next=https://b.test/`),
/// where the client would take `localhost:` for a scheme, or find none.
/// Read so before anything else reads the URL (`-O`'s file name, `-b`'s
/// host, `-T`'s directory). Text that begins as no host does (`-s` after
/// `--`, `://x`, nothing) is left as it is, for the client to refuse: a
/// bad argument.
fn with_curls_scheme(url: String) -> String {
    // RFC 3986's scheme: a letter, then letters, digits, `+`, `-`, `.`.
    let has_a_scheme = url.split_once("://").is_some_and(|(scheme, _)| {
        scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    });
    let starts_as_a_host = url
        .chars()
        .next()
        .is_some_and(|c| c.is_alphanumeric() || c == '[');
    if has_a_scheme || !starts_as_a_host {
        return url;
    }
    format!("http://{url}")
}

/// One `-F`/`--form` or `--form-string` part, as curl reads it.
#[derive(Debug, PartialEq)]
struct FormPart {
    name: String,
    content: FormContent,
    /// `;type=`: its media type.
    mime: Option<String>,
    /// `;filename=`: the file name its head gives.
    file_name: Option<String>,
    /// `;headers=`: the other fields its head gives, in order, as `Name`
    /// and value ([`form_header`]).
    headers: Vec<(String, String)>,
}

/// What a [`FormPart`] holds.
#[derive(Debug, PartialEq)]
enum FormContent {
    /// A text value.
    Text(String),
    /// `@FILE`: the file, uploaded as a file (named by its path's end);
    /// `@-`: standard input's bytes, uploaded as a file named `-`.
    File(String),
    /// `<FILE`: the file's contents (`<-`: standard input's), as a text
    /// value.
    TextOf(String),
}

/// `-F NAME=CONTENT`, as curl 7.88 reads it: CONTENT is `@FILE` (a file
/// upload), `<FILE` (the file's contents as the value) or the value
/// itself — `-` for the file is standard input ([`form_of`]) — then
/// `;` fields, named in any case: `type=TYPE`, `filename=NAME` and
/// `headers=`, a field of the part's head (`headers=X-Trace: 1`), or
/// `headers=@FILE` (or `<FILE`: the same) the fields in `FILE`
/// ([`form_header_file`]; as curl's, `-` is a file of that name, and a
/// file that cannot be read is a warning). A word — the value or the
/// file, a file name, a field — may be in double quotes ([`form_word`]);
/// unquoted, it ends at the next `;`, and the white space around it is
/// not its. A type is `major/minor` (anything else is a bad argument),
/// and the fields after it that are not `filename` nor `headers` (nor
/// curl's `encoder`) are its parameters, kept as written:
/// `type=text/plain; charset=utf-8`. Any other field is skipped, as curl
/// skips it, with a warning (returned); so is a file name given to
/// `<FILE`, which curl does not take. A field for the head that is not
/// `Name: value` is a bad argument ([`form_header`]).
fn parse_form(arg: &str) -> Result<(FormPart, Vec<String>), String> {
    let (name, content) = arg
        .split_once('=')
        .ok_or_else(|| format!("--form: expected NAME=CONTENT, got {arg:?}"))?;
    // Where a piece of `arg` (a part of it to its end) begins.
    let offset = |piece: &str| arg.len() - piece.len();
    let (kind, content) = match content.as_bytes().first() {
        Some(b'@') => (Some('@'), &content[1..]),
        Some(b'<') => (Some('<'), &content[1..]),
        _ => (None, content),
    };
    let mut warnings = Vec::new();
    let (value, mut rest) = form_word(content, &mut warnings);
    let mut part = FormPart {
        name: name.to_string(),
        content: match kind {
            Some('@') => FormContent::File(value),
            Some('<') => FormContent::TextOf(value),
            _ => FormContent::Text(value),
        },
        mime: None,
        file_name: None,
        headers: Vec::new(),
    };
    // The type's place in `arg`, from its first character to past its
    // last that is not white space; and whether the fields that follow
    // are still its parameters.
    let mut type_at: Option<(usize, usize)> = None;
    let mut type_open = false;
    while let Some(field) = rest.strip_prefix(';') {
        let field = field.trim_start_matches(FORM_SPACE);
        let named = |key: &str| {
            let prefix = field.get(..key.len())?;
            prefix
                .eq_ignore_ascii_case(key)
                .then(|| &field[key.len()..])
        };
        let field_end = field.find(';').unwrap_or(field.len());
        if let (false, Some(value)) = (type_open, named("type=")) {
            let value = value.trim_start_matches(FORM_SPACE);
            let value_end = value.find(';').unwrap_or(value.len());
            let Some(subtype_end) = media_type_end(value) else {
                return Err(format!(
                    "--form {name}: not a media type: {:?}",
                    &value[..value_end]
                ));
            };
            let start = offset(value);
            let end = start
                + subtype_end
                + value[subtype_end..value_end]
                    .trim_end_matches(FORM_SPACE)
                    .len();
            (type_at, type_open, rest) = (Some((start, end)), true, &value[value_end..]);
        } else if let Some(value) = named("filename=") {
            let (file_name, next) = form_word(value, &mut warnings);
            match kind {
                Some('<') => {
                    warnings.push(format!("field file name not allowed here: {file_name}"))
                }
                _ => part.file_name = Some(file_name),
            }
            (type_open, rest) = (false, next);
        } else if let Some(value) = named("headers=") {
            // As curl: `@` or `<` right after the `=` names a file (white
            // space after it skipped); else the word is the field.
            let next = match value.strip_prefix(['@', '<']) {
                Some(file) => {
                    let (path, next) = form_word(file, &mut warnings);
                    match std::fs::read(&path) {
                        Ok(bytes) => {
                            for line in form_header_file(&path, &bytes, &mut warnings)? {
                                part.headers.push(form_header(name, &line)?);
                            }
                        }
                        Err(e) => warnings.push(format!("cannot read from {path}: {e}")),
                    }
                    next
                }
                None => {
                    let (line, next) = form_word(value, &mut warnings);
                    part.headers.push(form_header(name, &line)?);
                    next
                }
            };
            (type_open, rest) = (false, next);
        } else if let (true, None) = (type_open, named("encoder=")) {
            let parameter = field[..field_end].trim_end_matches(FORM_SPACE);
            type_at = type_at.map(|(start, _)| (start, offset(field) + parameter.len()));
            rest = &field[field_end..];
        } else {
            let (unknown, next) = form_word(field, &mut warnings);
            if !unknown.is_empty() {
                warnings.push(format!("skip unknown form field: {unknown}"));
            }
            (type_open, rest) = (false, next);
        }
    }
    part.mime = type_at.map(|(start, end)| arg[start..end].to_string());
    Ok((part, warnings))
}

/// A field of a `-F` part's head, `;headers=`'s (or a line of its file),
/// as `Name` and value: the name before the first colon, the value after
/// it without the white space around it. curl sends the line as written;
/// one without a colon, or with a blank before its colon, would be no
/// field to a server (or a folded line), and is a bad argument here —
/// and a value goes after one space (`X:1` as `X: 1`).
fn form_header(part: &str, line: &str) -> Result<(String, String), String> {
    let bad = || format!("--form {part}: expected headers=Name: value, got {line:?}");
    let (name, value) = line.split_once(':').ok_or_else(bad)?;
    http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
    let value = value.trim_matches(FORM_SPACE);
    http::HeaderValue::from_bytes(value.as_bytes()).map_err(|_| bad())?;
    Ok((name.to_string(), value.to_string()))
}

/// The fields of a `;headers=@FILE`, as curl 7.88 reads the file: a line
/// that begins with white space goes on the one before it (the line end
/// dropped, the white space kept), one that begins with `#` is a comment,
/// carriage returns are dropped wherever they are, and each field without
/// the white space at its end (a blank line is none). A field is cut at
/// 998 bytes, as curl's, with a warning. A file that is not UTF-8 is a
/// bad argument, as an argument that is not is.
fn form_header_file(
    path: &str,
    bytes: &[u8],
    warnings: &mut Vec<String>,
) -> Result<Vec<String>, String> {
    /// curl's longest field.
    const LONGEST: usize = 998;
    let text = std::str::from_utf8(bytes)
        .map_err(|_| format!("--form headers=@{path}: not UTF-8, which get takes alone"))?;
    let mut fields = Vec::new();
    let mut field = String::new();
    let end_field = |field: &mut String, fields: &mut Vec<String>| {
        let kept = field.trim_end_matches(FORM_SPACE);
        if !kept.is_empty() {
            fields.push(kept.to_string());
        }
        field.clear();
    };
    let (mut line_start, mut comment, mut line_number) = (true, false, 1);
    for c in text.chars() {
        if line_start && !FORM_SPACE.contains(&c) {
            end_field(&mut field, &mut fields);
        }
        match c {
            '\r' => continue,
            '\n' => {
                (line_start, comment, line_number) = (true, false, line_number + 1);
                continue;
            }
            '#' if line_start => comment = true,
            _ => {}
        }
        line_start = false;
        if comment {
            continue;
        }
        match field.len() {
            len if len + c.len_utf8() <= LONGEST => field.push(c),
            // Full: told once, and closed with blanks past the longest,
            // which its end drops.
            len if len <= LONGEST => {
                warnings.push(format!(
                    "file {path} line {line_number}: header too long (truncated)"
                ));
                field.push_str(&" ".repeat(LONGEST + 1 - len));
            }
            _ => {}
        }
    }
    end_field(&mut field, &mut fields);
    Ok(fields)
}

/// White space as curl's `-F` reader skips it (C's `isspace`).
const FORM_SPACE: [char; 6] = [' ', '\t', '\n', '\r', '\x0b', '\x0c'];

/// Where the `major/minor` at the start of `text` ends, as curl 7.88
/// reads a type (`%[^/ ]/%[^;, \n]`), or `None` if it has none.
fn media_type_end(text: &str) -> Option<usize> {
    let major = text.find(['/', ' ']).filter(|&end| end > 0)?;
    let minor = text[major..].strip_prefix('/')?;
    let minor_len = minor.find([';', ',', ' ', '\n']).unwrap_or(minor.len());
    (minor_len > 0).then_some(major + 1 + minor_len)
}

/// A word of `-F` at the start of `text` (white space before it
/// skipped), and what follows it: in double quotes (`\"` and `\\` in
/// them a quote and a backslash), and then whatever comes up to the next
/// `;` is dropped, with a warning if it is not white space; otherwise up
/// to the next `;`, its trailing white space dropped — a quote never
/// closed among it.
fn form_word<'a>(text: &'a str, warnings: &mut Vec<String>) -> (String, &'a str) {
    let text = text.trim_start_matches(FORM_SPACE);
    if let Some(quoted) = text.strip_prefix('"') {
        let mut value = String::new();
        let mut chars = quoted.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            match c {
                '\\' if matches!(chars.peek(), Some((_, '"' | '\\'))) => {
                    value.extend(chars.next().map(|(_, escaped)| escaped));
                }
                '"' => {
                    let after = &quoted[at + 1..];
                    let end = after.find(';').unwrap_or(after.len());
                    if !after[..end].trim_matches(FORM_SPACE).is_empty() {
                        warnings.push("trailing data after quoted form parameter".into());
                    }
                    return (value, &after[end..]);
                }
                c => value.push(c),
            }
        }
    }
    let end = text.find(';').unwrap_or(text.len());
    (
        text[..end].trim_end_matches(FORM_SPACE).to_string(),
        &text[end..],
    )
}

/// The form of `-F`'s and `--form-string`'s parts, their files read as
/// curl reads them: `<-` and `@-` standard input whole, the latter a file
/// named `-`, as curl names it; each part typed by `;type=`, else as curl
/// types it ([`curls_part_type`]). A part's `;headers=` fields follow its
/// `Content-Disposition` and `Content-Type`
/// ([`tickless::multipart::Part::header`]), as curl writes them: a
/// `Content-Disposition` among them replaces the form's own, and the
/// first `Content-Type` is its type unless `;type=` gives one.
fn form_of(parts: &[FormPart]) -> Result<tickless::multipart::Form, String> {
    use tickless::multipart::{Form, Part};
    let mut form = Form::new();
    for part in parts {
        let mut body = match &part.content {
            FormContent::Text(value) => Part::text(value.clone()),
            // As curl: standard input read whole, a file named `-`.
            FormContent::File(path) if path == "-" => {
                let stdin = read_named(&format!("--form {}=@", part.name), path)?;
                Part::bytes(stdin).file_name(path)
            }
            FormContent::File(path) => {
                Part::file(path).map_err(|e| format!("--form {}=@{path}: {e}", part.name))?
            }
            FormContent::TextOf(path) => {
                Part::bytes(read_named(&format!("--form {}=<", part.name), path)?)
            }
        };
        if let Some(mime) = curls_part_type(part) {
            body = body.mime(http::HeaderValue::from_static(mime));
        }
        // As curl: the first `Content-Type` among the fields is the type,
        // unless `;type=` gives one; no other is sent.
        let mut typed = part.mime.is_some();
        for (name, value) in &part.headers {
            if name.eq_ignore_ascii_case("content-type") {
                if typed {
                    continue;
                }
                typed = true;
            }
            body = body
                .header(name, value)
                .map_err(|e| format!("--form {}: {name}: {e}", part.name))?;
        }
        if let Some(mime) = &part.mime {
            body = body
                .mime_str(mime)
                .map_err(|_| format!("--form {}: not a media type: {mime:?}", part.name))?;
        }
        if let Some(file_name) = &part.file_name {
            body = body.file_name(file_name.clone());
        }
        form = form.part(part.name.clone(), body);
    }
    Ok(form)
}

/// The media type curl 7.88 gives `part` when neither `;type=` nor a
/// `Content-Type` field gives one (libcurl's `Curl_mime_prepare_headers`):
/// the one of the file name its head gives ([`curls_media_type`]); for a
/// file (not standard input's `@-`) else the one of its path, else
/// `application/octet-stream`; for text, standard input and a file's
/// contents (`<FILE`) else none. Not the client's [`Part::file`]'s type
/// (`mime_guess`'s, from hundreds of extensions): curl sends a `.json`
/// file as `application/octet-stream`, and a file named `x.txt` by
/// `;filename=` as `text/plain`, whatever its path.
///
/// [`Part::file`]: tickless::multipart::Part::file
fn curls_part_type(part: &FormPart) -> Option<&'static str> {
    let by_name = part.file_name.as_deref().and_then(curls_media_type);
    match &part.content {
        FormContent::File(path) if path != "-" => Some(
            by_name
                .or_else(|| curls_media_type(path))
                .unwrap_or("application/octet-stream"),
        ),
        _ => by_name,
    }
}

/// The media type curl 7.88 gives a form's part by the file name its
/// head gives (libcurl's `ContentTypeForFilename`): ten extensions, in
/// any case; `None` for any other name.
fn curls_media_type(file_name: &str) -> Option<&'static str> {
    const TYPES: [(&str, &str); 10] = [
        (".gif", "image/gif"),
        (".jpg", "image/jpeg"),
        (".jpeg", "image/jpeg"),
        (".png", "image/png"),
        (".svg", "image/svg+xml"),
        (".txt", "text/plain"),
        (".htm", "text/html"),
        (".html", "text/html"),
        (".pdf", "application/pdf"),
        (".xml", "application/xml"),
    ];
    let name = file_name.as_bytes();
    TYPES.iter().find_map(|(extension, mime)| {
        let tail = name
            .len()
            .checked_sub(extension.len())
            .map(|at| &name[at..])?;
        tail.eq_ignore_ascii_case(extension.as_bytes())
            .then_some(*mime)
    })
}

/// `arg` as the URL, the one argument that is not a flag or its value.
fn take_url(url: &mut Option<String>, arg: String) -> Result<(), String> {
    if url.is_some() {
        return Err(format!("unexpected argument {arg:?}"));
    }
    *url = Some(arg);
    Ok(())
}

fn parse_args(args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut parsed = Args::default();
    let mut url = None;
    // The last `-x` wins, as curl's: only that one is read.
    let mut proxy = None;
    let mut remote_name = false;
    let mut data_in_the_query = false;
    let millis = |flag: &str, value: Option<String>| -> Result<Duration, String> {
        let value = value.ok_or_else(|| format!("{flag} needs a value in milliseconds"))?;
        value
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| format!("{flag}: not a number of milliseconds: {value:?}"))
    };
    // curl's: seconds, a fraction allowed (`0.5`); not negative. Any
    // positive value bounds, as curl's: one under a nanosecond is one, not
    // zero (which is none).
    let seconds = |flag: &str, value: Option<String>| -> Result<Duration, String> {
        let value = value.ok_or_else(|| format!("{flag} needs a value in seconds"))?;
        value
            .parse::<f64>()
            .ok()
            .and_then(|secs| {
                let duration = Duration::try_from_secs_f64(secs).ok()?;
                Some(match secs > 0.0 {
                    true => duration.max(Duration::from_nanos(1)),
                    false => duration,
                })
            })
            .ok_or_else(|| format!("{flag}: not a number of seconds: {value:?}"))
    };
    fn number<N: std::str::FromStr>(flag: &str, value: Option<String>) -> Result<N, String> {
        let value = value.ok_or_else(|| format!("{flag} needs a number"))?;
        value
            .parse()
            .map_err(|_| format!("{flag}: not a number: {value:?}"))
    }
    let mut args = ShortFlags::new(args);
    while let Some(arg) = args.next_flag()? {
        match arg.as_str() {
            // As in curl, an argument after `--` is the URL even if it
            // looks like a flag.
            "--" => {
                for arg in args.by_ref() {
                    take_url(&mut url, arg)?;
                }
            }
            "--request-timeout" => {
                parsed.request_timeout = Some(millis("--request-timeout", args.next())?)
            }
            "-m" | "--max-time" => {
                parsed.request_timeout = Some(seconds("--max-time", args.next())?)
            }
            "--connect-timeout" => {
                parsed.connect_timeout = Some(seconds("--connect-timeout", args.next())?)
            }
            "--read-timeout" => parsed.read_timeout = Some(millis("--read-timeout", args.next())?),
            "--write-timeout" => {
                parsed.write_timeout = Some(millis("--write-timeout", args.next())?)
            }
            "--event-loop-timeouts" => parsed.event_loop_timeouts = true,
            "-h" | "--help" => parsed.help = true,
            "-v" | "--verbose" => parsed.verbose = true,
            "-H" | "--header" => {
                let header = args.next().ok_or("--header needs 'Name: value'")?;
                parsed.headers.push(parse_header(&header)?);
            }
            "-A" | "--user-agent" => {
                let agent = args.next().ok_or("--user-agent needs a value")?;
                parsed.user_agent = Some(header_value("--user-agent", &agent)?);
            }
            "-e" | "--referer" => {
                let referer = args.next().ok_or("--referer needs a URL")?;
                if referer.ends_with(";auto") {
                    return Err(format!(
                        "--referer {referer:?}: curl's ';auto' (a Referer set on each \
                         redirect) is not done by get"
                    ));
                }
                parsed.referer = Some(header_value("--referer", &referer)?);
            }
            "-d" | "--data" | "--data-binary" | "--data-raw" | "--data-urlencode" => {
                let value = args.next().ok_or_else(|| format!("{arg} needs a value"))?;
                let flag = match arg.as_str() {
                    "--data-binary" => DataFlag::Binary,
                    "--data-raw" => DataFlag::Raw,
                    "--data-urlencode" => DataFlag::UrlEncode,
                    _ => DataFlag::Data,
                };
                parsed.data.push(Data { value, flag });
            }
            "-F" | "--form" => {
                let arg = args.next().ok_or("--form needs NAME=CONTENT")?;
                let (part, warnings) = parse_form(&arg)?;
                parsed.form.push(part);
                parsed.warnings.extend(warnings);
            }
            "--form-string" => {
                let arg = args.next().ok_or("--form-string needs NAME=VALUE")?;
                let (name, value) = arg
                    .split_once('=')
                    .ok_or_else(|| format!("--form-string: expected NAME=VALUE, got {arg:?}"))?;
                parsed.form.push(FormPart {
                    name: name.to_string(),
                    content: FormContent::Text(value.to_string()),
                    mime: None,
                    file_name: None,
                    headers: Vec::new(),
                });
            }
            "-X" | "--request" => {
                let method = args.next().ok_or("--request needs a METHOD")?;
                let valid = http::Method::from_bytes(method.as_bytes());
                parsed.method =
                    Some(valid.map_err(|_| format!("--request: not a method: {method:?}"))?);
            }
            "-T" | "--upload-file" => {
                parsed.upload = Some(args.next().ok_or("--upload-file needs a FILE")?)
            }
            "-o" | "--output" => parsed.output = Some(args.next().ok_or("--output needs a FILE")?),
            "-O" | "--remote-name" => remote_name = true,
            "-G" | "--get" => data_in_the_query = true,
            "--ca" => parsed.ca = Some(args.next().ok_or("--ca needs a PEM file")?),
            "--cacert" => parsed.cacert = Some(args.next().ok_or("--cacert needs a PEM file")?),
            "-k" | "--insecure" => parsed.insecure = true,
            "-E" | "--cert" => parsed.cert = Some(args.next().ok_or("--cert needs a PEM file")?),
            // Redirects are followed by default; curl's flag to follow
            // them says nothing more.
            "-L" | "--location" => {}
            // As curl's: the heads shown as `-i` shows them, each
            // redirect hop's too.
            "-I" | "--head" => {
                parsed.head = true;
                parsed.include = true;
            }
            "--key" => parsed.key = Some(args.next().ok_or("--key needs a PEM file")?),
            "-x" | "--proxy" => proxy = Some(args.next().ok_or("--proxy needs a URL")?),
            "-U" | "--proxy-user" => {
                parsed.proxy_user = Some(args.next().ok_or("--proxy-user needs USER[:PASSWORD]")?)
            }
            "--no-proxy" => parsed.no_proxy = true,
            "--noproxy" => {
                parsed.noproxy = Some(
                    args.next()
                        .ok_or("--noproxy needs a LIST of hosts ('*': all)")?,
                )
            }
            "--resolve" => parsed.resolve.push(parse_resolve(
                &args.next().ok_or("--resolve needs HOST:PORT:ADDR")?,
            )?),
            "--http2" | "--http1.1" | "--http2-prior-knowledge" => {
                let versions = match arg.as_str() {
                    "--http2" => Versions::Http2,
                    "--http1.1" => Versions::Http11,
                    _ => Versions::Http2PriorKnowledge,
                };
                // The same one again is no conflict.
                if ![Versions::Negotiated, versions].contains(&parsed.versions) {
                    return Err("--http2, --http1.1 and --http2-prior-knowledge: choose one".into());
                }
                parsed.versions = versions;
            }
            "--max-redirects" | "--max-redirs" => {
                let max = args.next();
                // curl's -1: no limit.
                parsed.max_redirects = match max.as_deref() {
                    Some("-1") => Some(usize::MAX),
                    _ => Some(number(&arg, max)?),
                }
            }
            "--no-decompress" | "--raw" => parsed.no_decompress = true,
            "--compressed" => parsed.no_decompress = false,
            "-i" | "--include" => parsed.include = true,
            "-s" | "--silent" => parsed.silent = true,
            "-S" | "--show-error" => parsed.show_error = true,
            "-f" | "--fail" => parsed.fail = true,
            "-w" | "--write-out" => {
                let format = args.next().ok_or("--write-out needs a FORMAT")?;
                parsed.write_out = Some(match format.strip_prefix('@') {
                    Some(path) => {
                        String::from_utf8_lossy(&read_named("--write-out @", path)?).into_owned()
                    }
                    None => format,
                });
            }
            "--cookies" => parsed.cookie = parsed.cookie.or(Some(String::new())),
            "-b" | "--cookie" => {
                let cookies = args.next().ok_or("--cookie needs 'NAME=VALUE'")?;
                if let Some(bad) = cookie_pairs(&cookies).find(|c| !c.contains('=')) {
                    return Err(format!("--cookie: expected NAME=VALUE, got {bad:?}"));
                }
                // Given again, the cookies add up (as in curl).
                parsed.cookie = Some(match parsed.cookie.take() {
                    Some(earlier) => format!("{earlier}; {cookies}"),
                    None => cookies,
                })
            }
            "--max-body-bytes" | "--max-filesize" => {
                parsed.max_body_bytes = Some(number(&arg, args.next())?)
            }
            "--retries" => parsed.retries = Some(number(&arg, args.next())?),
            "--hedge-after" => parsed.hedge_after = Some(millis("--hedge-after", args.next())?),
            "-u" | "--user" => {
                parsed.user = Some(args.next().ok_or("--user needs USER[:PASSWORD]")?)
            }
            flag if flag.starts_with('-') && flag != "-" => {
                return Err(format!("unknown option {flag}"))
            }
            _ => take_url(&mut url, arg)?,
        }
    }
    if parsed.help {
        return Ok(parsed);
    }
    parsed.given_url = url.ok_or("missing URL")?;
    parsed.url = with_curls_scheme(parsed.given_url.clone());
    // `-G`: no body, but a query; the method follows.
    if data_in_the_query {
        parsed.query = std::mem::take(&mut parsed.data);
    }
    if !parsed.data.is_empty() && parsed.upload.is_some() {
        return Err("--data and --upload-file both give a body: choose one".into());
    }
    if !parsed.form.is_empty()
        && (!parsed.data.is_empty() || !parsed.query.is_empty() || parsed.upload.is_some())
    {
        return Err("--form and --data, --get or --upload-file: choose one".into());
    }
    // As curl: a HEAD request sends no body.
    if parsed.head
        && (!parsed.data.is_empty() || parsed.upload.is_some() || !parsed.form.is_empty())
    {
        return Err("--head and a body (--data, --upload-file): choose one".into());
    }
    // As curl: `--cert` alone names a file with the key in it too, but a
    // key is nothing without its certificate.
    if parsed.key.is_some() && parsed.cert.is_none() {
        return Err("--key needs --cert".into());
    }
    if remote_name {
        if parsed.output.is_some() {
            return Err("--output and --remote-name both name the file: choose one".into());
        }
        parsed.output = Some(remote_file_name(&parsed.url)?);
    }
    parsed.proxy = proxy
        .as_deref()
        .map(|url| proxy_flag(url, parsed.proxy_user.as_deref()))
        .transpose()?;
    // A URL the cookie jar cannot read is a bad argument, as one the client
    // refuses is (`is_unusable_url`): whether `-b` is given or not.
    if parsed.cookie.is_some() {
        let url = tickless::cookie::Url::parse(&parsed.url)
            .map_err(|e| format!("the URL {:?}: {e}", parsed.url))?;
        parsed.cookie_url = Some(url);
    }
    Ok(parsed)
}

fn main() -> ExitCode {
    // `args_os`, not `args`: an argument that is not UTF-8 (a Latin-1 file
    // name, a header's obs-text) is a bad argument, not a panic (exit 101).
    let args = std::env::args_os()
        .skip(1)
        .map(|arg| {
            arg.into_string()
                .map_err(|arg| format!("not UTF-8, which get takes alone: {arg:?}"))
        })
        .collect::<Result<Vec<_>, _>>()
        .and_then(|args| parse_args(args.into_iter()));
    let args = match args {
        Ok(args) if args.help => {
            say(std::io::stdout(), USAGE);
            return ExitCode::SUCCESS;
        }
        Ok(args) => args,
        Err(message) => {
            say(std::io::stderr(), &format!("get: {message}\n{USAGE}"));
            return ExitCode::from(2);
        }
    };
    // As curl's `-s`: the exit status alone, unless `-S` says to tell.
    let tell_errors = !args.silent || args.show_error;
    let tell = |message: String| {
        if tell_errors {
            say(std::io::stderr(), &message);
        }
    };
    let write_out = args.write_out.clone();
    let mut transfer = Transfer::default();
    let (exit, error) = match run(args, &mut transfer) {
        Ok(()) => (0, None),
        Err(error) if error.is::<FailedStatus>() => {
            tell(format!("get: {error}"));
            (22, Some(error.to_string()))
        }
        Err(error) if is_unusable_url(&*error) => {
            tell(format!("get: {}\n{USAGE}", WithCauses(&*error)));
            (2, Some(WithCauses(&*error).to_string()))
        }
        Err(error) => {
            tell(format!("get: {}", WithCauses(&*error)));
            (1, Some(WithCauses(&*error).to_string()))
        }
    };
    if let Some(format) = write_out {
        transfer.exit = exit;
        transfer.error = error;
        let (parts, unknown) = written_out(&format, &transfer);
        // Told even with -s, as curl tells it.
        for name in unknown {
            say(
                std::io::stderr(),
                &format!("get: unknown --write-out variable: '{name}'"),
            );
        }
        // A reader gone from either changes no exit status, as curl's.
        for (to_stderr, text) in parts {
            let _ = match to_stderr {
                true => std::io::stderr().lock().write_all(text.as_bytes()),
                false => {
                    let mut stdout = std::io::stdout().lock();
                    stdout
                        .write_all(text.as_bytes())
                        .and_then(|()| stdout.flush())
                }
            };
        }
    }
    ExitCode::from(exit)
}

/// What a transfer came to, for `-w`'s variables ([`written_out`]):
/// filled as [`run`] goes — the answer's, or, for a redirect chain the
/// client stopped, the redirect's not followed, as curl's
/// ([`IncludedHeads::tell_stopped_chain`]) — and with its exit status and
/// error by `main`.
#[derive(Default)]
struct Transfer {
    /// The URL as given (`%{url}`): without a `scheme://` if it had none.
    asked: String,
    /// The URL asked for, then the one that answered.
    url: String,
    /// The answer's status, version, `Content-Type` and server, once it
    /// came.
    status: Option<http::StatusCode>,
    version: Option<http::Version>,
    content_type: Option<String>,
    remote: Option<std::net::SocketAddr>,
    /// Redirects followed on the way.
    redirects: usize,
    /// Bytes of the body written.
    size_download: u64,
    /// Since the request was sent: to its answer's head, to the end.
    time_starttransfer: Option<Duration>,
    time_total: Option<Duration>,
    /// The answer's header fields as the server sent them, once it came
    /// (`%{header_json}`).
    fields: Option<http::HeaderMap>,
    exit: u8,
    error: Option<String>,
}

/// `-w`: `format` with curl's `--write-out` variables in it replaced by
/// what `transfer` came to ([`write_out_variable`]; `%{json}` all of them
/// at once, `%{header_json}` the answer's header fields) — read as curl
/// 7.88 reads it: `%%` is `%`, `\n`, `\r`
/// and `\t` what C's are, and a `%` or `\` before anything else is
/// written as it is, with what follows it (`\\n` too), as is a `%{` that
/// no `}` after it closes (what follows it is read on). `%{stderr}` sends
/// what follows to standard error, `%{stdout}` back: the text to write,
/// in parts, each `true` for standard error. A variable get does not know
/// is written as nothing, and its name returned (curl tells it on
/// standard error, even with `-s`).
fn written_out(format: &str, transfer: &Transfer) -> (Vec<(bool, String)>, Vec<String>) {
    let (mut parts, mut unknown) = (vec![(false, String::new())], Vec::new());
    let mut rest = format;
    while let Some(at) = rest.find(['%', '\\']) {
        let text = &mut parts.last_mut().expect("never empty").1;
        text.push_str(&rest[..at]);
        let escape = &rest[at..];
        let Some(next) = escape[1..].chars().next() else {
            // Last: as it is.
            text.push_str(escape);
            rest = "";
            break;
        };
        let taken = 1 + next.len_utf8();
        rest = &escape[taken..];
        match (&escape[..1], next) {
            ("%", '%') => text.push('%'),
            ("\\", 'n') => text.push('\n'),
            ("\\", 'r') => text.push('\r'),
            ("\\", 't') => text.push('\t'),
            ("%", '{') => {
                let Some(end) = rest.find('}') else {
                    // No closing brace: `%{` as it is, and what follows
                    // read on.
                    text.push_str("%{");
                    continue;
                };
                let name = &rest[..end];
                rest = &rest[end + 1..];
                let value = match name {
                    "stderr" | "stdout" => {
                        parts.push((name == "stderr", String::new()));
                        continue;
                    }
                    "json" => write_out_json(transfer),
                    "header_json" => header_json(transfer.fields.as_ref()),
                    name => match write_out_variable(name, transfer) {
                        Some(value) => value.alone(),
                        None => {
                            unknown.push(name.to_string());
                            String::new()
                        }
                    },
                };
                text.push_str(&value);
            }
            _ => text.push_str(&escape[..taken]),
        }
    }
    parts.last_mut().expect("never empty").1.push_str(rest);
    (parts, unknown)
}

/// The value of a `-w` variable, as curl types it in `%{json}`.
enum WriteOut {
    /// A status, `000` alone when there is none, as curl writes it.
    Status(u16),
    /// A number, as it is written.
    Number(String),
    /// Text; none is empty alone, JSON's `null` in `%{json}`.
    Text(Option<String>),
}

impl WriteOut {
    /// As `%{name}` writes it alone.
    fn alone(self) -> String {
        match self {
            WriteOut::Status(status) => format!("{status:03}"),
            WriteOut::Number(number) => number,
            WriteOut::Text(text) => text.unwrap_or_default(),
        }
    }

    /// As `%{json}` writes it.
    fn json(self) -> String {
        match self {
            WriteOut::Status(status) => status.to_string(),
            WriteOut::Number(number) => number,
            WriteOut::Text(Some(text)) => json_string(text.as_bytes()),
            WriteOut::Text(None) => "null".into(),
        }
    }
}

/// The `-w` variables `get` knows, but `%{json}`, `%{header_json}` and the
/// two that say where to write, in curl's order (its names' alphabetical
/// order), which `%{json}` follows.
const WRITE_OUT_VARIABLES: [&str; 14] = [
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

/// The value of the `-w` variable `name` for `transfer`, as curl 7.88
/// gives it — a time not reached (no answer) 0, no status 0, no server's
/// address empty and its port 0 — or `None` for a name `get` does not
/// know.
fn write_out_variable(name: &str, transfer: &Transfer) -> Option<WriteOut> {
    let seconds = |time: Option<Duration>| {
        WriteOut::Number(format!("{:.6}", time.unwrap_or_default().as_secs_f64()))
    };
    let number = |n: u64| WriteOut::Number(n.to_string());
    let text = |text: &str| WriteOut::Text(Some(text.to_string()));
    Some(match name {
        "http_code" | "response_code" => {
            WriteOut::Status(transfer.status.map_or(0, |s| s.as_u16()))
        }
        "http_version" => text(match transfer.version {
            Some(http::Version::HTTP_10) => "1",
            Some(http::Version::HTTP_11) => "1.1",
            Some(http::Version::HTTP_2) => "2",
            Some(http::Version::HTTP_3) => "3",
            _ => "0",
        }),
        "size_download" => number(transfer.size_download),
        "time_starttransfer" => seconds(transfer.time_starttransfer),
        "time_total" => seconds(transfer.time_total),
        "url" => text(&transfer.asked),
        "url_effective" => text(&transfer.url),
        "num_redirects" => number(transfer.redirects as u64),
        "content_type" => WriteOut::Text(transfer.content_type.clone()),
        "remote_ip" => text(
            &transfer
                .remote
                .map(|a| a.ip().to_string())
                .unwrap_or_default(),
        ),
        "remote_port" => number(transfer.remote.map_or(0, |a| a.port()).into()),
        "exitcode" => number(transfer.exit.into()),
        "errormsg" => WriteOut::Text(transfer.error.clone()),
        _ => return None,
    })
}

/// `%{json}`: every variable of [`WRITE_OUT_VARIABLES`] as a JSON object,
/// in curl's order, each typed as curl types it (a status, a size, a count,
/// an exit status, a port and a time are numbers; text none is `null`).
/// curl's other keys are left out: what `get` does not track (the local
/// address, the sizes of the heads and the request, speeds, the other
/// times, the connections made, TLS's verify results, the method, the
/// scheme, the redirect not followed, the output file's name) and what is
/// curl's own (`curl_version`, `urlnum`, FTP's and `certs`).
fn write_out_json(transfer: &Transfer) -> String {
    let fields: Vec<String> = WRITE_OUT_VARIABLES
        .iter()
        .map(|&name| {
            let value = write_out_variable(name, transfer).expect("a variable get knows");
            format!("{}:{}", json_string(name.as_bytes()), value.json())
        })
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// `%{header_json}`: the answer's header fields as the server sent them,
/// as curl writes them — a JSON object, a name (in lower case) for each
/// field in the order they came, with every value of that name in an
/// array, one name a line (`{"a":["1","2"],\n"b":["3"]\n}`), `{\n}`
/// without an answer. Where curl 7.88 errs, it is not followed: it loses
/// the fields between two of the same name, writes an empty value as
/// `"\r"`, a control character as `u0001` (no backslash) and a byte not
/// ASCII as `uffffffe9`; here every field is there, and the strings are
/// JSON's, as later curls write them ([`json_string`]).
fn header_json(fields: Option<&http::HeaderMap>) -> String {
    let names = fields.into_iter().flat_map(|fields| {
        fields.keys().map(|name| {
            let values: Vec<String> = fields
                .get_all(name)
                .iter()
                .map(|value| json_string(value.as_bytes()))
                .collect();
            format!(
                "{}:[{}]",
                json_string(name.as_str().as_bytes()),
                values.join(",")
            )
        })
    });
    format!("{{{}\n}}", names.collect::<Vec<_>>().join(",\n"))
}

/// `bytes` as a JSON string, quoted, as curl 8 writes one: `\\`, `\"`,
/// `\b`, `\f`, `\n`, `\r`, `\t`, another control character as `\u00XX`,
/// UTF-8 as it is, and each byte that is not UTF-8 as U+FFFD.
fn json_string(bytes: &[u8]) -> String {
    let mut json = String::from("\"");
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => json.push_str("\\\\"),
                '"' => json.push_str("\\\""),
                '\u{8}' => json.push_str("\\b"),
                '\u{c}' => json.push_str("\\f"),
                '\n' => json.push_str("\\n"),
                '\r' => json.push_str("\\r"),
                '\t' => json.push_str("\\t"),
                c if c < ' ' => json.push_str(&format!("\\u{:04x}", c as u32)),
                c => json.push(c),
            }
        }
        for _ in chunk.invalid() {
            json.push(char::REPLACEMENT_CHARACTER);
        }
    }
    json.push('"');
    json
}

/// `-f`: the answer's status, 400 or over, which curl's `--fail` exits 22
/// for.
#[derive(Debug)]
struct FailedStatus(http::StatusCode);

impl std::fmt::Display for FailedStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the requested URL returned error: {}", self.0.as_u16())
    }
}

impl std::error::Error for FailedStatus {}

/// Whether the client refused the URL given itself (a redirect's
/// `Location` that it cannot follow is the response instead): a bad
/// argument, found before anything was sent.
fn is_unusable_url(error: &(dyn std::error::Error + 'static)) -> bool {
    use tickless::InvalidRequest;
    matches!(
        error.downcast_ref::<tickless::Error>(),
        Some(tickless::Error::InvalidRequest(
            InvalidRequest::Uri { .. }
                | InvalidRequest::Scheme(_)
                | InvalidRequest::Host(_)
                | InvalidRequest::Port(_)
        ))
    )
}

/// Writes `text` and a newline to `out` (standard error, or standard output
/// for `--help`), come what may: where it has gone (`get URL 2>&1 | head
/// -1`, `2>&-`) there is no one to tell, and the exit status must still say
/// what happened — `eprintln!` would panic instead (exit 101).
fn say(mut out: impl Write, text: &str) {
    let _ = writeln!(out, "{text}");
}

fn run(args: Args, transfer: &mut Transfer) -> Result<(), Box<dyn std::error::Error>> {
    transfer.asked = args.given_url.clone();
    transfer.url = args.url.clone();
    if let (Some(hosts), None) = (&args.noproxy, &args.proxy) {
        bypass_the_environments_proxies(hosts);
    }
    if args.proxy.is_none() && !args.no_proxy {
        read_the_environments_proxies_as_curl(args.proxy_user.as_deref());
    }
    let mut builder = tickless::Client::builder()
        .event_loops(1)
        .use_event_loop_timeouts(args.event_loop_timeouts);
    // None unless asked, as curl (zero: no request timeout).
    builder = builder.request_timeout(args.request_timeout.unwrap_or(Duration::ZERO));
    if let Some(timeout) = args.read_timeout {
        builder = builder.read_timeout(timeout);
    }
    if let Some(timeout) = args.write_timeout {
        builder = builder.write_timeout(timeout);
    }
    // curl's connect timeout bounds the whole opening: the TCP connect,
    // then (the handshake timeout) a proxy's handshake and TLS.
    if let Some(timeout) = args.connect_timeout {
        builder = builder.connect_timeout(timeout).handshake_timeout(timeout);
    }
    let roots = Roots::of(&args);
    builder = roots.trusted_by(builder)?;
    if let Some(cert) = &args.cert {
        let chain = std::fs::read(cert).map_err(|e| format!("--cert {cert}: {e}"))?;
        // Without `--key`, the key is in the same file as the chain (the
        // two parsers each take their own blocks and pass over the rest).
        let key = match &args.key {
            Some(key) => std::fs::read(key).map_err(|e| format!("--key {key}: {e}"))?,
            None => chain.clone(),
        };
        builder = builder.client_identity_pem(chain, key);
    }
    if args.no_proxy {
        builder = builder.no_proxy();
    }
    match &args.proxy {
        Some(ProxyFlag::Off) => builder = builder.no_proxy(),
        Some(ProxyFlag::Through(proxy)) => {
            let mut proxy = proxy.clone();
            // curl's rule: the hosts that bypass a proxy, even one given with
            // `-x`, are `--noproxy`'s, else the environment's — unless
            // `--no-proxy` says the environment is not to be read.
            let environments = || (!args.no_proxy).then(environments_no_proxy).flatten();
            if let Some(hosts) = args.noproxy.clone().or_else(environments) {
                proxy = proxy.no_proxy(&hosts);
            }
            builder = builder.proxy(proxy);
        }
        None => {}
    }
    // curl's rule: an entry is for HOST at PORT, and for every connection
    // of the transfer there — the URL's, the proxy's, a redirect's; a
    // later entry for the same HOST:PORT replaces an earlier one. Its
    // addresses are at port 0: PORT.
    for entry in &args.resolve {
        builder = builder.resolve_port(&entry.host, entry.port, &entry.addrs);
    }
    if !args.silent {
        for warning in &args.warnings {
            say(std::io::stderr(), &format!("get: warning: {warning}"));
        }
    }
    if args.insecure {
        if !args.silent {
            say(
                std::io::stderr(),
                "get: --insecure: the server's certificate is not checked",
            );
        }
        builder = builder.danger_accept_invalid_certs(true);
    }
    builder = match args.versions {
        Versions::Negotiated => builder,
        Versions::Http2 => builder.http2_only(),
        Versions::Http11 => builder.http1_only(),
        Versions::Http2PriorKnowledge => builder.http2_prior_knowledge(),
    };
    if let Some(max) = args.max_redirects {
        builder = builder.redirect(match max {
            0 => tickless::redirect::Policy::none(),
            max => tickless::redirect::Policy::limited(max),
        });
    }
    if let Some(retries) = args.retries {
        builder = builder.retry(tickless::retry::Policy::attempts(retries.saturating_add(1)));
    }
    if let Some(delay) = args.hedge_after {
        builder = builder.hedge(tickless::hedge::Policy::after(delay));
    }
    // The client's own `Accept-Encoding` goes with its decompressing, and
    // only with it: dropped, as by curl without `--compressed`, a body is
    // printed as it came.
    if args.no_decompress || suppressed(&args.headers, &http::header::ACCEPT_ENCODING) {
        builder = builder.no_decompress();
    }
    let no_agent = args
        .user_agent
        .as_ref()
        .is_some_and(|agent| agent.is_empty());
    if no_agent || suppressed(&args.headers, &http::header::USER_AGENT) {
        builder = builder.no_user_agent();
    }
    if let Some(max) = args.max_body_bytes {
        builder = builder.max_body_bytes(max);
    }
    if let (Some(cookies), Some(url)) = (&args.cookie, &args.cookie_url) {
        let jar = std::sync::Arc::new(tickless::cookie::Jar::new());
        // As curl: `-H 'Cookie:'` drops the ones given here; those the
        // server sets are still sent on the next hops.
        if !suppressed(&args.headers, &http::header::COOKIE) {
            for cookie in cookie_pairs(cookies) {
                // For the whole host, as curl sends them: without a path, a
                // cookie would be for the URL's directory alone, and lost on
                // a redirect out of it (`/app/login` to `/home`).
                jar.add_cookie_str(&format!("{cookie}; Path=/"), url);
            }
        }
        builder = builder.cookie_provider(jar);
    }
    // The headers `get` sets, each once, as the request is given them
    // below: its own — curl's `Accept`, `-A`'s and `-e`'s (but empty:
    // none), a form's `Content-Type` as curl sends it — unless a header
    // gives or drops the name, then the headers given.
    let form = (!args.data.is_empty())
        .then(|| http::HeaderValue::from_static("application/x-www-form-urlencoded"));
    let own = [
        (
            http::header::ACCEPT,
            Some(http::HeaderValue::from_static("*/*")),
        ),
        (http::header::USER_AGENT, args.user_agent.clone()),
        (http::header::REFERER, args.referer.clone()),
        (http::header::CONTENT_TYPE, form),
    ];
    let mut headers: Vec<_> = own
        .into_iter()
        .filter_map(|(name, value)| {
            let value = value.filter(|value| !value.is_empty());
            unless_given(&args.headers, &name, value).map(|value| (name, value))
        })
        .collect();
    for header in &args.headers {
        if let Header::Send(name, value) = header {
            headers.push((name.clone(), value.clone()));
        }
    }
    if args.verbose {
        builder = builder.listener(std::sync::Arc::new(Verbose { roots }));
    }
    let client = builder
        .build()
        .map_err(|e| format!("cannot start the client: {e}"))?;
    let body = !args.data.is_empty() || !args.form.is_empty();
    let method = match (args.method, !body, &args.upload) {
        (Some(method), _, _) => method,
        (None, _, _) if args.head => http::Method::HEAD,
        (None, false, _) => http::Method::POST,
        (None, true, Some(_)) => http::Method::PUT,
        (None, true, None) => http::Method::GET,
    };
    // As curl: `'Authorization:'` sends none, not even one for the URL's
    // credentials.
    let authorization = http::header::AUTHORIZATION;
    let url = if suppressed(&args.headers, &authorization) {
        without_userinfo(&args.url)
    } else {
        args.url.clone()
    };
    let url = match args.query.as_slice() {
        [] => url,
        query => with_query(&url, &data_body(query)?),
    };
    let url = match args.upload.as_deref() {
        Some(path) if path != "-" => upload_url(&url, path),
        _ => url,
    };
    transfer.url = url.clone();
    let mut request = client.request(method, url);
    if !args.data.is_empty() {
        request = request.body(data_body(&args.data)?);
    }
    match args.upload.as_deref() {
        // As `-T FILE` when standard input is a regular file (`< FILE`):
        // its length, and read again for a 307 or 308, as curl rewinds it.
        // Anything else (a pipe) goes chunked, once; a closed one, which
        // cannot be duplicated, empty, as `std::io::stdin` reads it.
        Some("-") => {
            use std::os::fd::AsFd;
            let upload = match std::io::stdin().as_fd().try_clone_to_owned() {
                Ok(stdin) => tickless::Upload::from_file(std::fs::File::from(stdin))
                    .map_err(|e| format!("--upload-file -: {e}"))?,
                Err(_) => tickless::Upload::from_reader(std::io::stdin(), None),
            };
            request = request.body(upload);
        }
        Some(path) => {
            let file =
                std::fs::File::open(path).map_err(|e| format!("--upload-file {path}: {e}"))?;
            request = request.body(tickless::Upload::from_file(file)?);
        }
        None => {}
    }
    for (name, value) in headers {
        request = request.header(name, value);
    }
    // After the headers: its `Content-Type`, which names its boundary,
    // replaces one given.
    if !args.form.is_empty() {
        request = request.multipart(form_of(&args.form)?);
    }
    // As curl: an `Authorization` given with `--header` is sent instead
    // of `--user`'s, and `'Authorization:'` sends none.
    if let Some(user) = unless_given(&args.headers, &authorization, args.user.as_ref()) {
        let (user, password) = match user.split_once(':') {
            Some((user, password)) => (user, Some(password)),
            None => (user.as_str(), None),
        };
        request = request.basic_auth(user, password);
    }
    // `-i`'s heads, and `-w`'s redirects, are told to it.
    let told = (args.include || args.write_out.is_some())
        .then(|| std::sync::Arc::new(IncludedHeads::default()));
    if let Some(told) = &told {
        request = request.listener(told.clone());
    }
    let included_heads = told.as_ref().filter(|_| args.include);
    let sent = std::time::Instant::now();
    let answer = request.send().wait();
    transfer.redirects = told.as_ref().map_or(0, |told| told.text().redirects);
    let mut response = match answer {
        Ok(response) => response,
        Err(error) => {
            transfer.time_total = Some(sent.elapsed());
            // As curl's: the redirect not followed is the answer `-w`
            // tells of.
            if let (Some(told), tickless::Error::Redirect { .. }) = (&told, &error) {
                told.tell_stopped_chain(transfer);
            }
            if let (Some(heads), tickless::Error::Redirect { .. }) = (included_heads, &error) {
                write_stopped_chain(heads, args.output.as_deref())?;
            }
            return Err(error.into());
        }
    };
    transfer.time_starttransfer = Some(sent.elapsed());
    transfer.url = response.url().to_string();
    transfer.status = Some(response.status());
    transfer.version = Some(response.version());
    transfer.remote = Some(response.remote_addr());
    transfer.content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
    // As the server sent them, as told (with `-w`).
    transfer.fields = told.as_ref().and_then(|told| {
        let text = told.text();
        let answer = text.attempts.get(&response.attempt_id())?;
        Some(answer.fields.clone())
    });

    let status = response.status();
    // The reason phrase as the server sent it, bytes that may not be
    // UTF-8 (obs-text); the client keeps it only when it is not the
    // canonical one. HTTP/2 has none (curl prints `HTTP/2 200`).
    let reason = match (
        response.extensions().get::<tickless::ReasonPhrase>(),
        response.version(),
    ) {
        (Some(sent), _) => sent.as_bytes(),
        (None, http::Version::HTTP_2) => b"",
        (None, _) => status.canonical_reason().unwrap_or("").as_bytes(),
    };
    // `-i`: the redirect hops' heads and the interim ones, then the final
    // one, as `curl -iL` prints them: as the server sent them, a decoded
    // body's `Content-Encoding` and `Content-Length` among them (which the
    // response has no more). Without it, the response's head.
    let (mut head, told) =
        included_heads.map_or_else(Default::default, |heads| heads.take(response.attempt_id()));
    if told.is_empty() {
        head.extend(response_head_text(
            "",
            response.version(),
            status,
            reason,
            response.headers(),
        ));
    } else {
        head.extend(told);
    }
    // Where the body goes, opened only once something is to be written
    // there: with `--fail` and an error status, no file is made unless
    // `-i` writes the head into it.
    let mut out = None;
    match &args.output {
        // With `-i`, the heads go where the body goes, as curl writes
        // them: into `--output`'s file too, before the body.
        Some(path) if args.include => {
            let out = out.insert(output(path)?);
            out.write_all(&head)?;
        }
        // With -v, the `<` lines have shown it there (`Verbose`); with
        // -s, standard error is to be quiet, as curl's is.
        Some(_) if args.verbose || args.silent => {}
        // With --output the body goes there, and the head to standard
        // error, for the one who watches: like a message, it is written
        // come what may (see `say`), and the body still goes to its file.
        Some(_) => {
            let mut stderr = std::io::stderr().lock();
            let _ = stderr.write_all(&head).and_then(|()| stderr.flush());
        }
        None => {
            let mut stdout = Named("standard output".into(), std::io::stdout().lock());
            stdout.write_all(&head)?;
            stdout.flush()?;
        }
    }
    // As curl's `--fail`: the head told, no body written, no file made
    // (but the one `-i` wrote the head into, as curl 7.88 leaves it).
    if args.fail && status.as_u16() >= 400 {
        if let Some(mut out) = out {
            out.flush()?;
        }
        transfer.time_total = Some(sent.elapsed());
        return Err(FailedStatus(status).into());
    }
    let mut out = match out {
        Some(out) => out,
        None => output(args.output.as_deref().unwrap_or("-"))?,
    };
    // As curl's `-I`: the head alone, even of an answer with a body (`-I
    // -X GET`); the client closes the connection it is left on.
    let copied = match args.head {
        true => Ok(0),
        false => std::io::copy(
            response.body_mut(),
            &mut Counted(&mut out, &mut transfer.size_download),
        ),
    };
    transfer.time_total = Some(sent.elapsed());
    copied?;
    out.flush()?;
    drop(response);
    client.close();
    Ok(())
}

/// A writer that counts the bytes written through it into its `u64`:
/// `-w`'s `%{size_download}`, also of a body whose copy failed midway.
struct Counted<'a, W>(W, &'a mut u64);

impl<W: Write> Write for Counted<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let written = self.0.write(buf)?;
        *self.1 += written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// The roots a server's certificate must chain to: the bundled Mozilla
/// roots unless `--cacert` replaces them, as curl's `--cacert` replaces its
/// default bundle, and the CA certificates of `--cacert`'s and `--ca`'s
/// files.
struct Roots {
    /// `--cacert`'s file, then `--ca`'s, with the flag that named each.
    files: Vec<(&'static str, String)>,
    bundled: bool,
}

impl Roots {
    fn of(args: &Args) -> Roots {
        let files = [("--cacert", &args.cacert), ("--ca", &args.ca)]
            .into_iter()
            .filter_map(|(flag, path)| Some((flag, path.clone()?)))
            .collect();
        Roots {
            files,
            bundled: args.cacert.is_none(),
        }
    }

    /// `builder` trusting these roots: the files read now, an error naming
    /// the flag if one cannot be.
    fn trusted_by(
        &self,
        mut builder: tickless::ClientBuilder,
    ) -> Result<tickless::ClientBuilder, String> {
        if !self.bundled {
            builder = builder.tls_roots(tickless::rustls::RootCertStore::empty());
        }
        for (flag, path) in &self.files {
            let pem = std::fs::read(path).map_err(|e| format!("{flag} {path}: {e}"))?;
            builder = builder.add_root_certificate(pem);
        }
        Ok(builder)
    }

    /// `-v`'s account of them, in curl's words: a `*  CAfile:` line a file
    /// (curl's `*  CApath:` then says where else it looks: here nowhere,
    /// or in the bundled roots).
    fn told(&self) -> String {
        if self.files.is_empty() {
            return "*  CA: the bundled Mozilla roots\n".into();
        }
        let mut text = String::new();
        for (_, path) in &self.files {
            text.push_str(&format!("*  CAfile: {path}\n"));
        }
        text.push_str(match self.bundled {
            true => "*  CApath: none, and the bundled Mozilla roots\n",
            false => "*  CApath: none\n",
        });
        text
    }
}

/// `-i`: the heads of a redirect chain the client stopped (too long, a
/// loop, `https` to `http`), written where the heads go — standard
/// output, or `--output`'s file — as `curl -iL` writes them before its
/// error.
fn write_stopped_chain(
    heads: &IncludedHeads,
    output_path: Option<&str>,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut out = output(output_path.unwrap_or("-"))?;
    out.write_all(&heads.of_a_stopped_chain())?;
    Ok(out.flush()?)
}

/// Where `--output PATH` writes (`-`: standard output), opened now: a
/// file is made, or emptied, here.
fn output(path: &str) -> Result<Box<dyn Write>, Box<dyn std::error::Error>> {
    Ok(match path {
        "-" => Box::new(Named("standard output".into(), std::io::stdout().lock())),
        path => Box::new(Named(
            format!("--output {path}"),
            std::io::BufWriter::new(
                std::fs::File::create(path).map_err(|e| format!("--output {path}: {e}"))?,
            ),
        )),
    })
}

/// `--noproxy LIST` for the proxies of the environment: as curl's, the
/// list takes the place of `no_proxy`/`NO_PROXY`. The client takes a list
/// for a proxy it is given ([`tickless::Proxy::no_proxy`]), and for those
/// of the environment reads it from the variables, when it is built — so
/// it goes there: in `no_proxy`, the name the client reads first, with
/// `NO_PROXY` gone (the client reads a blank `no_proxy` as unset and falls
/// through to `NO_PROXY`: with that gone, an empty list, as curl's
/// `--noproxy ""`, bypasses nothing, and every host goes through the
/// proxy). Called before the client is built, while this process has no
/// other thread to read the environment meanwhile.
fn bypass_the_environments_proxies(hosts: &str) {
    std::env::remove_var("NO_PROXY");
    std::env::set_var("no_proxy", hosts);
}

/// The environment's list of the hosts that bypass a proxy, as curl reads
/// it for any proxy, one given with `-x` too: `no_proxy` if it is set and
/// not blank, else `NO_PROXY` — as the client reads the environment's for
/// the proxies it finds there itself (curl's `curl_getenv` takes an empty
/// value for none; a blank one is none here too, so that `-x` and
/// `http_proxy` agree). A value that is not Unicode is read with U+FFFD
/// for what is not UTF-8, as the client reads it.
fn environments_no_proxy() -> Option<String> {
    ["no_proxy", "NO_PROXY"].into_iter().find_map(|name| {
        let hosts = std::env::var_os(name)?.to_string_lossy().into_owned();
        (!hosts.trim().is_empty()).then_some(hosts)
    })
}

/// The proxies of the environment, as curl reads them: one named without
/// a port is at 1080, as one given with `-x` ([`with_curl_proxy_port`]),
/// where the client would take the scheme's (80), and one whose URL has no
/// credentials takes `-U`'s ([`with_proxy_user`]). The client reads the
/// variables when it is built, so they go there, into each variable
/// it reads a proxy from, trimmed as the
/// client trims it. A blank value is left as it is (it is no proxy: the
/// client falls through to the next name); one that is not Unicode is read
/// as the client reads it, with U+FFFD for what is not UTF-8. Every
/// variable is rewritten by the same rule, so `http_proxy` and
/// `HTTP_PROXY` that were equal stay
/// equal: in a CGI program the client takes an `http_proxy` equal to
/// `HTTP_PROXY` for the request's `Proxy:` header, and must go on doing so.
/// Called before the client is built, while this process has no other
/// thread to read the environment meanwhile.
fn read_the_environments_proxies_as_curl(proxy_user: Option<&str>) {
    for name in [
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
    ] {
        let Some(value) = std::env::var_os(name) else {
            continue;
        };
        let value = value.to_string_lossy();
        let value = value.trim();
        if !value.is_empty() {
            std::env::set_var(
                name,
                with_proxy_user(&with_curl_proxy_port(value), proxy_user),
            );
        }
    }
}

/// The URL an upload of `path` goes to: `url`, or, if its path ends with
/// `/` (names no file), the file's name after it, percent-encoded, as curl
/// does. The URL's path is read as text ([`request_path`]), not as an
/// `http::Uri`: `http` refuses URLs the client takes (a space in the path,
/// a host that is not ASCII), and a directory among them must get the name
/// too.
fn upload_url(url: &str, path: &str) -> String {
    let Some(name) = std::path::Path::new(path).file_name() else {
        return url.to_owned();
    };
    let Some(dir) = request_path(url) else {
        return url.to_owned();
    };
    let path_end = dir.end;
    let dir = &url[dir];
    if !dir.is_empty() && !dir.ends_with('/') {
        return url.to_owned();
    }
    let slash = if dir.is_empty() { "/" } else { "" };
    format!(
        "{}{slash}{}{}",
        &url[..path_end],
        percent_encoded(name.as_encoded_bytes()),
        &url[path_end..]
    )
}

/// `url` with `-G`'s `query` added to its query (after a `&` if it has
/// one, else after a `?`), before its fragment, as curl adds it — but for
/// what a URL cannot hold, percent-encoded here (a space, a control, a
/// byte not ASCII, and a `#`, which would end the query), where curl 7.88
/// sends the query cut at a `#` and refuses a space (exit 3).
fn with_query(url: &str, query: &[u8]) -> String {
    const NOT_IN_A_QUERY: &percent_encoding::AsciiSet =
        &percent_encoding::CONTROLS.add(b' ').add(b'#');
    let end = url.find('#').unwrap_or(url.len());
    let separator = if url[..end].contains('?') { '&' } else { '?' };
    let query = percent_encoding::percent_encode(query, NOT_IN_A_QUERY);
    format!("{}{separator}{query}{}", &url[..end], &url[end..])
}

/// `-O`'s file name: the last segment of `url`'s path, read as text
/// ([`request_path`]), as written (not percent-decoded, as curl's), which
/// must name a file: not empty, `.` or `..`.
fn remote_file_name(url: &str) -> Result<String, String> {
    let path = request_path(url).map_or("", |path| &url[path]);
    let name = path.rsplit('/').next().unwrap_or_default();
    if ["", ".", ".."].contains(&name) {
        return Err(format!(
            "--remote-name: the URL {url:?} names no file for its body to go to"
        ));
    }
    Ok(name.to_owned())
}

/// Where the authority of `url`, read as text, is: after its `scheme://`
/// (from its start if it has none, as a proxy's may not: `-x host:3128`),
/// up to the first `/`, `?` or `#`.
fn authority(url: &str) -> std::ops::Range<usize> {
    let start = url.find("://").map_or(0, |at| at + "://".len());
    let rest = &url[start..];
    start..start + rest.find(['/', '?', '#']).unwrap_or(rest.len())
}

/// The [`authority`] of a URL to request; none without a `scheme://`: such
/// text is left as it is, for the request to refuse.
fn request_authority(url: &str) -> Option<std::ops::Range<usize>> {
    url.contains("://").then(|| authority(url))
}

/// Where the path of a URL to request, read as text, is: from the end of
/// its [authority](request_authority) to the first `?` or `#`.
fn request_path(url: &str) -> Option<std::ops::Range<usize>> {
    let start = request_authority(url)?.end;
    let rest = &url[start..];
    Some(start..start + rest.find(['?', '#']).unwrap_or(rest.len()))
}

/// `url` without the credentials in its authority (`user:pass@`, up to its
/// last `@`, as a URL is read): `-H 'Authorization:'` drops them too.
fn without_userinfo(url: &str) -> String {
    let Some(authority) = request_authority(url) else {
        return url.to_owned();
    };
    match url[authority.clone()].rfind('@') {
        Some(at) => format!(
            "{}{}",
            &url[..authority.start],
            &url[authority.start + at + 1..]
        ),
        None => url.to_owned(),
    }
}

/// RFC 3986's unreserved characters: all that a file's name keeps as it
/// is in the URL it is uploaded to.
const UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `bytes` with all but RFC 3986's unreserved characters percent-encoded.
fn percent_encoded(bytes: &[u8]) -> String {
    percent_encoding::percent_encode(bytes, UNRESERVED).to_string()
}

/// A writer whose errors name it ("standard output: Broken pipe (os error
/// 32)" when the reader of `get | head` has gone, "--output FILE: No space
/// left on device"), so that they are told apart from the body's own read
/// errors, which come through the same copy.
struct Named<W>(String, W);

impl<W: Write> Write for Named<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.1.write(buf).map_err(|e| named(&self.0, e))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.1.flush().map_err(|e| named(&self.0, e))
    }
}

fn named(what: &str, error: std::io::Error) -> std::io::Error {
    std::io::Error::new(error.kind(), format!("{what}: {error}"))
}

/// `-i`: the heads printed, as `curl -iL` prints them — each redirect
/// hop's interim (1xx) heads and its own head, then the answer's interim
/// heads and its final head — as the server sent them (the response's own
/// head has lost a decoded body's `Content-Encoding` and `Content-Length`),
/// as `get` prints a head ([`response_head_text`], no prefix). The client tells the heads of
/// every attempt — a hedged request's copies run side by side, their
/// events interleaved; a retried one's attempts follow each other — each
/// with the attempt's id ([`tickless::RequestInfo::attempt_id`]): they are
/// kept by attempt, a redirect moves those of the attempt it followed
/// (the hop's answer) to the earlier hops, and only the answer's
/// ([`tickless::Response::attempt_id`]) are printed, as curl prints the
/// heads of the transfer it returns — never those of an attempt that
/// lost, or failed, told before or after the answer's. An attempt the
/// client sent again by itself on a new connection (a `408` or a close
/// on a pooled one, HTTP/2's refused or unprocessed streams) keeps its
/// id: its heads are those of its last send alone. And `-w`'s redirects
/// followed, counted, and each attempt's final fields, for
/// `%{header_json}`.
#[derive(Default)]
struct IncludedHeads(std::sync::Mutex<HeadsText>);

#[derive(Default)]
struct HeadsText {
    /// Redirects followed (`-w`'s `%{num_redirects}`).
    redirects: usize,
    /// Redirect hops' heads, in order: each hop's answer's.
    earlier: Vec<u8>,
    /// The heads each attempt told, by attempt id. Those of attempts that
    /// lost or failed stay here, never printed.
    attempts: std::collections::HashMap<u64, AttemptHeads>,
}

/// The heads one attempt told.
#[derive(Default)]
struct AttemptHeads {
    /// Where it went: its URL (without userinfo) and the server's address.
    url: String,
    remote: Option<std::net::SocketAddr>,
    /// Its interim heads, in order.
    interim: Vec<u8>,
    /// Its final head, once told.
    last: Vec<u8>,
    /// The status and version of its final head, once told.
    answer: Option<(http::StatusCode, http::Version)>,
    /// The fields of its final head as they came (`-w`'s
    /// `%{header_json}`): a decoded body's `Content-Encoding` and
    /// `Content-Length` among them, which the response has no more.
    fields: http::HeaderMap,
}

impl IncludedHeads {
    fn text(&self) -> std::sync::MutexGuard<'_, HeadsText> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The heads to print for the attempt `answer`: those before its
    /// final head — the earlier hops', then its interim heads — and its
    /// final head as told, empty if it was not.
    fn take(&self, answer: u64) -> (Vec<u8>, Vec<u8>) {
        let mut text = self.text();
        let mut heads = std::mem::take(&mut text.earlier);
        let Some(mut answer) = text.attempts.remove(&answer) else {
            return (heads, Vec::new());
        };
        heads.append(&mut answer.interim);
        (heads, answer.last)
    }

    /// The heads of a redirect chain the client stopped: the hops
    /// followed, then the one not followed — the heads of the one attempt
    /// that told a final head and was not followed. If more than one did
    /// (hedged copies), which was the chain's is not known: the hops
    /// followed alone.
    fn of_a_stopped_chain(&self) -> Vec<u8> {
        let mut text = self.text();
        let mut heads = std::mem::take(&mut text.earlier);
        let mut answered = text.attempts.values_mut().filter(|a| !a.last.is_empty());
        if let (Some(last), None) = (answered.next(), answered.next()) {
            heads.append(&mut last.interim);
            heads.append(&mut last.last);
        }
        heads
    }

    /// The answer of a redirect chain the client stopped, as `-w`'s
    /// variables tell it, as curl 7.88's do: the redirect not followed
    /// (its status, version, `Content-Type`, server), at the URL that gave
    /// it — that of the one attempt that told a final head and was not
    /// followed ([`of_a_stopped_chain`](Self::of_a_stopped_chain)'s) — but
    /// not its fields: curl's `%{header_json}` is empty then.
    fn tell_stopped_chain(&self, transfer: &mut Transfer) {
        let text = self.text();
        let mut answered = text.attempts.values().filter(|a| a.answer.is_some());
        let (Some(last), None) = (answered.next(), answered.next()) else {
            return;
        };
        let Some((status, version)) = last.answer else {
            return;
        };
        transfer.url.clone_from(&last.url);
        transfer.status = Some(status);
        transfer.version = Some(version);
        transfer.remote = last.remote;
        transfer.content_type = last
            .fields
            .get(http::header::CONTENT_TYPE)
            .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
    }

    /// The heads of the attempt `request` names.
    fn of(&self, request: &tickless::RequestInfo, told: impl FnOnce(&mut AttemptHeads)) {
        let mut text = self.text();
        told(text.attempts.entry(request.attempt_id()).or_default());
    }
}

impl tickless::EventListener for IncludedHeads {
    /// Told again for each send of the attempt — on a new connection, or
    /// over HTTP/2 on a new stream, maybe of the same connection — before
    /// any byte of its answer: the heads it told before came from a send
    /// given up — a `103` before a pooled connection's `408`, or before
    /// an HTTP/2 `REFUSED_STREAM` — and are no part of its answer.
    fn on_request_head(
        &self,
        request: &tickless::RequestInfo,
        connection: &tickless::ConnectionInfo,
        _: &tickless::RequestHead<'_>,
    ) {
        let (url, remote) = (request.uri().to_string(), Some(connection.remote));
        self.of(request, |heads| {
            *heads = AttemptHeads {
                url,
                remote,
                ..AttemptHeads::default()
            }
        });
    }

    fn on_interim_head(&self, request: &tickless::RequestInfo, head: &tickless::ResponseHead<'_>) {
        let head = told_head_text("", head);
        self.of(request, |heads| heads.interim.extend(head));
    }

    fn on_response_head(&self, request: &tickless::RequestInfo, head: &tickless::ResponseHead<'_>) {
        let (text, fields) = (told_head_text("", head), head.headers().clone());
        let answer = Some((head.status(), head.version()));
        self.of(request, |heads| {
            (heads.last, heads.answer, heads.fields) = (text, answer, fields)
        });
    }

    /// Told with the id of the attempt whose answer is followed: its heads
    /// are the hop's.
    fn on_redirect(
        &self,
        request: &tickless::RequestInfo,
        _: http::StatusCode,
        _: &http::Uri,
        _: &http::Uri,
    ) {
        let mut text = self.text();
        text.redirects += 1;
        if let Some(mut hop) = text.attempts.remove(&request.attempt_id()) {
            text.earlier.append(&mut hop.interim);
            text.earlier.append(&mut hop.last);
        }
    }
}

/// `-v`: what the client tells of the transfer ([`tickless::EventListener`]),
/// on standard error as curl's lines — `*` for what it does (a lookup, a
/// connect, the roots trusted, TLS's ALPN, the protocol, a connection
/// reused, a redirect, a retry, a hedge), `>` for each request's head as
/// sent, `<` for each response's head (an interim `100 Continue`'s too,
/// before the final).
struct Verbose {
    /// The roots trusted, told as each TLS handshake starts.
    roots: Roots,
}

/// [`response_head_text`] of a head the client told a listener of.
fn told_head_text(prefix: &str, head: &tickless::ResponseHead<'_>) -> Vec<u8> {
    response_head_text(
        prefix,
        head.version(),
        head.status(),
        head.reason(),
        head.headers(),
    )
}

/// A response's head as `get` prints it, each line after `prefix` (`< `
/// for `-v`, none on standard output): the status line, a line per
/// header, and the blank line that ends it. The reason phrase and the
/// values are the bytes that came, as curl prints them: they may hold
/// bytes that are not UTF-8 (obs-text, such as a Latin-1 file name),
/// which a lossy decoding would replace.
fn response_head_text(
    prefix: &str,
    version: http::Version,
    status: http::StatusCode,
    reason: &[u8],
    headers: &http::HeaderMap,
) -> Vec<u8> {
    let mut head = format!("{prefix}{} {}", version_name(version), status.as_u16()).into_bytes();
    if !reason.is_empty() {
        head.push(b' ');
        head.extend_from_slice(reason);
    }
    head.push(b'\n');
    for (name, value) in headers {
        head.extend_from_slice(format!("{prefix}{name}: ").as_bytes());
        head.extend_from_slice(value.as_bytes());
        head.push(b'\n');
    }
    head.extend_from_slice(prefix.as_bytes());
    head.push(b'\n');
    head
}

/// Writes `text` to standard error in one write, come what may (see
/// `say`): from the loop's thread, the lines of one event together.
fn tell(text: &[u8]) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text).and_then(|()| stderr.flush());
}

impl tickless::EventListener for Verbose {
    fn on_resolved(&self, _: &tickless::RequestInfo, host: &str, addrs: &[std::net::SocketAddr]) {
        let ips: Vec<String> = addrs.iter().map(|addr| addr.ip().to_string()).collect();
        tell(format!("* Host {host} resolved to {}\n", ips.join(", ")).as_bytes());
    }

    fn on_connect_attempt(&self, _: &tickless::RequestInfo, remote: std::net::SocketAddr) {
        tell(format!("*   Trying {remote}...\n").as_bytes());
    }

    fn on_connect_failure(
        &self,
        _: &tickless::RequestInfo,
        remote: std::net::SocketAddr,
        error: &std::io::Error,
    ) {
        let (ip, port) = (remote.ip(), remote.port());
        tell(format!("* connect to {ip} port {port} failed: {error}\n").as_bytes());
    }

    fn on_connect_success(&self, _: &tickless::RequestInfo, connection: &tickless::ConnectionInfo) {
        let (ip, port, id) = (
            connection.remote.ip(),
            connection.remote.port(),
            connection.id,
        );
        tell(format!("* Connected to {ip} port {port} (#{id})\n").as_bytes());
    }

    /// The roots the server's certificate must chain to, as curl tells
    /// its `CAfile` and `CApath` before each handshake.
    fn on_tls_handshake_attempt(&self, _: &tickless::RequestInfo, _: &tickless::ConnectionInfo) {
        tell(self.roots.told().as_bytes());
    }

    fn on_tls_handshake_success(
        &self,
        _: &tickless::RequestInfo,
        _: &tickless::ConnectionInfo,
        alpn_protocol: Option<&[u8]>,
    ) {
        let alpn = match alpn_protocol {
            Some(protocol) => format!("server accepted {}", String::from_utf8_lossy(protocol)),
            None => "server did not agree on a protocol".into(),
        };
        tell(format!("* TLS handshake done; ALPN: {alpn}\n").as_bytes());
    }

    fn on_connection_pooled(
        &self,
        _: &tickless::RequestInfo,
        connection: &tickless::ConnectionInfo,
    ) {
        let (ip, port, id) = (
            connection.remote.ip(),
            connection.remote.port(),
            connection.id,
        );
        tell(format!("* Re-using existing connection #{id} with {ip} port {port}\n").as_bytes());
    }

    fn on_protocol_negotiated(
        &self,
        _: &tickless::RequestInfo,
        _: &tickless::ConnectionInfo,
        version: http::Version,
    ) {
        tell(format!("* using {}\n", version_name(version)).as_bytes());
    }

    fn on_request_head(
        &self,
        _: &tickless::RequestInfo,
        _: &tickless::ConnectionInfo,
        head: &tickless::RequestHead<'_>,
    ) {
        let (method, target, version) = (head.method(), head.target(), head.version());
        let mut text = format!("> {method} {target} {}\n", version_name(version)).into_bytes();
        // HTTP/2's `:authority` says what `Host` does: curl shows it so.
        if let Some(authority) = head.authority() {
            text.extend_from_slice(format!("> Host: {authority}\n").as_bytes());
        }
        for (name, value) in head.fields() {
            text.extend_from_slice(format!("> {name}: ").as_bytes());
            text.extend_from_slice(value);
            text.push(b'\n');
        }
        text.extend_from_slice(b"> \n");
        tell(&text);
    }

    fn on_response_head(&self, _: &tickless::RequestInfo, head: &tickless::ResponseHead<'_>) {
        tell(&told_head_text("< ", head));
    }

    /// `100 Continue` and the like, as curl shows them: the status line,
    /// the fields, the empty line, before the final head.
    fn on_interim_head(&self, request: &tickless::RequestInfo, head: &tickless::ResponseHead<'_>) {
        self.on_response_head(request, head);
    }

    fn on_redirect(
        &self,
        _: &tickless::RequestInfo,
        status: http::StatusCode,
        _: &http::Uri,
        to: &http::Uri,
    ) {
        let status = status.as_u16();
        tell(format!("* {status}: issue another request to this URL: '{to}'\n").as_bytes());
    }

    fn on_retry(
        &self,
        _: &tickless::RequestInfo,
        attempt: u32,
        delay: Duration,
        reason: &tickless::Error,
    ) {
        let (delay, reason) = (delay.as_millis(), WithCauses(reason));
        tell(format!("* retrying, attempt {attempt} in {delay} ms, after: {reason}\n").as_bytes());
    }

    fn on_hedge(&self, _: &tickless::RequestInfo, copy: u32) {
        tell(format!("* hedged copy {copy} sent, no response head yet\n").as_bytes());
    }
}

/// The version as a status line shows it: `HTTP/1.1`, `HTTP/2`.
fn version_name(version: http::Version) -> String {
    match version {
        http::Version::HTTP_2 => "HTTP/2".into(),
        http::Version::HTTP_3 => "HTTP/3".into(),
        other => format!("{other:?}"),
    }
}

/// `-x URL`'s proxy, through which the request goes: trimmed, as a proxy
/// of the environment is ([`read_the_environments_proxies_as_curl`]),
/// before curl's port is added (`-x " host "` is `host` at 1080, not
/// `host :1080`), with `-U`'s credentials if it has none; a blank one is
/// none at all, as curl's `-x ""`. A URL that is not a proxy's is a bad
/// argument.
fn proxy_flag(url: &str, proxy_user: Option<&str>) -> Result<ProxyFlag, String> {
    let url = url.trim();
    if url.is_empty() {
        return Ok(ProxyFlag::Off);
    }
    tickless::Proxy::all(&with_proxy_user(&with_curl_proxy_port(url), proxy_user))
        .map(ProxyFlag::Through)
        .map_err(|e| format!("--proxy: {e}"))
}

/// `proxy` with curl's default port, 1080, if it names none (`-x host`,
/// `-x http://host`, or `http://host:`, whose colon with no digits after
/// it curl drops): the client's own default is the scheme's (80).
fn with_curl_proxy_port(proxy: &str) -> String {
    let std::ops::Range {
        start: authority_start,
        end: authority_end,
    } = authority(proxy);
    let authority = &proxy[authority_start..authority_end];
    let host_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host_port)| host_port);
    let port = match host_port.strip_prefix('[') {
        Some(bracketed) => bracketed
            .split_once(']')
            .and_then(|(_, after)| after.strip_prefix(':')),
        None => host_port.split_once(':').map(|(_, port)| port),
    };
    if port.is_some_and(|port| !port.is_empty()) || host_port.is_empty() {
        return proxy.to_owned();
    }
    let before = &proxy[..authority_end];
    format!(
        "{}:1080{}",
        before.strip_suffix(':').unwrap_or(before),
        &proxy[authority_end..]
    )
}

/// `proxy` with `-U`'s credentials (`proxy_user`, `USER[:PASSWORD]`), if
/// given and its URL has none: as curl's, a proxy URL's own `user:pass@`
/// wins. They are percent-decoded, as curl reads them (`%3A` for a colon
/// in the user's name; a `%` not before two hex digits is itself), then
/// written into the URL percent-encoded, which the client decodes.
fn with_proxy_user(proxy: &str, proxy_user: Option<&str>) -> String {
    let Some(proxy_user) = proxy_user else {
        return proxy.to_owned();
    };
    let authority = authority(proxy);
    if proxy[authority.clone()].contains('@') {
        return proxy.to_owned();
    }
    let encoded = |part: &str| {
        let decoded: Vec<u8> = percent_encoding::percent_decode_str(part).collect();
        percent_encoded(&decoded)
    };
    let userinfo = match proxy_user.split_once(':') {
        Some((user, password)) => format!("{}:{}@", encoded(user), encoded(password)),
        None => format!("{}@", encoded(proxy_user)),
    };
    let (before, after) = proxy.split_at(authority.start);
    format!("{before}{userinfo}{after}")
}
