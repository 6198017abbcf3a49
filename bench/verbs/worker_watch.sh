# Sourced by bench/verbs/workers.sh and lanes.sh: one isoroced --loopback at a
# time, perftest through libisoroce-verbs.so, and each worker's busy time
# (isoroce-ctl status busy_ns: passes that moved something) and CPU time
# (perf stat -e task-clock on its thread, idle polling included) per message.
# Expects: root, b (the build directory, relative to root), tmp (a scratch dir).
bin="$root/$b/bin"
lib="$root/$b/lib/libisoroce-verbs.so"
daemon=
cleanup() {
  [[ -n $daemon ]] && { kill -TERM "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null || true; }
  rm -rf "$tmp"
}
trap cleanup EXIT

busy() { "$bin/isoroce-ctl" --socket "$1" --json status | python3 -c 'import json, sys
print(" ".join(str(w.get("busy_ns", 0)) for w in json.load(sys.stdin)["status"]["workers"]))'; }

# start_daemon SOCK FLAGS...: isoroced --loopback (tassel, 100 Gb/s, MTU 4096)
# with FLAGS; sets daemon and tids (its worker threads).
start_daemon() {
  local sock=$1
  shift
  "$bin/isoroced" --loopback --policy tassel --link-gbps 100 --mtu 4096 --socket "$sock" "$@" \
    >"$tmp/daemon.log" 2>&1 &
  daemon=$!
  for _ in $(seq 100); do "$bin/isoroce-ctl" --socket "$sock" status >/dev/null 2>&1 && break; sleep 0.1; done
  tids=()
  for t in /proc/$daemon/task/*; do [[ $(cat "$t/comm") == rte-worker-* ]] && tids+=("$(basename "$t")"); done
}

# watch_workers SOCK: the workers' busy time now, and perf stat on each.
watch_workers() {
  busy0=$(busy "$1")
  stats=()
  local i=0
  for t in "${tids[@]}"; do
    perf stat -x, -e task-clock -t "$t" -o "$tmp/w$i.stat" >/dev/null 2>&1 &
    stats+=($!)
    i=$((i + 1))
  done
}

# stop_daemon SOCK MSGS: stops the watch and the daemon (in this shell, which
# reaps it); sets per to each worker's "busy/CPU" ns per message over MSGS
# messages, space-separated.
stop_daemon() {
  local busy1 b0 b1 out="" k
  busy1=$(busy "$1")
  for s in "${stats[@]}"; do kill -INT "$s" 2>/dev/null; done
  wait "${stats[@]}" 2>/dev/null || true
  kill -TERM "$daemon"; wait "$daemon" 2>/dev/null || true
  daemon=
  read -r -a b0 <<<"$busy0"
  read -r -a b1 <<<"$busy1"
  for ((k = 0; k < ${#tids[@]}; k++)); do
    out+=" $(( (b1[k] - b0[k]) / $2 ))/$(awk -F, -v m="$2" '/task-clock/ {printf "%.0f", $1 * 1e6 / m}' "$tmp/w$k.stat")"
  done
  rm -f "$tmp"/w*.stat
  per=${out# }
}
