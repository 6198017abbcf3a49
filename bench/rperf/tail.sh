#!/usr/bin/env bash
# Where the probe's tail beside a 1 MB flow goes (docs/profiling.md, "The tail
# beside 1 MB"): isoroce-rperf-probe (64-byte SENDs, --only wire) beside 4 x 1 MB
# WRITEs on `isoroced --loopback --link-gbps 10 --policy P`, traced live with
# isoroce-ctl trace --raw (post, grant, frame_tx, frame_rx, ack, completion; the
# posts carry their wait in the application's ring), then isoroce-rperf's
# breakdown of the probe's QP and bench/rperf/gaps.py on its longest ring waits.
#   bench/rperf/tail.sh [BUILD_DIR] [POLICY]      N=2000 SENDs, SECONDS=6 of trace
set -euo pipefail
build=${1:-build}
policy=${2:-tassel}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/$build/bin"
tmp=$(mktemp -d)
sock="$tmp/d.sock"
"$bin/isoroced" --loopback --policy "$policy" --link-gbps 10 --socket "$sock" --file-prefix "rperf_tail_$$" \
  -- --no-huge -m 256 >"$tmp/d.log" 2>&1 &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do "$bin/isoroce-ctl" --socket "$sock" status >/dev/null 2>&1 && break; sleep 0.1; done
"$bin/isoroce-ctl" --socket "$sock" trace --seconds "${SECONDS_TRACED:-6}" --raw \
  --events post,grant,frame_tx,frame_rx,ack,completion --out "$tmp/t.raw" >"$tmp/ctl.log" 2>&1 &
tracer=$!
sleep 0.5
ISOROCE_SOCKET="$sock" LD_PRELOAD="$root/$build/lib/libisoroce-verbs.so" taskset -c 0 \
  "$bin/isoroce-rperf-probe" -n "${N:-2000}" --warmup 100 --background-bytes 1048576 --only wire --json >"$tmp/probe.json"
wait $tracer
cat "$tmp/ctl.log"
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('probe T_W us:', j['t_w'], 'background:', j['background'])" "$tmp/probe.json"
# The probe's wire QP: the one QP of isoroce0 that posts 64-byte SENDs.
qpn=$(python3 - "$tmp/t.raw" <<'PY'
import collections, struct, sys
d = open(sys.argv[1], "rb").read()
c = collections.Counter()
for i in range(len(d) // 40):
    t, a, b, qp, psn, by, port, ev, cls = struct.unpack_from("<QQQIIIHBB", d, i * 40)
    if ev == 0 and port == 0 and by == 64: c[qp] += 1
print(c.most_common(1)[0][0])
PY
)
"$bin/isoroce-rperf" "$tmp/t.raw" --wire "0:$qpn"
python3 "$root/bench/rperf/gaps.py" "$tmp/t.raw" "0:$qpn" 5
