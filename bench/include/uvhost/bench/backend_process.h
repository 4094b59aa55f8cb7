// backend_process.h - the backend a bench run talks to, as a child process:
// `uvhost serve` or DPDK's dpdk-testpmd with its vhost PMD.
//
// Contract
// --------
//  - BackendProcess::start(argv, log_path, cpu) forks and execs argv[0] (searched in
//    PATH), stdin from /dev/null, stdout and stderr appended to log_path. In the child,
//    before exec: the signal mask is cleared, PR_SET_PDEATHSIG(SIGKILL) ties it to this
//    thread's life (a crashed bench leaves no backend behind), and with cpu >= 0 it is
//    pinned to that CPU (sched_setaffinity; every thread it makes inherits the mask).
//    Throws std::runtime_error if the fork or the log file fails; a failed exec shows
//    up as the child exiting 127 with the reason in its log.
//  - wait_ready(path, log_line, timeout): polls every 10 ms until `path` is a socket
//    and (when log_line is not empty) the log contains `log_line`; throws
//    std::runtime_error (with the log's tail) if the child exits or time runs out.
//  - stop(grace): SIGINT, then SIGKILL once `grace` has passed; always reaps. Idempotent;
//    the destructor calls it. exit_description() says how it ended.
//  - log_tail(n): the log's last n lines (for error messages).
//  - uvhost_argv()/testpmd_argv() build the command lines the bench uses (below); the
//    caller picks sink/source/loopback (txonly/rxonly/macswap) from the workload.
//  - One thread at a time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "uvhost/bench/workload.h"

namespace uvhost::bench {

// The name uvhost_argv() gives the bench's port (its workers are "bench.w<k>");
// control requests (live_switch.h) address it.
inline constexpr const char* kBenchPortName = "bench";

class BackendProcess {
 public:
  BackendProcess(const std::vector<std::string>& argv, std::string log_path, int cpu);
  ~BackendProcess();
  BackendProcess(const BackendProcess&) = delete;
  BackendProcess& operator=(const BackendProcess&) = delete;

  void wait_ready(const std::string& socket_path, const std::string& log_line, std::chrono::milliseconds timeout);
  void stop(std::chrono::milliseconds grace = std::chrono::seconds{5});

  pid_t pid() const noexcept { return pid_; }
  bool running();
  const std::string& log_path() const noexcept { return log_path_; }
  std::string log_tail(size_t lines = 15) const;
  std::string exit_description() const;

 private:
  bool reap(bool block);  // true once the child is reaped

  std::string log_path_;
  std::string program_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

// `uvhost [--log-level warn] serve --port sock=<socket>,backend=<backend>,queues=<q>,
// name=bench[,<port keys>][,size=<size> for source] --control <control> <serve_args>`.
std::vector<std::string> uvhost_argv(const Config& config, const Point& point, const RunOptions& options,
                                     const std::string& socket, const std::string& control);

// `uvhost --log-level warn serve --port <port>[,<port keys>] --control <control>
// <serve_args>`: the binary is config.uvhost_binary, else options.uvhost_binary, else
// this very one. The common part of every bench's uvhost command line.
std::vector<std::string> uvhost_serve_argv(const Config& config, const RunOptions& options, std::string port,
                                           const std::string& control);

// dpdk-testpmd with the vhost PMD listening on `socket`: --no-huge -m 512 --no-pci, two
// lcores on `cpu` (or on every CPU when cpu < 0), --file-prefix <prefix>, a 16384-mbuf
// pool, and the forward mode of the workload (rxonly; txonly with --txpkts split into
// 2048-byte segments; macswap). Throws std::runtime_error for a size testpmd cannot make.
std::vector<std::string> testpmd_argv(const Point& point, const RunOptions& options, const std::string& socket,
                                      const std::string& prefix, int cpu);
// Where EAL keeps testpmd's runtime files for `prefix` (removed after a run).
std::string dpdk_runtime_dir(const std::string& prefix);

}  // namespace uvhost::bench
