#!/usr/bin/env python3
"""Writes the sweep tables of docs/isolation.md from isoroce-lab's JSON output:
the rnic presets' calibration (calibrate-{roce,ib,iwarp}.sweep.toml) between the
<!-- rnic-calibration --> markers, and the paper column of the Justitia experiments
(justitia.sweep.toml) between the <!-- paper-column --> markers.

  bench/justitia/sweep_table.py --dir RESULTS_DIR [--doc docs/isolation.md] [--print]

RESULTS_DIR holds calibrate-roce.json, calibrate-ib.json, calibrate-iwarp.json and
justitia.json (bench/justitia/sweep.sh makes them).
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
    cal, pc = calibration(a.dir), paper_column(a.dir)
    if a.print:
        print(cal + "\n" + pc, end="")
        return
    doc = open(a.doc).read()
    doc = splice(splice(doc, "rnic-calibration", cal), "paper-column", pc)
    open(a.doc, "w").write(doc)
    print(f"sweep_table.py: wrote the calibration and paper-column tables to {a.doc}")


if __name__ == "__main__":
    main()
