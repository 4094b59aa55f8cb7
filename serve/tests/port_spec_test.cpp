// port_spec_test.cpp - what a port of `uvhost serve` is: the command-line form
// (parse_port_spec), a port in the JSON config (parse_port_json through the file's
// parser, serve_config.h; port_to_json), naming and
// uniqueness (finish_ports) and the log line (describe).
#include "uvhost/serve/port_spec.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "uvhost/testing/temp_dir.h"

#include "uvhost/serve/backend_factory.h"
#include "uvhost/serve/serve_config.h"

namespace uvhost::serve {
namespace {



// ------------------------------------------------------------------ command line

std::optional<PortSpec> parse(const std::string& text, std::string& error) {
  error.clear();
  return parse_port_spec(text, error);
}

// Asserts `text` is refused with an error that mentions `needle`.
void expect_refused(const std::string& text, const std::string& needle) {
  std::string error;
  const auto spec = parse(text, error);
  EXPECT_FALSE(spec.has_value()) << text;
  EXPECT_NE(error.find(needle), std::string::npos) << text << " -> error: " << error;
}

TEST(PortSpecTest, OnlyTheSocketGivesTheDefaults) {
  std::string error;
  const auto spec = parse("sock=/tmp/a.sock", error);
  ASSERT_TRUE(spec.has_value()) << error;
  EXPECT_EQ(spec->socket_path, "/tmp/a.sock");
  EXPECT_EQ(spec->name, "");  // finish_ports names it
  EXPECT_FALSE(spec->client);
  EXPECT_EQ(spec->queue_pairs, 1u);
  EXPECT_EQ(spec->backend, BackendKind::kSink);
  EXPECT_EQ(spec->socket_mode, static_cast<mode_t>(0600));
  EXPECT_EQ(spec->memory_policy, sync::GuardPolicy::kRcu);
}

TEST(PortSpecTest, EveryKeyInAnyOrder) {
  std::string error;
  const auto spec =
      parse("name=uplink,memory=rwsem,mode=0660,backend=loopback,queues=4,client=1,sock=/run/x/vhost.sock", error);
  ASSERT_TRUE(spec.has_value()) << error;
  EXPECT_EQ(spec->name, "uplink");
  EXPECT_EQ(spec->socket_path, "/run/x/vhost.sock");
  EXPECT_TRUE(spec->client);
  EXPECT_EQ(spec->queue_pairs, 4u);
  EXPECT_EQ(spec->backend, BackendKind::kLoopback);
  EXPECT_EQ(spec->socket_mode, static_cast<mode_t>(0660));
  EXPECT_EQ(spec->memory_policy, sync::GuardPolicy::kRwSem);
}

TEST(PortSpecTest, BareClientAndItsSpelledOutForms) {
  std::string error;
  auto spec = parse("sock=/a,client", error);
  ASSERT_TRUE(spec.has_value()) << error;
  EXPECT_TRUE(spec->client);
  for (const char* yes : {"1", "true", "yes"}) {
    spec = parse(std::string("sock=/a,client=") + yes, error);
    ASSERT_TRUE(spec.has_value()) << yes << ": " << error;
    EXPECT_TRUE(spec->client) << yes;
  }
  for (const char* no : {"0", "false", "no"}) {
    spec = parse(std::string("client=") + no + ",sock=/a", error);
    ASSERT_TRUE(spec.has_value()) << no << ": " << error;
    EXPECT_FALSE(spec->client) << no;
  }
}

TEST(PortSpecTest, ModeIsOctal) {
  std::string error;
  auto spec = parse("sock=/a,mode=0666", error);
  ASSERT_TRUE(spec.has_value()) << error;
  EXPECT_EQ(spec->socket_mode, static_cast<mode_t>(0666));
  spec = parse("sock=/a,mode=640", error);  // the leading zero is optional
  ASSERT_TRUE(spec.has_value()) << error;
  EXPECT_EQ(spec->socket_mode, static_cast<mode_t>(0640));
  spec = parse("sock=/a,mode=0777", error);
  ASSERT_TRUE(spec.has_value()) << error;
  EXPECT_EQ(spec->socket_mode, static_cast<mode_t>(0777));
}

TEST(PortSpecTest, QueuePairsFromOneTo128) {
  std::string error;
  auto spec = parse("sock=/a,queues=1", error);
  ASSERT_TRUE(spec.has_value()) << error;
  EXPECT_EQ(spec->queue_pairs, 1u);
  spec = parse("sock=/a,queues=128", error);
  ASSERT_TRUE(spec.has_value()) << error;
  EXPECT_EQ(spec->queue_pairs, 128u);
}

TEST(PortSpecTest, EveryMemoryPolicy) {
  const std::vector<std::pair<std::string, sync::GuardPolicy>> cases{
      {"rcu", sync::GuardPolicy::kRcu},
      {"mutex", sync::GuardPolicy::kMutex},
      {"rwsem", sync::GuardPolicy::kRwSem},
      {"pthread-rwlock", sync::GuardPolicy::kPthreadRwlock},
  };
  for (const auto& [name, policy] : cases) {
    std::string error;
    const auto spec = parse("sock=/a,memory=" + name, error);
    ASSERT_TRUE(spec.has_value()) << name << ": " << error;
    EXPECT_EQ(spec->memory_policy, policy) << name;
  }
}

TEST(PortSpecTest, PathIsAnotherNameForSock) {
  std::string error;
  const auto spec = parse("path=/b.sock", error);
  ASSERT_TRUE(spec.has_value()) << error;
  EXPECT_EQ(spec->socket_path, "/b.sock");
  expect_refused("sock=/a.sock,path=/b.sock", "twice");
}

TEST(PortSpecTest, ASocketIsRequired) {
  expect_refused("queues=2", "no socket path");
  expect_refused("client", "no socket path");
  expect_refused("", "empty item");
}

TEST(PortSpecTest, UnknownRepeatedAndEmptyItemsAreRefused) {
  expect_refused("sock=/a,colour=blue", "unknown key 'colour'");
  expect_refused("sock=/a,Queues=2", "unknown key");  // keys are case-sensitive
  expect_refused("sock=/a,queues=2,queues=2", "'queues' given twice");
  expect_refused("sock=/a,sock=/b", "'sock' given twice");
  expect_refused("client,sock=/a,client=0", "'client' given twice");
  expect_refused("sock=/a,,queues=2", "empty item");
  expect_refused("sock=/a,", "empty item");
  expect_refused(",sock=/a", "empty item");
}

TEST(PortSpecTest, BadQueueCountsAreRefused) {
  for (const char* bad : {"0", "129", "abc", "-1", "2x", " 2", "0x2", "99999999999"}) {
    expect_refused(std::string("sock=/a,queues=") + bad, "queues");
  }
}

TEST(PortSpecTest, BadBackendModeMemoryAndClientAreRefused) {
  expect_refused("sock=/a,backend=bridge", "backend 'bridge' unknown");
  expect_refused("sock=/a,backend=Sink", "backend");
  expect_refused("sock=/a,mode=0800", "mode '0800'");  // 8 is not an octal digit
  expect_refused("sock=/a,mode=rw", "mode");
  expect_refused("sock=/a,mode=01777", "mode");  // sticky bit: beyond 0777
  expect_refused("sock=/a,mode=-600", "mode");
  expect_refused("sock=/a,memory=spin", "memory guard 'spin' unknown");
  expect_refused("sock=/a,memory=RCU", "memory guard");
  expect_refused("sock=/a,client=maybe", "client 'maybe'");
}

TEST(PortSpecTest, EmptyValuesAreRefused) {
  for (const char* key : {"sock", "path", "queues", "backend", "mode", "memory", "name"}) {
    expect_refused(std::string(key) + "=" + (std::string(key) == "sock" ? "" : ",sock=/a"), "needs a value");
  }
  expect_refused("sock=/a,client=", "client");
  // A key that takes a value, given bare.
  expect_refused("sock=/a,queues", "needs a value");
  expect_refused("sock", "needs a value");
}

TEST(PortSpecTest, TheErrorNamesThePort) {
  std::string error;
  EXPECT_FALSE(parse("sock=/a,queues=0", error).has_value());
  EXPECT_NE(error.find("sock=/a,queues=0"), std::string::npos) << error;
}

// ------------------------------------------------------------------ JSON config

// The ports of a config file's JSON.
std::optional<std::vector<PortSpec>> parse_config(const nlohmann::json& json, std::string& error) {
  auto config = parse_serve_config(json, error);
  if (!config) return std::nullopt;
  return std::move(config->ports);
}

std::optional<std::vector<PortSpec>> load_config_file(const std::string& path, std::string& error) {
  auto config = load_serve_config(path, error);
  if (!config) return std::nullopt;
  return std::move(config->ports);
}

std::optional<std::vector<PortSpec>> config(const nlohmann::json& json, std::string& error) {
  error.clear();
  return parse_config(json, error);
}

void expect_config_refused(const nlohmann::json& json, const std::string& needle) {
  std::string error;
  const auto ports = config(json, error);
  EXPECT_FALSE(ports.has_value()) << json.dump();
  EXPECT_NE(error.find(needle), std::string::npos) << json.dump() << " -> error: " << error;
}

TEST(PortConfigTest, ValidConfigWithEveryKey) {
  const auto json = nlohmann::json::parse(R"({
    "ports": [
      {"sock": "/run/a.sock"},
      {"sock": "/run/b.sock", "client": true, "queues": 2, "backend": "loopback", "mode": "0660",
       "name": "b", "memory": "mutex"},
      {"sock": "/run/c.sock", "client": false, "queues": 3, "memory": "pthread-rwlock"}
    ]
  })");
  std::string error;
  const auto ports = config(json, error);
  ASSERT_TRUE(ports.has_value()) << error;
  ASSERT_EQ(ports->size(), 3u);

