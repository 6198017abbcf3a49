#!/bin/sh
# Runs the calibration sweeps of the rnic presets, the Justitia sweep and the
# latency-signal and classification sweeps with
# isoroce-lab, then rewrites their tables in docs/isolation.md (and draws the plots
# if matplotlib is there). Usage: bench/justitia/sweep.sh [BUILD_DIR] [THREADS]
set -e
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
threads=${2:-0}
out=${OUT:-$(mktemp -d)}
for s in calibrate-roce calibrate-ib calibrate-iwarp justitia signal classify scale; do
  "$build/bin/isoroce-lab" "$here/$s.sweep.toml" --threads "$threads" --csv "$out/$s.csv" --json "$out/$s.json"
done
python3 "$here/sweep_table.py" --dir "$out" --doc "$root/docs/isolation.md"
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  for s in calibrate-roce calibrate-ib calibrate-iwarp justitia; do
    /usr/bin/python3 "$root/tools/lab/plot.py" "$out/$s.json" --out "$out/plots-$s"
  done
fi
echo "sweep.sh: results in $out"
