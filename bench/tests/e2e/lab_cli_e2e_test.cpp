// lab_cli_e2e_test.cpp - `uvhost lab busypoll`, `busyloop-intr`, `load-sweep`, `iommu-lock`,
// `workqueue` and `delegation` through the command itself (UVHOST_BINARY), with tiny
// runs: exit status, the tables' shape, and the JSON they promise (every
// configuration's runs, the comparisons against the baseline with their verdicts),
// plus the plot file. Invariants only, never speeds.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

struct Ran {
  int status = -1;
  std::string out;
};

Ran run(const std::string& args) {
  Ran r;
  const std::string command = std::string(UVHOST_BINARY) + " " + args + " 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class LabCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("uvhost-lab-cli-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  nlohmann::json read_json(const fs::path& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
  }
  fs::path dir_;
};

constexpr const char* kQuick = " --runs 2 --seconds 0.2 --warmup 0.05 --no-pin";

TEST_F(LabCli, BusypollComparesEveryModeWithNotifyOnEveryWorkload) {
  const fs::path json = dir_ / "busypoll.json", plot = dir_ / "busypoll.svg";
  const Ran r = run("lab busypoll --workloads rr,stream-tx,stream-rx --sizes 64 --sessions 1 --modes busy,always" +
                    std::string(kQuick) + " --json " + json.string() + " --plot " + plot.string());
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* title : {"rr: busy50", "rr: always", "stream-tx: busy50", "stream-rx: always", "+thu% [95% CI]",
                            "+normalize% [95% CI]"}) {
    EXPECT_NE(r.out.find(title), std::string::npos) << title << "\n" << r.out;
  }
  const nlohmann::json j = read_json(json);
  ASSERT_EQ(j["configs"].size(), 3u);
  EXPECT_EQ(j["configs"][0]["label"], "notify");
  ASSERT_EQ(j["points"].size(), 3u);
  for (const auto& point : j["points"]) {
    for (const char* label : {"notify", "busy50", "always"}) {
      ASSERT_EQ(point["runs"][label].size(), 2u) << label;
      for (const auto& run : point["runs"][label]) EXPECT_GT(run["packets"].get<uint64_t>(), 0u) << label;
    }
    EXPECT_TRUE(point["vs_baseline"].contains("busy50"));
    EXPECT_TRUE(point["vs_baseline"].contains("always"));
    EXPECT_FALSE(point["vs_baseline"].contains("notify"));
  }
  ASSERT_TRUE(fs::exists(plot));
  EXPECT_GT(fs::file_size(plot), 1000u);
}

TEST_F(LabCli, BusyloopIntrPutsSeveralQueuesOnOneWorker) {
  const fs::path json = dir_ / "intr.json";
  const Ran r = run("lab busyloop-intr --workloads rr --sizes 64 --sessions 4 --queues 2" + std::string(kQuick) +
                    " --json " + json.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("rr: accurate"), std::string::npos) << r.out;
  const nlohmann::json j = read_json(json);
  ASSERT_EQ(j["configs"].size(), 2u);
  EXPECT_EQ(j["configs"][0]["label"], "any");
  EXPECT_NE(j["configs"][1]["config"].get<std::string>().find("exit=accurate"), std::string::npos);
  EXPECT_EQ(j["options"]["queue_pairs"], 2);
  ASSERT_EQ(j["points"].size(), 1u);
  EXPECT_EQ(j["points"][0]["runs"]["accurate"].size(), 2u);
  const auto& thu = j["points"][0]["vs_baseline"]["accurate"]["thu"];
  EXPECT_TRUE(thu["verdict"] == "better" || thu["verdict"] == "worse" || thu["verdict"] == "noise") << thu.dump();
}