  const PortSpec& a = (*ports)[0];
  EXPECT_EQ(a.socket_path, "/run/a.sock");
  EXPECT_EQ(a.name, "");
  EXPECT_FALSE(a.client);
  EXPECT_EQ(a.queue_pairs, 1u);
  EXPECT_EQ(a.backend, BackendKind::kSink);
  EXPECT_EQ(a.socket_mode, static_cast<mode_t>(0600));
  EXPECT_EQ(a.memory_policy, sync::GuardPolicy::kRcu);

  const PortSpec& b = (*ports)[1];
  EXPECT_EQ(b.socket_path, "/run/b.sock");
  EXPECT_EQ(b.name, "b");
  EXPECT_TRUE(b.client);
  EXPECT_EQ(b.queue_pairs, 2u);
  EXPECT_EQ(b.backend, BackendKind::kLoopback);
  EXPECT_EQ(b.socket_mode, static_cast<mode_t>(0660));
  EXPECT_EQ(b.memory_policy, sync::GuardPolicy::kMutex);

  const PortSpec& c = (*ports)[2];
  EXPECT_FALSE(c.client);
  EXPECT_EQ(c.queue_pairs, 3u);
  EXPECT_EQ(c.memory_policy, sync::GuardPolicy::kPthreadRwlock);
}

TEST(PortConfigTest, NoPortsIsAnEmptyList) {
  std::string error;
  const auto ports = config(nlohmann::json::parse(R"({"ports": []})"), error);
  ASSERT_TRUE(ports.has_value()) << error;
  EXPECT_TRUE(ports->empty());
}

TEST(PortConfigTest, TheShapeIsChecked) {
  expect_config_refused(nlohmann::json::array(), "must be a JSON object");
  expect_config_refused(nlohmann::json("ports"), "must be a JSON object");
  expect_config_refused(nlohmann::json::parse(R"({"ports": {"sock": "/a"}})"), "\"ports\" must be an array");
  expect_config_refused(nlohmann::json::parse(R"({"ports": [], "verbose": true})"), "unknown key 'verbose'");
  expect_config_refused(nlohmann::json::parse(R"({"ports": ["sock=/a"]})"), "ports[0]: not an object");
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": "/a"}, 7]})"), "ports[1]: not an object");
}

