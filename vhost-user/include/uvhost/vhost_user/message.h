// message.h - vhost-user messages: wire format, typed payloads and a strict parser.
//
// Contract
// --------
//  What it guarantees
//  - parse_request() turns one received message (header, payload bytes, fds) into a
//    typed Message, or a ParseError with a one-line reason. It accepts only what the
//    spec allows for that request: version 1 in the flags, no REPLY bit, the exact
//    payload size (or the spec's range), the exact number of fds, vring indexes below
//    the device's queue count, vring-fd payloads with no stray bits. It does not judge
//    meaning (is the feature negotiated, is the ring size sane): the device does that.
//  - Fds: the Message keeps exactly the fds its request consumes; every other fd that
//    came with the raw message is closed when the RawMessage is destroyed (UniqueFd),
//    including all of them on a parse error. Nothing leaks on any path.
//  - encode_*() build wire bytes for requests and replies (used by the frontend, by
//    tests and by the device's replies). parse_reply() checks a reply strictly.
//
//  What it trusts and what not
//  - Trusts nothing in a received message. Numbers are in the machine's byte order
//    (the spec says native order: both ends run on the same host).
//  - The caller supplies how many queues the device has (ParseLimits).
//
//  Not thread-safe state anywhere here: these are pure functions and plain structs.
#pragma once

#include <array>
#include <iterator>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "uvhost/base/unique_fd.h"

