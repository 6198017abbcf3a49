#!/usr/bin/env python3
"""Runs the Justitia experiments (bench/scenarios/justitia/*.toml) in isoroce-sim under
fifo, under justitia and with the flow alone, and writes the table of docs/isolation.md
(between the <!-- justitia-table --> markers) or prints it (--print).

  bench/justitia/run.py [--sim build/bin/isoroce-sim] [--doc docs/isolation.md] [--print]

Everything runs in virtual time: the numbers are the same on every machine.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCEN = os.path.join(ROOT, "bench", "scenarios", "justitia")
NA = "—"
# The paper's figure per row (docs/isolation.md, "The paper column"; justitia.md section 5).
PAPER = {
    ('1, 9', 'latency flow p99 (µs)'): 'RoCE 4x, IB 2.23x, iWARP 95x / Target99 = alone p99 met (Fig. 9)',
    ('1, 9', 'latency flow p50 (µs)'): 'RoCE 3.82x, IB 1.85x, iWARP 1.11x / RoCE 1.06x, IB 1.00x (Fig. 9 labels: 1.8 and 1.3 µs)',
    ('1, 9', 'bandwidth flow goodput (Gb/s)'): '1.00x (unaffected) / 0.50x',
    ('10', 'latency flow p99 (µs), Target99 40 µs'): 'IB 14.1, RoCE 16.2 µs / IB 3.2, RoCE 7.1 µs (target 10 µs, 4 QPs)',
    ('2, 12', 'throughput flow (million msgs/s)'): 'at most 0.35x (IB 0.305x) / 0.50x',
    ('2, 12', 'bandwidth flow goodput (Gb/s)'): '— / 0.50x',
    ('3', 'latency flow p99 (µs), 2 bandwidth flows'): 'IB: 3.79x the 1-flow p99 (2.65x median) / —',
    ('3', 'latency flow p99 (µs), 16 bandwidth flows'): '"barely makes progress" / —',
    ('4', 'throughput flow (million msgs/s), 16 bandwidth flows'): '0.10x (−90%) / —',
    ('5, 11', '1 MB vs 256 MB messages: small / big'): '1 MB vs 1 GB: 0.82 RoCE, 0.70 IB, 0.66 iWARP / 1 ± 0.06',
    ('5, 11', '1 QP vs 4 QPs: one_qp / four_qps'): 'per-QP split (1 vs 16 QPs, figure only) / equal',
    ('16', "Jain's index over the 128 applications"): '— / equal shares (figure only)',
    ('§6.5.1', 'worst p99 of the 8 latency flows (µs)'): 'without: ×79.8 p99 (≈112 µs) / 16.4x better (≈6.8 µs)',
}


def run(sim, scenario, policy, only=None, duration_us=None):
    path = os.path.join(SCEN, scenario)
    tmp = None
    if duration_us is not None:
        text = open(path).read()
        text = re.sub(r"(?m)^duration_us = .*$", f"duration_us = {duration_us}", text, count=1)
        # Flows that would start after the end are left out.
        head, *flows = text.split("\n[[flow]]")
        keep = [f for f in flows
                if not (m := re.search(r"(?m)^start_us = (\S+)", f)) or float(m.group(1)) < duration_us]
        text = head + "".join("\n[[flow]]" + f for f in keep)
        tmp = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
        tmp.write(text)
        tmp.close()
        path = tmp.name
    cmd = [sim, path, "--json", "--no-wall", "--policy", policy]
    if only:
        cmd += ["--only", ",".join(only)]
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    finally:
        if tmp:
            os.unlink(tmp.name)
    r = json.loads(out)
    for f in r["flows"]:
        if not f["integrity_ok"] or f["errors"]:
            sys.exit(f"{scenario} {policy}: flow {f['name']} failed: {f}")
    return {f["name"]: f for f in r["flows"]}, r


def jain(xs):
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if xs and any(xs) else 0.0


class Table:
    def __init__(self):
        self.rows = []

    def add(self, fig, metric, fifo, just, alone, paper=NA, kind="lower", fmt="{:.2f}"):
        """kind: 'lower' (latency: ratio = x / alone), 'higher' (rate: x / alone), None."""
        def f(v):
            return NA if v is None else fmt.format(v)
        if kind and alone:
            ours = f"{fifo / alone:.2f}x / {just / alone:.2f}x"
        else:
            ours = NA
        paper = PAPER.get((fig, metric), paper)
        if metric.startswith("bandwidth flow on the wire (Gb/s), Target99 40"):
            paper = "— / IB 0.87x, RoCE 0.91x (4 QPs)"
        self.rows.append((fig, metric, f(fifo), f(just), f(alone), paper, ours))

    def markdown(self):
        head = ("| figure | metric | fifo | justitia | alone | paper (fifo / justitia vs alone) "
                "| ours (fifo / justitia vs alone) |\n|---|---|---:|---:|---:|---|---|\n")
        return head + "".join("| " + " | ".join(r) + " |\n" for r in self.rows)


def lat(flows, name):
    return flows[name]["lat_us"]["p99"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sim", default=os.path.join(ROOT, "build", "bin", "isoroce-sim"))
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "isolation.md"))
    ap.add_argument("--print", action="store_true", help="print the table instead of updating --doc")
    a = ap.parse_args()
    if not os.access(a.sim, os.X_OK):
        sys.exit(f"run.py: {a.sim} is not an executable (build isoroce-sim first)")
    t = Table()
    S = a.sim

    # Fig. 1 and 9: latency flow vs one 1 MB bandwidth flow.
    sc = "fig01_latency_vs_bandwidth.toml"
    fifo, _ = run(S, sc, "fifo")
    just, jr = run(S, sc, "justitia")
    alone_lat, _ = run(S, sc, "fifo", ["lat"])
    alone_bw, _ = run(S, sc, "fifo", ["bw"])
    t.add("1, 9", "latency flow p99 (µs)", lat(fifo, "lat"), lat(just, "lat"), lat(alone_lat, "lat"))
    t.add("1, 9", "latency flow p50 (µs)", fifo["lat"]["lat_us"]["p50"], just["lat"]["lat_us"]["p50"],
          alone_lat["lat"]["lat_us"]["p50"])
    t.add("1, 9", "bandwidth flow goodput (Gb/s)", fifo["bw"]["goodput_gbps"], just["bw"]["goodput_gbps"],
          alone_bw["bw"]["goodput_gbps"], kind="higher")
    strict_bw_wire = just["bw"]["wire_gbps"]
    strict_safe = jr["hosts"][0]["justitia"]["safe_util_gbps"]

    # Fig. 10: loose Target99.
    sc = "fig10_loose_target.toml"
    fifo, _ = run(S, sc, "fifo")
    just, jr = run(S, sc, "justitia")
    t.add("10", "bandwidth flow on the wire (Gb/s), Target99 40 µs "
          f"(strict 4.84 µs: {strict_bw_wire:.2f}, SafeUtil {strict_safe:.0f})",
          fifo["bw"]["wire_gbps"], just["bw"]["wire_gbps"], alone_bw["bw"]["wire_gbps"], kind="higher")
    t.add("10", "latency flow p99 (µs), Target99 40 µs", lat(fifo, "lat"), lat(just, "lat"), lat(alone_lat, "lat"))
    t.add("10", "SafeUtil at the end (Gb/s), Target99 40 µs", None, jr["hosts"][0]["justitia"]["safe_util_gbps"],
          None, kind=None)

    # Fig. 2 and 12: throughput flow vs bandwidth flow.
    sc = "fig02_throughput_vs_bandwidth.toml"
    fifo, _ = run(S, sc, "fifo")
    just, _ = run(S, sc, "justitia")
    at, _ = run(S, sc, "fifo", ["tput"])
    ab, _ = run(S, sc, "fifo", ["bw"])
    t.add("2, 12", "throughput flow (million msgs/s)", fifo["tput"]["msgs_per_sec"] / 1e6,
          just["tput"]["msgs_per_sec"] / 1e6, at["tput"]["msgs_per_sec"] / 1e6, kind="higher", fmt="{:.3f}")
    t.add("2, 12", "bandwidth flow goodput (Gb/s)", fifo["bw"]["goodput_gbps"], just["bw"]["goodput_gbps"],
          ab["bw"]["goodput_gbps"], kind="higher")

    # Fig. 3 and 4: 1 to 16 bandwidth flows.
    sc = "fig03_04_many_bandwidth.toml"
    alone_l, _ = run(S, sc, "fifo", ["lat"])
    alone_t, _ = run(S, sc, "fifo", ["tput"])
    for n in (1, 2, 4, 8, 16):
        bws = [f"bw{i}" for i in range(1, n + 1)]
        fifo, _ = run(S, sc, "fifo", ["lat"] + bws)
        just, _ = run(S, sc, "justitia", ["lat"] + bws)
        t.add("3", f"latency flow p99 (µs), {n} bandwidth flows", lat(fifo, "lat"), lat(just, "lat"),
              lat(alone_l, "lat"))
    for n in (1, 2, 4, 8, 16):
        bws = [f"bw{i}" for i in range(1, n + 1)]
        fifo, _ = run(S, sc, "fifo", ["tput"] + bws)
        just, _ = run(S, sc, "justitia", ["tput"] + bws)
        t.add("4", f"throughput flow (million msgs/s), {n} bandwidth flows", fifo["tput"]["msgs_per_sec"] / 1e6,
              just["tput"]["msgs_per_sec"] / 1e6, alone_t["tput"]["msgs_per_sec"] / 1e6, kind="higher", fmt="{:.3f}")
    bws = [f"bw{i}" for i in range(1, 5)]
    fifo, _ = run(S, sc, "fifo", bws, duration_us=20000)
    just, _ = run(S, sc, "justitia", bws, duration_us=20000)
    t.add("3", "total goodput, 4 bandwidth flows and no latency flow, 20 ms (Gb/s)",
          sum(f["goodput_gbps"] for f in fifo.values()), sum(f["goodput_gbps"] for f in just.values()), None,
          kind=None)

    # Fig. 5 and 11: 1 MB vs 256 MB messages; 1 QP vs 4 QPs.
    for sc, x, y, what in (("fig05_message_sizes.toml", "small", "big", "1 MB vs 256 MB messages"),
                           ("fig11_qps.toml", "one_qp", "four_qps", "1 QP vs 4 QPs")):
        fifo, _ = run(S, sc, "fifo")
        just, _ = run(S, sc, "justitia")
        ax, _ = run(S, sc, "fifo", [x])
        ay, _ = run(S, sc, "fifo", [y])
        fig = "5, 11"
        t.add(fig, f"{what}: {x} on the wire (Gb/s)", fifo[x]["wire_gbps"], just[x]["wire_gbps"], ax[x]["wire_gbps"],
              kind="higher")
        t.add(fig, f"{what}: {y} on the wire (Gb/s)", fifo[y]["wire_gbps"], just[y]["wire_gbps"], ay[y]["wire_gbps"],
              kind="higher")
        t.add(fig, f"{what}: {x} / {y}", fifo[x]["wire_gbps"] / fifo[y]["wire_gbps"],
              just[x]["wire_gbps"] / just[y]["wire_gbps"], 1.0, kind=None, fmt="{:.3f}")

    # Fig. 16: one latency flow and 128 bandwidth applications.
    sc = "fig16_scalability.toml"
    fifo, _ = run(S, sc, "fifo")
    just, _ = run(S, sc, "justitia")
    al, _ = run(S, sc, "fifo", ["lat"])
    bwn = [n for n in fifo if n.startswith("bw")]
    t.add("16", "latency flow p99 (µs), 128 bandwidth applications", lat(fifo, "lat"), lat(just, "lat"),
          lat(al, "lat"))
    t.add("16", "bandwidth total on the wire (Gb/s)", sum(fifo[n]["wire_gbps"] for n in bwn),
          sum(just[n]["wire_gbps"] for n in bwn), None, kind=None)
    t.add("16", "Jain's index over the 128 applications", jain([fifo[n]["wire_gbps"] for n in bwn]),
          jain([just[n]["wire_gbps"] for n in bwn]), 1.0, kind=None, fmt="{:.4f}")

    # Section 6.5.1: bandwidth pairs arriving every 2 ms, then 8 latency flows at 8 ms.
    sc = "sec651_dynamic.toml"
    bwn = [f"bw{i}" for i in range(1, 9)]
    latn = [f"lat{i}" for i in range(1, 9)]
    res = {}
    for pol in ("fifo", "justitia"):
        for d in (6000, 8000, 12000):
            # The latency flows start at 8 ms: shorter runs leave them out (otherwise
            # the runs are the same up to their end).
            res[pol, d] = run(S, sc, pol, duration_us=d)[0]

    def window_rates(pol, t0, t1):
        # Bytes on the wire per flow at t: wire_gbps x (t - start); the runs are
        # identical up to the shorter one's end (deterministic), so differences are exact.
        rates = []
        for n in bwn:
            b = [res[pol, d][n]["wire_gbps"] * (d - res[pol, d][n]["start_us"]) if n in res[pol, d] else 0.0
                 for d in (t0, t1)]
            rates.append((b[1] - b[0]) / (t1 - t0))
        return rates

    for t0, t1, what in ((6000, 8000, "6-8 ms, 8 bandwidth flows"), (8000, 12000, "8-12 ms, with 8 latency flows")):
        f_r, j_r = window_rates("fifo", t0, t1), window_rates("justitia", t0, t1)
        t.add("§6.5.1", f"Jain's index of the bandwidth flows, {what}", jain(f_r), jain(j_r), 1.0, kind=None,
              fmt="{:.4f}")
        t.add("§6.5.1", f"bandwidth total (Gb/s), {what}", sum(f_r), sum(j_r), None, kind=None)
    al, _ = run(S, sc, "fifo", latn)
    worst = lambda fl: max(fl[n]["lat_us"]["p99"] for n in latn)
    f12, j12 = res["fifo", 12000], res["justitia", 12000]
    t.add("§6.5.1", "worst p99 of the 8 latency flows (µs)", worst(f12) if all(f12[n]["messages"] for n in latn)
          else None, worst(j12), worst(al), kind=None)
    t.add("§6.5.1", "latency messages completed (8 flows, 8-12 ms)", sum(f12[n]["messages"] for n in latn),
          sum(j12[n]["messages"] for n in latn), sum(al[n]["messages"] for n in latn), kind="higher", fmt="{:.0f}")

    table = t.markdown()
    if a.print:
        print(table, end="")
        return
    doc = open(a.doc).read()
    begin, end = "<!-- justitia-table -->", "<!-- /justitia-table -->"
    if begin not in doc or end not in doc:
        sys.exit(f"run.py: {a.doc} has no {begin} ... {end} markers")
    pre, rest = doc.split(begin, 1)
    _, post = rest.split(end, 1)
    open(a.doc, "w").write(pre + begin + "\n" + table + end + post)
    print(f"run.py: wrote {len(t.rows)} rows to {a.doc}")


if __name__ == "__main__":
    main()
