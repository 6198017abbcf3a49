#!/usr/bin/env bash
# The worker's CPU per frame on the kernel I/O path (docs/performance.md, "The
# kernel's IP stack off the daemon's frames"): one daemon, two ports on the two
# ends of a veth pair in one namespace (the worker on CPU 1, ib_write_bw on CPU
# 0), 64 KB WRITEs streaming; over WINDOW seconds the worker thread's CPU time
# (perf stat -e task-clock on its thread) and the frames both ports sent
# (isoroce-ctl stats), then `perf record -g -C 1` for the share of the worker's
# samples in the kernel's IP stack (ip_rcv and its callees) and in AF_PACKET's
# receive (tpacket_rcv). With BEFORE=DIR (bin/isoroced, bin/isoroce-ctl,
# lib/libisoroce-verbs.so of another build) the rounds alternate between the
# two builds.
#
# Usage: bench/veth/profile.sh [BUILD_DIR]   (root; perftest and perf installed)
# KIND (af_packet), MTU (4096), PORT_DEVARGS (more devargs for both ports, e.g.
# ",framecnt=1024"; the daemon sizes framecnt from the MTU), ROUNDS (3),
# WINDOW (3), DAEMON_ARGS (extra isoroced flags of the build under test, e.g.
# "--port-mac interface"), NAME (ohprof) names the namespace and file prefixes.
set -euo pipefail
build=${1:-build}
. "$(dirname "$0")/common.sh"
veth_prelude "$build" ohprof
command -v perf >/dev/null || { echo "missing perf" >&2; exit 2; }
kind=${KIND:-af_packet} mtu=${MTU:-4096} pdv=${PORT_DEVARGS:-} window=${WINDOW:-3}
ns=ns-$name-one
link_mtu=$((mtu + 92 > 1500 ? mtu + 92 : 1500))
read -r -a extra <<<"${DAEMON_ARGS:-}"
tmp=$(mktemp -d /tmp/isoroce-bench-prof.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  ip netns del $ns 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
ip netns del $ns 2>/dev/null || true
ip netns add $ns
ip -n $ns link set lo up
ip -n $ns link add pb1 type veth peer name pb2
for l in pb1 pb2; do
  ip netns exec $ns sysctl -qw "net.ipv6.conf.$l.disable_ipv6=1"
  ip -n $ns link set $l mtu "$link_mtu" up
done

frames() {  # socket: frames both ports sent
  "$ctl" --socket "$1" --json stats 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
s = s.get("stats", s)
print(sum(d["port"]["tx_packets"] for d in s.values() if isinstance(d, dict) and "port" in d))'
}

round() {  # label daemon ctl preload extra-args...
  local label=$1 daemon=$2 sock="$tmp/$1.sock"
  ctl=$3
  local lib=$4
  shift 4
  ip netns exec $ns "$daemon" --port "net_${kind}0,iface=pb1$pdv" --ip 10.79.0.1/24 --port "net_${kind}1,iface=pb2$pdv" \
    --ip 10.79.0.2/24 --mtu "$mtu" --policy fifo --link-gbps 100 --lcores 0,1 --socket "$sock" \
    --file-prefix "isoroce_${name}_$$" "$@" -- --no-huge -m 512 >"$tmp/$label.log" 2>&1 &
  local d=$!
  pids+=($d)
  for _ in $(seq 100); do "$ctl" --socket "$sock" status >/dev/null 2>&1 && break; sleep 0.1; done
  local port=$((19900 + RANDOM % 90))
  ip netns exec $ns env ISOROCE_SOCKET="$sock" LD_PRELOAD="$lib" taskset -c 0 timeout 60 \
    ib_write_bw -d isoroce1 -x 0 -p $port -s 65536 -D 30 -m "$mtu" >/dev/null 2>&1 &
  local srv=$!
  sleep 0.5
  ip netns exec $ns env ISOROCE_SOCKET="$sock" LD_PRELOAD="$lib" taskset -c 0 timeout 60 \
    ib_write_bw -d isoroce0 -x 0 -p $port -s 65536 -D 30 -m "$mtu" 127.0.0.1 >"$tmp/$label.bw" 2>&1 &
  local cli=$!
  sleep 3
  # The worker: the daemon's thread running on CPU 1 (EAL names it rte-worker-1 or lcore-worker-1).
  local tid=""
  for t in /proc/$d/task/*; do
    [[ $(cat "$t/comm") == *worker-1* ]] && tid=${t##*/}
  done
  [[ -n $tid ]] || { echo "no worker thread in $label" >&2; cat "$tmp/$label.log" >&2; return 1; }
  local f0 f1 ms
  f0=$(frames "$sock")
  ms=$(perf stat -e task-clock -t "$tid" -x, -- sleep "$window" 2>&1 >/dev/null | awk -F, '/task-clock/ {print $1}')
  f1=$(frames "$sock")
  perf record -q -e cpu-clock -g -C 1 -o "$tmp/$label.perf" -- sleep "$window" >/dev/null 2>&1
  local ipstack route tpacket
  # Shares of the worker's samples, callees included: the kernel's IP stack
  # (ip_rcv), its route lookup and error path (ip_route_input_noref, ip_error:
  # what a frame for another host skips), AF_PACKET's receive (tpacket_rcv).
  read -r ipstack route tpacket < <(perf report -i "$tmp/$label.perf" --tid "$tid" --percentage relative --stdio \
    --children --sort sym 2>/dev/null | awk '
      $NF == "ip_rcv" && !ip {ip = $1} $NF == "tpacket_rcv" && !tp {tp = $1}
      ($NF == "ip_route_input_noref" || $NF == "ip_error") && !seen[$NF]++ {rt += $1}
      END {printf "%.2f %.2f %.2f\n", ip, rt, tp}')
  [[ -n ${KEEP:-} ]] && cp "$tmp/$label.perf" "$KEEP/$label.$tid.perf"
  kill -TERM $cli $srv 2>/dev/null || true
  wait $cli $srv 2>/dev/null || true
  kill -TERM $d
  wait $d 2>/dev/null || true
  pids=()
  awk -v l="$label" -v ms="$ms" -v f="$((f1 - f0))" -v w="$window" -v ip="$ipstack" -v rt="$route" -v tp="$tpacket" 'BEGIN {
    us = f ? ms * 1000 / f : 0
    printf "| %-6s | %6.0f | %7d | %5.0f %% | %5.2f | %5.2f %% (%3.0f ns) | %5.2f %% (%3.0f ns) | %5.2f %% (%3.0f ns) |\n",
      l, ms, f, ms / (w * 10), us, ip, ip * us * 10, rt, rt * us * 10, tp, tp * us * 10 }'
}

echo "load before: $(uptime)"
echo "| build | worker ms | frames sent | worker's share of CPU 1 | worker us/frame | ip_rcv (per frame) | route lookup + ip_error | tpacket_rcv |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for r in $(seq "${ROUNDS:-3}"); do
  [[ -n ${BEFORE:-} ]] && round before "$BEFORE/bin/isoroced" "$BEFORE/bin/isoroce-ctl" "$BEFORE/lib/libisoroce-verbs.so"
  round after "$bin/isoroced" "$bin/isoroce-ctl" "$preload" "${extra[@]}"
done
echo "load after: $(uptime)"
