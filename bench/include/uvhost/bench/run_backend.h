// run_backend.h - the backend one measured run talks to, up and ready: a `uvhost
// serve` or a dpdk-testpmd started for the run (backend_process.h), or a backend that
// is already running (Config::socket).
//
// Contract
// --------
//  - RunBackend(config, point, options, dir, tag) starts the backend the config names
//    and returns once it accepts a frontend: uvhost when its socket exists; testpmd
//    when it has logged "start packet forwarding" (it flushes, uncounted, what its
//    queues hold when forwarding starts, so the frontend connects only after that).
//    Sockets and the log live in `dir`, their names prefixed with `tag` (two backends
//    of one run use "a." and "b."). Pinned to options.backend_cpu when options.pin.
//    kSocket starts nothing and uses Config::socket. Throws std::runtime_error (with
//    the log's tail) when the backend does not come up.
//  - socket(), control() (uvhost's control socket; empty otherwise), cpu_pid(): whose
//    threads' CPU the run counts (0: none known).
//  - failure(what): an error that says `what`, then whether the backend still runs or
//    how it ended and its log's last lines: what a failed run reports.
//  - pause()/resume(): SIGSTOP / SIGCONT to a started backend (every thread stops; a
//    polling backend then takes no CPU from the one being measured). No-ops for
//    kSocket. The destructor resumes a paused backend before stopping it.
//  - stop(): SIGINT and reap (SIGKILL after 5 s; testpmd after 200 ms, as nothing it
//    prints on the way out is read); a uvhost that does not exit with status 0 throws
//    failure(). The destructor stops without checking and removes testpmd's EAL
//    runtime folder.
//  - One thread at a time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "uvhost/bench/backend_process.h"
#include "uvhost/bench/run_dir.h"
#include "uvhost/bench/workload.h"

namespace uvhost::bench {

class RunBackend {
 public:
  RunBackend(const Config& config, const Point& point, const RunOptions& options, const RunDir& dir,
             const std::string& tag);
  ~RunBackend();
  RunBackend(const RunBackend&) = delete;
  RunBackend& operator=(const RunBackend&) = delete;

  const std::string& socket() const noexcept { return socket_; }
  const std::string& control() const noexcept { return control_; }
  pid_t cpu_pid() const noexcept { return cpu_pid_; }

  std::runtime_error failure(const std::string& what);
  void pause();
  void resume();
  void stop();

 private:
  void signal(int sig);
  std::chrono::milliseconds stop_grace() const;

  // testpmd's EAL runtime folder, removed however the run ends (a failed start too).
  struct DpdkRuntimeDir {
    std::string prefix;
    ~DpdkRuntimeDir();
  };

  BackendKind kind_;
  DpdkRuntimeDir dpdk_;  // before process_: removed after the process has stopped
  std::unique_ptr<BackendProcess> process_;
  std::string socket_;
  std::string control_;
  pid_t cpu_pid_ = 0;
  bool paused_ = false;
};

}  // namespace uvhost::bench
