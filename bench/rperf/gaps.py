#!/usr/bin/env python3
"""What a latency tail is made of, from an `isoroce-ctl trace --raw` file
(docs/profiling.md, "The tail beside 1 MB"): the longest waits of one QP's posts
in the application's ring (the post record's b) and, for each, how much the
daemon's worker did meanwhile (records it stamped with its pass's "now": post,
frame_rx, grant, completion, on every device). No record in the window means no
pass ran: the worker was not on a CPU.
  bench/rperf/gaps.py TRACE PORT:QPN [N]"""
import struct
import sys

POST, GRANT, FRAME_RX, COMPLETION = 0, 5, 7, 12
path, ref = sys.argv[1], sys.argv[2]
top = int(sys.argv[3]) if len(sys.argv) > 3 else 8
port, qpn = (int(x) for x in ref.split(":"))
data = open(path, "rb").read()
rs = [struct.unpack_from("<QQQIIIHBB", data, i * 40) for i in range(len(data) // 40)]
act = sorted(r[0] for r in rs if r[7] in (POST, GRANT, FRAME_RX, COMPLETION))
if len(act) < 2:
    sys.exit("gaps.py: too few records")
span = act[-1] - act[0]
gaps = sorted((b - a for a, b in zip(act, act[1:])), reverse=True)
print(f"{len(rs)} records over {span / 1e9:.1f} ms; longest gaps between worker passes that recorded "
      f"something (ms): {', '.join(f'{g / 1e9:.2f}' for g in gaps[:8])}")
print(f"time in gaps over 1 ms: {100 * sum(g for g in gaps if g > 1e9) / span:.1f}% of the trace")
posts = sorted((r for r in rs if r[7] == POST and r[6] == port and r[3] == qpn), key=lambda r: -r[2])
for r in posts[:top]:
    t, ring = r[0], r[2]
    inside = [x for x in act if t - ring < x < t]
    edges = [t - ring] + inside + [t]
    longest = max(b - a for a, b in zip(edges, edges[1:]))
    print(f"post at {t / 1e9:10.3f} ms waited {ring / 1e9:8.3f} ms in the ring; meanwhile {len(inside)} "
          f"records, longest gap {longest / 1e9:.3f} ms")
