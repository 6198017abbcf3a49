#!/usr/bin/env python3
"""Writes the sweep tables of docs/isolation.md from isoroce-lab's JSON output:
the rnic presets' calibration (calibrate-{roce,ib,iwarp}.sweep.toml) between the
<!-- rnic-calibration --> markers, and the paper column of the Justitia experiments
(justitia.sweep.toml) between the <!-- paper-column --> markers, Justitia's latency
signal (signal.sweep.toml) between <!-- signal --> and automatic classification
(classify.sweep.toml) between <!-- classify --> and <!-- classify-liar -->, Fig. 16
and §6.5.1 (scale.sweep.toml) between <!-- scale -->.

  bench/justitia/sweep_table.py --dir RESULTS_DIR [--doc docs/isolation.md] [--print]

RESULTS_DIR holds calibrate-roce.json, calibrate-ib.json, calibrate-iwarp.json,
justitia.json, signal.json, classify.json and scale.json (bench/justitia/sweep.sh makes
them); a table whose results are missing is left as it is.
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
POLICIES = ["fifo", "cx4-roce", "cx3-ib", "t6-iwarp", "justitia"]
FAMILY = {"roce": ("cx4-roce", "RoCEv2, ConnectX-4, 40 Gb/s, MTU 1024"),
          "ib": ("cx3-ib", "InfiniBand, ConnectX-3 Pro, 56 Gb/s, MTU 4096"),
          "iwarp": ("t6-iwarp", "iWARP, Chelsio T6, 40 Gb/s, MTU 1024")}
NA = "—"


def cell(row):
    if row is None or row.get("mean") is None:
        return NA
    m, ci = row["mean"], row.get("ci95", 0)
    fmt = "{:.3g}" if abs(m) < 10 else "{:.1f}"
    s = fmt.format(m) + "x"
    if ci:
        s += " ± " + ("{:.2g}".format(ci))
    return s


def compares(table):
    out = {}
    for r in table["rows"]:
        if r["kind"] == "compare":
            out[(r["name"], r["policy"])] = r
    return out


def calibration(d):
    head = ("| testbed | figure | paper | preset (mean ± 95% CI, 3 seeds) | error | fifo |\n"
            "|---|---|---:|---:|---:|---:|\n")
    rows = []
    for fam, (preset, what) in FAMILY.items():
        t = json.load(open(os.path.join(d, f"calibrate-{fam}.json")))
        c = compares(t)
        names = []
        for r in t["rows"]:
            if r["kind"] == "compare" and r["name"] not in names:
                names.append(r["name"])
        for n in names:
            p = c.get((n, preset))
            paper = f"{p['paper']:.3g}x" if p and "paper" in p else NA
            err = f"{p['error_pct']:+.1f}%" if p and "error_pct" in p else NA
            rows.append(f"| {what} | {n} | {paper} | {cell(p)} | {err} | {cell(c.get((n, 'fifo')))} |")
    return head + "\n".join(rows) + "\n"


def paper_column(d):
    t = json.load(open(os.path.join(d, "justitia.json")))
    c = compares(t)
    names = []
    for r in t["rows"]:
        if r["kind"] == "compare" and r["name"] not in names:
            names.append(r["name"])
    head = ("| comparison | paper | " + " | ".join(POLICIES) + " |\n|---|---|" + "---:|" * len(POLICIES) + "\n")
    rows = []
    for n in names:
        papers = [f"{p} {c[(n, p)]['paper']:.3g}x" for p in POLICIES if (n, p) in c and "paper" in c[(n, p)]]
        rows.append(f"| {n} | {', '.join(papers) or NA} | " +
                    " | ".join(cell(c.get((n, p))) for p in POLICIES) + " |")
    return head + "\n".join(rows) + "\n"


def means(d, name):
    """(scenario, policy, metric) -> mean of the sweep `name`'s metric rows."""
    t = json.load(open(os.path.join(d, f"{name}.json")))
    return {(r["scenario"], r["policy"], r["name"]): r.get("mean") for r in t["rows"] if r["kind"] == "metric"}


def num(v, fmt="{:.2f}"):
    return NA if v is None else fmt.format(v)


def signal_table(d):
    m = means(d, "signal")
    out = ["| run | latency p50 / p99 µs | bandwidth flow Gb/s | samples into Current99 (passive) | min SafeUtil Gb/s |",
           "|---|---:|---:|---:|---:|",
           f"| alone (fifo) | {num(m[('fig1-lat-alone', 'fifo', 'lat_p50_us')])} / "
           f"{num(m[('fig1-lat-alone', 'fifo', 'lat_p99_us')])} | — | — | — |"]
    for name, pol in [("fifo", "fifo"), ("justitia, signal = probe (the echo)", "probe"),
                      ("justitia, signal = passive", "passive"), ("justitia, signal = both", "both")]:
        g = lambda k: m.get(("fig1", pol, k))
        js = NA if g("samples") is None else f"{g('samples'):.0f} ({g('passive_samples'):.0f})"
        out.append(f"| {name} | {num(g('lat_p50_us'))} / {num(g('lat_p99_us'))} | {num(g('bw_goodput_gbps'))} | {js} | "
                   f"{num(g('min_safe_util_gbps'), '{:.1f}')} |")
    return "\n".join(out) + "\n"


