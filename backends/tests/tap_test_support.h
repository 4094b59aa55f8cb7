// tap_test_support.h - what the tap tests need around a real tap: a private network
// namespace per test, commands (`ip`, `ping`) run inside it, AF_PACKET sockets on the
// tap, frame builders (ethernet, ARP, IPv4/TCP/ICMP with real checksums), and what a
// pinged host answers (ARP and ICMP echo replies).
//
// Why unshare(CLONE_NEWNET) on the test's own thread: network namespaces belong to
// threads, so after unshare this thread (and every thread or child process it starts)
// sees a fresh namespace with only `lo`: the taps, addresses and packet sockets of a
// test never touch the host, and tests cannot collide (ctest runs them in parallel).
// The sandbox switches back with setns() when the test ends; the namespace then dies
// with its last socket / tap fd, and the kernel deletes every interface in it, so a
// persistent tap cannot leak even when a test fails half-way. No `ip netns add`: no
// name in /run/netns to clean up, nothing left after a crash.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <poll.h>
#include <sched.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "uvhost/base/unique_fd.h"
#include "uvhost/virtio/net_header.h"

extern char** environ;

namespace uvhost::backends::testing {

using Bytes = std::vector<std::byte>;
using Clock = std::chrono::steady_clock;

// ---- privileges -------------------------------------------------------------------

// Why the tap tests cannot run here, or empty when they can.
inline std::string missing_privileges() {
  if (::access("/dev/net/tun", R_OK | W_OK) != 0) return "/dev/net/tun is missing or not accessible";
  std::ifstream status("/proc/self/status");
  std::string line;
  uint64_t effective = 0;
  while (std::getline(status, line)) {
    if (line.rfind("CapEff:", 0) == 0) effective = std::stoull(line.substr(7), nullptr, 16);
  }
  constexpr unsigned kNetAdmin = 12, kNetRaw = 13, kSysAdmin = 21;
  if (((effective >> kNetAdmin) & 1) == 0) return "CAP_NET_ADMIN is missing (taps cannot be created)";
  if (((effective >> kNetRaw) & 1) == 0) return "CAP_NET_RAW is missing (no AF_PACKET / raw sockets)";
  if (((effective >> kSysAdmin) & 1) == 0) return "CAP_SYS_ADMIN is missing (no private network namespace)";
  return {};
}

// ---- fds and the namespace ----------------------------------------------------------

// Moves the calling thread into a new, empty network namespace; back on destruction.
class NetnsSandbox {
 public:
  NetnsSandbox() {
    original_ = base::UniqueFd(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!original_.valid()) {
      error_ = std::string("open /proc/thread-self/ns/net: ") + std::strerror(errno);
      return;
    }
    if (::unshare(CLONE_NEWNET) != 0) {
      error_ = std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
      original_.reset();
      return;
    }
    // No IPv6 on new interfaces: no router solicitations or MLD reports on the taps,
    // so a tap carries exactly what a test sends. (Tests filter frames anyway.)
    for (const char* path :
         {"/proc/sys/net/ipv6/conf/default/disable_ipv6", "/proc/sys/net/ipv6/conf/all/disable_ipv6"}) {
      std::ofstream(path) << "1\n";
    }
  }
  ~NetnsSandbox() {
    if (original_.valid() && ::setns(original_.get(), CLONE_NEWNET) != 0) {
      std::fprintf(stderr, "setns back to the original namespace failed: %s\n", std::strerror(errno));
      std::abort();  // the rest of the process would run in the wrong namespace
    }
  }
  NetnsSandbox(const NetnsSandbox&) = delete;
  NetnsSandbox& operator=(const NetnsSandbox&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

 private:
  base::UniqueFd original_;
  std::string error_;
};

// ---- commands ------------------------------------------------------------------------

inline std::optional<std::string> find_program(const std::string& name) {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  path += ":/usr/sbin:/sbin:/usr/bin:/bin";
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

// A child process (inherits this thread's network namespace) with stdout+stderr in a
// pipe. Runs without a shell.
class Child {
 public:
  static std::optional<Child> spawn(const std::vector<std::string>& argv, std::string& error) {
    const auto program = find_program(argv.at(0));
    if (!program) {
      error = argv[0] + ": not found";
      return std::nullopt;
    }
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
      error = "pipe2 failed";
      return std::nullopt;
    }
    base::UniqueFd read_end(pipe_fds[0]);
    base::UniqueFd write_end(pipe_fds[1]);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDERR_FILENO);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, program->c_str(), &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      error = "posix_spawn " + *program + ": " + std::strerror(rc);
      return std::nullopt;
    }
    return Child(pid, std::move(read_end));
  }