TEST_F(LabCli, LoadSweepOffersEachRateToEveryConfigAndMeasuresIdle) {
  const fs::path json = dir_ / "sweep.json", plot = dir_ / "sweep.svg";
  const Ran r = run("lab load-sweep --configs always,adaptive,notify --rates 3000,0 --sessions 4 --queues 2 --arrivals fixed" +
                    std::string(kQuick) + " --json " + json.string() + " --plot " + plot.string());
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* text : {"adaptive / always", "adaptive / notify", "closed x4", "backend us/trans",
                           "idle: connected"}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
  }
  const nlohmann::json j = read_json(json);
  ASSERT_EQ(j["load"]["points"].size(), 2u);
  EXPECT_EQ(j["load"]["options"]["queue_pairs"], 2);
  EXPECT_EQ(j["load"]["points"][0]["offered_rate"], 3000);
  EXPECT_EQ(j["load"]["points"][0]["arrivals"], "fixed");
  EXPECT_EQ(j["load"]["points"][1]["offered_rate"], 0);
  for (const char* label : {"always", "adaptive", "notify"}) {
    const auto& open = j["load"]["points"][0]["runs"][label];
    ASSERT_EQ(open.size(), 2u) << label;
    // Open loop: what came back is about what was offered (3000/s over the window;
    // on a loaded machine a backlog from the warm-up may drain inside it, hence the
    // margin), far from a closed loop's hundreds of thousands.
    for (const auto& run : open) EXPECT_NEAR(run["tps"].get<double>(), 3000.0, 1500.0) << label;
    const auto& idle = j["idle"]["points"][0]["runs"][label];
    ASSERT_EQ(idle.size(), 2u) << label;
    for (const auto& run : idle) EXPECT_EQ(run["transactions"], 0) << label;
  }
  ASSERT_TRUE(fs::exists(plot));
  EXPECT_GT(fs::file_size(plot), 1000u);
}

TEST_F(LabCli, LoadSweepRefusesUnknownConfigs) {
  const Ran r = run("lab load-sweep --configs always,polling" + std::string(kQuick));
  EXPECT_NE(r.status, 0);
}

// The sync-level labs: a verdict per variant against the baseline in the table and in
// the JSON, and a PNG plot.
bool is_verdict(const nlohmann::json& v) {
  return v == "better" || v == "worse" || v == "noise";
}

void expect_png(const fs::path& path) {
  ASSERT_TRUE(fs::exists(path)) << path;
  EXPECT_GT(fs::file_size(path), 1000u) << path;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG") << path;
}

TEST_F(LabCli, IommuLockGivesEachPolicyAVerdictAgainstTheMutexAndPlots) {
  const fs::path json = dir_ / "iommu.json", plot = dir_ / "iommu.png";
  const Ran r =
      run("lab iommu-lock --threads 2 --policies mutex,rwsem,rcu --runs 2 --duration-ms 50 --quiet --json " +
          json.string() + " --plot " + plot.string());
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* text :
       {"vs mutex", "ns/translation ×mutex", "ns verdict", "updates verdict", "lower is better"}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
  }
  const nlohmann::json j = read_json(json);
  ASSERT_EQ(j["cells"].size(), 6u);  // 1 thread count x 2 mixes x 3 policies
  for (const auto& cell : j["cells"]) {
    EXPECT_TRUE(is_verdict(cell["vs_mutex"]["wall_ns_per_translation"]["verdict"]))
        << cell["vs_mutex"].dump();
    EXPECT_EQ(cell["vs_mutex"]["wall_ns_per_translation"]["better"], "lower");
    if (cell["mix"] == "mix") {
      EXPECT_TRUE(is_verdict(cell["vs_mutex"]["updates_per_s"]["verdict"])) << cell["vs_mutex"].dump();
    }
  }
  expect_png(plot);
}

