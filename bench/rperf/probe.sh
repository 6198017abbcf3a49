#!/usr/bin/env bash
# RPerf's RTT on a live isoroced (--loopback, 10 Gb/s ports): isoroce-rperf-probe
# under LD_PRELOAD=libisoroce-verbs.so posts a 64-byte SEND isoroce0 -> isoroce1
# and right after it a loopback SEND isoroce0 -> isoroce0, N times, alone and
# beside a 1 MB RDMA WRITE flow isoroce0 -> isoroce1 (4 in flight), under fifo,
# tassel and justitia, and each SEND alone (--only wire, --only loopback); one
# markdown table (docs/profiling.md, "Latency breakdown").
# LINK=veth: the two devices are instead two af_packet ports of one isoroced
# joined by a veth pair in a network namespace of their own (root).
# LINK=netns: P on a second isoroced: two namespaces joined by a veth pair, one
# daemon (one port) in each, the probe in A (--connect) and its responder in B
# (--serve), both daemons with idle_sleep_us = 10 (root).
# The daemon's worker polls on lcore 1 (the default --lcores 0,1), the probe runs
# pinned to CPU 0 (as bench/verbs/run.sh).
# Usage: bench/rperf/probe.sh [BUILD_DIR]     ITERS=5000 pairs per case
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/$build/bin"
preload="$root/$build/lib/libisoroce-verbs.so"
iters=${ITERS:-5000}
for f in "$bin/isoroced" "$bin/isoroce-ctl" "$bin/isoroce-rperf-probe" "$preload"; do
  [[ -e $f ]] || { echo "missing $f: build isoroced isoroce-ctl isoroce-verbs isoroce-rperf-probe first" >&2; exit 2; }
done
tmp=$(mktemp -d)
daemon=
daemon_b=
ns=
ns_b=
cleanup() {
  [[ -n $daemon ]] && { kill -TERM "$daemon"; wait "$daemon" || true; }
  [[ -n $daemon_b ]] && { kill -TERM "$daemon_b"; wait "$daemon_b" || true; }
  [[ -n $ns ]] && ip netns del "$ns"
  [[ -n $ns_b ]] && ip netns del "$ns_b"
  rm -rf "$tmp"
}
trap cleanup EXIT
ports=(--loopback)
run=()
if [[ ${LINK:-ring} == veth ]]; then
  ns=isoroce-rperf-$$
  ip netns add "$ns"
  ip -n "$ns" link add rpA$$ type veth peer name rpB$$
  ip -n "$ns" link set rpA$$ up
  ip -n "$ns" link set rpB$$ up
  ports=(--port "net_af_packet0,iface=rpA$$,qdisc_bypass=0" --port "net_af_packet1,iface=rpB$$,qdisc_bypass=0"
         --ip 10.9.0.11/24 10.9.0.12/24)
  run=(ip netns exec "$ns")
elif [[ ${LINK:-ring} == netns ]]; then
  ns=isoroce-rperf-a$$ ns_b=isoroce-rperf-b$$
  ip netns add "$ns"
  ip netns add "$ns_b"
  ip link add rpA$$ netns "$ns" type veth peer name rpB$$ netns "$ns_b"
  ip -n "$ns" addr add 10.9.0.1/24 dev rpA$$
  ip -n "$ns_b" addr add 10.9.0.2/24 dev rpB$$
  for n in "$ns" "$ns_b"; do ip -n "$n" link set lo up; done
  ip -n "$ns" link set rpA$$ up
  ip -n "$ns_b" link set rpB$$ up
  echo "idle_sleep_us = 10" >"$tmp/idle.toml"
  ports=(--config "$tmp/idle.toml" --port "net_af_packet0,iface=rpA$$,qdisc_bypass=0" --ip 10.9.0.11/24)
  ports_b=(--config "$tmp/idle.toml" --port "net_af_packet0,iface=rpB$$,qdisc_bypass=0" --ip 10.9.0.12/24)
  run=(ip netns exec "$ns")
