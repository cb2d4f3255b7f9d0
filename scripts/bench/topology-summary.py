#!/usr/bin/env python3
"""Medians of topology-ab.sh's and topology-idle.sh's rows.

Default: per (op, bytes, setting), the median time (µs) and busbw (GB/s)
over the rounds.

--vs PEER (topology-ab.sh's default set): per placement P, op and size,
"hcomm P" beside "PEER P": both medians and the median over rounds of the
per-round ratio PEER time / hcomm time (the settings alternate in every
round, so round k of one is paired with round k of the other); a ratio
below 1.0 (hcomm slower) is marked "behind", and a count of those closes
each placement's table."""
import collections
import csv
import statistics
import sys


def read(paths):
    rows = collections.defaultdict(list)
    for path in paths or ["/dev/stdin"]:
        with open(path) as f:
            for r in csv.reader(f):
                if len(r) < 7 or r[0] == "impl":
                    continue
                try:
                    rows[(r[1], int(r[3]), r[0].strip())].append((float(r[4]), float(r[6])))
                except ValueError:
                    continue
    return rows


def plain(rows):
    for (op, size, label), v in sorted(rows.items()):
        us = statistics.median(x[0] for x in v)
        bw = statistics.median(x[1] for x in v)
        print(f"{op:14} {size:>10} {label:60} {us:12.1f} us {bw:8.4f} GB/s  (n={len(v)})")


def versus(rows, peer):
    places = sorted({label.split()[1] for (_, _, label) in rows
                     if label.startswith("hcomm ") and len(label.split()) == 2})
    for place in places:
        me, them = f"hcomm {place}", f"{peer} {place}"
        keys = sorted({(op, size) for (op, size, label) in rows if label == me})
        print(f"## {me} beside {them} (ratio = {peer} time / hcomm time, median of per-round ratios)")
        print(f"{'op':14} {'bytes':>10} {'hcomm us':>12} {peer + ' us':>12} {'ratio':>7}  rounds")
        behind = 0
        for op, size in keys:
            a, b = rows.get((op, size, me), []), rows.get((op, size, them), [])
            if not a or not b:
                continue
            n = min(len(a), len(b))
            ratio = statistics.median(b[k][0] / a[k][0] for k in range(n) if a[k][0] > 0)
            mark = "  behind" if ratio < 1.0 else ""
            behind += ratio < 1.0
            print(f"{op:14} {size:>10} {statistics.median(x[0] for x in a):12.1f} "
                  f"{statistics.median(x[0] for x in b):12.1f} {ratio:7.2f}  {n}{mark}")
        print(f"# {behind} point(s) behind {peer} ({place})\n")


def main(argv):
    if len(argv) >= 2 and argv[0] == "--vs":
        versus(read(argv[2:]), argv[1])
    else:
        plain(read(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
