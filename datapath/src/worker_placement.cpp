// worker_placement.cpp - see worker_placement.h.
#include "uvhost/datapath/worker_placement.h"

#include <pthread.h>
#include <sched.h>

#include <fmt/format.h>

#include "uvhost/base/errno_text.h"

namespace uvhost::datapath {

namespace {

int policy_of(WorkerScheduler scheduler) noexcept {
  switch (scheduler) {
    case WorkerScheduler::kBatch:
      return SCHED_BATCH;
    case WorkerScheduler::kIdle:
      return SCHED_IDLE;
    case WorkerScheduler::kOther:
      break;
  }
  return SCHED_OTHER;
}

}  // namespace

bool apply_to_this_thread(const WorkerPlacement& placement, std::string& error) {
  if (!placement.cpus.empty() && !pin_this_thread(placement.cpus, error)) return false;
  const sched_param param{};  // priority 0: the only one these policies take
  const int rc = ::pthread_setschedparam(::pthread_self(), policy_of(placement.scheduler), &param);
  if (rc != 0) {
    error = base::errno_text(fmt::format("cannot use the scheduling policy {}", to_string(placement.scheduler)), rc);
    return false;
  }
  return true;
}

}  // namespace uvhost::datapath
