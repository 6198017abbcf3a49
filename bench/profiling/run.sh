#!/bin/sh
# Draws the pictures of docs/profiling.md into docs/img/ from isoroce-sim runs:
#   bench/profiling/run.sh [path/to/isoroce-sim]
set -eu
sim=${1:-build/bin/isoroce-sim}
out=docs/img
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
"$sim" bench/scenarios/justitia/fig01_latency_vs_bandwidth.toml --no-wall \
  --trace "$tmp/j.json" --trace-events post,completion,safe_util --timeseries "$tmp/j.csv" --period-us 20 >/dev/null
bench/profiling/plot.py justitia "$tmp/j.csv" "$tmp/j.json" "$out/profiling-justitia.png"
"$sim" tools/sim/examples/incast_dcqcn.toml --no-wall \
  --trace "$tmp/d.json" --trace-events cnp --timeseries "$tmp/d.csv" --period-us 50 >/dev/null
bench/profiling/plot.py dcqcn "$tmp/d.csv" "$tmp/d.json" "$out/profiling-dcqcn.png"
"$sim" tools/sim/examples/latency_vs_bandwidth_tassel.toml --no-wall \
  --timeseries "$tmp/t.csv" --period-us 20 >/dev/null
bench/profiling/plot.py tassel "$tmp/t.csv" "$out/profiling-tassel.png"
echo "wrote $out/profiling-justitia.png $out/profiling-dcqcn.png $out/profiling-tassel.png"
