// switch_mac_table.h - the `switch` backend's MAC learning table: which port a MAC
// address was last seen on, bounded, aging, read on every frame by many threads.
//
// Contract
// --------
//  MacTable maps a unicast MAC address to the PortId it was last learned on.
//  - learn(mac, port, now): records "mac was the source of a frame that entered on
//    `port` at `now`". A new MAC is inserted, a MAC bound to another port is moved
//    (re-learn updates it), a MAC already on `port` has its timestamp refreshed, but
//    at most once per refresh_interval (default 1 s), so that the steady state writes
//    nothing. Multicast, broadcast and all-zero addresses are never learned
//    (kNotUnicast). Returns what happened (LearnResult); the table also counts it
//    (MacTableStats), except kFresh and kNotUnicast, which are per-frame outcomes the
//    caller counts in its own per-thread counters (switch_forwarding.h).
//  - lookup(mac, now): the port `mac` is bound to, or nullopt when it is unknown or its
//    entry is older than max_age (default 300 s: aged entries are never returned).
//    A returned port was bound to `mac` at some instant during the call (never a torn
//    mix of two entries). lookup() never blocks: if a writer keeps changing the same
//    bucket it gives up after kMaxReadAttempts tries and returns nullopt; for a
//    learning switch "unknown" is always a safe answer (the frame is flooded).
//  - Bounded memory: every slot is allocated by the constructor and nothing is
//    allocated afterwards, whatever MACs arrive. A new MAC takes an empty slot of its
//    bucket, else the oldest aged slot (evicting it: evicted_aged); when all kWays
//    slots of its bucket hold live entries it is refused (refused_full) and the frame
//    is simply flooded. Live entries are never evicted by a newcomer, so a guest
//    flooding random source MACs cannot push out the MACs of other guests, only keep
//    new MACs from being learned until its own entries age out (max_age). The bucket
//    is chosen by a keyed hash (random key per table), so a guest cannot aim its MACs
//    at one bucket without knowing the key (the hash is not cryptographic).
//  - remove_port(port): unbinds every MAC bound to `port` (the port is gone); a
//    lookup that starts after it returns never yields `port` (until it is re-learned).
//  - expire(now): evicts every aged entry; learn() also evicts aged entries lazily
//    when it needs their slot. Neither is needed for correctness (aged entries are
//    never returned); expire() keeps size() meaningful.
//  - `now` is supplied by the caller (steady_clock in the datapath, anything in
//    tests). Times from different threads may disagree slightly: an entry seen "in
//    the future" counts as fresh.
//  - Threads: lookup() is safe from any number of threads concurrently with
//    everything else. learn(), remove_port(), expire() may be called from any
//    threads; they serialize on one writer lock, which learn() takes only when it has
//    something to write (new MAC, moved MAC, timestamp refresh; the last one only if
//    the lock is free: a busy writer just postpones the refresh to the next frame).
//    The writer lock is config.writer_lock (a mutex, or a delegation lock whose holder
//    runs the waiting writers' sections itself, keeping the buckets in its cache: see
//    sync/section_lock.h), or any SectionLock the constructor is given (the labs).
//  - Progress: lookup() is wait-free (bounded retries, no stores to shared memory
//    except the rare give-up counter). learn() in the steady state (known MAC, same
//    port, refreshed less than refresh_interval ago) is as cheap as lookup() and
//    writes nothing shared; a learn refused because its bucket is full is decided
//    without the lock too (one relaxed fetch_add on refused_full).
//  - Misuse detected in debug builds: learning on kNoPort (reserved).
//
// Design note - a seqlock per bucket, not the table behind sync::ReadMostly
// -------------------------------------------------------------------------
// The table is a fixed array of buckets; each bucket holds kWays (MAC, port,
// last-seen) slots as atomics and a sequence counter (a seqlock). A reader
// loads the sequence, the slots, then the sequence again and retries if it changed
// or was odd; a writer (holding the writer lock) makes the sequence odd, stores,
// makes it even. Readers store nothing, so lookups from many workers share the
// bucket's cache lines without bouncing them, and a write costs a few stores.
//
// The alternative, the table published through sync::ReadMostly<T> (the read-mostly
// guard of the vfio question "vfio/type1: Convert vfio_iommu.lock from mutex to
// rwsem"; RCU by default), has an equally cheap read side but every change is a
// whole-table copy-on-write plus a grace period (urcu synchronize_rcu) on the thread
// that learned, which is a datapath worker: a move costs orders of magnitude more
// than one bucket write (docs/BENCHMARKS.md, "The switch's MAC table"). Learning is not rare under hostile input: a guest that sends
// frames with another guest's source MAC makes that MAC flap between two ports at
// packet rate, and every flap would be a table copy (capacity x 24 bytes) and a grace
// period; it also needs a second table's worth of memory while copying. With the
// seqlock a move is one bucket write under the writer lock. The price: (1) a reader can be
// delayed by a writer preempted inside its write section; we bound that with
// kMaxReadAttempts and fall back to "unknown" (flood), which is correct for a
// learning switch; (2) per-slot timestamps are stored in the slots, so refreshing
// them is a write: hence refresh at most once per refresh_interval per entry, and a
// refresh is a single release store without a sequence bump (the slot's MAC and port
// do not change, so no reader can see a torn entry); (3) set-associative placement can
// refuse a MAC while other buckets have room (8 ways, uniform hash: at half the
// capacity ~5% of buckets are full and ~0.8% of MACs refused; at a quarter, 0.1% and
// 0.015%), so size the capacity at two to four times the expected MAC count.
//
// Memory orders (a seqlock as discussed by Boehm, "Can seqlocks get along with
// programming language memory models?", 2012, with acquire slot loads and release
// slot stores instead of fences: ThreadSanitizer does not model atomic_thread_fence,
// and on x86 these orders cost nothing):
//  writer (holds writer_):  seq.store(s+1, relaxed);
//                          slot stores (release); seq.store(s+2, release)
//  reader:                 s1 = seq.load(acquire); [s1 odd: retry]
//                          slot loads (acquire); s2 = seq.load(relaxed)
//                          [s1 != s2: retry]
//  If a reader's slot load reads a value stored (release) by a write section that
//  started after the reader's s1 (seq was s >= s1 there), the two synchronize: that
//  writer's seq.store(s+1), sequenced before its slot store, happens-before the
//  reader's s2 load (sequenced after the acquire slot load), so s2 >= s+1 > s1 and
//  the reader retries. If its slot loads read no store of a later write section, they
//  read the state left by the write that produced s1 (whose release made every
//  earlier slot store visible to the acquire load of s1): one complete entry. A
//  timestamp refresh is seen.store(release) with no sequence change: a reader that
//  reads it synchronizes with it and so with every earlier (lock-serialized) write,
//  and the same argument applies. On x86 every one of these is a plain MOV; on arm64,
//  LDAR/STLR. The sequence counter is 32 bits: a reader would be fooled only if it
//  stalled inside one lookup for exactly 2^31 writes to the same bucket.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "uvhost/base/name_table.h"
#include "uvhost/sync/cpu_relax.h"
#include "uvhost/sync/section_lock.h"
#include "uvhost/sync/thread_annotations.h"

