#!/usr/bin/env bash
# One command on a fresh Debian 12 machine (as root): install dependencies,
# build, and run the main job: decode the real RoCEv2 captures in ../shared/testdata/roce-captures (hardware
# RNIC and Linux rxe) and a generated capture of every opcode; then simulate a
# latency-sensitive flow beside a 1 MB bandwidth flow on one 100 Gb/s link with
# the fifo policy (what a hardware RNIC does) and with tassel, in virtual time;
# then start isoroced with two DPDK ports joined by a ring pair, show its
# devices, run every verb across them with isoroce-ctl run, and stop it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
captures=${ISOROCE_CAPTURES_DIR:-../shared/testdata/roce-captures}
gen=$(mktemp --suffix=.pcap)
trap 'rm -f "$gen"' EXIT
build/bin/isoroce-pcap gen --out "$gen"
echo "== isoroce-pcap decode --summary (real captures and every generated opcode)"
build/bin/isoroce-pcap decode --summary "$captures"/*.pcap "$gen"

for policy in "" _tassel; do
  echo "== isoroce-sim tools/sim/examples/latency_vs_bandwidth${policy}.toml"
  build/bin/isoroce-sim "tools/sim/examples/latency_vs_bandwidth${policy}.toml"
done

echo "== isoroced --loopback (two DPDK net_ring ports), isoroce-ctl devices"
sock=$(mktemp -u /tmp/isoroced-quickstart.XXXXXX.sock)
build/bin/isoroced --loopback --policy tassel --socket "$sock" --file-prefix isoroce_quickstart &
daemon=$!
for _ in $(seq 100); do [ -S "$sock" ] && build/bin/isoroce-ctl --socket "$sock" status >/dev/null 2>&1 && break; sleep 0.1; done
build/bin/isoroce-ctl --socket "$sock" devices
echo "== isoroce-ctl run tools/ctl/examples/loopback_all_verbs.toml (every verb across the two ports, bytes checked)"
scenario=$(mktemp --suffix=.toml)
sed "s#/run/isoroce/isoroced.sock#$sock#" tools/ctl/examples/loopback_all_verbs.toml > "$scenario"
status=0
build/bin/isoroce-ctl run "$scenario" || status=$?
rm -f "$scenario"
# Unmodified rdma-core and perftest programs through libisoroce-verbs.so: the
# server on isoroce1, the client on isoroce0 (they meet over TCP on loopback).
preload="$PWD/build/lib/libisoroce-verbs.so"
for tool in "ibv_rc_pingpong -g 0 -n 1000" "ib_write_bw -x 0 -n 2000"; do
  echo "== LD_PRELOAD=libisoroce-verbs.so $tool (isoroce1 serves, isoroce0 connects)"
  ISOROCE_SOCKET="$sock" LD_PRELOAD="$preload" timeout 60 $tool -d isoroce1 &
  server=$!
  sleep 1
  ISOROCE_SOCKET="$sock" LD_PRELOAD="$preload" timeout 60 $tool -d isoroce0 127.0.0.1 || status=$?
  wait "$server" || status=$?
done
# An unmodified librdmacm program: rping connects with IB CM on QP1 (both
# libraries preloaded, docs/rdma_cm.md), every ping's data verified.
echo "== LD_PRELOAD=\"libisoroce-rdmacm.so libisoroce-verbs.so\" rping -V -C 10 (isoroce1 serves, isoroce0 connects)"
cm_preload="$PWD/build/lib/libisoroce-rdmacm.so $PWD/build/lib/libisoroce-verbs.so"
ISOROCE_SOCKET="$sock" LD_PRELOAD="$cm_preload" timeout 60 rping -s -a 10.0.0.2 -p 7471 -C 10 -V &
server=$!
sleep 1
ISOROCE_SOCKET="$sock" LD_PRELOAD="$cm_preload" timeout 60 rping -c -v -a 10.0.0.2 -I 10.0.0.1 -p 7471 -C 10 -V || status=$?
wait "$server" || status=$?
kill -TERM "$daemon"
wait "$daemon"
exit "$status"
