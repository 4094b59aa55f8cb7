// ctl.cpp - `uvhost ctl`: talk to a running `uvhost serve` over its control socket
// (protocol in serve/include/uvhost/serve/control_server.h): list ports, show or watch
// statistics (tables, JSON, Prometheus), change poll/memory/enqueue settings, or send
// any request as is.
//
// Exit status: 0 ok; 1 when the daemon cannot be reached or answers ok=false (the
// reason on stderr); 2 for bad arguments (the contract of every subcommand: commands.h).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "uvhost/base/name_table.h"
#include "uvhost/serve/control_keys.h"
#include "uvhost/serve/control_client.h"
#include "uvhost/serve/stats_format.h"

namespace uvhost::cli {
namespace {

using nlohmann::json;
namespace control = serve::control;
using Clock = std::chrono::steady_clock;

struct CtlOptions {
  std::string socket;
  double timeout_s = 5;
};

[[noreturn]] void fail(int code, const std::string& message) {
  fmt::print(stderr, "uvhost ctl: {}\n", message);
  throw CLI::RuntimeError(code);
}

bool reply_ok(const json& reply) {
  const auto it = reply.is_object() ? reply.find("ok") : reply.end();
  return reply.is_object() && it != reply.end() && it->is_boolean() && it->get<bool>();
}

std::string reply_error(const json& reply) {
  if (reply.is_object()) {
    const auto it = reply.find("error");
    if (it != reply.end() && it->is_string()) return it->get<std::string>();
  }
  return "the daemon refused the request: " + reply.dump();
}

// The reply, whatever its "ok"; exits 1 when there is none.
json send(const CtlOptions& options, const json& request) {
  std::string error;
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000));
  auto reply = serve::control_request(options.socket, request, error, timeout);
  if (!reply) fail(1, error);
  return std::move(*reply);
}

// The reply when ok=true; otherwise its error on stderr and exit 1.
json ask(const CtlOptions& options, const json& request) {
  json reply = send(options, request);
  if (!reply_ok(reply)) fail(1, reply_error(reply));
  return reply;
}

void print(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// ------------------------------------------------------------------ list

void add_list(CLI::App& ctl, const std::shared_ptr<CtlOptions>& options) {
  auto json_output = std::make_shared<bool>(false);
  auto* cmd = ctl.add_subcommand("list", "The daemon's ports: socket, mode, backend, queues, connected");
  cmd->add_flag("--json", *json_output, "Print the reply as JSON");
  cmd->callback([options, json_output] {
    const json reply = ask(*options, {{"cmd", "list"}});
    print(*json_output ? reply.dump(2) + "\n" : serve::format_ports_table(reply));
  });
}

// ------------------------------------------------------------------ stats

struct StatsOptions {
  bool json = false;
  bool prometheus = false;
  double watch_s = 0;
  int count = 0;  // 0: until interrupted
};

// Seconds between two replies: the daemon's own clock when both carry it (what the
// counters were measured against), else ours.
double interval_s(const json& previous, const json& current, Clock::duration local) {
  const auto before = previous.find("uptime_s");
  const auto now = current.find("uptime_s");
  if (before != previous.end() && now != current.end() && before->is_number() && now->is_number()) {
    const double seconds = now->get<double>() - before->get<double>();
    if (seconds > 0) return seconds;
  }
  return std::chrono::duration<double>(local).count();
}

void run_stats(const CtlOptions& options, const StatsOptions& stats) {
  const json request = {{"cmd", "stats"}};
  if (stats.watch_s <= 0) {
    const json reply = ask(options, request);
    if (stats.json) print(reply.dump(2) + "\n");
    else if (stats.prometheus) print(serve::format_prometheus(reply));
    else print(serve::format_stats_table(reply));
    return;
  }
  // --watch: the first table shows totals, the next ones rates since the one before.
  // On a terminal the screen is redrawn; into a pipe or file each interval is appended
  // (JSON: one line per interval).
  const bool terminal = ::isatty(STDOUT_FILENO) == 1;
  const auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(stats.watch_s));
  const auto start = Clock::now();
  json previous;
  Clock::time_point previous_at;
  for (int i = 0; stats.count == 0 || i < stats.count; ++i) {
    std::this_thread::sleep_until(start + i * period);  // no drift from the requests' own time
    const auto at = Clock::now();
    json reply = ask(options, request);
    std::string body;
    if (stats.json) body = reply.dump() + "\n";
    else if (stats.prometheus) body = serve::format_prometheus(reply);
    else if (previous.is_null()) body = serve::format_stats_table(reply);
    else body = serve::format_stats_delta_table(previous, reply, interval_s(previous, reply, at - previous_at));
    if (terminal && !stats.json) body = "\x1b[H\x1b[2J" + body;  // cursor home, clear screen
    else if (i > 0 && !stats.json) body = "\n" + body;
    print(body);
    previous = std::move(reply);
    previous_at = at;
  }
}