TEST(PortConfigTest, UnknownKeysAreRefused) {
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": "/a", "speed": "fast"}]})"),
                        "ports[0]: unknown key 'speed'");
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": "/a", "path": "/b"}]})"), "twice");
}

TEST(PortConfigTest, WrongTypesAreRefused) {
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": ["/a"]}]})"), "'sock' must be a string, not array");
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": "/a", "queues": "2"}]})"),
                        "'queues' must be a number, not string (\"2\")");
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": "/a", "client": "yes"}]})"),
                        "'client' must be true or false, not string");
  // A negative or fractional number is refused by the key's own check, which names it.
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": "/a", "queues": -1}]})"), "queues '-1'");
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": "/a", "queues": 1.5}]})"), "queues '1.5'");
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": "/a", "client": null}]})"), "must be true or false, not null");
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": "/a", "backend": {}}]})"), "must be a string, not object");
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": "/a", "queues": 0}]})"), "queues");
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": "/a", "queues": 129}]})"), "queues");
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": "/a", "client": "perhaps"}]})"), "client");
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": "/a", "backend": "bridge"}]})"), "backend");
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": "/a", "memory": "none"}]})"), "memory");
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": ""}]})"), "needs a value");
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"queues": 2}]})"), "ports[0]: no socket path");
}

