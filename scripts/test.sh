#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine (as root): install
# dependencies, build everything, run every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd "${ISOROCE_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" --timeout 600
