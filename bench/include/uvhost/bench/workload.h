// workload.h - what `uvhost bench` runs and what one measured run yields.
//
// Vocabulary (netperf's, as the vhost_net busy-polling threads use it)
//  - stream-tx: the guest (our embedded frontend) sends frames of `size` bytes as fast
//    as the device takes them; the backend counts and drops (uvhost: backend=sink,
//    testpmd: rxonly). Throughput = frames the device completed.
//  - stream-rx: the backend generates frames of `size` bytes for the guest (uvhost:
//    backend=source, testpmd: txonly); the guest counts what it receives.
//  - rr: request/response. `sessions` requests are in flight at once, each the next of
//    its session as soon as its answer came back (uvhost: backend=loopback, testpmd:
//    macswap). Throughput = transactions per second; every transaction's round-trip
//    time goes into a log-bucketed histogram (p50/p99/p99.9).
//  - sessions: stream workloads spread their traffic over `sessions` flows, rr keeps
//    `sessions` transactions outstanding. Flows are spread round-robin over the queue
//    pairs the run uses (RunOptions::queue_pairs).
//  - rate (rr only): open loop. Requests arrive on a schedule of `rate` per second
//    (Poisson: exponential gaps; fixed: equal gaps), whether or not earlier answers came
//    back, each taken by a session that has none outstanding; `sessions` bounds the
//    requests in flight, and an arrival that finds every session busy waits for one.
//    Latency runs from the scheduled arrival, not from the send, so a backend that falls
//    behind is charged for the queueing it causes (no coordinated omission). 0: closed
//    loop, as above.
//
// A Config is one side of an A/B comparison: which backend, and every knob that
// differs (port keys of `uvhost serve --port`, daemon flags, the frontend's injected
// per-packet work used by `uvhost bench calibrate`).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "uvhost/base/name_table.h"

