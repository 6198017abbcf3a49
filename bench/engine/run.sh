#!/bin/sh
# Runs isoroce-bench-engine (3 repetitions, medians) and prints, for each verb and
# message size, the engine's time per data packet against the codec floor
# (BM_BuildParseFused: every payload byte read once per side; BM_BuildParse, the
# ICRC as a pass of its own on receive) and the copy floor (BM_MemcpyFrames)
# measured in the same run.
#   bench/engine/run.sh [path/to/isoroce-bench-engine] [google-benchmark flags...]
set -eu
bin=build/bin/isoroce-bench-engine
if [ $# -gt 0 ] && [ -x "$1" ]; then
  bin=$1
  shift
fi
if [ ! -x "$bin" ]; then
  echo "run.sh: $bin not found; build it with: ninja -C build isoroce-bench-engine" >&2
  exit 1
fi
json=$(mktemp)
trap 'rm -f "$json"' EXIT
"$bin" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_out="$json" --benchmark_out_format=json "$@" >/dev/null
python3 - "$json" <<'PY'
import json, sys

runs = {}
for r in json.load(open(sys.argv[1]))["benchmarks"]:
    if r.get("error_occurred"):
        print(f"{r['name']}: ERROR {r.get('error_message')}")
        continue
    if r.get("aggregate_name", "median") != "median":
        continue
    runs[r.get("run_name", r["name"])] = r

def size_name(n):
    return f"{n >> 20} MB" if n >= 1 << 20 else f"{n >> 10} KB" if n >= 1 << 10 else f"{n} B"

def ns_per_item(r):
    return 1e9 / r["items_per_second"]

print(f"{'verb':<6} {'size':>6} {'ns/frame':>9} {'ns/data pkt':>12} {'frames/msg':>11} "
      f"{'payload GB/s':>13} {'codec ns':>9} {'x codec':>8} {'proto ns':>9} {'x proto':>8} {'unfused ns':>11} "
      f"{'memcpy ns':>10} {'x memcpy':>9}")
for verb in ("write", "send", "read"):
    for size in (64, 4096, 1 << 20):
        e = runs.get(f"BM_Engine/{verb}/{size}")
        if e is None:
            continue
        pkt = e["s_per_data_pkt"] * 1e9
        bp = runs.get(f"BM_BuildParseFused/{size}")
        old = runs.get(f"BM_BuildParse/{size}")
        mc = runs.get(f"BM_MemcpyFrames/{size}")
        pf = runs.get(f"BM_ProtocolFloor/{verb}/{size}")
        pf_ns = ns_per_item(pf) if pf else None
        bp_ns = ns_per_item(bp) if bp else None
        old_ns = ns_per_item(old) if old else None
        mc_ns = ns_per_item(mc) if mc else None
        def fmt(v, spec):
            return format(v, spec) if v is not None else "-"
        print(f"{verb:<6} {size_name(size):>6} {ns_per_item(e):>9.1f} {pkt:>12.1f} "
              f"{e['frames_per_msg']:>11.2f} {e['bytes_per_second'] / 1e9:>13.2f} "
              f"{fmt(bp_ns, '9.1f')} {fmt(pkt / bp_ns if bp_ns else None, '7.2f')}x "
              f"{fmt(pf_ns, '9.1f')} {fmt(pkt / pf_ns if pf_ns else None, '7.2f')}x {fmt(old_ns, '11.1f')} "
              f"{fmt(mc_ns, '10.1f')} {fmt(pkt / mc_ns if mc_ns else None, '8.1f')}x")
# One-packet 4 KB messages against their protocol floor in one frame buffer and in
# as many buffers as one transmit call of the engine fills (its frames_per_call).
pool = [v for v in ("write", "send", "read")
        if f"BM_Engine/{v}/4096" in runs and f"BM_ProtocolFloor/{v}_pool/4096" in runs]
if pool:
    print(f"\n{'4 KB':<6} {'ns/data pkt':>12} {'frames/call':>12} {'pool floor ns':>14} {'x pool':>7}")
    for verb in pool:
        e = runs[f"BM_Engine/{verb}/4096"]
        pkt = e["s_per_data_pkt"] * 1e9
        pf_ns = ns_per_item(runs[f"BM_ProtocolFloor/{verb}_pool/4096"])
        print(f"{verb:<6} {pkt:>12.1f} {e.get('frames_per_call', 0):>12.1f} {pf_ns:>14.1f} {pkt / pf_ns:>6.2f}x")
# Tracing: off (the rows above) against every event recorded into a counting sink.
traced = [(v, z) for v in ("write", "send", "read") for z in (64, 4096, 1 << 20)
          if f"BM_Engine/{v}_traced/{z}" in runs and f"BM_Engine/{v}/{z}" in runs]
if traced:
    print(f"\n{'tracing':<6} {'size':>6} {'off ns/frame':>13} {'on ns/frame':>12} {'events/frame':>13} {'ns/event':>9}")
    for verb, size in traced:
        off = ns_per_item(runs[f"BM_Engine/{verb}/{size}"])
        on_run = runs[f"BM_Engine/{verb}_traced/{size}"]
        on = ns_per_item(on_run)
        ev = on_run.get("events_per_frame", 0)
        print(f"{verb:<6} {size_name(size):>6} {off:>13.1f} {on:>12.1f} {ev:>13.2f} "
              f"{(on - off) / ev if ev else 0:>9.2f}")
bad = [n for n, r in runs.items() if n.startswith("BM_Engine") and (r.get("retransmits") or r.get("dropped"))]
if bad:
    print("retransmits or drops in: " + ", ".join(bad))
for arg, what in ((0, "clean links"), (1, "1% loss on every link")):
    sim = runs.get(f"BM_SimEvents/{arg}")
    if sim:
        print(f"simulator, {what}: {sim['items_per_second'] / 1e6:.2f} M events/s "
              f"({sim['events_per_run']:.0f} events per run, "
              f"{sim['virtual_per_wall']:.3f} virtual s per wall s)")
PY
