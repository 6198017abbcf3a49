#!/usr/bin/env bash
# Every headline figure of docs/performance.md beside its baseline, measured in one
# run, printed as one markdown table (ratios are what to compare across machines).
#
#   bench/compare.sh [--quick] [BUILD_DIR]      (default build; Release)
#
# Figures (baseline in the same run):
#   engine cost per 4 KB / 64 B WRITE data packet   vs the codec floor (bench/engine)
#   (and per one-packet 4 KB message vs its protocol floor: BM_ProtocolFloor, in one
#   frame buffer and in as many as one transmit call of the engine fills)
#   (also per 4 KB packet of a 64 KB WRITE)
#   ICRC and copy-and-CRC throughput                vs rte_net_crc, memcpy then CRC (bench/wire)
#   Tassel packets/s at 16K and 1 backlogged QPs    vs binary-heap WF2Q+ (bench/sched)
#   ib_write_bw 64 KB through isoroced              vs one core's streaming memcpy
#   ib_write_bw 64 B messages/s                     (small-message rate)
#   64 B WRITE, the worker's busy time per message  vs the rate achieved (bench/verbs/small.sh)
#   ib_write_lat / ib_send_lat 2 B median, p99      vs kernel TCP loopback (qperf tcp_lat)
# --quick: one repetition and short runs (about a minute and a half on the 2-core VM);
# default: 5 repetitions, medians (about five minutes). The verbs rows need root,
# perftest and qperf (scripts/install-deps.sh); they are skipped with a note if
# the daemon's binaries are missing. Load (uptime) is printed with the table.
# BENCH_CPU (1): the CPU the engine, wire and scheduler benchmarks are pinned to.
set -euo pipefail
quick=0
build=build
for a in "$@"; do
  case $a in
    --quick) quick=1 ;;
    -h|--help) sed -n 2,20p "$0"; exit 0 ;;
    *) build=$a ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/$build/bin"
for b in isoroce-bench-engine isoroce-bench-sched isoroce-bench-wire; do
  [[ -x $bin/$b ]] || { echo "compare.sh: $bin/$b missing: ninja -C $build isoroce-bench-engine isoroce-bench-sched isoroce-bench-wire" >&2; exit 2; }
done
if ((quick)); then
  reps=1; mt=0.1; lat_iters=1000; bw_iters=2000
else
  reps=5; mt=0.3; lat_iters=5000; bw_iters=5000
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gb=(--benchmark_repetitions=$reps --benchmark_min_time=$mt --benchmark_out_format=json)
# The benchmarks pinned to one CPU (BENCH_CPU, default 1), as bench/engine/ab.py
# runs them: unpinned, the engine's rows moved with migrations between CPUs.
pin=()
command -v taskset >/dev/null && pin=(taskset -c "${BENCH_CPU:-1}")
load_before=$(uptime)
echo "running engine ..." >&2
"${pin[@]}" "$bin/isoroce-bench-engine" "${gb[@]}" --benchmark_out="$tmp/engine.json" \
  --benchmark_filter='^BM_(Engine/(write|send|read)|BuildParse|BuildParseFused|MemcpyFrames)/(64|4096)$|^BM_ProtocolFloor/(write|send|read)(_pool)?/4096$|^BM_(Engine/write|BuildParseFused)/65536$' >/dev/null
echo "running wire ..." >&2
"${pin[@]}" "$bin/isoroce-bench-wire" "${gb[@]}" --benchmark_out="$tmp/wire.json" \
  --benchmark_filter='^BM_(Icrc|RteNetCrc|CopyCrcFused|CopyThenCrc|Memcpy)/4096$' >/dev/null
echo "running sched ..." >&2
"${pin[@]}" "$bin/isoroce-bench-sched" "${gb[@]}" --benchmark_out="$tmp/sched.json" \
  --benchmark_filter='^BM_(Tassel|HeapWF2Q)/(1|16384)$' >/dev/null

verbs="$tmp/verbs.txt"
if [[ -x $bin/isoroced && -e $root/$build/lib/libisoroce-verbs.so && $(id -u) == 0 ]] &&
   command -v ib_write_bw >/dev/null && command -v qperf >/dev/null; then
  echo "running verbs (isoroced, perftest, qperf) ..." >&2
  LAT_ITERS=$lat_iters BW_ITERS=$bw_iters "$root/bench/verbs/run.sh" "$build" >"$verbs" 2>&1 || true
  if command -v perf >/dev/null; then
    echo "running small-message rate (bench/verbs/small.sh) ..." >&2
    ROUNDS=$((quick ? 1 : 3)) N=$((quick ? 300000 : 1000000)) "$root/bench/verbs/small.sh" "$build" >"$tmp/small.txt" 2>&1 || true
  fi
