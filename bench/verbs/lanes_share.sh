#!/usr/bin/env bash
# How a port's lanes share its link (docs/isoroced.md, "Lanes";
# dataplane/dpdk/lane_share.h): one `isoroced --loopback --lanes-per-port 2
# --link-gbps GBPS` on two workers (--lcores 0@0,1@1,2@0), unmodified
# ib_write_bw (ARGS) for DURATION seconds from isoroce0 to isoroce1 through
# libisoroce-verbs: one pair alone (its QPs on lane 0), then two pairs at once
# (one on each lane). Each round runs BASE (a baseline isoroced, e.g. one
# built from the commit before the split followed the backlog) and this
# build's isoroced one after the other, so the ratio is of one moment.
#
#   BASE=/path/to/isoroced bench/verbs/lanes_share.sh [BUILD_DIR]
#   GBPS (10), ARGS (-s 1048576 -t 32), DURATION (6 s), WINDOW (2 s), ROUNDS (3).
# The rate is isoroce0's engines' tx_bytes (frames as the link model counts
# them) over WINDOW seconds from 1.5 s after the clients start. Apps are not pinned.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
b=${1:-build}
bin="$root/$b/bin"
lib="$root/$b/lib/libisoroce-verbs.so"
base=${BASE:?BASE=path of the baseline isoroced}
gbps=${GBPS:-10}
args=${ARGS:--s 1048576 -t 32}  # 32 WRITEs of 1 MB in flight: the QP stays backlogged
window=${WINDOW:-2}
secs=${DURATION:-6}
rounds=${ROUNDS:-3}
port=${PORT:-19700}
tmp=$(mktemp -d /tmp/isoroce-lanes-share.XXXXXX)
daemon=
cleanup() {
  [[ -n $daemon ]] && { kill -TERM "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null || true; }
  rm -rf "$tmp"
}
trap cleanup EXIT

# isoroce0's lanes' engine tx_bytes, summed (frames the link model paced).
txb() {
  "$bin/isoroce-ctl" --socket "$1" --json stats | python3 -c 'import json, sys
print(sum(l["engine"]["tx_bytes"] for l in json.load(sys.stdin)["stats"]["isoroce0"]["lanes"]))'
}

# pairs DAEMON N: N ib_write_bw pairs at once; prints the Gb/s isoroce0 sent
# over WINDOW seconds in the middle of the run, and each client's MB/s.
pairs() {
  local exe=$1 n=$2 sock="$tmp/d.sock" servers=() clients=() ports=()
  "$exe" --loopback --lanes-per-port 2 --lcores 0@0,1@1,2@0 --link-gbps "$gbps" --mtu 4096 --socket "$sock" \
    --file-prefix "isoroce_lanes2_$$" >"$tmp/daemon.log" 2>&1 &
  daemon=$!
  for _ in $(seq 100); do "$bin/isoroce-ctl" --socket "$sock" status >/dev/null 2>&1 && break; sleep 0.1; done
  for ((p = 0; p < n; p++)); do
    port=$((port + 1))
    ports+=($port)
    ISOROCE_SOCKET="$sock" LD_PRELOAD="$lib" timeout 60 ib_write_bw -d isoroce1 -x 0 -p $port $args -D "$secs" \
      >/dev/null 2>&1 &
    servers+=($!)
    sleep 0.2  # one server's QP before the next: the placement alternates lanes
  done
  sleep 0.3
  for ((p = 0; p < n; p++)); do
    ISOROCE_SOCKET="$sock" LD_PRELOAD="$lib" timeout 60 ib_write_bw -d isoroce0 -x 0 -p "${ports[p]}" $args \
      -D "$secs" 127.0.0.1 >"$tmp/c$p.out" 2>&1 &
    clients+=($!)
  done
  sleep 1.5
  local t0 t1 b0 b1
  b0=$(txb "$sock"); t0=$(date +%s.%N)
  sleep "$window"
  b1=$(txb "$sock"); t1=$(date +%s.%N)
  wait "${clients[@]}" || true
  wait "${servers[@]}" 2>/dev/null || true
  kill -TERM "$daemon" 2>/dev/null
  wait "$daemon" 2>/dev/null || true
  daemon=
  local out
  out=$(python3 -c "print(f'{($b1 - $b0) * 8 / ($t1 - $t0) / 1e9:.3f}')")
  for ((p = 0; p < n; p++)); do
    out+=" $(awk '$1 ~ /^[0-9]+$/ && NF >= 5 {printf "%.0f", $4}' "$tmp/c$p.out")"
  done
  rm -f "$tmp"/c*.out
  echo "$out"
}

echo "load before: $(uptime)"
echo "ib_write_bw $args -D $secs, isoroce0 -> isoroce1, --lanes-per-port 2 --link-gbps $gbps --mtu 4096"
echo "(Gb/s isoroce0 sent over ${window} s, then each client's BW average in MB/s)"
echo "baseline: $base"
for r in $(seq "$rounds"); do
  for which in base new; do
    exe=$base
    [[ $which == new ]] && exe="$bin/isoroced"
    one=$(pairs "$exe" 1)
    two=$(pairs "$exe" 2)
    printf "round %d  %-4s  one pair: %-16s two pairs: %s\n" "$r" "$which" "$one" "$two"
  done
done
echo "load after:  $(uptime)"
