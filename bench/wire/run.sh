#!/usr/bin/env bash
# Runs isoroce-bench-wire and prints ICRC throughput against zlib's crc32
# measured in the same run. Usage: bench/wire/run.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$build/bin/isoroce-bench-wire" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_format=json --benchmark_out="$out" --benchmark_out_format=json >/dev/null
python3 - "$out" <<'PY'
import json, sys
runs = {b['name']: b for b in json.load(open(sys.argv[1]))['benchmarks'] if b.get('aggregate_name') == 'median'}
def get(name): return runs[name + '_median']
print(f"{'size':>6} {'ICRC GB/s':>10} {'zlib GB/s':>10} {'ratio':>6} {'rte_net_crc GB/s':>17} {'ratio':>6} "
      f"{'copy+CRC GB/s':>14} {'memcpy,CRC GB/s':>16} {'memcpy GB/s':>12} {'build ns':>9} {'parse ns':>9}")
for size in (64, 1024, 4096):
    icrc = get(f'BM_Icrc/{size}')['bytes_per_second'] / 1e9
    zlib = get(f'BM_ZlibCrc32/{size}')['bytes_per_second'] / 1e9
    rte = get(f'BM_RteNetCrc/{size}')['bytes_per_second'] / 1e9
    fused = get(f'BM_CopyCrcFused/{size}')['bytes_per_second'] / 1e9
    apart = get(f'BM_CopyThenCrc/{size}')['bytes_per_second'] / 1e9
    mc = get(f'BM_Memcpy/{size}')['bytes_per_second'] / 1e9
    build = get(f'BM_Build/{size}')['cpu_time']
    parse = get(f'BM_Parse/{size}')['cpu_time']
    print(f"{size:>6} {icrc:>10.2f} {zlib:>10.2f} {icrc / zlib:>5.1f}x {rte:>17.2f} {icrc / rte:>5.2f}x "
          f"{fused:>14.2f} {apart:>16.2f} {mc:>12.2f} {build:>9.1f} {parse:>9.1f}")
PY
