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
size=${SIZE:-64}
n=${N:-300000}
pairs=${PAIRS:-2}
rounds=${ROUNDS:-2}
tool=${TOOL:-ib_write_bw}
lcores=${LCORES:-0@0,1@1,2@0}
tmp=$(mktemp -d /tmp/isoroce-lanes.XXXXXX)
. "$root/bench/verbs/worker_watch.sh"
port=${PORT:-19600}

# run LANES: prints "total_msgs_per_s worker_ns_per_msg..." (one per worker)
run() {
  local lanes=$1 sock="$tmp/d.sock"
  start_daemon "$sock" --lcores "$lcores" --lanes-per-port "$lanes" --file-prefix "isoroce_lanes_$$"
  local servers=() clients=() ports=()
  for ((p = 0; p < pairs; p++)); do
    port=$((port + 1))
    ports+=($port)
    ISOROCE_SOCKET="$sock" LD_PRELOAD="$lib" timeout 120 $tool -d isoroce1 -x 0 -p $port -s "$size" -n "$n" >/dev/null 2>&1 &
    servers+=($!)
    sleep 0.2  # one server's QP before the next: the placement alternates lanes
  done
  sleep 0.3
  watch_workers "$sock"
  for ((p = 0; p < pairs; p++)); do
    ISOROCE_SOCKET="$sock" LD_PRELOAD="$lib" timeout 120 $tool -d isoroce0 -x 0 -p "${ports[p]}" -s "$size" -n "$n" \
      127.0.0.1 >"$tmp/c$p.out" 2>&1 &
    clients+=($!)
  done
  wait "${clients[@]}" || true
  stop_daemon "$sock" $((pairs * n))
  wait "${servers[@]}" 2>/dev/null || true
  local total
  total=$(awk -v s="$size" '$1 == s {t += $5; k++} END {printf "%.3f/%d", t, k}' "$tmp"/c*.out)
  rm -f "$tmp"/c*.out
  echo "$total $per"
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
