#!/usr/bin/env bash
# The latency flow's stages (isoroce-rperf) alone and beside a 1 MB bandwidth
# flow, under fifo, tassel and justitia, in the simulator: one table per case
# (docs/profiling.md, "Latency breakdown").
# Usage: bench/rperf/run.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/$build/bin"
scenario="$root/bench/rperf/latency_vs_bandwidth.toml"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for policy in fifo tassel justitia; do
  for case in alone with_bw; do
    only=(); [[ $case == alone ]] && only=(--only lat)
    "$bin/isoroce-sim" "$scenario" --policy "$policy" "${only[@]}" --trace "$tmp/t.json" \
      --trace-events post,grant,frame_tx,frame_rx,ack,completion >/dev/null
    # The latency flow's QPs: the requester on host a (pid 1), the responder on b (pid 2).
    read -r wire peer < <(/usr/bin/python3 - "$tmp/t.json" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
q = {e["pid"]: e["tid"] for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name"
     and e["args"]["name"].endswith("(lat)")}
print(f"0:{q[1]} 1:{q[2]}")
PY
)
    echo "== $policy, latency flow $case"
    "$bin/isoroce-rperf" "$tmp/t.json" --wire "$wire" --peer "$peer"
  done
done
