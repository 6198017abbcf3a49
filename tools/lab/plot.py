#!/usr/bin/python3
"""Plots an isoroce-lab table (its --json output): one PNG per comparison (the
simulated ratio of each policy and grid point with its 95% confidence interval, the
paper's ratio as a marker) and one per metric (mean and CI of every cell).

  tools/lab/plot.py RESULTS.json [--out DIR]

Needs matplotlib (Debian python3-matplotlib; run with /usr/bin/python3).
"""
import argparse
import collections
import json
import os
import re
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("plot.py: needs matplotlib (apt-get install python3-matplotlib; run /usr/bin/python3)")


def label(row, with_scenario):
    parts = ([row["scenario"]] if with_scenario else []) + [row["policy"]]
    parts += [f"{k.split('.')[-1]}={v}" for k, v in row["params"].items()]
    return "\n".join(parts)


def slug(text):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def bars(rows, title, ylabel, path, with_scenario, log=False):
    rows = [r for r in rows if r.get("mean") is not None]
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(rows) + 1.5), 3.6))
    xs = range(len(rows))
    ax.bar(xs, [r["mean"] for r in rows], yerr=[r.get("ci95", 0) for r in rows], capsize=3,
           color="#4c72b0", label="isoroce-sim")
    papers = [(i, r["paper"]) for i, r in enumerate(rows) if "paper" in r]
    if papers:
        ax.scatter([i for i, _ in papers], [p for _, p in papers], marker="D", color="#c44e52", zorder=3,
                   label="paper")
        ax.legend(fontsize=8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([label(r, with_scenario) for r in rows], fontsize=7)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="isoroce-lab --json output")
    ap.add_argument("--out", default="plots", help="folder for the PNGs (default: plots)")
    a = ap.parse_args()
    with open(a.results) as f:
        table = json.load(f)
    os.makedirs(a.out, exist_ok=True)
    groups = collections.OrderedDict()
    for r in table["rows"]:
        groups.setdefault((r["kind"], r["name"]), []).append(r)
    written = 0
    for (kind, name), rows in groups.items():
        ratio = kind == "compare"
        values = [r["mean"] for r in rows if r.get("mean")]
        log = bool(values) and max(values) / max(min(values), 1e-12) > 50
        path = os.path.join(a.out, f"{kind}-{slug(name)}.png")
        if bars(rows, f"{table.get('sweep') or ''} {name}", "ratio" if ratio else name, path,
                with_scenario=not ratio, log=log):
            written += 1
    print(f"plot.py: {written} plots in {a.out}")


if __name__ == "__main__":
    main()