namespace uvhost::bench {

using base::to_string;

enum class Workload { kStreamTx, kStreamRx, kRr };
// In the order usage text and errors list them.
inline constexpr auto kWorkloadNames = base::name_table<Workload>({
    {Workload::kRr, "rr"},
    {Workload::kStreamTx, "stream-tx"},
    {Workload::kStreamRx, "stream-rx"},
});
constexpr const auto& enum_names(Workload) noexcept { return kWorkloadNames; }

// How an open-loop rr spaces its arrivals.
enum class Arrivals { kPoisson, kFixed };
inline constexpr auto kArrivalsNames =
    base::name_table<Arrivals>({{Arrivals::kPoisson, "poisson"}, {Arrivals::kFixed, "fixed"}});
constexpr const auto& enum_names(Arrivals) noexcept { return kArrivalsNames; }

// One point of a sweep.
struct Point {
  Workload workload = Workload::kRr;
  uint32_t size = 64;      // Ethernet frame bytes (no virtio-net header, no FCS)
  uint32_t sessions = 1;
  uint64_t rate = 0;       // rr: offered transactions/s, open loop; 0: closed loop
  Arrivals arrivals = Arrivals::kPoisson;
};
// "rr 64B x1", "rr 64B x16 @10 k/s poisson": how tables and logs name a point.
std::string describe(const Point& point);

// The virtqueue format the embedded frontend asks for (ring=split|packed).
enum class RingFormat { kSplit, kPacked };
inline constexpr auto kRingFormatNames =
    base::name_table<RingFormat>({{RingFormat::kSplit, "split"}, {RingFormat::kPacked, "packed"}});
constexpr const auto& enum_names(RingFormat) noexcept { return kRingFormatNames; }

enum class BackendKind {
  kUvhost,   // a `uvhost serve` started for the run (this binary, /proc/self/exe)
  kSocket,   // an already running backend at Config::socket (its CPU: Config::backend_pid)
  kTestpmd,  // DPDK's dpdk-testpmd with the vhost PMD, started for the run
};
// The backends a run starts, as `backend=NAME` names them (kSocket is chosen by
// socket=PATH instead).
inline constexpr auto kStartedBackendNames =
    base::name_table<BackendKind>({{BackendKind::kUvhost, "uvhost"}, {BackendKind::kTestpmd, "testpmd"}});

struct Config {
  std::string label;                  // "A", "B", or what the user named it
  BackendKind backend = BackendKind::kUvhost;
  std::string socket;                 // kSocket: the vhost-user socket path
  int backend_pid = 0;                // kSocket: whose threads' CPU to count (0: none)
  // kUvhost: extra `--port` keys (poll=busy, busy_us=50, workers=pair, memory=mutex,
  // burst=32, ...), validated by serve's parse_port_spec before anything runs.
  std::vector<std::pair<std::string, std::string>> port_keys;
  // kUvhost: extra daemon flags, e.g. {"--enqueue", "lockless"}, {"--pool-workers", "2"}.
  std::vector<std::string> serve_args;
  // kUvhost: the uvhost binary that serves (two builds side by side); empty:
  // RunOptions::uvhost_binary.
  std::string uvhost_binary;
  // The frontend does this many ns of CPU work per packet it sends or receives (calibration:
  // a slowdown of known size). 0: none.
  uint64_t frontend_spin_ns = 0;
  // The frontend asks for VIRTIO_F_IN_ORDER (in_order=1, the default; in_order=0 turns
  // its in-order path off). Negotiated at connection, so A and B that differ here
  // never share one connection.
  bool frontend_in_order = true;
  // The frontend asks for packed rings (ring=packed; split, the default, never asks).
  // Negotiated at connection too.
  RingFormat frontend_ring = RingFormat::kSplit;
};

// Parses "backend=testpmd", "poll=busy,busy_us=50,enqueue=lockless", "socket=/tmp/x.sock,pid=123",
// "spin_ns=500", "label=busy50", "uvhost=/path/to/other/uvhost". Keys: backend
// (uvhost|testpmd), socket, pid, label, spin_ns, in_order and ring (the frontend's),
// uvhost (an executable), enqueue and
// pool_workers (daemon flags); every other key is a port key and is checked against
// serve's port-spec rules. nullopt with `error` on anything wrong.
std::optional<Config> parse_config(std::string_view text, std::string& error);
// The inverse, for tables and JSON: "poll=busy,busy_us=50".
std::string describe(const Config& config);

// Who generates the traffic: our embedded frontend in this process, or a Linux guest
// under QEMU (qemu_frontend.h: a tap port and the guest's iperf3 / ping).
enum class Frontend { kEmbedded, kQemu };
inline constexpr auto kFrontendNames =
    base::name_table<Frontend>({{Frontend::kEmbedded, "embedded"}, {Frontend::kQemu, "qemu"}});
constexpr const auto& enum_names(Frontend) noexcept { return kFrontendNames; }

struct RunOptions {
  double seconds = 1.0;        // measured window per run
  double warmup_seconds = 0.3; // before it, excluded
  uint32_t queue_pairs = 1;
  bool pin = true;             // frontend on `frontend_cpu`, backend on `backend_cpu`
  int frontend_cpu = 0;
  int backend_cpu = 1;
  std::string uvhost_binary;   // empty: /proc/self/exe
  std::string testpmd_binary = "dpdk-testpmd";
  std::string work_dir;        // sockets and logs; empty: a fresh folder under /tmp
  Frontend frontend = Frontend::kEmbedded;
  std::string guest_dir;       // kQemu: build-guest.sh's cache or the folder of its vmlinux + initramfs.cpio
  // run_point_interleaved: each side's `seconds` in sub-windows of about this long, and
  // the unmeasured time after each switch between the sides.
  double slice_seconds = 0.05;
  double settle_seconds = 0.005;
  // The backend's idle cost: the warm-up runs the workload, then the frontend stays
  // connected and silent through the measured window (RunResult counts no traffic;
  // its CPU is what the backend spends waiting). Embedded frontend, run_point only.
  bool idle_window = false;
};

// CPU time one thread spent in the measured window.
struct ThreadCpu {
  std::string name;   // "frontend", or the backend thread's name ("port0.w0", "lcore-worker-1", ...)
  std::string side;   // "frontend" or "backend"
  double cpu_seconds = 0;
};

// One measured sub-window of an interleaved run (run_point_side_by_side).
struct SliceResult {
  double start_seconds = 0;  // since the round's first measured sub-window began
  double seconds = 0;        // its measured wall time
  double throughput = 0;     // as RunResult::throughput
  double steal_seconds = 0;  // the machine's steal over it (machine_steal_ns); -1: unknown
};

struct RunResult {
  double seconds = 0;          // the measured window's wall time
  uint64_t packets = 0;        // stream: frames in the measured direction; rr: responses
  uint64_t bytes = 0;          // frame bytes of those packets
  uint64_t transactions = 0;   // rr only
  double p50_us = 0, p99_us = 0, p999_us = 0;  // rr only: round-trip latency
  std::vector<ThreadCpu> threads;
  double cpu_seconds = 0;      // sum over `threads`
  std::vector<SliceResult> slices;  // side-by-side runs: this side's sub-windows in order