namespace uvhost::vhost_user {

// Front-end -> back-end request types (the spec's "Front-end message types").
enum class Request : uint32_t {
  kNone = 0,
  kGetFeatures = 1,
  kSetFeatures = 2,
  kSetOwner = 3,
  kResetOwner = 4,
  kSetMemTable = 5,
  kSetLogBase = 6,
  kSetLogFd = 7,
  kSetVringNum = 8,
  kSetVringAddr = 9,
  kSetVringBase = 10,
  kGetVringBase = 11,
  kSetVringKick = 12,
  kSetVringCall = 13,
  kSetVringErr = 14,
  kGetProtocolFeatures = 15,
  kSetProtocolFeatures = 16,
  kGetQueueNum = 17,
  kSetVringEnable = 18,
  kSendRarp = 19,
  kNetSetMtu = 20,
  kSetBackendReqFd = 21,
  kIotlbMsg = 22,
  kSetVringEndian = 23,
  kGetConfig = 24,
  kSetConfig = 25,
  kCreateCryptoSession = 26,
  kCloseCryptoSession = 27,
  kPostcopyAdvise = 28,
  kPostcopyListen = 29,
  kPostcopyEnd = 30,
  kGetInflightFd = 31,
  kSetInflightFd = 32,
  kGpuSetSocket = 33,
  kResetDevice = 34,
  kVringKick = 35,
  kGetMaxMemSlots = 36,
  kAddMemReg = 37,
  kRemMemReg = 38,
  kSetStatus = 39,
  kGetStatus = 40,
};

// Back-end -> front-end requests on the back-end channel (SET_BACKEND_REQ_FD), the
// spec's "Back-end message types": the ones this backend sends.
enum class BackendRequest : uint32_t {
  kIotlbMsg = 1,  // VHOST_USER_BACKEND_IOTLB_MSG: an IOTLB miss
};


// Header flags.
inline constexpr uint32_t kVersionMask = 0x3;
inline constexpr uint32_t kVersion1 = 0x1;
inline constexpr uint32_t kFlagReply = 0x4;
inline constexpr uint32_t kFlagNeedReply = 0x8;
// Bits we know of; any other bit in a request's flags is refused.
inline constexpr uint32_t kKnownFlags = kVersionMask | kFlagReply | kFlagNeedReply;

inline constexpr size_t kHeaderSize = 12;
// Most fds one message may carry (the spec's limit, also SCM_RIGHTS buffer size).
inline constexpr size_t kMaxFds = 8;
// Regions in one SET_MEM_TABLE (fixed by the wire format).
inline constexpr size_t kMaxMemTableRegions = 8;
// Largest payload the connection reads at all. Anything bigger cannot be a message
// we accept (the largest, SET_MEM_TABLE, is 264 bytes), and reading it would let the
// frontend make us allocate at will; the connection closes instead.
inline constexpr size_t kMaxPayloadSize = 4096;

// SET_VRING_KICK/CALL/ERR u64: bits 0-7 index, bit 8 "no fd, poll instead".
inline constexpr uint64_t kVringIndexMask = 0xff;
inline constexpr uint64_t kVringNoFdFlag = uint64_t{1} << 8;
// SET_VRING_ADDR flags: bit 0 = VHOST_VRING_F_LOG (log used ring writes).
inline constexpr uint32_t kVringFlagLog = 0x1;

// What an accepted request carries on the wire: its payload, its fds, whether it names
// a vring.
enum class PayloadShape : uint8_t {
  kEmpty,
  kU64,
  kVringState,
  kVringAddress,
  kMemTable,
  kSingleRegion,
  kLogArea,
  kVringFd,
  kIotlb,
};

struct RequestRule {
  bool accepted = false;  // false: the parser refuses the request as unsupported
  PayloadShape shape = PayloadShape::kEmpty;
  uint8_t min_fds = 0;  // for kMemTable and kVringFd the count depends on the payload
  uint8_t max_fds = 0;
  bool indexed = false;  // payload names a vring: index must be below the queue count
};

// One row per request: its spec name and the parser's rule. The request table below
// is the only place a request is named; to_string, parse_request and the device's
// dispatch (backend_device.cpp, which checks it has a handler for each accepted row)
// all read it. Like DPDK's vhost_message_handlers[] in lib/vhost/vhost_user.c.
struct RequestEntry {
  Request request;
  std::string_view name;
  RequestRule rule;
};

namespace detail {
constexpr RequestRule accept(PayloadShape shape, uint8_t min_fds = 0, uint8_t max_fds = 0) {
  return RequestRule{true, shape, min_fds, max_fds, false};
}
constexpr RequestRule accept_indexed(PayloadShape shape, uint8_t min_fds = 0, uint8_t max_fds = 0) {
  return RequestRule{true, shape, min_fds, max_fds, true};
}
inline constexpr RequestRule kUnsupported{};
}  // namespace detail

// Indexed by request number.
inline constexpr RequestEntry kRequestTable[] = {
    {Request::kNone, "VHOST_USER_NONE", detail::kUnsupported},
    {Request::kGetFeatures, "VHOST_USER_GET_FEATURES", detail::accept(PayloadShape::kEmpty)},
    {Request::kSetFeatures, "VHOST_USER_SET_FEATURES", detail::accept(PayloadShape::kU64)},
    {Request::kSetOwner, "VHOST_USER_SET_OWNER", detail::accept(PayloadShape::kEmpty)},
    {Request::kResetOwner, "VHOST_USER_RESET_OWNER", detail::accept(PayloadShape::kEmpty)},
    {Request::kSetMemTable, "VHOST_USER_SET_MEM_TABLE", detail::accept(PayloadShape::kMemTable, 1, uint8_t{kMaxMemTableRegions})},
    {Request::kSetLogBase, "VHOST_USER_SET_LOG_BASE", detail::accept(PayloadShape::kLogArea, 1, 1)},
    {Request::kSetLogFd, "VHOST_USER_SET_LOG_FD", detail::accept(PayloadShape::kEmpty, 1, 1)},
    {Request::kSetVringNum, "VHOST_USER_SET_VRING_NUM", detail::accept_indexed(PayloadShape::kVringState)},
    {Request::kSetVringAddr, "VHOST_USER_SET_VRING_ADDR", detail::accept_indexed(PayloadShape::kVringAddress)},
    {Request::kSetVringBase, "VHOST_USER_SET_VRING_BASE", detail::accept_indexed(PayloadShape::kVringState)},
    {Request::kGetVringBase, "VHOST_USER_GET_VRING_BASE", detail::accept_indexed(PayloadShape::kVringState)},
    {Request::kSetVringKick, "VHOST_USER_SET_VRING_KICK", detail::accept_indexed(PayloadShape::kVringFd, 0, 1)},
    {Request::kSetVringCall, "VHOST_USER_SET_VRING_CALL", detail::accept_indexed(PayloadShape::kVringFd, 0, 1)},
    {Request::kSetVringErr, "VHOST_USER_SET_VRING_ERR", detail::accept_indexed(PayloadShape::kVringFd, 0, 1)},
    {Request::kGetProtocolFeatures, "VHOST_USER_GET_PROTOCOL_FEATURES", detail::accept(PayloadShape::kEmpty)},
    {Request::kSetProtocolFeatures, "VHOST_USER_SET_PROTOCOL_FEATURES", detail::accept(PayloadShape::kU64)},
    {Request::kGetQueueNum, "VHOST_USER_GET_QUEUE_NUM", detail::accept(PayloadShape::kEmpty)},
    {Request::kSetVringEnable, "VHOST_USER_SET_VRING_ENABLE", detail::accept_indexed(PayloadShape::kVringState)},
    {Request::kSendRarp, "VHOST_USER_SEND_RARP", detail::accept(PayloadShape::kU64)},
    {Request::kNetSetMtu, "VHOST_USER_NET_SET_MTU", detail::accept(PayloadShape::kU64)},
    {Request::kSetBackendReqFd, "VHOST_USER_SET_BACKEND_REQ_FD", detail::accept(PayloadShape::kEmpty, 1, 1)},
    {Request::kIotlbMsg, "VHOST_USER_IOTLB_MSG", detail::accept(PayloadShape::kIotlb)},
    {Request::kSetVringEndian, "VHOST_USER_SET_VRING_ENDIAN", detail::kUnsupported},
    {Request::kGetConfig, "VHOST_USER_GET_CONFIG", detail::kUnsupported},
    {Request::kSetConfig, "VHOST_USER_SET_CONFIG", detail::kUnsupported},
    {Request::kCreateCryptoSession, "VHOST_USER_CREATE_CRYPTO_SESSION", detail::kUnsupported},
    {Request::kCloseCryptoSession, "VHOST_USER_CLOSE_CRYPTO_SESSION", detail::kUnsupported},
    {Request::kPostcopyAdvise, "VHOST_USER_POSTCOPY_ADVISE", detail::kUnsupported},
    {Request::kPostcopyListen, "VHOST_USER_POSTCOPY_LISTEN", detail::kUnsupported},
    {Request::kPostcopyEnd, "VHOST_USER_POSTCOPY_END", detail::kUnsupported},
    {Request::kGetInflightFd, "VHOST_USER_GET_INFLIGHT_FD", detail::kUnsupported},
    {Request::kSetInflightFd, "VHOST_USER_SET_INFLIGHT_FD", detail::kUnsupported},
    {Request::kGpuSetSocket, "VHOST_USER_GPU_SET_SOCKET", detail::kUnsupported},
    {Request::kResetDevice, "VHOST_USER_RESET_DEVICE", detail::kUnsupported},
    {Request::kVringKick, "VHOST_USER_VRING_KICK", detail::kUnsupported},
    {Request::kGetMaxMemSlots, "VHOST_USER_GET_MAX_MEM_SLOTS", detail::accept(PayloadShape::kEmpty)},
    {Request::kAddMemReg, "VHOST_USER_ADD_MEM_REG", detail::accept(PayloadShape::kSingleRegion, 1, 1)},
    // The spec: no fd SHOULD come with REM_MEM_REG, but one MAY be accepted and must
    // then be closed unused. The parser leaves it in the RawMessage, which closes it.
    {Request::kRemMemReg, "VHOST_USER_REM_MEM_REG", detail::accept(PayloadShape::kSingleRegion, 0, 1)},
    {Request::kSetStatus, "VHOST_USER_SET_STATUS", detail::accept(PayloadShape::kU64)},
    {Request::kGetStatus, "VHOST_USER_GET_STATUS", detail::accept(PayloadShape::kEmpty)},
};

// The row of request number `number`, or nullptr for a number past the table.
constexpr const RequestEntry* find_request(uint32_t number) noexcept {
  return number < std::size(kRequestTable) ? &kRequestTable[number] : nullptr;
}

constexpr bool request_table_is_indexed_by_number() noexcept {
  for (size_t i = 0; i < std::size(kRequestTable); ++i) {
    if (static_cast<size_t>(kRequestTable[i].request) != i) return false;
  }
  return true;
}
static_assert(request_table_is_indexed_by_number(), "kRequestTable[n] must describe request n");

// "VHOST_USER_GET_FEATURES" style name for logs; unknown values give "unknown".
std::string_view to_string(Request request) noexcept;

struct Header {
  uint32_t request = 0;
  uint32_t flags = 0;
  uint32_t size = 0;
};

// ---- typed payloads ----
struct VringState {
  uint32_t index = 0;
  uint32_t num = 0;
};

struct VringAddress {
  uint32_t index = 0;
  uint32_t flags = 0;
  uint64_t desc_user_addr = 0;
  uint64_t used_user_addr = 0;
  uint64_t avail_user_addr = 0;
  uint64_t log_guest_addr = 0;
};

struct MemoryRegionDesc {
  uint64_t guest_phys_addr = 0;
  uint64_t size = 0;
  uint64_t user_addr = 0;
  uint64_t mmap_offset = 0;
};

struct MemoryTable {
  uint32_t count = 0;  // 1..kMaxMemTableRegions
  std::array<MemoryRegionDesc, kMaxMemTableRegions> regions{};
};

// ADD_MEM_REG / REM_MEM_REG: one region (the wire form has 8 bytes of padding first).
struct SingleRegion {
  MemoryRegionDesc region;
};

struct LogArea {
  uint64_t size = 0;    // bytes of bitmap
  uint64_t offset = 0;  // where the bitmap starts in the fd
};

// VHOST_USER_IOTLB_MSG and VHOST_USER_BACKEND_IOTLB_MSG: struct vhost_iotlb_msg.
enum class IotlbType : uint8_t { kMiss = 1, kUpdate = 2, kInvalidate = 3, kAccessFail = 4 };
inline constexpr uint8_t kIotlbPermRead = 1;   // VHOST_ACCESS_RO
inline constexpr uint8_t kIotlbPermWrite = 2;  // VHOST_ACCESS_WO (3: both)
struct IotlbMessage {
  uint64_t iova = 0;
  uint64_t size = 0;
  uint64_t user_addr = 0;
  uint8_t perm = 0;
  uint8_t type = 0;  // an IotlbType, as the frontend sent it (checked by the device)
};

// SET_VRING_KICK/CALL/ERR, decoded.
struct VringFd {
  uint32_t index = 0;
  bool no_fd = false;  // polling instead of an eventfd
};

using Payload = std::variant<std::monostate, uint64_t, VringState, VringAddress, MemoryTable, SingleRegion,
                             LogArea, VringFd, IotlbMessage>;

// Wire sizes of the payloads.
inline constexpr size_t kU64Size = 8;
inline constexpr size_t kVringStateSize = 8;
inline constexpr size_t kVringAddressSize = 40;
inline constexpr size_t kMemoryRegionSize = 32;
inline constexpr size_t kMemTableHeaderSize = 8;  // count + padding
inline constexpr size_t kSingleRegionSize = 40;   // padding + region
inline constexpr size_t kLogAreaSize = 16;
inline constexpr size_t kIotlbSize = 32;  // three u64, perm, type, and 6 bytes of padding

// A message as it came off the socket, before any judgement.
struct RawMessage {
  Header header;
  std::vector<std::byte> payload;  // header.size bytes
  std::vector<base::UniqueFd> fds;       // at most kMaxFds
};

// A request that passed the parser.
struct Message {
  Request request = Request::kNone;
  uint32_t flags = 0;
  Payload payload;
  std::vector<base::UniqueFd> fds;  // exactly the fds the request consumes, in wire order

