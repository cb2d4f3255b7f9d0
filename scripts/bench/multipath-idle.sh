#!/usr/bin/env bash
# multipath-idle.sh - the two-link and weighted rows of BENCHMARKS.md
# "Several network paths" (two equal links against one; a link and a
# quarter-speed one, weighted, against the fast link alone; and two equal
# links with fixed equal weights) for one or
# more hcomm builds, in about five minutes on an idle machine:
#
#   OUT=/tmp/idle/NAME scripts/bench/multipath-idle.sh HCOMM_A [HCOMM_B ...]
#
# 2 hosts x 2 ranks, then 2 x 1 (multipath.sh, its namespaces named P,
# default mpi), REPS repetitions (default 3), the builds alternated within
# each repetition; AllReduce (OPS) at 8 and 64 MiB (SIZES). Rows go to
# $OUT/<build>-2xN.csv, the jobs' output to $OUT/log.txt, and the medians
# and ratios are printed at the end (and to $OUT/summary.txt). Needs root,
# iproute2 and tc.
set -euo pipefail
OUT=${OUT:-/tmp/multipath-idle}
REPS=${REPS:-3}
mkdir -p "$OUT"
here=$(dirname "$0")
for per in 2 1; do
  for rep in $(seq "$REPS"); do
    for b in "$@"; do
      P=${P:-mpi} HCOMM=$b OPS=${OPS:-allreduce} SIZES="${SIZES:--b 8M -e 64M -f 8}" \
        ONLY='^(two-equal|two-equal-fixed|one-link|quarter-weighted|quarter-fast-alone)$' \
        OUT="$OUT/$(basename "$b")-2x$per.csv" "$here/multipath.sh" 1 "$per" >> "$OUT/log.txt" 2>&1
    done
  done
done
python3 - "$OUT" "$@" <<'PY' | tee "$OUT/summary.txt"
import csv, os, statistics, sys
out, builds = sys.argv[1], sys.argv[2:]
for b in builds:
    for per in (2, 1):
        path = os.path.join(out, f"{os.path.basename(b)}-2x{per}.csv")
        if not os.path.exists(path):
            continue
        rows = {}
        for r in csv.reader(open(path)):
            if len(r) == 7 and r[0] != "impl":
                rows.setdefault((r[1], int(r[3]), r[0]), []).append(float(r[6]))
        med = {k: statistics.median(v) for k, v in rows.items()}
        for op, size in sorted({(k[0], k[1]) for k in med}):
            g = lambda l: med.get((op, size, l), float("nan"))
            print(f"{os.path.basename(b)} 2x{per} {op} {size >> 20} MiB busbw GB/s: one {g('one-link'):.3f} two {g('two-equal'):.3f} "
                  f"two/one {g('two-equal') / g('one-link'):.2f}x | fast alone {g('quarter-fast-alone'):.3f} weighted {g('quarter-weighted'):.3f} "
                  f"weighted/fast {g('quarter-weighted') / g('quarter-fast-alone'):.2f}x | two, fixed equal weights {g('two-equal-fixed'):.3f} "
                  f"{g('two-equal-fixed') / g('one-link'):.2f}x (runs: {len(rows.get((op, size, 'one-link'), []))})")
PY
