#!/usr/bin/env python3
"""Medians of topology-ab.sh's and topology-idle.sh's rows.

Default: per (op, bytes, setting), the median time (µs) and busbw (GB/s)
over the rounds.

--vs PEER (topology-ab.sh's default set): per placement P, op and size,
"hcomm P" beside "PEER P": both medians and the median over rounds of the
per-round ratio PEER time / hcomm time (the settings alternate in every
round, so round k of one is paired with round k of the other); a ratio
below 1.0 (hcomm slower) is marked "behind", and a count of those closes
each placement's table.

--base SETTING (topology-ab.sh's bcast and bind sets): every hcomm label
"hcomm P X" (and its "… med" row) beside "hcomm P SETTING" of the same
placement ("-": the bare "hcomm P", the planner's pick): both medians and
the median of per-round ratios SETTING time / X time (below 1.0: X is
slower).

--rtt [--ref=LABEL] (topology-idle.sh's rtt rows): per label, every job's 8-byte
AllReduce and Barrier time over the ping-pong round trip of the same job
(the 2 × 2 rows time one, pairs 0-2 and 1-3 at once) and over the
ping-pong of job LABEL (default "rtt 1x1 exchange", 2 ranks, one per
namespace) of the same round; medians and every job's times, so a
bimodal label shows as two groups."""
import collections
import csv
import statistics
import sys


def records(paths):
    """The data rows of the CSV files (stdin when none), headers skipped."""
    for path in paths or ["/dev/stdin"]:
        with open(path) as f:
            for r in csv.reader(f):
                if len(r) >= 7 and r[0] != "impl":
                    yield r


def read(paths):
    rows = collections.defaultdict(list)
    for r in records(paths):
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


def base(rows, setting):
    def ref(label):
        w = label.split()
        med = w[-1] == "med"
        if med:
            w = w[:-1]
        if len(w) < 2 or w[0] != "hcomm":
            return None
        r = w[:2] + ([] if setting == "-" else [setting])
        return " ".join(r + (["med"] if med else []))
    print(f"# ratio = time of the {setting!r} setting / time of the row's setting, median of per-round ratios")
    for (op, size, label), a in sorted(rows.items()):
        r = ref(label)
        b = rows.get((op, size, r)) if r else None
        if not b or r == label:
            continue
        n = min(len(a), len(b))
        ratio = statistics.median(b[k][0] / a[k][0] for k in range(n) if a[k][0] > 0)
        print(f"{op:14} {size:>10} {label:32} {statistics.median(x[0] for x in a):10.1f} us  "
              f"{r:32} {statistics.median(x[0] for x in b):10.1f} us  ratio {ratio:5.2f}  ({n} rounds)")


def jobs(paths):
    """Consecutive rows with one label are one job: [(label, {op: usec})]."""
    out = []
    for r in records(paths):
        try:
            us = float(r[4])
        except ValueError:
            continue
        label = r[0].strip()
        if not out or out[-1][0] != label or r[1] in out[-1][1]:
            out.append((label, {}))
        out[-1][1][r[1]] = us
    return out


def rtt(paths, ref):
    by = collections.defaultdict(list)
    for label, ops in jobs(paths):
        by[label].append(ops)
    refs = [j.get("pingpong") for j in by.get(ref, [])]
    print(f"# per job: op time / ping-pong of the same job (own) and of {ref!r} in the same round (ref)")
    for label, js in sorted(by.items()):
        if not label.startswith("rtt"):
            continue
        for op in ("allreduce", "barrier"):
            t = [j[op] for j in js if op in j]
            if not t:
                continue
            own = [j[op] / j["pingpong"] for j in js if op in j and j.get("pingpong")]
            rr = [j[op] / refs[k] for k, j in enumerate(js) if op in j and k < len(refs) and refs[k]]
            med = lambda v: f"{statistics.median(v):5.2f}" if v else "    -"
            print(f"{label:28} {op:10} median {statistics.median(t):7.1f} us  own {med(own)}  ref {med(rr)}  "
                  f"jobs: {' '.join(f'{x:.1f}' for x in t)}")


def main(argv):
    if argv and argv[0] == "--rtt":
        ref, rest = "rtt 1x1 exchange", argv[1:]
        if rest and rest[0].startswith("--ref="):
            ref, rest = rest[0][len("--ref="):], rest[1:]
        rtt(rest, ref)
    elif len(argv) >= 2 and argv[0] == "--base":
        base(read(argv[2:]), argv[1])
    elif len(argv) >= 2 and argv[0] == "--vs":
        versus(read(argv[2:]), argv[1])
    else:
        plain(read(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
