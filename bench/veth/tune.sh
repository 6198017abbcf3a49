#!/usr/bin/env bash
# Candidate settings of the kernel I/O path against the current defaults, in
# interleaved rounds (docs/performance.md, "The kernel path, tuned"): each round
# runs every row (one daemon, both ends of one veth, 64 KB ib_write_bw, apps on
# CPU 0, worker(s) on CPU 1) and kernel TCP (qperf tcp_bw 64 KB between two
# namespaces over a veth), and prints each row's ratio to that round's TCP; the
# end prints the median ratio per row.
#
# Usage: bench/veth/tune.sh [BUILD_DIR]    (root; perftest and qperf installed)
# ROUNDS (5); BW_ITERS (5000); NAME (tune) names the namespaces and file prefixes;
# ROWS: a file of rows, one per line, "label|kind|mtu|lcores|devargs|setup", where
#   devargs is appended to "net_KIND0,iface=xb1" (and ...1,iface=xb2), and setup
#   is a shell command run before the daemon starts (veth names $a and $b, the
#   namespace $ns; e.g. "ip netns exec $ns ethtool -K $a gro on"); the veths are
#   recreated for every row, so a setup lasts one row. Without ROWS: the defaults
#   of each port kind (AF_XDP at MTU 1024 and 2048, AF_PACKET at 4096).
set -euo pipefail
build=${1:-build}
. "$(dirname "$0")/common.sh"
veth_prelude "$build" tune
ns=ns-$name-one nsa=ns-$name-a nsb=ns-$name-b
a=tb1$name b=tb2$name
a=${a:0:15} b=${b:0:15}
rounds=${ROUNDS:-5}
bw_iters=${BW_ITERS:-5000}
tmp=$(mktemp -d /tmp/isoroce-bench-tune.XXXXXX)
pid=
cleanup() {
  [[ -n $pid ]] && { kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  for n in $ns $nsa $nsb; do ip netns del $n 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
for n in $ns $nsa $nsb; do ip netns del $n 2>/dev/null || true; done
ip netns add $ns
ip -n $ns link set lo up
for n in $nsa $nsb; do ip netns add $n; ip -n $n link set lo up; done
ip link add tca netns $nsa type veth peer name tcb netns $nsb
ip -n $nsa addr add 10.79.0.1/24 dev tca
ip -n $nsb addr add 10.79.0.2/24 dev tcb
ip -n $nsa link set tca up
ip -n $nsb link set tcb up

if [[ -n ${ROWS:-} ]]; then
  mapfile -t rows < <(grep -v '^\s*\(#\|$\)' "$ROWS")
else
  rows=("af_xdp 1024 1w|af_xdp|1024|0,1||" "af_xdp 2048 1w|af_xdp|2048|0,1||" "af_packet 4096 1w|af_packet|4096|0,1||")
fi

port=$((19900 + RANDOM % 400))
n=0
# One row: a fresh veth pair at the MTU the RoCE MTU needs, the setup, one
# daemon on both ends, one 64 KB ib_write_bw; prints MB/s (0 on failure).
run_row() {  # label kind mtu lcores devargs setup
  local kind=$2 mtu=$3 lcores=$4 dv=$5 setup=$6 lm s v
  lm=$((mtu + 92 > 1500 ? mtu + 92 : 1500))
  ip -n $ns link del $a 2>/dev/null || true
  ip -n $ns link add $a type veth peer name $b
  for l in $a $b; do
    ip netns exec $ns sysctl -qw "net.ipv6.conf.$l.disable_ipv6=1"
    ip -n $ns link set $l mtu "$lm" up
  done
  [[ -n $setup ]] && { eval "$setup" >/dev/null 2>&1 || echo "setup failed: $setup" >&2; }
  s="$tmp/d$n.sock"
  ip netns exec $ns "$bin/isoroced" --port "net_${kind}0,iface=$a$dv" --ip 10.77.0.1/24 \
    --port "net_${kind}1,iface=$b$dv" --ip 10.77.0.2/24 --mtu "$mtu" --policy fifo --link-gbps 100 \
    --lcores "$lcores" --socket "$s" --file-prefix "isoroce_${name}_$$_$n" -- --no-huge -m 512 >"$tmp/d$n.log" 2>&1 &
  pid=$!
  local up=0
  for _ in $(seq 100); do "$bin/isoroce-ctl" --socket "$s" status >/dev/null 2>&1 && { up=1; break; }; sleep 0.1; done
  if ((up)); then
    port=$((port + 1))
    ip netns exec $ns env ISOROCE_SOCKET="$s" LD_PRELOAD="$preload" timeout 120 taskset -c 0 \
      ib_write_bw -d isoroce1 -x 0 -p $port -s 65536 -n "$bw_iters" -m "$mtu" >/dev/null 2>&1 &
    local server=$!
    sleep 0.5
    v=$(ip netns exec $ns env ISOROCE_SOCKET="$s" LD_PRELOAD="$preload" timeout 120 taskset -c 0 \
      ib_write_bw -d isoroce0 -x 0 -p $port -s 65536 -n "$bw_iters" -m "$mtu" 127.0.0.1 2>/dev/null |
      awk '$1 == 65536 {print $4; exit}')
    wait "$server" || true
  else
    echo "daemon for '$1' did not come up:" >&2
    tail -5 "$tmp/d$n.log" >&2
  fi
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
  echo "${v:-0}"
}
tcp() {
  ip netns exec $nsb qperf >/dev/null 2>&1 &
  local qp=$! out
  sleep 0.5
  out=$(ip netns exec $nsa qperf -t 3 10.79.0.2 -m 64K tcp_bw 2>&1 || true)
  kill $qp 2>/dev/null || true
  wait $qp 2>/dev/null || true
  awk '/^ *bw/ {v=$3; u=$4} END {if (u == "GB/sec") v *= 1000; if (u == "KB/sec") v /= 1000; print v + 0}' <<<"$out"
}

echo "load before: $(uptime)"
declare -A ratios mbs
for ((r = 1; r <= rounds; r++)); do
  line="round $r:"
  declare -A got=()
  # Rotate the order each round so that no row always follows the same one.
  for ((i = 0; i < ${#rows[@]}; i++)); do
    row=${rows[$(((i + r - 1) % ${#rows[@]}))]}
    IFS='|' read -r label kind mtu lcores dv setup <<<"$row"
    n=$((n + 1))
    got[$label]=$(run_row "$label" "$kind" "$mtu" "$lcores" "$dv" "$setup")
  done
  t=$(tcp)
  for row in "${rows[@]}"; do
    IFS='|' read -r label _ <<<"$row"
    ratio=$(awk -v x="${got[$label]}" -v t="$t" 'BEGIN {printf "%.2f", (t > 0 ? x / t : 0)}')
    ratios[$label]+="$ratio "
    mbs[$label]+="${got[$label]} "
    line+=" [$label] ${got[$label]} (${ratio}x)"
  done
  mbs[tcp]+="$t "
  echo "$line [kernel TCP] $t  load: $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo
printf "| %-44s | %-36s | %s |\n" "64 KB ib_write_bw (apps CPU 0)" "MB/s per round" "median x TCP (per round)"
printf "|---|---|---:|\n"
for row in "${rows[@]}"; do
  IFS='|' read -r label _ <<<"$row"
  med=$(tr ' ' '\n' <<<"${ratios[$label]}" | grep . | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}')
  printf "| %-44s | %-36s | %s (%s) |\n" "$label" "${mbs[$label]% }" "$med" "${ratios[$label]% }"
done
printf "| %-44s | %-36s | 1 |\n" "kernel TCP (qperf tcp_bw 64 KB)" "${mbs[tcp]% }"
echo "load after: $(uptime)"
