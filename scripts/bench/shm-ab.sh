#!/usr/bin/env bash
# shm-ab.sh - collectives over shared memory: Open MPI (vader, the harness's
# default settings), optionally MPICH, and one or more hcomm binaries,
# alternated within each round; medians per op and size, with the ratio
# Open MPI time / hcomm time (> 1: hcomm faster). shm-small-ab.sh and
# shm-large-ab.sh are this script with their size ranges.
#
#   HARNESS=/path/to/bench scripts/bench/shm-ab.sh ROUNDS RANKS OPS MINB MAXB FACTOR BIN...
#
# HARNESS is a directory of the peer harness with build/mpi_coll_bench.openmpi
# (and .mpich for MPICH=1) built (default: the current directory).
# TARGET (default 0.3) is each size's timed loop in seconds. MPICH=1 adds
# MPICH. DROP=SIZE leaves out the rows of that size (the first row of every
# run carries its warm-up; shm-small-ab.sh drops its 4 B rows). BOOST=1
# runs everything in a new session whose autogroup has nice -20 (a machine
# others load); label such figures "under load". TRANSPORT=tcp measures TCP
# on loopback instead: Open MPI's tcp BTL (as the harness's openmpi-tcp
# rows) and `hcomm perf -transport tcp` (MPICH is left out). Each row of the
# summary ends with n=, the number of rounds of its first implementation.
set -euo pipefail
if [ "${BOOST:-0}" = 1 ] && [ -z "${SHM_AB_BOOSTED:-}" ]; then
  export SHM_AB_BOOSTED=1
  exec setsid bash -c 'echo -20 >/proc/self/autogroup && exec "$@"' _ "$0" "$@"
fi
if (($# < 7)); then
  echo "usage: shm-ab.sh ROUNDS RANKS OPS MINB MAXB FACTOR BIN..." >&2
  exit 2
fi
rounds=$1 n=$2 ops=$3 minb=$4 maxb=$5 f=$6
shift 6
harness=${HARNESS:-.} tg=${TARGET:-0.3} tr=${TRANSPORT:-shm}
ompi=openmpi-sm btl=(--mca oob_tcp_if_include lo)
if [ "$tr" = tcp ]; then
  ompi=openmpi-tcp btl+=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
fi
over=()
if ((n > $(nproc))); then over=(--oversubscribe); fi
out=$(mktemp /tmp/shm-ab.XXXXXX)
trap 'rm -f "$out"' EXIT
rows() { grep -E '^[^,]+,[^,]+,[0-9]+,' || true; }
for ((r = 0; r < rounds; r++)); do
  (cd "$harness" && mpirun.openmpi --allow-run-as-root "${over[@]}" -np "$n" --bind-to none \
    "${btl[@]}" build/mpi_coll_bench.openmpi -i "$ompi" -o "$ops" \
    -b "$minb" -e "$maxb" -f "$f" -T "$tg" -H 2>/dev/null) | rows >>"$out"
  if [ "${MPICH:-0}" = 1 ] && [ "$tr" = shm ]; then
    (cd "$harness" && mpirun.mpich -iface lo -np "$n" build/mpi_coll_bench.mpich -i mpich -o "$ops" \
      -b "$minb" -e "$maxb" -f "$f" -T "$tg" -H 2>/dev/null) | rows >>"$out"
  fi
  for b in "$@"; do
    "$b" perf -n "$n" -transport "$tr" -op "$ops" -b "$minb" -e "$maxb" -f "$f" -T "${tg}s" -csv -H \
      -label "$(basename "$b")" 2>/dev/null | rows >>"$out"
  done
done
python3 - "$out" "${DROP:-}" "$ompi" <<'PY'
import collections, statistics, sys
drop = int(sys.argv[2]) if sys.argv[2] else None
peer = sys.argv[3]
d, impls = collections.defaultdict(list), []
for line in open(sys.argv[1]):
    f = line.strip().split(",")
    impl, op, size, usec = f[0], f[1], int(f[3]), float(f[4])
    if size == drop:
        continue
    d[(op, size, impl)].append(usec)
    if impl not in impls:
        impls.append(impl)
for op, size in sorted({(k[0], k[1]) for k in d}):
    m = {i: statistics.median(d[(op, size, i)]) for i in impls if (op, size, i) in d}
    base = m.get(peer)
    cols = "  ".join(f"{i} {v:.3f}" for i, v in m.items())
    ratios = "  ".join(f"{i} {base / v:.2f}x" for i, v in m.items() if i != peer and base)
    print(f"{op:13s} {size:10d}  {cols}   Open MPI/x: {ratios}  n={len(d[(op, size, impls[0])])}")
PY
