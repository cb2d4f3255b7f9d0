#!/usr/bin/env bash
# multipath.sh - busbw of hcomm over two network paths between network
# namespaces, against one path, an equal split and HCOMM_NSOCKS on one path.
#
#   HCOMM=/path/to/hcomm scripts/bench/multipath.sh [REPS] [PER_HOST]
#
# Two namespaces mpb0, mpb1 (PER_HOST ranks each, default 1), each with two
# veth links on bridges of their own: eth0 192.168.90.(10+i), eth1
# 192.168.91.(10+i), shaped with tbf. Each repetition runs every
# configuration once, in turn (A/B/C/... so load affects them alike), and
# prints hcomm perf's CSV rows labelled with the configuration; summarise
# with the awk at the end (medians over repetitions of busbw per label,
# op and size). Needs root, iproute2 and tc.
set -euo pipefail
HCOMM=${HCOMM:-hcomm}
REPS=${1:-3}
PER=${2:-1}
SIZES=${SIZES:--b 8M -e 256M -f 8}
OPS=${OPS:-allreduce,broadcast}
P=mpb
OUT=${OUT:-/tmp/multipath-$(date +%s).csv}

down() { for ns in ${P}br ${P}0 ${P}1; do ip netns del $ns 2>/dev/null || true; done; }
shape() { # ns dev rate
  ip netns exec $1 tc qdisc replace dev $2 root tbf rate $3 burst 1mb latency 20ms
}
up() {
  down
  ip netns add ${P}br
  ip -n ${P}br link set lo up
  for b in 0 1; do
    ip -n ${P}br link add br$b type bridge
    ip -n ${P}br link set br$b up
  done
  for i in 0 1; do
    ns=$P$i
    ip netns add $ns
    ip -n $ns link set lo up
    for b in 0 1; do
      ip -n $ns link add eth$b type veth peer name p$b$i netns ${P}br
      ip -n $ns addr add 192.168.9$b.$((10 + i))/24 dev eth$b
      ip -n $ns link set eth$b up
      ip -n ${P}br link set p$b$i master br$b
      ip -n ${P}br link set p$b$i up
    done
  done
  sleep 1
}
rates() { # rate0 rate1
  for i in 0 1; do shape $P$i eth0 $1; shape $P$i eth1 $2; done
}

RSH=$(mktemp)
printf '#!/bin/sh\nhost=$1; shift\nexec ip netns exec "$host" sh -c "$*"\n' > $RSH
chmod +x $RSH
trap 'down; rm -f $RSH' EXIT
up

run() { # label env...
  local label=$1; shift
  local xs=()
  for kv in "$@"; do xs+=(-x "$kv"); done
  ip netns exec ${P}0 $HCOMM run --hosts ${P}0:$PER,${P}1:$PER --rsh $RSH --store-addr 192.168.90.10:0 \
    "${xs[@]}" -- $HCOMM perf -op $OPS $SIZES -csv -label $label | grep -v '^impl' | tee -a $OUT
}

for rep in $(seq $REPS); do
  echo "== repetition $rep ($(uptime))" >&2
  rates 1gbit 1gbit
  run two-equal HCOMM_SOCKET_IFNAME==eth0,eth1
  run one-link HCOMM_SOCKET_IFNAME==eth0
  run one-link-nsocks2 HCOMM_SOCKET_IFNAME==eth0 HCOMM_NSOCKS=2
  rates 1gbit 250mbit
  run quarter-weighted HCOMM_SOCKET_IFNAME==eth0,eth1
  run quarter-equal HCOMM_SOCKET_IFNAME==eth0,eth1 HCOMM_PATH_WEIGHTS=equal
  run quarter-fast-alone HCOMM_SOCKET_IFNAME==eth0
done
echo "rows in $OUT" >&2
# medians of busbw (column 7) per label, op, bytes
python3 - "$OUT" <<'PY'
import csv, statistics, sys
rows = {}
for r in csv.reader(open(sys.argv[1])):
    if len(r) == 7 and r[0] != "impl":
        rows.setdefault((r[1], int(r[3]), r[0]), []).append(float(r[6]))
for (op, size, label), v in sorted(rows.items()):
    print(f"{op:10s} {size >> 20:4d} MiB {label:20s} busbw median {statistics.median(v):.4f} GB/s of {len(v)}: {v}")
PY
