#!/usr/bin/env bash
# Configures and builds isoroce (Release, Ninja) into build/.
# Extra arguments go to cmake, e.g. scripts/build.sh -DISOROCE_SANITIZE=ON
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ISOROCE_BUILD_DIR:-build}
# ccache (when installed) with paths relative to the checkout: the package's
# build (scripts/package.sh) and other checkouts reuse these objects.
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-Release} "${launcher[@]}" "$@" >/dev/null
# Two cores and heavy DPDK headers: keep parallelism at the core count.
ninja -C "$build" -j "$(nproc)"
