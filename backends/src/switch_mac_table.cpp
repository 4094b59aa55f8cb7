// switch_mac_table.cpp - MacTable's writer side (see the header's design note).
#include "uvhost/backends/switch_mac_table.h"

#include <bit>
#include <cstdio>
#include <random>
#include <stdexcept>

#include "uvhost/sync/misuse.h"

namespace uvhost::backends {

std::string to_string(const MacAddress& mac) {
  char text[18];
  std::snprintf(text, sizeof text, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3], mac[4],
                mac[5]);
  return text;
}

namespace {

const MacTableConfig& validated(const MacTableConfig& config) {
  if (config.capacity == 0 || config.capacity > MacTable::kMaxCapacity) {
    throw std::invalid_argument("mac table: capacity must be in 1..2^24");
  }
  if (config.max_age <= std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument("mac table: max_age must be positive");
  }
  if (config.refresh_interval < std::chrono::nanoseconds::zero() ||
      config.refresh_interval >= config.max_age) {
    throw std::invalid_argument("mac table: refresh_interval must be in [0, max_age)");
  }
  return config;
}

uint64_t seed_from(uint64_t configured) {
  if (configured != 0) return configured;
  std::random_device device;
  return (uint64_t{device()} << 32) | uint64_t{device()};
}

}  // namespace

MacTable::MacTable(const MacTableConfig& config, std::unique_ptr<sync::SectionLock> writer_lock)
    : config_(validated(config)),
      max_age_ns_(config.max_age.count()),
      refresh_ns_(config.refresh_interval.count()),
      hash_seed_(seed_from(config.hash_seed)),
      bucket_count_(std::bit_ceil((config.capacity + kWays - 1) / kWays)),
      // Value-initialized: every seq, key (empty), port and seen is 0.
      buckets_(std::make_unique<Bucket[]>(bucket_count_)),
      writer_lock_(writer_lock ? std::move(writer_lock) : sync::make_section_lock(config.writer_lock)),
      writer_(*writer_lock_) {}

MacTable::~MacTable() = default;

void MacTable::begin_write(Bucket& b) noexcept {
  // relaxed: only writers store seq, and writer_ orders us after the previous one.
  const uint32_t s = b.seq.load(std::memory_order_relaxed);
  // relaxed: the slot stores that follow are release stores, which keep this store
  // before them (a reader that reads one of them sees the odd value, or later).
  b.seq.store(s + 1, std::memory_order_relaxed);
}

