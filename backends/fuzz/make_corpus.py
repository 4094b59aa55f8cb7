#!/usr/bin/env python3
"""Writes the seed corpus for backends_offload_fuzz into backends/fuzz/corpus/.

The input layout is documented at the top of offload_fuzz.cpp: an options byte, a
sender-features byte, a 10-byte virtio_net_hdr, then the frame. Each seed is a valid
frame a Linux guest could send with the header it would send (partial checksum, hdr_len
the header length): TCPv4 / TCPv6 TSO, UFO and USO over IPv4 and IPv6, with VLAN tags,
IPv4 and TCP options, IPv6 extension headers, ECN, one 64 KiB frame, and a partial
checksum without GSO. Run: python3 backends/fuzz/make_corpus.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
NEEDS_CSUM = 1
TCPV4, UDP, TCPV6, UDP_L4, ECN = 1, 3, 4, 5, 0x80
ALL_FEATURES = 0x3F  # CSUM, HOST_TSO4, HOST_TSO6, HOST_ECN, HOST_UFO, HOST_USO
SRC4, DST4 = bytes([10, 77, 0, 2]), bytes([10, 77, 0, 1])
SRC6 = bytes.fromhex("fd000000000000000000000000000002")
DST6 = bytes.fromhex("fd000000000000000000000000000001")


def fold(s):
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def csum16(data):
    if len(data) % 2:
        data += b"\0"
    return fold(sum(struct.unpack(f"!{len(data) // 2}H", data)))


def payload(n, seed=1):
    return bytes((i * 131 + seed * 17 + (i >> 8)) & 0xFF for i in range(n))


def frame(ipv6, proto, data, vlans=(), ip_options=b"", tcp_options=b"", tcp_flags=0x18, extensions=()):
    """Ethernet [+ VLAN tags] + IPv4/IPv6 [+ options/extension headers] + TCP/UDP with
    the pseudo-header sum in the checksum field. Returns (frame, l4 offset)."""
    eth = bytes([2, 0, 0, 0, 0, 0x0B, 2, 0, 0, 0, 0, 0x0A])
    for tpid, tci in vlans:
        eth += struct.pack("!HH", tpid, tci)
    eth += struct.pack("!H", 0x86DD if ipv6 else 0x0800)
    if proto == 6:
        l4 = struct.pack("!HHIIBBHHH", 40000, 5001, 1000, 1, (5 + len(tcp_options) // 4) << 4, tcp_flags,
                         65535, 0, 0) + tcp_options
    else:
        l4 = struct.pack("!HHHH", 40000, 5001, 8 + len(data), 0)
    l4 += data
    if ipv6:
        chain = [t for t, _ in extensions] + [proto]
        ext = b""
        for i, (_, length) in enumerate(extensions):
            ext += bytes([chain[i + 1], length // 8 - 1, 1, length - 4]) + bytes(length - 4)
        ip = struct.pack("!IHBB", 0x60000000, len(ext) + len(l4), chain[0], 64) + SRC6 + DST6 + ext
        addresses = SRC6 + DST6
    else:
        ihl = 20 + len(ip_options)
        ip = struct.pack("!BBHHHBBH", 0x40 | ihl // 4, 0, ihl + len(l4), 0x1234, 0x4000, 64, proto, 0)
        ip += SRC4 + DST4 + ip_options
        ip = ip[:10] + struct.pack("!H", 0xFFFF ^ csum16(ip)) + ip[12:]
        addresses = SRC4 + DST4
    pseudo = fold(csum16(addresses) + proto + (len(l4) >> 16) + (len(l4) & 0xFFFF))
    at = 16 if proto == 6 else 6
    l4 = l4[:at] + struct.pack("!H", pseudo) + l4[at + 2:]
    return eth + ip + l4, len(eth) + len(ip)


def seed(name, built, gso_type, gso_size, options=0, features=ALL_FEATURES, proto=6):
    data, l4 = built
    hdr_len = l4 + (20 if proto == 6 else 8)
    csum_offset = 16 if proto == 6 else 6
    header = struct.pack("<BBHHHH", NEEDS_CSUM, gso_type, hdr_len, gso_size, l4, csum_offset)
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes([options, features]) + header + data)


def main():
    os.makedirs(OUT, exist_ok=True)
    seed("tcp4_tso", frame(False, 6, payload(4000)), TCPV4, 1448)
    seed("tcp4_partial", frame(False, 6, payload(3000, 2)), TCPV4, 1000, options=1)
    seed("tcp4_vlan_options_ecn",
         frame(False, 6, payload(2500, 3), vlans=[(0x88A8, 10), (0x8100, 20)], ip_options=bytes([0x94, 4, 0, 0]),
               tcp_options=bytes([1, 1, 8, 10]) + bytes(8), tcp_flags=0x80 | 0x18 | 0x01),
         TCPV4 | ECN, 700)
    seed("tcp6_extensions", frame(True, 6, payload(3000, 4), extensions=[(0, 8), (60, 16)]), TCPV6, 1220)
    seed("ufo4", frame(False, 17, payload(5000, 5)), UDP, 1480, proto=17)
    seed("ufo6_extensions", frame(True, 17, payload(4000, 6), vlans=[(0x8100, 3)], extensions=[(0, 8)]), UDP, 1232,
         proto=17)
    seed("uso4", frame(False, 17, payload(4500, 7)), UDP_L4, 1472, options=1, proto=17)
    seed("uso6", frame(True, 17, payload(4500, 8)), UDP_L4, 1452, proto=17)
    seed("tcp4_stop_early", frame(False, 6, payload(6000, 9)), TCPV4, 1000, options=3 << 3)
    seed("tcp4_64k", frame(False, 6, payload(65495, 10)), TCPV4, 1448)
    # A partial checksum without GSO (completed in software for a receiver without GUEST_CSUM).
    seed("csum_only", frame(False, 6, payload(333, 11)), 0, 0)


if __name__ == "__main__":
    main()
