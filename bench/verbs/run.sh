#!/usr/bin/env bash
# Unmodified perftest through libisoroce-verbs.so across the two ports of one
# `isoroced --loopback`, beside its ceilings measured in the same run: kernel
# TCP on loopback (qperf tcp_lat unpinned, on one CPU and across the two; tcp_bw)
# and single-core memcpy
# (isoroce-bench-memcpy). Prints one table with the ratios.
#
# Usage: bench/verbs/run.sh [BUILD_DIR]     MTU=1024 for the daemon's default;
# LAT_ITERS (2000) and BW_ITERS (5000) set the perftest iterations, PREFIX the
# daemon's DPDK --file-prefix, PORT the first perftest port (19100)
# (the run uses path MTU 4096, as on a NIC with jumbo frames: a quarter of
# the per-packet work per byte)
#
# The daemon's worker polls on lcore 1 (the default `--lcores 0,1`); the
# applications run pinned to CPU 0 ("apps off the worker's core", DPDK's usual
# layout) and, for the latency tests, also unpinned, to show what sharing the
# polling core costs on a small machine.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/$build/bin"
preload="$root/$build/lib/libisoroce-verbs.so"
for f in "$bin/isoroced" "$bin/isoroce-ctl" "$bin/isoroce-bench-memcpy" "$preload"; do
  [[ -e $f ]] || { echo "missing $f: build isoroced isoroce-ctl isoroce-verbs isoroce-bench-memcpy first" >&2; exit 2; }
done
for t in ib_write_lat ib_send_lat ib_write_bw ib_read_bw qperf; do
  command -v $t >/dev/null || { echo "missing $t: scripts/install-deps.sh installs perftest and qperf" >&2; exit 2; }
done
sock=$(mktemp -u /tmp/isoroce-bench-verbs.XXXXXX.sock)
"$bin/isoroced" --loopback --policy tassel --link-gbps 100 --mtu "${MTU:-4096}" --socket "$sock" --file-prefix "${PREFIX:-isoroce_bv_$$}" \
  >/tmp/isoroce-bench-verbs.log 2>&1 &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null; wait $daemon 2>/dev/null || true' EXIT
for _ in $(seq 100); do "$bin/isoroce-ctl" --socket "$sock" status >/dev/null 2>&1 && break; sleep 0.1; done

port=${PORT:-19100}
# One perftest pair: server on isoroce1, client on isoroce0; prints the
# client's result line. pin: a taskset CPU list, or "" for none.
pair() {  # tool size iterations pin
  local tool=$1 size=$2 iters=$3 pin=$4 run=()
  [[ -n $pin ]] && run=(taskset -c "$pin")
  port=$((port + 1))
  ISOROCE_SOCKET="$sock" LD_PRELOAD="$preload" timeout 120 "${run[@]}" "$tool" -d isoroce1 -x 0 -p $port \
    -s "$size" -n "$iters" >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  ISOROCE_SOCKET="$sock" LD_PRELOAD="$preload" timeout 120 "${run[@]}" "$tool" -d isoroce0 -x 0 -p $port \
    -s "$size" -n "$iters" 127.0.0.1 2>/dev/null | awk -v s="$size" '$1 == s {print; exit}'
  wait "$server" || true
}
# Latency line: bytes iters t_min t_max t_typical t_avg t_stdev p99 p99.9
lat() { pair "$@" | awk '{printf "%s %s", $5, $8}'; }   # typical p99
# Bandwidth line: bytes iters peak avg(MB/s) Mpps
bw() { pair "$@" | awk '{printf "%s", $4}'; }

row() { printf "%-34s %12s %12s\n" "$@"; }
echo "isoroced --loopback --mtu ${MTU:-4096}, one worker lcore (CPU 1)"
row "test" "median/avg" "p99"
declare -A r
for t in ib_write_lat ib_send_lat; do
  for pin in 0 ""; do
    read -r typ p99 <<<"$(lat $t 2 "${LAT_ITERS:-2000}" "$pin")" || true
    if [[ -n $pin ]]; then label="$t 2 B (apps on CPU $pin)"; else label="$t 2 B (unpinned)"; fi
    row "$label" "${typ:-fail} us" "${p99:-fail} us"
    r[$t/$pin]=${typ:-0}
  done
