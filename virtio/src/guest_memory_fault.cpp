// guest_memory_fault.cpp - the SIGBUS handler and the registry of guest mappings (see
// guest_memory_fault.h). Everything the handler touches is a lock-free atomic or a
// static written before the handler was installed.
#include "uvhost/virtio/guest_memory_fault.h"

#include <sys/mman.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>

namespace uvhost::virtio::guest_memory_fault {
namespace {

enum SlotState : uint32_t { kFree = 0, kBusy = 1, kLive = 2 };

// One guest mapping. `version` is odd while begin/end are rewritten, so a handler
// running during a (re)registration of this slot skips it instead of reading a torn
// range (the faulting mapping itself is never being rewritten: its reader is using it).
struct Slot {
  std::atomic<uint32_t> state{kFree};
  std::atomic<uint64_t> version{0};
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};  // one past the last byte
  std::atomic<bool> faulted{false};
};

static_assert(std::atomic<uintptr_t>::is_always_lock_free && std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free && std::atomic<bool>::is_always_lock_free,
              "the signal handler may only touch lock-free atomics");

Slot g_slots[kMaxMappings];
std::atomic<uint64_t> g_fault_count{0};
// The SIGBUS disposition before ours: written once, before our handler is installed.
struct sigaction g_previous {};
std::once_flag g_install_once;

// The slot holding `address`, or nullptr. Async-signal-safe.
Slot* find_slot(uintptr_t address) noexcept {
  for (Slot& slot : g_slots) {
    if (slot.state.load(std::memory_order_acquire) != kLive) continue;
    const uint64_t before = slot.version.load(std::memory_order_acquire);
    if ((before & 1) != 0) continue;
    // acquire: the version's second load cannot move before these (no fence: TSan
    // does not model fences).
    const uintptr_t begin = slot.begin.load(std::memory_order_acquire);
    const uintptr_t end = slot.end.load(std::memory_order_acquire);
    if (slot.version.load(std::memory_order_relaxed) != before) continue;
    if (address >= begin && address < end) return &slot;
  }
  return nullptr;
}

// Not ours: the handler before us decides, or the default action (death, as without us).
void pass_on(int signo, siginfo_t* info, void* context) noexcept {
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(signo, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(signo);
    return;
  }
  // SIG_DFL (or SIG_IGN, which for a fault would retry it forever): die by the default
  // action. SIGBUS is blocked while we run, so the raised one is delivered on return.
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  (void)::sigaction(SIGBUS, &fallback, nullptr);
  (void)::raise(SIGBUS);
}

void on_sigbus(int signo, siginfo_t* info, void* context) {
  // si_code <= 0: sent by a process (kill, raise, sigqueue), not a fault.
  if (info == nullptr || info->si_code <= 0) return pass_on(signo, info, context);
  Slot* slot = find_slot(reinterpret_cast<uintptr_t>(info->si_addr));
  if (slot == nullptr) return pass_on(signo, info, context);
  const uintptr_t begin = slot->begin.load(std::memory_order_relaxed);
  const size_t length = slot->end.load(std::memory_order_relaxed) - begin;
  // Zero pages over the whole mapping: every later access of it, from any thread, reads
  // zeros instead of faulting again. The range stays reserved until its owner unmaps it.
  void* replaced = ::mmap(reinterpret_cast<void*>(begin), length, PROT_READ | PROT_WRITE,
                          MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (replaced == MAP_FAILED) return pass_on(signo, info, context);
  // The flag before the count (release): a reader that loads the new count (acquire)
  // sees the flag, and one that sees the flag sees the zero mapping.
  slot->faulted.store(true, std::memory_order_release);
  g_fault_count.fetch_add(1, std::memory_order_release);
}

void install_handler() noexcept {
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  // g_previous first: the handler may run the moment sigaction returns.
  (void)::sigaction(SIGBUS, nullptr, &g_previous);
  (void)::sigaction(SIGBUS, &action, nullptr);
}

}  // namespace

std::optional<MappingId> register_mapping(void* begin, size_t length) noexcept {
  std::call_once(g_install_once, install_handler);
  for (MappingId id = 0; id < kMaxMappings; ++id) {
    Slot& slot = g_slots[id];
    uint32_t expected = kFree;
    if (!slot.state.compare_exchange_strong(expected, kBusy, std::memory_order_acq_rel)) continue;
    slot.version.fetch_add(1, std::memory_order_acq_rel);  // odd: being written
    // release: not visible before the odd version.
    slot.begin.store(reinterpret_cast<uintptr_t>(begin), std::memory_order_release);
    slot.end.store(reinterpret_cast<uintptr_t>(begin) + length, std::memory_order_release);
    slot.faulted.store(false, std::memory_order_relaxed);
    slot.version.fetch_add(1, std::memory_order_release);  // even: stable
    slot.state.store(kLive, std::memory_order_release);
    return id;
  }
  return std::nullopt;
}

void unregister_mapping(MappingId id) noexcept {
  if (id >= kMaxMappings) return;
  Slot& slot = g_slots[id];
  slot.state.store(kBusy, std::memory_order_release);
  slot.version.fetch_add(1, std::memory_order_acq_rel);
  slot.begin.store(0, std::memory_order_release);
  slot.end.store(0, std::memory_order_release);
  slot.faulted.store(false, std::memory_order_relaxed);
  slot.version.fetch_add(1, std::memory_order_release);
  slot.state.store(kFree, std::memory_order_release);
}

bool faulted(MappingId id) noexcept {
  return id < kMaxMappings && g_slots[id].faulted.load(std::memory_order_acquire);
}

uint64_t fault_count() noexcept { return g_fault_count.load(std::memory_order_acquire); }

bool address_faulted(const void* address) noexcept {
  const Slot* slot = find_slot(reinterpret_cast<uintptr_t>(address));
  return slot != nullptr && slot->faulted.load(std::memory_order_acquire);
}

}  // namespace uvhost::virtio::guest_memory_fault
