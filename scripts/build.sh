#!/usr/bin/env bash
# Configures and builds isoroce (Release, Ninja) into build/.
# Extra arguments go to cmake, e.g. scripts/build.sh -DISOROCE_SANITIZE=ON
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ISOROCE_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-Release} "$@" >/dev/null
# Two cores and heavy DPDK headers: keep parallelism at the core count.
ninja -C "$build" -j "$(nproc)"
