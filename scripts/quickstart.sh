#!/usr/bin/env bash
# One command on a fresh Debian 12 machine (as root): install dependencies,
# build, and run the main job. Until the daemon exists the main job decodes
# the real RoCEv2 captures in ../shared/testdata/roce-captures (hardware RNIC
# and Linux rxe) and a generated capture of every opcode, and prints a summary.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
captures=${ISOROCE_CAPTURES_DIR:-../shared/testdata/roce-captures}
gen=$(mktemp --suffix=.pcap)
trap 'rm -f "$gen"' EXIT
build/bin/isoroce-pcap gen --out "$gen"
echo "== isoroce-pcap decode --summary (real captures and every generated opcode)"
build/bin/isoroce-pcap decode --summary "$captures"/*.pcap "$gen"
