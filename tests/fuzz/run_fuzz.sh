#!/usr/bin/env bash
# Runs the parser fuzzer for a bounded time from a seed corpus of real and
# generated RoCEv2 frames. Usage: run_fuzz.sh FUZZER ISOROCE_PCAP CAPTURES_DIR
set -euo pipefail
fuzzer=$1 pcaptool=$2 captures=$3
seconds=${FUZZ_SECONDS:-45}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$pcaptool" gen --seed 1 --out "$work/gen4.pcap" 2>/dev/null
"$pcaptool" gen --seed 2 --ipv6 --out "$work/gen6.pcap" 2>/dev/null
mkdir -p "$work/corpus"
# Split every pcap into one file per frame (classic pcap, either byte order).
python3 "$(dirname "$0")/split_pcap.py" "$work/corpus" "$work"/gen4.pcap "$work"/gen6.pcap "$captures"/*.pcap
"$fuzzer" -seed=1 -max_total_time="$seconds" -max_len=9100 -rss_limit_mb=2048 \
  -print_final_stats=1 "$work/corpus" 2>&1 | tail -20
echo "fuzz.parse: ran ${seconds}s without a crash"
