#!/usr/bin/env python3
# Splits classic pcap files (either byte order) into one file per frame.
# Usage: split_pcap.py OUT_DIR PCAP...
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
