#!/usr/bin/env bash
# shm-median-ab.sh - hcomm builds side by side over shared memory, by the
# median call as well as the mean: `hcomm perf -json` jobs alternated
# within each round; per (op, size, build) the median over rounds of each
# job's mean and of each job's median call, and how many jobs had ranks of
# one host sharing a CPU (stacked). On a loaded machine the mean swings
# with the calls that lost their CPU and the median stays near the
# library's own cost, so A/B runs under load compare by the median.
#
#   scripts/bench/shm-median-ab.sh ROUNDS RANKS OPS MINB MAXB FACTOR BIN...
#   scripts/bench/shm-median-ab.sh 9 2 broadcast,allreduce,barrier 8 64 8 /tmp/hcomm-old /tmp/hcomm-new
#
# TARGET (default 0.2) is each size's timed loop in seconds.
set -euo pipefail
if (($# < 7)); then
  echo "usage: shm-median-ab.sh ROUNDS RANKS OPS MINB MAXB FACTOR BIN..." >&2
  exit 2
fi
rounds=$1 n=$2 ops=$3 minb=$4 maxb=$5 f=$6
shift 6
out=$(mktemp /tmp/shm-median-ab.XXXXXX)
trap 'rm -f "$out"' EXIT
for ((r = 0; r < rounds; r++)); do
  for b in "$@"; do
    "$b" perf -n "$n" -transport shm -op "$ops" -b "$minb" -e "$maxb" -f "$f" -T "${TARGET:-0.2}" -json -H \
      -label "$(basename "$b")" 2>/dev/null | grep '^{' >>"$out" || true
  done
done
python3 - "$out" <<'PY'
import collections, json, statistics, sys
d = collections.defaultdict(lambda: ([], [], 0))
for line in open(sys.argv[1]):
    r = json.loads(line)
    k = (r["op"], r["bytes"], r["impl"])
    mean, med, st = d[k]
    d[k] = (mean + [r["usec"]], med + [r.get("med_usec", 0)], st + bool(r.get("stacked")))
for (op, size, impl), (mean, med, st) in sorted(d.items()):
    print(f"{op:13s} {size:10d} {impl:16s} mean {statistics.median(mean):10.3f}  median {statistics.median(med):10.3f}  stacked {st}/{len(mean)}")
PY
