#!/usr/bin/env bash
# What the trace points cost with tracing off (docs/performance.md, "Tracing"):
# the engine and scheduler benchmarks of builds with the trace points compiled in
# (tracing off: no sink attached) and compiled out (-DISOROCE_TRACE=OFF), and
# optionally a third build (e.g. main before the trace points), in one run: ROUNDS
# rounds, each running every build once in turn (pinned to CPU ${CPU:-1}), so
# load changes hit all builds alike. Prints per benchmark the best (minimum) ns
# per packet of each build over the rounds (on a shared machine the rounds that
# other work slowed are the noise; the minimum is the least disturbed), the
# ratio of "in, off" to "out", and the spread of the "out" build's own rounds
# (max/min - 1), the noise the ratio is read against.
#   bench/engine/trace_cost.sh BUILD_IN BUILD_OUT [BUILD_BASE]     ROUNDS=5
# Build the two with:
#   cmake -S . -B build-notrace -G Ninja -DCMAKE_BUILD_TYPE=Release -DISOROCE_TRACE=OFF
#   ninja -C build-notrace isoroce-bench-engine isoroce-bench-sched
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 BUILD_IN BUILD_OUT [BUILD_BASE]" >&2; exit 2; }
builds=("$@")
names=(in_off out base)
rounds=${ROUNDS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
engine_filter=${ENGINE_FILTER:-'BM_Engine/(write|read)/(64|4096)$'}
sched_filter=${SCHED_FILTER:-'BM_Tassel/(1|16384)$'}
pin=(); command -v taskset >/dev/null && pin=(taskset -c "${CPU:-1}")
for r in $(seq "$rounds"); do
  for i in "${!builds[@]}"; do
    b=${builds[$i]}
    "${pin[@]}" "$b/bin/isoroce-bench-engine" --benchmark_filter="$engine_filter" --benchmark_min_time=0.2 \
      --benchmark_out="$tmp/${names[$i]}-engine-$r.json" --benchmark_out_format=json >/dev/null
    "${pin[@]}" "$b/bin/isoroce-bench-sched" --benchmark_filter="$sched_filter" --benchmark_min_time=0.2 \
      --benchmark_out="$tmp/${names[$i]}-sched-$r.json" --benchmark_out_format=json >/dev/null
  done
done
python3 - "$tmp" "$rounds" "${#builds[@]}" <<'PY'
import glob, json, statistics, sys
tmp, rounds, nb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
names = ["in_off", "out", "base"][:nb]
ns = {}  # (build, bench) -> [ns per packet per round]
for b in names:
    for f in sorted(glob.glob(f"{tmp}/{b}-*.json")):
        for r in json.load(open(f))["benchmarks"]:
            v = r["s_per_data_pkt"] * 1e9 if "s_per_data_pkt" in r else 1e9 / r["items_per_second"]
            ns.setdefault((b, r["name"]), []).append(v)
benches = sorted({k[1] for k in ns})
head = f"{'benchmark':<24}" + "".join(f"{n:>10}" for n in names) + f"{'in/out':>9}{'noise':>8}"
if nb > 2:
    head += f"{'out/base':>10}"
print(head)
for bench in benches:
    med = {b: min(ns[(b, bench)]) for b in names if (b, bench) in ns}
    out = ns[("out", bench)]
    noise = max(out) / min(out) - 1
    line = f"{bench:<24}" + "".join(f"{med[b]:>10.1f}" for b in names)
    line += f"{med['in_off'] / med['out'] - 1:>+8.1%}{noise:>8.1%}"
    if nb > 2:
        line += f"{med['out'] / med['base'] - 1:>+10.1%}"
    print(line)
PY
