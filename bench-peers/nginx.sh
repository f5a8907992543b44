#!/usr/bin/env bash
# Serves the benchmark's routes from nginx on 127.0.0.1:PORT (default 18080)
# until interrupted, for `bench-peers --url http://127.0.0.1:PORT`:
#
#   /small        13 bytes, Content-Length (a static file)
#   /1mib         1 MiB, Content-Length (a static file, sendfile)
#   /64k-chunked  64 KiB, Transfer-Encoding: chunked (the file through SSI,
#                 which drops the length; nginx picks the chunk sizes)
#   /never        proxied to a listener that never accepts, so nothing
#                 ever comes back (for --lateness)
#
# Debian's nginx, one worker process (as tests/support/real.rs runs it); the
# config and files live in a temporary directory removed on exit.
#
#   bench-peers/nginx.sh [PORT] &
#   cargo run --release --manifest-path bench-peers/Cargo.toml -- --url http://127.0.0.1:18080
set -euo pipefail

port="${1:-18080}"
never_port=$((port + 1))
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
[ -x "$nginx_bin" ] || { echo "nginx not found (apt-get install nginx)" >&2; exit 1; }

dir="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM

mkdir -p "$dir/www" "$dir/tmp"
printf 'Hello, world!' >"$dir/www/small"
python3 - "$dir/www" <<'EOF'
import sys
body = bytes(ord('a') + i % 26 for i in range(1 << 20))
open(sys.argv[1] + "/1mib", "wb").write(body)
open(sys.argv[1] + "/64k-chunked", "wb").write(body[: 64 * 1024])
EOF

# The silent upstream: listens with a deep backlog and never accepts; the
# kernel completes the handshakes, nginx's requests are never read.
python3 -c '
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(65535)
while True:
    time.sleep(3600)
' "$never_port" &
pids+=($!)

ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
cat >"$dir/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile 20000;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events {
    worker_connections 8192;
}
http {
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    tcp_nodelay on;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    server {
        listen 127.0.0.1:$port backlog=4096;
        server_name localhost;
        root $dir/www;
        location = /64k-chunked {
            ssi on;
            ssi_types *;
        }
        location = /never {
            proxy_pass http://127.0.0.1:$never_port;
            proxy_connect_timeout 1h;
            proxy_read_timeout 1h;
        }
    }
}
EOF

echo "nginx on http://127.0.0.1:$port (Ctrl-C to stop)" >&2
"$nginx_bin" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" &
pids+=($!)
wait "${pids[-1]}"
