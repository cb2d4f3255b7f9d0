#!/usr/bin/env bash
# syscalls.sh OP SIZE ITERS [RANKS] - system calls per call over TCP on
# loopback, all ranks together, for hcomm ($HCOMM_BIN, default hcomm) and
# Open MPI's tcp BTL (the peer harness's build in $HARNESS), from strace -c.
set -uo pipefail
op=$1 size=$2 it=$3 n=${4:-2}
B=${HCOMM_BIN:-hcomm}
H=${HARNESS:?HARNESS: the peer harness directory (../shared/bench with build/)}
over=()
if ((n > $(nproc))); then over=(--oversubscribe); fi
d=$(mktemp -d /tmp/syscalls.XXXXXX)
trap 'rm -rf "$d"' EXIT
strace -f -c -o "$d/h.txt" "$B" perf -n "$n" -transport tcp -op "$op" -b "$size" -e "$size" -iters "$it" -warmup 1 -H >/dev/null 2>&1
(cd "$H" && strace -f -c -o "$d/o.txt" mpirun.openmpi --allow-run-as-root "${over[@]}" -np "$n" --bind-to none --mca oob_tcp_if_include lo \
  --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo build/mpi_coll_bench.openmpi -i openmpi-tcp -o "$op" \
  -b "$size" -e "$size" -n "$it" -N "$it" -T 0 -H >/dev/null 2>&1)
for f in h o; do
  awk -v it="$it" -v who="$([ $f = h ] && echo hcomm || echo openmpi)" -v t="$op $size" \
    '$NF ~ /^(read|readv|recvfrom|recvmsg|write|writev|sendto|sendmsg|poll|epoll_pwait|epoll_wait|futex|sched_yield|nanosleep)$/ {printf "%s %s %s=%.2f ", t, who, $NF, $4/it} END{print ""}' "$d/$f.txt"
done
