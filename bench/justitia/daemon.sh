#!/usr/bin/env bash
# Justitia on the real daemon (issue 7): unmodified perftest through
# libisoroce-verbs.so, ib_write_lat (ISOROCE_FLOW_CLASS=latency) beside
# ib_write_bw (ISOROCE_FLOW_CLASS=bandwidth), across the two ports of one
# `isoroced --loopback`, under --policy fifo and --policy justitia, each flow
# also alone. Prints one table.
#
# Usage: bench/justitia/daemon.sh [BUILD_DIR]
# Environment: LINK_GBPS (default 10: the emulated line rate, below what the
# data path moves, so the link is the bottleneck), BW_SIZE (ib_write_bw
# message bytes, default 1048576), BW_SECONDS (default 8), LAT_ITERS (default
# 3000), TARGET99_US (justitia's Target99, default 100: the reference flow's
# latency includes the daemon's poll loop and the applications' CPU, see
# docs/isolation.md), LAT_TOOL (default ib_write_lat; ib_send_lat polls its
# CQ instead of a memory word, which on a 2-core machine keeps the kernel's
# time slices out of the figure), APPS_CPU (default 0; empty: unpinned).
#
# The worker polls on CPU 1 (lcores 0,1); the applications run on APPS_CPU.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/$build/bin"
preload="$root/$build/lib/libisoroce-verbs.so"
link=${LINK_GBPS:-10}
bw_size=${BW_SIZE:-1048576}
bw_seconds=${BW_SECONDS:-8}
lat_iters=${LAT_ITERS:-3000}
target=${TARGET99_US:-100}
lat_tool=${LAT_TOOL:-ib_write_lat}
apps_cpu=${APPS_CPU-0}
for f in "$bin/isoroced" "$bin/isoroce-ctl" "$preload"; do
  [[ -e $f ]] || { echo "missing $f: build isoroced isoroce-ctl isoroce-verbs first" >&2; exit 2; }
done
for t in "$lat_tool" ib_write_bw; do
  command -v $t >/dev/null || { echo "missing $t: scripts/install-deps.sh installs perftest" >&2; exit 2; }
done

sock=$(mktemp -u /tmp/isoroce-bench-justitia.XXXXXX.sock)
daemon=
stop_daemon() {
  [[ -n $daemon ]] || return 0
  kill -TERM "$daemon" 2>/dev/null || true
  wait "$daemon" 2>/dev/null || true
  daemon=
}
trap stop_daemon EXIT
start_daemon() {  # policy
  local extra=()
  [[ $1 == justitia ]] && extra=(--justitia "target99_us=$target")
  "$bin/isoroced" --loopback --policy "$1" "${extra[@]}" --link-gbps "$link" --socket "$sock" \
    --file-prefix "isoroce_bj_$$" >>/tmp/isoroce-bench-justitia.log 2>&1 &
  daemon=$!
  for _ in $(seq 100); do "$bin/isoroce-ctl" --socket "$sock" status >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "isoroced --policy $1 did not start: /tmp/isoroce-bench-justitia.log" >&2
  exit 1
}

port=19300
# run_pair CLASS OUTFILE perftest-args...: server on isoroce1, client on
# isoroce0, both on CPU 0 with ISOROCE_FLOW_CLASS=CLASS; the client's output
# goes to OUTFILE.
run_pair() {
  local cls=$1 out=$2
  shift 2
  port=$((port + 1))
  local env=(env ISOROCE_SOCKET="$sock" LD_PRELOAD="$preload" ISOROCE_FLOW_CLASS="$cls") pin=()
  [[ -n $apps_cpu ]] && pin=(taskset -c "$apps_cpu")
  "${env[@]}" timeout 120 "${pin[@]}" "$@" -d isoroce1 -x 0 -p $port >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  "${env[@]}" timeout 120 "${pin[@]}" "$@" -d isoroce0 -x 0 -p $port 127.0.0.1 >"$out" 2>&1 || true
  wait "$server" 2>/dev/null || true
}
lat_cmd=("$lat_tool" -s 16 -n "$lat_iters")
bw_cmd=(ib_write_bw -s "$bw_size" -D "$bw_seconds")
tmp=$(mktemp -d)

