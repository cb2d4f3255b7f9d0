#!/usr/bin/env bash
# failover.sh - throughput of a stream of large collectives before, during
# and after the link of a pair's FIRST path goes down, against the same
# stream over that link's survivor alone.
#
#   HCOMM=/path/to/hcomm scripts/bench/failover.sh [REPS] [PER_HOST]
#
# The namespaces of multipath.sh (mpnet.sh): two hosts, PER_HOST ranks each
# (default 1), two links of RATE (default 1gbit, tbf) and the store on a
# third. Each repetition runs, for each of OPS (allreduce broadcast):
#   failover: failstream over eth0 and eth1 (HCOMM_SOCKET_IFNAME==eth0,eth1)
#             for FOR (20s); DOWN_AFTER (6s) after its first call, host 1's
#             eth0 goes down (`ip link set eth0 down`) and stays down;
#   one-link: the same stream over eth1 alone, no fault.
# Every result is checked by every rank (a wrong element or an error fails
# the job and this script). Per run it prints, from rank 0's call times
# (BYTES per call, default 32M; busbw with nccl-tests' factors):
#   before  median busbw of the calls that ended before the link went down
#           (the first two calls left out: slow start)
#   move    from link down to the end of the first call that ended after it
#           (the call that waited for the move), and the busbw of that call
#   settled from link down to the end of the last of the calls from that
#           one on that ran below half the one-link median (the two
#           directions of a pair move on their own: the second can stall
#           the next call), and how many calls that was
#   after   median busbw of the calls that started after those
#   window  bytes of all calls that ended after the link went down over the
#           time from link down to the last call's end: the move and the
#           ranks' filling and checking of the buffers between calls
#           included (depends on FOR), against the same over the one-link
#           stream (its calls from the third on: "stream")
#   lost    that time less what those bytes take at the one-link stream's
#           rate: the seconds the failover cost (does not depend on FOR)
#   paths   rank 0's paths at the end (the first one retired)
# and at the end the medians over repetitions, with after/one-link and
# window/one-link. UP_AFTER (e.g. 4s) brings the link back up that long
# after it went down, and adds per run
#   rejoin  from link up to the end of the first call after which rank 0's
#           share of its striped messages to rank 1 on the first path is
#           back to 90% of its median before the link went down
#           (failstream -shares)
# XENV adds settings to every job (space-separated
# VAR=value, e.g. XENV=HCOMM_NSOCKS=2: several sockets a path). Needs root, iproute2, tc and go (to build failstream,
# unless FAILSTREAM names a binary).
set -euo pipefail
HCOMM=${HCOMM:-hcomm}
REPS=${1:-3}
PER=${2:-1}
OPS=${OPS:-allreduce broadcast}
BYTES=${BYTES:-32M}
FOR=${FOR:-20s}
DOWN_AFTER=${DOWN_AFTER:-6s}
RATE=${RATE:-1gbit}
XENV=${XENV:-}
DIR=${DIR:-$(mktemp -d /tmp/failover.XXXXXX)}
mkdir -p $DIR
here=$(cd "$(dirname "$0")" && pwd)
. "$here/mpnet.sh"
failstream_bin
up

stream() { # out mark env...
  local out=$1 mark=$2; shift 2
  mpnet_run $HCOMM $PER "$@" -- $FAILSTREAM -op $op -bytes $BYTES -for $FOR \
    -mark $mark -mark-after $DOWN_AFTER -out $out ${UP_AFTER:+-shares}
}

for rep in $(seq $REPS); do
  echo "== repetition $rep ($(uptime))" >&2
  for op in $OPS; do
    ip -n ${P}1 link set eth0 up
    rates $RATE $RATE
    base=$DIR/$op-$rep
    rm -f $base.mark
    stream $base.failover $base.mark HCOMM_SOCKET_IFNAME==eth0,eth1 $XENV &
    job=$!
    while [ ! -e $base.mark ] && kill -0 $job 2>/dev/null; do sleep 0.05; done
    if [ -e $base.mark ]; then
      date +%s%N > $base.down
      ip -n ${P}1 link set eth0 down
      if [ -n "${UP_AFTER:-}" ]; then
        sleep ${UP_AFTER%s}
        date +%s%N > $base.up
        ip -n ${P}1 link set eth0 up
      fi
    fi
    wait $job
    stream $base.one-link $base.mark1 HCOMM_SOCKET_IFNAME==eth1 $XENV
  done
done
ip -n ${P}1 link set eth0 up
echo "runs in $DIR" >&2
python3 - "$DIR" <<'PY'
import glob, os, statistics, sys

