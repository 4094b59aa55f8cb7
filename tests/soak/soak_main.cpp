// soak_main.cpp - uvhost-soak: many ports of a running `uvhost serve` carrying traffic
// for a long time while some of them connect and disconnect over and over; the
// daemon's fds, RSS, threads and mappings sampled and judged flat, and every frame
// checked. The daemon's ports must be listening loopback ports (soak.sh starts one).
//
//   uvhost-soak --socket-pattern '/run/soak/port{}.sock' [--ports 64] [--pid PID]
//               [--duration 600] [--cycles 1000] [--churn-ports 16] [--sample-interval 10]
//               [--pps 500] [--window 32] [--warmup 3] [--settle-ms 3000]
//               [--rss-growth-kib 4096] [--json FILE]
//
// stdout: one table row per sample (as it is taken), then the per-port totals and the
// verdict. Exit 0 when every check passed, 1 on any data error, leak or growth, 2 for
// a bad command line.
#include <cstdio>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "soak_run.h"

using namespace uvhost::soak;

namespace {

void print_header() {
  fmt::print("{:>8} {:>7} {:>6} {:>7} {:>6} {:>9}\n", "time_s", "cycles", "fds", "threads", "maps", "rss_kib");
  std::fflush(stdout);
}

void print_sample(const Sample& s) {
  fmt::print("{:>8.1f} {:>7} {:>6} {:>7} {:>6} {:>9}\n", s.seconds, s.cycles, s.figures.fds, s.figures.threads,
             s.figures.maps, s.figures.rss_kib);
  std::fflush(stdout);
}

nlohmann::json figures_json(const ProcFigures& f) {
  return {{"fds", f.fds}, {"threads", f.threads}, {"maps", f.maps}, {"rss_kib", f.rss_kib}};
}

nlohmann::json report_json(const SoakOptions& options, const SoakReport& report) {
  nlohmann::json j;
  j["options"] = {{"ports", options.ports},
                  {"churn_ports", options.churn_ports},
                  {"cycles", options.cycles},
                  {"duration_s", options.duration.count()},
                  {"sample_interval_s", options.sample_interval.count()},
                  {"pps_per_port", options.pps},
                  {"window", options.window},
                  {"rss_growth_kib", options.rss_growth_kib}};
  if (report.baseline) j["baseline"] = figures_json(*report.baseline);
  j["samples"] = nlohmann::json::array();
  for (const Sample& s : report.samples) {
    auto row = figures_json(s.figures);
    row["time_s"] = s.seconds;
    row["cycles"] = s.cycles;
    j["samples"].push_back(row);
  }
  j["ports"] = nlohmann::json::array();
  for (const PortResult& p : report.ports) {
    j["ports"].push_back({{"port", p.index},
                          {"steady", p.steady},
                          {"connections", p.traffic.connections},
                          {"sent", p.traffic.sent},
                          {"received", p.traffic.received},
                          {"reconnect_retries", p.traffic.reconnect_retries},
                          {"errors", p.traffic.errors}});
  }
  j["cycles_done"] = report.cycles_done;
  j["seconds"] = report.seconds;
  j["max_settle_ms"] = report.max_settle_ms;
  j["findings"] = report.findings;
  j["passed"] = report.findings.empty();
  return j;
}

void print_totals(const SoakReport& report) {
  uint64_t steady_sent = 0, steady_back = 0, churn_sent = 0, churn_back = 0, connections = 0, retries = 0;
  for (const PortResult& p : report.ports) {
    (p.steady ? steady_sent : churn_sent) += p.traffic.sent;
    (p.steady ? steady_back : churn_back) += p.traffic.received;
    connections += p.traffic.connections;
    retries += p.traffic.reconnect_retries;
  }
  fmt::print("steady ports: {} frames sent, {} came back in order and intact\n", steady_sent, steady_back);
  fmt::print("churned ports: {} frames sent, {} came back ({} connections in all, {} reconnect retries)\n",
             churn_sent, churn_back, connections, retries);
  fmt::print("cycles: {} in {:.0f} s; slowest return of fds/threads/maps to their steady values: {:.0f} ms\n",
             report.cycles_done, report.seconds, report.max_settle_ms);
  if (report.baseline && !report.samples.empty()) {
    const RssSummary rss = summarize_rss(report.samples);
    fmt::print("RSS: median {} KiB in the first quarter, {} KiB in the last; peak {} / {} KiB in the first / second half\n",
               rss.first_quarter_median_kib, rss.last_quarter_median_kib, rss.first_half_peak_kib,
               rss.second_half_peak_kib);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"uvhost-soak: many vhost-user ports of a running `uvhost serve` (backend=loopback) carrying "
               "checked traffic while some connect and disconnect; the daemon's /proc figures judged flat"};
  SoakOptions options;
  long duration_s = 600, warmup_s = 3, sample_s = 10, settle_ms = 3000;
  pid_t pid = 0;
  std::string json_path;
  app.add_option("--socket-pattern", options.socket_pattern, "socket path of each port, {} for its index")->required();
  app.add_option("--ports", options.ports, "ports to drive")->capture_default_str()->check(CLI::Range(1, 65535));
  app.add_option("--pid", pid, "the daemon's pid: sample and judge its /proc figures")->check(CLI::PositiveNumber);
  app.add_option("--duration", duration_s, "seconds of soak after the warm-up")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--cycles", options.cycles, "connect/disconnect cycles, spread over the duration")->capture_default_str();
  app.add_option("--churn-ports", options.churn_ports, "ports that are churned (the rest stay connected)")
      ->capture_default_str()->check(CLI::Range(1u, 65535u));
  app.add_option("--sample-interval", sample_s, "seconds between samples")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--pps", options.pps, "frames per second per port (0: as fast as the window allows)")->capture_default_str();
  app.add_option("--window", options.window, "frames unanswered per port")->capture_default_str()->check(CLI::Range(1, 128));
  app.add_option("--warmup", warmup_s, "seconds of traffic before the baseline")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--settle-ms", settle_ms, "how long the daemon's figures may take to come back after a cycle")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--rss-growth-kib", options.rss_growth_kib, "RSS growth allowed (KiB)")->capture_default_str();
  app.add_option("--json", json_path, "write the samples, totals and verdict here");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (options.churn_ports >= options.ports) {
    std::cerr << "uvhost-soak: --churn-ports must leave at least one steady port\n";
    return 2;
  }
  options.duration = std::chrono::seconds{duration_s};
  options.warmup = std::chrono::seconds{warmup_s};
  options.sample_interval = std::chrono::seconds{sample_s};
  options.settle = std::chrono::milliseconds{settle_ms};
  if (pid > 0) options.daemon_pid = pid;

  if (options.daemon_pid) print_header();
  const SoakReport report = run_soak(options, print_sample);
  print_totals(report);
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << report_json(options, report).dump(2) << "\n";
    if (!out) std::cerr << "uvhost-soak: cannot write " << json_path << "\n";
  }
  for (const std::string& text : report.findings) fmt::print("FAIL: {}\n", text);
  fmt::print("{}\n", report.findings.empty() ? "soak passed" : "soak FAILED");
  return report.findings.empty() ? 0 : 1;
}
