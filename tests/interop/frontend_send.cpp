// frontend_send.cpp - uvhost-frontend-send: our embedded vhost-user frontend
// (vhost-user/include/uvhost/vhost_user/frontend.h) sending packets to a backend and,
// with --echo / --io / --macswap, checking every one that comes back (testpmd io /
// macswap, uvhost's loopback).
//
//   uvhost-frontend-send --socket PATH [--server] --packets N [--size 64] [--batch 32]
//                        [--echo | --io | --macswap] [--window 128] [--no-event-idx]
//                        [--no-mrg] [--timeout-ms 20000] [--go-file PATH] [--pps N]
//
// Prints one line: sent=N received=M completed=C bad_frames=B out_of_order=O
// duplicates=D seconds=S tx_pps=X [rx_pps=Y], plus the negotiated features. Exit 0 when
// every packet was sent and completed by the device and, when reflected, every one came
// back exactly once, in order, byte for byte as sent (MACs as sent for --io, exchanged
// for --macswap, either for --echo); 1 otherwise; 2 for a failed start or a bad command
// line.
//
// Frames (frontend_frame.h): dst 02:00:00:00:00:02, src 02:00:00:00:00:01, EtherType
// 0x88B5 (local experimental), a 64-bit sequence number, a checksum, filler derived
// from the sequence number. When reflected, at most --window packets are outstanding
// (sent, not yet back), so the device never finds our RX ring empty and no packet may
// be dropped: the count must match exactly. --pps paces the sending (at
// most N frames per second, a batch at a time): a receiver behind a backend that drops
// rather than waits (uvhost's switch) then gets every frame.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <unistd.h>

#include "frontend_frame.h"
#include "uvhost/vhost_user/frontend.h"

