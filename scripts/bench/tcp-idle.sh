#!/usr/bin/env bash
# tcp-idle.sh OLD NEW BCASTLAT OUTDIR - the small TCP collectives against
# Open MPI in one run of a few minutes, for an idle machine: (1) 4 ranks,
# one per network namespace, Broadcast and AllReduce 8 B-4 KiB, OLD, NEW
# and NEW with the chain Broadcast (HCOMM_ALGO=broadcast=chain) beside Open
# MPI (netns-ab.sh, 3 rounds); (2) 2 ranks over TCP on loopback, Broadcast
# and AllToAll 8 B-4 KiB (shm-ab.sh TRANSPORT=tcp, 3 rounds); (3) the
# binomial and the chain Broadcast of 8 B and 4 KiB at 4 namespaces,
# streamed and dependent (scripts/bench/bcastlat built from NEW's tree, 3
# alternated rounds). HARNESS is a directory of the peer harness with
# build/mpi_coll_bench.openmpi built (default ../shared/bench); the
# namespaces are private (NSPFX tidle, NSNET 192.168.94). Everything runs
# in a session whose autogroup has nice -20. Outputs: OUTDIR/netns4.txt,
# tcp2.txt, bcastlat.txt.
#
#   go build -o /tmp/bcastlat ./scripts/bench/bcastlat
#   scripts/bench/tcp-idle.sh /tmp/hcomm-old /tmp/hcomm-new /tmp/bcastlat /tmp/idle/tcp
set -euo pipefail
if (($# != 4)); then
  echo "usage: tcp-idle.sh OLD NEW BCASTLAT OUTDIR" >&2
  exit 2
fi
if [ -z "${TCP_IDLE_BOOSTED:-}" ]; then
  export TCP_IDLE_BOOSTED=1
  exec setsid bash -c 'echo -20 >/proc/self/autogroup && exec "$@"' _ "$0" "$@"
fi
old=$(realpath "$1") new=$(realpath "$2") lat=$(realpath "$3") out=$4
here=$(cd "$(dirname "$0")" && pwd)
harness=$(realpath "${HARNESS:-$here/../../../shared/bench}")
pfx=${NSPFX:-tidle} net=${NSNET:-192.168.94}
mkdir -p "$out"
out=$(realpath "$out")
echo "# tcp-idle $(date -u +%FT%TZ) old=$old new=$new load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/netns4.txt" "$out/tcp2.txt" "$out/bcastlat.txt" >/dev/null

(cd "$harness" && NSPFX=$pfx NSNET=$net RANKS=4 OPS=broadcast,allreduce MAXB=4K TARGET=0.2 \
  "$here/netns-ab.sh" 3 old="$old" new="$new" chain="$new:HCOMM_ALGO=broadcast=chain" ompi) >>"$out/netns4.txt" 2>&1

HARNESS=$harness TRANSPORT=tcp TARGET=0.2 DROP=4 \
  "$here/shm-ab.sh" 3 2 broadcast,alltoall 4 4096 8 "$old" "$new" >>"$out/tcp2.txt" 2>&1

# Private namespaces as netns-ab.sh makes them.
priv=$(mktemp -d /tmp/tcp-idle.XXXXXX)
sed -e "s/^PFX=cbench/PFX=$pfx/" -e "s/^SUBNET_PREFIX=192.168.77/SUBNET_PREFIX=$net/" "$harness/netns.sh" >"$priv/netns.sh"
chmod +x "$priv/netns.sh"
trap '"$priv/netns.sh" down >/dev/null 2>&1; rm -rf "$priv"' EXIT
"$priv/netns.sh" up 4 >/dev/null
printf '#!/bin/sh\nhost=$1\nshift\nexec ip netns exec "$host" sh -c "$*"\n' >"$priv/rsh"
chmod +x "$priv/rsh"
hosts=$pfx"0:1,"$pfx"1:1,"$pfx"2:1,"$pfx"3:1"
for r in 1 2 3; do
  for b in 8 4096; do
    for a in binomial chain; do
      ip netns exec "${pfx}0" "$new" run --hosts "$hosts" --rsh "$priv/rsh" --store-addr "$net.10:0" \
        -x HCOMM_ALGO=broadcast=$a -- "$lat" -b $b -label "$a" | sed "s/^/$r /" >>"$out/bcastlat.txt"
    done
  done
done
python3 - "$out/bcastlat.txt" <<'PY' >>"$out/bcastlat.txt"
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 16 and f[2] == "ranks":
        d[(int(f[5]), f[1])].append([float(f[i]) for i in (8, 10, 13, 15)])
print("# medians of the rounds (µs): bytes algorithm streamed-mean streamed-median dependent-mean dependent-median")
for (b, a), v in sorted(d.items()):
    print(b, a, *(round(statistics.median(x[i] for x in v), 2) for i in range(4)))
PY
echo "# done $(date -u +%FT%TZ)" >>"$out/bcastlat.txt"