TEST(PortConfigTest, EachKeyHasOneJsonType) {
  // Strict types: text keys take strings (a numeric name is "7"), numbers numbers,
  // client a boolean; the error names the key, the wanted type and the value.
  std::string error;
  const auto ports = config(nlohmann::json::parse(R"({"ports": [{"sock": "5", "name": "7", "queues": 2, "client": true}]})"), error);
  ASSERT_TRUE(ports.has_value()) << error;
  EXPECT_EQ((*ports)[0].socket_path, "5");
  EXPECT_EQ((*ports)[0].name, "7");
  EXPECT_EQ((*ports)[0].queue_pairs, 2u);
  EXPECT_TRUE((*ports)[0].client);
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": 5}]})"), "'sock' must be a string, not number (5)");
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": "/a", "burst": "64"}]})"),
                        "'burst' must be a number, not string");
}

TEST(PortConfigTest, ModeAsANumberIsRefused) {
  // 660 in JSON would be read as decimal 660 = 01224: a string is required.
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": "/a", "mode": 660}]})"),
                        "mode must be a string");
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": "/a", "mode": true}]})"),
                        "mode must be a string");
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": "/a", "mode": "9"}]})"), "mode '9'");
  std::string error;
  const auto ports = config(nlohmann::json::parse(R"({"ports": [{"sock": "/a", "mode": "0640"}]})"), error);
  ASSERT_TRUE(ports.has_value()) << error;
  EXPECT_EQ((*ports)[0].socket_mode, static_cast<mode_t>(0640));
}

// ------------------------------------------------------------------ config file

using uvhost::testing::TempDir;

TEST(ConfigFileTest, LoadsAValidFile) {
  TempDir dir;
  const std::string file =
      dir.write("ok.json", R"({"ports": [{"sock": "/run/a.sock", "queues": 2}, {"sock": "/run/b.sock", "client": true}]})");
  std::string error;
  const auto ports = load_config_file(file, error);
  ASSERT_TRUE(ports.has_value()) << error;
  ASSERT_EQ(ports->size(), 2u);
  EXPECT_EQ((*ports)[0].socket_path, "/run/a.sock");
  EXPECT_EQ((*ports)[0].queue_pairs, 2u);
  EXPECT_TRUE((*ports)[1].client);
}

TEST(ConfigFileTest, AMissingFileIsRefused) {
  TempDir dir;
  const std::string missing = dir.path() + "/missing.json";
  std::string error;
  EXPECT_FALSE(load_config_file(missing, error).has_value());
  EXPECT_NE(error.find("cannot open config file"), std::string::npos) << error;
  EXPECT_NE(error.find(missing), std::string::npos) << error;
}

