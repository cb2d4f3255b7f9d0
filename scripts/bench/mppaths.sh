#!/usr/bin/env bash
# mppaths.sh - where the bytes of a stream of large collectives go, per
# rank and path, over the two links of multipath.sh (mpnet.sh).
#
#   HCOMM=/path/to/hcomm scripts/bench/mppaths.sh [PER_HOST] [RATE0] [RATE1]
#
# Runs failstream (OP, default allreduce, BYTES per call, default 256M, for
# FOR, default 20s) over eth0 and eth1 shaped to RATE0 and RATE1 (default
# 1gbit each), PER_HOST ranks a host (default 2), and prints rank 0's
# algorithm, the median busbw of its calls and every rank's paths (bytes
# sent and received, the share of its last striped message) at the end,
# and each rank's bytes sent per path over its total.
set -euo pipefail
HCOMM=${HCOMM:-hcomm}
PER=${1:-2}
OP=${OP:-allreduce}
BYTES=${BYTES:-256M}
FOR=${FOR:-20s}
DIR=${DIR:-$(mktemp -d /tmp/mppaths.XXXXXX)}
mkdir -p $DIR
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${FAILSTREAM:-}" ]; then
  FAILSTREAM=$DIR/failstream
  (cd "$here" && go build -o $FAILSTREAM ./failstream)
fi
. "$here/mpnet.sh"
up
rates ${2:-1gbit} ${3:-1gbit}
out=$DIR/$OP-$(date +%s)
mpnet_run $HCOMM $PER HCOMM_SOCKET_IFNAME==eth0,eth1 -- $FAILSTREAM -op $OP -bytes $BYTES -for $FOR -out $out
python3 - $out <<'PY'
import glob, re, statistics, sys
out = sys.argv[1]
head, calls = {}, []
for line in open(out):
    f = line.split()
    if f[0] == "failstream":
        head = dict(kv.split("=") for kv in f[1:])
    elif f[0] == "call":
        calls.append((int(f[2]), int(f[3])))
n = int(head["ranks"])
gb = int(head["bytes"]) * (2 * (n - 1) / n if head["op"] == "allreduce" else 1) / 1e9
print(f"{head['op']} {int(head['bytes']) >> 20} MiB, {n} ranks, algo {head['algo']}: busbw median "
      f"{statistics.median(gb / ((e - s) / 1e9) for s, e in calls[2:]):.4f} GB/s of {len(calls) - 2} calls")
for r, f in enumerate([out] + sorted(glob.glob(out + ".rank*"), key=lambda p: int(p.rsplit("rank", 1)[1]))):
    paths = [l.split()[1:] for l in open(f) if l.startswith("path ")]
    sent = {}
    for p in paths:
        kv = dict(x.split("=", 1) for x in p if "=" in x and "->" not in x)
        sent.setdefault(kv["peer"], []).append((kv["path"], int(kv["sent"]), int(kv["received"]), kv["share"]))
    for peer, ps in sorted(sent.items()):
        tot = sum(s for _, s, _, _ in ps) or 1
        print(f"rank {r} -> peer {peer}: " + ", ".join(
            f"path {p}: sent {s / 2**20:.0f} MiB ({s / tot:.2f}), received {rv / 2**20:.0f} MiB, last share {sh}"
            for p, s, rv, sh in ps))
PY
