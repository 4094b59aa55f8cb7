// message.cpp - the strict request parser and the encoders (see message.h).
#include "uvhost/vhost_user/message.h"

#include <cstring>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

namespace uvhost::vhost_user {

std::string_view to_string(Request request) noexcept {
  const RequestEntry* entry = find_request(static_cast<uint32_t>(request));
  return entry != nullptr ? entry->name : "unknown";
}

namespace {

// Reads a native-order integer at `offset` of the payload; the caller has checked the
// size, so this never reads past the end.
template <class T>
T load(std::span<const std::byte> bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

template <class T>
void store(std::vector<std::byte>& out, T value) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

MemoryRegionDesc load_region(std::span<const std::byte> bytes, size_t offset) {
  return MemoryRegionDesc{load<uint64_t>(bytes, offset), load<uint64_t>(bytes, offset + 8),
                          load<uint64_t>(bytes, offset + 16), load<uint64_t>(bytes, offset + 24)};
}

ParseError error(const Header& header, bool known, std::string reason) {
  return ParseError{header.request, header.flags, known, std::move(reason)};
}

// Checks the header flags of a request: version 1, no reply bit, no unknown bits.
bool check_request_flags(uint32_t flags, std::string& reason) {
  if ((flags & kVersionMask) != kVersion1) {
    reason = fmt::format("bad version {} in flags {:#x} (want 1)", flags & kVersionMask, flags);
    return false;
  }
  if ((flags & ~kKnownFlags) != 0) {
    reason = fmt::format("unknown flag bits {:#x}", flags & ~kKnownFlags);
    return false;
  }
  if ((flags & kFlagReply) != 0) {
    reason = "REPLY flag set on a request";
    return false;
  }
  return true;
}

}  // namespace

ParseResult parse_request(RawMessage raw, const ParseLimits& limits) {
  const Header& header = raw.header;
  const auto request = static_cast<Request>(header.request);
  const std::string_view name = to_string(request);
  std::string reason;
  if (!check_request_flags(header.flags, reason)) return error(header, true, fmt::format("{}: {}", name, reason));

  const RequestEntry* entry = find_request(header.request);
  if (entry == nullptr || !entry->rule.accepted) {
    return error(header, false, fmt::format("unsupported request {} ({})", header.request, name));
  }
  const RequestRule& rule = entry->rule;
  size_t max_fds = rule.max_fds;  // refined below, like want_fds
  if (header.size != raw.payload.size()) {
    return error(header, true, fmt::format("{}: header says {} payload bytes, got {}", name, header.size,
                                           raw.payload.size()));
  }
  const std::span<const std::byte> bytes(raw.payload);
  const size_t size = bytes.size();
  auto bad_size = [&](size_t want) {
    return error(header, true, fmt::format("{}: payload is {} bytes, must be {}", name, size, want));
  };

  Message message;
  message.request = request;
  message.flags = header.flags;
  size_t want_fds = rule.min_fds;  // refined below for shapes whose fd count is in the payload
  uint32_t index = 0;

  switch (rule.shape) {
    case PayloadShape::kEmpty:
      if (size != 0) return bad_size(0);
      break;
    case PayloadShape::kU64:
      if (size != kU64Size) return bad_size(kU64Size);
      message.payload = load<uint64_t>(bytes, 0);
      break;
    case PayloadShape::kVringState: {
      if (size != kVringStateSize) return bad_size(kVringStateSize);
      const VringState state{load<uint32_t>(bytes, 0), load<uint32_t>(bytes, 4)};
      index = state.index;
      message.payload = state;
      break;
    }
    case PayloadShape::kVringAddress: {
      if (size != kVringAddressSize) return bad_size(kVringAddressSize);
      const VringAddress address{load<uint32_t>(bytes, 0), load<uint32_t>(bytes, 4), load<uint64_t>(bytes, 8),
                                 load<uint64_t>(bytes, 16), load<uint64_t>(bytes, 24), load<uint64_t>(bytes, 32)};
      if ((address.flags & ~kVringFlagLog) != 0) {
        return error(header, true, fmt::format("{}: unknown vring flags {:#x}", name, address.flags));
      }
      index = address.index;
      message.payload = address;
      break;
    }
    case PayloadShape::kVringFd: {
      if (size != kU64Size) return bad_size(kU64Size);
      const auto value = load<uint64_t>(bytes, 0);
      if ((value & ~(kVringIndexMask | kVringNoFdFlag)) != 0) {
        return error(header, true, fmt::format("{}: stray bits in {:#x} (only index 0-7 and NOFD bit 8)", name, value));
      }
      const VringFd vring{static_cast<uint32_t>(value & kVringIndexMask), (value & kVringNoFdFlag) != 0};
      want_fds = vring.no_fd ? 0 : 1;
      max_fds = want_fds;
      index = vring.index;
      message.payload = vring;
      break;
    }
    case PayloadShape::kMemTable: {
      if (size < kMemTableHeaderSize) return bad_size(kMemTableHeaderSize);
      MemoryTable table;
      table.count = load<uint32_t>(bytes, 0);
      if (table.count == 0 || table.count > kMaxMemTableRegions) {
        return error(header, true, fmt::format("{}: {} regions (must be 1..{})", name, table.count,
                                               kMaxMemTableRegions));
      }
      // QEMU and DPDK send exactly the regions in use; accepting the padded full
      // table too would be harmless, but nobody sends it, so stay strict.
      const size_t want = kMemTableHeaderSize + table.count * kMemoryRegionSize;
      if (size != want) return bad_size(want);
      for (uint32_t i = 0; i < table.count; ++i) {
        table.regions[i] = load_region(bytes, kMemTableHeaderSize + i * kMemoryRegionSize);
      }
      want_fds = table.count;
      max_fds = table.count;
      message.payload = table;
      break;
    }
    case PayloadShape::kSingleRegion:
      if (size != kSingleRegionSize) return bad_size(kSingleRegionSize);
      message.payload = SingleRegion{load_region(bytes, 8)};  // bytes 0-7 are padding
      break;
    case PayloadShape::kLogArea:
      if (size != kLogAreaSize) return bad_size(kLogAreaSize);
      message.payload = LogArea{load<uint64_t>(bytes, 0), load<uint64_t>(bytes, 8)};
      break;
    case PayloadShape::kIotlb:
      if (size != kIotlbSize) return bad_size(kIotlbSize);
      message.payload = IotlbMessage{load<uint64_t>(bytes, 0), load<uint64_t>(bytes, 8), load<uint64_t>(bytes, 16),
                                     load<uint8_t>(bytes, 24), load<uint8_t>(bytes, 25)};
      break;
  }

  if (rule.indexed && index >= limits.queue_count) {
    return error(header, true, fmt::format("{}: vring index {} out of range (device has {} queues)", name, index,
                                           limits.queue_count));
  }
  const size_t got_fds = raw.fds.size();
  if (got_fds < want_fds || got_fds > max_fds) {
    return error(header, true, fmt::format("{}: got {} fds, must be {}{}", name, got_fds, want_fds,
                                           max_fds != want_fds ? fmt::format("..{}", max_fds) : ""));
  }
  // Keep exactly the fds the request consumes; the rest (REM_MEM_REG's optional one)
  // stay in `raw` and are closed when it goes out of scope.
  for (size_t i = 0; i < want_fds; ++i) message.fds.push_back(std::move(raw.fds[i]));
  return message;
}

namespace {

std::vector<std::byte> encode_message(uint32_t request, uint32_t flags, const Payload& payload) {
  std::vector<std::byte> body;
  std::visit(
      [&body](const auto& value) {
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, uint64_t>) {
          store(body, value);
        } else if constexpr (std::is_same_v<T, VringState>) {
          store(body, value.index);
          store(body, value.num);
        } else if constexpr (std::is_same_v<T, VringAddress>) {
          store(body, value.index);
          store(body, value.flags);
          store(body, value.desc_user_addr);
          store(body, value.used_user_addr);
          store(body, value.avail_user_addr);
          store(body, value.log_guest_addr);
        } else if constexpr (std::is_same_v<T, MemoryTable>) {
          store(body, value.count);
          store(body, uint32_t{0});
          const size_t count = value.count < kMaxMemTableRegions ? value.count : kMaxMemTableRegions;
          for (size_t i = 0; i < count; ++i) {
            const MemoryRegionDesc& region = value.regions[i];
            store(body, region.guest_phys_addr);
            store(body, region.size);
            store(body, region.user_addr);
            store(body, region.mmap_offset);
          }
        } else if constexpr (std::is_same_v<T, SingleRegion>) {
          store(body, uint64_t{0});
          store(body, value.region.guest_phys_addr);
          store(body, value.region.size);
          store(body, value.region.user_addr);
          store(body, value.region.mmap_offset);
        } else if constexpr (std::is_same_v<T, LogArea>) {
          store(body, value.size);
          store(body, value.offset);
        } else if constexpr (std::is_same_v<T, VringFd>) {
          store(body, (uint64_t{value.index} & kVringIndexMask) | (value.no_fd ? kVringNoFdFlag : 0));
        } else if constexpr (std::is_same_v<T, IotlbMessage>) {
          store(body, value.iova);
          store(body, value.size);
          store(body, value.user_addr);
          store(body, value.perm);
          store(body, value.type);
          body.resize(body.size() + (kIotlbSize - 26));  // the struct's tail padding
        }
      },
      payload);
  std::vector<std::byte> out;
  out.reserve(kHeaderSize + body.size());
  store(out, request);
  store(out, (flags & ~kVersionMask) | kVersion1);
  store(out, static_cast<uint32_t>(body.size()));
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

}  // namespace

std::vector<std::byte> encode(Request request, uint32_t flags, const Payload& payload) {
  return encode_message(static_cast<uint32_t>(request), flags, payload);
}

std::vector<std::byte> encode(BackendRequest request, uint32_t flags, const Payload& payload) {
  return encode_message(static_cast<uint32_t>(request), flags, payload);
}

ReplyResult parse_reply(RawMessage raw, Request expected, ReplyKind kind) {
  const Header& header = raw.header;
  const std::string_view name = to_string(expected);
  if ((header.flags & kVersionMask) != kVersion1 || (header.flags & kFlagReply) == 0 ||
      (header.flags & ~kKnownFlags) != 0) {
    return error(header, true, fmt::format("reply to {}: bad flags {:#x}", name, header.flags));
  }
  if (header.request != static_cast<uint32_t>(expected)) {
    return error(header, true, fmt::format("reply to {}: answers request {} instead", name, header.request));
  }
  if (!raw.fds.empty()) return error(header, true, fmt::format("reply to {}: carries {} fds", name, raw.fds.size()));
  const size_t want = kind == ReplyKind::kU64 ? kU64Size : kVringStateSize;
  if (header.size != raw.payload.size() || raw.payload.size() != want) {
    return error(header, true, fmt::format("reply to {}: payload is {} bytes, must be {}", name, raw.payload.size(),
                                           want));
  }
  const std::span<const std::byte> bytes(raw.payload);
  Reply reply;
  reply.request = expected;
  if (kind == ReplyKind::kU64) {
    reply.payload = load<uint64_t>(bytes, 0);
  } else {
    reply.payload = VringState{load<uint32_t>(bytes, 0), load<uint32_t>(bytes, 4)};
  }
  return reply;
}

}  // namespace uvhost::vhost_user