TEST_F(LabCli, WorkqueueGivesEachStrategyAVerdictInBothHalvesAndPlots) {
  const fs::path json = dir_ / "wq.json", plot = dir_ / "wq.png";
  const Ran r =
      run("lab workqueue --threads 2 --queues 2 --kick-paths inject --datapath --runs 2 --duration-ms 50 "
          "--rate 4000 --quiet --json " +
          json.string() + " --plot " + plot.string());
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* text :
       {"throughput ×locked_wake", "kicks handled/s ×locked_wake", "worker CPU ×locked_wake"}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
  }
  const nlohmann::json j = read_json(json);
  ASSERT_EQ(j["cells"].size(), 3u);
  for (const auto& cell : j["cells"]) {
    EXPECT_TRUE(is_verdict(cell["vs_first_strategy"]["throughput"]["verdict"]))
        << cell["vs_first_strategy"].dump();
    EXPECT_TRUE(is_verdict(cell["vs_first_strategy"]["worker_cpu_pct"]["verdict"]))
        << cell["vs_first_strategy"].dump();
  }
  ASSERT_EQ(j["datapath"]["cells"].size(), 3u);
  for (const auto& cell : j["datapath"]["cells"]) {
    const auto& vs = cell["vs_first_strategy"];
    EXPECT_TRUE(is_verdict(vs["kicks_handled_per_s"]["verdict"])) << vs.dump();
    EXPECT_TRUE(is_verdict(vs["worker_cpu_pct"]["verdict"])) << vs.dump();
  }
  expect_png(plot);
}

TEST_F(LabCli, DelegationGivesEachLockAVerdictAgainstStdMutexPerStructureAndPlots) {
  const fs::path json = dir_ / "delegation.json", plot = dir_ / "delegation.png";
  const Ran r =
      run("lab delegation --structures slab,pool --locks std::mutex,delegation --threads 2 --runs 2 "
          "--duration-ms 50 --quiet --json " +
          json.string() + " --plot " + plot.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("verdict"), std::string::npos) << r.out;
  const nlohmann::json j = read_json(json);
  ASSERT_EQ(j["reports"].size(), 2u);
  for (const auto& report : j["reports"]) {
    ASSERT_EQ(report["points"].size(), 2u) << report["structure"];
    for (const auto& point : report["points"]) {
      EXPECT_TRUE(is_verdict(point["vs_mutex"]["verdict"]))
          << report["structure"] << " " << point["vs_mutex"].dump();
    }
  }
  expect_png(plot);
}

// `uvhost bench compare` and `calibrate` through the command: slices where A and B
// differ only in live keys, separate runs where told or where they must.
TEST_F(LabCli, BenchCompareInterleavesInSlicesWhereItCan) {
  const fs::path json = dir_ / "slices.json";
  Ran r = run("bench compare --a poll=always --b poll=always,spin_ns=20000 --workloads stream-tx --sizes 64" +
              std::string(kQuick) + " --json " + json.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("switched live: spin_ns"), std::string::npos) << r.out;
  nlohmann::json j = read_json(json);
  EXPECT_EQ(j["interleave"], "slices");
  ASSERT_EQ(j["points"][0]["runs"].size(), 2u);
  for (const auto& round : j["points"][0]["runs"]) {
    EXPECT_GT(round["a"]["packets"].get<uint64_t>(), 2 * round["b"]["packets"].get<uint64_t>());
  }

  const fs::path runs_json = dir_ / "runs.json";
  r = run("bench compare --a poll=always --b poll=busy --workloads rr --sizes 64 --interleave runs" +
          std::string(kQuick) + " --json " + runs_json.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("each its own backend process"), std::string::npos) << r.out;
  EXPECT_EQ(read_json(runs_json)["interleave"], "runs");

  // workers= is fixed when the port is created: slices are refused, auto goes side by side.
  r = run("bench compare --a workers=pair --b workers=device --interleave slices" + std::string(kQuick));
  EXPECT_EQ(r.status, 2) << r.out;
  const fs::path processes_json = dir_ / "processes.json";
  r = run("bench compare --a workers=pair --b workers=device --workloads rr --sessions 2 --queues 2" +
          std::string(kQuick) + " --json " + processes_json.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("backend processes alive together"), std::string::npos) << r.out;
  j = read_json(processes_json);
  EXPECT_EQ(j["interleave"], "processes");
  for (const auto& round : j["points"][0]["runs"]) {
    EXPECT_GT(round["a"]["transactions"].get<uint64_t>(), 0u);
    EXPECT_GT(round["b"]["transactions"].get<uint64_t>(), 0u);
  }
  // Side by side, each side is measured 1.5 s per round unless --seconds says otherwise.
  const fs::path default_json = dir_ / "processes-default.json";
  r = run("bench compare --a workers=pair --b workers=device --workloads stream-tx --runs 2 --warmup 0.05 --no-pin "
          "--json " + default_json.string());
  ASSERT_EQ(r.status, 0) << r.out;
  j = read_json(default_json);
  EXPECT_EQ(j["seconds"], 1.5);
  for (const auto& round : j["points"][0]["runs"]) {
    EXPECT_NEAR(round["a"]["seconds"].get<double>(), 1.5, 0.1);
    EXPECT_NEAR(round["b"]["seconds"].get<double>(), 1.5, 0.1);
    EXPECT_EQ(round["a"]["slices"].size(), 30u);
  }
  // A running backend cannot be paused by the run.
  r = run("bench compare --a socket=/nonexistent.sock --b poll=always --interleave processes" + std::string(kQuick));
  EXPECT_EQ(r.status, 2) << r.out;
}

