#!/bin/bash
# Measures what scripts/simval compares hcomm sim with: AllReduce (ring,
# rd, hd, dbtree forced in turn), AllGather and Broadcast over shared memory
# on 2, 4 and 8 ranks, three runs each, into $1 (default simval-data); and
# the calibration runs of the oversubscription terms: the AllReduces on 2
# ranks confined to one core (taskset -c 0: more ranks than cores, as 4
# and 8 ranks are on a 2-core machine), into ar_n2_c1_r*.csv.
# Usage: scripts/simval/measure.sh [dir]; then go run ./scripts/simval [-md] dir
# (parameters fitted on the 2-rank runs, validated on the 4- and 8-rank ones).
# Run it on an idle machine: small messages over shared memory are the
# scheduler's time when other jobs share the cores.
set -e
out=${1:-simval-data}
mkdir -p "$out"
go build -o "$out/hcomm" ./cmd/hcomm
for rep in 1 2 3; do
	for n in 2 4 8; do
		"$out/hcomm" perf -n $n -transport shm -op allreduce -b 8 -e 16M -f 16 -T 150ms -csv \
			-algo allreduce=ring -algo allreduce=rd -algo allreduce=hd -algo allreduce=dbtree >"$out/ar_n${n}_r${rep}.csv"
		"$out/hcomm" perf -n $n -transport shm -op allgather,broadcast -b 8 -e 16M -f 16 -T 150ms -csv >"$out/ag_n${n}_r${rep}.csv"
	done
	taskset -c 0 "$out/hcomm" perf -n 2 -transport shm -op allreduce -b 8 -e 16M -f 16 -T 150ms -csv \
		-algo allreduce=ring -algo allreduce=rd -algo allreduce=hd -algo allreduce=dbtree >"$out/ar_n2_c1_r${rep}.csv"
done