# Result lines: lat "16 iters t_min t_max t_typical t_avg t_stdev p99 p99.9"; bw "size iters peak avg Mpps".
lat_of() { awk '$1 == 16 {printf "%s %s", $5, $8; exit}' "$1"; }
bw_of() { awk -v s="$bw_size" '$1 == s {printf "%s", $4; exit}' "$1"; }

declare -A res
for policy in fifo justitia; do
  start_daemon $policy
  run_pair latency "$tmp/lat_alone" "${lat_cmd[@]}"
  res[$policy/lat_alone]=$(lat_of "$tmp/lat_alone")
  run_pair bandwidth "$tmp/bw_alone" "${bw_cmd[@]}"
  res[$policy/bw_alone]=$(bw_of "$tmp/bw_alone")
  # Together: the bandwidth flow first, the latency flow while it runs.
  run_pair bandwidth "$tmp/bw_both" "${bw_cmd[@]}" &
  bwjob=$!
  port=$((port + 10))  # the background pair took port + 1 in its own shell
  sleep 2
  run_pair latency "$tmp/lat_both" "${lat_cmd[@]}"
  wait $bwjob || true
  res[$policy/lat_both]=$(lat_of "$tmp/lat_both")
  res[$policy/bw_both]=$(bw_of "$tmp/bw_both")
  [[ $policy == justitia ]] && "$bin/isoroce-ctl" --socket "$sock" sched >"$tmp/sched" 2>&1 || true
  stop_daemon
done

printf "isoroced --loopback --link-gbps %s; %s 16 B x %s (latency class) beside ib_write_bw %s B for %s s (bandwidth class); apps on CPU %s\n" \
  "$link" "$lat_tool" "$lat_iters" "$bw_size" "$bw_seconds" "${apps_cpu:-any}"
printf "%-28s %22s %22s\n" "" "fifo" "justitia (Target99 ${target} us)"
pl() { local v=${res[$1]:-}; [[ -n $v ]] && awk '{printf "%s / %s us", $1, $2}' <<<"$v" || echo fail; }
pb() { local v=${res[$1]:-}; [[ -n $v ]] && awk '{printf "%.0f MB/s (%.2f Gb/s)", $1, $1 * 8 / 1000}' <<<"$v" || echo fail; }
printf "%-28s %22s %22s\n" "latency alone (median / p99)" "$(pl fifo/lat_alone)" "$(pl justitia/lat_alone)"
printf "%-28s %22s %22s\n" "latency beside bandwidth" "$(pl fifo/lat_both)" "$(pl justitia/lat_both)"
printf "%-28s %22s %22s\n" "bandwidth alone" "$(pb fifo/bw_alone)" "$(pb justitia/bw_alone)"
printf "%-28s %22s %22s\n" "bandwidth beside latency" "$(pb fifo/bw_both)" "$(pb justitia/bw_both)"
awk -v fa="${res[fifo/lat_alone]:-0 0}" -v fb="${res[fifo/lat_both]:-0 0}" -v ja="${res[justitia/lat_alone]:-0 0}" \
  -v jb="${res[justitia/lat_both]:-0 0}" 'BEGIN {
  split(fa, a); split(fb, b); split(ja, c); split(jb, d)
  if (a[2] > 0 && c[2] > 0) printf "p99 beside bandwidth / alone: fifo %.1fx, justitia %.1fx\n", b[2] / a[2], d[2] / c[2]
}'
if [[ -s $tmp/sched ]]; then
  echo "justitia state at the end (isoroce-ctl sched):"
  sed 's/^/  /' "$tmp/sched"
fi
rm -rf "$tmp"
