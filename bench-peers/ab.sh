#!/usr/bin/env bash
# Two builds of tickless against each other and a peer, interleaved: the
# A/B behind each "tried and not kept" of the top-level README.
#
#   bench-peers/ab.sh REV_A REV_B                 # 8 rounds of 64 in flight vs hyper
#   ROUNDS=10 CASE=13b-seq PEER=ureq URL=http://127.0.0.1:18080 bench-peers/ab.sh main WORKTREE
#   CASE=13b-64-tasks PEER_CASE=13b-64-in-flight bench-peers/ab.sh main WORKTREE
#
# REV is a git revision, or WORKTREE for the working tree as it is. Each is
# built once (a git worktree per revision under $AB_DIR, default
# /tmp/tickless-ab; the working tree builds in bench-peers/target). Each
# round runs `bench-peers --runs 1 --seconds 2 --case CASE --client
# tickless` with A then B (B then A every other round: the first of a pair
# does not always go first), then PEER once (in PEER_CASE, default CASE:
# a case tickless runs alone is set beside the peer's own), and prints one CSV line per
# run. At the end, for each build: the medians of its req/s, client CPU µs
# per request and switches per request, and the medians and ranges of its
# per-round ratios to the peer of the same round — the machine drifts
# from minute to minute, a round's ratio far less. To clean up: remove
# $AB_DIR, then `git worktree prune`.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { sed -n '2,20p' "$0"; exit 2; }
rounds=${ROUNDS:-8} case=${CASE:-13b-64-in-flight} peer=${PEER:-hyper} url=${URL:-}
peer_case=${PEER_CASE:-$case}
dir=${AB_DIR:-/tmp/tickless-ab}
mkdir -p "$dir"

build() { # REV -> path of its bench-peers binary
    if [ "$1" = WORKTREE ]; then
        cargo build --release --manifest-path bench-peers/Cargo.toml --bin bench-peers >&2
        cp "${CARGO_TARGET_DIR:-bench-peers/target}/release/bench-peers" "$dir/bin-worktree"
        echo "$dir/bin-worktree"
    else
        local sha tree
        sha=$(git rev-parse --short "$1^{commit}")
        tree="$dir/tree-$sha"
        [ -d "$tree" ] || git worktree add --detach "$tree" "$sha" >&2
        CARGO_TARGET_DIR="$dir/target-$sha" \
            cargo build --release --manifest-path "$tree/bench-peers/Cargo.toml" --bin bench-peers >&2
        cp "$dir/target-$sha/release/bench-peers" "$dir/bin-$sha"
        echo "$dir/bin-$sha"
    fi
}

a=$(build "$1") b=$(build "$2")
args=(--runs 1 --seconds 2 --format csv)
[ -n "$url" ] && args+=(--url "$url")
run() { # NAME BINARY CLIENT ROUND [CASE]: one CSV line, "round,name,<bench-peers' row>"
    local c=${5:-$case}
    "$2" "${args[@]}" --case "$c" --client "$3" 2>/dev/null | grep "^$c," | sed "s/^/$4,$1,/"
}
out="$dir/ab-$(date -u +%Y%m%dT%H%M%S).csv"
for r in $(seq "$rounds"); do
    if [ $((r % 2)) -eq 1 ]; then
        run A "$a" tickless "$r"
        run B "$b" tickless "$r"
    else
        run B "$b" tickless "$r"
        run A "$a" tickless "$r"
    fi
    run "$peer" "$a" "$peer" "$r" "$peer_case"
done | tee "$out"

# Columns after round and name: case, client, driven, runs, req_per_s (7),
# spread, mb_per_s, p50, p99, cpu_us_per_req, server_cpu_us, client_cpu_us
# (14), client_csw_per_req (15).
echo "A = $1, B = $2; $case, $rounds rounds against $peer's $peer_case (${url:-built-in server}); rows in $out"
awk -F, -v peer="$peer" '
    { req[$1, $2] = $7; cpu[$1, $2] = $14; csw[$1, $2] = $15; rounds[$1] = 1 }
    function median(list, n,    i, j, t) {
        for (i = 2; i <= n; i++) for (j = i; j > 1 && list[j - 1] > list[j]; j--) {
            t = list[j]; list[j] = list[j - 1]; list[j - 1] = t
        }
        return n % 2 ? list[(n + 1) / 2] : (list[n / 2] + list[n / 2 + 1]) / 2
    }
    END {
        split("A B " peer, names, " ")
        for (k = 1; k <= 3; k++) {
            name = names[k]; n = 0
            for (r in rounds) if ((r, name) in req && (r, peer) in req) {
                n++; q[n] = req[r, name]; c[n] = cpu[r, name]; s[n] = csw[r, name]
                tq[n] = req[r, name] / req[r, peer]; tc[n] = cpu[r, name] / cpu[r, peer]
            }
            if (n == 0) continue
            printf "%-8s req/s %8.0f  client CPU %6.2f us  csw %5.2f", name, median(q, n), median(c, n), median(s, n)
            if (name != peer) {
                printf "  req/s / %s %.3f", peer, median(tq, n)
                min = 1e9; max = 0; for (i = 1; i <= n; i++) { if (tq[i] < min) min = tq[i]; if (tq[i] > max) max = tq[i] }
                printf " [%.2f-%.2f]", min, max
                printf "  CPU / %s %.3f", peer, median(tc, n)
                min = 1e9; max = 0; for (i = 1; i <= n; i++) { if (tc[i] < min) min = tc[i]; if (tc[i] > max) max = tc[i] }
                printf " [%.2f-%.2f]", min, max
            }
            printf "\n"
        }
    }' "$out"
