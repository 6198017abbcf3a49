#!/usr/bin/env bash
# One worker lcore against two: the two ports of `isoroced --loopback` on one
# worker (--lcores 0,1), then one worker each (--lcores 0@0,1@1,2@0: lcore 1 on
# CPU 1 polls isoroce0, lcore 2 on CPU 0 polls isoroce1), with two perftest
# pairs running at once in opposite directions (isoroce0 -> isoroce1 and
# isoroce1 -> isoroce0), so each worker sends for one pair and receives for the
# other. Per configuration: the pairs' summed rate, and for each worker its busy
# time per message it took part in (isoroce-ctl status busy_ns: passes that
# moved something, preempted ones left out) and its CPU time per message
# (perf stat -e task-clock on its thread, idle polling included).
#
#   bench/verbs/workers.sh [BUILD_DIR]      SIZE (64) bytes, N (500000) messages
#   per pair, ROUNDS (2); TOOL (ib_write_bw). Apps are not pinned.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
b=${1:-build}
size=${SIZE:-64}
n=${N:-500000}
rounds=${ROUNDS:-2}
tool=${TOOL:-ib_write_bw}
tmp=$(mktemp -d /tmp/isoroce-workers.XXXXXX)
. "$root/bench/verbs/worker_watch.sh"
port=${PORT:-19500}

# run LCORES: prints "total_msgs_per_s worker_ns_per_msg..." (one per worker)
run() {
  local lcores=$1 sock="$tmp/d.sock"
  start_daemon "$sock" --lcores "$lcores" --file-prefix "isoroce_workers_$$"
  local servers=() clients=()
  local p1=$((port + 1)) p2=$((port + 2))
  port=$((port + 2))
  ISOROCE_SOCKET="$sock" LD_PRELOAD="$lib" timeout 120 $tool -d isoroce1 -x 0 -p $p1 -s "$size" -n "$n" >/dev/null 2>&1 &
  servers+=($!)
  ISOROCE_SOCKET="$sock" LD_PRELOAD="$lib" timeout 120 $tool -d isoroce0 -x 0 -p $p2 -s "$size" -n "$n" >/dev/null 2>&1 &
  servers+=($!)
  sleep 0.5
  watch_workers "$sock"
  ISOROCE_SOCKET="$sock" LD_PRELOAD="$lib" timeout 120 $tool -d isoroce0 -x 0 -p $p1 -s "$size" -n "$n" 127.0.0.1 \
    >"$tmp/c1.out" 2>&1 &
  clients+=($!)
  ISOROCE_SOCKET="$sock" LD_PRELOAD="$lib" timeout 120 $tool -d isoroce1 -x 0 -p $p2 -s "$size" -n "$n" 127.0.0.1 \
    >"$tmp/c2.out" 2>&1 &
  clients+=($!)
  wait "${clients[@]}" || true
  # Each worker takes part in both pairs' messages: 2n messages.
  stop_daemon "$sock" $((2 * n))
  wait "${servers[@]}" 2>/dev/null || true
  local total
  total=$(awk -v s="$size" '$1 == s {t += $5} END {printf "%.3f", t}' "$tmp/c1.out" "$tmp/c2.out")
  echo "$total $per"
}

echo "load before: $(uptime)"
echo "$tool -s $size, two pairs in opposite directions, $n messages each"
for r in $(seq "$rounds"); do
  for cfg in "0,1" "0@0,1@1,2@0"; do
    read -r total w1 w2 <<<"$(run "$cfg")"
    if [[ $cfg == 0,1 ]]; then label="1 worker  (--lcores 0,1)"; else label="2 workers (--lcores $cfg)"; fi
    printf "round %d  %-34s %8s M msg/s total   per message, each worker's busy/CPU ns: %s%s\n" "$r" "$label" \
      "$total" "$w1" "${w2:+, $w2}"
  done
done
echo "load after:  $(uptime)"
