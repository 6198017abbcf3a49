#!/bin/sh
# Runs isoroce-bench-daemon (ctl, inproc, raw) and prints its table and ratios.
# Usage: bench/daemon/run.sh [BUILD_DIR] [isoroce-bench-daemon flags...]
# Needs root (DPDK EAL without hugepages, the daemon's control socket).
set -e
build=${1:-build}
[ $# -gt 0 ] && shift
bin="$build/bin/isoroce-bench-daemon"
if [ ! -x "$bin" ]; then
  echo "run.sh: $bin is missing; build it: ninja -C $build isoroce-bench-daemon isoroced" >&2
  exit 1
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r)"
exec "$bin" --seconds 2 "$@"