else
  echo "verbs rows skipped: needs root, $build/bin/isoroced, libisoroce-verbs.so, perftest and qperf" >"$verbs"
fi
load_after=$(uptime)

python3 - "$tmp" "$reps" "$load_before" "$load_after" <<'PY'
import json, re, statistics, sys

tmp, reps, load0, load1 = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

def runs(name):
    out = {}
    for r in json.load(open(f"{tmp}/{name}.json"))["benchmarks"]:
        if r.get("run_type") == "aggregate" or r.get("error_occurred"):
            continue
        out.setdefault(r["run_name"], []).append(r)
    return out

def med(rs, key):
    return statistics.median(r[key] for r in rs)

eng, wire, sch = runs("engine"), runs("wire"), runs("sched")
rows = []  # figure, value, baseline, ratio, goal

def ns_item(rs):
    return 1e9 / med(rs, "items_per_second")

for size, label in ((4096, "4 KB"), (64, "64 B")):
    for verb in ("write", "send", "read"):
        e = eng.get(f"BM_Engine/{verb}/{size}")
        fl = eng.get(f"BM_BuildParseFused/{size}")
        if not e or not fl:
            continue
        pkt = med(e, "s_per_data_pkt") * 1e9
        floor = ns_item(fl)
        goal = "<= 1.2x" if (verb == "write" and size == 4096) else ""
        rows.append((f"engine {verb.upper()} {label}, ns per data packet", f"{pkt:.0f} ns",
                     f"codec floor {floor:.0f} ns", f"{pkt / floor:.2f}x", goal))
# One-packet 4 KB messages against the codec work their protocol needs (a READ's
# request; a WRITE's first packet checked before it is stored): BM_ProtocolFloor.
for verb in ("write", "send", "read"):
    e, pf = eng.get(f"BM_Engine/{verb}/4096"), eng.get(f"BM_ProtocolFloor/{verb}/4096")
    if e and pf:
        pkt, floor = med(e, "s_per_data_pkt") * 1e9, ns_item(pf)
        rows.append((f"engine {verb.upper()} 4 KB, ns per data packet", f"{pkt:.0f} ns",
                     f"protocol floor {floor:.0f} ns", f"{pkt / floor:.2f}x", ""))
# The same codec work with its frames in as many buffers as one of the engine's
# transmit calls fills at 4 KB (BM_ProtocolFloor/<verb>_pool): what the burst's
# cold frame lines cost is in this floor too.
for verb in ("write", "send", "read"):
    e, pf = eng.get(f"BM_Engine/{verb}/4096"), eng.get(f"BM_ProtocolFloor/{verb}_pool/4096")
    if e and pf:
        pkt, floor = med(e, "s_per_data_pkt") * 1e9, ns_item(pf)
        bufs, calls = med(pf, "frame_buffers"), med(e, "frames_per_call")
        rows.append((f"engine {verb.upper()} 4 KB, ns per data packet", f"{pkt:.0f} ns",
                     f"protocol floor, {bufs:.0f} frame buffers {floor:.0f} ns", f"{pkt / floor:.2f}x",
                     "" if round(bufs) == round(calls) else f"engine's burst {calls:.1f} frames"))
# A 64 KB WRITE (ib_write_bw's message): 16 packets of 4 KB, 15 of them past the
# first, whose copy the engine fuses with the ICRC check as the floor does.
e, fl = eng.get("BM_Engine/write/65536"), eng.get("BM_BuildParseFused/65536")
if e and fl:
    pkt, floor = med(e, "s_per_data_pkt") * 1e9, ns_item(fl)
    rows.append(("engine WRITE 64 KB, ns per 4 KB data packet", f"{pkt:.0f} ns", f"codec floor {floor:.0f} ns",
                 f"{pkt / floor:.2f}x", "<= 1.2x"))
old, new = eng.get("BM_BuildParse/4096"), eng.get("BM_BuildParseFused/4096")
if old and new:
    rows.append(("codec floor 4 KB, payload read once per side", f"{ns_item(new):.0f} ns",
                 f"ICRC as its own pass {ns_item(old):.0f} ns", f"{ns_item(old) / ns_item(new):.2f}x faster", ""))

def gbs(rs):
    return med(rs, "bytes_per_second") / 1e9

if "BM_Icrc/4096" in wire and "BM_RteNetCrc/4096" in wire:
    a, b = gbs(wire["BM_Icrc/4096"]), gbs(wire["BM_RteNetCrc/4096"])
    rows.append(("ICRC, 4 KB datagram", f"{a:.1f} GB/s", f"rte_net_crc {b:.1f} GB/s", f"{a / b:.2f}x", ""))
