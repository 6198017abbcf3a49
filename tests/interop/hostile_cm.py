#!/usr/bin/python3
"""Malformed and hostile IB CM MADs to a daemon's QP1, as RoCEv2 UD frames
on the wire (IPv4); prints, per attack, how many frames it sent (JSON).

  hostile_cm.py CONFIG.json ATTACK...

CONFIG: iface, src_mac (ours), dst_mac/dst_ip (the target daemon), own_ip
(our source address, answered by our kernel's ARP), listen_port (an rdma_cm
TCP port someone listens on at the target), unknown_port (nobody does).

Attacks: truncated, bad_base_version, bad_class, bad_class_version,
bad_method, bad_attribute, oversized, bad_qkey, req_unknown_service,
duplicate_req, req_qp1, dreq_unknown, rep_unknown, rtu_unknown. Each frame is
a UD SEND_ONLY to QPN 1 (Q_Key 0x80010000, source QP 1) built with scapy's
RoCE layer (valid ICRC); the MAD inside is what the attack breaks. Only the
link of the test's own namespaces is used.
"""
import struct
import sys

import hostile_common
from scapy.all import Ether, IP, UDP, Raw, raw
from scapy.contrib.roce import BTH

UD_SEND_ONLY = 0x64
GSI_QKEY = 0x80010000
MAD_BYTES = 256
REQ, MRA, REJ, REP, RTU, DREQ, DREP = 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16


def frame(cfg, mad, qkey=GSI_QKEY, psn=0):
    deth = struct.pack("!II", qkey, 1)
    payload = deth + mad
    pad = (-len(payload)) & 3
    p = (Ether(src=cfg["src_mac"], dst=cfg["dst_mac"])
         / IP(src=cfg["own_ip"], dst=cfg["dst_ip"], tos=0, ttl=64, flags="DF")
         / UDP(sport=0xc001, dport=4791, chksum=0)
         / BTH(opcode=UD_SEND_ONLY, padcount=pad, dqpn=1, ackreq=0, psn=psn & 0xffffff)
         / Raw(payload + b"\0" * pad))
    return raw(p)


def mad(attr, tid, body=b"", base=1, mclass=0x07, cver=2, method=0x03):
    hdr = struct.pack("!BBBBHHQHHI", base, mclass, cver, method, 0, 0, tid, attr, 0, 0)
    m = hdr + body
    return m + b"\0" * (MAD_BYTES - len(m)) if len(m) < MAD_BYTES else m


def service_id(port):
    return 0x0000000001060000 | port  # rdma_cm RDMA_PS_TCP


def req(comm_id, sid, qpn=0x1234, private=b""):
    """A REQ that passes the CM's own checks (QPN >= 2, RC, MTU 1024)."""
    b = bytearray(MAD_BYTES - 24)
    struct.pack_into("!I", b, 0, comm_id)
    struct.pack_into("!Q", b, 8, sid)
    struct.pack_into("!Q", b, 16, 0x0200aafffe0000ee)      # local CA GUID
    struct.pack_into("!I", b, 32, (qpn << 8) | 1)          # QPN, responder resources
    struct.pack_into("!I", b, 36, 1)                        # initiator depth
    b[43] = 20 << 3                                         # remote CM timeout, RC, no E2E
    struct.pack_into("!I", b, 44, (0x1000 << 8) | (20 << 3) | 7)  # PSN, local timeout, retries
    struct.pack_into("!H", b, 48, 0xffff)                  # P_Key
    b[50] = (3 << 4) | 7                                    # MTU 1024, RNR retry 7
    b[51] = 3 << 4                                          # max CM retries 3
    b[108:108 + len(private)] = private
    return bytes(b)


def attacks(cfg, sock, names):
    sent = {}

    def out(name, mads, **kw):
        for m in mads:
            sock.send(frame(cfg, m, **kw))
        sent[name] = sent.get(name, 0) + len(mads)

    listen_sid = service_id(int(cfg["listen_port"]))
    for name in names:
        if name == "truncated":
            out(name, [mad(REQ, 1, req(0x101, listen_sid))[:k] for k in (0, 10, 24, 100, 255)])
        elif name == "bad_base_version":
            out(name, [mad(REQ, 2, req(0x102, listen_sid), base=b) for b in (0, 2, 0x81)])
        elif name == "bad_class":
            out(name, [mad(REQ, 3, req(0x103, listen_sid), mclass=c) for c in (0x01, 0x03, 0x04, 0x81)])
        elif name == "bad_class_version":
            out(name, [mad(REQ, 4, req(0x104, listen_sid), cver=v) for v in (0, 1, 3)])
        elif name == "bad_method":
            out(name, [mad(REQ, 5, req(0x105, listen_sid), method=m) for m in (0x01, 0x81)])
        elif name == "bad_attribute":
            out(name, [mad(a, 6, b"\x77" * 32) for a in (0x0000, 0x0019, 0x001a, 0x7777, 0xffff)])
        elif name == "oversized":
            # More than a MAD: a REQ whose private data runs past 256 bytes.
            out(name, [mad(REQ, 7, req(0x107, listen_sid, private=b"\xaa" * 92) + b"\xbb" * 700)])
        elif name == "bad_qkey":
            out(name, [mad(REQ, 8, req(0x108, listen_sid))], qkey=0x12345678)
        elif name == "req_unknown_service":
            out(name, [mad(REQ, 9, req(0x109, service_id(int(cfg["unknown_port"]))))])
        elif name == "duplicate_req":
            # No rdma_cm header in its private data: refused (REJ), and its
            # copy gets the same REJ again.
            m = mad(REQ, 10, req(0x10a, listen_sid))
            out(name, [m, m, m])
        elif name == "req_qp1":
            out(name, [mad(REQ, 11, req(0x10b, listen_sid, qpn=1))])
        elif name == "dreq_unknown":
            out(name, [mad(DREQ, 12 + k, struct.pack("!II", 0x5000 + k, 0x6000 + k)) for k in range(8)])
        elif name == "rep_unknown":
            out(name, [mad(REP, 30 + k, struct.pack("!II", 0x7000 + k, 0x8000 + k)) for k in range(4)])
        elif name == "rtu_unknown":
            out(name, [mad(RTU, 40 + k, struct.pack("!II", 0x9000 + k, 0xa000 + k)) for k in range(4)])
        else:
            raise SystemExit("unknown attack " + name)
    return sent



if __name__ == "__main__":
    sys.exit(hostile_common.run(attacks, __doc__))