void MacTable::end_write(Bucket& b) noexcept {
  // release: a reader whose acquire load sees the even value sees the slot stores.
  b.seq.store(b.seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

void MacTable::count(LearnResult result) noexcept {
  // relaxed: statistics.
  by_result_[static_cast<size_t>(result)].fetch_add(1, std::memory_order_relaxed);
}

LearnResult MacTable::learn(const MacAddress& mac, PortId port, SwitchTime now) {
  UVHOST_MISUSE_CHECK(port != kNoPort, "mac table: learn() on kNoPort");
  if (!is_learnable(mac)) return LearnResult::kNotUnicast;
  const uint64_t key = key_of(mac);
  const int64_t now_ns = ticks(now);
  Bucket& b = bucket_for(key);

  // Optimistic lock-free read first: the steady state and a flood into a full bucket
  // are decided without the lock.
  bool refresh_only = false;
  if (const std::optional<BucketView> view = read_bucket<true>(b, key, now_ns)) {
    if (view->way >= 0 && view->port == port && !is_aged(view->seen, now_ns)) {
      if (now_ns - view->seen < refresh_ns_) return LearnResult::kFresh;
      refresh_only = true;
    } else if (view->way < 0 && !view->has_room) {
      count(LearnResult::kRefusedFull);
      return LearnResult::kRefusedFull;
    }
  }
  LearnResult result = LearnResult::kFresh;
  auto section = [&] {
    writer_.assert_held();
    result = learn_locked(b, key, port, now_ns);
  };
  // A refresh is rare (once per refresh_interval per entry) and optional, so it never waits.
  if (refresh_only) {
    writer_.try_run(section);
  } else {
    writer_.run(section);
  }
  if (result != LearnResult::kFresh) count(result);
  return result;
}

LearnResult MacTable::learn_locked(Bucket& b, uint64_t key, PortId port, int64_t now) noexcept {
  // Loads are relaxed throughout: we hold writer_, so we are the only writer and see
  // the latest value of every field.
  int match = -1;
  int empty = -1;
  int oldest_aged = -1;
  int64_t oldest_seen = 0;
  for (size_t w = 0; w < kWays; ++w) {
    const uint64_t k = b.key[w].load(std::memory_order_relaxed);
    const int way = static_cast<int>(w);
    if (k == key) {
      match = way;
    } else if (k == 0) {
      if (empty < 0) empty = way;
    } else {
      const int64_t seen = b.seen[w].load(std::memory_order_relaxed);
      if (is_aged(seen, now) && (oldest_aged < 0 || seen < oldest_seen)) {
        oldest_aged = way;
        oldest_seen = seen;
      }
    }
  }

  if (match >= 0) {
    const auto w = static_cast<size_t>(match);
    const PortId bound = b.port[w].load(std::memory_order_relaxed);
    const int64_t seen = b.seen[w].load(std::memory_order_relaxed);
    const bool aged = is_aged(seen, now);
    if (bound == port) {
      // Only the timestamp changes: one release store, no sequence bump (the MAC and
      // port a reader pairs it with are unchanged). release: a reader whose acquire
      // load reads it synchronizes with it (see the header's memory orders).
      if (aged) {
        b.seen[w].store(now, std::memory_order_release);
        return LearnResult::kLearned;  // revived
      }
      if (now - seen < refresh_ns_) return LearnResult::kFresh;  // another thread just did it
      b.seen[w].store(now, std::memory_order_release);
      return LearnResult::kRefreshed;
    }
    begin_write(b);
    b.port[w].store(port, std::memory_order_release);  // release: see begin_write()
    b.seen[w].store(now, std::memory_order_release);   // release: see begin_write()
    end_write(b);
    return aged ? LearnResult::kLearned : LearnResult::kMoved;
  }

  int way = empty;
  if (way < 0) {
    if (oldest_aged < 0) return LearnResult::kRefusedFull;
    way = oldest_aged;
    evicted_aged_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics
  } else {
    entries_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics
  }
  const auto w = static_cast<size_t>(way);
  begin_write(b);
  b.key[w].store(key, std::memory_order_release);    // release: see begin_write()
  b.port[w].store(port, std::memory_order_release);  // release: see begin_write()
  b.seen[w].store(now, std::memory_order_release);   // release: see begin_write()
  end_write(b);
  return LearnResult::kLearned;
}

template <class Matches>
size_t MacTable::remove_matching(Matches matches) noexcept {
  size_t removed = 0;
  for (size_t i = 0; i < bucket_count_; ++i) {
    Bucket& b = buckets_[i];
    bool writing = false;
    for (size_t w = 0; w < kWays; ++w) {
      // relaxed: we are the only writer (writer_).
      if (b.key[w].load(std::memory_order_relaxed) == 0 || !matches(b, w)) continue;
      if (!writing) {
        begin_write(b);
        writing = true;
      }
      b.key[w].store(0, std::memory_order_release);  // release: see begin_write()
      ++removed;
    }
    if (writing) end_write(b);
  }
  entries_.fetch_sub(removed, std::memory_order_relaxed);  // relaxed: statistics
  return removed;
}

size_t MacTable::remove_port(PortId port) {
  size_t removed = 0;
  writer_.run([&] {
    writer_.assert_held();
    // relaxed: we are the only writer (writer_).
    removed = remove_matching(
        [port](const Bucket& b, size_t w) { return b.port[w].load(std::memory_order_relaxed) == port; });
  });
  flushed_.fetch_add(removed, std::memory_order_relaxed);  // relaxed: statistics
  return removed;
}

size_t MacTable::expire(SwitchTime now) {
  const int64_t now_ns = ticks(now);
  size_t evicted = 0;
  writer_.run([&] {
    writer_.assert_held();
    // relaxed: we are the only writer (writer_).
    evicted = remove_matching([this, now_ns](const Bucket& b, size_t w) {
      return is_aged(b.seen[w].load(std::memory_order_relaxed), now_ns);
    });
  });
  evicted_aged_.fetch_add(evicted, std::memory_order_relaxed);  // relaxed: statistics
  return evicted;
}

MacTableStats MacTable::stats() const noexcept {
  // relaxed: statistics; the fields are not a consistent snapshot of one instant.
  auto get = [this](LearnResult r) {
    return by_result_[static_cast<size_t>(r)].load(std::memory_order_relaxed);
  };
  MacTableStats s;
  s.learned = get(LearnResult::kLearned);
  s.moved = get(LearnResult::kMoved);
  s.refreshed = get(LearnResult::kRefreshed);
  s.refused_full = get(LearnResult::kRefusedFull);
  s.evicted_aged = evicted_aged_.load(std::memory_order_relaxed);
  s.flushed = flushed_.load(std::memory_order_relaxed);
  s.read_gave_up = read_gave_up_.load(std::memory_order_relaxed);
  s.entries = entries_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace uvhost::backends
