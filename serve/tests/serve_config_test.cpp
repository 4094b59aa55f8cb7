// serve_config_test.cpp - the whole configuration of `uvhost serve` (serve_config.h):
// the daemon keys from the file and as flags, their checks, the round trip through
// to_json(), and hostile config files.
#include "uvhost/serve/serve_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "uvhost/testing/temp_dir.h"

namespace uvhost::serve {
namespace {

std::optional<ServeConfig> parse(const std::string& text, std::string& error) {
  error.clear();
  return parse_serve_config(nlohmann::json::parse(text), error);
}

void expect_refused(const std::string& text, const std::string& needle) {
  std::string error;
  EXPECT_FALSE(parse(text, error).has_value()) << text;
  EXPECT_NE(error.find(needle), std::string::npos) << text << " -> error: " << error;
}

TEST(ServeConfigTest, EveryDaemonKeyFromTheFile) {
  std::string error;
  const auto config = parse(R"({
    "control": "/run/uvhost/ctl.sock", "pool_workers": 3, "enqueue": "locked_wake",
    "switch_tap": "uvup0", "switch_learning_lock": "delegation", "stats_interval": 0.5, "summary_json": "/tmp/s.json", "log_level": "debug",
    "ports": [{"sock": "/run/a.sock", "backend": "switch"}]
  })",
                            error);
  ASSERT_TRUE(config) << error;
  EXPECT_EQ(config->daemon.control_path, "/run/uvhost/ctl.sock");
  EXPECT_EQ(config->daemon.pool_workers, 3u);
  EXPECT_EQ(config->daemon.enqueue, sync::EnqueueStrategy::kLockedWake);
  EXPECT_EQ(config->daemon.switch_tap, "uvup0");
  EXPECT_EQ(config->daemon.switch_learning_lock, sync::SectionLockKind::kDelegation);
  EXPECT_EQ(config->daemon.stats_interval, std::chrono::milliseconds(500));
  EXPECT_EQ(config->summary_json, "/tmp/s.json");
  EXPECT_EQ(config->log_level, "debug");
  ASSERT_EQ(config->ports.size(), 1u);
  EXPECT_EQ(config->ports[0].backend, BackendKind::kSwitch);
}

TEST(ServeConfigTest, EveryKeyIsOptional) {
  std::string error;
  auto config = parse("{}", error);
  ASSERT_TRUE(config) << error;
  const DaemonOptions defaults;
  EXPECT_TRUE(config->ports.empty());
  EXPECT_EQ(config->daemon.pool_workers, defaults.pool_workers);
  EXPECT_EQ(config->daemon.enqueue, defaults.enqueue);
  EXPECT_TRUE(config->daemon.control_path.empty());
  EXPECT_TRUE(config->log_level.empty());
  config = parse(R"({"control": "/c.sock"})", error);
  ASSERT_TRUE(config) << error;
  EXPECT_EQ(config->daemon.control_path, "/c.sock");
}

// enqueue's help lists the strategies from their name table, the default marked.
TEST(ServeConfigTest, EnqueueHelpListsTheStrategies) {
  for (const DaemonKey& key : daemon_keys()) {
    if (key.key != "enqueue") continue;
    EXPECT_EQ(key.help,
              "Work-queue enqueue strategy of every worker: locked_wake, unlock_wake, lockless (default)");
  }
}

// The vocabulary is defined once: every key of daemon_keys() is taken by
// apply_daemon_key(), written by to_json() and read back from it, and its flag is
// the key with dashes.
TEST(ServeConfigTest, EveryDaemonKeyIsOneVocabulary) {
  EXPECT_EQ(flag_name("pool_workers"), "--pool-workers");
  EXPECT_EQ(flag_name("control"), "--control");
  ServeConfig config;
  const nlohmann::json written = to_json(config);
  EXPECT_EQ(written.size(), daemon_keys().size() + 1) << written.dump();  // + "ports"
  for (const DaemonKey& key : daemon_keys()) {
    const std::string name(key.key);
    ASSERT_TRUE(written.contains(name)) << name << " is not written by to_json";
    std::string error;
    ServeConfig copy;
    const std::string text =
        written[name].is_string() ? written[name].get<std::string>() : written[name].dump();
    EXPECT_TRUE(apply_daemon_key(name, text, copy, error)) << name << ": " << error;
    EXPECT_FALSE(key.help.empty()) << name;
    EXPECT_FALSE(key.value_name.empty()) << name;
  }
  std::string error;
  EXPECT_FALSE(apply_daemon_key("verbose", "1", config, error));
  EXPECT_NE(error.find("unknown key 'verbose' (ports, control, pool_workers"), std::string::npos) << error;
}

