#!/usr/bin/env bash
# firstcalls-ab.sh ROUNDS RANKS CALLS PROG... - the first CALLS 8-byte
# AllReduce calls of fresh jobs (scripts/bench/firstcalls, started by
# `hcomm run -n RANKS` with no binding), one job per program in every
# round, alternated; per program the medians over the rounds of the time
# of all CALLS calls, of the median call of the first 100 and of the last
# 100, and how many jobs ran their first call with two ranks on one CPU.
# Each PROG is firstcalls built from the tree measured:
#
#   (cd TREE && go build -o /tmp/fc-new ./scripts/bench/firstcalls)
#   HCOMM=/tmp/hcomm scripts/bench/firstcalls-ab.sh 7 2 20000 /tmp/fc-old /tmp/fc-new
#
# HCOMM: the launcher (default: hcomm on PATH); BOOST=1 as for shm-ab.sh.
set -euo pipefail
if [ "${BOOST:-0}" = 1 ] && [ -z "${SHM_AB_BOOSTED:-}" ]; then
  export SHM_AB_BOOSTED=1
  exec setsid bash -c 'echo -20 >/proc/self/autogroup && exec "$@"' _ "$0" "$@"
fi
if (($# < 4)); then
  echo "usage: firstcalls-ab.sh ROUNDS RANKS CALLS PROG..." >&2
  exit 2
fi
rounds=$1 n=$2 calls=$3
shift 3
out=$(mktemp /tmp/firstcalls-ab.XXXXXX)
trap 'rm -f "$out"' EXIT
for ((r = 0; r < rounds; r++)); do
  for p in "$@"; do
    line=$("${HCOMM:-hcomm}" run -n "$n" -- "$p" -calls "$calls" 2>/dev/null | grep '^firstcalls ' || true)
    [ -n "$line" ] && echo "$(basename "$p") $line" | tee -a "$out"
  done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
d, impls = collections.defaultdict(lambda: collections.defaultdict(list)), []
for line in open(sys.argv[1]):
    f = line.split()
    name, kv = f[0], dict(zip(f[3::2], f[4::2]))
    if name not in impls:
        impls.append(name)
    for k in ("total_ms", "first100_us", "last100_us"):
        d[name][k].append(float(kv[k]))
    firsts = [c.split(":")[1][0] for c in f if c.startswith("r") and ":" in c]
    d[name]["stacked"].append(len(firsts) != len(set(firsts)))
print("medians over fresh jobs:")
for name in impls:
    v = d[name]
    print(f"{name:16s} all calls {statistics.median(v['total_ms']):9.2f} ms  first 100 {statistics.median(v['first100_us']):8.3f} us/call"
          f"  last 100 {statistics.median(v['last100_us']):8.3f} us/call  started on one CPU {sum(v['stacked'])}/{len(v['stacked'])}  jobs {len(v['stacked'])}")
PY