TEST(ConfigFileTest, InvalidJsonIsRefused) {
  TempDir dir;
  for (const char* text : {"{\"ports\": [", "", "ports = []", "{\"ports\": [{\"sock\": \"/a\",}]}"}) {
    const std::string file = dir.write("bad.json", text);
    std::string error;
    EXPECT_FALSE(load_config_file(file, error).has_value()) << text;
    EXPECT_NE(error.find("not valid JSON"), std::string::npos) << text << " -> " << error;
    EXPECT_NE(error.find(file), std::string::npos) << error;
  }
}

TEST(ConfigFileTest, ValidJsonWithABadPortNamesTheFileAndThePort) {
  TempDir dir;
  const std::string file = dir.write("port.json", R"({"ports": [{"sock": "/a"}, {"sock": "/b", "queues": 0}]})");
  std::string error;
  EXPECT_FALSE(load_config_file(file, error).has_value());
  EXPECT_NE(error.find(file), std::string::npos) << error;
  EXPECT_NE(error.find("ports[1]"), std::string::npos) << error;
}

// ------------------------------------------------------------------ finish_ports, describe

PortSpec port(std::string path, std::string name = "") {
  PortSpec spec;
  spec.socket_path = std::move(path);
  spec.name = std::move(name);
  return spec;
}

TEST(FinishPortsTest, UnnamedPortsAreNamedByTheirIndex) {
  std::vector<PortSpec> ports{port("/a"), port("/b", "uplink"), port("/c")};
  std::string error;
  ASSERT_TRUE(finish_ports(ports, error)) << error;
  EXPECT_EQ(ports[0].name, "port0");
  EXPECT_EQ(ports[1].name, "uplink");
  EXPECT_EQ(ports[2].name, "port2");
}

TEST(FinishPortsTest, NoPortsIsFine) {
  std::vector<PortSpec> ports;
  std::string error;
  EXPECT_TRUE(finish_ports(ports, error)) << error;
}

TEST(FinishPortsTest, DuplicateNamesAreRefused) {
  std::vector<PortSpec> ports{port("/a", "x"), port("/b", "x")};
  std::string error;
  EXPECT_FALSE(finish_ports(ports, error));
  EXPECT_NE(error.find("two ports are named 'x'"), std::string::npos) << error;

  // A given name that clashes with a default one.
  std::vector<PortSpec> clash{port("/a"), port("/b", "port0")};
  error.clear();
  EXPECT_FALSE(finish_ports(clash, error));
  EXPECT_NE(error.find("'port0'"), std::string::npos) << error;
}

TEST(FinishPortsTest, DuplicatePathsAreRefused) {
  std::vector<PortSpec> ports{port("/run/a.sock"), port("/run/b.sock"), port("/run/a.sock")};
  std::string error;
  EXPECT_FALSE(finish_ports(ports, error));
  EXPECT_NE(error.find("two ports use the socket /run/a.sock"), std::string::npos) << error;
}

TEST(DescribeTest, ServerAndClientPorts) {
  PortSpec server = port("/run/a.sock", "p0");
  EXPECT_EQ(describe(server),
            "p0 (listening on /run/a.sock, 1 queue pair, sink, memory guard rcu, workers device, poll notify, "
            "burst 64, weight 256)");

  PortSpec client = port("/run/b.sock", "p1");
  client.client = true;
  client.queue_pairs = 2;
  client.backend = BackendKind::kLoopback;
  client.memory_policy = sync::GuardPolicy::kRwSem;
  client.workers = datapath::WorkerMapping::kPool;
  client.poll = datapath::PollSettings{datapath::PollMode::kBusy, 30, datapath::ExitPolicy::kAnyWork};
  EXPECT_EQ(describe(client),
            "p1 (client of /run/b.sock, 2 queue pairs, loopback, memory guard rwsem, workers pool, "
            "poll busy(30us,any), burst 64, weight 256)");
}