namespace uvhost::backends {

using base::to_string;

using PortId = uint32_t;
// Reserved: never a port (ForwardDecision::port when there is no single port).
inline constexpr PortId kNoPort = UINT32_MAX;

using MacAddress = std::array<uint8_t, 6>;

// I/G bit (first octet, bit 0): group address (multicast, broadcast included).
constexpr bool is_multicast(const MacAddress& mac) noexcept { return (mac[0] & 0x01U) != 0; }
constexpr bool is_broadcast(const MacAddress& mac) noexcept {
  for (uint8_t octet : mac) {
    if (octet != 0xFFU) return false;
  }
  return true;
}
constexpr bool is_zero(const MacAddress& mac) noexcept {
  for (uint8_t octet : mac) {
    if (octet != 0) return false;
  }
  return true;
}
// The only addresses learn() accepts: not multicast/broadcast, not all-zero.
constexpr bool is_learnable(const MacAddress& mac) noexcept { return !is_multicast(mac) && !is_zero(mac); }

// "52:54:00:12:34:56".
std::string to_string(const MacAddress& mac);

using SwitchClock = std::chrono::steady_clock;
using SwitchTime = SwitchClock::time_point;

struct MacTableConfig {
  // Entries; rounded up to a power-of-two number of buckets of kWays slots. 1..2^24.
  size_t capacity = 4096;
  // Entries last seen longer ago than this are not returned, and may be evicted. > 0.
  std::chrono::nanoseconds max_age = std::chrono::seconds(300);
  // A known entry's timestamp is rewritten at most this often. >= 0, < max_age.
  std::chrono::nanoseconds refresh_interval = std::chrono::seconds(1);
  // Key of the bucket hash; 0: a random one (std::random_device).
  uint64_t hash_seed = 0;
  // The lock the writers (learn, remove_port, expire) serialize on.
  sync::SectionLockKind writer_lock = sync::SectionLockKind::kMutex;
};

enum class LearnResult : uint8_t {
  kFresh,        // bound to this port and refreshed recently: nothing written
  kRefreshed,    // bound to this port: timestamp refreshed
  kLearned,      // new entry (or an aged one revived)
  kMoved,        // was bound to another (live) port: rebound to this one
  kRefusedFull,  // its bucket's slots all hold live entries: not learned
  kNotUnicast,   // multicast, broadcast or all-zero: never learned
};
inline constexpr auto kLearnResultNames = base::name_table<LearnResult>({
    {LearnResult::kFresh, "fresh"},
    {LearnResult::kRefreshed, "refreshed"},
    {LearnResult::kLearned, "learned"},
    {LearnResult::kMoved, "moved"},
    {LearnResult::kRefusedFull, "refused-full"},
    {LearnResult::kNotUnicast, "not-unicast"},
});
inline constexpr size_t kLearnResultCount = kLearnResultNames.size();
constexpr const auto& enum_names(LearnResult) noexcept { return kLearnResultNames; }

// Counters of the table (monotonic, except entries). Read with MacTable::stats().
struct MacTableStats {
  uint64_t learned = 0;       // kLearned
  uint64_t moved = 0;         // kMoved
  uint64_t refreshed = 0;     // kRefreshed
  uint64_t refused_full = 0;  // kRefusedFull
  uint64_t evicted_aged = 0;  // aged entries evicted (by learn() reusing the slot, or expire())
  uint64_t flushed = 0;       // entries removed by remove_port()
  uint64_t read_gave_up = 0;  // lookups that hit kMaxReadAttempts (answered "unknown")
  size_t entries = 0;         // occupied slots now (aged ones included until evicted)
};

class MacTable {
 public:
  static constexpr size_t kWays = 8;
  static constexpr uint32_t kMaxReadAttempts = 64;
  static constexpr size_t kMaxCapacity = size_t{1} << 24;