if "BM_CopyCrcFused/4096" in wire and "BM_CopyThenCrc/4096" in wire:
    a, b = gbs(wire["BM_CopyCrcFused/4096"]), gbs(wire["BM_CopyThenCrc/4096"])
    m = gbs(wire["BM_Memcpy/4096"]) if "BM_Memcpy/4096" in wire else None
    rows.append(("copy + CRC 4 KB in one pass", f"{a:.1f} GB/s", f"memcpy then CRC {b:.1f} GB/s", f"{a / b:.2f}x",
                 f"memcpy alone {m:.1f} GB/s" if m else ""))

for qps in (16384, 1):
    t, h = sch.get(f"BM_Tassel/{qps}"), sch.get(f"BM_HeapWF2Q/{qps}")
    if not t or not h:
        continue
    tv = [r["items_per_second"] for r in t]
    ratios = [a / b["items_per_second"] for a, b in zip(tv, h)]
    rng = f" (runs {min(tv) / 1e6:.1f}-{max(tv) / 1e6:.1f}, ratios {min(ratios):.2f}-{max(ratios):.2f})" if len(tv) > 1 else ""
    rows.append((f"Tassel, {qps} backlogged QPs, one core", f"{statistics.median(tv) / 1e6:.1f} Mpps{rng}",
                 f"heap WF2Q+ {med(h, 'items_per_second') / 1e6:.1f} Mpps", f"{statistics.median(ratios):.2f}x",
                 ">= 30 Mpps, >= 3x every run" if qps == 16384 else ""))

v = open(f"{tmp}/verbs.txt").read()
def grab(label, col=0):
    for line in v.splitlines():
        if line.startswith(label):
            vals = re.findall(r"([0-9.]+) (?:us|MB/s)", line)
            return float(vals[col]) if len(vals) > col else None
    return None
if "skipped" in v:
    rows.append(("verbs rows", v.strip(), "", "", ""))
else:
    bw = grab("ib_write_bw 65536 B")
    mcs = grab("memcpy 64 KB, streaming")
    if bw and mcs:
        rows.append(("ib_write_bw 64 KB through isoroced", f"{bw:.0f} MB/s", f"streaming memcpy {mcs:.0f} MB/s",
                     f"{bw / mcs:.2f}", ">= 0.50"))
    small = grab("ib_write_bw 64 B")
    if small:
        rows.append(("ib_write_bw 64 B, one application thread", f"{small / 64:.2f} M msg/s", "", "", "2x of 1.2 M/s"))
    try:
        for line in open(f"{tmp}/small.txt"):
            f = line.split()
            # bench/verbs/small.sh's table: build, M msg/s, worker busy, worker CPU, client CPU, client
            # post path (ns per message)
            if len(f) >= 5 and all(re.fullmatch(r"[0-9.]+", x) for x in f[1:]) and float(f[2]) > 0:
                rate, busy = float(f[1]), float(f[2])
                rows.append(("64 B WRITE: worker busy time per message (both ends)", f"{busy:.0f} ns",
                             f"achieved {rate:.2f} M msg/s", f"{rate * busy / 1e3:.2f} of the worker's {1e3 / busy:.1f} M msg/s",
                             "busy time down, utilisation up"))
    except FileNotFoundError:
        pass
    tcp = {"unpinned": grab("kernel TCP latency (qperf"), "apps on CPU 0": grab("kernel TCP latency on CPU 0")}
    # Both layouts, each against TCP in the same layout: ib_write_lat spins on memory
    # for the peer's WRITE, so with both perftest processes on CPU 0 each round trip
    # can wait for the other's time slice.
    for t in ("ib_write_lat", "ib_send_lat"):
        for layout in ("apps on CPU 0", "unpinned"):
            med_, p99 = grab(f"{t} 2 B ({layout})", 0), grab(f"{t} 2 B ({layout})", 1)
            base = tcp[layout]
            if med_ and base:
                rows.append((f"{t} 2 B median / p99, {layout}", f"{med_:.2f} / {p99:.1f} us",
                             f"qperf tcp_lat {base:.2f} us, {layout}", f"{med_ / base:.2f}", ""))

print(f"\nbench/compare.sh{' --quick' if reps == 1 else ''}: {reps} repetition(s), medians")
print(f"load before: {load0.strip()}\nload after:  {load1.strip()}\n")
print("| figure | measured | baseline, same run | ratio | goal |")
print("|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(r) + " |")
PY
