#!/usr/bin/python3
"""A third party on the link of an established RoCEv2 flow (IPv4): injects
frames at a daemon and prints, per attack, how many frames it sent (JSON).

  hostile_wire.py CONFIG.json ATTACK...

CONFIG: iface, src_mac (ours), dst_mac/dst_ip (the target daemon), peer_ip
(the flow's legitimate requester), flow_qpn/flow_va/flow_rkey (the target's RC
QP and the MR the flow writes), own_ip/own_qpn/own_psn/own_va/own_rkey/own_len
(a QP on the target connected to us, and its MR), flood (frames).

Attacks: bad_icrc, unknown_qpn, psn_out_of_window, spoofed_source, reth_2gb,
read_beyond_mr, truncated, flood, probe_flood. Frames are built with scapy's
RoCE layer (valid ICRC unless the attack breaks it) and sent on a raw
AF_PACKET socket. Only the link of the test's own namespaces is used.
"""
import random
import socket
import struct
import sys
import time

import hostile_common
from scapy.all import Ether, IP, UDP, Raw, raw
from scapy.contrib.roce import BTH

# IBTA opcodes (RC: 0x00.., UD: 0x60..).
WRITE_FIRST, WRITE_ONLY, READ_REQ, SEND_ONLY = 0x06, 0x0A, 0x0C, 0x04
UD_SEND_ONLY = 0x64


def frame(cfg, opcode, dqpn, psn, payload=b"", src_ip=None, ackreq=1, sport=0xc000):
    pad = (-len(payload)) & 3
    p = (Ether(src=cfg["src_mac"], dst=cfg["dst_mac"])
         / IP(src=src_ip or cfg["own_ip"], dst=cfg["dst_ip"], tos=0x68, ttl=64, flags="DF")
         / UDP(sport=sport, dport=4791, chksum=0)
         / BTH(opcode=opcode, padcount=pad, dqpn=dqpn & 0xffffff, ackreq=ackreq, psn=psn & 0xffffff)
         / Raw(payload + b"\0" * pad))
    return raw(p)


def reth(va, rkey, length):
    return struct.pack("!QII", va & (2**64 - 1), rkey & 0xffffffff, length & 0xffffffff)


def sniff_psn(sock, cfg, seconds=0.3):
    """The highest PSN of the flow's frames to flow_qpn seen on the link."""
    best = None
    end = time.time() + seconds
    sock.settimeout(0.05)
    while time.time() < end:
        try:
            f = sock.recv(9000)
        except socket.timeout:
            continue
        if len(f) < 14 + 20 + 8 + 12 or f[12:14] != b"\x08\x00" or f[14 + 9] != 17:
            continue
        ihl = (f[14] & 15) * 4
        udp = 14 + ihl
        if struct.unpack("!H", f[udp + 2:udp + 4])[0] != 4791:
            continue
        bth = udp + 8
        dqpn = struct.unpack("!I", f[bth + 4:bth + 8])[0] & 0xffffff
        psn = struct.unpack("!I", f[bth + 8:bth + 12])[0] & 0xffffff
        if dqpn == cfg["flow_qpn"] and (best is None or ((psn - best) & 0xffffff) < 0x800000):
            best = psn
    return best


