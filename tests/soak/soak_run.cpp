// soak_run.cpp - the soak's schedule: traffic, churn cycles, samples (soak_run.h).
#include "soak_run.h"

#include <memory>
#include <thread>

#include <fmt/format.h>

namespace uvhost::soak {
namespace {

using Clock = std::chrono::steady_clock;

// How often the daemon's figures are read while waiting for them to settle.
constexpr auto kSettlePoll = std::chrono::milliseconds{20};
// How long a drained end of a connection waits for its last frames.
constexpr auto kDrainTimeout = std::chrono::milliseconds{5000};
// The three ways a churn cycle ends a connection, taken in turn.
enum class CycleEnd { kDrainedGraceful, kDrainedAbrupt, kInFlightAbrupt };
constexpr CycleEnd kCycleEnds[] = {CycleEnd::kDrainedGraceful, CycleEnd::kDrainedAbrupt, CycleEnd::kInFlightAbrupt};

bool same_handles(const ProcFigures& a, const ProcFigures& b) {
  return a.fds == b.fds && a.threads == b.threads && a.maps == b.maps;
}

class SoakRun {
 public:
  explicit SoakRun(const SoakOptions& options) : options_(options) {}

  SoakReport run(const std::function<void(const Sample&)>& on_sample);

 private:
  bool pump_all() {
    const auto now = Clock::now();
    bool moved = false;
    for (auto& port : ports_) moved |= port->pump(now);
    return moved;
  }
  // Drives every port until `until`; sleeps a little when nothing moved.
  void pump_until(Clock::time_point until) {
    while (Clock::now() < until) {
      if (!pump_all()) std::this_thread::sleep_for(std::chrono::microseconds{500});
    }
  }
  std::optional<ProcFigures> figures() {
    if (!options_.daemon_pid) return std::nullopt;
    std::string error;
    auto read = read_proc_figures(*options_.daemon_pid, error);
    if (!read) finding(fmt::format("daemon figures: {}", error));
    return read;
  }
  void finding(std::string text) { report_.findings.push_back(std::move(text)); }
  void churn_cycle(uint64_t number);
  void wait_settled(uint64_t cycle);
  void finish();

