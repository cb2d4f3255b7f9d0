#!/usr/bin/env python3
"""compare.py CSV [CSV...] - hcomm beside its peers, from peer-harness CSV files.

Rows: impl,op,ranks,bytes,usec,algbw_GBps,busbw_GBps (header lines ignored),
as written by ../shared/bench/run_baselines.sh with hcomm's --extra commands
(scripts/bench/hcomm-extra.sh). When a point (impl, op, ranks, bytes)
appears in several files, its median time is used and the bandwidths are
recomputed from it, as summarize.py does.

With --full, prints instead one table per collective, setting and rank
count: every size, hcomm's time and each peer's time with the ratio, and
then the list of points where a peer is faster.

Prints markdown: for each hcomm setting (shm, tcp on loopback, tcp across
network namespaces) and rank count, the allreduce time and busbw of hcomm
and its peers per size with the ratio peer time / hcomm time (above 1:
hcomm is faster), small-message latency, and the other collectives' busbw
ratios from 1 MiB up.
"""
import csv
import statistics
import sys
from collections import defaultdict

GROUPS = [
    ("shared memory", "hcomm-shm", ["openmpi-sm", "mpich", "gloo"]),
    ("TCP on loopback", "hcomm-tcp", ["openmpi-tcp", "gloo"]),
    ("TCP across network namespaces", "hcomm-tcp-netns", ["openmpi-tcp-netns", "gloo-netns"]),
]
OTHER_OPS = ("allgather", "reducescatter", "broadcast", "alltoall")


def fmt_size(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div} {unit}"
    return f"{b} B"


def fmt_us(u):
    if u >= 1e4:
        return f"{u / 1e3:.1f} ms"
    if u >= 100:
        return f"{u:.0f}"
    if u >= 10:
        return f"{u:.1f}"
    return f"{u:.2f}"


def fmt_bw(g):
    if g >= 0.1:
        return f"{g:.2f}"
    if g >= 0.001:
        return f"{g:.3f}"
    return "<0.001"


def fmt_ratio(r):
    if r >= 10:
        return f"**{r:.0f}×**"
    if r >= 1:
        return f"**{r:.2f}×**"
    return f"{r:.2f}×"


def load(paths):
    pts = defaultdict(list)
    for p in paths:
        with open(p, newline="") as f:
            for r in csv.reader(f):
                if len(r) != 7 or r[0] == "impl":
                    continue
                try:
                    key = (r[0], r[1], int(r[2]), int(r[3]))
                    pts[key].append((float(r[4]), float(r[6])))
                except ValueError:
                    continue
    data = {}
    runs = {}
    for key, vals in pts.items():
        us = statistics.median(v[0] for v in vals)
        ref = vals[0]
        data[key] = (us, ref[1] * ref[0] / us if us > 0 else 0.0)
        runs[key] = len(vals)
    return data, runs


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


ALL_OPS = ("allreduce", "allgather", "reducescatter", "broadcast", "alltoall", "barrier")


def full(data, runs):
    ranks = sorted({k[2] for k in data if k[0].startswith("hcomm")})
    out = [f"Medians over up to {max(runs.values(), default=0)} runs per point; "
           "µs per call, ratio = peer time / hcomm time (above 1: hcomm is faster).\n"]
    misses = []
    for title, ours, peers in GROUPS:
        for n in ranks:
            if not any(k[0] == ours and k[2] == n for k in data):
                continue
            ps = [p for p in peers if any(k[0] == p and k[2] == n for k in data)]
            for op in ALL_OPS:
                sizes = sorted({k[3] for k in data if k[0] == ours and k[1] == op and k[2] == n})
                if not sizes:
                    continue
                rows = []
                for s in sizes:
                    h = data[(ours, op, n, s)]
                    row = [fmt_size(s) if op != "barrier" else "-", fmt_us(h[0])]
                    for p in ps:
                        v = data.get((p, op, n, s))
                        if v and h[0] > 0:
                            r = v[0] / h[0]
                            row.append(f"{fmt_us(v[0])} ({fmt_ratio(r)})")
                            if r < 1:
                                misses.append((title, n, op, s, p, r, h[0], v[0]))
                        else:
                            row.append("")
                    rows.append(row)
                out.append(f"#### {op}, {title}, {n} ranks\n")
                out.append(table(["bytes", ours] + ps, rows))
                out.append("")
    out.append(f"#### Points where a peer is faster ({len(misses)})\n")
    out.append(table(["setting", "ranks", "op", "bytes", "peer", "ratio", "hcomm µs", "peer µs"],
                     [[t, n, op, fmt_size(s), p, f"{r:.2f}", fmt_us(h), fmt_us(v)]
                      for (t, n, op, s, p, r, h, v) in misses]))
    print("\n".join(out))


