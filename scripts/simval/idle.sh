#!/bin/bash
# The simulator's validation measurements in one go, for an idle machine
# (about 12 minutes; root for the network namespaces): shared memory
# (measure.sh with CAL=1: AllReduce per algorithm, AllGather, group
# calls on 2, 4 and 8 ranks, the calibration runs confined to fewer
# cores) and TCP between tbf-shaped namespaces (measure_tcp.sh with CAL=1,
# 400 Mbit/s, 8 B–32 KiB), three runs each, into OUT/shm and OUT/tcp.
#
# The runs are spread over the whole time: each round is one run of every
# shared-memory file, then one of every TCP file, and every run file is
# bracketed by a probe of the machine's speed (probe.sh), so that
# scripts/simval can keep the runs of one speed (the machine runs whole
# jobs 2–3× slower for minutes at a time) and take per-point medians over
# runs minutes apart. One hcomm binary, built here from the tree, serves
# every run (OUT/hcomm).
#
# Usage: scripts/simval/idle.sh [OUT]       (default simval-idle)
#        scripts/simval/report.sh OUT       the validation tables, OUT/report.md
# ROUNDS (default "1 2 3") names the rounds; TARGET and SHM_MAXB (perf's
# -T and largest size over shared memory, default 150ms and 16M) and
# TCP_TARGET (over TCP, default 300ms) shorten a trial run.
set -euo pipefail
out=${1:-simval-idle}
mkdir -p "$out/shm" "$out/tcp"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.."
go build -o "$out/hcomm" ./cmd/hcomm
{
	echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "start $(date -u +%FT%TZ)"
	uptime
} >"$out/info"
for r in ${ROUNDS:-1 2 3}; do
	echo "round $r: shared memory $(date -u +%T)" >&2
	HCOMM_BIN=$out/hcomm RUNS=$r CAL=1 scripts/simval/measure.sh "$out/shm"
	echo "round $r: TCP $(date -u +%T)" >&2
	HCOMM_BIN=$out/hcomm RUNS=$r CAL=1 MAXB=32K TARGET=${TCP_TARGET:-300ms} scripts/simval/measure_tcp.sh "$out/tcp" 400mbit
done
{
	echo "end $(date -u +%FT%TZ)"
	uptime
} >>"$out/info"
echo "done; now: scripts/simval/report.sh $out" >&2
