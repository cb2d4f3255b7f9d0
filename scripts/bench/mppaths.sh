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
# and each rank's bytes sent per path over its total; then, from host 0's
# interface counters sampled every 10 ms, the time of a call during which
# no link moved data (steps within a host) and the mean rate per link,
# and each host's TCP retransmission timeouts and retransmitted segments.
# IFNAME (default =eth0,eth1) is HCOMM_SOCKET_IFNAME.
set -euo pipefail
HCOMM=${HCOMM:-hcomm}
PER=${1:-2}
OP=${OP:-allreduce}
BYTES=${BYTES:-256M}
FOR=${FOR:-20s}
DIR=${DIR:-$(mktemp -d /tmp/mppaths.XXXXXX)}
mkdir -p $DIR
here=$(cd "$(dirname "$0")" && pwd)
. "$here/mpnet.sh"
failstream_bin
up
rates ${2:-1gbit} ${3:-1gbit}
out=$DIR/$OP-$(date +%s)
# Host 0's bytes sent and received per link, every 10 ms, while the job runs.
ip netns exec ${P}0 python3 -c '
import sys, time
f = open(sys.argv[1], "w")
while True:
    v = [open(f"/sys/class/net/eth{i}/statistics/{d}_bytes").read().strip() for i in (0, 1) for d in ("tx", "rx")]
    line = " ".join(v)
    f.write(f"{time.time_ns()} {line}\n"); f.flush()
    time.sleep(0.01)
' $out.links &
sampler=$!
mpnet_run $HCOMM $PER HCOMM_SOCKET_IFNAME=${IFNAME:-=eth0,eth1} -- $FAILSTREAM -op $OP -bytes $BYTES -for $FOR -out $out
kill $sampler 2>/dev/null || true
# The namespaces are new: their counters are this job's.
for i in 0 1; do
  echo "$(ip netns exec ${P}$i nstat -asz TcpExtTCPTimeouts TcpRetransSegs | awk '!/^#/ {printf "%s %s ", $1, $2}')"
done > $out.tcp
python3 - $out ${2:-1gbit} ${3:-1gbit} <<'PY'
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
        sent.setdefault(kv["peer"], []).append((kv["path"], int(kv["sent"]), int(kv["received"]), kv))
    for peer, ps in sorted(sent.items()):
        tot = sum(s for _, s, _, _ in ps) or 1
        print(f"rank {r} -> peer {peer}: " + ", ".join(
            f"path {p}: sent {s / 2**20:.0f} MiB ({s / tot:.2f}), received {rv / 2**20:.0f} MiB, last share {kv['share']}, "
            f"rate {float(kv['rate']) / 1e9:.4f} GB/s, retrans {kv['retrans']}, rtt {kv['rtt']}"
            for p, s, rv, kv in ps))
# Link use during the calls from the third on, from host 0's 10 ms
# samples: per link and direction the bytes moved over the calls' time;
# per call, the time no link moved more than a tenth of its rate either
# way (the schedule's steps within a host) against the time some did.
def bits(r):
    m = re.fullmatch(r"([0-9.]+)([kmg]?)bit", r)
    return float(m[1]) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m[2]]
rates = [bits(sys.argv[2]) / 8, bits(sys.argv[3]) / 8]
samples = [[int(x) for x in l.split()] for l in open(out + ".links") if len(l.split()) == 5]
moved, total, idle, used = [0] * 4, 0.0, [], []
for s, e in calls[2:]:
    quiet = busy = 0.0
    for a, b in zip(samples, samples[1:]):
        if a[0] < s or b[0] > e:
            continue
        dt = (b[0] - a[0]) / 1e9
        d = [b[k + 1] - a[k + 1] for k in range(4)]
        moved = [m + x for m, x in zip(moved, d)]
        if all(x / dt < rates[k // 2] / 10 for k, x in enumerate(d)):
            quiet += dt
        else:
            busy += dt
    total += (e - s) / 1e9
    idle.append(quiet)
    used.append(busy)
print(f"per call (median): {statistics.median((e - s) / 1e9 for s, e in calls[2:]):.3f} s, "
      f"links idle {statistics.median(idle):.3f} s, some link moving {statistics.median(used):.3f} s")
for h, l in enumerate(open(out + ".tcp")):
    f = l.split()
    c = dict(zip(f[::2], map(int, f[1::2])))
    print(f"host {h}: {c.get('TcpExtTCPTimeouts', 0)} TCP retransmission timeouts "
          f"({c.get('TcpExtTCPTimeouts', 0) / len(calls):.1f} per call), {c.get('TcpRetransSegs', 0)} segments retransmitted")
for k, name in enumerate(["eth0 tx", "eth0 rx", "eth1 tx", "eth1 rx"]):
    print(f"host 0 {name}: {moved[k] / 2**20:.0f} MiB in {total:.2f} s of calls, "
          f"{moved[k] / total / 1e9:.4f} GB/s (rate {rates[k // 2] / 1e9:.4f})")
PY
