"""What hostile_wire.py and hostile_cm.py share: the command line
(CONFIG.json ATTACK...), the raw socket on the config's interface, and the JSON
of what each attack sent, printed on stdout for the test to read."""
import json
import socket
import sys


def run(attacks, doc):
    """attacks(cfg, sock, names) -> {name: frames sent}; returns the exit status."""
    if len(sys.argv) < 3:
        print(doc, file=sys.stderr)
        return 2
    cfg = json.load(open(sys.argv[1]))
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    sock.bind((cfg["iface"], 0))
    print(json.dumps(attacks(cfg, sock, sys.argv[2:])))
    return 0
