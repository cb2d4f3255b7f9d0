#!/usr/bin/env python3
"""Medians of topology-ab.sh's rows: per (op, bytes, setting), the median
time (µs) and busbw (GB/s) over the rounds."""
import collections
import csv
import statistics
import sys

rows = collections.defaultdict(list)
for path in sys.argv[1:] or ["/dev/stdin"]:
    with open(path) as f:
        for r in csv.reader(f):
            if len(r) < 7 or r[0] == "impl":
                continue
            rows[(r[1], int(r[3]), r[0].strip())].append((float(r[4]), float(r[6])))
for (op, size, label), v in sorted(rows.items()):
    us = statistics.median(x[0] for x in v)
    bw = statistics.median(x[1] for x in v)
    print(f"{op:14} {size:>10} {label:60} {us:12.1f} us {bw:8.4f} GB/s  (n={len(v)})")
