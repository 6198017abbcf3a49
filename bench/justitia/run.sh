#!/bin/sh
# Runs every Justitia experiment in isoroce-sim (virtual time) and rewrites the table
# in docs/isolation.md. Usage: bench/justitia/run.sh [path/to/isoroce-sim]
set -e
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
sim=${1:-$root/build/bin/isoroce-sim}
exec python3 "$here/run.py" --sim "$sim" --doc "$root/docs/isolation.md"