fi
for policy in fifo tassel justitia; do
  for case in alone wire_only loopback_only with_bw; do
    sock="$tmp/d.sock"
    ref_a=(); [[ -n $ns_b && $policy == justitia ]] && ref_a=(--ref-peer 10.9.0.12)
    "${run[@]}" "$bin/isoroced" "${ports[@]}" "${ref_a[@]}" --policy "$policy" --link-gbps 10 --socket "$sock" --file-prefix "rperf_probe_$$" \
      -- --no-huge -m 256 >"$tmp/d.log" 2>&1 &
    daemon=$!
    peer=()
    if [[ -n $ns_b ]]; then  # B's worker on CPU ${B_WORKER_CPU:-1} (A's is on CPU 1)
      ref=(); [[ $policy == justitia ]] && ref=(--ref-peer 10.9.0.11)
      ip netns exec "$ns_b" "$bin/isoroced" "${ports_b[@]}" "${ref[@]}" --policy "$policy" --link-gbps 10 --lcores "0,${B_WORKER_CPU:-1}" \
        --socket "$tmp/b.sock" --file-prefix "rperf_probe_b$$" -- --no-huge -m 256 >"$tmp/b.log" 2>&1 &
      daemon_b=$!
      for _ in $(seq 100); do "$bin/isoroce-ctl" --socket "$tmp/b.sock" status >/dev/null 2>&1 && break; sleep 0.1; done
      ip netns exec "$ns_b" env ISOROCE_SOCKET="$tmp/b.sock" LD_PRELOAD="$preload" timeout 600 taskset -c 0 \
        "$bin/isoroce-rperf-probe" --serve 19400 >"$tmp/serve.log" 2>&1 &
      server=$!
      peer=(--connect 10.9.0.2:19400)
    fi
    for _ in $(seq 100); do "$bin/isoroce-ctl" --socket "$sock" status >/dev/null 2>&1 && break; sleep 0.1; done
    bg=()
    [[ $case == with_bw ]] && bg=(--background-bytes 1048576)
    [[ $case == wire_only ]] && bg=(--only wire)
    [[ $case == loopback_only ]] && bg=(--only loopback)
    "${run[@]}" env ISOROCE_SOCKET="$sock" LD_PRELOAD="$preload" timeout 600 taskset -c 0 "$bin/isoroce-rperf-probe" \
      -n "$iters" --warmup 200 "${peer[@]}" "${bg[@]}" --json >"$tmp/$policy.$case.json" || echo "{}" >"$tmp/$policy.$case.json"
    kill -TERM "$daemon"; wait "$daemon" || true; daemon=
    if [[ -n $daemon_b ]]; then wait "$server" || true; kill -TERM "$daemon_b"; wait "$daemon_b" || true; daemon_b=; fi
  done
done
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
def ppp(s): return f"{s['p50_us']:.1f} / {s['p99_us']:.1f} / {s['p999_us']:.1f}" if s else "—"
print("| policy | case | pairs | T_W p50 / p99 / p99.9 | T_L p50 / p99 / p99.9 | T_W − T_L p50 / p99 / p99.9 "
      "| T_L / T_W (means) | background |")
print("|---|---|---|---|---|---|---|---|")
for policy in ("fifo", "tassel", "justitia"):
    for case in ("alone", "wire_only", "loopback_only", "with_bw"):
        j = json.load(open(f"{d}/{policy}.{case}.json"))
        label = {"alone": "alone", "wire_only": "wire SEND only", "loopback_only": "loopback SEND only",
                 "with_bw": "beside 1 MB"}[case]
        if "samples" not in j:
            print(f"| {policy} | {label} | failed | | | | | |"); continue
        bg = f"{j['background']['gbps']:.2f} Gb/s" if case == "with_bw" else "—"
        share = f"{j['t_l']['mean_us'] / j['t_w']['mean_us']:.0%}" if j["rtt"] else "—"
        print(f"| {policy} | {label} | {j['samples']} | {ppp(j['t_w'])} | {ppp(j['t_l'])} | {ppp(j['rtt'])} "
              f"| {share} | {bg} |")
PY