TEST(ServeConfigTest, BadDaemonValuesAreRefused) {
  expect_refused(R"({"pool_workers": 0})", "pool_workers '0' is not a number in 1..64");
  expect_refused(R"({"pool_workers": 65})", "pool_workers '65'");
  expect_refused(R"({"pool_workers": "two"})", "'pool_workers' must be a number, not string");
  expect_refused(R"({"pool_workers": -1})", "pool_workers '-1'");
  expect_refused(R"({"enqueue": "fast"})", "enqueue 'fast' unknown (locked_wake, unlock_wake, lockless)");
  expect_refused(R"({"switch_learning_lock": "spin"})", "switch_learning_lock 'spin' unknown (mutex, delegation)");
  expect_refused(R"({"stats_interval": -1})", "stats_interval '-1'");
  expect_refused(R"({"stats_interval": "nan"})", "'stats_interval' must be a number, not string");
  expect_refused(R"({"stats_interval": "inf"})", "'stats_interval' must be a number, not string");
  expect_refused(R"({"pool_workers": "2"})", "'pool_workers' must be a number, not string (\"2\")");
  expect_refused(R"({"metrics": 9477})", "'metrics' must be a string, not number");
  expect_refused(R"({"stats_interval": 0.0001})", "stats_interval '0.0001'");
  expect_refused(R"({"stats_interval": 1e300})", "stats_interval");
  expect_refused(R"({"switch_tap": "a-name-far-too-long"})",
                 "switch_tap 'a-name-far-too-long' is not an interface name");
  expect_refused(R"({"switch_tap": "a/b"})", "switch_tap 'a/b'");
  expect_refused(R"({"log_level": "loud"})",
                 "log_level 'loud' unknown (trace, debug, info, warn, warning, error, critical, off)");
  expect_refused(R"({"control": ["/a"]})", "'control' must be a string, not array");
  expect_refused(R"({"control": null})", "'control' must be a string, not null");
  expect_refused(R"({"ports": [{"sock": "/a"}, {"sock": "/b", "queues": 0}]})", "ports[1]: queues '0'");
}

// A flag's text goes through the same check as the file's value and replaces it.
TEST(ServeConfigTest, AFlagReplacesTheFilesValue) {
  std::string error;
  auto config = parse(R"({"pool_workers": 3, "control": "/a.sock"})", error);
  ASSERT_TRUE(config) << error;
  ASSERT_TRUE(apply_daemon_key("pool_workers", "5", *config, error)) << error;
  ASSERT_TRUE(apply_daemon_key("control", "", *config, error)) << error;  // none
  EXPECT_EQ(config->daemon.pool_workers, 5u);
  EXPECT_TRUE(config->daemon.control_path.empty());
  EXPECT_FALSE(apply_daemon_key("pool_workers", "0", *config, error));
  EXPECT_EQ(config->daemon.pool_workers, 5u);
}

