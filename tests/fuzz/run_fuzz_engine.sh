#!/usr/bin/env bash
# Runs the engine fuzzer for a bounded time (FUZZ_SECONDS, default 30) from an
# empty corpus with a fixed seed. Usage: run_fuzz_engine.sh FUZZER
set -euo pipefail
fuzzer=$1
seconds=${FUZZ_SECONDS:-30}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$fuzzer" -seed=1 -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=2048 \
  -print_final_stats=1 "$work" 2>&1 | tail -20
echo "fuzz.engine: ran ${seconds}s without a crash"
