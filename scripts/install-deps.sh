#!/usr/bin/env bash
# Installs every Debian 12 package that isoroce's build, tests, tools and
# benchmarks need. Idempotent: a second run installs nothing new. Run as root.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkgconf git
  clang-14 libclang-rt-14-dev          # libFuzzer targets and sanitizer runtimes
  # data plane and verbs ABI
  dpdk dpdk-dev libdpdk-dev libnuma-dev libpcap-dev   # dpdk: dpdk-hugepages.py, dpdk-devbind.py
  rdma-core libibverbs-dev librdmacm-dev ibverbs-utils rdmacm-utils perftest qperf
  # libraries
  libtbb-dev libgtest-dev libgmock-dev libbenchmark-dev
  libtomlplusplus-dev libcli11-dev libfmt-dev nlohmann-json3-dev zlib1g-dev
  # interop checks and fault injection
  python3 python3-scapy python3-matplotlib tshark tcpdump iproute2 iputils-ping ethtool
  # instructions per packet (bench/engine/callgrind_per_packet.py)
  valgrind
  # packaging and the service (tests/install)
  ccache dpkg-dev systemd
  # the Linux rxe peer in a QEMU guest (scripts/rxe-guest/, tests/interop/rxe_guest_test.cc)
  qemu-system-x86 busybox-static kmod cpio
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages (${missing[*]}); run this script as root" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer once, no prompt.
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
