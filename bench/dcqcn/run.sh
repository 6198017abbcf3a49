#!/bin/sh
# Runs isoroce-bench-dcqcn (5 repetitions, medians) and prints ns per data packet
# of each mode against the baseline (DCQCN disabled) measured in the same run.
#   bench/dcqcn/run.sh [path/to/isoroce-bench-dcqcn] [google-benchmark flags...]
set -eu
bin=build/bin/isoroce-bench-dcqcn
if [ $# -gt 0 ] && [ -x "$1" ]; then
  bin=$1
  shift
fi
if [ ! -x "$bin" ]; then
  echo "run.sh: $bin not found; build it with: ninja -C build isoroce-bench-dcqcn" >&2
  exit 1
fi
json=$(mktemp)
trap 'rm -f "$json"' EXIT
"$bin" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  --benchmark_out="$json" --benchmark_out_format=json "$@" >/dev/null
python3 - "$json" <<'PY'
import json, sys
runs = {}
for r in json.load(open(sys.argv[1]))["benchmarks"]:
    if r.get("error_occurred"):
        print(f"{r['name']}: ERROR {r.get('error_message')}")
        continue
    if r.get("aggregate_name", "median") != "median":
        continue
    runs[r.get("run_name", r["name"])] = r
names = {"BM_Transmit/0": "engines, DCQCN off (baseline)", "BM_Transmit/1": "engines, DCQCN on, idle",
         "BM_Transmit/2": "engines, DCQCN on, rate change every packet"}
base = runs.get("BM_Transmit/0")
print(f"{'benchmark':<46} {'ns/data pkt':>12} {'vs baseline':>12} {'extra ns':>9} {'rate changes/pkt':>17}")
for k, label in names.items():
    r = runs.get(k)
    if not r:
        continue
    ns = r["s_per_data_pkt"] * 1e9
    b = base["s_per_data_pkt"] * 1e9 if base else ns
    print(f"{label:<46} {ns:>12.1f} {ns / b:>12.3f} {ns - b:>9.1f} {r['rate_changes_per_pkt']:>17.2f}")
for k, label in (("BM_RpOnSent/0", "reaction point alone, not limiting"),
                 ("BM_RpOnSent/1", "reaction point alone, rate change every packet")):
    r = runs.get(k)
    if r:
        print(f"{label:<46} {1e9 / r['items_per_second']:>12.1f} {'':>12} {'':>9} {r['rate_changes_per_pkt']:>17.2f}")
PY
