#!/bin/bash
# usage: loops-ab.sh ROUNDS L1 L2 ... ; prints per-round rows and median ratios vs hyper
B=${B:-/work/target-exp/release/bench-peers}; R=$1; shift; UA=(--url ${U-http://127.0.0.1:18080}); [ -z "${U-x}" ] && UA=()
out=${OUT:-/tmp}/loops-ab-$(date +%H%M%S).csv
for r in $(seq $R); do
  order="$* hyper"; [ $((r%2)) -eq 0 ] && order="hyper $*"
  for l in $order; do
    if [ $l = hyper ]; then $B "${UA[@]}" --runs 1 --seconds 2 --case 13b-64-in-flight --client hyper --format csv 2>/dev/null | grep '^13b' | awk -F, -v r=$r '{print r",hyper,"$5","$10","$13}'
    else L=${l%%e*}; E=256; [ "$L" != "$l" ] && E=${l#*e}; env LOOPS=$L EVCAP=$E $B "${UA[@]}" --runs 1 --seconds 2 --case 13b-64-tasks --client tickless --format csv 2>/dev/null | grep '^13b' | awk -F, -v l=$l -v r=$r '{print r",loops"l","$5","$10","$13}'; fi
  done
done > $out
python3 - $out <<'PY'
import csv,sys,statistics,collections
by=collections.defaultdict(dict)
for r,c,rps,cpu,csw in csv.reader(open(sys.argv[1])): by[r][c]=(float(rps),float(cpu),float(csw))
names=sorted({c for r in by.values() for c in r if c!='hyper'})
for n in names:
  tr=[v[n][0]/v['hyper'][0] for v in by.values() if n in v and 'hyper' in v]
  cr=[v[n][1]/v['hyper'][1] for v in by.values() if n in v and 'hyper' in v]
  sw=[v[n][2] for v in by.values() if n in v]
  print(f"{n}: thr {statistics.median(tr):.3f}x ({min(tr):.2f}-{max(tr):.2f}) cpu {statistics.median(cr):.3f}x ({min(cr):.2f}-{max(cr):.2f}) csw {statistics.median(sw):.2f}")
print("hyper csw", statistics.median(v['hyper'][2] for v in by.values()), sys.argv[1])
PY