TEST(PortSpecTest, DatapathAndBackendKeys) {
  std::string error;
  auto spec = parse_port_spec(
      "sock=/a,backend=source,rate=1000,size=128,workers=pair,poll=adaptive,busy_us=80,exit=any,burst=16,weight=32,"
      "weight_bytes=65536",
      error);
  ASSERT_TRUE(spec) << error;
  EXPECT_EQ(spec->backend, BackendKind::kSource);
  EXPECT_EQ(spec->source_rate_pps, 1000u);
  EXPECT_EQ(spec->source_frame_size, 128u);
  EXPECT_EQ(spec->workers, datapath::WorkerMapping::kQueuePair);
  EXPECT_EQ(spec->poll, (datapath::PollSettings{datapath::PollMode::kAdaptive, 80, datapath::ExitPolicy::kAnyWork}));
  EXPECT_EQ(spec->burst, 16u);
  EXPECT_EQ(spec->weight_packets, 32u);
  EXPECT_EQ(spec->weight_bytes, 65536u);
  EXPECT_EQ(spec->tx_delivery, datapath::TxDelivery::kInPlace);  // the default
  spec = parse_port_spec("sock=/a,backend=tap,tap=uv0,tx_delivery=at_most_once", error);
  ASSERT_TRUE(spec) << error;
  EXPECT_EQ(spec->tap_name, "uv0");
  EXPECT_EQ(spec->tx_delivery, datapath::TxDelivery::kAtMostOnce);
  std::string json_error;
  EXPECT_EQ(parse_port_json(port_to_json(*spec), json_error), spec) << json_error;
  spec = parse_port_spec("sock=/a,backend=switch", error);
  ASSERT_TRUE(spec) << error;
  EXPECT_EQ(spec->backend, BackendKind::kSwitch);
  auto config = parse_config(nlohmann::json::parse(
                                 R"({"ports": [{"sock": "/a", "backend": "tap", "tap": "t1", "poll": "always", "burst": 8}]})"),
                             error);
  ASSERT_TRUE(config) << error;
  EXPECT_EQ((*config)[0].poll.mode, datapath::PollMode::kAlways);
  EXPECT_EQ((*config)[0].burst, 8u);
}

// cpus= as taskset writes it; a list with commas in brackets (DPDK's device
// arguments) keeps its commas inside one item; written back canonically; sched=
// by libvirt's and systemd's names.
TEST(PortSpecTest, CpusAndSchedPlaceThePortsWorkers) {
  std::string error;
  auto spec = parse_port_spec("sock=/a,cpus=1,workers=pair", error);
  ASSERT_TRUE(spec) << error;
  EXPECT_EQ(datapath::to_string(spec->placement.cpus), "1");
  EXPECT_EQ(spec->placement.scheduler, datapath::WorkerScheduler::kOther);
  spec = parse_port_spec("sock=/a,cpus=[0,2-3],queues=2,sched=batch", error);
  ASSERT_TRUE(spec) << error;
  EXPECT_EQ(datapath::to_string(spec->placement.cpus), "0,2-3");
  EXPECT_EQ(spec->placement.scheduler, datapath::WorkerScheduler::kBatch);
  EXPECT_EQ(spec->queue_pairs, 2u);
  EXPECT_NE(describe(*spec).find("workers device on CPUs 0,2-3, sched batch,"), std::string::npos) << describe(*spec);
  const nlohmann::json written = port_to_json(*spec);
  EXPECT_EQ(written.at("cpus"), "0,2-3");
  EXPECT_EQ(written.at("sched"), "batch");
  std::string json_error;
  EXPECT_EQ(parse_port_json(written, json_error), spec) << json_error;
  spec = parse_port_spec("sock=/a", error);
  ASSERT_TRUE(spec) << error;
  EXPECT_TRUE(spec->placement.is_default());
  EXPECT_FALSE(port_to_json(*spec).contains("cpus"));
  EXPECT_FALSE(port_to_json(*spec).contains("sched"));
  EXPECT_EQ(describe(*spec).find("CPUs"), std::string::npos);
  // A '[' that does not open a value is part of it (a path), and commas still split.
  spec = parse_port_spec("sock=/run/a[b,name=p,cpus=[1]", error);
  ASSERT_TRUE(spec) << error;
  EXPECT_EQ(spec->socket_path, "/run/a[b");
  EXPECT_EQ(spec->name, "p");
  EXPECT_EQ(datapath::to_string(spec->placement.cpus), "1");
  spec = parse_port_spec("sock=/a,sched=idle,workers=pair", error);
  ASSERT_TRUE(spec) << error;
  EXPECT_NE(describe(*spec).find("workers pair, sched idle,"), std::string::npos) << describe(*spec);
  for (const datapath::WorkerScheduler s :
       {datapath::WorkerScheduler::kOther, datapath::WorkerScheduler::kBatch, datapath::WorkerScheduler::kIdle}) {
    EXPECT_EQ(base::parse_enum<datapath::WorkerScheduler>(datapath::to_string(s)), s);
  }
}

