#!/usr/bin/env python3
"""rarp_capture.py - prints every RARP frame (ethertype 0x8035) an interface receives.

    rarp_capture.py IFNAME

One line per frame, flushed at once: `rarp len=N src=MAC op=OP sha=MAC tha=MAC
hex=BYTES` (op 3: request reverse, the announcement QEMU and the backends send after a
migration). Runs until killed. Needs CAP_NET_RAW (a packet socket).

The socket takes every protocol (ETH_P_ALL) and filters here: a socket bound to one
protocol sees a bridge port's frames only after the bridge, which consumes them. Frames
the interface sends (PACKET_OUTGOING) are skipped: for a tap, only what its backend
wrote into it counts.
"""
import socket
import sys

ETH_P_ALL = 0x0003
ETH_P_RARP = 0x8035


def mac(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: rarp_capture.py IFNAME", file=sys.stderr)
        return 64
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((sys.argv[1], ETH_P_ALL))
    print(f"capturing RARP on {sys.argv[1]}", file=sys.stderr, flush=True)
    while True:
        frame, address = sock.recvfrom(65536)
        if address[2] == socket.PACKET_OUTGOING or frame[12:14] != ETH_P_RARP.to_bytes(2, "big"):
            continue
        if len(frame) < 42:
            print(f"rarp len={len(frame)} short hex={frame.hex()}", flush=True)
            continue
        op = int.from_bytes(frame[20:22], "big")
        print(f"rarp len={len(frame)} src={mac(frame[6:12])} op={op} sha={mac(frame[22:28])} "
              f"tha={mac(frame[32:38])} hex={frame.hex()}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
