#!/usr/bin/env bash
# What a request timeout costs the client, in instructions a request, for
# one or more builds of bench-peers, interleaved (the top-level README's
# "What a timeout costs"):
#
#   bench-peers/timeout-cost.sh OUT_DIR BIN [BIN...]
#   ROUNDS=8 URL=http://127.0.0.1:18080 bench-peers/timeout-cost.sh /tmp/tc main/bench-peers new/bench-peers
#
# For each of ROUNDS (default 6) rounds, each case (13b-seq: no timeout;
# 13b-seq-timeout: a request timeout on the wheel; 13b-seq-loop-timeout: on
# the loops) and each BIN: `valgrind --tool=callgrind BIN --url URL --runs 1
# --seconds S --warmup-ms 0 --case CASE --client tickless` for S = 1 and 4.
# A request's instructions are the marginal ones, (4 s run's - 1 s run's) /
# (4 s run's requests - 1 s run's): the process's fixed cost (start-up, the
# client, its connection), which a whole run's average spreads over however
# many requests the run made, drops out. Requests are the run's req/s times
# its seconds. Lines "BIN CASE ROUND INSTRUCTIONS REQUESTS" go to
# OUT_DIR/summary.txt, then each build's medians and their excess over its
# own no-timeout case are printed. URL defaults to nginx on 18080
# (bench-peers/nginx.sh starts one). Compare builds by their excess, not
# their absolute counts: builds of one code differ by about ±150 a request
# in what LLVM inlines.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,22p' "$0"; exit 2; }
out=$1; shift
rounds=${ROUNDS:-6} url=${URL:-http://127.0.0.1:18080}
mkdir -p "$out"
one() { # BIN CASE SECONDS -> "instructions requests"
    valgrind --tool=callgrind --callgrind-out-file="$out/run.out" "$1" --url "$url" --runs 1 \
        --seconds "$3" --warmup-ms 0 --case "$2" --client tickless >"$out/run.txt" 2>/dev/null
    local total requests
    total=$(grep -E '^(summary|totals):' "$out/run.out" | head -1 | awk '{print $2}')
    requests=$(awk -v c="$2" -v s="$3" '$1==c && $2=="tickless" {printf "%d", $5*s}' "$out/run.txt")
    rm -f "$out/run.out"
    echo "$total $requests"
}
for r in $(seq "$rounds"); do
    for case in 13b-seq 13b-seq-timeout 13b-seq-loop-timeout; do
        for bin in "$@"; do
            read -r t1 r1 < <(one "$bin" "$case" 1)
            read -r t4 r4 < <(one "$bin" "$case" 4)
            echo "$bin $case $r $(((t4 - t1) / (r4 - r1))) $r4" | tee -a "$out/summary.txt"
        done
    done
done
python3 - "$out/summary.txt" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    bin, case, _, instructions, _ = line.split()
    runs[(bin, case)].append(int(instructions))
for bin in dict.fromkeys(b for b, _ in runs):
    none = statistics.median(runs[(bin, "13b-seq")])
    for case in ("13b-seq", "13b-seq-timeout", "13b-seq-loop-timeout"):
        values = runs[(bin, case)]
        median = statistics.median(values)
        excess = median - none
        print(f"{bin} {case}: median {median:.0f} ({excess:+.0f}, {excess / none * 100:+.2f} %) of {values}")
PY
