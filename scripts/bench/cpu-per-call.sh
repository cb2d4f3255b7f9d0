#!/usr/bin/env bash
# cpu-per-call.sh - CPU time one collective costs all its ranks together,
# a figure a loaded machine disturbs far less than wall time: the
# task-clock of `hcomm perf` (perf stat) at 45 iterations minus that at 5,
# over 40, averaged over RUNS pairs. Start-up, rendezvous and buffer setup
# cancel out; polling while a rank waits is counted.
#
#   OP=allgather SIZE=64M TRANSPORT=shm RUNS=3 scripts/bench/cpu-per-call.sh "" "HCOMM_SHM_CMA=512K"
#
# Each argument is a set of environment assignments (space separated, ""
# for none) to measure; they are alternated. HCOMM_BIN names the binary
# (default: hcomm on PATH), N the rank count (default 2).
set -euo pipefail
bin=${HCOMM_BIN:-$(command -v hcomm)}
op=${OP:-allgather} size=${SIZE:-64M} tr=${TRANSPORT:-shm} runs=${RUNS:-3} n=${N:-2}
(($# > 0)) || set -- ""
clock() { # clock ITERS ENV...: task-clock in ms of one run
  local it=$1
  shift
  env "$@" perf stat -x, -e task-clock -- "$bin" perf -n "$n" -transport "$tr" -op "$op" \
    -b "$size" -e "$size" -iters "$it" -warmup 1 -H 2>&1 >/dev/null | awk -F, '/task-clock/ {print $1}'
}
for ((i = 1; i <= runs; i++)); do
  for spec in "$@"; do
    # shellcheck disable=SC2086 # spec is a list of assignments
    lo=$(clock 5 $spec) hi=$(clock 45 $spec)
    awk -v s="${spec:-default}" -v lo="$lo" -v hi="$hi" -v op="$op" -v size="$size" -v tr="$tr" \
      'BEGIN {printf "%s %s %s %s: %.2f ms CPU per call\n", tr, op, size, s, (hi - lo) / 40}'
  done
done
