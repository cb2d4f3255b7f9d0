#!/usr/bin/env bash
# twospeeds.sh - the two speeds of large shm jobs (BENCHMARKS.md, "The two
# speeds of large shm jobs"): rounds of coreprobe.c (cache-line ping-pong
# between CPU 0 and CPU 1, a two-core slot ring like hcomm's, memcpy) and,
# alternated in the same round, a 2-rank AllReduce of 64 MiB and a
# registered AllGather of 8 MiB of every hcomm binary given and of Open MPI,
# one line per round, until SECONDS_MAX (default 280) have passed.
#
#   HARNESS=/tmp/fb OUT=/tmp/idle/large14/twospeeds.txt \
#     scripts/bench/twospeeds.sh /tmp/hcomm-start /tmp/hcomm-main
#
# Columns: UTC time; coreprobe's pp_min/pp_med (ns round trip), hand,
# hand_nt and hand_same (GB/s), cpy1 and cpy2 (GB/s), steal (ticks); then per binary
# ar64 = AllReduce 64 MiB busbw (GB/s, from the per-call median) and ag8 =
# registered AllGather 8 MiB per-call median (µs); then Open MPI's
# AllReduce 64 MiB busbw and AllGather 8 MiB time (µs, mean). A summary
# groups the rounds by the ping-pong (fast: pp_min under 200 ns) and gives
# medians per group. HARNESS: the peer harness (build/mpi_coll_bench.openmpi).
set -euo pipefail
: "${HARNESS:?HARNESS: the peer harness directory (with build/mpi_coll_bench.openmpi)}"
(($# >= 1)) || { echo "usage: twospeeds.sh BIN..." >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/twospeeds.txt} max=${SECONDS_MAX:-280}
mkdir -p "$(dirname "$out")"
probe=$(mktemp /tmp/coreprobe.XXXXXX)
trap 'rm -f "$probe"' EXIT
gcc -O2 -pthread -o "$probe" "$here/coreprobe.c"
hdr="time pp_min pp_med hand hand_nt hand_same cpy1 cpy2 steal"
for b in "$@"; do n=$(basename "$b"); hdr+=" ar64_$n ag8_$n"; done
echo "$hdr ar64_ompi ag8_ompi" | tee "$out"
end=$((SECONDS + max))
while ((SECONDS < end)); do
  line=$("$probe" 1 | tail -1)
  for b in "$@"; do
    ar=$("$b" perf -n 2 -transport shm -op allreduce -b 64M -e 64M -T 0.3 -json 2>/dev/null |
      python3 -c 'import json,sys
r=[json.loads(l) for l in sys.stdin if l.startswith("{")]
print("%.3f" % (r[0]["bytes"]/r[0]["med_usec"]/1e3) if r else "nan")')
    ag=$("$b" perf -n 2 -transport shm -op allgather -registered -b 8M -e 8M -T 0.3 -json 2>/dev/null |
      python3 -c 'import json,sys
r=[json.loads(l) for l in sys.stdin if l.startswith("{")]
print("%.1f" % r[0]["med_usec"] if r else "nan")')
    line+=" $ar $ag"
  done
  o=$(cd "$HARNESS" && for op in allreduce allgather; do
    sz=64M; [ $op = allgather ] && sz=8M
    mpirun.openmpi --allow-run-as-root -np 2 --bind-to none --mca oob_tcp_if_include lo \
      build/mpi_coll_bench.openmpi -i openmpi-sm -o $op -b $sz -e $sz -f 2 -T 0.3 -H 2>/dev/null |
      grep -E '^openmpi' || echo "x,$op,2,0,nan,0,nan"
  done | awk -F, '$2=="allreduce"{a=$7} $2=="allgather"{g=$5} END{printf "%s %s", a, g}')
  echo "$line $o" | tee -a "$out"
done
python3 - "$out" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
hdr, rows = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
for name, keep in (("fast (pp_min < 200 ns)", lambda r: float(r[1]) < 200), ("slow (pp_min >= 200 ns)", lambda r: float(r[1]) >= 200)):
    g = [r for r in rows if keep(r)]
    if not g:
        print(f"# {name}: no rounds")
        continue
    cols = []
    for i in range(1, len(hdr)):
        v = [float(r[i]) for r in g if r[i] != "nan"]
        cols.append(f"{hdr[i]}={statistics.median(v):.4g}" if v else f"{hdr[i]}=nan")
    print(f"# {name}: {len(g)} rounds, medians: " + " ".join(cols))
PY