  const SoakOptions& options_;
  std::vector<std::unique_ptr<SoakPort>> ports_;
  std::vector<bool> steady_;
  std::vector<size_t> churned_;
  SoakReport report_;
  bool daemon_gone_ = false;
};

void SoakRun::churn_cycle(uint64_t number) {
  SoakPort& port = *ports_[churned_[number % churned_.size()]];
  const CycleEnd end = kCycleEnds[number % std::size(kCycleEnds)];
  if (port.connected() && port.connection_received() == 0) {
    finding(fmt::format("port {} connection {}: ended before any frame came back ({} sent)", port.index(),
                        port.connection_number(), port.connection_sent()));
  }
  if (end != CycleEnd::kInFlightAbrupt) port.drain(kDrainTimeout);
  port.disconnect(end == CycleEnd::kDrainedGraceful ? Disconnect::kGraceful : Disconnect::kAbrupt);
  port.connect(options_.connect_timeout);
}

void SoakRun::wait_settled(uint64_t cycle) {
  if (!report_.baseline || daemon_gone_) return;
  const auto started = Clock::now();
  const auto give_up = started + options_.settle;
  for (;;) {
    const auto now_figures = figures();
    if (!now_figures) {
      daemon_gone_ = true;
      return;
    }
    if (same_handles(*now_figures, *report_.baseline)) break;
    if (Clock::now() >= give_up) {
      finding(fmt::format("after cycle {}: fds {} threads {} maps {} still differ from the steady {} {} {} after {} ms",
                          cycle, now_figures->fds, now_figures->threads, now_figures->maps, report_.baseline->fds,
                          report_.baseline->threads, report_.baseline->maps, options_.settle.count()));
      break;
    }
    pump_until(Clock::now() + kSettlePoll);
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
  report_.max_settle_ms = std::max(report_.max_settle_ms, ms);
}

void SoakRun::finish() {
  if (daemon_gone_) finding("the daemon went away during the soak");
  for (auto& port : ports_) {
    if (!daemon_gone_) port->drain(kDrainTimeout);
    port->disconnect(daemon_gone_ ? Disconnect::kAbrupt : Disconnect::kGraceful);
  }
  for (size_t i = 0; i < ports_.size(); ++i) {
    const SoakPort& port = *ports_[i];
    const PortTraffic& t = port.traffic();
    report_.ports.push_back(PortResult{port.index(), steady_[i], t});
    for (const std::string& text : port.error_texts()) finding(text);
    if (t.errors > port.error_texts().size()) {
      finding(fmt::format("port {}: {} more errors", port.index(), t.errors - port.error_texts().size()));
    }
    if (steady_[i] && (t.connections != 1 || t.received != t.sent)) {
      finding(fmt::format("steady port {}: {} connections, {} frames sent, {} came back", port.index(),
                          t.connections, t.sent, t.received));
    }
    if (t.sent == 0) finding(fmt::format("port {}: no traffic", port.index()));
  }
}

SoakReport SoakRun::run(const std::function<void(const Sample&)>& on_sample) {
  const uint32_t churn = std::min(options_.churn_ports, options_.ports);
  steady_.assign(options_.ports, true);
  for (uint32_t k = 0; k < churn; ++k) {
    const size_t index = size_t{k} * options_.ports / churn;
    churned_.push_back(index);
    steady_[index] = false;
  }
  for (uint32_t i = 0; i < options_.ports; ++i) {
    std::string path = options_.socket_pattern;
    if (const auto at = path.find("{}"); at != std::string::npos) path.replace(at, 2, std::to_string(i));
    ports_.push_back(std::make_unique<SoakPort>(static_cast<uint16_t>(i), std::move(path), options_.window, options_.pps));
    if (!ports_.back()->connect(options_.connect_timeout)) {
      finding(fmt::format("port {} ({}): {}", i, ports_.back()->socket_path(), ports_.back()->error_texts().front()));
      return std::move(report_);
    }
  }
  pump_until(Clock::now() + options_.warmup);
  report_.baseline = figures();

  const auto start = Clock::now();
  const auto end = start + options_.duration;
  const auto span = std::chrono::duration_cast<std::chrono::microseconds>(options_.duration);
  auto cycle_due = [&](uint64_t i) {
    return start + span * static_cast<int64_t>(i + 1) / static_cast<int64_t>(options_.cycles + 1);
  };
  auto next_sample = start;
  while (!daemon_gone_) {
    const auto now = Clock::now();
    const bool cycles_left = report_.cycles_done < options_.cycles;
    if (!cycles_left && now >= end) break;
    if (cycles_left && now >= cycle_due(report_.cycles_done)) {
      churn_cycle(report_.cycles_done);
      ++report_.cycles_done;
      wait_settled(report_.cycles_done);
      continue;
    }
    if (report_.baseline && now >= next_sample) {
      if (auto taken = figures()) {
        const Sample sample{std::chrono::duration<double>(now - start).count(), report_.cycles_done, *taken};
        report_.samples.push_back(sample);
        if (on_sample) on_sample(sample);
      } else {
        daemon_gone_ = true;
      }
      next_sample += options_.sample_interval;
    }
    if (!pump_all()) std::this_thread::sleep_for(std::chrono::microseconds{500});
  }
  report_.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // The last sample, after the last cycle and the full duration.
  if (report_.baseline && !daemon_gone_) {
    if (auto taken = figures()) {
      report_.samples.push_back(Sample{report_.seconds, report_.cycles_done, *taken});
      if (on_sample) on_sample(report_.samples.back());
    }
  }
  finish();
  if (report_.baseline) {
    for (std::string& text : judge_flatness(report_.samples, *report_.baseline, options_.rss_growth_kib)) {
      finding(std::move(text));
    }
  }
  if (report_.cycles_done < options_.cycles) {
    finding(fmt::format("{} of {} churn cycles done", report_.cycles_done, options_.cycles));
  }
  return std::move(report_);
}

}  // namespace

SoakReport run_soak(const SoakOptions& options, const std::function<void(const Sample&)>& on_sample) {
  return SoakRun(options).run(on_sample);
}

}  // namespace uvhost::soak
