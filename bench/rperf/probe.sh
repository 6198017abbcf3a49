#!/usr/bin/env bash
# RPerf's RTT on a live isoroced (--loopback, 10 Gb/s ports): isoroce-rperf-probe
# under LD_PRELOAD=libisoroce-verbs.so posts a 64-byte SEND isoroce0 -> isoroce1
# and right after it a loopback SEND isoroce0 -> isoroce0, N times, alone and
# beside a 1 MB RDMA WRITE flow isoroce0 -> isoroce1 (4 in flight), under fifo,
# tassel and justitia; one markdown table (docs/profiling.md, "Latency breakdown").
# The daemon's worker polls on lcore 1 (the default --lcores 0,1), the probe runs
# pinned to CPU 0 (as bench/verbs/run.sh).
# Usage: bench/rperf/probe.sh [BUILD_DIR]     ITERS=5000 pairs per case
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/$build/bin"
preload="$root/$build/lib/libisoroce-verbs.so"
iters=${ITERS:-5000}
for f in "$bin/isoroced" "$bin/isoroce-ctl" "$bin/isoroce-rperf-probe" "$preload"; do
  [[ -e $f ]] || { echo "missing $f: build isoroced isoroce-ctl isoroce-verbs isoroce-rperf-probe first" >&2; exit 2; }
done
tmp=$(mktemp -d)
daemon=
cleanup() { [[ -n $daemon ]] && { kill -TERM "$daemon"; wait "$daemon" || true; }; rm -rf "$tmp"; }
trap cleanup EXIT
for policy in fifo tassel justitia; do
  for case in alone with_bw; do
    sock="$tmp/d.sock"
    "$bin/isoroced" --loopback --policy "$policy" --link-gbps 10 --socket "$sock" --file-prefix "rperf_probe_$$" \
      >"$tmp/d.log" 2>&1 &
    daemon=$!
    for _ in $(seq 100); do "$bin/isoroce-ctl" --socket "$sock" status >/dev/null 2>&1 && break; sleep 0.1; done
    bg=(); [[ $case == with_bw ]] && bg=(--background-bytes 1048576)
    ISOROCE_SOCKET="$sock" LD_PRELOAD="$preload" timeout 600 taskset -c 0 "$bin/isoroce-rperf-probe" \
      -n "$iters" --warmup 200 "${bg[@]}" --json >"$tmp/$policy.$case.json" || echo "{}" >"$tmp/$policy.$case.json"
    kill -TERM "$daemon"; wait "$daemon" || true; daemon=
  done
done
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
def ppp(s): return f"{s['p50_us']:.1f} / {s['p99_us']:.1f} / {s['p999_us']:.1f}"
print("| policy | case | pairs | T_W p50 / p99 / p99.9 | T_L p50 / p99 / p99.9 | T_W − T_L p50 / p99 / p99.9 "
      "| T_L / T_W (means) | background |")
print("|---|---|---|---|---|---|---|---|")
for policy in ("fifo", "tassel", "justitia"):
    for case in ("alone", "with_bw"):
        j = json.load(open(f"{d}/{policy}.{case}.json"))
        label = "alone" if case == "alone" else "beside 1 MB"
        if "rtt" not in j:
            print(f"| {policy} | {label} | failed | | | | | |"); continue
        bg = f"{j['background']['gbps']:.2f} Gb/s" if case != "alone" else "—"
        share = j["t_l"]["mean_us"] / j["t_w"]["mean_us"]
        print(f"| {policy} | {label} | {j['samples']} | {ppp(j['t_w'])} | {ppp(j['t_l'])} | {ppp(j['rtt'])} "
              f"| {share:.0%} | {bg} |")
PY