def attacks(cfg, sock, names):
    rng = random.Random(16)
    sent = {}
    send = sock.send

    def out(name, frames):
        for f in frames:
            send(f)
        sent[name] = sent.get(name, 0) + len(frames)

    body = bytes([0xEE]) * 256
    for name in names:
        if name == "bad_icrc":
            fs = []
            for i in range(300):
                f = bytearray(frame(cfg, WRITE_ONLY, cfg["flow_qpn"], rng.getrandbits(24),
                                    reth(cfg["flow_va"], cfg["flow_rkey"], 256) + body, src_ip=cfg["peer_ip"]))
                f[-1 - rng.randrange(4)] ^= 0x5a
                fs.append(bytes(f))
            out(name, fs)
        elif name == "unknown_qpn":
            out(name, [frame(cfg, SEND_ONLY, rng.randrange(0x1000, 0xffffff), rng.getrandbits(24), body)
                       for _ in range(300)])
        elif name == "psn_out_of_window":
            # From the flow's own requester address, PSNs half the space away.
            out(name, [frame(cfg, WRITE_ONLY, cfg["flow_qpn"], rng.getrandbits(24) | 0x400000,
                             reth(cfg["flow_va"], cfg["flow_rkey"], 256) + body, src_ip=cfg["peer_ip"])
                       for _ in range(300)])
        elif name == "spoofed_source":
            # Another address than the QP's peer, the 256 PSNs after what the
            # flow last sent (sniffed; the flow sends ~65 per round, so some
            # arrive exactly when expected): WRITEs of 0xEE into the flow's MR.
            total = 0
            for _ in range(8):
                psn = sniff_psn(sock, cfg)
                if psn is None:
                    continue
                fs = [frame(cfg, WRITE_ONLY, cfg["flow_qpn"], psn + k,
                            reth(cfg["flow_va"] + 4096 * (k % 16), cfg["flow_rkey"], 256) + body)
                      for k in range(1, 257)]
                out(name, fs)
                total += len(fs)
            sent.setdefault(name, total)
        elif name == "reth_2gb":
            psn = cfg["own_psn"]
            fs = [frame(cfg, WRITE_FIRST, cfg["own_qpn"], psn, reth(cfg["own_va"], cfg["own_rkey"], 0x80000000) + body * 4)]
            fs += [frame(cfg, WRITE_ONLY, cfg["own_qpn"], psn + 1, reth(cfg["own_va"], cfg["own_rkey"], 0x80000000) + body)]
            fs += [frame(cfg, WRITE_ONLY, cfg["own_qpn"], psn + 2,
                         reth(cfg["own_va"] + cfg["own_len"] - 16, cfg["own_rkey"], 256) + body)]
            out(name, fs)
        elif name == "read_beyond_mr":
            psn = cfg["own_psn"] + 3
            out(name, [frame(cfg, READ_REQ, cfg["own_qpn"], psn, reth(cfg["own_va"], cfg["own_rkey"], cfg["own_len"] + 4096)),
                       frame(cfg, READ_REQ, cfg["own_qpn"], psn + 1, reth(cfg["own_va"], cfg["own_rkey"], 0x80000000)),
                       frame(cfg, READ_REQ, cfg["own_qpn"], psn + 2, reth(cfg["own_va"] - 8, cfg["own_rkey"], 64)),
                       frame(cfg, READ_REQ, cfg["own_qpn"], psn + 3,
                             reth(cfg["flow_va"], cfg["flow_rkey"], 4096))])  # the flow's MR: another PD
        elif name == "truncated":
            full = frame(cfg, WRITE_ONLY, cfg["flow_qpn"], rng.getrandbits(24),
                         reth(cfg["flow_va"], cfg["flow_rkey"], 256) + body, src_ip=cfg["peer_ip"])
            fs = [full[:n] for n in range(14, 14 + 20 + 8 + 12 + 16 + 4)]
            # A UDP length and an IP total length that promise more than the frame holds.
            f = bytearray(full)
            f[14 + 20 + 4:14 + 20 + 6] = struct.pack("!H", 4000)
            fs.append(bytes(f))
            f = bytearray(full)
            f[14 + 2:14 + 4] = struct.pack("!H", 6000)
            fs.append(bytes(f))
            out(name, fs)
        elif name == "flood":
            f = frame(cfg, SEND_ONLY, cfg["own_qpn"], cfg["own_psn"] + 100, body)  # no receive posted: RNR
            g = frame(cfg, SEND_ONLY, 0xabcdef, 1, body)
            n = int(cfg.get("flood", 20000))
            out(name, [f, g] * (n // 2))
        elif name == "probe_flood":
            # UD probes to QPN 15 (ctrl/reference_echo.h) from forged sources,
            # most of them off-link: each must not cost an ARP broadcast.
            fs = []
            for i in range(int(cfg.get("probes", 2000))):
                # Every source distinct: one in ten on-link (10.9.0.0/24), the rest not.
                if i % 10 == 0:
                    src = "10.9.0.%d" % (20 + (i // 10) % 200)
                else:
                    src = "10.9.%d.%d" % (1 + i // 250, 1 + i % 250)
                msg = b"IRF1" + bytes([1, 0, 0, 0]) + struct.pack("<Q", i)
                deth = struct.pack("!II", 0x150CE, 0x000100 + i)
                fs.append(frame(cfg, UD_SEND_ONLY, 15, i, deth + msg, src_ip=src, ackreq=0))
            out(name, fs)
        else:
            raise SystemExit("unknown attack " + name)
    return sent



if __name__ == "__main__":
    sys.exit(hostile_common.run(attacks, __doc__))
