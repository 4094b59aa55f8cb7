// service_notifier.cpp - sd_notify messages (see service_notifier.h).
#include "uvhost/serve/service_notifier.h"

#include <systemd/sd-daemon.h>

#include <cstdlib>
#include <cstring>
#include <ctime>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace uvhost::serve {

std::string service_status(size_t ports, size_t connected) {
  return fmt::format("{} port{}, {} connected", ports, ports == 1 ? "" : "s", connected);
}

bool ServiceNotifier::enabled() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  return socket != nullptr && socket[0] != '\0';
}

void ServiceNotifier::send(const std::string& message) {
  // sd_notify: 0 without NOTIFY_SOCKET, > 0 sent, < 0 -errno.
  const int rc = sd_notify(0, message.c_str());
  if (rc < 0 && !warned_) {
    warned_ = true;
    const char* socket = std::getenv("NOTIFY_SOCKET");
    spdlog::warn("sd_notify to {}: {}", socket != nullptr ? socket : "?", std::strerror(-rc));
  }
}

void ServiceNotifier::ready(const std::string& status) {
  last_status_ = status;
  send(fmt::format("READY=1\nSTATUS={}", status));
}

void ServiceNotifier::reloading(const std::string& status) {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const auto usec = static_cast<unsigned long long>(now.tv_sec) * 1'000'000ULL +
                    static_cast<unsigned long long>(now.tv_nsec) / 1000ULL;
  last_status_ = status;
  send(fmt::format("RELOADING=1\nMONOTONIC_USEC={}\nSTATUS={}", usec, status));
}

void ServiceNotifier::stopping(const std::string& status) {
  last_status_ = status;
  send(fmt::format("STOPPING=1\nSTATUS={}", status));
}

void ServiceNotifier::status(const std::string& status) {
  if (status == last_status_) return;
  last_status_ = status;
  send(fmt::format("STATUS={}", status));
}

}  // namespace uvhost::serve
