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
# get the CPUs about as on an idle one. NSPFX and NSNET (default cbench and
# 192.168.77, the harness's) name other namespaces and another subnet, from
# private copies of netns.sh and nsrsh, so that two runs on one machine do
# not take each other's namespaces down. Prints the harness's CSV rows with
# the round first (hcomm's with its median call, med_usec of `hcomm perf
# -json`, as a last column), then the median per label, op and size, and
# for hcomm the median of the rounds' median calls: a mean far above it
# says that a few long calls make the mean (a streamed Broadcast whose root
# runs ahead of its tree, stalls of the machine).
set -euo pipefail
rounds=${1:?usage: netns-ab.sh ROUNDS VARIANT...}
shift
if [ "${BOOST:-0}" = 1 ] && [ -z "${NETNS_AB_BOOSTED:-}" ]; then
  export NETNS_AB_BOOSTED=1
  exec setsid bash -c 'echo -20 >/proc/self/autogroup && exec "$@"' _ "$0" "$rounds" "$@"
fi
n=${RANKS:-4} maxb=${MAXB:-4K} ops=${OPS:-allreduce,barrier} f=${FACTOR:-8} tg=${TARGET:-0.2}
pfx=${NSPFX:-cbench} net=${NSNET:-192.168.77}
priv=$(mktemp -d /tmp/hcomm-netns-ab.XXXXXX)
ns=./netns.sh
if [ "$pfx" != cbench ] || [ "$net" != 192.168.77 ]; then
  sed -e "s/^PFX=cbench/PFX=$pfx/" -e "s/^SUBNET_PREFIX=192.168.77/SUBNET_PREFIX=$net/" netns.sh >"$priv/netns.sh"
  sed -e "s/192\.168\.77/$net/g" -e "s/cbench/$pfx/g" nsrsh >"$priv/nsrsh"
  chmod +x "$priv/netns.sh" "$priv/nsrsh"
  ln -s "$PWD/build" "$priv/build"
  ns=$priv/netns.sh
fi
"$ns" up "$n" >/dev/null
rsh=$priv/rsh
out=$priv/rows.csv
trap '"$ns" down >/dev/null 2>&1; rm -rf "$priv"' EXIT
printf '#!/bin/sh\nhost=$1\nshift\nexec ip netns exec "$host" sh -c "$*"\n' >"$rsh"
chmod +x "$rsh"
hosts=$(for ((i = 0; i < n; i++)); do printf '%s%d:1,' "$pfx" "$i"; done)
for ((r = 1; r <= rounds; r++)); do
  for v in "$@"; do
    if [ "$v" = ompi ]; then
      MPIRUN_EXTRA="--mca mpi_yield_when_idle 1" "$ns" ompi "$n" -i openmpi-tcp-netns \
        -o "$ops" -b 8 -e "$maxb" -f "$f" -T "$tg" -H | sed "s/^/$r,/" | tee -a "$out"
      continue
    fi
    label=${v%%=*} rest=${v#*=}
    bin=${rest%%:*} xs=()
    if [[ "$rest" == *:* ]]; then
      IFS=, read -ra vars <<<"${rest#*:}"
      for e in "${vars[@]}"; do xs+=(-x "$e"); done
    fi
    ip netns exec "${pfx}0" "$bin" run --hosts "${hosts%,}" --rsh "$rsh" --store-addr "$net.10:0" "${xs[@]}" -- \
      "$bin" perf -op "$ops" -b 8 -e "$maxb" -f "$f" -T "$tg" -json -H -label "$label" | python3 -c '
import json, sys
for line in sys.stdin:
    if not line.startswith("{"):
        sys.stdout.write(line)
        continue
    r = json.loads(line)
    print("%s,%s,%d,%d,%.3f,%.4f,%.4f,%.3f" % (r["impl"], r["op"], r["ranks"], r["bytes"], r["usec"], r["algbw_GBps"], r["busbw_GBps"], r["med_usec"]))
' | sed "s/^/$r,/" | tee -a "$out"
  done
done
echo "# medians (µs) of $rounds rounds: label op bytes median [runs] (hcomm: median call, median of rounds)"
python3 - "$out" <<'PY'
import csv, collections, statistics, sys
d = collections.defaultdict(list)
med = collections.defaultdict(list)
for row in csv.reader(open(sys.argv[1])):
    if len(row) >= 6 and row[5].replace('.', '', 1).isdigit():
        d[(row[2], int(row[4]), row[1])].append(float(row[5]))
        if len(row) >= 9:
            med[(row[2], int(row[4]), row[1])].append(float(row[8]))
for (op, size, label), v in sorted(d.items()):
    m = med.get((op, size, label))
    extra = f" (median call {statistics.median(m):.1f})" if m else ""
    print(f"{label} {op} {size} {statistics.median(v):.1f} {[round(x, 1) for x in v]}{extra}")
PY