  // Throws std::invalid_argument for a config outside the ranges above. `writer_lock`:
  // the writers' lock instead of one made from config.writer_lock.
  explicit MacTable(const MacTableConfig& config = {}, std::unique_ptr<sync::SectionLock> writer_lock = nullptr);
  ~MacTable();
  MacTable(const MacTable&) = delete;
  MacTable& operator=(const MacTable&) = delete;

  LearnResult learn(const MacAddress& mac, PortId port, SwitchTime now) UVHOST_EXCLUDES(writer_);
  std::optional<PortId> lookup(const MacAddress& mac, SwitchTime now) const noexcept;
  // Number of entries removed.
  size_t remove_port(PortId port) UVHOST_EXCLUDES(writer_);
  // Number of aged entries evicted.
  size_t expire(SwitchTime now) UVHOST_EXCLUDES(writer_);

  size_t capacity() const noexcept { return bucket_count_ * kWays; }
  size_t size() const noexcept { return entries_.load(std::memory_order_relaxed); }
  MacTableStats stats() const noexcept;
  const MacTableConfig& config() const noexcept { return config_; }
  // The writers' lock's name ("std::mutex", "delegation", ...).
  const char* writer_lock_name() const noexcept { return writer_.name(); }

 private:
  // One seqlock-protected set of kWays slots. key 0: empty; else kKeyValid | MAC.
  struct alignas(64) Bucket {
    std::atomic<uint32_t> seq{0};
    std::array<std::atomic<PortId>, kWays> port{};
    std::array<std::atomic<uint64_t>, kWays> key{};
    std::array<std::atomic<int64_t>, kWays> seen{};  // SwitchTime ticks (ns)
  };

  // A consistent copy of the slot holding `key` (if any) and of the free capacity.
  struct BucketView {
    int way = -1;  // slot holding the key, or -1
    PortId port = kNoPort;
    int64_t seen = 0;
    bool has_room = false;  // an empty or aged slot exists
  };

  static constexpr uint64_t kKeyValid = uint64_t{1} << 48;

