#!/usr/bin/env bash
# The README's "Where #15 stands" in one command: every throughput target's
# case against its peer, interleaved (bench-peers/pair.sh), against nginx
# and then against the built-in server, with the raw rows kept.
#
#   bench-peers/series.sh [OUT_DIR]
#   ROUNDS=10 bench-peers/series.sh docs/perf-data/2026-12-06-abc1234
#
# Starts bench-peers/nginx.sh on 127.0.0.1:$PORT (default 18080) unless
# something answers there already, and stops it at the end. For each server
# and each case — 13 B sequential and 1 MiB and 64 KiB chunked against ureq,
# 64 in flight from one thread's window and from 64 tokio tasks against
# hyper's 64 in flight — runs `ROUNDS=$ROUNDS bench-peers/pair.sh` (default
# 10 rounds), copies its CSV rows into OUT_DIR (default a new directory
# under /tmp) as SERVER-CASE.csv, and appends its summary line to
# OUT_DIR/summary.txt, headed by the date, the revision and the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
port=${PORT:-18080}
out=${1:-$(mktemp -d --tmpdir "series-XXXXXX")}
mkdir -p "$out"
nginx_pid=
if ! curl -sf -o /dev/null "http://127.0.0.1:$port/small"; then
    bench-peers/nginx.sh "$port" >/dev/null 2>&1 &
    nginx_pid=$!
    for _ in $(seq 50); do
        curl -sf -o /dev/null "http://127.0.0.1:$port/small" && break
        sleep 0.1
    done
fi
trap '[ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null; true' EXIT
cargo build --release --manifest-path bench-peers/Cargo.toml --bin bench-peers >&2
{
    echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), revision $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo ' (with uncommitted changes)'), $(nproc) cores, ROUNDS=${ROUNDS:-10}"
} >"$out/summary.txt"
for server in nginx built-in; do
    url=
    [ "$server" = nginx ] && url="http://127.0.0.1:$port"
    for spec in "13b-seq ureq" "13b-64-in-flight hyper" \
        "13b-64-tasks hyper 13b-64-in-flight" "1mib-seq ureq" "64k-chunked-seq ureq"; do
        set -- $spec
        line=$(URL=$url ROUNDS=${ROUNDS:-10} bench-peers/pair.sh "$@" 2>/dev/null | tail -1)
        rows=${line%%:*}
        cp "$rows" "$out/$server-$1.csv"
        echo "$server $1 against $2: ${line#*: }" | tee -a "$out/summary.txt"
    done
done
echo "rows and summary in $out" >&2
