#!/usr/bin/env bash
# Builds the Debian package (build-deb/isoroce_VERSION_amd64.deb): a Release
# build for the /usr prefix without tests or benchmarks, then cpack -G DEB.
# Install it with: apt-get install ./build-deb/isoroce_*.deb
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ISOROCE_DEB_DIR:-build-deb}
launcher=()
if command -v ccache >/dev/null; then  # reuses scripts/build.sh's objects
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr "${launcher[@]}" \
  -DISOROCE_BUILD_TESTS=OFF -DISOROCE_BUILD_BENCH=OFF -DISOROCE_BUILD_FUZZ=OFF "$@" >/dev/null
ninja -C "$build" -j "$(nproc)" >/dev/null
(cd "$build" && rm -f isoroce_*.deb && cpack -G DEB >/dev/null)
ls "$build"/isoroce_*.deb