// What --print-config writes is a config file that gives the same configuration back.
TEST(ServeConfigTest, ToJsonRoundTrips) {
  std::string error;
  auto config = parse(R"({
    "control": "/c.sock", "pool_workers": 4, "enqueue": "unlock_wake", "switch_tap": "up0",
    "switch_learning_lock": "delegation",
    "stats_interval": 2.5, "summary_json": "/s.json", "log_level": "warn",
    "ports": [
      {"sock": "/a.sock", "name": "a", "backend": "tap", "tap": "t0", "mtu": 9000, "queues": 4, "mode": "0660",
       "memory": "pthread-rwlock", "workers": "pair", "poll": "adaptive", "busy_us": 70, "exit": "any",
       "burst": 16, "weight": 100, "weight_bytes": 4096},
      {"sock": "/b.sock", "client": true, "backend": "source", "rate": 1000, "size": 1500},
      {"sock": "/c0.sock", "backend": "switch", "mtu": 1500},
      {"sock": "/d.sock", "backend": "loopback", "memory": "rwsem"},
      {"sock": "/e.sock"}
    ]})",
                      error);
  ASSERT_TRUE(config) << error;
  ASSERT_TRUE(finish_ports(config->ports, error)) << error;
  const nlohmann::json first = to_json(*config);
  auto again = parse_serve_config(first, error);
  ASSERT_TRUE(again) << error << "\n" << first.dump(2);
  EXPECT_EQ(to_json(*again), first);
  EXPECT_EQ(again->daemon.stats_interval, std::chrono::milliseconds(2500));
  EXPECT_EQ(again->ports[0].memory_policy, sync::GuardPolicy::kPthreadRwlock);
  EXPECT_EQ(again->ports[0].socket_mode, static_cast<mode_t>(0660));
  EXPECT_EQ(again->ports[0].mtu, std::optional<uint32_t>(9000));
  EXPECT_EQ(again->ports[1].source_frame_size, 1500u);
  EXPECT_TRUE(again->ports[1].client);
  EXPECT_EQ(again->ports[4].name, "port4");
  EXPECT_EQ(first["ports"][0]["mode"], "0660");
  EXPECT_FALSE(first["ports"][1].contains("mode"));  // a client listens on nothing
  EXPECT_FALSE(first["ports"][3].contains("mtu"));   // not a key of loopback ports
}

// ------------------------------------------------------------------ files

using uvhost::testing::TempDir;

void expect_file_refused(const std::string& file, const std::string& needle) {
  std::string error;
  EXPECT_FALSE(load_serve_config(file, error).has_value()) << file;
  EXPECT_NE(error.find(file + ": "), std::string::npos) << error;
  EXPECT_NE(error.find(needle), std::string::npos) << error;
}

TEST(ServeConfigFileTest, CommentsAreAllowed) {
  TempDir dir;
  const std::string file = dir.write("c.json", R"(// uvhost serve --config
{
  "pool_workers": 2,  /* two cores */
  "ports": [{"sock": "/run/a.sock"}]
})");
  std::string error;
  const auto config = load_serve_config(file, error);
  ASSERT_TRUE(config) << error;
  EXPECT_EQ(config->ports.size(), 1u);
}

TEST(ServeConfigFileTest, AKeyGivenTwiceIsRefused) {
  TempDir dir;
  expect_file_refused(dir.write("a.json", R"({"pool_workers": 2, "pool_workers": 3})"),
                      "key 'pool_workers' given twice");
  expect_file_refused(dir.write("b.json", R"({"ports": [{"sock": "/a", "queues": 1, "queues": 2}]})"),
                      "key 'queues' given twice");
  // The same key in two objects is fine.
  std::string error;
  EXPECT_TRUE(load_serve_config(dir.write("c.json", R"({"ports": [{"sock": "/a"}, {"sock": "/b"}]})"), error))
      << error;
}

TEST(ServeConfigFileTest, HostileFilesAreRefused) {
  TempDir dir;
  expect_file_refused(dir.write("deep.json", std::string(100000, '[') + std::string(100000, ']')),
                      "nested deeper than 32 levels");
  expect_file_refused(dir.write("big.json", "{\"control\": \"" + std::string(kMaxConfigBytes, 'a') + "\"}"),
                      "larger than 1048576 bytes");
  expect_file_refused(dir.write("bad.json", "{\"ports\": [{\"sock\": \"/a\",}]}"),
                      "not valid JSON: parse error at line 1");
  expect_file_refused(dir.write("empty.json", ""), "not valid JSON");
  expect_file_refused(dir.write("binary.json", std::string("{\"control\": \"\xff\xfe\"}")), "not valid JSON");
  expect_file_refused(dir.path(), "not a regular file");
  expect_file_refused(dir.path() + "/missing.json", "cannot open config file: No such file or directory");
}

}  // namespace
}  // namespace uvhost::serve
