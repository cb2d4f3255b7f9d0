#!/bin/bash
# Checks the mechanism behind 2-rank recursive doubling at 512 KiB taking
# two to three times ring's time over shared memory (the simulator's
# shm_sleep until the late wake was fixed and the term removed): rd's 512 KiB send is larger than a ring slot, runs on a
# worker goroutine while the receive polls, and with GOMAXPROCS 1 its copy
# uses up the 10 µs of polling, so the receiving rank sleeps on its futex
# and is woken late. Since TrySend copies a send of several slots inline
# when ranks have a CPU each (GOMAXPROCS 1), rd's 512 KiB send no longer
# goes to a worker and rd should take about ring's time; the check stays
# to catch a return of the late wake. Prints, for ring and rd, the time
# per call and the voluntary context switches (futex sleeps, mostly) per
# call, by default and with HCOMM_YIELD=1 (polling with sched_yield for
# 50 µs before sleeping). Expected on an idle machine: rd about as many switches per
# call as ring, and about ring's time, by default and with HCOMM_YIELD=1
# (before the inline copy: about one switch per call more than ring).
# Usage: scripts/simval/sleepcheck.sh [iterations] [rounds]
set -e
iters=${1:-2000}
rounds=${2:-3}
bin=$(mktemp -d)/hcomm
go build -o "$bin" ./cmd/hcomm
run() { # iterations algo env...: prints "µs switches"
	local n=$1 a=$2
	shift 2
	local out
	out=$(env "$@" /usr/bin/time -f "%w" "$bin" perf -n 2 -transport shm -op allreduce -b 512K -e 512K \
		-iters "$n" -warmup 10 -csv -algo allreduce=$a 2>&1)
	echo "$(echo "$out" | awk -F, '$1=="hcomm"{print $5}') $(echo "$out" | tail -1)"
}
one() { # algo, then env assignments; switches per call beyond a 3-call run's
	local a=$1
	shift
	local long short
	long=$(run "$iters" "$a" "$@")
	short=$(run 3 "$a" "$@")
	echo "$long $short" | awk -v a="$a" -v e="$*" -v n="$iters" \
		'{printf "%-5s %-14s %9.1f µs/call %6.2f voluntary switches/call\n", a, e==""?"default":e, $1, ($2-$4)/(n-3)}'
}
for r in $(seq 1 "$rounds"); do
	for a in ring rd; do
		one $a
		one $a HCOMM_YIELD=1
	done
done
rm -rf "$(dirname "$bin")"