// uvhost=PATH: another build serves that side, so A and B go side by side; the path is
// really what runs (a program that is not uvhost fails the run).
TEST_F(LabCli, BenchCompareRunsTwoBuildsSideBySide) {
  const fs::path other = dir_ / "uvhost-other";
  fs::copy_file(UVHOST_BINARY, other);
  const fs::path json = dir_ / "builds.json";
  Ran r = run("bench compare --a poll=always --b poll=always,uvhost=" + other.string() +
              " --workloads rr --sizes 64" + std::string(kQuick) + " --json " + json.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("uvhost=" + other.string()), std::string::npos) << r.out;
  const nlohmann::json j = read_json(json);
  EXPECT_EQ(j["interleave"], "processes");
  ASSERT_EQ(j["points"][0]["runs"].size(), 2u);
  for (const auto& round : j["points"][0]["runs"]) {
    EXPECT_GT(round["a"]["transactions"].get<uint64_t>(), 0u);
    EXPECT_GT(round["b"]["transactions"].get<uint64_t>(), 0u);
  }
  // Slices need one process: refused with the reason.
  r = run("bench compare --a poll=always --b uvhost=" + other.string() + " --interleave slices" + std::string(kQuick));
  EXPECT_EQ(r.status, 2) << r.out;
  // Not a uvhost: its serve never comes up, and the run says so.
  r = run("bench compare --a poll=always --b uvhost=/bin/true --workloads rr --sizes 64" + std::string(kQuick));
  EXPECT_NE(r.status, 0) << r.out;
}

TEST_F(LabCli, BenchCalibrateRunsItsTrialsInTwoProcesses) {
  const fs::path json = dir_ / "cal-processes.json";
  const Ran r = run("bench calibrate --interleave processes --trials 1 --runs 2 --seconds 0.1 --warmup 0.05 --no-pin "
                    "--json " + json.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("A/A noise"), std::string::npos) << r.out;
  const nlohmann::json j = read_json(json);
  EXPECT_EQ(j["interleave"], "processes");
  EXPECT_EQ(j["aa_trials"].size(), 1u);
  EXPECT_EQ(j["ab_trials"].size(), 1u);
}

TEST_F(LabCli, BenchCalibrateRunsItsTrialsInSlices) {
  const fs::path json = dir_ / "cal.json";
  const Ran r = run("bench calibrate --trials 1 --runs 2 --seconds 0.1 --warmup 0.05 --no-pin --json " + json.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("A/A noise"), std::string::npos) << r.out;
  const nlohmann::json j = read_json(json);
  EXPECT_EQ(j["interleave"], "slices");
  EXPECT_EQ(j["aa_trials"].size(), 1u);
  EXPECT_EQ(j["ab_trials"][0]["live_keys"], nlohmann::json::array({"spin_ns"}));
}

TEST_F(LabCli, RefusesAnUnknownWorkload) {
  const Ran r = run("lab busypoll --workloads tcp_crr" + std::string(kQuick));
  EXPECT_NE(r.status, 0);
}

}  // namespace
