// queue_stats.h - per-virtqueue counters of the datapath, and their snapshot.
//
// Counters are written by the queue's worker only (a relaxed load + store: no locked
// instruction on the hot path, no shared cache line between workers) and read by
// anyone (`uvhost ctl stats`) with relaxed loads: each value is exact and monotonic,
// a snapshot of several is not atomic as a whole. inject_dropped and inject_stopped are
// the exception: producers on other threads count them, with fetch_add.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "uvhost/base/single_writer_counter.h"
#include "uvhost/datapath/poll_mode.h"

namespace uvhost::datapath {

struct QueueCounters {
  base::SingleWriterCounter packets;           // TX: taken from the guest; RX: delivered to it
  base::SingleWriterCounter bytes;             // frame bytes, virtio-net header excluded
  base::SingleWriterCounter dropped;           // TX: refused by the backend or unusable; RX: could not be delivered
  base::SingleWriterCounter kicks;             // guest kicks read from the kick eventfd
  base::SingleWriterCounter calls;             // call eventfd writes
  base::SingleWriterCounter calls_suppressed;  // used entries published without a call (EVENT_IDX / flags)
  base::SingleWriterCounter polls;             // busy polls started (and `always` passes)
  base::SingleWriterCounter poll_ns;           // time spent in them
  std::array<base::SingleWriterCounter, kPollExitCount> exits;  // how each ended (PollExit)
  base::SingleWriterCounter weight_yields;     // turns ended by the packet/byte weight with work left
  base::SingleWriterCounter handler_runs;      // handler invocations
  base::SingleWriterCounter rx_waits;          // RX: waits for the guest to post buffers
  std::atomic<uint64_t> inject_dropped{0};  // RX: frames refused at inject (ring full, queue stopped)
  // RX: the part of inject_dropped refused because the queue was not running (not
  // started, disabled or broken: e.g. no guest driver yet), not because it was full.
  std::atomic<uint64_t> inject_stopped{0};
};

struct QueueSnapshot {
  uint32_t index = 0;
  uint32_t pair = 0;
  bool is_tx = false;
  std::string worker;
  bool started = false;
  bool enabled = false;
  bool broken = false;
  bool no_kick_fd = false;  // started without a kick fd (NOFD): polled as `always`
  PollSettings poll;
  uint64_t packets = 0, bytes = 0, dropped = 0, kicks = 0, calls = 0, calls_suppressed = 0;
  uint64_t polls = 0, poll_ns = 0, weight_yields = 0, handler_runs = 0, rx_waits = 0, inject_dropped = 0;
  uint64_t inject_stopped = 0;
  std::array<uint64_t, kPollExitCount> exits{};
  uint64_t adaptive_average_ns = 0;
};

}  // namespace uvhost::datapath
