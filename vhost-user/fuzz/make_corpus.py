#!/usr/bin/env python3
"""Writes the seed corpus for vhost_user_message_fuzz into vhost-user/fuzz/corpus/.

The input layout is documented at the top of message_fuzz.cpp: one byte of options
(queue pairs, memory guard policy), then records (fd spec, request, flags, payload
length, payload). Each seed is a small conversation a frontend could have: QEMU's
handshake and ring setup with a packet in guest memory, memory slots, the dirty log,
and hostile messages and fds (sockets, timerfds, a too-small memfd), spread over the
four memory guard policies.
Run: python3 vhost-user/fuzz/make_corpus.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
NEED_REPLY = 0x8
V1 = 0x1
# fd kinds: bits 4-5 of the fd spec, and bit 7 for the second four.
EVENTFD, RAM, SMALL, EVENTFD_RAM = 0x00, 0x10, 0x20, 0x30
SOCKET, TIMERFD, RAM_SOCKET, EVENTFD_TIMERFD = 0x80, 0x90, 0xA0, 0xB0
VIA_SOCKET = 0x40
# options byte: bits 0-1 queue pairs - 1, bits 2-3 the memory guard policy.
RCU, MUTEX, RWSEM, PTHREAD_RWLOCK = 0x0, 0x4, 0x8, 0xC
GUEST_WRITE, POLL = 0xFFFFFFFF, 0xFFFFFFFE
UVA = 0x7F0000000000
RAM_BYTES = 64 * 1024
PROTOCOL = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 4) | (1 << 15) | (1 << 16)
FEATURES = (1 << 32) | (1 << 15) | (1 << 29) | (1 << 28) | (1 << 30)


def rec(request, payload=b"", flags=V1 | NEED_REPLY, fds=0, kind=EVENTFD, socket=False):
    spec = (fds & 0xF) | kind | (VIA_SOCKET if socket else 0)
    return struct.pack("<BIIH", spec, request, flags, len(payload)) + payload


def u64(v):
    return struct.pack("<Q", v)


def state(index, num):
    return struct.pack("<II", index, num)


def handshake(protocol=PROTOCOL, features=FEATURES):
    return (rec(3) + rec(1) + rec(15) + rec(16, u64(protocol)) + rec(17) + rec(2, u64(features)) +
            rec(36))


# VIRTIO_F_ACCESS_PLATFORM and the back-end channel (BACKEND_REQ, protocol bit 5).
IOMMU_FEATURES = FEATURES | (1 << 33)
IOMMU_PROTOCOL = PROTOCOL | (1 << 5)
UPDATE, INVALIDATE = 2, 3


def iotlb(iova, size, uaddr=0, perm=0, kind=UPDATE):
    return rec(22, struct.pack("<QQQBB6x", iova, size, uaddr, perm, kind))


def mem_table():
    return rec(5, struct.pack("<II", 1, 0) + struct.pack("<QQQQ", 0, RAM_BYTES, UVA, 0), fds=1, kind=RAM)


def ring_setup(index, size=8, desc=0x0, avail=0x100, used=0x200, base=UVA):
    addr = struct.pack("<IIQQQQ", index, 0, base + desc, base + used, base + avail, used)
    return (rec(8, state(index, size)) + rec(10, state(index, 0)) + rec(9, addr) +
            rec(12, u64(index), fds=1) + rec(13, u64(index), fds=1) + rec(18, state(index, 1)))


def guest_packet():
    desc = struct.pack("<QIHH", 0x1000, 12 + 5, 0, 0)
    avail = struct.pack("<HHH", 0, 1, 0)
    return (rec(GUEST_WRITE, struct.pack("<I", 0x0) + desc) + rec(GUEST_WRITE, struct.pack("<I", 0x100) + avail) +
            rec(GUEST_WRITE, struct.pack("<I", 0x1000) + bytes(12) + b"hello") + rec(POLL))


def write(name, options, body):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes([options]) + body)


def main():
    os.makedirs(OUT, exist_ok=True)
    write("qemu_tx_packet", 0, handshake() + mem_table() + ring_setup(1) + guest_packet() + rec(11, state(1, 0)))
    write("qemu_via_socket", 0,
          rec(3, socket=True) + rec(1, socket=True) + rec(16, u64(PROTOCOL), socket=True) +
          rec(5, struct.pack("<II", 1, 0) + struct.pack("<QQQQ", 0, RAM_BYTES, UVA, 0), fds=1, kind=RAM,
              socket=True) +
          rec(8, state(0, 8), socket=True) + rec(12, u64(0x100), socket=True))
    write("mem_slots", 1 | RWSEM,
          handshake() +
          rec(37, u64(0) + struct.pack("<QQQQ", 0, 0x8000, UVA, 0), fds=1, kind=RAM) +
          rec(37, u64(0) + struct.pack("<QQQQ", 0x100000, 0x1000, UVA + 0x100000, 0), fds=1, kind=SMALL) +
          rec(38, u64(0) + struct.pack("<QQQQ", 0x100000, 0x1000, UVA + 0x100000, 0)))
    write("dirty_log", PTHREAD_RWLOCK,
          handshake() + mem_table() + rec(6, struct.pack("<QQ", 64, 0), fds=1, kind=SMALL) +
          ring_setup(1) + rec(2, u64(FEATURES | (1 << 26))) +
          rec(9, struct.pack("<IIQQQQ", 1, 1, UVA, UVA + 0x200, UVA + 0x100, 0x200)) + guest_packet())
    write("status_mtu_rarp", 3,
          handshake() + rec(39, u64(0xF)) + rec(40) + rec(20, u64(1500)) + rec(19, u64(0x112233445566)) +
          rec(7, fds=1) + rec(4))
    # IOVAs equal to guest physical addresses; the rings' page first, the packet's later
    # (a miss, then its update), an invalidation and a miss again, then hostile IOTLB
    # messages (outside memory, no access, a frontend "miss", an unknown type).
    write("iommu", 0,
          handshake(IOMMU_PROTOCOL, IOMMU_FEATURES) + mem_table() + rec(21, fds=1, kind=SOCKET) +
          ring_setup(1, base=0) + guest_packet() + iotlb(0, 0x1000, UVA, 3) + rec(POLL) +
          iotlb(0x1000, 0x1000, UVA + 0x1000, 1) + rec(POLL) + iotlb(0x1000, 0x1000, kind=INVALIDATE) +
          guest_packet() + rec(POLL) + iotlb(0, 0, kind=INVALIDATE) + iotlb(0x5000, 0x1000, UVA + RAM_BYTES, 3) +
          iotlb(0, 1, UVA, 0) + iotlb(0, 1, UVA, 3, 1) + iotlb(0, 1, UVA, 3, 9) + rec(11, state(1, 0)))
    write("hostile", 0,
          handshake() + rec(8, state(0, 100)) + rec(8, state(9, 8)) + rec(12, u64(0x300)) +
          rec(5, struct.pack("<II", 2, 0) + bytes(64), fds=1, kind=RAM) + rec(999) +
          rec(1, flags=0x2) + rec(12, u64(0), fds=8))
    # Fds of the wrong kind: each refused (REPLY_ACK), then the right one accepted.
    region = struct.pack("<QQQQ", 0, RAM_BYTES, UVA, 0)
    write("hostile_fds", 1 | MUTEX,
          handshake() +
          rec(5, struct.pack("<II", 1, 0) + region, fds=1, kind=SOCKET) +
          rec(5, struct.pack("<II", 1, 0) + region, fds=1, kind=SMALL) +
          rec(5, struct.pack("<II", 2, 0) + region + struct.pack("<QQQQ", 0x100000, 0x1000, UVA + 0x100000, 0),
              fds=2, kind=RAM_SOCKET) +
          rec(37, u64(0) + struct.pack("<QQQQ", 0x100000, 0x1000, UVA + 0x100000, 0), fds=1, kind=TIMERFD) +
          mem_table() +
          rec(8, state(1, 8)) + rec(10, state(1, 0)) +
          rec(9, struct.pack("<IIQQQQ", 1, 0, UVA, UVA + 0x200, UVA + 0x100, 0x200)) +
          rec(12, u64(1), fds=1, kind=SOCKET) + rec(12, u64(1), fds=1, kind=TIMERFD) +
          rec(12, u64(1), fds=1, kind=RAM, socket=True) + rec(12, u64(1), fds=1) +
          rec(13, u64(1), fds=1, kind=SOCKET, socket=True) + rec(13, u64(1), fds=1, kind=SMALL) +
          rec(13, u64(1), fds=1) +
          rec(14, u64(1), fds=1, kind=TIMERFD) + rec(14, u64(1), fds=1) +
          rec(7, fds=1, kind=SOCKET) + rec(7, fds=1) + guest_packet())


if __name__ == "__main__":
    main()
