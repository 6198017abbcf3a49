#!/usr/bin/env bash
# The daemon on hugepages against the daemon without (--no-huge, what CI VMs
# and the tests use), in the same run: perftest through libisoroce-verbs.so
# across the two ports of `isoroced --loopback`, applications on CPU 0, the
# worker on CPU 1. Reserves 512 MB of 2 MB pages for the run (root) and gives
# them back. Prints each figure and the ratio hugepages / no-huge.
#
# Usage: bench/hugepages/run.sh [BUILD_DIR]   (ROUNDS=3: runs alternate)
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/$build/bin"
preload="$root/$build/lib/libisoroce-verbs.so"
[[ -x $bin/isoroced && -e $preload ]] || { echo "build isoroced and isoroce-verbs first" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "run as root (hugepages)" >&2; exit 2; }
nr=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
old=$(cat $nr)
mnt=$(mktemp -d /tmp/isoroce-huge.XXXXXX)
echo $((old + 256)) > $nr
[[ $(cat $nr) -ge $((old + 256)) ]] || { echo $old > $nr; echo "this machine gave $(( $(cat $nr) - old )) of 256 hugepages" >&2; exit 1; }
mount -t hugetlbfs -o pagesize=2M nodev "$mnt"
daemon=
cleanup() {
  [[ -n $daemon ]] && { kill -TERM "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null || true; }
  umount "$mnt" 2>/dev/null || true; rmdir "$mnt"; echo "$old" > $nr
}
trap cleanup EXIT

port=19300
start() {  # memory: huge | nohuge
  local eal=(--no-huge -m 1024)
  [[ $1 == huge ]] && eal=(--huge-dir "$mnt" -m 256)
  sock=$(mktemp -u /tmp/isoroce-bench-huge.XXXXXX.sock)
  "$bin/isoroced" --loopback --policy tassel --link-gbps 100 --mtu 4096 --socket "$sock" \
    --file-prefix "isoroce_bh_$$" -- "${eal[@]}" >/tmp/isoroce-bench-huge.log 2>&1 &
  daemon=$!
  for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.1; done
}
stop() { kill -TERM "$daemon"; wait "$daemon" 2>/dev/null || true; daemon=; }
pair() {  # tool size iters -> the client's result line
  port=$((port + 1))
  ISOROCE_SOCKET="$sock" LD_PRELOAD="$preload" timeout 120 taskset -c 0 "$1" -d isoroce1 -x 0 -p $port \
    -s "$2" -n "$3" >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  ISOROCE_SOCKET="$sock" LD_PRELOAD="$preload" timeout 120 taskset -c 0 "$1" -d isoroce0 -x 0 -p $port \
    -s "$2" -n "$3" 127.0.0.1 2>/dev/null | awk -v s="$2" '$1 == s {print; exit}'
  wait "$server" || true
}
declare -A sum cnt
rounds=${ROUNDS:-3}
for ((i = 0; i < rounds; i++)); do
  for mem in nohuge huge; do
    start $mem
    lat=$(pair ib_write_lat 2 3000 | awk '{print $5}')        # typical (median) us
    bw=$(pair ib_write_bw 65536 5000 | awk '{print $4}')       # average MB/s
    small=$(pair ib_write_bw 64 20000 | awk '{print $5}')      # Mpps
    stop
    for k in lat bw small; do
      v=${!k}; [[ -n $v ]] || v=0
      sum[$mem/$k]=$(awk -v a="${sum[$mem/$k]:-0}" -v b="$v" 'BEGIN {print a + b}')
    done
  done
done
row() { printf "%-30s %12s %12s %8s\n" "$@"; }
echo "isoroced --loopback --mtu 4096, apps on CPU 0, worker on CPU 1, mean of $rounds alternating rounds"
row "figure" "no-huge" "hugepages" "ratio"
for k in lat bw small; do
  a=$(awk -v s="${sum[nohuge/$k]}" -v n=$rounds 'BEGIN {printf "%.2f", s / n}')
  b=$(awk -v s="${sum[huge/$k]}" -v n=$rounds 'BEGIN {printf "%.2f", s / n}')
  case $k in
    lat) name="ib_write_lat 2 B median (us)";;
    bw) name="ib_write_bw 64 KB (MB/s)";;
    small) name="ib_write_bw 64 B (Mmsg/s)";;
  esac
  row "$name" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN {if (a > 0) printf "%.2f", b / a; else print "-"}')"
done
