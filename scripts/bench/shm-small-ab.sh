#!/usr/bin/env bash
# shm-small-ab.sh - small collectives over shared memory beside Open MPI:
# shm-ab.sh from 4 B by factors of 2 up to MAXB, the 4 B rows dropped (the
# first row of every run carries its warm-up, so list a sized op first;
# Barrier has none).
#
#   HARNESS=/path/to/bench BOOST=1 scripts/bench/shm-small-ab.sh 11 2 \
#     allreduce,barrier,broadcast,allgather,alltoall 32 /tmp/hcomm-old /tmp/hcomm-new
#
# Arguments: rounds, ranks, ops, largest size, binaries. HARNESS, TARGET,
# MPICH and BOOST as for shm-ab.sh.
set -euo pipefail
if (($# < 5)); then
  echo "usage: shm-small-ab.sh ROUNDS RANKS OPS MAXB BIN..." >&2
  exit 2
fi
rounds=$1 n=$2 ops=$3 maxb=$4
shift 4
DROP=4 exec "$(dirname "$0")/shm-ab.sh" "$rounds" "$n" "$ops" 4 "$maxb" 2 "$@"
