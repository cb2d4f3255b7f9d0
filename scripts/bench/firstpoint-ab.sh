#!/usr/bin/env bash
# firstpoint-ab.sh ROUNDS RANKS BIN... - the first points of a fresh
# `hcomm perf` job over shared memory (AllReduce 8, 32 and 128 B, the
# first op and sizes of hcomm-extra.sh's job), per binary, alternated in
# every round; medians and every round's figures. A job's first points
# measure its first milliseconds, so each round is a new job.
#
#   BOOST=1 scripts/bench/firstpoint-ab.sh 7 2 /tmp/hcomm-old /tmp/hcomm-new
#
# TARGET (default 0.2) as for hcomm-extra.sh; BOOST=1 as for shm-ab.sh.
set -euo pipefail
if [ "${BOOST:-0}" = 1 ] && [ -z "${SHM_AB_BOOSTED:-}" ]; then
  export SHM_AB_BOOSTED=1
  exec setsid bash -c 'echo -20 >/proc/self/autogroup && exec "$@"' _ "$0" "$@"
fi
if (($# < 3)); then
  echo "usage: firstpoint-ab.sh ROUNDS RANKS BIN..." >&2
  exit 2
fi
rounds=$1 n=$2
shift 2
out=$(mktemp /tmp/firstpoint-ab.XXXXXX)
trap 'rm -f "$out"' EXIT
for ((r = 0; r < rounds; r++)); do
  for b in "$@"; do
    "$b" perf -n "$n" -transport shm -op allreduce -b 8 -e 128 -f 4 -T "${TARGET:-0.2}" -csv -H \
      -label "$(basename "$b")" 2>/dev/null | grep -E '^[^,]+,allreduce,' >>"$out" || true
  done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
d, impls = collections.defaultdict(list), []
for line in open(sys.argv[1]):
    f = line.strip().split(",")
    d[(f[0], int(f[3]))].append(float(f[4]))
    if f[0] not in impls:
        impls.append(f[0])
for impl in impls:
    for size in sorted({k[1] for k in d if k[0] == impl}):
        v = d[(impl, size)]
        print(f"{impl:16s} {size:5d} B  median {statistics.median(v):8.3f} us  runs " + " ".join(f"{x:.3f}" for x in v))
PY
