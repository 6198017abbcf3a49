#!/usr/bin/python3
"""Draws isoroce-sim's --timeseries CSV and --trace JSON (docs/profiling.md).

  plot.py justitia SERIES.csv TRACE.json OUT.png   latency messages beside the
          bandwidth flow's throughput and SafeUtil (a justitia host)
  plot.py dcqcn SERIES.csv TRACE.json OUT.png      senders' rates converging, the
          switch queue, CNPs received per period (an incast with DCQCN)
  plot.py tassel SERIES.csv OUT.png                each QP's throughput against its
          rate limit (a tassel host)

Needs python3-matplotlib (Debian). bench/profiling/run.sh draws docs/img/.
"""
import csv
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_series(path):
    rows = list(csv.DictReader(open(path)))
    for r in rows:
        r["t"] = float(r["time_us"])
    return rows


def by_qp(rows, role="requester"):
    out = defaultdict(list)
    for r in rows:
        if r["role"] == role:
            out[(r["host"], r["qpn"], r["flow"])].append(r)
    return out


def read_trace(path):
    doc = json.load(open(path))
    return doc["traceEvents"]


def justitia(series, trace, out):
    rows = read_series(series)
    ev = read_trace(trace)
    fig, ax = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    lat = [e for e in ev if e["ph"] == "X" and e.get("cat") == "latency"]
    ax[0].scatter([e["ts"] for e in lat], [e["dur"] for e in lat], s=6, color="tab:red")
    ax[0].set_ylabel("latency flow\nmessage latency (us)")
    ax[0].set_title("justitia: 16 B latency WRITEs beside 1 MB bandwidth WRITEs (post to completion)")
    for (host, qpn, flow), rs in sorted(by_qp(rows).items()):
        if flow == "reference":
            continue
        ax[1].plot([r["t"] for r in rs], [int(r["throughput_bps"]) / 1e9 for r in rs], label=f"{flow} ({host} {qpn})")
    ax[1].set_ylabel("throughput (Gb/s)")
    ax[1].legend(loc="lower right", fontsize=8)
    hosts = defaultdict(list)
    for r in rows:
        if r["safe_util_bps"]:
            hosts[r["host"]].append((r["t"], int(r["safe_util_bps"]) / 1e9))
    for host, pts in sorted(hosts.items()):
        pts = sorted(set(pts))
        ax[2].step([p[0] for p in pts], [p[1] for p in pts], where="post", label=f"SafeUtil host {host}")
    ax[2].set_ylabel("SafeUtil (Gb/s)")
    ax[2].set_xlabel("virtual time (us)")
    ax[2].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=90)


def dcqcn(series, trace, out):
    rows = read_series(series)
    ev = read_trace(trace)
    fig, ax = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    for (host, qpn, flow), rs in sorted(by_qp(rows).items()):
        ax[0].plot([r["t"] for r in rs], [(int(r["rate_bps"]) or 100e9) / 1e9 for r in rs], lw=1, label=host)
    ax[0].set_ylabel("rate limit (Gb/s)")
    ax[0].set_title("DCQCN incast: senders' rates, the switch queue, CNPs")
    ax[0].legend(loc="upper right", fontsize=7, ncol=4)
    queue = {}
    for r in rows:
        if r["role"] == "responder":
            queue[r["t"]] = max(queue.get(r["t"], 0), int(r["queue_bytes"]))
    ts = sorted(queue)
    ax[1].plot(ts, [queue[t] / 1024 for t in ts], color="tab:purple")
    ax[1].set_ylabel("switch queue (KB)")
    period = ts[1] - ts[0] if len(ts) > 1 else 10
    cnps = defaultdict(int)
    for e in ev:
        if e["ph"] == "i" and e["name"] == "cnp" and e["args"].get("received"):
            cnps[int(e["ts"] // period) * period] += 1
    xs = sorted(cnps)
    ax[2].bar(xs, [cnps[x] for x in xs], width=period, color="tab:orange")
    ax[2].set_ylabel(f"CNPs received\nper {period:g} us")
    ax[2].set_xlabel("virtual time (us)")
    fig.tight_layout()
    fig.savefig(out, dpi=90)


def tassel(series, out):
    rows = read_series(series)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for i, ((host, qpn, flow), rs) in enumerate(sorted(by_qp(rows).items())):
        color = f"C{i}"
        ax.plot([r["t"] for r in rs], [int(r["throughput_bps"]) / 1e9 for r in rs], color=color,
                label=f"{flow} QP {qpn}")
        lim = [int(r["rate_bps"]) / 1e9 for r in rs]
        if any(lim):
            ax.plot([r["t"] for r in rs], lim, color=color, ls="--", lw=1, label=f"limit QP {qpn}")
    ax.set_ylabel("throughput (Gb/s)")
    ax.set_xlabel("virtual time (us)")
    ax.set_title("tassel: each QP's throughput against its rate limit")
    ax.legend(loc="center right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=90)


def main(argv):
    if len(argv) < 2 or argv[1] not in ("justitia", "dcqcn", "tassel"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[1] == "tassel" and len(argv) == 4:
        tassel(argv[2], argv[3])
    elif argv[1] != "tassel" and len(argv) == 5:
        (justitia if argv[1] == "justitia" else dcqcn)(argv[2], argv[3], argv[4])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
