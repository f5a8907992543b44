#!/bin/bash
# chunk-ab.sh ROUNDS VARIANT... (VARIANT: y = yield, hN = N spin hints); 64k-chunked-seq vs ureq, built-in server unless U set
B=/work/target-exp/release/bench-peers; R=$1; shift; UA=(); [ -n "${U:-}" ] && UA=(--url $U)
out=/tmp/chunk-ab-$(date +%H%M%S).csv
for r in $(seq $R); do
  order="$* ureq"; [ $((r%2)) -eq 0 ] && order="ureq $*"
  for v in $order; do
    if [ $v = ureq ]; then $B "${UA[@]}" --runs 1 --seconds 2 --case 64k-chunked-seq --client ureq --format csv 2>/dev/null | grep '^64k' | awk -F, -v r=$r '{print r",ureq,"$5","$12","$13}'
    else H=0; [ $v != y ] && H=${v#h}; SPINHINT=$H $B "${UA[@]}" --runs 1 --seconds 2 --case 64k-chunked-seq --client tickless --format csv 2>/dev/null | grep '^64k' | awk -F, -v v=$v -v r=$r '{print r","v","$5","$12","$13}'; fi
  done
done > $out
python3 - $out <<'PY'
import csv,sys,statistics,collections
by=collections.defaultdict(dict)
for r,c,rps,cpu,csw in csv.reader(open(sys.argv[1])): by[r][c]=(float(rps),float(cpu),float(csw))
for n in sorted({c for r in by.values() for c in r if c!='ureq'}):
  tr=[v[n][0]/v['ureq'][0] for v in by.values() if n in v and 'ureq' in v]
  cr=[v[n][1]/v['ureq'][1] for v in by.values() if n in v and 'ureq' in v]
  sw=[v[n][2] for v in by.values() if n in v]
  print(f"{n}: thr {statistics.median(tr):.3f}x ({min(tr):.2f}-{max(tr):.2f}) cpu {statistics.median(cr):.3f}x ({min(cr):.2f}-{max(cr):.2f}) csw {statistics.median(sw):.2f}")
print("ureq csw", statistics.median(v['ureq'][2] for v in by.values()), sys.argv[1])
PY
