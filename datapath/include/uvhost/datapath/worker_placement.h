// worker_placement.h - where a port's own workers run and how the kernel schedules
// them: the port keys `cpus=` (cpu_list.h) and `sched=`.
//
// Why: a worker that sleeps on a guest's kicks shares its CPU with someone. On
// another CPU than the guest's vCPU, every kick and every call is an inter-processor
// interrupt. On the vCPU's own CPU (where kernel vhost-net's worker runs, in the VM's
// cgroup), each wake-up is local, but under the normal policy the woken worker
// preempts the vCPU at every kick, one frame at a time. SCHED_BATCH takes away the
// wake-up preemption: the worker runs when the vCPU's slice ends or the guest
// idles, and then takes everything the guest queued meanwhile, while the guest,
// seeing no progress, does not kick again. libvirt offers the same choice for a VM's
// I/O threads (<iothreadsched scheduler='batch'/>), systemd for a service
// (CPUSchedulingPolicy=batch).
//
// Contract
// --------
//  - WorkerScheduler names the policies by libvirt's and systemd's words: other
//    (SCHED_OTHER, the default), batch (SCHED_BATCH), idle (SCHED_IDLE: runs only
//    when nothing else wants the CPU). Real-time policies are not offered: a polling
//    worker (poll=always) under one can take its CPU from everything else.
//  - follow_frontend (`cpus=frontend`): the CPUs are the frontend's, read from the
//    process at the other end of the vhost-user socket each time one connects
//    (SO_PEERCRED, then its affinity), as kernel vhost-net's worker inherits the
//    affinity and cpuset of the VM that owns it. Until a frontend connects, and
//    when its CPUs cannot be read, the workers stay where the daemon may run.
//  - apply_to_this_thread(): sets the calling thread's affinity (an empty CpuList
//    leaves it) and policy; false with `error` when the kernel refuses either.
#pragma once

#include <cstdint>
#include <string>

#include "uvhost/base/name_table.h"
#include "uvhost/datapath/cpu_list.h"

namespace uvhost::datapath {

using base::to_string;

enum class WorkerScheduler : uint8_t { kOther, kBatch, kIdle };

inline constexpr auto kWorkerSchedulerNames = base::name_table<WorkerScheduler>(
    {{WorkerScheduler::kOther, "other"}, {WorkerScheduler::kBatch, "batch"}, {WorkerScheduler::kIdle, "idle"}});

constexpr const auto& enum_names(WorkerScheduler) noexcept { return kWorkerSchedulerNames; }

struct WorkerPlacement {
  CpuList cpus;  // empty: wherever the daemon may run
  WorkerScheduler scheduler = WorkerScheduler::kOther;
  bool follow_frontend = false;  // cpus=frontend (cpus stays empty)

  bool is_default() const noexcept {
    return cpus.empty() && !follow_frontend && scheduler == WorkerScheduler::kOther;
  }
  friend bool operator==(const WorkerPlacement&, const WorkerPlacement&) = default;
};

bool apply_to_this_thread(const WorkerPlacement& placement, std::string& error);

}  // namespace uvhost::datapath
