// cpu_list.h - the CPUs a port's workers may run on (the port key `cpus=`), written as
// taskset -c, systemd's CPUAffinity= and libvirt's cpuset write them: "1", "0-3",
// "0,2-3"; inside a comma-separated `--port` a list with commas goes in brackets, as
// DPDK's device arguments write lists: "cpus=[0,2-3]".
//
// Why: a worker that sleeps on a guest's kicks is woken by the vCPU that kicks, and
// wakes the frontend's thread that injects the interrupt. Across CPUs each of those
// wake-ups is an inter-processor interrupt, paid by the thread that writes the
// eventfd; on the CPUs that run the VM it is a local wake-up. Kernel vhost-net's
// worker lives in its VM's cgroup (and so on its cpuset) for the same reason, and
// libvirt pins it with the emulator threads (<emulatorpin>); OVS-DPDK and DPDK apps
// place their polling threads on chosen cores (pmd-cpu-mask, --lcores).
//
// Contract
// --------
//  - parse_cpu_list(): CPU numbers and ranges separated by commas, optionally in
//    brackets, each below kMaxCpus, at least one; ranges ascending. nullopt (with
//    `error`) otherwise.
//  - to_string(): the canonical form (sorted, ranges merged), which parses back to
//    the same list.
//  - pin_this_thread(): sets the calling thread's affinity to the list; false with
//    `error` when the kernel refuses (no CPU of the list is online or allowed to this
//    process's cpuset).
//  - cpus_of_process(): the CPUs process `pid` (its main thread) may run on, as the
//    kernel reports them (sched_getaffinity); nullopt with `error` when it cannot
//    (the process is gone, or a security module refuses).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace uvhost::datapath {

class CpuList {
 public:
  static constexpr uint32_t kMaxCpus = 1024;  // CPU_SETSIZE

  CpuList() = default;
  const std::vector<uint32_t>& cpus() const noexcept { return cpus_; }  // ascending, unique
  bool empty() const noexcept { return cpus_.empty(); }

  friend std::optional<CpuList> parse_cpu_list(std::string_view text, std::string& error);
  friend std::optional<CpuList> cpus_of_process(pid_t pid, std::string& error);
  friend bool operator==(const CpuList&, const CpuList&) = default;

 private:
  std::vector<uint32_t> cpus_;
};

std::optional<CpuList> parse_cpu_list(std::string_view text, std::string& error);
std::string to_string(const CpuList& list);
bool pin_this_thread(const CpuList& list, std::string& error);
std::optional<CpuList> cpus_of_process(pid_t pid, std::string& error);

}  // namespace uvhost::datapath
