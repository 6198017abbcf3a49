#!/bin/sh
# The example policy plugin built out of tree, as its author would, and run by
# isoroce-sim twice: --policy-plugin with --policy, and a scenario that loads it
# with [[plugin]]. Expect: a latency flow beside a 1 MB bandwidth flow gets at
# least 10x lower median latency than with fifo, the bandwidth flow keeps 95% of
# its goodput, and both ways give the same report.
#   example_plugin_test.sh ISOROCE_SOURCE_DIR ISOROCE_SIM
set -eu
src=$1
sim=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake -S "$src/examples/policies/strict_priority" -B "$tmp/build" -DISOROCE_INCLUDE_DIR="$src" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/build" >/dev/null
so="$tmp/build/strict_priority.so"
"$sim" --policies --policy-plugin "$so" | grep -q '^strict_priority .* plugin '
scenario="$src/tools/sim/examples/latency_vs_bandwidth.toml"
"$sim" "$scenario" --json --no-wall >"$tmp/fifo.json"
"$sim" "$scenario" --policy-plugin "$so" --policy strict_priority --json --no-wall >"$tmp/sp.json"
{ sed 's/^policy = "fifo"/policy = "strict_priority"/' "$scenario"; printf '\n[[plugin]]\npath = "%s"\n' "$so"; } \
  >"$tmp/scenario.toml"
"$sim" "$tmp/scenario.toml" --json --no-wall >"$tmp/sp2.json"
cmp "$tmp/sp.json" "$tmp/sp2.json"
/usr/bin/python3 - "$tmp/fifo.json" "$tmp/sp.json" <<'PY'
import json, sys
fifo, sp = (json.load(open(p)) for p in sys.argv[1:3])
flow = lambda r, n: next(f for f in r["flows"] if f["name"] == n)
lf, ls = flow(fifo, "lat")["lat_us"]["p50"], flow(sp, "lat")["lat_us"]["p50"]
bf, bs = flow(fifo, "bw")["goodput_gbps"], flow(sp, "bw")["goodput_gbps"]
print(f"lat p50: fifo {lf} us, strict_priority {ls} us; bw: fifo {bf} Gb/s, strict_priority {bs} Gb/s")
assert ls * 10 < lf, "strict_priority does not isolate the latency flow"
assert bs >= 0.95 * bf, "strict_priority costs the bandwidth flow"
assert all(f["integrity_ok"] for f in sp["flows"])
PY
# A scenario naming a plugin that is not there fails with the key and the reason.
printf 'seed = 1\n[[plugin]]\npath = "nowhere.so"\n' >"$tmp/bad.toml"
if "$sim" "$tmp/bad.toml" --check 2>"$tmp/err"; then exit 1; fi
grep -q 'plugin\[0\]\.path: policy plugin .*nowhere.so: No such file or directory' "$tmp/err"
