#!/usr/bin/env bash
# rdma_cm connection setup through isoroced beside kernel TCP, in one run
# (bench/cm/README.md): isoroce-bench-cm (connect to first SEND completion vs
# TCP connect + first message on loopback, with the ratio), then unmodified
# cmtime (rdmacm-utils) for librdmacm's own per-step table. Prints the load.
#
# Usage: bench/cm/run.sh [BUILD_DIR]     ITERS (200) connections per side,
# CMTIME_CONN (100) cmtime connections, PREFIX the daemon's DPDK --file-prefix,
# PORT the first rdma_cm port (19650), IDLE_US the daemon's idle_sleep_us
# (its worker's longest sleep when idle; default 1000). TWO=0 skips the
# two-daemon part: isoroce-bench-cm --role serve in namespace ns-bcm-b (its own
# isoroced on one end of a veth, net_af_packet) and --role connect in ns-bcm-a
# (the other end, a second isoroced), then cmtime the same way; root only.
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
conf=() conf2=()
if [[ -n ${IDLE_US:-} ]]; then  # the worker's longest idle sleep (default 1000 us)
  printf 'loopback = true\nidle_sleep_us = %s\n' "$IDLE_US" >"/tmp/isoroce-bench-cm-$$.toml"
  printf 'idle_sleep_us = %s\n' "$IDLE_US" >"/tmp/isoroce-bench-cm-$$-2.toml"
  conf=(--config "/tmp/isoroce-bench-cm-$$.toml") conf2=(--config "/tmp/isoroce-bench-cm-$$-2.toml")
fi
"$bin/isoroced" --loopback "${conf[@]}" --socket "$sock" --file-prefix "${PREFIX:-isoroce_bcm_$$}" >/tmp/isoroce-bench-cm.log 2>&1 &
daemon=$!
pids=($daemon)
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for ns in ns-bcm-a ns-bcm-b; do ip netns del $ns 2>/dev/null || true; done
}
trap cleanup EXIT
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

# Two daemons, one per namespace, on the two ends of a veth.
if [[ ${TWO:-1} != 0 && $(id -u) == 0 ]]; then
  for ns in ns-bcm-a ns-bcm-b; do ip netns del $ns 2>/dev/null || true; ip netns add $ns; ip -n $ns link set lo up; done
  ip link add bcma netns ns-bcm-a type veth peer name bcmb netns ns-bcm-b
  for l in "ns-bcm-a bcma" "ns-bcm-b bcmb"; do
    set -- $l
    ip netns exec "$1" sysctl -qw "net.ipv6.conf.$2.disable_ipv6=1"
    ip -n "$1" link set "$2" up
  done
  for side in a b; do
    ip=10.79.0.$([[ $side == a ]] && echo 1 || echo 2)
    ip netns exec ns-bcm-$side "$bin/isoroced" --port "net_af_packet0,iface=bcm$side" --ip "$ip/24" "${conf2[@]}" \
      --socket "$sock.$side" --file-prefix "isoroce_bcm_$$_$side" >"/tmp/isoroce-bench-cm-$side.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 200); do "$bin/isoroce-ctl" --socket "$sock.$side" status >/dev/null 2>&1 && break; sleep 0.1; done
  done
  echo
  echo "two isoroceds in two namespaces (net_af_packet on a veth): server on 10.79.0.2, client on 10.79.0.1; TCP on 127.0.0.1 in the client's namespace"
  ip netns exec ns-bcm-b env ISOROCE_SOCKET="$sock.b" timeout 300 "$bin/isoroce-bench-cm" --role serve \
    --iters "${ITERS:-200}" --server 10.79.0.2 --port "$port" >/tmp/isoroce-bench-cm-serve.log 2>&1 &
  server=$!
  for _ in $(seq 100); do grep -q listening /tmp/isoroce-bench-cm-serve.log && break; sleep 0.1; done
  ip netns exec ns-bcm-a env ISOROCE_SOCKET="$sock.a" "$bin/isoroce-bench-cm" --role connect --iters "${ITERS:-200}" \
    --server 10.79.0.2 --client 10.79.0.1 --port "$port"
  wait "$server" || { echo "server:"; cat /tmp/isoroce-bench-cm-serve.log; }
  echo
  echo "cmtime -c ${CMTIME_CONN:-100} across the two daemons, client's table (microseconds):"
  ip netns exec ns-bcm-b env ISOROCE_SOCKET="$sock.b" LD_PRELOAD="$pre" timeout 60 cmtime -b 10.79.0.2 \
    -p $((port + 2)) -c "${CMTIME_CONN:-100}" >/tmp/isoroce-bench-cmtime-server.log 2>&1 &
  server=$!
  sleep 0.5
  ip netns exec ns-bcm-a env ISOROCE_SOCKET="$sock.a" LD_PRELOAD="$pre" timeout 60 cmtime -s 10.79.0.2 -b 10.79.0.1 \
    -p $((port + 2)) -c "${CMTIME_CONN:-100}" 2>&1 | grep -v "^isoroce-rdmacm: destroy_cq" || true
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
fi
echo "load after: $(uptime | sed 's/.*load average: //')"