// cpus=frontend: no CPUs named, the frontend's taken when it connects; shown, written
// back and read again as such; a later cpus=LIST replaces it.
TEST(PortSpecTest, CpusFrontendFollowsTheConnectedProcess) {
  std::string error;
  auto spec = parse_port_spec("sock=/a,cpus=frontend,sched=batch", error);
  ASSERT_TRUE(spec) << error;
  EXPECT_TRUE(spec->placement.follow_frontend);
  EXPECT_TRUE(spec->placement.cpus.empty());
  EXPECT_FALSE(spec->placement.is_default());
  EXPECT_NE(describe(*spec).find("workers device on the frontend's CPUs, sched batch,"), std::string::npos)
      << describe(*spec);
  const nlohmann::json written = port_to_json(*spec);
  EXPECT_EQ(written.at("cpus"), "frontend");
  std::string json_error;
  EXPECT_EQ(parse_port_json(written, json_error), spec) << json_error;
  spec = parse_port_spec("sock=/a,cpus=frontend", error);
  ASSERT_TRUE(spec) << error;
  EXPECT_FALSE(spec->placement.is_default());
  expect_refused("sock=/a,cpus=frontend,workers=pool", "cpus= and sched= are for workers=device and workers=pair");
  expect_refused("sock=/a,cpus=vm", "'vm' is not a CPU list like 1 or 0-3 or [0,2-3]; cpus= also takes frontend");
}

TEST(PortSpecTest, BadDatapathAndBackendKeysAreRefused) {
  expect_refused("sock=/a,cpus=1,workers=pool", "cpus= and sched= are for workers=device and workers=pair");
  expect_refused("sock=/a,sched=batch,workers=pool", "cpus= and sched= are for workers=device and workers=pair");
  expect_refused("sock=/a,sched=fifo", "sched 'fifo' unknown");
  expect_refused("sock=/a,cpus=0,2", "unknown key '2'");
  expect_refused("sock=/a,cpus=2-1", "'2-1' is not a CPU list");
  expect_refused("sock=/a,cpus=[0,1", "'[0,1' is not a CPU list");
  expect_refused("sock=/a,cpus=4096", "CPU 4096 in '4096' is not below 1024");
  expect_refused("sock=/a,tap=uv0", "tap= is for backend=tap");
  expect_refused("sock=/a,backend=switch,tap=uv0", "tap= is for backend=tap");
  expect_refused("sock=/a,backend=loopback,rate=5", "rate= and size= are for backend=source");
  expect_refused("sock=/a,backend=source,size=20", "size '20' is not a number in 60..65535");
  expect_refused("sock=/a,workers=many", "workers 'many' unknown");
  expect_refused("sock=/a,poll=sometimes", "poll 'sometimes' unknown");
  expect_refused("sock=/a,exit=never", "exit 'never' unknown");
  expect_refused("sock=/a,busy_us=-1", "busy_us '-1' is not a number");
  expect_refused("sock=/a,burst=0", "burst '0' is not a number in 1..1024");
  expect_refused("sock=/a,weight=70000", "weight '70000' is not a number in 1..65536");
  expect_refused("sock=/a,weight_bytes=0", "weight_bytes '0' is not a number");
  expect_refused("sock=/a,tx_delivery=exactly_once", "tx_delivery 'exactly_once' unknown");
}

