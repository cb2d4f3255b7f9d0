#!/usr/bin/env bash
# netns-ab.sh ROUNDS VARIANT... - small collectives across network namespaces,
# hcomm variants and Open MPI measured alternately in one run (A/B/A/B), one
# rank per namespace cbench<i> (../shared/bench/netns.sh; run from a writable
# copy of that folder with build/mpi_coll_bench.openmpi built).
#
#   VARIANT  label=BIN[:VAR=VALUE,...]  an hcomm binary, with variables for every rank
#            ompi                       Open MPI with mpi_yield_when_idle (as the harness)
#
# RANKS (4), MAXB (4K), OPS (allreduce,barrier), FACTOR (8), TARGET (0.2) as
# in hcomm-extra.sh. BOOST=1 runs everything in a new session whose autogroup
# has nice -20, so that on a machine other users load the measured processes
# get the CPUs about as on an idle one. Prints the harness's CSV rows with the
# round first, then the median per label, op and size.
set -euo pipefail
rounds=${1:?usage: netns-ab.sh ROUNDS VARIANT...}
shift
if [ "${BOOST:-0}" = 1 ] && [ -z "${NETNS_AB_BOOSTED:-}" ]; then
  export NETNS_AB_BOOSTED=1
  exec setsid bash -c 'echo -20 >/proc/self/autogroup && exec "$@"' _ "$0" "$rounds" "$@"
fi
n=${RANKS:-4} maxb=${MAXB:-4K} ops=${OPS:-allreduce,barrier} f=${FACTOR:-8} tg=${TARGET:-0.2}
./netns.sh up "$n" >/dev/null
rsh=$(mktemp /tmp/hcomm-nsrsh.XXXXXX)
out=$(mktemp /tmp/hcomm-netns-ab.XXXXXX)
trap './netns.sh down >/dev/null 2>&1; rm -f "$rsh" "$out"' EXIT
printf '#!/bin/sh\nhost=$1\nshift\nexec ip netns exec "$host" sh -c "$*"\n' >"$rsh"
chmod +x "$rsh"
hosts=$(for ((i = 0; i < n; i++)); do printf 'cbench%d:1,' "$i"; done)
for ((r = 1; r <= rounds; r++)); do
  for v in "$@"; do
    if [ "$v" = ompi ]; then
      MPIRUN_EXTRA="--mca mpi_yield_when_idle 1" ./netns.sh ompi "$n" -i openmpi-tcp-netns \
        -o "$ops" -b 8 -e "$maxb" -f "$f" -T "$tg" -H | sed "s/^/$r,/" | tee -a "$out"
      continue
    fi
    label=${v%%=*} rest=${v#*=}
    bin=${rest%%:*} xs=()
    if [[ "$rest" == *:* ]]; then
      IFS=, read -ra vars <<<"${rest#*:}"
      for e in "${vars[@]}"; do xs+=(-x "$e"); done
    fi
    ip netns exec cbench0 "$bin" run --hosts "${hosts%,}" --rsh "$rsh" --store-addr 192.168.77.10:0 "${xs[@]}" -- \
      "$bin" perf -op "$ops" -b 8 -e "$maxb" -f "$f" -T "$tg" -csv -H -label "$label" | sed "s/^/$r,/" | tee -a "$out"
  done
done
echo "# medians (µs) of $rounds rounds: label op bytes median [runs]"
python3 - "$out" <<'PY'
import csv, collections, statistics, sys
d = collections.defaultdict(list)
for row in csv.reader(open(sys.argv[1])):
    if len(row) >= 6 and row[5].replace('.', '', 1).isdigit():
        d[(row[2], int(row[4]), row[1])].append(float(row[5]))
for (op, size, label), v in sorted(d.items()):
    print(f"{label} {op} {size} {statistics.median(v):.1f} {[round(x, 1) for x in v]}")
PY