void add_stats(CLI::App& ctl, const std::shared_ptr<CtlOptions>& options) {
  auto stats = std::make_shared<StatsOptions>();
  auto* cmd = ctl.add_subcommand("stats", "Per-queue and per-worker counters: a table, JSON or Prometheus text");
  auto* json_flag = cmd->add_flag("--json", stats->json, "Print the reply as JSON (with --watch: one line each)");
  cmd->add_flag("--prometheus", stats->prometheus, "Print Prometheus text exposition format")->excludes(json_flag);
  auto* watch = cmd->add_option("--watch", stats->watch_s, "Repeat every SECONDS; tables then show rates")
                    ->check(CLI::PositiveNumber);
  cmd->add_option("--count", stats->count, "With --watch: stop after N replies")
      ->check(CLI::PositiveNumber)
      ->needs(watch);
  cmd->callback([options, stats] { run_stats(*options, *stats); });
}

// ------------------------------------------------------------------ set

struct SetOptions {
  std::string port, poll, exit, memory, enqueue, worker;
  uint32_t queue = 0;
  uint32_t busy_us = 0;
};

void add_set(CLI::App& ctl, const std::shared_ptr<CtlOptions>& options) {
  auto set = std::make_shared<SetOptions>();
  auto* cmd = ctl.add_subcommand("set", "Change a port's poll mode or memory guard, or a worker's enqueue strategy");
  auto* port = cmd->add_option("--port", set->port, "The port (by name)");
  auto* queue = cmd->add_option("--queue", set->queue, "Only this vring of the port (default: all)")->needs(port);
  auto* poll = cmd->add_option("--poll", set->poll, "Poll mode")
                   ->check(CLI::IsMember(base::names(control::kPollChoices)))
                   ->needs(port);
  auto* busy_us = cmd->add_option("--busy-us", set->busy_us, "Busy-poll budget in microseconds")->needs(port);
  auto* exit = cmd->add_option("--exit", set->exit, "When busy polling ends")
                   ->check(CLI::IsMember(base::names(control::kExitChoices)))
                   ->needs(port);
  auto* memory = cmd->add_option("--memory", set->memory, "Guest-memory table guard")
                     ->check(CLI::IsMember(base::names(control::kMemoryChoices)))
                     ->needs(port);
  auto* enqueue = cmd->add_option("--enqueue", set->enqueue, "Worker enqueue strategy")
                      ->check(CLI::IsMember(base::names(control::kEnqueueChoices)));
  auto* worker = cmd->add_option("--worker", set->worker, "Only this worker (default: all)")->needs(enqueue);
  cmd->callback([=] {
    // Only what was given goes out: the daemon leaves everything else as it is.
    json request = {{control::kCmd, "set"}};
    if (port->count() > 0) request[control::kPort] = set->port;
    if (queue->count() > 0) request[control::kQueue] = set->queue;
    if (poll->count() > 0) request[control::kPoll] = set->poll;
    if (busy_us->count() > 0) request[control::kBusyUs] = set->busy_us;
    if (exit->count() > 0) request[control::kExit] = set->exit;
    if (memory->count() > 0) request[control::kMemory] = set->memory;
    if (enqueue->count() > 0) request[control::kEnqueue] = set->enqueue;
    if (worker->count() > 0) request[control::kWorker] = set->worker;
    if (poll->count() + busy_us->count() + exit->count() + memory->count() + enqueue->count() == 0)
      fail(2, "set: nothing to change: give --poll, --busy-us, --exit, --memory or --enqueue");
    const json reply = ask(*options, request);
    const auto changed = reply.find("changed");
    if (changed == reply.end() || !changed->is_array() || changed->empty()) {
      print("nothing changed\n");
      return;
    }
    std::string lines;
    for (const auto& item : *changed) lines += (item.is_string() ? item.get<std::string>() : item.dump()) + "\n";
    print(lines);
  });
}

// ------------------------------------------------------------------ raw

void add_raw(CLI::App& ctl, const std::shared_ptr<CtlOptions>& options) {
  auto text = std::make_shared<std::string>();
  auto* cmd = ctl.add_subcommand("raw", "Send one JSON request as is and print the reply");
  cmd->add_option("request", *text, "The request, e.g. '{\"cmd\":\"list\"}'")->required();
  cmd->callback([options, text] {
    const json request = json::parse(*text, nullptr, false);
    if (request.is_discarded()) fail(2, "raw: the request is not valid JSON");
    const json reply = send(*options, request);
    print(reply.dump(2) + "\n");
    if (!reply_ok(reply)) fail(1, reply_error(reply));
  });
}

}  // namespace

void add_ctl_command(CLI::App& app) {
  auto options = std::make_shared<CtlOptions>();
  auto* ctl = app.add_subcommand("ctl", "Talk to a running `uvhost serve` through its control socket");
  ctl->require_subcommand(1);
  ctl->fallthrough();  // --socket may also come after the subcommand
  // --control is the name `uvhost serve` and its config file ("control") give it.
  ctl->add_option("--socket,--control", options->socket, "The daemon's control socket (uvhost serve --control PATH)")
      ->required()
      ->envname("UVHOST_CONTROL_SOCKET");
  ctl->add_option("--timeout", options->timeout_s, "Seconds to wait for each reply")->check(CLI::PositiveNumber);
  add_list(*ctl, options);
  add_stats(*ctl, options);
  add_set(*ctl, options);
  add_raw(*ctl, options);
}

}  // namespace uvhost::cli
