#!/usr/bin/env bash
# The kernel I/O path users on commodity NICs take (issue 20), in one run:
# unmodified perftest through libisoroce-verbs.so over a veth, beside kernel TCP
# across the same kind of link.
#
#   one daemon, two ports on the two ends of a veth pair (applications on CPU 0,
#   the worker on CPU 1): 64 KB ib_write_bw and 2 B ib_write_lat with
#   net_af_xdp, then net_af_packet;
#   the same at RoCE MTU 2048 (net_af_xdp) and 4096 (net_af_packet), with one
#   worker lcore and with each port on its own (both on CPU 1, --lcores
#   0@0,1@1,2@1; and at MTU 1024), the veth's MTU raised to carry the MTU
#   (FAST=0 skips these rows);
#   two daemons in two namespaces, one veth end each, on the same 2 cores (both
#   workers on CPU 1, applications unpinned): ib_write_lat 2 B, ib_write_bw 64 KB;
#   kernel TCP between the two namespaces over a veth (qperf tcp_bw 64 KB, tcp_lat 2 B),
#   and tcp_lat again beside two spinning threads (the two-daemon row's thread count).
#
# Usage: bench/veth/run.sh [BUILD_DIR]     (root; perftest and qperf installed)
# MTU (1024) the daemons' and RoCE path MTU; LAT_ITERS (2000), BW_ITERS (5000);
# KINDS ("af_xdp af_packet") the one-daemon port kinds; TWO=0 skips the two-daemon
# rows; PORT_DEVARGS more devargs for every port (",qdisc_bypass=1"); DAEMON_ARGS extra isoroced flags (e.g. --config FILE with the idle
# settings being compared); BEFORE=DIR (with bin/isoroced, bin/isoroce-ctl and
# lib/libisoroce-verbs.so, e.g. another checkout's build/) runs the one-daemon
# rows of KINDS and the two-daemon rows with that build too, in the same run, as
# the baseline. TWO_PIN=CPUS pins the
# two-daemon applications (default: unpinned); SPREAD=1 puts daemon B's worker
# on CPU 0 (EAL --main-lcore 1). NAME (xdpb) names the namespaces and the
# DPDK file prefixes, so that two people can run this on one machine at once.
# Namespaces ns-NAME-one, ns-NAME-a, ns-NAME-b; removed at exit.
set -euo pipefail
build=${1:-build}
. "$(dirname "$0")/common.sh"
veth_prelude "$build" xdpb
mtu=${MTU:-1024}
ns1=ns-$name-one nsa=ns-$name-a nsb=ns-$name-b
# What the RoCE MTU needs (IP packets of mtu + 92): a veth takes an XDP program
# only while its peer's MTU fits a page.
link_mtu=$((mtu + 92 > 1500 ? mtu + 92 : 1500))
read -r -a extra <<<"${DAEMON_ARGS:-}"
pdv=${PORT_DEVARGS:-}  # appended to every port's devargs (",framecnt=1024")
tmp=$(mktemp -d /tmp/isoroce-bench-veth.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for ns in $ns1 $nsa $nsb; do ip netns del $ns 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
for ns in $ns1 $nsa $nsb; do ip netns del $ns 2>/dev/null || true; done

# One namespace with both ends of a veth; two namespaces with a data veth (the
# daemons') and a control veth (kernel addresses: perftest's TCP handshake, qperf).
ip netns add $ns1
ip -n $ns1 link set lo up
ip -n $ns1 link add xb1 type veth peer name xb2
for a in $nsa $nsb; do ip netns add $a; ip -n $a link set lo up; done
ip link add xda netns $nsa type veth peer name xdb netns $nsb
ip link add xca netns $nsa type veth peer name xcb netns $nsb
ip -n $nsa addr add 10.78.0.1/24 dev xca
ip -n $nsb addr add 10.78.0.2/24 dev xcb
for l in "$ns1 xb1" "$ns1 xb2" "$nsa xda" "$nsb xdb" "$nsa xca" "$nsb xcb"; do
  set -- $l
  ip netns exec "$1" sysctl -qw "net.ipv6.conf.$2.disable_ipv6=1"
  ip -n "$1" link set "$2" mtu "$link_mtu" up
done

n=0
daemon() {  # ns socket lcores port... (pairs: devargs ip); EAL_EXTRA: more EAL arguments
  local ns=$1 sock=$2 lcores=$3
  shift 3
  local args=()
  while (($#)); do args+=(--port "$1" --ip "$2"); shift 2; done
  n=$((n + 1))
  ip netns exec "$ns" "$bin/isoroced" "${args[@]}" --mtu "$mtu" --policy fifo --link-gbps 100 --lcores "$lcores" \
    --socket "$sock" --file-prefix "isoroce_${name}_$$_$n" "${extra[@]}" -- --no-huge -m 512 ${EAL_EXTRA:-} >"$tmp/d$n.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do "$bin/isoroce-ctl" --socket "$sock" status >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "isoroced in $ns did not come up:" >&2
  cat "$tmp/d$n.log" >&2
  return 1
}
stop_daemons() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}

port=$((19400 + RANDOM % 500))
# One perftest pair; prints the client's result line.
#   pair tool size iters srv_ns srv_sock srv_dev cli_ns cli_sock cli_dev server_ip pin
pair() {
  local tool=$1 size=$2 iters=$3 sns=$4 ssock=$5 sdev=$6 cns=$7 csock=$8 cdev=$9 sip=${10} pin=${11} run=()
  [[ -n $pin ]] && run=(taskset -c "$pin")
  port=$((port + 1))
  ip netns exec "$sns" env ISOROCE_SOCKET="$ssock" LD_PRELOAD="$preload" timeout 120 "${run[@]}" \
    "$tool" -d "$sdev" -x 0 -p $port -s "$size" -n "$iters" -m "$mtu" >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  ip netns exec "$cns" env ISOROCE_SOCKET="$csock" LD_PRELOAD="$preload" timeout 120 "${run[@]}" \
    "$tool" -d "$cdev" -x 0 -p $port -s "$size" -n "$iters" -m "$mtu" "$sip" 2>/dev/null |
    awk -v s="$size" '$1 == s {print; exit}'
  wait "$server" || true
}
lat() { pair "$@" | awk '{printf "%s %s", $5, $8}'; }   # typical(median) p99
bw() { pair "$@" | awk '{printf "%s", $4}'; }             # average MB/s
row() { printf "| %-58s | %12s | %10s |\n" "$@"; }

load_before=$(uptime)
echo "| test (MTU $mtu, 2 cores) | 64 KB MB/s or median | p99 |"
echo "|---|---:|---:|"
lat_iters=${LAT_ITERS:-2000}
bw_iters=${BW_ITERS:-5000}
declare -A r
one() {  # kind label
  local kind=$1 s="$tmp/one-$1.sock" typ p99 v
  daemon $ns1 "$s" 0,1 "net_${kind}0,iface=xb1$pdv" 10.77.0.1/24 "net_${kind}1,iface=xb2$pdv" 10.77.0.2/24
  v=$(bw ib_write_bw 65536 "$bw_iters" $ns1 "$s" isoroce1 $ns1 "$s" isoroce0 127.0.0.1 0)
  row "one daemon$2, veth, net_$kind: ib_write_bw 64 KB (apps CPU 0)" "${v:-fail} MB/s" ""
  r[bw/$kind$2]=${v:-0}
  read -r typ p99 <<<"$(lat ib_write_lat 2 "$lat_iters" $ns1 "$s" isoroce1 $ns1 "$s" isoroce0 127.0.0.1 0)" || true
  row "one daemon$2, veth, net_$kind: ib_write_lat 2 B (apps CPU 0)" "${typ:-fail} us" "${p99:-fail} us"
  r[lat/$kind$2]=${typ:-0}
  stop_daemons
}
# Runs "$@" with the daemon and library of BEFORE (the baseline build).
with_before() {
  local save_bin=$bin save_preload=$preload save_extra=("${extra[@]}")
  bin="$BEFORE/bin" preload="$BEFORE/lib/libisoroce-verbs.so" extra=()
  "$@"
  bin=$save_bin preload=$save_preload extra=("${save_extra[@]}")
}
for kind in ${KINDS:-af_xdp af_packet}; do one "$kind" ""; done

# The fast layouts (docs/performance.md, "64 KB WRITEs against kernel TCP"): one
# daemon, both ends of the veth, each port on its own worker lcore (--lcores
# 0@0,1@1,2@1: both workers on CPU 1, applications on CPU 0), at a RoCE MTU
# above 1024 (the veth's MTU raised to carry it). Results r[fast/KIND/MTU/W],
# W the number of worker lcores.
fast() {  # kind roce_mtu lcores workers
  local kind=$1 save_mtu=$mtu s="$tmp/fast-$1-$2.sock" v lm
  mtu=$2
  lm=$((mtu + 92 > 1500 ? mtu + 92 : 1500))
  ip -n $ns1 link set xb1 mtu "$lm"
  ip -n $ns1 link set xb2 mtu "$lm"
  daemon $ns1 "$s" "$3" "net_${kind}0,iface=xb1$pdv" 10.77.0.1/24 "net_${kind}1,iface=xb2$pdv" 10.77.0.2/24
  v=$(bw ib_write_bw 65536 "$bw_iters" $ns1 "$s" isoroce1 $ns1 "$s" isoroce0 127.0.0.1 0)
  row "one daemon, $4 worker(s), net_$kind, MTU $mtu (veth $lm): ib_write_bw 64 KB" "${v:-fail} MB/s" ""
  r[fast/$kind/$mtu/$4]=${v:-0}
  stop_daemons
  mtu=$save_mtu
  ip -n $ns1 link set xb1 mtu "$link_mtu"
  ip -n $ns1 link set xb2 mtu "$link_mtu"
}
if [[ ${FAST:-1} == 1 ]]; then
  fast af_xdp 2048 0,1 1
  fast af_packet 4096 0,1 1
  fast af_xdp 1024 0@0,1@1,2@1 2
  fast af_xdp 2048 0@0,1@1,2@1 2
  fast af_packet 4096 0@0,1@1,2@1 2
fi
if [[ -n ${BEFORE:-} ]]; then
  for kind in ${KINDS:-af_xdp af_packet}; do with_before one "$kind" " (BEFORE)"; done
fi

# Two daemons (bin and preload of the build under test, or BEFORE's) in two namespaces.
two() {  # label
  local kind=${TWO_KIND:-af_xdp} sa="$tmp/two-a.sock" sb="$tmp/two-b.sock" typ p99 v
  daemon $nsa "$sa" 0,1 "net_${kind}0,iface=xda$pdv" 10.77.1.1/24
  # SPREAD=1: daemon B's worker on CPU 0 (its control thread on CPU 1).
  EAL_EXTRA=$([[ ${SPREAD:-0} == 1 ]] && echo "--main-lcore 1") daemon $nsb "$sb" 0,1 "net_${kind}0,iface=xdb$pdv" 10.77.1.2/24
  read -r typ p99 <<<"$(lat ib_write_lat 2 "$lat_iters" $nsb "$sb" isoroce0 $nsa "$sa" isoroce0 10.78.0.2 "${TWO_PIN:-}")" || true
  row "two daemons$1, two namespaces, net_$kind: ib_write_lat 2 B" "${typ:-fail} us" "${p99:-fail} us"
  r[lat/two$1]=${typ:-0}
  v=$(bw ib_write_bw 65536 "$bw_iters" $nsb "$sb" isoroce0 $nsa "$sa" isoroce0 10.78.0.2 "${TWO_PIN:-}")
  row "two daemons$1, two namespaces, net_$kind: ib_write_bw 64 KB" "${v:-fail} MB/s" ""
  stop_daemons
}
if [[ ${TWO:-1} == 1 ]]; then
  two ""
  [[ -n ${BEFORE:-} ]] && with_before two " (BEFORE)"
fi

ip netns exec $nsb qperf >/dev/null 2>&1 &
qp=$!
sleep 0.5
tcp=$(ip netns exec $nsa qperf -t 3 10.78.0.2 -m 2 tcp_lat -m 64K tcp_bw 2>&1 || true)
# The same round trip with the two-daemon row's thread count: two applications
# that spin (perftest polls memory) beside two threads that block, on 2 CPUs.
spin_pids=()
for _ in 1 2; do (while :; do :; done) & spin_pids+=($!); done
pids+=("${spin_pids[@]}")
tcp_busy=$(ip netns exec $nsa qperf -t 3 10.78.0.2 -m 2 tcp_lat 2>&1 || true)
kill "${spin_pids[@]}" 2>/dev/null || true
wait "${spin_pids[@]}" 2>/dev/null || true
kill $qp 2>/dev/null || true
wait $qp 2>/dev/null || true
tcp_lat=$(awk '/^ *latency/ {v=$3; u=$4} END {if (u == "ms") v *= 1000; if (u == "ns") v /= 1000; print v}' <<<"$tcp")
tcp_bw=$(awk '/^ *bw/ {v=$3; u=$4} END {if (u == "GB/sec") v *= 1000; if (u == "KB/sec") v /= 1000; print v}' <<<"$tcp")
row "kernel TCP across a veth, two namespaces: qperf tcp_bw 64 KB" "$tcp_bw MB/s" ""
row "kernel TCP across a veth, two namespaces: qperf tcp_lat 2 B" "$tcp_lat us" ""
tcp_lat_busy=$(awk '/^ *latency/ {v=$3; u=$4} END {if (u == "ms") v *= 1000; if (u == "ns") v /= 1000; print v}' <<<"$tcp_busy")
row "kernel TCP, same, beside two spinning threads: tcp_lat 2 B" "$tcp_lat_busy us" ""
load_after=$(uptime)
echo
awk -v x="${r[bw/af_xdp]:-0}" -v p="${r[bw/af_packet]:-0}" -v t="$tcp_bw" -v l1="${r[lat/af_xdp]:-0}" \
  -v fast="$(for k in "${!r[@]}"; do [[ $k == fast/* ]] && printf "%s %s " "${k#fast/}" "${r[$k]}"; done)" \
  -v tb="${tcp_lat_busy:-0}" -v l2="${r[lat/two]:-0}" -v l0="${r[lat/two (BEFORE)]:-0}" -v l1b="${r[lat/af_xdp (BEFORE)]:-0}" \
  -v bxb="${r[bw/af_xdp (BEFORE)]:-0}" -v bpb="${r[bw/af_packet (BEFORE)]:-0}" 'BEGIN {
  if (t > 0) printf "ib_write_bw 64 KB / kernel TCP: af_xdp %.2f, af_packet %.2f  (goal >= 1)\n", x / t, p / t
  n = split(fast, f, " ")
  for (i = 1; i + 1 <= n; i += 2) if (t > 0 && f[i + 1] > 0) printf "ib_write_bw 64 KB / kernel TCP: %s %.2f  (goal >= 1)\n", f[i], f[i + 1] / t
  if (l1 > 0 && l2 > 0) printf "two-daemon / one-daemon ib_write_lat median: %.1fx  (goal <= 3)\n", l2 / l1
  if (tb > 0 && l2 > 0) printf "two-daemon ib_write_lat / kernel TCP beside two spinning threads: %.1fx\n", l2 / tb
  if (l1b > 0 && l0 > 0) printf "BEFORE: two-daemon / one-daemon ib_write_lat median: %.1fx\n", l0 / l1b
  if (bxb > 0) printf "ib_write_bw 64 KB, one daemon, af_xdp / BEFORE: %.2f\n", x / bxb
  if (bpb > 0) printf "ib_write_bw 64 KB, one daemon, af_packet / BEFORE: %.2f\n", p / bpb
}'
echo "load before: $load_before"
echo "load after:  $load_after"
