#!/usr/bin/env bash
# Every comparison with the peers, in one command: the HTTP/1.1 cases and
# the timeout-lateness bursts (src/main.rs), 64 in flight over HTTP/2
# (src/bin/h2-in-flight.rs), heap bytes per idle connection and per
# in-flight request (src/bin/memory.rs), and tickless's timeouts under a
# 64-in-flight load (`tick-lag --end-to-end --warm --under-load`).
#
#   bench-peers/all.sh                      # 5 runs of each, built-in servers
#   RUNS=3 bench-peers/all.sh --url http://127.0.0.1:18080   # the HTTP/1.1 cases against nginx.sh
#
# Arguments go to the HTTP/1.1 cases (src/main.rs); RUNS sets the runs of
# every part (default 5).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-5}
cargo build --release --manifest-path bench-peers/Cargo.toml --bins
cargo build --release --bin tick-lag
# Where cargo put them: CARGO_TARGET_DIR if set (relative to the repository).
bench=${CARGO_TARGET_DIR:-bench-peers/target}/release
root=${CARGO_TARGET_DIR:-target}/release
"$bench/bench-peers" --runs "$runs" --lateness "$@"
"$bench/h2-in-flight" --runs "$runs"
"$bench/memory" --runs "$runs"
for _ in $(seq "$runs"); do
    "$root/tick-lag" --end-to-end --warm --under-load --instrument client-event-loop \
        --instrument client-wheel-5ms
done