using namespace uvhost::vhost_user;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string socket;
  bool server = false;
  uint64_t packets = 1000;
  size_t size = 64;
  size_t batch = 32;
  bool echo = false;  // the backend reflects every frame: check each one back
  frontend_frame::MacOrder macs = frontend_frame::MacOrder::kEither;
  uint64_t window = 128;
  bool event_idx = true;
  bool mrg = true;
  int timeout_ms = 20000;
  std::string go_file;  // wait for this file to exist before sending (see main)
  uint64_t pps = 0;     // at most this many frames per second (0: as fast as the ring allows)
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: uvhost-frontend-send --socket PATH [--server] --packets N [--size 64] [--batch 32]\n"
               "                            [--echo | --io | --macswap] [--window 128] [--no-event-idx]\n"
               "                            [--no-mrg] [--timeout-ms 20000] [--go-file PATH] [--pps N]\n");
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (arg == "--socket") a.socket = value();
    else if (arg == "--server") a.server = true;
    else if (arg == "--packets") a.packets = std::strtoull(value(), nullptr, 10);
    else if (arg == "--size") a.size = std::strtoull(value(), nullptr, 10);
    else if (arg == "--batch") a.batch = std::strtoull(value(), nullptr, 10);
    else if (arg == "--echo") a.echo = true;
    else if (arg == "--io") {
      a.echo = true;
      a.macs = frontend_frame::MacOrder::kAsSent;
    } else if (arg == "--macswap") {
      a.echo = true;
      a.macs = frontend_frame::MacOrder::kSwapped;
    }
    else if (arg == "--window") a.window = std::strtoull(value(), nullptr, 10);
    else if (arg == "--no-event-idx") a.event_idx = false;
    else if (arg == "--no-mrg") a.mrg = false;
    else if (arg == "--timeout-ms") a.timeout_ms = std::atoi(value());
    else if (arg == "--go-file") a.go_file = value();
    else if (arg == "--pps") a.pps = std::strtoull(value(), nullptr, 10);
    else usage();
  }
  if (a.socket.empty() || a.size < frontend_frame::kMinFrameSize || a.batch == 0 || a.window == 0) usage();
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  FrontendOptions options;
  if (!args.event_idx) options.features &= ~feature::kRingEventIdx;
  if (!args.mrg) options.features &= ~feature::kNetMrgRxbuf;
  // The window must fit in the RX ring, or the device could drop echoed packets.
  const uint64_t window = args.echo ? std::min<uint64_t>(args.window, options.queue_size / 2) : UINT64_MAX;

  std::string error;
  const auto timeout = std::chrono::milliseconds{args.timeout_ms};
  std::unique_ptr<Frontend> frontend = args.server ? listen_frontend(args.socket, options, timeout, error)
                                                   : connect_frontend(args.socket, options, timeout, error);
  if (!frontend) {
    std::fprintf(stderr, "uvhost-frontend-send: start failed: %s\n", error.c_str());
    return 2;
  }
  std::printf("features=%#llx protocol_features=%#llx header=%zu\n",
              static_cast<unsigned long long>(frontend->features()),
              static_cast<unsigned long long>(frontend->protocol_features()), frontend->net_header_size());

  // testpmd discards whatever its RX queues hold when forwarding starts (it flushes
  // them), uncounted; when it connected to us, it may still be starting. The caller
  // creates --go-file once testpmd says it is forwarding.
  if (!args.go_file.empty()) {
    const auto give_up = Clock::now() + timeout;
    while (::access(args.go_file.c_str(), F_OK) != 0 && Clock::now() < give_up) ::usleep(10000);
  }

  std::vector<std::byte> frame(args.size, std::byte{0});
  uint64_t sent = 0, received = 0;
  frontend_frame::EchoCheck check{.size = args.size, .macs = args.macs};
  auto on_packet = [&](const RxPacket& packet) {
    ++received;
    check.take(packet.frame);
  };

  const auto started = Clock::now();
  const auto deadline = started + timeout;
  Clock::time_point send_done = started;
  while (sent < args.packets && Clock::now() < deadline && !frontend->broken()) {
    if (args.pps > 0) {  // frame `sent` is due at started + sent / pps
      std::this_thread::sleep_until(started + std::chrono::nanoseconds(sent * 1'000'000'000ull / args.pps));
    }
    size_t queued = 0;
    while (queued < args.batch && sent < args.packets && sent - received < window) {
      frontend_frame::build(frame, sent);
      if (!frontend->enqueue_tx(frame)) break;
      ++sent;
      ++queued;
    }
    frontend->flush_tx();
    if (args.echo) frontend->poll_rx(on_packet);
    if (queued == 0) {
      // Ring full, or the echo window is: wait for the device instead of spinning hard.
      if (args.echo && sent - received >= window) {
        if (frontend->poll_rx(on_packet) == 0) frontend->wait_rx(std::chrono::milliseconds{10});
      } else {
        frontend->wait_tx_space(std::chrono::milliseconds{10});
      }
    }
  }
  send_done = Clock::now();
  // Every TX buffer must come back used: then the device has consumed every packet.
  while (frontend->tx_in_flight() > 0 && Clock::now() < deadline && !frontend->broken()) {
    if (frontend->reap_tx() == 0) frontend->wait_tx_space(std::chrono::milliseconds{10});
  }
  frontend->reap_tx();
  while (args.echo && received < sent && Clock::now() < deadline && !frontend->broken()) {
    if (frontend->poll_rx(on_packet) == 0) frontend->wait_rx(std::chrono::milliseconds{10});
  }
  const auto finished = Clock::now();
  const uint64_t completed = frontend->stats().tx_packets - frontend->tx_in_flight();
  const bool stopped = frontend->stop();

  const double send_s = std::chrono::duration<double>(send_done - started).count();
  const double total_s = std::chrono::duration<double>(finished - started).count();
  std::printf("sent=%llu received=%llu completed=%llu bad_frames=%llu out_of_order=%llu duplicates=%llu seconds=%.3f "
              "tx_pps=%.0f",
              static_cast<unsigned long long>(sent), static_cast<unsigned long long>(received),
              static_cast<unsigned long long>(completed), static_cast<unsigned long long>(check.bad),
              static_cast<unsigned long long>(check.out_of_order), static_cast<unsigned long long>(check.duplicates),
              total_s,
              send_s > 0 ? static_cast<double>(sent) / send_s : 0.0);
  if (args.echo) std::printf(" rx_pps=%.0f", total_s > 0 ? static_cast<double>(received) / total_s : 0.0);
  std::printf(" kicks=%llu tx_full=%llu\n", static_cast<unsigned long long>(frontend->stats().tx_kicks),
              static_cast<unsigned long long>(frontend->stats().tx_full));
  if (frontend->broken() || !stopped) std::fprintf(stderr, "uvhost-frontend-send: %s\n", frontend->error().c_str());

  const bool ok = stopped && !frontend->broken() && sent == args.packets && completed == sent &&
                  (!args.echo || (received == sent && check.clean() && check.next == sent));
  return ok ? 0 : 1;
}
