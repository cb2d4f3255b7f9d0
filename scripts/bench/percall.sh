#!/usr/bin/env bash
# percall.sh TRANSPORT RANKS OP SIZE LO HI [RUNS]: CPU time, system calls and context switches per call,
# all ranks together, for Open MPI (vader or tcp BTL, as the harness runs it) and hcomm ($HCOMM_BIN):
# perf stat of the whole job at HI iterations minus LO iterations, over HI-LO (start-up cancels out).
set -uo pipefail
tr=$1 n=$2 op=$3 size=$4 lo=$5 hi=$6 runs=${7:-3}
H=${HARNESS:?HARNESS: the peer harness directory (../shared/bench with build/)} B=${HCOMM_BIN:-hcomm}
over=(); if ((n > $(nproc))); then over=(--oversubscribe); fi
if [ "$tr" = shm ]; then btl=(--mca oob_tcp_if_include lo); impl=openmpi-sm; else
  btl=(--mca oob_tcp_if_include lo --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo); impl=openmpi-tcp; fi
ev=task-clock,raw_syscalls:sys_enter,context-switches
stat() { perf stat -x, -e $ev -- "$@" 2>&1 >/dev/null | awk -F, '/task-clock/{c=$1} /sys_enter/{s=$1} /context-switches/{x=$1} END{print c, s, x}'; }
ompi() { (cd "$H" && stat mpirun.openmpi --allow-run-as-root "${over[@]}" -np "$n" --bind-to none "${btl[@]}" \
   build/mpi_coll_bench.openmpi -i $impl -o "$op" -b "$size" -e "$size" -n "$1" -N "$1" -T 0 -H); }
hc() { stat "$B" perf -n "$n" -transport "$tr" -op "$op" -b "$size" -e "$size" -iters "$1" -warmup 1 -H; }
for ((r = 0; r < runs; r++)); do
  for impl2 in ompi hc; do
    read c1 s1 x1 < <($impl2 $lo); read c2 s2 x2 < <($impl2 $hi)
    awk -v i=$impl2 -v c1=$c1 -v c2=$c2 -v s1=$s1 -v s2=$s2 -v x1=$x1 -v x2=$x2 -v d=$((hi-lo)) \
      -v t="$tr $n $op $size" 'BEGIN{printf "%s %s: %.2f us CPU/call  %.2f syscalls/call  %.3f ctxsw/call\n", t, i, (c2-c1)*1000/d, (s2-s1)/d, (x2-x1)/d}'
  done
done