  double pps() const noexcept { return seconds > 0 ? static_cast<double>(packets) / seconds : 0; }
  double gbps() const noexcept { return seconds > 0 ? static_cast<double>(bytes) * 8e-9 / seconds : 0; }
  double tps() const noexcept { return seconds > 0 ? static_cast<double>(transactions) / seconds : 0; }
  // The throughput a comparison uses ("thu"): transactions/s for rr, packets/s otherwise.
  double throughput(Workload workload) const noexcept { return workload == Workload::kRr ? tps() : pps(); }
  // Throughput per CPU-second spent by every measured thread ("normalize").
  double normalized(Workload workload) const noexcept {
    return cpu_seconds > 0 ? throughput(workload) * seconds / cpu_seconds : 0;
  }
};

// Runs one point once: starts the backend (unless kSocket), connects the embedded
// frontend, warms up, measures, tears everything down. Throws std::runtime_error with
// the reason (and the backend's last log lines) when anything fails.
RunResult run_point(const Config& config, const Point& point, const RunOptions& options);

// Runs one point with A and B sharing one backend and one frontend connection: the
// backend starts with A's setup; after the warm-up, each side gets `seconds` of measured
// time in sub-windows of ~slice_seconds, A B B A ... (B A A B ... when !a_first), the
// differences switched live (live_switch.h) with settle_seconds unmeasured after each
// switch. Returns {A's result, B's result}, each summed over its sub-windows (CPU per
// thread included). Throws std::runtime_error when A and B differ in anything that needs
// a restart (the reason from live_switch), the frontend is not the embedded one, a
// switch is refused, or the run fails like run_point.
std::array<RunResult, 2> run_point_interleaved(const Config& a, const Config& b, bool a_first, const Point& point,
                                               const RunOptions& options);

// Runs one point with A and B in two backend processes, both started for the round
// (kSocket is refused: a run pauses its backends) and alive together, each with its own
// frontend connection from this thread. The frontend alternates between them in
// sub-windows of ~slice_seconds, A B B A ... (B A A B ... when !a_first), and the side it
// is not driving is paused (SIGSTOP): a polling backend takes no CPU from the other, and
// a change of the machine's speed that lasts longer than a slice hits both sides alike,
// as in run_point_interleaved, whatever A and B differ in. Each side warms up once for
// warmup_seconds (the first side last); every switch resumes a side with settle_seconds
// unmeasured; rr reads every outstanding answer before a side is paused. Returns {A's
// result, B's result}, each summed over its sub-windows, its backend's CPU from its own
// process. Throws std::runtime_error as run_point does.
std::array<RunResult, 2> run_point_side_by_side(const Config& a, const Config& b, bool a_first, const Point& point,
                                                const RunOptions& options);

}  // namespace uvhost::bench
