#!/usr/bin/env bash
# rdma_cm connection setup through isoroced beside kernel TCP, in one run
# (bench/cm/README.md): isoroce-bench-cm (connect to first SEND completion vs
# TCP connect + first message on loopback, with the ratio), then unmodified
# cmtime (rdmacm-utils) for librdmacm's own per-step table. Prints the load.
#
# Usage: bench/cm/run.sh [BUILD_DIR]     ITERS (200) connections per side,
# CMTIME_CONN (100) cmtime connections, PREFIX the daemon's DPDK --file-prefix,
# PORT the first rdma_cm port (19650), IDLE_US the daemon's idle_sleep_us
# (its worker's longest sleep when idle; default 1000).
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/$build/bin"
lib="$root/$build/lib"
for f in "$bin/isoroced" "$bin/isoroce-ctl" "$bin/isoroce-bench-cm" "$lib/libisoroce-rdmacm.so" "$lib/libisoroce-verbs.so"; do
  [[ -e $f ]] || { echo "missing $f: ninja -C $build isoroced isoroce-ctl isoroce-bench-cm" >&2; exit 2; }
done
command -v cmtime >/dev/null || { echo "missing cmtime: apt-get install rdmacm-utils" >&2; exit 2; }
sock=$(mktemp -u /tmp/isoroce-bench-cm.XXXXXX.sock)
conf=()
if [[ -n ${IDLE_US:-} ]]; then  # the worker's longest idle sleep (default 1000 us)
  printf 'loopback = true\nidle_sleep_us = %s\n' "$IDLE_US" >"/tmp/isoroce-bench-cm-$$.toml"
  conf=(--config "/tmp/isoroce-bench-cm-$$.toml")
fi
"$bin/isoroced" --loopback "${conf[@]}" --socket "$sock" --file-prefix "${PREFIX:-isoroce_bcm_$$}" >/tmp/isoroce-bench-cm.log 2>&1 &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null; wait $daemon 2>/dev/null || true' EXIT
for _ in $(seq 200); do "$bin/isoroce-ctl" --socket "$sock" status >/dev/null 2>&1 && break; sleep 0.1; done
port=${PORT:-19650}

echo "machine: $(nproc) cores, kernel $(uname -r); load before: $(uptime | sed 's/.*load average: //')"
echo "isoroced --loopback${IDLE_US:+, idle_sleep_us = $IDLE_US}: rdma_cm server on isoroce1 (10.0.0.2), client on isoroce0 (10.0.0.1); TCP on 127.0.0.1"
ISOROCE_SOCKET="$sock" "$bin/isoroce-bench-cm" --iters "${ITERS:-200}" --port "$port"

echo
echo "cmtime -c ${CMTIME_CONN:-100} (unmodified, LD_PRELOAD), client's table (microseconds):"
pre="$lib/libisoroce-rdmacm.so $lib/libisoroce-verbs.so"
ISOROCE_SOCKET="$sock" LD_PRELOAD="$pre" timeout 60 cmtime -b 10.0.0.2 -p $((port + 1)) -c "${CMTIME_CONN:-100}" \
  >/tmp/isoroce-bench-cmtime-server.log 2>&1 &
server=$!
sleep 0.5
ISOROCE_SOCKET="$sock" LD_PRELOAD="$pre" timeout 60 cmtime -s 10.0.0.2 -b 10.0.0.1 -p $((port + 1)) \
  -c "${CMTIME_CONN:-100}" 2>&1 | grep -v "^isoroce-rdmacm: destroy_cq" || true
kill "$server" 2>/dev/null || true
wait "$server" 2>/dev/null || true
echo "load after: $(uptime | sed 's/.*load average: //')"