done
for t in ib_write_bw ib_read_bw; do
  for s in 64 65536; do
    v=$(bw $t $s "${BW_ITERS:-5000}" 0)
    row "$t $s B (apps on CPU 0)" "${v:-fail} MB/s" ""
    r[$t/$s]=${v:-0}
  done
done

echo
echo "ceilings, same machine, same run:"
# qperf's server and client unpinned, and both on CPU 0 as the applications of the
# "apps on CPU 0" rows: on this VM TCP loopback latency depends mostly on whether
# the two share a CPU (a wakeup on the other CPU costs an interprocessor interrupt).
qperf_run() {  # [taskset -c N]: prints qperf's output for tcp_lat 2 B and tcp_bw 64 KB
  "$@" qperf >/dev/null 2>&1 &
  local qp=$!
  sleep 0.5
  "$@" qperf -t 3 localhost -m 2 tcp_lat -m 64K tcp_bw 2>&1 || true
  kill $qp 2>/dev/null || true
  wait $qp 2>/dev/null || true
}
lat_us() { awk '/^ *latency/ {v=$3; u=$4} END {if (u == "ms") v *= 1000; if (u == "ns") v /= 1000; print v}'; }
tcp=$(qperf_run)
tcp_lat=$(lat_us <<<"$tcp")
tcp_lat0=$(qperf_run taskset -c 0 | lat_us)
# Server on CPU 0, client on CPU 1: every round trip wakes a process on the other CPU.
qperf_split() {
  taskset -c 0 qperf >/dev/null 2>&1 &
  local qp=$!
  sleep 0.5
  taskset -c 1 qperf -t 3 localhost -m 2 tcp_lat 2>&1 || true
  kill $qp 2>/dev/null || true
  wait $qp 2>/dev/null || true
}
tcp_lat01=$(qperf_split | lat_us)
tcp_bw=$(awk '/^ *bw/ {v=$3; u=$4} END {if (u == "GB/sec") v *= 1000; if (u == "KB/sec") v /= 1000; print v}' <<<"$tcp")
mc=$("$bin/isoroce-bench-memcpy" --benchmark_format=csv --benchmark_min_time=0.5 2>/dev/null)
# bytes_per_second is column 6 of the CSV.
mc_res=$(awk -F, '/BM_MemcpyResident\/65536/ {printf "%.0f", $6 / 1e6}' <<<"$mc")
mc_str=$(awk -F, '/BM_MemcpyStreaming\/65536/ {printf "%.0f", $6 / 1e6}' <<<"$mc")
row "kernel TCP latency (qperf tcp_lat 2 B)" "$tcp_lat us" ""
row "kernel TCP latency on CPU 0 (qperf tcp_lat 2 B, both on CPU 0)" "$tcp_lat0 us" ""
row "kernel TCP latency across CPUs (qperf tcp_lat 2 B, server CPU 0, client CPU 1)" "$tcp_lat01 us" ""
row "kernel TCP bandwidth (qperf tcp_bw 64 KB)" "$tcp_bw MB/s" ""
row "memcpy 64 KB, cache-resident, 1 core" "$mc_res MB/s" ""
row "memcpy 64 KB, streaming 256 MB, 1 core" "$mc_str MB/s" ""

echo
echo "ratios:"
awk -v w0="${r[ib_write_lat/0]}" -v w1="${r[ib_write_lat/]}" -v s0="${r[ib_send_lat/0]}" -v s1="${r[ib_send_lat/]}" \
  -v t="$tcp_lat" -v t0="$tcp_lat0" -v b="${r[ib_write_bw/65536]}" -v rb="${r[ib_read_bw/65536]}" -v m="$mc_res" -v ms="$mc_str" 'BEGIN {
  # Each layout against TCP in the same layout.
  printf "  ib_write_lat / tcp_lat          %.2f apps on CPU 0, %.2f unpinned  (goal < 1)\n", w0 / t0, w1 / t
  printf "  ib_send_lat / tcp_lat           %.2f apps on CPU 0, %.2f unpinned\n", s0 / t0, s1 / t
  printf "  ib_write_bw 64 KB / memcpy      %.2f resident, %.2f streaming  (goal >= 0.25)\n", b / m, b / ms
  printf "  ib_read_bw 64 KB / memcpy       %.2f resident, %.2f streaming\n", rb / m, rb / ms
}'