  Child(Child&& other) noexcept : pid_(std::exchange(other.pid_, -1)), output_(std::move(other.output_)) {}
  Child& operator=(Child&&) = delete;
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  // The exit code once the child has ended (collecting its output), else nullopt.
  std::optional<int> poll_exit() {
    drain();
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done != pid_) return std::nullopt;
    pid_ = -1;
    drain_blocking();
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  int wait() {
    drain_blocking();
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  const std::string& output() const { return text_; }

 private:
  Child(pid_t pid, base::UniqueFd output) : pid_(pid), output_(std::move(output)) {
    ::fcntl(output_.get(), F_SETFL, ::fcntl(output_.get(), F_GETFL) | O_NONBLOCK);
  }
  void drain() {
    char buffer[4096];
    for (;;) {
      const ssize_t got = ::read(output_.get(), buffer, sizeof(buffer));
      if (got <= 0) return;
      text_.append(buffer, static_cast<size_t>(got));
    }
  }
  void drain_blocking() {
    pollfd entry{output_.get(), POLLIN, 0};
    while (::poll(&entry, 1, 5000) > 0) {
      char buffer[4096];
      const ssize_t got = ::read(output_.get(), buffer, sizeof(buffer));
      if (got <= 0) return;
      text_.append(buffer, static_cast<size_t>(got));
    }
  }

  pid_t pid_;
  base::UniqueFd output_;
  std::string text_;
};

struct CommandResult {
  int exit_code = -1;
  std::string output;
};

// Runs argv to completion (in this thread's namespace).
inline CommandResult run(const std::vector<std::string>& argv) {
  std::string error;
  auto child = Child::spawn(argv, error);
  if (!child) return {127, error};
  const int code = child->wait();
  return {code, child->output()};
}

// ---- bytes, checksums, frames --------------------------------------------------------

using Mac = std::array<uint8_t, 6>;

inline void put8(Bytes& out, uint8_t v) { out.push_back(std::byte{v}); }
inline void put16(Bytes& out, uint16_t v) {
  put8(out, static_cast<uint8_t>(v >> 8));
  put8(out, static_cast<uint8_t>(v & 0xff));
}
inline void put32(Bytes& out, uint32_t v) {
  put16(out, static_cast<uint16_t>(v >> 16));
  put16(out, static_cast<uint16_t>(v & 0xffff));
}
inline void put_mac(Bytes& out, const Mac& mac) {
  for (uint8_t b : mac) put8(out, b);
}
inline uint8_t get8(const Bytes& in, size_t at) { return std::to_integer<uint8_t>(in.at(at)); }
inline uint16_t get16(const Bytes& in, size_t at) {
  return static_cast<uint16_t>((get8(in, at) << 8) | get8(in, at + 1));
}
inline uint32_t get32(const Bytes& in, size_t at) {
  return (uint32_t{get16(in, at)} << 16) | get16(in, at + 2);
}
inline void set16(Bytes& out, size_t at, uint16_t v) {
  out.at(at) = std::byte{static_cast<uint8_t>(v >> 8)};
  out.at(at + 1) = std::byte{static_cast<uint8_t>(v & 0xff)};
}

// One's-complement sum of big-endian 16-bit words (not folded, not inverted).
inline uint32_t sum16(const Bytes& data, size_t begin, size_t end, uint32_t sum = 0) {
  for (size_t i = begin; i + 1 < end; i += 2) sum += get16(data, i);
  if ((end - begin) % 2 != 0) sum += uint32_t{get8(data, end - 1)} << 8;
  return sum;
}
inline uint16_t fold(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}
inline uint16_t checksum(const Bytes& data, size_t begin, size_t end) {
  return static_cast<uint16_t>(~fold(sum16(data, begin, end)));
}
// Sum of the IPv4 pseudo header of an L4 segment of `l4_length` bytes.
inline uint32_t pseudo_header_sum(uint32_t source, uint32_t destination, uint8_t protocol, size_t l4_length) {
  return (source >> 16) + (source & 0xffff) + (destination >> 16) + (destination & 0xffff) + protocol +
         static_cast<uint32_t>(l4_length);
}

constexpr size_t kEthHeader = 14;
constexpr size_t kIpHeader = 20;
constexpr size_t kTcpHeader = 20;
constexpr uint16_t kTestEtherType = 0x88b5;  // IEEE local experimental: nothing else sends it

inline Bytes ethernet(const Mac& destination, const Mac& source, uint16_t ether_type) {
  Bytes frame;
  put_mac(frame, destination);
  put_mac(frame, source);
  put16(frame, ether_type);
  return frame;
}

// An ethernet frame of `length` (>= 17) bytes with the test ethertype, a tag, a
// sequence number and a pattern.
inline Bytes test_frame(size_t length, uint8_t tag, uint16_t sequence = 0) {
  Bytes frame = ethernet({0x02, 0, 0, 0, 0, 0x0b}, {0x02, 0, 0, 0, 0, 0x0a}, kTestEtherType);
  put8(frame, tag);
  put16(frame, sequence);
  while (frame.size() < length) put8(frame, static_cast<uint8_t>(frame.size() * 7 + tag));
  frame.resize(length);
  return frame;
}
inline bool is_test_frame(const Bytes& frame, uint8_t tag) {
  return frame.size() >= kEthHeader + 3 && get16(frame, 12) == kTestEtherType && get8(frame, kEthHeader) == tag;
}
inline bool is_test_frame(const Bytes& frame, uint8_t tag, uint16_t sequence) {
  return is_test_frame(frame, tag) && get16(frame, kEthHeader + 1) == sequence;
}

struct TcpFrameSpec {
  Mac destination{0x02, 0, 0, 0, 0, 0x0b};
  Mac source{0x02, 0, 0, 0, 0, 0x0a};
  uint32_t ip_source = 0x0a4d0002;       // 10.77.0.2
  uint32_t ip_destination = 0x0a4d0001;  // 10.77.0.1
  uint16_t port_source = 40000;
  uint16_t port_destination = 5001;
  size_t payload = 3 * 1448;
  bool partial_checksum = true;  // TCP checksum field = pseudo-header sum (NEEDS_CSUM)
};

// Ethernet + IPv4 + TCP (ACK|PSH) + payload pattern. The IP checksum is complete; the
// TCP checksum is the pseudo-header sum for NEEDS_CSUM, or complete.
inline Bytes tcp_frame(const TcpFrameSpec& spec) {
  Bytes frame = ethernet(spec.destination, spec.source, ETHERTYPE_IP);
  const size_t l4_length = kTcpHeader + spec.payload;
  put8(frame, 0x45);
  put8(frame, 0);
  put16(frame, static_cast<uint16_t>(kIpHeader + l4_length));
  put16(frame, 0x1234);  // id
  put16(frame, 0x4000);  // DF
  put8(frame, 64);
  put8(frame, IPPROTO_TCP);
  put16(frame, 0);
  put32(frame, spec.ip_source);
  put32(frame, spec.ip_destination);
  set16(frame, kEthHeader + 10, checksum(frame, kEthHeader, kEthHeader + kIpHeader));
  put16(frame, spec.port_source);
  put16(frame, spec.port_destination);
  put32(frame, 1000);  // seq
  put32(frame, 1);     // ack
  put8(frame, 5 << 4);
  put8(frame, 0x18);  // ACK | PSH
  put16(frame, 65535);
  put16(frame, 0);  // checksum, below
  put16(frame, 0);
  for (size_t i = 0; i < spec.payload; ++i) put8(frame, static_cast<uint8_t>(i * 13 + 5));
  const uint32_t pseudo = pseudo_header_sum(spec.ip_source, spec.ip_destination, IPPROTO_TCP, l4_length);
  const size_t l4 = kEthHeader + kIpHeader;
  if (spec.partial_checksum) {
    set16(frame, l4 + 16, fold(pseudo));
  } else {
    set16(frame, l4 + 16, static_cast<uint16_t>(~fold(sum16(frame, l4, frame.size(), pseudo))));
  }
  return frame;
}

// An IPv4 TCP frame to `port` (tcp_frame's default destination port: 5001).
inline bool is_ipv4_tcp_to(const Bytes& frame, uint16_t port = 5001) {
  return frame.size() >= kEthHeader + kIpHeader + kTcpHeader && get16(frame, 12) == ETHERTYPE_IP &&
         get8(frame, kEthHeader + 9) == IPPROTO_TCP && get16(frame, kEthHeader + kIpHeader + 2) == port;
}

// IPv4 header and TCP checksums of a received frame both verify.
inline bool ipv4_tcp_checksums_valid(const Bytes& frame) {
  if (frame.size() < kEthHeader + kIpHeader + kTcpHeader) return false;
  if (fold(sum16(frame, kEthHeader, kEthHeader + kIpHeader)) != 0xffff) return false;
  const size_t l4 = kEthHeader + kIpHeader;
  const uint32_t pseudo =
      pseudo_header_sum(get32(frame, kEthHeader + 12), get32(frame, kEthHeader + 16), IPPROTO_TCP, frame.size() - l4);
  return fold(sum16(frame, l4, frame.size(), pseudo)) == 0xffff;
}

// ---- the other end of a ping --------------------------------------------------------

enum class Answered { kNone, kArp, kEcho };

// What a host with `mac` and IPv4 `address` answers to `frame`: an ARP reply to a
// request for `address`, an ICMP echo reply (fresh TTL and checksums) to an echo
// request to it, nothing (nullopt) to anything else. `what` says which.
inline std::optional<Bytes> answer_arp_or_echo(const Bytes& frame, const Mac& mac, uint32_t address, Answered& what) {
  what = Answered::kNone;
  if (frame.size() < kEthHeader) return std::nullopt;
  Mac requester{};
  for (size_t i = 0; i < 6; ++i) requester[i] = get8(frame, 6 + i);
  const uint16_t type = get16(frame, 12);
  if (type == ETHERTYPE_ARP && frame.size() >= kEthHeader + 28 && get16(frame, kEthHeader + 6) == 1 &&
      get32(frame, kEthHeader + 24) == address) {
    Bytes reply = ethernet(requester, mac, ETHERTYPE_ARP);
    put16(reply, 1);             // ethernet
    put16(reply, ETHERTYPE_IP);  // IPv4
    put8(reply, 6);
    put8(reply, 4);
    put16(reply, 2);  // reply
    put_mac(reply, mac);
    put32(reply, address);
    reply.insert(reply.end(), frame.begin() + kEthHeader + 8, frame.begin() + kEthHeader + 18);  // their MAC + IP
    what = Answered::kArp;
    return reply;
  }
  if (type != ETHERTYPE_IP || frame.size() < kEthHeader + kIpHeader) return std::nullopt;
  const size_t ip_length = size_t{get8(frame, kEthHeader) & 0x0fu} * 4;
  const size_t icmp = kEthHeader + ip_length;
  if (get8(frame, kEthHeader + 9) != IPPROTO_ICMP || get32(frame, kEthHeader + 16) != address ||
      frame.size() < icmp + 8 || get8(frame, icmp) != 8 /* echo request */) {
    return std::nullopt;
  }
  Bytes reply = ethernet(requester, mac, ETHERTYPE_IP);
  reply.insert(reply.end(), frame.begin() + kEthHeader, frame.end());
  // Swap the addresses, fresh TTL and header checksum; echo reply with its checksum.
  const uint32_t source = get32(frame, kEthHeader + 12);
  for (size_t i = 0; i < 4; ++i) {
    reply[kEthHeader + 12 + i] = frame[kEthHeader + 16 + i];
    reply[kEthHeader + 16 + i] = std::byte{static_cast<uint8_t>(source >> (24 - 8 * i))};
  }
  reply[kEthHeader + 8] = std::byte{64};
  set16(reply, kEthHeader + 10, 0);
  set16(reply, kEthHeader + 10, checksum(reply, kEthHeader, icmp));
  reply[icmp] = std::byte{0};
  set16(reply, icmp + 2, 0);
  set16(reply, icmp + 2, checksum(reply, icmp, reply.size()));
  what = Answered::kEcho;
  return reply;
}

// ---- AF_PACKET -----------------------------------------------------------------------

// A packet socket bound to one interface. With vnet_hdr, every frame it sends or
// receives is preceded by a 10-byte struct virtio_net_hdr in host byte order.
// An ICMP echo request (type 8) with 32 bytes of payload, checksum filled in: what a
// raw IPPROTO_ICMP socket sends (the kernel adds the IPv4 header).
inline Bytes icmp_echo_request(uint16_t id, uint16_t sequence) {
  Bytes request;
  put8(request, 8);
  put8(request, 0);
  put16(request, 0);
  put16(request, id);
  put16(request, sequence);
  for (int i = 0; i < 32; ++i) put8(request, static_cast<uint8_t>(i));
  set16(request, 2, checksum(request, 0, request.size()));
  return request;
}

// Is `packet` (IPv4 header first, as a raw ICMP socket receives it) the echo reply
// (type 0) to request (id, sequence)?
inline bool is_icmp_echo_reply(const Bytes& packet, uint16_t id, uint16_t sequence) {
  if (packet.empty()) return false;
  const size_t at = size_t{get8(packet, 0) & 0x0fu} * 4;
  return packet.size() >= at + 8 && get8(packet, at) == 0 && get16(packet, at + 4) == id &&
         get16(packet, at + 6) == sequence;
}

// The 10-byte virtio_net_hdr a packet socket with PACKET_VNET_HDR puts before each
// frame (host byte order; no num_buffers). (<linux/virtio_net.h> does not compile as
// C++: a member named "class".)
inline Bytes packet_vnet_header(const virtio::NetHeader& header) {
  const uint16_t fields[] = {header.hdr_len, header.gso_size, header.csum_start, header.csum_offset};
  Bytes bytes(2 + sizeof(fields));
  bytes[0] = std::byte{header.flags};
  bytes[1] = std::byte{header.gso_type};
  std::memcpy(bytes.data() + 2, fields, sizeof(fields));
  return bytes;
}

inline base::UniqueFd packet_socket(unsigned ifindex, bool vnet_hdr = false) {
  base::UniqueFd fd(::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0));  // protocol 0: nothing queued before bind
  if (!fd.valid()) return fd;
  if (vnet_hdr) {
    int on = 1;
    if (::setsockopt(fd.get(), SOL_PACKET, PACKET_VNET_HDR, &on, sizeof(on)) != 0) return base::UniqueFd();
  }
  sockaddr_ll address{};
  address.sll_family = AF_PACKET;
  address.sll_protocol = htons(ETH_P_ALL);
  address.sll_ifindex = static_cast<int>(ifindex);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) return base::UniqueFd();
  return fd;
}

