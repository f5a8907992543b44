#!/usr/bin/env bash
# tickless against one peer, one build, interleaved: what settles a target
# a full run's five runs leave in doubt (the top-level README's "Where #15
# stands"; bench-peers/ab.sh sets two builds against each other instead).
#
#   bench-peers/pair.sh CASE PEER [PEER_CASE]
#   ROUNDS=10 URL=http://127.0.0.1:18080 bench-peers/pair.sh 64k-chunked-seq ureq
#   bench-peers/pair.sh 13b-64-tasks hyper 13b-64-in-flight
#
# Builds bench-peers (release), then for each of ROUNDS (default 10) rounds
# runs `bench-peers --runs 1 --seconds 2 --case CASE --client tickless` and
# the peer in PEER_CASE (default CASE), their order swapped every other
# round, and prints the CSV rows' file and the medians (and ranges) of the
# rounds' ratios of tickless to the peer: throughput, client CPU per
# request; and each one's median context switches per request.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,15p' "$0"; exit 2; }
case=$1 peer=$2 peer_case=${3:-$1} rounds=${ROUNDS:-10}
cargo build --release --manifest-path bench-peers/Cargo.toml --bin bench-peers >&2
# Where cargo put it: CARGO_TARGET_DIR if set (relative to the repository).
bin=${CARGO_TARGET_DIR:-bench-peers/target}/release/bench-peers
args=(--runs 1 --seconds 2 --format csv)
[ -n "${URL:-}" ] && args+=(--url "$URL")
run() { # CLIENT CASE ROUND: one CSV line, "round,client,<bench-peers' row>"
    "$bin" "${args[@]}" --case "$2" --client "$1" 2>/dev/null | grep "^$2," | sed "s/^/$3,$1,/"
}
out=$(mktemp --tmpdir "pair-$case-$peer-XXXXXX.csv")
for r in $(seq "$rounds"); do
    if [ $((r % 2)) -eq 1 ]; then
        run tickless "$case" "$r"; run "$peer" "$peer_case" "$r"
    else
        run "$peer" "$peer_case" "$r"; run tickless "$case" "$r"
    fi
done >"$out"
python3 - "$out" "$peer" <<'PY'
import collections, csv, statistics, sys
path, peer = sys.argv[1], sys.argv[2]
by = collections.defaultdict(dict)
for row in csv.reader(open(path)):
    # after "round,client,": the row's req/s is field 6, client CPU µs 13, switches 14
    by[row[0]][row[1]] = (float(row[6]), float(row[13]), float(row[14]))
rounds = [r for r in by.values() if "tickless" in r and peer in r]
def ratio(i):
    values = [r["tickless"][i] / r[peer][i] for r in rounds]
    return "%.3f (%.2f-%.2f)" % (statistics.median(values), min(values), max(values))
switches = lambda c: statistics.median(r[c][2] for r in rounds)
print(f"{path}: {len(rounds)} rounds; tickless over {peer}: throughput {ratio(0)}, "
      f"client CPU per request {ratio(1)}; switches per request {switches('tickless'):.2f} "
      f"against {switches(peer):.2f}")
PY
