#!/usr/bin/env bash
# Soak run: unmodified RDMA programs come and go (one in five SIGKILLed)
# between two daemons in two namespaces over a lossy, corrupting, duplicating,
# reordering link, for SECONDS (default 3600); at the end every program that
# was not killed must have finished with its data checked, and both daemons
# must be back to their QPs, descriptors and memory (within 32 MB) of the
# warmed-up start. Root. Prints the tally and the daemons' before/after.
#   scripts/soak.sh [SECONDS] [PARALLEL] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${ISOROCE_BUILD_DIR:-build}/bin/isoroce-test-soak
[[ -x $bin ]] || { echo "soak: build it first: ninja -C build isoroce-test-soak isoroced isoroce-verbs" >&2; exit 2; }
ISOROCE_SOAK_SECONDS=${1:-3600} ISOROCE_SOAK_PARALLEL=${2:-2} ISOROCE_SOAK_SEED=${3:-7} exec "$bin"
