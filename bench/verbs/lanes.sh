#!/usr/bin/env bash
# One lane against two on one port (docs/isoroced.md, "Lanes"): PAIRS (2)
# perftest pairs at once, all from isoroce0 to isoroce1 of one
# `isoroced --loopback` with two worker lcores (--lcores 0@0,1@1,2@0: lcore 1
# on CPU 1, lcore 2 on CPU 0). With --lanes-per-port 1 each port is one engine
# on one worker (isoroce0's worker sends for every pair, isoroce1's receives);
# with --lanes-per-port 2 each port's QPs are spread over two engines on the
# two workers (the pairs' QPs alternate between the lanes). The configurations
# alternate round by round. Per configuration: the pairs' summed rate, and
# each worker's busy time per message (isoroce-ctl status busy_ns) and CPU time
# per message (perf stat -e task-clock on its thread, idle polling included).
#
#   bench/verbs/lanes.sh [BUILD_DIR]      SIZE (64) bytes, N (300000) messages
#   per pair, PAIRS (2), ROUNDS (2); TOOL (ib_write_bw). Apps are not pinned.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
b=${1:-build}
bin="$root/$b/bin"
lib="$root/$b/lib/libisoroce-verbs.so"
size=${SIZE:-64}
n=${N:-300000}
pairs=${PAIRS:-2}
rounds=${ROUNDS:-2}
tool=${TOOL:-ib_write_bw}
lcores=${LCORES:-0@0,1@1,2@0}
tmp=$(mktemp -d /tmp/isoroce-lanes.XXXXXX)
daemon=
cleanup() {
  [[ -n $daemon ]] && { kill -TERM "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null || true; }
  rm -rf "$tmp"
}
trap cleanup EXIT
port=${PORT:-19600}
busy() { "$bin/isoroce-ctl" --socket "$1" --json status | python3 -c 'import json, sys
print(" ".join(str(w.get("busy_ns", 0)) for w in json.load(sys.stdin)["status"]["workers"]))'; }

# run LANES: prints "total_msgs_per_s worker_ns_per_msg..." (one per worker)
run() {
  local lanes=$1 sock="$tmp/d.sock"
  "$bin/isoroced" --loopback --policy tassel --link-gbps 100 --mtu 4096 --lcores "$lcores" \
    --lanes-per-port "$lanes" --socket "$sock" --file-prefix "isoroce_lanes_$$" >"$tmp/daemon.log" 2>&1 &
  daemon=$!
  for _ in $(seq 100); do "$bin/isoroce-ctl" --socket "$sock" status >/dev/null 2>&1 && break; sleep 0.1; done
  local tids=() servers=() clients=() stats=() ports=()
  for t in /proc/$daemon/task/*; do [[ $(cat "$t/comm") == rte-worker-* ]] && tids+=("$(basename "$t")"); done
  for ((p = 0; p < pairs; p++)); do
    port=$((port + 1))
    ports+=($port)
    ISOROCE_SOCKET="$sock" LD_PRELOAD="$lib" timeout 120 $tool -d isoroce1 -x 0 -p $port -s "$size" -n "$n" >/dev/null 2>&1 &
    servers+=($!)
    sleep 0.2  # one server's QP before the next: the placement alternates lanes
  done
  sleep 0.3
  local busy0
  busy0=$(busy "$sock")
  local i=0
  for t in "${tids[@]}"; do
    perf stat -x, -e task-clock -t "$t" -o "$tmp/w$i.stat" >/dev/null 2>&1 &
    stats+=($!)
    i=$((i + 1))
  done
  for ((p = 0; p < pairs; p++)); do
    ISOROCE_SOCKET="$sock" LD_PRELOAD="$lib" timeout 120 $tool -d isoroce0 -x 0 -p "${ports[p]}" -s "$size" -n "$n" \
      127.0.0.1 >"$tmp/c$p.out" 2>&1 &
    clients+=($!)
  done
  wait "${clients[@]}" || true
  local busy1
  busy1=$(busy "$sock")
  for s in "${stats[@]}"; do kill -INT "$s" 2>/dev/null; done
  wait "${stats[@]}" 2>/dev/null || true
  wait "${servers[@]}" 2>/dev/null || true
  kill -TERM "$daemon"; wait "$daemon" 2>/dev/null || true
  daemon=
  local total
  total=$(awk -v s="$size" '$1 == s {t += $5; k++} END {printf "%.3f/%d", t, k}' "$tmp"/c*.out)
  local out="$total" b0 b1
  read -r -a b0 <<<"$busy0"
  read -r -a b1 <<<"$busy1"
  for ((k = 0; k < i; k++)); do
    out+=" $(( (b1[k] - b0[k]) / (pairs * n) ))/$(awk -F, -v n="$n" -v p="$pairs" '/task-clock/ {printf "%.0f", $1 * 1e6 / (p * n)}' "$tmp/w$k.stat")"
  done
  rm -f "$tmp"/w*.stat "$tmp"/c*.out
  echo "$out"
}

echo "load before: $(uptime)"
echo "$tool -s $size, $pairs pairs isoroce0 -> isoroce1 at once, $n messages each, --lcores $lcores"
for r in $(seq "$rounds"); do
  for lanes in 1 2; do
    read -r total w1 w2 <<<"$(run "$lanes")"
    printf "round %d  --lanes-per-port %d   %12s M msg/s total (pairs that reported)   per message, each worker's busy/CPU ns: %s%s\n" \
      "$r" "$lanes" "$total" "$w1" "${w2:+, $w2}"
  done
done
echo "load after:  $(uptime)"
