#!/usr/bin/env bash
# Runs the control-protocol fuzzer for a bounded number of runs (FUZZ_RUNS,
# default 20000) from the seed requests in CORPUS (copied: the seeds stay as
# they are), fixed seed. Usage: run_fuzz_ctrl.sh FUZZER CORPUS
set -euo pipefail
fuzzer=$1 seeds=$2
runs=${FUZZ_RUNS:-20000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$seeds"/* "$work"/
# Inputs that crashed it once (tests/fuzz/regressions/ctrl-*), then fuzzing.
"$fuzzer" "$(dirname "$0")"/regressions/ctrl-* 2>&1 | tail -3
"$fuzzer" -seed=1 -runs="$runs" -max_len=65536 -rss_limit_mb=2048 -print_final_stats=1 "$work" 2>&1 | tail -20
echo "fuzz.ctrl: $runs runs without a crash"
