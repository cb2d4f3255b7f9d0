#!/usr/bin/env bash
# rma-tcp-ab.sh ROUNDS VARIANT... - one-sided Get and Put against two-sided
# Send/Recv over TCP, two ranks in two network namespaces joined by one veth
# pair, hcomm builds measured alternately in one run (A/B/A/B).
#
#   VARIANT  label=BIN[:VAR=VALUE,...]  an hcomm binary, with variables for both ranks
#
# Each job runs `hcomm perf -op sendrecv,get,put -b MINB -e MAXB -f 4 -T TARGET
# -json` (every rank accesses the other's window, as Send/Recv sends to it)
# and the ratio of a job is Send/Recv's median call over Get's (Put's), from
# the same job, so a job slowed by the machine slows both. Prints per label,
# op and size the median ratio over the rounds, how many rounds fell below
# 0.90 (the target: Get and Put at least 90% of Send/Recv at >= 1 MiB), and
# the median calls; the raw rows (JSON, one a line, with label and round)
# go to OUT (default /tmp/rma-tcp-ab.jsonl, appended).
#
# MINB (1M), MAXB (4M), TARGET (0.5 s per point), OPS (sendrecv,get,put).
# NSPFX (rmab) and NSNET (10.77.13) name the namespaces and the /24 they
# use; they are made at the start and removed at the end. NICE (-15) is
# the benchmark processes' nice value. Run as root.
set -euo pipefail
rounds=${1:?usage: rma-tcp-ab.sh ROUNDS label=BIN[:VAR=VALUE,...]...}
shift
[ $# -ge 1 ] || { echo "rma-tcp-ab.sh: no variant" >&2; exit 2; }
minb=${MINB:-1M} maxb=${MAXB:-4M} tg=${TARGET:-0.5} ops=${OPS:-sendrecv,get,put}
pfx=${NSPFX:-rmab} net=${NSNET:-10.77.13} out=${OUT:-/tmp/rma-tcp-ab.jsonl} nice=${NICE:--15}
a=${pfx}a b=${pfx}b priv=
down() {
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
  [ -z "$priv" ] || rm -rf "$priv"
}
trap down EXIT
down
priv=$(mktemp -d /tmp/rma-tcp-ab.XXXXXX)
ip netns add "$a"
ip netns add "$b"
for ns in "$a" "$b"; do
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 || true
  ip -n "$ns" link set lo up
done
ip -n "$a" link add eth0 type veth peer name eth0 netns "$b"
ip -n "$a" addr add "$net.1/24" dev eth0
ip -n "$b" addr add "$net.2/24" dev eth0
ip -n "$a" link set eth0 up
ip -n "$b" link set eth0 up
rsh=$priv/rsh
printf '#!/bin/sh\nhost=$1\nshift\nexec ip netns exec "$host" sh -c "$*"\n' >"$rsh"
chmod +x "$rsh"
rows=$priv/rows.jsonl
: >"$rows"
for ((r = 1; r <= rounds; r++)); do
  for v in "$@"; do
    label=${v%%=*} rest=${v#*=}
    bin=${rest%%:*} xs=()
    if [[ "$rest" == *:* ]]; then
      IFS=, read -ra vars <<<"${rest#*:}"
      for e in "${vars[@]}"; do xs+=(-x "$e"); done
    fi
    timeout 300 nice -n "$nice" ip netns exec "$a" "$bin" run -n 2 -hosts "$a:1,$b:1" -rsh "$rsh" \
      -store-addr "$net.1:0" "${xs[@]}" -- "$bin" perf -op "$ops" -b "$minb" -e "$maxb" -f 4 -T "$tg" -json 2>/dev/null |
      { grep '^{' || true; } | sed "s/^{/{\"label\":\"$label\",\"round\":$r,/" >>"$rows" || echo "round $r $label failed" >&2
  done
  echo "round $r done $(date -u +%T)" >&2
done
cat "$rows" >>"$out"
python3 - "$rows" <<'PY'
import json, statistics, sys
from collections import defaultdict
t = defaultdict(dict)  # (label, op, bytes) -> round -> med_usec
labels = []  # in the order they ran
for line in open(sys.argv[1]):
    r = json.loads(line)
    t[(r["label"], r["op"], r["bytes"])][r["round"]] = r["med_usec"]
    if r["label"] not in labels:
        labels.append(r["label"])
sizes = sorted({k[2] for k in t})
print("# label op bytes: ratio = Send/Recv median call / op's, median over rounds [rounds below 0.90 / rounds]; median calls (us)")
for l in labels:
    for b in sizes:
        sr = t.get((l, "sendrecv", b), {})
        for op in ("get", "put"):
            v = t.get((l, op, b), {})
            ks = [k for k in v if k in sr and v[k] > 0]
            if not ks:
                continue
            rs = [sr[k] / v[k] for k in ks]
            print(f"{l} {op} {b} ratio {statistics.median(rs):.2f} [{sum(x < 0.9 for x in rs)}/{len(rs)}]"
                  f"  sendrecv {statistics.median(sr[k] for k in ks):.0f} {op} {statistics.median(v[k] for k in ks):.0f}")
PY
