// message_test.cpp - the strict parser: each request's size/fd/flag/index rules, and
// that fds not consumed are closed.
#include <sys/eventfd.h>

#include <gtest/gtest.h>

#include <cstring>

#include "backend_test_support.h"
#include "uvhost/vhost_user/message.h"

namespace uvhost::vhost_user {
namespace {

using testing::count_open_fds;

RawMessage raw_of(Request request, uint32_t flags, const Payload& payload, size_t fd_count = 0) {
  const auto bytes = encode(request, flags, payload);
  RawMessage raw;
  std::memcpy(&raw.header.request, bytes.data(), 4);
  std::memcpy(&raw.header.flags, bytes.data() + 4, 4);
  std::memcpy(&raw.header.size, bytes.data() + 8, 4);
  raw.payload.assign(bytes.begin() + kHeaderSize, bytes.end());
  for (size_t i = 0; i < fd_count; ++i) raw.fds.emplace_back(::eventfd(0, EFD_CLOEXEC));
  return raw;
}

std::string error_of(ParseResult result) {
  if (auto* error = std::get_if<ParseError>(&result)) return error->reason;
  return "";
}

constexpr ParseLimits kLimits{2};

TEST(MessageTest, RoundTripsEveryPayloadShape) {
  auto features = parse_request(raw_of(Request::kSetFeatures, 0, Payload{uint64_t{0x1234}}), kLimits);
  ASSERT_TRUE(std::holds_alternative<Message>(features));
  EXPECT_EQ(std::get<uint64_t>(std::get<Message>(features).payload), 0x1234u);

  VringAddress address{1, kVringFlagLog, 0x1000, 0x3000, 0x2000, 0x4000};
  auto parsed = parse_request(raw_of(Request::kSetVringAddr, kFlagNeedReply, Payload{address}), kLimits);
  ASSERT_TRUE(std::holds_alternative<Message>(parsed));
  const Message& message = std::get<Message>(parsed);
  EXPECT_TRUE(message.need_reply());
  const auto& got = std::get<VringAddress>(message.payload);
  EXPECT_EQ(got.desc_user_addr, 0x1000u);
  EXPECT_EQ(got.used_user_addr, 0x3000u);
  EXPECT_EQ(got.avail_user_addr, 0x2000u);
  EXPECT_EQ(got.log_guest_addr, 0x4000u);

  MemoryTable table;
  table.count = 2;
  table.regions[0] = {0, 0x1000, 0x10000, 0};
  table.regions[1] = {0x1000, 0x2000, 0x20000, 0x1000};
  auto mem = parse_request(raw_of(Request::kSetMemTable, 0, Payload{table}, 2), kLimits);
  ASSERT_TRUE(std::holds_alternative<Message>(mem)) << error_of(std::move(mem));
  EXPECT_EQ(std::get<Message>(mem).fds.size(), 2u);
  EXPECT_EQ(std::get<MemoryTable>(std::get<Message>(mem).payload).regions[1].mmap_offset, 0x1000u);

  auto add = parse_request(raw_of(Request::kAddMemReg, 0, Payload{SingleRegion{{0x5000, 0x1000, 0x9000, 0}}}, 1),
                           kLimits);
  ASSERT_TRUE(std::holds_alternative<Message>(add));
  EXPECT_EQ(std::get<SingleRegion>(std::get<Message>(add).payload).region.guest_phys_addr, 0x5000u);

  auto kick = parse_request(raw_of(Request::kSetVringKick, 0, Payload{VringFd{1, true}}), kLimits);
  ASSERT_TRUE(std::holds_alternative<Message>(kick));
  EXPECT_TRUE(std::get<VringFd>(std::get<Message>(kick).payload).no_fd);
}

TEST(MessageTest, RefusesBadFlags) {
  RawMessage bad_version = raw_of(Request::kGetFeatures, 0, Payload{});
  bad_version.header.flags = 0x2;
  EXPECT_NE(error_of(parse_request(std::move(bad_version), kLimits)).find("bad version"), std::string::npos);
  EXPECT_NE(error_of(parse_request(raw_of(Request::kGetFeatures, kFlagReply, Payload{}), kLimits)).find("REPLY"),
            std::string::npos);
  EXPECT_NE(error_of(parse_request(raw_of(Request::kGetFeatures, 0x100, Payload{}), kLimits)).find("unknown flag"),
            std::string::npos);
}

TEST(MessageTest, RefusesWrongPayloadSizes) {
  EXPECT_NE(error_of(parse_request(raw_of(Request::kGetFeatures, 0, Payload{uint64_t{1}}), kLimits)).find("must be 0"),
            std::string::npos);
  EXPECT_NE(error_of(parse_request(raw_of(Request::kSetFeatures, 0, Payload{}), kLimits)).find("must be 8"),
            std::string::npos);
  EXPECT_NE(error_of(parse_request(raw_of(Request::kSetVringAddr, 0, Payload{uint64_t{1}}), kLimits)).find("must be 40"),
            std::string::npos);
  // A memory table whose count disagrees with its size.
  MemoryTable table;
  table.count = 1;
  RawMessage raw = raw_of(Request::kSetMemTable, 0, Payload{table}, 1);
  const uint32_t two = 2;
  std::memcpy(raw.payload.data(), &two, 4);
  EXPECT_NE(error_of(parse_request(std::move(raw), kLimits)).find("must be 72"), std::string::npos);
  table.count = 9;
  RawMessage nine = raw_of(Request::kSetMemTable, 0, Payload{table}, 0);
  EXPECT_NE(error_of(parse_request(std::move(nine), kLimits)).find("9 regions"), std::string::npos);
  table.count = 0;
  EXPECT_NE(error_of(parse_request(raw_of(Request::kSetMemTable, 0, Payload{table}), kLimits)).find("0 regions"),
            std::string::npos);
  // Header size disagreeing with the bytes actually read.
  RawMessage lying = raw_of(Request::kSetFeatures, 0, Payload{uint64_t{1}});
  lying.header.size = 16;
  EXPECT_NE(error_of(parse_request(std::move(lying), kLimits)).find("header says"), std::string::npos);
}

TEST(MessageTest, RefusesWrongFdCountsAndClosesEveryFd) {
  const int before = count_open_fds();
  EXPECT_NE(error_of(parse_request(raw_of(Request::kSetFeatures, 0, Payload{uint64_t{1}}, 3), kLimits)).find("got 3 fds"),
            std::string::npos);
  EXPECT_NE(error_of(parse_request(raw_of(Request::kSetVringKick, 0, Payload{VringFd{0, false}}, 0), kLimits))
                .find("got 0 fds"),
            std::string::npos);
  EXPECT_NE(error_of(parse_request(raw_of(Request::kSetVringCall, 0, Payload{VringFd{0, true}}, 1), kLimits))
                .find("got 1 fds"),
            std::string::npos);
  MemoryTable table;
  table.count = 2;
  EXPECT_NE(error_of(parse_request(raw_of(Request::kSetMemTable, 0, Payload{table}, 1), kLimits)).find("got 1 fds"),
            std::string::npos);
  EXPECT_NE(error_of(parse_request(raw_of(Request::kSetLogBase, 0, Payload{LogArea{8, 0}}, 0), kLimits)).find("fds"),
            std::string::npos);
  // REM_MEM_REG may carry one fd; it is accepted and closed, not handed over.
  auto rem = parse_request(raw_of(Request::kRemMemReg, 0, Payload{SingleRegion{}}, 1), kLimits);
  ASSERT_TRUE(std::holds_alternative<Message>(rem));
  EXPECT_TRUE(std::get<Message>(rem).fds.empty());
  EXPECT_EQ(count_open_fds(), before);
}

TEST(MessageTest, RefusesIndexesOutOfRangeAndStrayBits) {
  EXPECT_NE(error_of(parse_request(raw_of(Request::kSetVringNum, 0, Payload{VringState{2, 256}}), kLimits))
                .find("out of range"),
            std::string::npos);
  EXPECT_NE(error_of(parse_request(raw_of(Request::kSetVringKick, 0, Payload{uint64_t{0x200}}), kLimits))
                .find("stray bits"),
            std::string::npos);
  VringAddress address{0, 0x2, 0, 0, 0, 0};
  EXPECT_NE(error_of(parse_request(raw_of(Request::kSetVringAddr, 0, Payload{address}), kLimits)).find("vring flags"),
            std::string::npos);
}

TEST(MessageTest, UnknownAndUnsupportedRequestsAreNamed) {
  RawMessage unknown = raw_of(Request::kGetFeatures, 0, Payload{});
  unknown.header.request = 999;
  auto result = parse_request(std::move(unknown), kLimits);
  ASSERT_TRUE(std::holds_alternative<ParseError>(result));
  EXPECT_FALSE(std::get<ParseError>(result).known_request);
  EXPECT_NE(std::get<ParseError>(result).reason.find("unsupported request 999"), std::string::npos);
  EXPECT_NE(error_of(parse_request(raw_of(Request::kGetConfig, 0, Payload{}), kLimits)).find("VHOST_USER_GET_CONFIG"),
            std::string::npos);
}

TEST(MessageTest, ParseReplyChecksEverything) {
  auto good = parse_reply(raw_of(Request::kGetFeatures, kFlagReply, Payload{uint64_t{7}}), Request::kGetFeatures,
                          ReplyKind::kU64);
  ASSERT_TRUE(std::holds_alternative<Reply>(good));
  EXPECT_EQ(std::get<uint64_t>(std::get<Reply>(good).payload), 7u);
  EXPECT_TRUE(std::holds_alternative<ParseError>(parse_reply(raw_of(Request::kGetFeatures, 0, Payload{uint64_t{7}}),
                                                             Request::kGetFeatures, ReplyKind::kU64)));
  EXPECT_TRUE(std::holds_alternative<ParseError>(parse_reply(
      raw_of(Request::kGetProtocolFeatures, kFlagReply, Payload{uint64_t{7}}), Request::kGetFeatures, ReplyKind::kU64)));
  auto state = parse_reply(raw_of(Request::kGetVringBase, kFlagReply, Payload{VringState{1, 42}}),
                           Request::kGetVringBase, ReplyKind::kVringState);
  ASSERT_TRUE(std::holds_alternative<Reply>(state));
  EXPECT_EQ(std::get<VringState>(std::get<Reply>(state).payload).num, 42u);
  // A reply with fds is refused (and the fd closed).
  const int before = testing::count_open_fds();
  EXPECT_TRUE(std::holds_alternative<ParseError>(parse_reply(
      raw_of(Request::kGetFeatures, kFlagReply, Payload{uint64_t{7}}, 1), Request::kGetFeatures, ReplyKind::kU64)));
  EXPECT_EQ(testing::count_open_fds(), before);
}

}  // namespace
}  // namespace uvhost::vhost_user