  bool need_reply() const noexcept { return (flags & kFlagNeedReply) != 0; }
};

struct ParseError {
  // What the header said, so the device can still answer (REPLY_ACK) when it may.
  uint32_t request = 0;
  uint32_t flags = 0;
  bool known_request = false;  // a request number this parser accepts at all
  std::string reason;
};

using ParseResult = std::variant<Message, ParseError>;

struct ParseLimits {
  uint32_t queue_count = 2;  // vring indexes must be below this
};

// Strict parse of a front-end request. Consumes `raw` (its fds are moved into the
// Message or closed).
ParseResult parse_request(RawMessage raw, const ParseLimits& limits);

// ---- building messages ----
// Wire bytes (header + payload) for a request or a reply. flags gets the version bits
// added. The fds, if any, are sent separately by Connection::send.
std::vector<std::byte> encode(Request request, uint32_t flags, const Payload& payload);
inline std::vector<std::byte> encode_reply(Request request, const Payload& payload) {
  return encode(request, kFlagReply, payload);
}
// A back-end request for the back-end channel.
std::vector<std::byte> encode(BackendRequest request, uint32_t flags, const Payload& payload);

// ---- replies (front-end side) ----
enum class ReplyKind { kU64, kVringState };
struct Reply {
  Request request = Request::kNone;
  Payload payload;  // uint64_t or VringState
};
using ReplyResult = std::variant<Reply, ParseError>;
// Checks version, REPLY bit, request == expected, exact size and no fds (closing any).
ReplyResult parse_reply(RawMessage raw, Request expected, ReplyKind kind);

}  // namespace uvhost::vhost_user
