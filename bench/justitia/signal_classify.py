#!/usr/bin/env python3
"""Issue 19's comparisons in isoroce-sim (virtual time: the same numbers on every
machine): Justitia's latency signal (the echoed probe against the passive round trips
of the transport) and automatic flow classification (declared classes against
classify = auto with no class declared, and an application that lies about its class
under classify = declared, auto and verify). Prints the markdown tables of
docs/isolation.md ("Justitia with any peer", "Automatic flow classification").

  bench/justitia/signal_classify.py [--sim build/bin/isoroce-sim]
"""
import argparse
import json
import os
import re
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCEN = os.path.join(ROOT, "bench", "scenarios", "justitia")


def run(sim, scenario, policy="justitia", params=(), only=None, undeclare=False):
    path = os.path.join(SCEN, scenario)
    tmp = None
    if undeclare:  # every flow without a declared class, the hosts classifying
        text = re.sub(r'(?m)^class = ".*"$', 'class = "auto"', open(path).read())
        tmp = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
        tmp.write(text)
        tmp.close()
        path = tmp.name
    cmd = [sim, path, "--json", "--no-wall", "--policy", policy]
    for p in params:
        cmd += ["--justitia", p]
    if only:
        cmd += ["--only", only]
    try:
        r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    finally:
        if tmp:
            os.unlink(tmp.name)
    return {f["name"]: f for f in r["flows"]}, r["hosts"][0].get("justitia", {})


def signal_table(sim):
    out = ["| run | latency p50 / p99 µs | bandwidth flow Gb/s | samples into Current99 (passive) | min SafeUtil Gb/s |",
           "|---|---:|---:|---:|---:|"]
    alone, _ = run(sim, "fig01_latency_vs_bandwidth.toml", "fifo", only="lat")
    out.append(f"| alone (fifo) | {alone['lat']['lat_us']['p50']:.2f} / {alone['lat']['lat_us']['p99']:.2f} | — | — | — |")
    rows = [("fifo", "fifo", []), ("justitia, signal = probe (the echo)", "justitia", ["signal=probe"]),
            ("justitia, signal = passive", "justitia", ["signal=passive"]),
            ("justitia, signal = both", "justitia", ["signal=both"])]
    for name, pol, params in rows:
        f, j = run(sim, "fig01_latency_vs_bandwidth.toml", pol, params)
        lat = f["lat"]["lat_us"]
        js = f"{j['samples']} ({j['passive_samples']})" if j else "—"
        su = f"{j['min_safe_util_gbps']:.1f}" if j else "—"
        out.append(f"| {name} | {lat['p50']:.2f} / {lat['p99']:.2f} | {f['bw']['goodput_gbps']:.2f} | {js} | {su} |")
    return "\n".join(out)


def classify_table(sim):
    out = ["| experiment | metric | declared classes | no class, classify = auto | no class, classify = declared |",
           "|---|---|---:|---:|---:|"]
    exps = [("1, 9", "fig01_latency_vs_bandwidth.toml",
             [("latency flow p99 (µs)", lambda f: f["lat"]["lat_us"]["p99"]),
              ("latency flow p999 (µs)", lambda f: f["lat"]["lat_us"]["p999"]),
              ("bandwidth flow goodput (Gb/s)", lambda f: f["bw"]["goodput_gbps"])]),
            ("2, 12", "fig02_throughput_vs_bandwidth.toml",
             [("throughput flow (million msgs/s)", lambda f: f["tput"]["msgs_per_sec"] / 1e6),
              ("bandwidth flow goodput (Gb/s)", lambda f: f["bw"]["goodput_gbps"])]),
            ("5, 11", "fig05_message_sizes.toml",
             [("small / big on the wire", lambda f: f["small"]["wire_gbps"] / f["big"]["wire_gbps"])]),
            ("5, 11", "fig11_qps.toml",
             [("one_qp / four_qps on the wire", lambda f: f["one_qp"]["wire_gbps"] / f["four_qps"]["wire_gbps"])])]
    for fig, scen, metrics in exps:
        decl, _ = run(sim, scen)
        auto, ja = run(sim, scen, params=["classify=auto"], undeclare=True)
        none, _ = run(sim, scen, params=["classify=declared"], undeclare=True)
        for i, (name, get) in enumerate(metrics):
            extra = f" ({ja.get('reclassified', 0)} QPs reclassified)" if i == 0 else ""
            out.append(f"| {fig} | {name} | {get(decl):.3f} | {get(auto):.3f}{extra} | {get(none):.3f} |")
    return "\n".join(out)


def liar_table(sim):
    out = ["| classify | latency flow p50 / p99 µs | honest 1 MB flow Gb/s | liar Gb/s | honest flow errors | QPs reclassified |",
           "|---|---:|---:|---:|---:|---:|"]
    alone, _ = run(sim, "classify_liar.toml", "fifo", only="lat")
    out.append(f"| (latency flow alone, fifo) | {alone['lat']['lat_us']['p50']:.2f} / {alone['lat']['lat_us']['p99']:.2f} "
               "| — | — | — | — |")
    for mode in ("declared", "auto", "verify"):
        f, j = run(sim, "classify_liar.toml", params=[f"classify={mode}"])
        lat = f["lat"]["lat_us"]
        out.append(f"| {mode} | {lat['p50']:.2f} / {lat['p99']:.2f} | {f['bw']['goodput_gbps']:.2f} | "
                   f"{f['liar']['goodput_gbps']:.2f} | {f['bw']['errors']} | {j.get('reclassified', 0)} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sim", default=os.path.join(ROOT, "build", "bin", "isoroce-sim"))
    a = ap.parse_args()
    print("Latency signal (fig01_latency_vs_bandwidth.toml):\n")
    print(signal_table(a.sim))
    print("\nClassification on the paper's experiments:\n")
    print(classify_table(a.sim))
    print("\nAn application that lies (classify_liar.toml):\n")
    print(liar_table(a.sim))


if __name__ == "__main__":
    main()
