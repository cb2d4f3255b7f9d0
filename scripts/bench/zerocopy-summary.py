#!/usr/bin/env python3
"""zerocopy-summary.py [--med] CSV - medians per (impl, op, ranks, bytes) of the rows
zerocopy-ab.sh wrote, and the ratios hcomm-reg/hcomm and hcomm-reg/openmpi-sm
(busbw; above 1: registered hcomm is faster), and with rows of
hcomm-reg-eng (ENGINE=...) eng/reg: hcomm-reg's time over hcomm-reg-eng's
(above 1: the copy engine made it faster), and with rows of hcomm-reg-old
(OLD_BIN=...) old/reg: hcomm-reg-old's time over hcomm-reg's (above 1: the
newer binary is faster), and with rows of hcomm-reg-zc (ZC=1) zc µs and
zc/Open MPI: the zero-copy path at every size (HCOMM_ZERO_COPY=256K), where
hcomm-reg follows the auto rule. JSON lines (zerocopy-ab.sh with MED=1)
are read too: with --med their per-call median (med_usec) stands for the
row's time, else their mean (usec); Open MPI's CSV rows have only the
mean."""
import json
import csv
import statistics
import sys
from collections import defaultdict

t = defaultdict(list)
args = sys.argv[1:]
med = "--med" in args
for path in (a for a in args if a != "--med"):
    for line in open(path):
        if line.startswith("{"):
            j = json.loads(line)
            t[(j["impl"], j["op"], j["ranks"], j["bytes"])].append(j["med_usec"] if med else j["usec"])
            continue
        r = next(csv.reader([line]), [])
        if len(r) < 7 or r[0].startswith("#") or r[0] == "impl":
            continue
        t[(r[0], r[1], int(r[2]), int(r[3]))].append(float(r[4]))
keys = sorted({(op, n, b) for (_, op, n, b) in t})
print("| op | ranks | bytes | hcomm µs | hcomm-reg µs | Open MPI µs | reg/hcomm | reg/Open MPI | reg-eng µs | eng/reg | reg-old µs | old/reg | reg-zc µs | zc/Open MPI | runs |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for op, n, b in keys:
    m = {impl: statistics.median(t[(impl, op, n, b)]) for impl in ("hcomm", "hcomm-reg", "openmpi-sm", "hcomm-reg-eng", "hcomm-reg-old", "hcomm-reg-zc") if (impl, op, n, b) in t}
    runs = min(len(t[(i, op, n, b)]) for i in m and m or ["hcomm"] if (i, op, n, b) in t) if m else 0
    def r(a, c):
        return f"{m[c] / m[a]:.2f}×" if a in m and c in m else "-"
    print(f"| {op} | {n} | {b >> 10} KiB | {m.get('hcomm', 0):.0f} | {m.get('hcomm-reg', 0):.0f} | {m.get('openmpi-sm', 0):.0f} | {r('hcomm-reg', 'hcomm')} | {r('hcomm-reg', 'openmpi-sm')} | {m.get('hcomm-reg-eng', 0):.0f} | {r('hcomm-reg-eng', 'hcomm-reg')} | {m.get('hcomm-reg-old', 0):.0f} | {r('hcomm-reg', 'hcomm-reg-old')} | {m.get('hcomm-reg-zc', 0):.0f} | {r('hcomm-reg-zc', 'openmpi-sm')} | {runs} |")
