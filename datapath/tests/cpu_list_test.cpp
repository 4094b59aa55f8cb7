// CpuList: the forms `cpus=` takes (as taskset -c writes them, a list in brackets),
// the canonical text it is written back as, what is refused, and pinning the calling
// thread (the affinity the kernel then reports; a CPU that is not there refused).
#include "uvhost/datapath/cpu_list.h"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace uvhost::datapath {
namespace {

std::vector<uint32_t> parsed(const std::string& text) {
  std::string error;
  auto list = parse_cpu_list(text, error);
  EXPECT_TRUE(list) << text << ": " << error;
  return list ? list->cpus() : std::vector<uint32_t>{};
}

std::vector<uint32_t> affinity_of_this_thread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(::sched_getaffinity(0, sizeof(set), &set), 0);
  std::vector<uint32_t> cpus;
  for (uint32_t cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

TEST(CpuListTest, FormsOfTasksetAndBrackets) {
  EXPECT_EQ(parsed("1"), (std::vector<uint32_t>{1}));
  EXPECT_EQ(parsed("0-3"), (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(parsed("0,2-3"), (std::vector<uint32_t>{0, 2, 3}));
  EXPECT_EQ(parsed("[0,2-3]"), (std::vector<uint32_t>{0, 2, 3}));
  EXPECT_EQ(parsed("5,1,5,0-1"), (std::vector<uint32_t>{0, 1, 5}));  // sorted, once each
  EXPECT_EQ(parsed("1023"), (std::vector<uint32_t>{1023}));
}

TEST(CpuListTest, WrittenBackCanonicallyAndParsesToTheSameList) {
  std::string error;
  for (const auto& [text, canonical] : std::vector<std::pair<std::string, std::string>>{
           {"1", "1"}, {"0-3", "0-3"}, {"[3,0-2]", "0-3"}, {"0,2-3,7", "0,2-3,7"}, {"4,5,6,9", "4-6,9"}}) {
    auto list = parse_cpu_list(text, error);
    ASSERT_TRUE(list) << text << ": " << error;
    EXPECT_EQ(to_string(*list), canonical) << text;
    EXPECT_EQ(parse_cpu_list(to_string(*list), error), list) << text;
  }
}

TEST(CpuListTest, BadListsAreRefusedWithTheText) {
  for (const char* text : {"", ",", "1,", ",1", "a", "1-", "-1", "3-1", "1-2-3", "[1", "1]", "[]", "0x1", " 1", "1 "}) {
    std::string error;
    EXPECT_FALSE(parse_cpu_list(text, error)) << '"' << text << '"';
    EXPECT_NE(error.find("is not a CPU list"), std::string::npos) << '"' << text << "\": " << error;
  }
  std::string error;
  EXPECT_FALSE(parse_cpu_list("1024", error));
  EXPECT_NE(error.find("CPU 1024 in '1024' is not below 1024"), std::string::npos) << error;
  EXPECT_FALSE(parse_cpu_list("0-5000", error));
  EXPECT_NE(error.find("not below"), std::string::npos) << error;
}

TEST(CpuListTest, PinningSetsTheCallingThreadsAffinityOnly) {
  const auto before = affinity_of_this_thread();
  ASSERT_FALSE(before.empty());
  const uint32_t target = before.back();
  std::vector<uint32_t> inside;
  std::thread pinned([&] {
    std::string error;
    CpuList list = *parse_cpu_list(std::to_string(target), error);
    ASSERT_TRUE(pin_this_thread(list, error)) << error;
    inside = affinity_of_this_thread();
  });
  pinned.join();
  EXPECT_EQ(inside, (std::vector<uint32_t>{target}));
  EXPECT_EQ(affinity_of_this_thread(), before);  // the caller's own is untouched
}

TEST(CpuListTest, ACpuThatIsNotThereIsRefused) {
  const long online = ::sysconf(_SC_NPROCESSORS_CONF);
  ASSERT_GT(online, 0);
  if (online >= static_cast<long>(CpuList::kMaxCpus)) GTEST_SKIP() << "every CPU number exists here";
  std::string error;
  const CpuList list = *parse_cpu_list(std::to_string(CpuList::kMaxCpus - 1), error);
  std::thread pinned([&] { EXPECT_FALSE(pin_this_thread(list, error)); });
  pinned.join();
  EXPECT_NE(error.find("cannot run on CPUs 1023"), std::string::npos) << error;
}

// A process's CPUs as the kernel has them: this one's (the test runs on its main
// thread, whose id is the process's), and a process that is gone is an error.
TEST(CpuListTest, CpusOfAProcessAreItsMainThreadsAffinity) {
  std::string error;
  const std::optional<CpuList> mine = cpus_of_process(::getpid(), error);
  ASSERT_TRUE(mine) << error;
  EXPECT_EQ(mine->cpus(), affinity_of_this_thread());
  pid_t gone = ::fork();
  ASSERT_GE(gone, 0);
  if (gone == 0) ::_exit(0);
  int status = 0;
  ASSERT_EQ(::waitpid(gone, &status, 0), gone);
  EXPECT_FALSE(cpus_of_process(gone, error));
  EXPECT_NE(error.find(fmt::format("cannot read the CPUs of process {}", gone)), std::string::npos) << error;
}

}  // namespace
}  // namespace uvhost::datapath
