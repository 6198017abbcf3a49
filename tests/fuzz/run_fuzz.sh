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
python3 - "$work/corpus" "$work"/gen4.pcap "$work"/gen6.pcap "$captures"/*.pcap <<'PY'
import struct, sys, os
out = sys.argv[1]
n = 0
for path in sys.argv[2:]:
    data = open(path, 'rb').read()
    magic = data[:4]
    endian = '<' if magic in (b'\xd4\xc3\xb2\xa1', b'\x4d\x3c\xb2\xa1') else '>'
    off = 24
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack(endian + 'IIII', data[off:off + 16])
        frame = data[off + 16: off + 16 + incl]
        off += 16 + incl
        with open(os.path.join(out, f'{n:05d}'), 'wb') as f:
            f.write(frame)
        n += 1
print(f'seed corpus: {n} frames')
PY
"$fuzzer" -seed=1 -max_total_time="$seconds" -max_len=9100 -rss_limit_mb=2048 \
  -print_final_stats=1 "$work/corpus" 2>&1 | tail -20
echo "fuzz.parse: ran ${seconds}s without a crash"
