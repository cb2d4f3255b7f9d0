#!/usr/bin/env bash
# multipath.sh - busbw of hcomm over two network paths between network
# namespaces, against one path, an equal split and HCOMM_NSOCKS on one path.
#
#   HCOMM=/path/to/hcomm scripts/bench/multipath.sh [REPS] [PER_HOST]
#
# Two namespaces mpb0, mpb1 (PER_HOST ranks each, default 1; P=name for
# other names), each with two veth links on bridges of their own: eth0
# 192.168.90.(10+i), eth1 192.168.91.(10+i), shaped with tbf (RATE each,
# default 1gbit; SLOW, default 250mbit, for eth1 in the weighted runs;
# ONLY=regexp runs only the configurations whose label matches; two-equal-fixed
# is two-equal with HCOMM_PATH_WEIGHTS=equal), and the
# store's link eth2 (mpnet.sh). Each repetition runs every
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
RATE=${RATE:-1gbit}   # each link's rate
SLOW=${SLOW:-250mbit} # the slow link's rate in the weighted runs
ONLY=${ONLY:-}        # labels to run (a regular expression), if not all
OUT=${OUT:-/tmp/multipath-$(date +%s).csv}
. "$(dirname "$0")/mpnet.sh"
up

run() { # label env...
  local label=$1; shift
  if [ -n "$ONLY" ] && ! [[ $label =~ $ONLY ]]; then return; fi
  mpnet_run $HCOMM $PER "$@" -- $HCOMM perf -op $OPS $SIZES -csv -label $label | grep -v '^impl' | tee -a $OUT
}

for rep in $(seq $REPS); do
  echo "== repetition $rep ($(uptime))" >&2
  rates $RATE $RATE
  run two-equal HCOMM_SOCKET_IFNAME==eth0,eth1
  run two-equal-fixed HCOMM_SOCKET_IFNAME==eth0,eth1 HCOMM_PATH_WEIGHTS=equal
  run one-link HCOMM_SOCKET_IFNAME==eth0
  run one-link-nsocks2 HCOMM_SOCKET_IFNAME==eth0 HCOMM_NSOCKS=2
  rates $RATE $SLOW
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