def classify_tables(d):
    m = means(d, "classify")
    out = ["| experiment | metric | declared classes | no class, classify = auto | no class, classify = declared |",
           "|---|---|---:|---:|---:|"]
    exps = [("1, 9", "fig1", [("latency flow p99 (µs)", "lat_p99_us", 1), ("latency flow p999 (µs)", "lat_p999_us", 1),
                              ("bandwidth flow goodput (Gb/s)", "bw_goodput_gbps", 1)]),
            ("2, 12", "fig2", [("throughput flow (million msgs/s)", "tput_msgs_per_sec", 1e-6),
                               ("bandwidth flow goodput (Gb/s)", "bw_goodput_gbps", 1)]),
            ("5, 11", "fig5", [("small / big on the wire", "small_over_big", 1)]),
            ("5, 11", "fig11", [("one_qp / four_qps on the wire", "one_over_four_qps", 1)])]
    for fig, scen, metrics in exps:
        for i, (label, key, scale) in enumerate(metrics):
            v = [m.get(c + (key,)) for c in [(scen, "declared"), (scen + "-undeclared", "auto"),
                                             (scen + "-undeclared", "declared")]]
            v = [None if x is None else x * scale for x in v]
            re = m.get((scen + "-undeclared", "auto", "reclassified"))
            extra = f" ({re:.0f} QPs reclassified)" if i == 0 and re is not None else ""
            out.append(f"| {fig} | {label} | {num(v[0], '{:.3f}')} | {num(v[1], '{:.3f}')}{extra} | {num(v[2], '{:.3f}')} |")
    liar = ["| classify | latency flow p50 / p99 µs | honest 1 MB flow Gb/s | liar Gb/s | honest flow errors | QPs reclassified |",
            "|---|---:|---:|---:|---:|---:|",
            f"| (latency flow alone, fifo) | {num(m.get(('liar-lat-alone', 'fifo', 'lat_p50_us')))} / "
            f"{num(m.get(('liar-lat-alone', 'fifo', 'lat_p99_us')))} | — | — | — | — |"]
    for mode in ("declared", "auto", "verify"):
        g = lambda k: m.get(("liar", mode, k))
        liar.append(f"| {mode} | {num(g('lat_p50_us'))} / {num(g('lat_p99_us'))} | {num(g('bw_goodput_gbps'))} | "
                    f"{num(g('liar_goodput_gbps'))} | {num(g('bw_errors'), '{:.0f}')} | {num(g('reclassified'), '{:.0f}')} |")
    return "\n".join(out) + "\n", "\n".join(liar) + "\n"


SCALE_POLICIES = ["fifo", "cx4-roce", "justitia"]
SCALE_ROWS = [  # compare name, what, unit ("x": a ratio to alone)
    ("fig16-lat-p99-x", "16: latency flow p99 vs alone, 128 bandwidth applications", "x"),
    ("fig16-bw-total-gbps", "16: the 128 applications on the wire (Gb/s)", ""),
    ("fig16-bw-jain", "16: Jain's index over the 128 applications", ""),
    ("sec651-lat-worst-p99-x", "§6.5.1: worst p99 of the 8 latency flows vs alone", "x"),
    ("sec651-lat-worst-p50-x", "§6.5.1: worst median of the 8 latency flows vs alone", "x"),
    ("sec651-lat-messages-kept", "§6.5.1: latency messages completed vs alone (8 flows, 8-12 ms)", "x"),
]
SCALE_PAPER = {"fig16-bw-jain": "equal shares (figure only)",
               "sec651-lat-worst-p99-x": "79.8x / 4.87x (16.4x better)",
               "sec651-lat-worst-p50-x": "71.4x / 1.46x (48.8x better)"}


def scale_table(d):
    t = json.load(open(os.path.join(d, "scale.json")))
    c = compares(t)
    out = ["| figure: metric | paper (fifo / justitia) | " + " | ".join(SCALE_POLICIES) + " |",
           "|---|---|" + "---:|" * len(SCALE_POLICIES)]
    for name, what, unit in SCALE_ROWS:
        cells = []
        for p in SCALE_POLICIES:
            r = c.get((name, p))
            if r is None or r.get("mean") is None:
                cells.append(NA)
            elif unit == "x" and r["mean"] == 0:
                cells.append("none completed")  # latency flows with no message: no latency
            else:
                m = r["mean"]
                cells.append((("{:.3g}" if abs(m) < 10 else "{:.1f}").format(m) + "x") if unit == "x"
                             else ("{:.4f}".format(m) if "jain" in name else "{:.2f}".format(m)))
        out.append(f"| {what} | {SCALE_PAPER.get(name, NA)} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def splice(doc, marker, table):
    begin, end = f"<!-- {marker} -->", f"<!-- /{marker} -->"
    if begin not in doc or end not in doc:
        sys.exit(f"sweep_table.py: the document has no {begin} ... {end} markers")
    pre, rest = doc.split(begin, 1)
    _, post = rest.split(end, 1)
    return pre + begin + "\n" + table + end + post


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "isolation.md"))
    ap.add_argument("--print", action="store_true")
    a = ap.parse_args()
    have = lambda *names: all(os.path.exists(os.path.join(a.dir, n + ".json")) for n in names)
    tables = []  # (marker, text)
    if have("calibrate-roce", "calibrate-ib", "calibrate-iwarp"):
        tables.append(("rnic-calibration", calibration(a.dir)))
    if have("justitia"):
        tables.append(("paper-column", paper_column(a.dir)))
    if have("signal"):
        tables.append(("signal", signal_table(a.dir)))
    if have("classify"):
        cls, liar = classify_tables(a.dir)
        tables += [("classify", cls), ("classify-liar", liar)]
    if have("scale"):
        tables.append(("scale", scale_table(a.dir)))
    if a.print:
        print("\n".join(t for _, t in tables), end="")
        return
    doc = open(a.doc).read()
    for marker, text in tables:
        doc = splice(doc, marker, text)
    open(a.doc, "w").write(doc)
    print(f"sweep_table.py: wrote {', '.join(m for m, _ in tables)} to {a.doc}")


if __name__ == "__main__":
    main()
