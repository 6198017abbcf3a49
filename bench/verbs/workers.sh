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
bin="$root/$b/bin"
lib="$root/$b/lib/libisoroce-verbs.so"
size=${SIZE:-64}
n=${N:-500000}
rounds=${ROUNDS:-2}
tool=${TOOL:-ib_write_bw}
tmp=$(mktemp -d /tmp/isoroce-workers.XXXXXX)
daemon=
cleanup() {
  [[ -n $daemon ]] && { kill -TERM "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null || true; }
  rm -rf "$tmp"
}
trap cleanup EXIT
port=${PORT:-19500}
busy() { "$bin/isoroce-ctl" --socket "$1" --json status | python3 -c 'import json, sys
print(" ".join(str(w.get("busy_ns", 0)) for w in json.load(sys.stdin)["status"]["workers"]))'; }

# run LCORES: prints "total_msgs_per_s worker_ns_per_msg..." (one per worker)
run() {
  local lcores=$1 sock="$tmp/d.sock"
  "$bin/isoroced" --loopback --policy tassel --link-gbps 100 --mtu 4096 --lcores "$lcores" --socket "$sock" \
    --file-prefix "isoroce_workers_$$" >"$tmp/daemon.log" 2>&1 &
  daemon=$!
  for _ in $(seq 100); do "$bin/isoroce-ctl" --socket "$sock" status >/dev/null 2>&1 && break; sleep 0.1; done
  local tids=()
  for t in /proc/$daemon/task/*; do [[ $(cat "$t/comm") == rte-worker-* ]] && tids+=("$(basename "$t")"); done
  local servers=() clients=() stats=()
  local p1=$((port + 1)) p2=$((port + 2))
  port=$((port + 2))
  ISOROCE_SOCKET="$sock" LD_PRELOAD="$lib" timeout 120 $tool -d isoroce1 -x 0 -p $p1 -s "$size" -n "$n" >/dev/null 2>&1 &
  servers+=($!)
  ISOROCE_SOCKET="$sock" LD_PRELOAD="$lib" timeout 120 $tool -d isoroce0 -x 0 -p $p2 -s "$size" -n "$n" >/dev/null 2>&1 &
  servers+=($!)
  sleep 0.5
  local busy0
  busy0=$(busy "$sock")
  local i=0
  for t in "${tids[@]}"; do
    perf stat -x, -e task-clock -t "$t" -o "$tmp/w$i.stat" >/dev/null 2>&1 &
    stats+=($!)
    i=$((i + 1))
  done
  ISOROCE_SOCKET="$sock" LD_PRELOAD="$lib" timeout 120 $tool -d isoroce0 -x 0 -p $p1 -s "$size" -n "$n" 127.0.0.1 \
    >"$tmp/c1.out" 2>&1 &
  clients+=($!)
  ISOROCE_SOCKET="$sock" LD_PRELOAD="$lib" timeout 120 $tool -d isoroce1 -x 0 -p $p2 -s "$size" -n "$n" 127.0.0.1 \
    >"$tmp/c2.out" 2>&1 &
  clients+=($!)
  wait "${clients[@]}" || true
  local busy1
  busy1=$(busy "$sock")
  for s in "${stats[@]}"; do kill -INT "$s" 2>/dev/null; done
  wait "${stats[@]}" 2>/dev/null || true
  wait "${servers[@]}" 2>/dev/null || true
  kill -TERM "$daemon"; wait "$daemon" 2>/dev/null || true
  daemon=
  local total
  total=$(awk -v s="$size" '$1 == s {t += $5} END {printf "%.3f", t}' "$tmp/c1.out" "$tmp/c2.out")
  local out="$total" b0 b1
  read -r -a b0 <<<"$busy0"
  read -r -a b1 <<<"$busy1"
  for ((k = 0; k < i; k++)); do
    # Each worker takes part in both pairs' messages: 2n messages. Busy time,
    # then CPU time (task-clock, with idle polling).
    out+=" $(( (b1[k] - b0[k]) / (2 * n) ))/$(awk -F, -v n="$n" '/task-clock/ {printf "%.0f", $1 * 1e6 / (2 * n)}' "$tmp/w$k.stat")"
  done
  rm -f "$tmp"/w*.stat
  echo "$out"
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
