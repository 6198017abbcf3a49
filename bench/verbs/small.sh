#!/usr/bin/env bash
# Small-message rate through the daemon: unmodified `ib_write_bw -s 64` (one
# application thread posting, perftest's defaults: 128 outstanding, a completion
# every 100 WRs) through libisoroce-verbs.so across the two ports of one
# `isoroced --loopback`, for one build or two builds alternating round by round
# (a baseline and a change measured in the same run, under the same load).
#
#   bench/verbs/small.sh [BUILD_DIR [BASE_BUILD_DIR]]
#
# A BUILD_DIR is relative to the checkout or absolute (e.g. another worktree's
# build as the baseline).
# ROUNDS (3) rounds, N (1000000) messages each. Per run: messages/s (perftest's
# MsgRate); the worker's busy time per message (isoroce-ctl status busy_ns:
# time in passes that moved something, preempted passes left out: what a
# message costs the worker, without its idle polling); the CPU time per message
# of the worker thread (perf stat -e task-clock) and of the client process
# (perf record -e cpu-clock: the samples' total), both including polling while
# idle, and the client's time in its post path (the samples in
# libisoroce-verbs.so outside the CQ polling: what ibv_post_send costs the
# application, fences and cross-core misses included); this VM exposes no
# hardware counters, so "instructions" are not available. PROFILE=1 adds one more
# run per build under `perf record -e cpu-clock` of the worker and of the client
# process and prints their top symbols (KEEP=DIR keeps the perf.data files). Apps run on CPU 0, the worker on CPU 1 (--lcores 0,1).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
builds=("${1:-build}")
[[ -n ${2:-} ]] && builds=("$2" "${1:-build}")
rounds=${ROUNDS:-3}
n=${N:-1000000}
dir() { [[ $1 == /* ]] && echo "$1" || echo "$root/$1"; }
name() { [[ $1 == /* ]] && echo "${1//\//_}" || basename "$1"; }
for b in "${builds[@]}"; do
  for f in "$(dir "$b")/bin/isoroced" "$(dir "$b")/bin/isoroce-ctl" "$(dir "$b")/lib/libisoroce-verbs.so"; do
    [[ -e $f ]] || { echo "missing $f" >&2; exit 2; }
  done
done
command -v ib_write_bw >/dev/null || { echo "missing ib_write_bw (perftest)" >&2; exit 2; }
command -v perf >/dev/null || { echo "missing perf (linux-perf)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/isoroce-small.XXXXXX)
daemon=
cleanup() {
  [[ -n $daemon ]] && { kill -TERM "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null || true; }
  [[ -n ${KEEP:-} ]] && cp "$tmp"/*.data "$KEEP"/ 2>/dev/null; rm -rf "$tmp"
}
trap cleanup EXIT
port=${PORT:-19400}
# busy_ns of each worker (isoroce-ctl status): time in passes that did work.
busy() { "$1" --socket "$2" --json status | python3 -c 'import json, sys
print(" ".join(str(w.get("busy_ns", 0)) for w in json.load(sys.stdin)["status"]["workers"]))'; }

# run BUILD ROUND: prints "msgs_per_s worker_busy_ns_per_msg worker_cpu_ns_per_msg client_cpu_ns_per_msg"
run() {
  local b=$1 r=$2 bin lib
  bin="$(dir "$1")/bin" lib="$(dir "$1")/lib/libisoroce-verbs.so"
  local sock="$tmp/d.sock"
  "$bin/isoroced" --loopback --policy tassel --link-gbps 100 --mtu 4096 --lcores 0,1 --socket "$sock" \
    --file-prefix "isoroce_small_$$" >"$tmp/daemon.log" 2>&1 &
  daemon=$!
  for _ in $(seq 100); do "$bin/isoroce-ctl" --socket "$sock" status >/dev/null 2>&1 && break; sleep 0.1; done
  local wtid=""
  for t in /proc/$daemon/task/*; do [[ $(cat "$t/comm") == rte-worker-1 ]] && wtid=$(basename "$t"); done
  port=$((port + 1))
  ISOROCE_SOCKET="$sock" LD_PRELOAD="$lib" taskset -c 0 timeout 120 ib_write_bw -d isoroce1 -x 0 -p $port -s 64 -n "$n" \
    >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  local rec=()
  if [[ $r == profile ]]; then
    perf record -q -e cpu-clock -t "$wtid" -o "$tmp/worker-$(name "$b").data" >/dev/null 2>&1 &
  else
    perf stat -x, -e task-clock -t "$wtid" -o "$tmp/worker.stat" >/dev/null 2>&1 &
  fi
  local p=$!
  local busy0
  busy0=$(busy "$bin/isoroce-ctl" "$sock")
  # The client under perf record in every round: its CPU time (the samples'
  # event count) and the part of it in the library's post path.
  local cperf=(perf record -q -e cpu-clock -o "$tmp/client.data")
  [[ $r == profile ]] && cperf=(perf record -q -e cpu-clock -g -o "$tmp/client-$(name "$b").data")
  ISOROCE_SOCKET="$sock" LD_PRELOAD="$lib" taskset -c 0 timeout 120 "${cperf[@]}" \
    ib_write_bw -d isoroce0 -x 0 -p $port -s 64 -n "$n" 127.0.0.1 >"$tmp/client.out" 2>&1 || true
  local busy1
  busy1=$(busy "$bin/isoroce-ctl" "$sock")
  kill -INT $p 2>/dev/null; wait $p 2>/dev/null || true
  wait $server 2>/dev/null || true
  kill -TERM "$daemon"; wait "$daemon" 2>/dev/null || true
  daemon=
  local mpps wms cns=0 pns=0
  mpps=$(awk '$1 == 64 {print $5; exit}' "$tmp/client.out")
  wms=$( [[ -s $tmp/worker.stat ]] && awk -F, '/task-clock/ {print $1}' "$tmp/worker.stat" || echo 0)
  [[ -s $tmp/client.data ]] && read -r cns pns < <(post_path "$tmp/client.data")
  rm -f "$tmp/worker.stat" "$tmp/client.data"
  awk -v m="${mpps:-0}" -v b="$((busy1 - busy0))" -v w="${wms:-0}" -v c="${cns:-0}" -v p="${pns:-0}" -v n="$n" \
    'BEGIN {printf "%.3f %.0f %.0f %.0f %.0f\n", m, b / n, w * 1e6 / n, c / n, p / n}'
}

# post_path PERF_DATA: "client_cpu_ns library_post_ns": the client's CPU time
# (cpu-clock samples' event count, ns) and the part in libisoroce-verbs.so
# outside its CQ polling (poll_cq and its back-off): ibv_post_send's own cost,
# cross-core misses and fences included, without the time spent waiting.
post_path() {
  perf report -i "$1" --no-children --sort dso,sym --stdio -g none 2>/dev/null | awk '
    /^# Event count/ {total = $NF}
    /%/ && /libisoroce-verbs/ && !/poll_cq|note_empty_poll|back_off|sched_yield/ {sub("%", "", $1); post += $1}
    END {printf "%.0f %.0f\n", total, total * post / 100}'
}

echo "load before: $(uptime)"
declare -A res
for r in $(seq "$rounds"); do
  for b in "${builds[@]}"; do
    v=$(run "$b" "$r")
    res[$b]+="$v;"
    printf "round %d %-12s %s M msg/s, worker busy %s ns/msg, worker CPU %s ns/msg, client CPU %s ns/msg, client post path %s ns/msg\n" "$r" "$b" $v
  done
done
echo "load after:  $(uptime)"
echo
printf "%-14s %10s %18s %18s %18s %18s\n" build "M msg/s" "worker busy ns/msg" "worker CPU ns/msg" "client CPU ns/msg" "client post ns/msg"
for b in "${builds[@]}"; do
  tr ';' '\n' <<<"${res[$b]}" | awk -v b="$b" 'NF == 5 {m[NR] = $1; u[NR] = $2; w[NR] = $3; c[NR] = $4; p[NR] = $5; k = NR}
    function med(a, n,   i, j, t, s) { for (i = 1; i <= n; i++) s[i] = a[i]
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (s[j] < s[i]) { t = s[i]; s[i] = s[j]; s[j] = t }
      return n % 2 ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2 }
    END { printf "%-14s %10.3f %18.0f %18.0f %18.0f %18.0f\n", b, med(m, k), med(u, k), med(w, k), med(c, k), med(p, k) }'
done | tee "$tmp/table"
if [[ ${#builds[@]} == 2 ]]; then
  awk 'NR == 1 {m0 = $2; u0 = $3; w0 = $4; c0 = $5; p0 = $6} NR == 2 && m0 > 0 && u0 > 0 {printf "ratio (%s / %s): %.2fx msg/s, %.2fx worker busy time, %.2fx worker CPU, %.2fx client CPU, %.2fx client post path per message\n", $1, b0, $2 / m0, $3 / u0, $4 / w0, $5 / c0, (p0 > 0 ? $6 / p0 : 0)} {b0 = NR == 1 ? $1 : b0}' "$tmp/table"
fi
if [[ ${PROFILE:-0} == 1 ]]; then
  for b in "${builds[@]}"; do run "$b" profile >/dev/null; done
  for b in "${builds[@]}"; do
    echo
    echo "worker profile, $b (perf record -e cpu-clock, last round):"
    perf report -i "$tmp/worker-$(name "$b").data" --no-children --sort sym --stdio -g none 2>/dev/null |
      grep '%' | head -25 || true
    echo
    echo "client profile, $b (perf record -e cpu-clock -g, last round):"
    perf report -i "$tmp/client-$(name "$b").data" --no-children --sort sym --stdio -g none 2>/dev/null |
      grep '%' | head -25 || true
  done
fi
