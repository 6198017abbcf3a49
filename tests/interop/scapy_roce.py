#!/usr/bin/python3
"""Interop checks against scapy's RoCE layer (scapy.contrib.roce, IPv4 only).

  scapy_roce.py make OUT.pcap   build packets with scapy's BTH/AETH/CNP layers,
                                write them, print the expected fields as JSON lines
  scapy_roce.py check IN.pcap   verify the ICRC of every RoCEv2 packet with scapy;
                                prints "checked N bad M", exits 1 if any is bad
"""
import json
import random
import struct
import sys

from scapy.all import Ether, IP, UDP, Raw, rdpcap, wrpcap, raw
from scapy.contrib.roce import BTH, AETH, CNPPadding


def base(sport):
    return (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
            / IP(src="10.0.0.1", dst="10.0.0.2", tos=0x68, ttl=64, id=7, flags="DF")
            / UDP(sport=sport, dport=4791, chksum=0))


def make(out):
    rng = random.Random(7)
    pkts, expect = [], []

    def add(pkt, fields):
        pkts.append(pkt)
        expect.append(fields)

    for i in range(8):
        size = rng.randint(0, 200)
        pad = (-size) & 3
        dqpn, psn, sport = rng.randint(1, 0xffffff), rng.randint(0, 0xffffff), rng.randint(0xc000, 0xffff)
        payload = bytes(rng.getrandbits(8) for _ in range(size)) + b"\0" * pad
        p = base(sport) / BTH(opcode=4, solicited=i & 1, padcount=pad, dqpn=dqpn, ackreq=1, psn=psn) / Raw(payload)
        add(p, dict(opcode=4, dest_qp=dqpn, psn=psn, pad=pad, ack_req=True, solicited=bool(i & 1),
                    payload_len=size, udp_sport=sport))
    for i in range(4):
        dqpn, psn, msn, syn = rng.randint(1, 0xffffff), rng.randint(0, 0xffffff), rng.randint(0, 0xffffff), rng.choice([0x00, 0x1f, 0x60, 0x20])
        p = base(0xc123) / BTH(opcode=17, dqpn=dqpn, psn=psn) / AETH(syndrome=syn, msn=msn)
        add(p, dict(opcode=17, dest_qp=dqpn, psn=psn, pad=0, aeth=dict(syndrome=syn, msn=msn), payload_len=0, udp_sport=0xc123))
    for i in range(4):
        va, rkey, ln = rng.getrandbits(64), rng.getrandbits(32), rng.randint(1, 1 << 20)
        dqpn, psn = rng.randint(1, 0xffffff), rng.randint(0, 0xffffff)
        reth = struct.pack("!QII", va, rkey, ln)
        p = base(0xd000) / BTH(opcode=12, dqpn=dqpn, psn=psn, ackreq=1) / Raw(reth)
        add(p, dict(opcode=12, dest_qp=dqpn, psn=psn, reth=dict(va=va, rkey=rkey, len=ln), payload_len=0, udp_sport=0xd000))
    for i in range(2):
        dqpn, psn = rng.randint(1, 0xffffff), rng.randint(0, 0xffffff)
        p = base(0) / BTH(opcode=0x81, becn=1, dqpn=dqpn, psn=psn) / CNPPadding()
        add(p, dict(opcode=0x81, dest_qp=dqpn, becn=True, psn=psn, payload_len=0, udp_sport=0))
    wrpcap(out, pkts)
    for e in expect:
        print(json.dumps(e))


def check(path):
    checked = bad = 0
    for i, p in enumerate(rdpcap(path), 1):
        if not p.haslayer(BTH) or not p.haslayer(IP):
            continue
        stored = raw(p)[-4:]
        q = Ether(raw(p))
        q[BTH].icrc = None
        rebuilt = raw(q)[-4:]
        checked += 1
        if stored != rebuilt:
            bad += 1
            print(f"frame {i}: ICRC {stored.hex()} but scapy computes {rebuilt.hex()}", file=sys.stderr)
    print(f"checked {checked} bad {bad}")
    return 0 if bad == 0 and checked > 0 else 1


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("make", "check"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    if sys.argv[1] == "make":
        make(sys.argv[2])
        sys.exit(0)
    sys.exit(check(sys.argv[2]))
