#!/usr/bin/env bash
# shm-small-ab.sh - small collectives over shared memory: Open MPI (vader)
# and one or more hcomm binaries, alternated within each round, medians per
# op and size, with the ratio Open MPI time / hcomm time (> 1: hcomm faster).
#
#   HARNESS=/path/to/bench BOOST=1 scripts/bench/shm-small-ab.sh 11 2 \
#     allreduce,barrier,broadcast,allgather,alltoall 32 /tmp/hcomm-old /tmp/hcomm-new
#
# Arguments: rounds, ranks, ops, largest size, binaries. HARNESS is a
# directory of the peer harness with build/mpi_coll_bench.openmpi built
# (default: the current directory). Sizes run from 4 B by factors of 2;
# the 4 B rows are dropped: the first row of every run carries its
# warm-up, so list a sized op first (Barrier has none). BOOST=1 runs
# everything in a new session whose autogroup has nice -20 (a machine
# others load); label such figures "under load".
# TARGET (default 0.3) is each size's timed loop in seconds.
set -euo pipefail
if [ "${BOOST:-0}" = 1 ] && [ -z "${SHM_AB_BOOSTED:-}" ]; then
  export SHM_AB_BOOSTED=1
  exec setsid bash -c 'echo -20 >/proc/self/autogroup && exec "$@"' _ "$0" "$@"
fi
rounds=${1:?usage: shm-small-ab.sh ROUNDS RANKS OPS MAXB BIN...} n=$2 ops=$3 maxb=$4
shift 4
harness=${HARNESS:-.} tg=${TARGET:-0.3}
over=()
if ((n > $(nproc))); then over=(--oversubscribe); fi
out=$(mktemp /tmp/shm-small-ab.XXXXXX)
trap 'rm -f "$out"' EXIT
rows() { grep -E '^[^,]+,[^,]+,[0-9]+,' || true; }
for ((r = 0; r < rounds; r++)); do
  (cd "$harness" && mpirun.openmpi --allow-run-as-root "${over[@]}" -np "$n" --bind-to none \
    --mca oob_tcp_if_include lo build/mpi_coll_bench.openmpi -i openmpi-sm -o "$ops" \
    -b 4 -e "$maxb" -f 2 -T "$tg" -H 2>/dev/null) | rows >>"$out"
  for b in "$@"; do
    "$b" perf -n "$n" -transport shm -op "$ops" -b 4 -e "$maxb" -f 2 -T "$tg" -csv -H \
      -label "$(basename "$b")" 2>/dev/null | rows >>"$out"
  done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
d, impls = collections.defaultdict(list), []
for line in open(sys.argv[1]):
    f = line.strip().split(",")
    impl, op, size, usec = f[0], f[1], int(f[3]), float(f[4])
    if size == 4:
        continue
    d[(op, size, impl)].append(usec)
    if impl not in impls:
        impls.append(impl)
for op, size in sorted({(k[0], k[1]) for k in d}):
    m = {i: statistics.median(d[(op, size, i)]) for i in impls if (op, size, i) in d}
    base = m.get("openmpi-sm")
    cols = "  ".join(f"{i} {v:.3f}" for i, v in m.items())
    ratios = "  ".join(f"{i} {base / v:.2f}x" for i, v in m.items() if i != "openmpi-sm" and base)
    print(f"{op:13s} {size:6d}  {cols}   Open MPI/x: {ratios}")
PY
