#!/usr/bin/env bash
# The latency flow's stages on a live isoroced (--loopback, 10 Gb/s ports),
# alone and beside a 1 MB bandwidth flow, under fifo, tassel and justitia:
# isoroce-ctl run drives the flows, isoroce-ctl trace --raw records them, and
# isoroce-rperf breaks the latency flow down (docs/profiling.md).
# Usage: bench/rperf/daemon.sh [BUILD_DIR]   (root: the daemon's default paths)
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/$build/bin"
tmp=$(mktemp -d)
daemon=
cleanup() { [[ -n $daemon ]] && { kill -TERM "$daemon"; wait "$daemon" || true; }; rm -rf "$tmp"; }
trap cleanup EXIT
for policy in fifo tassel justitia; do
  for case in alone with_bw; do
    sock="$tmp/d.sock"
    "$bin/isoroced" --loopback --policy "$policy" --link-gbps 10 --socket "$sock" --file-prefix "rperf_$$" \
      >"$tmp/d.log" 2>&1 &
    daemon=$!
    for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.1; done
    sed "s#SOCKET#$sock#" "$root/bench/rperf/daemon_scenario.toml" >"$tmp/s.toml"
    [[ $case == alone ]] && /usr/bin/python3 - "$tmp/s.toml" <<'PY'
import sys
p = sys.argv[1]; t = open(p).read()
open(p, "w").write(t[:t.index('[[flow]]\nname = "bw"')])
PY
    "$bin/isoroce-ctl" --socket "$sock" trace --seconds 4 --raw --events post,grant,frame_tx,frame_rx,ack,completion \
      --out "$tmp/t.raw" >"$tmp/trace.out" &
    tracer=$!
    sleep 0.5
    "$bin/isoroce-ctl" --socket "$sock" run "$tmp/s.toml" >"$tmp/run.out" || true
    wait $tracer
    read -r wire peer < <(/usr/bin/python3 - "$tmp/t.raw" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
wire = peer = None
for i in range(0, len(data), 40):
    t, a, b, qp, psn, nbytes, port, ev, cls = struct.unpack_from("<QQQIIIHBB", data, i)
    if cls == 0 and port == 0 and ev == 0 and wire is None: wire = f"0:{qp}"
    if cls == 0 and port == 1 and ev == 7 and peer is None: peer = f"1:{qp}"
print(wire, peer)
PY
)
    echo "== $policy, latency flow $case ($(head -1 "$tmp/trace.out"))"
    "$bin/isoroce-rperf" "$tmp/t.raw" --wire "$wire" --peer "$peer"
    kill -TERM "$daemon"; wait "$daemon" || true; daemon=
  done
done
