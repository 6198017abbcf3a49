#!/bin/sh
# Runs isoroce-bench-sched once and prints, for each QP count, Tassel's packets per
# second against the two baselines measured in the same run.
#   bench/sched/run.sh [path/to/isoroce-bench-sched] [google-benchmark flags...]
set -eu
bin=build/bin/isoroce-bench-sched
if [ $# -gt 0 ] && [ -x "$1" ]; then
  bin=$1
  shift
fi
if [ ! -x "$bin" ]; then
  echo "run.sh: $bin not found; build it with: ninja -C build isoroce-bench-sched" >&2
  exit 1
fi
json=$(mktemp)
trap 'rm -f "$json"' EXIT
"$bin" --benchmark_out="$json" --benchmark_out_format=json "$@"
python3 - "$json" <<'PY'
import json, sys

runs = json.load(open(sys.argv[1]))["benchmarks"]
pps = {}
for r in runs:
    if r.get("run_type", "iteration") != "iteration":
        continue
    name, arg = r["name"].split("/")[:2]
    pps[(name, int(arg))] = r["items_per_second"]
print()
print(f"{'QPs':>8} {'Tassel Mpps':>12} {'ns/pkt':>7} {'HeapWF2Q Mpps':>14} {'x heap':>7} "
      f"{'TokenBucket Mpps':>17} {'x bucket':>9}")
for qps in sorted({a for (_, a) in pps}):
    t = pps.get(("BM_Tassel", qps))
    h = pps.get(("BM_HeapWF2Q", qps))
    b = pps.get(("BM_TokenBucket", qps))
    if t is None:
        continue
    def mpps(v):
        return f"{v / 1e6:.2f}" if v else "-"
    def ratio(v):
        return f"{t / v:.2f}" if v else "-"
    print(f"{qps:>8} {mpps(t):>12} {1e9 / t:>7.1f} {mpps(h):>14} {ratio(h):>7} {mpps(b):>17} {ratio(b):>9}")
PY