def main():
    args = sys.argv[1:]
    if not args or args == ["--full"]:
        print(__doc__)
        sys.exit(1)
    if args[0] == "--full":
        data, runs = load(args[1:])
        full(data, runs)
        return
    data, runs = load(args)
    ranks = sorted({k[2] for k in data if k[0].startswith("hcomm")})
    out = [f"Medians over up to {max(runs.values(), default=0)} runs per point; "
           "ratio = peer time / hcomm time (above 1: hcomm is faster).\n"]
    for title, ours, peers in GROUPS:
        for n in ranks:
            if not any(k[0] == ours and k[2] == n for k in data):
                continue
            ps = [p for p in peers if any(k[0] == p and k[2] == n for k in data)]
            sizes = sorted({k[3] for k in data if k[1] == "allreduce" and k[2] == n and k[0] in [ours] + ps})
            rows = []
            for s in sizes:
                h = data.get((ours, "allreduce", n, s))
                row = [fmt_size(s), f"{fmt_us(h[0])} / {fmt_bw(h[1])}" if h else ""]
                for p in ps:
                    v = data.get((p, "allreduce", n, s))
                    row.append(f"{fmt_us(v[0])} / {fmt_bw(v[1])}" if v else "")
                for p in ps:
                    v = data.get((p, "allreduce", n, s))
                    row.append(fmt_ratio(v[0] / h[0]) if v and h and h[0] > 0 else "")
                rows.append(row)
            out.append(f"### AllReduce float32 sum, {title}, {n} ranks: µs / busbw GB/s\n")
            out.append(table(["bytes", ours] + ps + [f"vs {p}" for p in ps], rows))
            out.append("")
            # small messages
            rows = []
            for op, b in (("allreduce", 8), ("broadcast", 8), ("allgather", 8), ("barrier", 0)):
                h = data.get((ours, op, n, b))
                if not h:
                    continue
                row = [f"{op} {fmt_size(b)}" if b else op, fmt_us(h[0])]
                for p in ps:
                    v = data.get((p, op, n, b))
                    row.append(f"{fmt_us(v[0])} ({fmt_ratio(v[0] / h[0])})" if v and h[0] > 0 else "")
                rows.append(row)
            out.append(f"Small messages, {title}, {n} ranks: µs (ratio)\n")
            out.append(table(["op", ours] + ps, rows))
            out.append("")
            # other collectives from 1 MiB
            rows = []
            for op in OTHER_OPS:
                big = sorted(s for (i, o, nn, s) in data if i == ours and o == op and nn == n and s >= 1 << 20)
                for s in big:
                    h = data[(ours, op, n, s)]
                    row = [op, fmt_size(s), fmt_bw(h[1])]
                    for p in ps:
                        v = data.get((p, op, n, s))
                        row.append(f"{fmt_bw(v[1])} ({fmt_ratio(v[0] / h[0])})" if v and h[0] > 0 else "")
                    rows.append(row)
            if rows:
                out.append(f"Other collectives ≥ 1 MiB, {title}, {n} ranks: busbw GB/s (ratio)\n")
                out.append(table(["op", "bytes", ours] + ps, rows))
                out.append("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
