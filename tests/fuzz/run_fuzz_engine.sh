#!/usr/bin/env bash
# Runs the engine fuzzer for a bounded number of runs (FUZZ_RUNS, default 3000) from an
# empty corpus with a fixed seed. Usage: run_fuzz_engine.sh FUZZER
set -euo pipefail
fuzzer=$1
runs=${FUZZ_RUNS:-3000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$fuzzer" -seed=1 -runs="$runs" -max_len=4096 -rss_limit_mb=2048 \
  -print_final_stats=1 "$work" 2>&1 | tail -20
echo "fuzz.engine: $runs runs without a crash"
