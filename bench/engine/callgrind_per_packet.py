#!/usr/bin/env python3
"""Instructions per data packet of BM_Engine from a callgrind profile.

    valgrind --tool=callgrind --callgrind-out-file=OUT \
        build/bin/isoroce-bench-engine --benchmark_filter='^BM_Engine/write/64$' \
        --benchmark_min_time=0.2
    bench/engine/callgrind_per_packet.py OUT write [--top N] [--size BYTES]

total:  the inclusive cost of every call from outside the engine into an
        EngineImpl entry point (transmit, receive, post_send, post_recv,
        poll_cq, advance, next_deadline);
codec:  the self cost of isoroce::wire:: functions and libc's mem*;
engine: total - codec;
all divided by the data packets, counted as calls of resp_execute_write or
rx_write_continues or rx_write_first (write), resp_execute_send, rx_send_continues
or rx_send_first (send) or
complete_send (read; times the response
packets of a message of --size BYTES, default 1, with the benchmark's 4096-byte
MTU: give the size for a READ of more than 4 KB). --top N also lists
the N engine functions (not codec) with the largest self cost per data packet.
Valgrind has no AVX-512, so the codec column is the SSE path's; the engine
column is what the benchmark runs.
"""
import re
import sys
from collections import defaultdict

ENTRY = ("transmit", "receive", "post_send", "post_recv", "poll_cq", "advance", "next_deadline")
# The calls that count data packets: a WRITE's in-order first and only packets take
# rx_write_first, its middle and last ones rx_write_continues, a SEND's first and only
# ones rx_send_first, its middle ones rx_send_continues (their false answer, a packet
# that fails a check there and goes the step way, would count twice; the benchmark
# has none).
PKT = {"write": ("resp_execute_write", "rx_write_continues", "rx_write_first"),
       "send": ("resp_execute_send", "rx_send_continues", "rx_send_first"),
       "read": ("complete_send",)}


def parse(path):
    names = {}
    self_cost = defaultdict(int)
    edges = defaultdict(lambda: [0, 0])  # (caller, callee) -> [calls, inclusive]
    fn = None
    cfn = None
    pending_call = None
    name_re = re.compile(r"^\((\d+)\)(?: (.*))?$")
    npos = 1  # position columns before the cost ("positions: instr line" gives 2)

    def resolve(spec):
        m = name_re.match(spec)
        if not m:
            return spec
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
            return m.group(2)
        return names[m.group(1)]

    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            if line.startswith("positions:"):
                npos = len(line.split()) - 1
                continue
            if line.startswith("fn="):
                fn = resolve(line[3:])
                continue
            if line.startswith("cfn="):
                cfn = resolve(line[4:])
                continue
            if line.startswith("calls="):
                pending_call = int(line[6:].split()[0])
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                parts = line.split()
                cost = int(parts[npos]) if len(parts) > npos else 0
                if pending_call is not None:
                    e = edges[(fn, cfn)]
                    e[0] += pending_call
                    e[1] += cost
                    pending_call = None
                else:
                    self_cost[fn] += cost
            # other lines (fl=, fi=, fe=, ob=, cob=, headers) carry no cost
    return self_cost, edges


def short(name):
    return name.split("(")[0]


def in_engine(name):
    return "isoroce::transport::detail::" in name


def is_entry(name):
    s = short(name)
    return s.startswith("isoroce::transport::detail::EngineImpl::") and s.rsplit("::", 1)[1] in ENTRY


def is_codec(name):
    s = short(name)
    return "isoroce::wire::" in s or re.match(r"^_*(mem(cpy|move|set|cmp)|__mem)", s) is not None


def main():
    path, verb = sys.argv[1], sys.argv[2]
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 0
    size = int(sys.argv[sys.argv.index("--size") + 1]) if "--size" in sys.argv else 1
    self_cost, edges = parse(path)
    total = sum(e[1] for (caller, callee), e in edges.items() if is_entry(callee) and not in_engine(caller))
    pkts = sum(e[0] for (caller, callee), e in edges.items()
               if any(short(callee).endswith("::" + f) for f in PKT[verb]))
    if verb == "read":
        pkts *= max(1, (size + 4095) // 4096)
    codec = sum(v for k, v in self_cost.items() if is_codec(k))
    print(f"{verb}: data packets {pkts}, per packet: total {total / pkts:.0f}, codec {codec / pkts:.0f}, "
          f"engine {(total - codec) / pkts:.0f}")
    if top:
        rows = sorted(((v, k) for k, v in self_cost.items() if not is_codec(k)), reverse=True)[:top]
        calls = defaultdict(int)
        for (caller, callee), e in edges.items():
            calls[callee] += e[0]
        for v, k in rows:
            print(f"  {v / pkts:8.1f}  {calls[k] / pkts:5.2f} calls/pkt  {short(k)}")


if __name__ == "__main__":
    main()
