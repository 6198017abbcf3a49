#!/usr/bin/env bash
# Unmodified perftest through libisoroce-verbs.so across the two ports of one
# `isoroced --loopback`, beside kernel TCP on loopback (qperf) in the same run.
# Usage: bench/verbs/run.sh [BUILD_DIR]   (prints one table)
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/$build/bin"
preload="$root/$build/lib/libisoroce-verbs.so"
sock=$(mktemp -u /tmp/isoroce-bench-verbs.XXXXXX.sock)
"$bin/isoroced" --loopback --policy tassel --link-gbps 100 --socket "$sock" --file-prefix "isoroce_bv_$$" \
  >/tmp/isoroce-bench-verbs.log 2>&1 &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null; wait $daemon 2>/dev/null || true' EXIT
for _ in $(seq 100); do "$bin/isoroce-ctl" --socket "$sock" status >/dev/null 2>&1 && break; sleep 0.1; done

# One perftest pair: server on isoroce1, client on isoroce0; prints the client's result line.
pair() {  # tool size iterations
  local tool=$1 size=$2 iters=$3
  ISOROCE_SOCKET="$sock" LD_PRELOAD="$preload" timeout 120 "$tool" -d isoroce1 -x 0 -s "$size" -n "$iters" >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  ISOROCE_SOCKET="$sock" LD_PRELOAD="$preload" timeout 120 "$tool" -d isoroce0 -x 0 -s "$size" -n "$iters" 127.0.0.1 2>/dev/null \
    | awk -v s="$size" '$1 == s {print; exit}'
  wait "$server" || true
}

printf "%-12s %8s   %s\n" test bytes "perftest result line (lat: t_min t_max t_typical t_avg t_stdev p99 p99.9 us; bw: iters peak avg MB/s Mpps)"
for t in ib_write_lat ib_send_lat; do
  for s in 2 64; do printf "%-12s %8s   %s\n" $t $s "$(pair $t $s 2000)"; done
done
for t in ib_write_bw ib_read_bw; do
  for s in 64 65536; do printf "%-12s %8s   %s\n" $t $s "$(pair $t $s 5000)"; done
done

echo
echo "kernel TCP on loopback (qperf, same machine, same run):"
qperf >/dev/null 2>&1 &
qp=$!
sleep 0.5
qperf -t 3 localhost -m 2 tcp_lat -m 64K tcp_bw 2>&1 | sed 's/^/  /'
kill $qp 2>/dev/null || true
