#!/usr/bin/env python3
"""Two builds of isoroce-bench-engine against each other, round by round.

    bench/engine/ab.py BASE_BIN NEW_BIN [ROUNDS] [--cpu N] [--min-time S] [--sizes 64,4096,...]

Each round runs every benchmark of BENCHES by both binaries back to back (the
order swapped every round), pinned to one CPU, and records the engine's time
per data packet (BM_Engine's s_per_data_pkt) and the fused codec floor
(BM_BuildParseFused, ns per data packet) of the same binary and round. Prints,
per verb and size: the median ns of each side, the median (range) of the
per-round ratio to the floor, and the median (range) of new / base per round;
and the load average at the start and the end. --sizes picks the message sizes
(default 64,4096; BM_Engine has 64, 4096, 65536 and 1048576, each a multiple of
4 KB a message of that many 4 KB packets, all measured against the fused floor
of the same size).
"""
import json
import os
import statistics
import subprocess
import sys

VERBS = ("write", "send", "read")


def benches(sizes):
    return [b for z in sizes for b in [f"BM_BuildParseFused/{z}"] + [f"BM_Engine/{v}/{z}" for v in VERBS]]


def label(z):
    if z >= 1 << 20 and z % (1 << 20) == 0:
        return f"{z >> 20} MB"
    if z >= 1024 and z % 1024 == 0:
        return f"{z >> 10} KB"
    return f"{z} B"


def run(binary, bm, cpu, min_time):
    out = subprocess.run(["taskset", "-c", str(cpu), binary, f"--benchmark_filter=^{bm}$",
                          f"--benchmark_min_time={min_time}", "--benchmark_format=json"],
                         capture_output=True, text=True, check=True).stdout
    r = json.loads(out)["benchmarks"][0]
    if bm.startswith("BM_Engine"):
        return r["s_per_data_pkt"] * 1e9
    return 1e9 / r["items_per_second"]


def fmt(xs):
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"


def main():
    args = [a for a in sys.argv[1:]]
    cpu, min_time = 1, 0.2
    if "--cpu" in args:
        i = args.index("--cpu"); cpu = int(args[i + 1]); del args[i:i + 2]
    if "--min-time" in args:
        i = args.index("--min-time"); min_time = float(args[i + 1]); del args[i:i + 2]
    sizes = [64, 4096]
    if "--sizes" in args:
        i = args.index("--sizes"); sizes = [int(x) for x in args[i + 1].split(",")]; del args[i:i + 2]
    BENCHES = benches(sizes)
    base, new = args[0], args[1]
    rounds = int(args[2]) if len(args) > 2 else 8
    load0 = os.getloadavg()
    res = {side: {bm: [] for bm in BENCHES} for side in ("base", "new")}
    for r in range(rounds):
        for bm in BENCHES:
            order = [("base", base), ("new", new)] if r % 2 == 0 else [("new", new), ("base", base)]
            for side, binary in order:
                res[side][bm].append(run(binary, bm, cpu, min_time))
        print(f"round {r + 1}/{rounds} done, load {os.getloadavg()[0]:.1f}", file=sys.stderr)
    load1 = os.getloadavg()
    print(f"{rounds} rounds, CPU {cpu}, min_time {min_time}; load average {load0[0]:.1f} at the start, "
          f"{load1[0]:.1f} at the end")
    print("| verb, size | base ns | base x floor | new ns | new x floor | new / base |")
    print("|---|---:|---:|---:|---:|---:|")
    for z in sorted(sizes, reverse=True):
        floor = {s: res[s][f"BM_BuildParseFused/{z}"] for s in res}
        for v in VERBS:
            bm = f"BM_Engine/{v}/{z}"
            b, n = res["base"][bm], res["new"][bm]
            bx = [x / f for x, f in zip(b, floor["base"])]
            nx = [x / f for x, f in zip(n, floor["new"])]
            ratio = [y / x for x, y in zip(b, n)]
            size = label(z)
            print(f"| {v.upper()} {size} | {statistics.median(b):.0f} | {fmt(bx)} | {statistics.median(n):.0f} | "
                  f"{fmt(nx)} | {fmt(ratio)} |")
    # The floor per data packet (a message of n packets: its time / n).
    per_pkt = {s: [statistics.median(res[s][f"BM_BuildParseFused/{z}"]) for z in sizes] for s in res}
    print(f"| fused floor {' / '.join(label(z) for z in sizes)}, ns per data packet | "
          f"{' / '.join(f'{x:.0f}' for x in per_pkt['base'])} | | "
          f"{' / '.join(f'{x:.0f}' for x in per_pkt['new'])} | | |")


if __name__ == "__main__":
    main()
