#!/usr/bin/env python3
"""Writes the seed corpora for virtio_device_fuzz (virtio/fuzz/corpus/) and
virtio_packed_device_fuzz (virtio/fuzz/corpus-packed/).

The input layout is documented at the top of device_fuzz.cpp. Each seed is a small,
valid guest: a queue of 8 at desc 0x0 / avail 0x100 / used 0x200 in region A, buffers
from 0x1000, with a few chains made available. Run: python3 virtio/fuzz/make_corpus.py
"""
import os
import struct

NEXT, WRITE, INDIRECT = 1, 2, 4
DESC, AVAIL, USED = 0x0, 0x100, 0x200
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
OUT_PACKED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus-packed")
PACKED_AVAIL, PACKED_USED = 1 << 7, 1 << 15


def seed(name, flags, descs, heads, last_avail=0, frame_len=0, log2_size=3, extra=(), avail_base=None,
         frontend=False, tx_pops=15):
    memory = bytearray(0x1000 + 0x400)
    for i, (addr, length, dflags, nxt) in enumerate(descs):
        struct.pack_into("<QIHH", memory, DESC + 16 * i, addr, length, dflags, nxt)
    size = 1 << log2_size
    start = last_avail if avail_base is None else avail_base
    for k, head in enumerate(heads):
        struct.pack_into("<H", memory, AVAIL + 4 + 2 * ((start + k) % size), head)
    struct.pack_into("<H", memory, AVAIL + 2, (start + len(heads)) & 0xFFFF)  # avail->idx
    struct.pack_into("<H", memory, USED + 2, last_avail & 0xFFFF)           # used->idx
    for addr, blob in extra:
        memory[addr:addr + len(blob)] = blob
    if frontend:
        flags |= 8
    header = struct.pack("<BBHHIII", flags, log2_size | (tx_pops << 4), last_avail, frame_len, DESC, AVAIL, USED)
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(header + bytes(memory))


def main():
    os.makedirs(OUT, exist_ok=True)
    # Two transmit chains: header + data, and one single buffer.
    seed("tx_direct", 0x10, [(0x1000, 12, NEXT, 1), (0x1010, 64, 0, 0), (0x1100, 60, 0, 0)], [0, 2])
    # An indirect table of three entries (read, read, write).
    table = struct.pack("<QIHH", 0x1100, 12, NEXT, 1) + struct.pack("<QIHH", 0x1110, 50, NEXT, 2) + \
        struct.pack("<QIHH", 0x1200, 40, WRITE, 0)
    seed("indirect", 0x02, [(0x1800, len(table), INDIRECT, 0)], [0], extra=[(0x1800, table)])
    # Receive buffers for MRG_RXBUF and a 3000-byte frame spread over several chains.
    seed("rx_mergeable", 0x24, [(0x1000 + 0x400 * i, 1024, WRITE, 0) for i in range(4)], [0, 1, 2, 3],
         frame_len=3000, tx_pops=0)
    # EVENT_IDX with indices about to wrap around 65535.
    seed("event_idx_wrap", 0x01, [(0x1000, 64, 0, 0), (0x1100, 64, 0, 0), (0x1200, 64, 0, 0)], [0, 1, 2],
         last_avail=65534)
    # A buffer spanning regions A and B (0x3ff0..0x4030), ring addresses as frontend ones.
    seed("spanning_frontend", 0x00, [(0x3FF0, 0x40, 0, 0)], [0], frontend=True)
    # IN_ORDER: four read-only transmit chains (one batched used entry) then a receive.
    seed("in_order_tx", 0x90, [(0x1000 + 0x100 * i, 64, 0, 0) for i in range(4)], [0, 1, 2, 3], tx_pops=4)
    # IOVA mode (VIRTIO_F_ACCESS_PLATFORM): the buffers' page 1 unmapped (misses), then a
    # write into a read-only page 1 (a violation); frame_len is the IOTLB's page mask.
    seed("iova_miss", 0x38, [(0x1000, 12, NEXT, 1), (0x1010, 64, 0, 0), (0x0800, 60, 0, 0)], [2, 0],
         frame_len=1 << 1)
    seed("iova_read_only", 0x38, [(0x0800, 64, 0, 0), (0x1000, 64, WRITE, 0)], [0, 1], frame_len=1 << 10)
    # Legacy 10-byte header, plain receive.
    seed("rx_legacy", 0x60, [(0x1000, 1514, WRITE, 0)], [0], frame_len=1000, tx_pops=0)


def packed_seed(name, flags, descs, size=8, base=0x8000, frame_len=0, tx_pops=15, burst=4, extra=()):
    """A packed ring of SIZE at 0x0, driver area 0x200, device area 0x210; DESCS are
    (addr, len, id, flags) from the base's position on (the AVAIL/USED bits of the
    base's lap added); buffers from 0x1000. Layout: packed_device_fuzz.cpp."""
    memory = bytearray(0x1000 + 0x400)
    position, wrap = base & 0x7FFF, base >> 15
    for addr, length, buffer_id, dflags in descs:
        lap = PACKED_AVAIL if wrap else PACKED_USED
        struct.pack_into("<QIHH", memory, DESC + 16 * position, addr, length, buffer_id, dflags | lap)
        position += 1
        if position == size:
            position, wrap = 0, wrap ^ 1
    for addr, blob in extra:
        memory[addr:addr + len(blob)] = blob
    header = struct.pack("<BBBHHIII", flags, size - 1, (burst - 1) | (tx_pops << 4), base, frame_len, DESC, 0x200, 0x210)
    with open(os.path.join(OUT_PACKED, name), "wb") as f:
        f.write(header + bytes(memory))


def packed_seeds():
    os.makedirs(OUT_PACKED, exist_ok=True)
    # Transmit: a two-descriptor chain and a single one.
    packed_seed("tx_direct", 0x10, [(0x1000, 12, 0, NEXT), (0x1010, 64, 0, 0), (0x1100, 60, 1, 0)])
    # An indirect table (read, read, write): its entries follow one another.
    table = struct.pack("<QIHH", 0x1100, 12, 0, 0) + struct.pack("<QIHH", 0x1110, 50, 0, 0) + \
        struct.pack("<QIHH", 0x1200, 40, 0, WRITE)
    packed_seed("indirect", 0x02, [(0x1800, len(table), 0, INDIRECT)], extra=[(0x1800, table)])
    # A ring of 5 (not a power of two) with chains running past its end, on the wrap-0 lap.
    packed_seed("wrap_odd_size", 0x41, [(0x1000 + 0x40 * i, 64, i, NEXT if i % 2 == 0 else 0) for i in range(4)],
                size=5, base=3)
    # MRG_RXBUF receive buffers and a 3000-byte frame.
    packed_seed("rx_mergeable", 0x24, [(0x1000 + 0x400 * i, 1024, i, WRITE) for i in range(4)], frame_len=3000,
                tx_pops=0)
    # Ring addresses as frontend ones; a buffer spanning regions A and B.
    packed_seed("spanning_frontend", 0x08, [(0x3FF0, 0x40, 0, 0)])
    # IN_ORDER: four read-only transmit chains (one batched used descriptor).
    packed_seed("in_order_tx", 0x90, [(0x1000 + 0x100 * i, 64, i, 0) for i in range(4)], tx_pops=4)


if __name__ == "__main__":
    main()
    packed_seeds()
