// soak_port.cpp - one port's connections and traffic (soak_port.h).
#include "soak_port.h"

#include <array>
#include <thread>

#include <fmt/format.h>

namespace uvhost::soak {

using Clock = std::chrono::steady_clock;

namespace {
// Error texts kept per port; the count goes on.
constexpr size_t kKeptErrors = 5;
// Frames added to the TX ring before one publication.
constexpr uint64_t kBurst = 16;
}  // namespace

SoakPort::SoakPort(uint16_t index, std::string socket_path, uint32_t window, uint32_t pps)
    : index_(index), socket_path_(std::move(socket_path)), window_(window), pps_(pps) {}

SoakPort::~SoakPort() = default;

void SoakPort::error(const std::string& what) {
  ++traffic_.errors;
  if (error_texts_.size() < kKeptErrors) {
    error_texts_.push_back(fmt::format("port {} connection {}: {}", index_, connection_, what));
  }
}

bool SoakPort::connect(std::chrono::milliseconds timeout) {
  const auto give_up = Clock::now() + timeout;
  vhost_user::FrontendOptions options;  // one queue pair, 256 entries, MRG_RXBUF, EVENT_IDX
  for (;;) {
    std::string why;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now());
    frontend_ = vhost_user::connect_frontend(socket_path_, options, std::max(left, std::chrono::milliseconds{1}), why);
    if (frontend_) break;
    if (Clock::now() >= give_up) {
      error(fmt::format("could not connect: {}", why));
      return false;
    }
    ++traffic_.reconnect_retries;
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  ++connection_;
  ++traffic_.connections;
  connection_sent_ = 0;
  next_ = FrameId{index_, connection_, 0};
  connection_start_ = Clock::now();
  return true;
}

size_t SoakPort::take_echoes() {
  return frontend_->poll_rx([this](const vhost_user::RxPacket& packet) {
    if (next_.seq >= connection_sent_) {
      error(fmt::format("a frame came back that was not sent ({} sent)", connection_sent_));
      return;
    }
    const std::string wrong = check_echo(packet.frame, next_);
    if (!wrong.empty()) {
      error(wrong);  // the expected frame stays expected: a loss fails every later check too
      return;
    }
    ++next_.seq;
    ++traffic_.received;
  });
}

bool SoakPort::pump(Clock::time_point now) {
  if (!frontend_) return false;
  // Frames due by now at pps_ frames per second since the connection started.
  const auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(now - connection_start_).count();
  const uint64_t due = pps_ == 0 ? UINT64_MAX : static_cast<uint64_t>(elapsed) * pps_ / 1'000'000 + 1;
  std::array<std::byte, kMaxBytes> frame{};
  uint64_t queued = 0;
  while (queued < kBurst && connection_sent_ < due && connection_sent_ - next_.seq < window_) {
    const size_t bytes = fill_frame(FrameId{index_, connection_, connection_sent_}, frame);
    if (!frontend_->enqueue_tx(std::span<const std::byte>(frame.data(), bytes))) break;
    ++connection_sent_;
    ++traffic_.sent;
    ++queued;
  }
  if (queued > 0) frontend_->flush_tx();
  frontend_->reap_tx();
  const size_t taken = take_echoes();
  if (frontend_->broken()) {
    error(fmt::format("frontend broken: {}", frontend_->error()));
    frontend_.reset();
  }
  return queued > 0 || taken > 0;
}

bool SoakPort::drain(std::chrono::milliseconds timeout) {
  const auto give_up = Clock::now() + timeout;
  while (frontend_ && next_.seq < connection_sent_ && Clock::now() < give_up) {
    frontend_->flush_tx();
    if (take_echoes() == 0) frontend_->wait_rx(std::chrono::milliseconds{5});
    if (frontend_->broken()) {
      error(fmt::format("frontend broken: {}", frontend_->error()));
      frontend_.reset();
    }
  }
  if (frontend_ && next_.seq != connection_sent_) {
    error(fmt::format("{} of {} frames came back", next_.seq, connection_sent_));
    return false;
  }
  return frontend_ != nullptr;
}

void SoakPort::disconnect(Disconnect how) {
  if (!frontend_) return;
  if (how == Disconnect::kGraceful && !frontend_->stop()) {
    error(fmt::format("stop failed: {}", frontend_->error()));
  }
  frontend_.reset();  // kAbrupt: the destructor closes the socket, eventfds and memfd
}

}  // namespace uvhost::soak
