#!/bin/bash
# Measures what scripts/simval compares hcomm sim with, over shared memory,
# into $1 (default simval-data), three runs each:
#   validation (and the 2-rank fit): AllReduce (ring, rd, hd, dbtree forced
#     in turn), AllGather and Broadcast on 2, 4 and 8 ranks (ar_nN_rR.csv,
#     ag_nN_rR.csv); small AllReduce and AllGather left to the planner, which
#     runs them as group calls through slots (sl_nN_rR.csv);
#   calibration of the terms for more ranks than cores, never validated:
#     the same AllReduces and slot calls on 2, 3 and 4 ranks confined to one
#     core (taskset -c 0) and on 3 ranks on the two cores
#     (ar_nN_cC_rR.csv, sl_nN_cC_rR.csv; C = 1, or 2 for 3 ranks).
# The validated combinations of ranks and cores (4 and 8 ranks on 2 cores)
# are never among the calibration runs.
# CAL=1 adds, three runs each, calibration runs that tell the formulas for
# more ranks than cores apart (they agree on every run above):
#   6 ranks on the two cores (ar_n6_c2_rR.csv, sl_n6_c2_rR.csv, fitted on
#     like the others): a schedule's wait costs 2 wakes per core-local
#     formula, 2.5 per other rank per core, a group call 2.5 or 4;
#   2 ranks on the two cores with HCOMM_YIELD=1 (yield_ar_n2_rR.csv,
#     yield_sl_n2_rR.csv): the cost of polling with sched_yield when no
#     rank shares a core, beside ar_n2_rR.csv; simval prints it (not
#     fitted) as the least a turn of another rank can cost.
# Every run file is bracketed by a probe of the machine's speed at that
# moment (probe.sh; DIR/probes.csv, PROBE=0: none), and the three runs of
# each file are spread over the whole measurement (the runs loop is the
# outermost), so that scripts/simval can fit and validate within one of
# the machine's two speeds and take medians over runs minutes apart.
# RUNS (default "1 2 3") names the runs to make: scripts/simval/idle.sh
# calls this once a run, between the TCP runs. HCOMM_BIN: use that hcomm
# binary instead of building one. TARGET (perf -T, default 150ms) and
# SHM_MAXB (the largest size, default 16M) shorten a trial run.
# Usage: scripts/simval/measure.sh [dir]; then go run ./scripts/simval [-md] dir
# Run it on an idle machine: small messages over shared memory are the
# scheduler's time when other jobs share the cores. BOOST=1 runs it in a
# new session whose autogroup has nice -20, which keeps most of the CPU
# time for it on a machine others load (label such figures "under load").
set -e
if [ "${BOOST:-0}" = 1 ] && [ -z "${SIMVAL_BOOSTED:-}" ]; then
	export SIMVAL_BOOSTED=1
	exec setsid bash -c 'echo -20 >/proc/self/autogroup && exec "$@"' _ "$0" "$@"
fi
out=${1:-simval-data}
mkdir -p "$out"
if [ -n "${HCOMM_BIN:-}" ]; then
	cp "$HCOMM_BIN" "$out/hcomm"
else
	go build -o "$out/hcomm" ./cmd/hcomm
fi
. "$(dirname "$0")/probe.sh"
probe_init "$out" "$out/hcomm"
# to FILE cmd...: cmd's output into FILE, between two probes.
to() {
	local f=$1
	shift
	probe_start
	"$@" >"$f"
	probe_end "$f"
}
# The executor fuses large messages over shared memory (a pair exchange in
# one transport call, a copy riding its send): simval simulates the runs
# so. Sets without this file were measured before it did.
touch "$out/fused"
ar() { # ranks, then a command prefix (taskset)
	local n=$1
	shift
	"$@" "$out/hcomm" perf -n "$n" -transport shm -op allreduce -b 8 -e "${SHM_MAXB:-16M}" -f 16 -T "${TARGET:-150ms}" -csv \
		-algo allreduce=ring -algo allreduce=rd -algo allreduce=hd -algo allreduce=dbtree
}
sl() {
	local n=$1
	shift
	"$@" "$out/hcomm" perf -n "$n" -transport shm -op allreduce,allgather -b 8 -e 1K -f 4 -T "${TARGET:-150ms}" -csv
}
for rep in ${RUNS:-1 2 3}; do
	for n in 2 4 8; do
		to "$out/ar_n${n}_r${rep}.csv" ar $n
		to "$out/ag_n${n}_r${rep}.csv" "$out/hcomm" perf -n $n -transport shm -op allgather,broadcast -b 8 -e "${SHM_MAXB:-16M}" -f 16 -T "${TARGET:-150ms}" -csv
		to "$out/sl_n${n}_r${rep}.csv" sl $n
	done
	for n in 2 3 4; do
		to "$out/ar_n${n}_c1_r${rep}.csv" ar $n taskset -c 0
		to "$out/sl_n${n}_c1_r${rep}.csv" sl $n taskset -c 0
	done
	to "$out/ar_n3_c2_r${rep}.csv" ar 3
	to "$out/sl_n3_c2_r${rep}.csv" sl 3
	if [ "${CAL:-0}" = 1 ]; then
		to "$out/ar_n6_c2_r${rep}.csv" ar 6 taskset -c 0,1
		to "$out/sl_n6_c2_r${rep}.csv" sl 6 taskset -c 0,1
		to "$out/yield_ar_n2_r${rep}.csv" ar 2 env HCOMM_YIELD=1
		to "$out/yield_sl_n2_r${rep}.csv" sl 2 env HCOMM_YIELD=1
	fi
done
