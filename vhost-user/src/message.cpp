// message.cpp - the strict request parser and the encoders (see message.h).
#include "uvhost/vhost_user/message.h"

#include <cstring>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

namespace uvhost::vhost_user {

std::string_view to_string(Request request) noexcept {
  switch (request) {
    case Request::kNone: return "VHOST_USER_NONE";
    case Request::kGetFeatures: return "VHOST_USER_GET_FEATURES";
    case Request::kSetFeatures: return "VHOST_USER_SET_FEATURES";
    case Request::kSetOwner: return "VHOST_USER_SET_OWNER";
    case Request::kResetOwner: return "VHOST_USER_RESET_OWNER";
    case Request::kSetMemTable: return "VHOST_USER_SET_MEM_TABLE";
    case Request::kSetLogBase: return "VHOST_USER_SET_LOG_BASE";
    case Request::kSetLogFd: return "VHOST_USER_SET_LOG_FD";
    case Request::kSetVringNum: return "VHOST_USER_SET_VRING_NUM";
    case Request::kSetVringAddr: return "VHOST_USER_SET_VRING_ADDR";
    case Request::kSetVringBase: return "VHOST_USER_SET_VRING_BASE";
    case Request::kGetVringBase: return "VHOST_USER_GET_VRING_BASE";
    case Request::kSetVringKick: return "VHOST_USER_SET_VRING_KICK";
    case Request::kSetVringCall: return "VHOST_USER_SET_VRING_CALL";
    case Request::kSetVringErr: return "VHOST_USER_SET_VRING_ERR";
    case Request::kGetProtocolFeatures: return "VHOST_USER_GET_PROTOCOL_FEATURES";
    case Request::kSetProtocolFeatures: return "VHOST_USER_SET_PROTOCOL_FEATURES";
    case Request::kGetQueueNum: return "VHOST_USER_GET_QUEUE_NUM";
    case Request::kSetVringEnable: return "VHOST_USER_SET_VRING_ENABLE";
    case Request::kSendRarp: return "VHOST_USER_SEND_RARP";
    case Request::kNetSetMtu: return "VHOST_USER_NET_SET_MTU";
    case Request::kSetBackendReqFd: return "VHOST_USER_SET_BACKEND_REQ_FD";
    case Request::kIotlbMsg: return "VHOST_USER_IOTLB_MSG";
    case Request::kSetVringEndian: return "VHOST_USER_SET_VRING_ENDIAN";
    case Request::kGetConfig: return "VHOST_USER_GET_CONFIG";
    case Request::kSetConfig: return "VHOST_USER_SET_CONFIG";
    case Request::kCreateCryptoSession: return "VHOST_USER_CREATE_CRYPTO_SESSION";
    case Request::kCloseCryptoSession: return "VHOST_USER_CLOSE_CRYPTO_SESSION";
    case Request::kPostcopyAdvise: return "VHOST_USER_POSTCOPY_ADVISE";
    case Request::kPostcopyListen: return "VHOST_USER_POSTCOPY_LISTEN";
    case Request::kPostcopyEnd: return "VHOST_USER_POSTCOPY_END";
    case Request::kGetInflightFd: return "VHOST_USER_GET_INFLIGHT_FD";
    case Request::kSetInflightFd: return "VHOST_USER_SET_INFLIGHT_FD";
    case Request::kGpuSetSocket: return "VHOST_USER_GPU_SET_SOCKET";
    case Request::kResetDevice: return "VHOST_USER_RESET_DEVICE";
    case Request::kVringKick: return "VHOST_USER_VRING_KICK";
    case Request::kGetMaxMemSlots: return "VHOST_USER_GET_MAX_MEM_SLOTS";
    case Request::kAddMemReg: return "VHOST_USER_ADD_MEM_REG";
    case Request::kRemMemReg: return "VHOST_USER_REM_MEM_REG";
    case Request::kSetStatus: return "VHOST_USER_SET_STATUS";
    case Request::kGetStatus: return "VHOST_USER_GET_STATUS";
  }
  return "unknown";
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

// What a request looks like on the wire: its payload and how many fds it carries.
enum class Shape { kEmpty, kU64, kVringState, kVringAddress, kMemTable, kSingleRegion, kLogArea, kVringFd };

struct Rule {
  Shape shape;
  size_t min_fds;  // for kMemTable and kVringFd the count depends on the payload
  size_t max_fds;
  bool indexed;    // payload names a vring: index must be below the queue count
};

// The requests this parser accepts, and their shapes. Everything else is "unsupported".
bool rule_for(Request request, Rule& rule) {
  switch (request) {
    case Request::kGetFeatures:
    case Request::kSetOwner:
    case Request::kResetOwner:
    case Request::kGetProtocolFeatures:
    case Request::kGetQueueNum:
    case Request::kGetMaxMemSlots:
    case Request::kGetStatus: rule = {Shape::kEmpty, 0, 0, false}; return true;
    case Request::kSetFeatures:
    case Request::kSetProtocolFeatures:
    case Request::kSendRarp:
    case Request::kNetSetMtu:
    case Request::kSetStatus: rule = {Shape::kU64, 0, 0, false}; return true;
    case Request::kSetLogFd: rule = {Shape::kEmpty, 1, 1, false}; return true;
    case Request::kSetVringNum:
    case Request::kSetVringBase:
    case Request::kGetVringBase:
    case Request::kSetVringEnable: rule = {Shape::kVringState, 0, 0, true}; return true;
    case Request::kSetVringAddr: rule = {Shape::kVringAddress, 0, 0, true}; return true;
    case Request::kSetVringKick:
    case Request::kSetVringCall:
    case Request::kSetVringErr: rule = {Shape::kVringFd, 0, 1, true}; return true;
    case Request::kSetMemTable: rule = {Shape::kMemTable, 1, kMaxMemTableRegions, false}; return true;
    case Request::kSetLogBase: rule = {Shape::kLogArea, 1, 1, false}; return true;
    case Request::kAddMemReg: rule = {Shape::kSingleRegion, 1, 1, false}; return true;
    // The spec: no fd SHOULD come with REM_MEM_REG, but one MAY be accepted and must
    // then be closed unused. It is left in the RawMessage, which closes it.
    case Request::kRemMemReg: rule = {Shape::kSingleRegion, 0, 1, false}; return true;
    default: return false;
  }
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

  Rule rule{};
  if (!rule_for(request, rule)) {
    return error(header, false, fmt::format("unsupported request {} ({})", header.request, name));
  }
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
    case Shape::kEmpty:
      if (size != 0) return bad_size(0);
      break;
    case Shape::kU64:
      if (size != kU64Size) return bad_size(kU64Size);
      message.payload = load<uint64_t>(bytes, 0);
      break;
    case Shape::kVringState: {
      if (size != kVringStateSize) return bad_size(kVringStateSize);
      const VringState state{load<uint32_t>(bytes, 0), load<uint32_t>(bytes, 4)};
      index = state.index;
      message.payload = state;
      break;
    }
    case Shape::kVringAddress: {
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
    case Shape::kVringFd: {
      if (size != kU64Size) return bad_size(kU64Size);
      const auto value = load<uint64_t>(bytes, 0);
      if ((value & ~(kVringIndexMask | kVringNoFdFlag)) != 0) {
        return error(header, true, fmt::format("{}: stray bits in {:#x} (only index 0-7 and NOFD bit 8)", name, value));
      }
      const VringFd vring{static_cast<uint32_t>(value & kVringIndexMask), (value & kVringNoFdFlag) != 0};
      want_fds = vring.no_fd ? 0 : 1;
      rule.max_fds = want_fds;
      index = vring.index;
      message.payload = vring;
      break;
    }
    case Shape::kMemTable: {
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
      rule.max_fds = table.count;
      message.payload = table;
      break;
    }
    case Shape::kSingleRegion:
      if (size != kSingleRegionSize) return bad_size(kSingleRegionSize);
      message.payload = SingleRegion{load_region(bytes, 8)};  // bytes 0-7 are padding
      break;
    case Shape::kLogArea:
      if (size != kLogAreaSize) return bad_size(kLogAreaSize);
      message.payload = LogArea{load<uint64_t>(bytes, 0), load<uint64_t>(bytes, 8)};
      break;
  }

  if (rule.indexed && index >= limits.queue_count) {
    return error(header, true, fmt::format("{}: vring index {} out of range (device has {} queues)", name, index,
                                           limits.queue_count));
  }
  const size_t got_fds = raw.fds.size();
  if (got_fds < want_fds || got_fds > rule.max_fds) {
    return error(header, true, fmt::format("{}: got {} fds, must be {}{}", name, got_fds, want_fds,
                                           rule.max_fds != want_fds ? fmt::format("..{}", rule.max_fds) : ""));
  }
  // Keep exactly the fds the request consumes; the rest (REM_MEM_REG's optional one)
  // stay in `raw` and are closed when it goes out of scope.
  for (size_t i = 0; i < want_fds; ++i) message.fds.push_back(std::move(raw.fds[i]));
  return message;
}

std::vector<std::byte> encode(Request request, uint32_t flags, const Payload& payload) {
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
        }
      },
      payload);
  std::vector<std::byte> out;
  out.reserve(kHeaderSize + body.size());
  store(out, static_cast<uint32_t>(request));
  store(out, (flags & ~kVersionMask) | kVersion1);
  store(out, static_cast<uint32_t>(body.size()));
  out.insert(out.end(), body.begin(), body.end());
  return out;
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
