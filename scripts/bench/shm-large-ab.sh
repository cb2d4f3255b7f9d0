#!/usr/bin/env bash
# shm-large-ab.sh ROUNDS RANKS OPS MINB MAXB FACTOR BIN... — Open MPI (vader, default settings as the harness) and hcomm
# binaries over shm, alternated in every round; medians per op/size; ratio Open MPI time / hcomm time.
# ENV: HARNESS (required), TARGET (s per size, default 0.3), MPICH=1 adds MPICH.
set -uo pipefail
rounds=$1 n=$2 ops=$3 minb=$4 maxb=$5 f=$6; shift 6
H=${HARNESS:?HARNESS: the peer harness directory (../shared/bench with build/)} tg=${TARGET:-0.3}
over=(); if ((n > $(nproc))); then over=(--oversubscribe); fi
out=$(mktemp /tmp/shm-large-ab.XXXXXX)
rows() { grep -E '^[^,]+,[^,]+,[0-9]+,' || true; }
for ((r = 0; r < rounds; r++)); do
  (cd "$H" && mpirun.openmpi --allow-run-as-root "${over[@]}" -np "$n" --bind-to none --mca oob_tcp_if_include lo \
     build/mpi_coll_bench.openmpi -i openmpi-sm -o "$ops" -b "$minb" -e "$maxb" -f "$f" -T "$tg" -H 2>/dev/null) | rows >>"$out"
  if [ "${MPICH:-0}" = 1 ]; then
    (cd "$H" && mpirun.mpich -iface lo -np "$n" build/mpi_coll_bench.mpich -i mpich -o "$ops" -b "$minb" -e "$maxb" -f "$f" -T "$tg" -H 2>/dev/null) | rows >>"$out"
  fi
  for b in "$@"; do
    "$b" perf -n "$n" -transport shm -op "$ops" -b "$minb" -e "$maxb" -f "$f" -T "${tg}s" -csv -H -label "$(basename "$b")" 2>/dev/null | rows >>"$out"
  done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
d, impls = collections.defaultdict(list), []
for line in open(sys.argv[1]):
    f = line.strip().split(",")
    impl, op, size, usec = f[0], f[1], int(f[3]), float(f[4])
    d[(op, size, impl)].append(usec)
    if impl not in impls: impls.append(impl)
for op, size in sorted({(k[0], k[1]) for k in d}):
    m = {i: statistics.median(d[(op, size, i)]) for i in impls if (op, size, i) in d}
    base = m.get("openmpi-sm")
    cols = "  ".join(f"{i} {v:.3f}" for i, v in m.items())
    ratios = "  ".join(f"{i} {base / v:.2f}x" for i, v in m.items() if i != "openmpi-sm" and base)
    print(f"{op:13s} {size:10d}  {cols}   Open MPI/x: {ratios}  n={len(d[(op,size,impls[0])])}")
PY
rm -f "$out"
