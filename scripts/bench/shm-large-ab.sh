#!/usr/bin/env bash
# shm-large-ab.sh ROUNDS RANKS OPS MINB MAXB FACTOR BIN... - shm-ab.sh with
# its size range given, HARNESS required (../shared/bench with build/).
#
#   HARNESS=../shared/bench MPICH=1 scripts/bench/shm-large-ab.sh 3 2 allgather,alltoall 32M 256M 2 /tmp/hcomm
set -euo pipefail
: "${HARNESS:?HARNESS: the peer harness directory (../shared/bench with build/)}"
exec "$(dirname "$0")/shm-ab.sh" "$@"