  // Injective: the 6 octets in the low 48 bits (host byte order), plus kKeyValid.
  static uint64_t key_of(const MacAddress& mac) noexcept {
    uint64_t v = 0;
    std::memcpy(&v, mac.data(), mac.size());
    return v | kKeyValid;
  }
  static int64_t ticks(SwitchTime t) noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }
  bool is_aged(int64_t seen, int64_t now) const noexcept { return now - seen >= max_age_ns_; }

  Bucket& bucket_for(uint64_t key) const noexcept {
    // murmur3's fmix64 of the keyed MAC.
    uint64_t h = key ^ hash_seed_;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return buckets_[h & (bucket_count_ - 1)];
  }

  // Seqlock read of `b` (see the design note); nullopt after kMaxReadAttempts.
  // has_room is computed only when kWantRoom and no slot holds `key` (learn()).
  template <bool kWantRoom>
  std::optional<BucketView> read_bucket(const Bucket& b, uint64_t key, int64_t now) const noexcept {
    for (uint32_t attempt = 0; attempt < kMaxReadAttempts; ++attempt) {
      // acquire: pairs with the writer's closing seq.store(release); the slots it
      // wrote before are visible to the loads below.
      const uint32_t s1 = b.seq.load(std::memory_order_acquire);
      if ((s1 & 1U) != 0) {  // a write is in progress
        sync::cpu_relax();
        continue;
      }
      // acquire (every slot load): a load that reads a writer's (release) slot store
      // synchronizes with it, so the re-load of seq below sees that writer's odd
      // value (or later) and we retry; it also keeps the re-load after these loads.
      BucketView view;
      for (size_t w = 0; w < kWays; ++w) {
        const uint64_t k = b.key[w].load(std::memory_order_acquire);
        if (k == key) {
          view.way = static_cast<int>(w);
          view.port = b.port[w].load(std::memory_order_acquire);
          view.seen = b.seen[w].load(std::memory_order_acquire);
          break;  // a key is in at most one slot (writers keep it so)
        }
        if constexpr (kWantRoom) {
          if (!view.has_room)
            view.has_room = k == 0 || is_aged(b.seen[w].load(std::memory_order_acquire), now);
        }
      }
      // relaxed: ordered after the slot loads by their acquire.
      if (b.seq.load(std::memory_order_relaxed) == s1) return view;
    }
    read_gave_up_.fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
    return std::nullopt;
  }

  // Writer side (caller holds writer_).
  static void begin_write(Bucket& b) noexcept;
  static void end_write(Bucket& b) noexcept;
  LearnResult learn_locked(Bucket& b, uint64_t key, PortId port, int64_t now) noexcept UVHOST_REQUIRES(writer_);
  // Empties every used slot for which matches(bucket, way) holds; the number emptied.
  template <class Matches>
  size_t remove_matching(Matches matches) noexcept UVHOST_REQUIRES(writer_);
  void count(LearnResult result) noexcept;

  const MacTableConfig config_;
  const int64_t max_age_ns_;
  const int64_t refresh_ns_;
  const uint64_t hash_seed_;
  const size_t bucket_count_;  // a power of two
  const std::unique_ptr<Bucket[]> buckets_;

  // Serializes every write to buckets_ (the slots are atomics that lookups read without
  // it, so they carry no UVHOST_GUARDED_BY; the writers are annotated instead).
  const std::unique_ptr<sync::SectionLock> writer_lock_;
  sync::SectionLock& writer_;  // *writer_lock_, as the annotations name it
  // Counters: relaxed (statistics; written under writer_, except refused_full and
  // read_gave_up, which lock-free paths bump: only under a flood or heavy contention).
  std::atomic<size_t> entries_{0};
  std::array<std::atomic<uint64_t>, kLearnResultCount> by_result_{};
  std::atomic<uint64_t> evicted_aged_{0};
  std::atomic<uint64_t> flushed_{0};
  mutable std::atomic<uint64_t> read_gave_up_{0};
};

inline std::optional<PortId> MacTable::lookup(const MacAddress& mac, SwitchTime now) const noexcept {
  const uint64_t key = key_of(mac);
  const int64_t now_ns = ticks(now);
  const std::optional<BucketView> view = read_bucket<false>(bucket_for(key), key, now_ns);
  if (!view || view->way < 0 || is_aged(view->seen, now_ns)) return std::nullopt;
  return view->port;
}

}  // namespace uvhost::backends
