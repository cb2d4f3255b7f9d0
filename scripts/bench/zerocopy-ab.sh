#!/usr/bin/env bash
# zerocopy-ab.sh - A/B of the zero-copy path on registered memory, beside
# Open MPI, alternating the three in one run (A/B/C, A/B/C, ...).
#
#   hcomm        buffers in ordinary memory (transport: staging ring)
#   hcomm-reg    buffers from Comm.Alloc (-registered: zero-copy path)
#   openmpi-sm   ../shared/bench's mpi_coll_bench over vader (CMA single copy)
#
# Env: HCOMM_BIN (hcomm binary), MPIBENCH (mpi_coll_bench built with
# mpicc.openmpi), RUNS (3), RANKS (2), OPS, MINB (512K), MAXB (16M),
# OUT (CSV file to append to), ENGINE (a size: also run hcomm-reg-eng,
# registered buffers with HCOMM_COPY_ENGINE=ENGINE, the copy engine
# forced on), OLD_BIN (another hcomm binary: also run hcomm-reg-old,
# registered buffers with it, for an A/B of two versions of the path),
# NOMPI (1: leave Open MPI out), ZC (1: also run hcomm-reg-zc, registered
# buffers with HCOMM_ZERO_COPY=256K, which takes the zero-copy path at
# every size: hcomm-reg follows HCOMM_ZERO_COPY=auto, which runs the
# ordinary program where that measured faster), MED (1: hcomm's rows as
# -json lines, which carry the per-call median med_usec besides the mean:
# under load the mean is mostly the load's tails).
# Rows: impl,op,ranks,bytes,usec,algbw,busbw (with MED=1 hcomm's are JSON).
# Summarise with: python3 scripts/bench/zerocopy-summary.py [--med] OUT
set -euo pipefail
bin=${HCOMM_BIN:-hcomm}
mpib=${MPIBENCH:-/tmp/rmb/mpi_coll_bench}
runs=${RUNS:-3}
n=${RANKS:-2}
ops=${OPS:-allgather,alltoall,broadcast,allreduce,reducescatter}
minb=${MINB:-512K}
maxb=${MAXB:-16M}
out=${OUT:-/tmp/zerocopy-ab.csv}
fmt=(-csv -H)
[[ ${MED:-} == 1 ]] && fmt=(-json)
over=
(( n > $(nproc) )) && over=--oversubscribe
for i in $(seq "$runs"); do
  "$bin" perf -n "$n" -transport shm -op "$ops" -b "$minb" -e "$maxb" -f 4 "${fmt[@]}" -label hcomm >>"$out"
  "$bin" perf -n "$n" -transport shm -op "$ops" -b "$minb" -e "$maxb" -f 4 "${fmt[@]}" -label hcomm-reg -registered >>"$out"
  if [[ ${ZC:-} == 1 ]]; then
    HCOMM_ZERO_COPY=256K "$bin" perf -n "$n" -transport shm -op "$ops" -b "$minb" -e "$maxb" -f 4 "${fmt[@]}" \
      -label hcomm-reg-zc -registered >>"$out"
  fi
  if [[ -n ${OLD_BIN:-} ]]; then
    "$OLD_BIN" perf -n "$n" -transport shm -op "$ops" -b "$minb" -e "$maxb" -f 4 "${fmt[@]}" \
      -label hcomm-reg-old -registered >>"$out"
  fi
  if [[ -n ${ENGINE:-} ]]; then
    HCOMM_COPY_ENGINE=$ENGINE "$bin" perf -n "$n" -transport shm -op "$ops" -b "$minb" -e "$maxb" -f 4 "${fmt[@]}" \
      -label hcomm-reg-eng -registered >>"$out"
  fi
  [[ ${NOMPI:-} == 1 ]] && continue
  mpirun.openmpi --allow-run-as-root -np "$n" $over --bind-to none --mca oob_tcp_if_include lo \
    "$mpib" -i openmpi-sm -o "$ops" -b "$minb" -e "$maxb" -f 4 -H >>"$out"
done