// What the start would refuse is refused by the parser, so --check-config finds it.
TEST(PortSpecTest, SocketPathsAndTapNamesTheKernelRefusesAreRefused) {
  expect_refused("sock=/" + std::string(107, 'a'), "socket path longer than 107 bytes");
  std::string error;
  EXPECT_TRUE(parse_port_spec("sock=/" + std::string(106, 'a'), error)) << error;
  expect_refused("sock=/a,backend=tap,tap=a-tap-name-too-long", "tap 'a-tap-name-too-long' is longer than 15");
  expect_config_refused(nlohmann::json::parse(R"({"ports": [{"sock": "/a\u0000b"}]})"), "a NUL character");
}

TEST(PortSpecTest, MtuIsATapAndSwitchKeyFrom68To65535) {
  std::string error;
  auto spec = parse_port_spec("sock=/a,backend=tap,mtu=9000", error);
  ASSERT_TRUE(spec) << error;
  EXPECT_EQ(spec->mtu, std::optional<uint32_t>(9000));
  EXPECT_NE(describe(*spec).find("tap mtu 9000"), std::string::npos) << describe(*spec);
  EXPECT_EQ(parse_port_spec("sock=/a,backend=tap,mtu=68", error)->mtu, std::optional<uint32_t>(68));
  EXPECT_EQ(parse_port_spec("sock=/a,backend=tap,mtu=65535", error)->mtu, std::optional<uint32_t>(65535));
  EXPECT_FALSE(parse_port_spec("sock=/a,backend=tap", error)->mtu.has_value());  // the tap's own
  // The JSON config takes it as a number or as text.
  auto ports = parse_config(nlohmann::json::parse(R"({"ports": [{"sock": "/a", "backend": "tap", "mtu": 1400},
                                                               {"sock": "/b", "backend": "tap", "mtu": 4000}]})"),
                            error);
  ASSERT_TRUE(ports) << error;
  EXPECT_EQ((*ports)[0].mtu, std::optional<uint32_t>(1400));
  EXPECT_EQ((*ports)[1].mtu, std::optional<uint32_t>(4000));

  expect_refused("sock=/a,backend=tap,mtu=67", "mtu '67' is not a number in 68..65535");
  expect_refused("sock=/a,backend=tap,mtu=65536", "mtu '65536' is not a number in 68..65535");
  expect_refused("sock=/a,backend=tap,mtu=", "'mtu' needs a value");
  expect_refused("sock=/a,backend=tap,mtu=1500,mtu=9000", "'mtu' given twice");
  expect_refused("sock=/a,mtu=1500", "mtu= is for backend=tap and backend=switch");
  expect_refused("sock=/a,backend=loopback,mtu=1500", "mtu= is for backend=tap and backend=switch");
}

// A switch port's MTU (switch_backend.h), from --port or the JSON config, reaches the
// port the factory makes.
TEST(PortSpecTest, SwitchPortsTakeAnMtu) {
  std::string error;
  auto spec = parse_port_spec("sock=/a,backend=switch,mtu=9000", error);
  ASSERT_TRUE(spec) << error;
  EXPECT_EQ(spec->mtu, std::optional<uint32_t>(9000));
  EXPECT_NE(describe(*spec).find("switch mtu 9000"), std::string::npos) << describe(*spec);
  EXPECT_FALSE(parse_port_spec("sock=/a,backend=switch", error)->mtu.has_value());  // none: no limit
  auto ports = parse_config(nlohmann::json::parse(R"({"ports": [{"sock": "/a", "backend": "switch", "mtu": 1500}]})"),
                            error);
  ASSERT_TRUE(ports) << error;
  EXPECT_EQ((*ports)[0].mtu, std::optional<uint32_t>(1500));
  (*ports)[0].name = "sw0";
  backends::SwitchHub hub;
  auto backend = make_backend((*ports)[0], &hub, error);
  ASSERT_TRUE(backend) << error;
  auto* port = dynamic_cast<backends::SwitchBackend*>(backend.get());
  ASSERT_NE(port, nullptr);
  EXPECT_EQ(port->mtu(), 1500u);
}

}  // namespace
}  // namespace uvhost::serve