inline bool packet_send(int fd, unsigned ifindex, const Bytes& bytes) {
  sockaddr_ll address{};
  address.sll_family = AF_PACKET;
  address.sll_ifindex = static_cast<int>(ifindex);
  address.sll_halen = 6;
  const ssize_t sent =
      ::sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  return sent == static_cast<ssize_t>(bytes.size());
}

// The next frame (not one this host sent out) for which `match` is true, or nullopt
// after `timeout`.
template <typename Match>
std::optional<Bytes> packet_receive(int fd, Match match, std::chrono::milliseconds timeout = std::chrono::seconds(2)) {
  const auto deadline = Clock::now() + timeout;
  Bytes buffer(70000);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return std::nullopt;
    pollfd entry{fd, POLLIN, 0};
    if (::poll(&entry, 1, static_cast<int>(left)) <= 0) continue;
    sockaddr_ll from{};
    socklen_t from_len = sizeof(from);
    const ssize_t got =
        ::recvfrom(fd, buffer.data(), buffer.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &from_len);
    if (got < 0) continue;
    if (from.sll_pkttype == PACKET_OUTGOING) continue;
    Bytes frame(buffer.begin(), buffer.begin() + got);
    if (match(frame)) return frame;
  }
}

inline bool wait_readable(int fd, std::chrono::milliseconds timeout) {
  pollfd entry{fd, POLLIN, 0};
  return ::poll(&entry, 1, static_cast<int>(timeout.count())) > 0 && (entry.revents & POLLIN) != 0;
}

}  // namespace uvhost::backends::testing