shares = {}  # file: [(end_ns, share of rank 0's first path to rank 1)]

def load(path):
    calls, paths, head = [], [], {}
    for line in open(path):
        f = line.split()
        if f[0] == "failstream":
            head = dict(kv.split("=") for kv in f[1:])
        elif f[0] == "call":
            calls.append((int(f[2]), int(f[3])))
        elif f[0] == "path":
            paths.append(" ".join(f[1:]))
        elif f[0] == "share":
            for p in f[3:]:
                peer, pi, _, sh, _ = p.split(":")
                if peer == "1" and pi == "0":
                    shares.setdefault(path, []).append((int(f[2]), float(sh)))
    n = int(head["ranks"])
    factor = 2 * (n - 1) / n if head["op"] == "allreduce" else 1.0
    return int(head["bytes"]) * factor / 1e9, calls, paths

def bw(gb, c):
    return gb / ((c[1] - c[0]) / 1e9)

res = {}
d = sys.argv[1]
for f in sorted(glob.glob(os.path.join(d, "*.failover"))):
    base = f[: -len(".failover")]
    op, rep = os.path.basename(base).rsplit("-", 1)
    gb, calls, paths = load(f)
    down = int(open(base + ".down").read())
    gb1, calls1, _ = load(base + ".one-link")
    one = statistics.median(bw(gb1, c) for c in calls1[2:])
    before = [bw(gb, c) for c in calls[2:] if c[1] < down]
    i = next(i for i, c in enumerate(calls) if c[1] >= down)
    move_end = calls[i][1]
    j = i
    while j + 1 < len(calls) and bw(gb, calls[j + 1]) < one / 2:
        j += 1
    settled = calls[j][1]
    after = [bw(gb, c) for c in calls if c[0] >= settled]
    ended = [c for c in calls if c[1] >= down]
    window = gb * len(ended) / ((calls[-1][1] - down) / 1e9)
    stream = gb1 * (len(calls1) - 3) / ((calls1[-1][1] - calls1[2][1]) / 1e9)
    lost = (calls[-1][1] - down) / 1e9 - gb * len(ended) / stream
    r = dict(before=statistics.median(before), move=(move_end - down) / 1e9, movebw=bw(gb, calls[i]),
             settled=(settled - down) / 1e9, slow=j - i + 1,
             after=statistics.median(after), window=window, one=one, stream=stream, lost=lost)
    if os.path.exists(base + ".up") and f in shares:
        up = int(open(base + ".up").read())
        sh = shares[f]
        ref = 0.9 * statistics.median(s for t, s in sh[2:] if t < down)
        back = next((t for t, s in sh if t > up and s >= ref), None)
        r["rejoin"] = (back - up) / 1e9 if back else float("nan")
        print(f"{op} rep {rep}: link up {(up - down) / 1e9:.3f} s after down; share of path 0 back to {ref:.3f} "
              f"{r['rejoin']:.3f} s after up; shares after up: " +
              " ".join(f"{(t - up) / 1e9:.2f}s:{s:.2f}" for t, s in sh if t > up)[:600])
    res.setdefault(op, []).append(r)
    print(f"{op} rep {rep}: before {r['before']:.4f} GB/s ({len(before)} calls), move {r['move']:.3f} s "
          f"(that call {r['movebw']:.4f} GB/s), settled {r['settled']:.3f} s ({r['slow']} slow calls), after {r['after']:.4f} GB/s ({len(after)} calls), "
          f"window {window:.4f} GB/s, lost {lost:.3f} s, one link {one:.4f} GB/s ({len(calls1) - 2} calls, "
          f"stream {stream:.4f}); after/one {r['after'] / one:.3f}, window/stream {window / stream:.3f}")
    for p in paths:
        print("   ", p)
for op, rs in res.items():
    m = lambda k: statistics.median(r[k] for r in rs)
    ratio = lambda k, base="one": statistics.median(r[k] / r[base] for r in rs)
    print(f"{op} medians of {len(rs)}: before {m('before'):.4f} GB/s, move {m('move'):.3f} s, settled {m('settled'):.3f} s, after {m('after'):.4f}, "
          f"window {m('window'):.4f} GB/s, lost {m('lost'):.3f} s, one link {m('one'):.4f} GB/s (stream {m('stream'):.4f}); "
          f"after/one {ratio('after'):.3f}, window/stream {ratio('window', 'stream'):.3f}, before/one {ratio('before'):.3f}")
PY
