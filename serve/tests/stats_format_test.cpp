// stats_format_test.cpp - the "list" and "stats" replies (control_server.h's schema)
// as text tables and as Prometheus text: the values land in the right rows and columns,
// rates are differences over time, label values are escaped, missing or mistyped
// fields print "-" (tables) or no sample (Prometheus), nothing throws.
#include "uvhost/serve/stats_format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace uvhost::serve {
namespace {

using nlohmann::json;

json sample_stats() {
  return json::parse(R"({
    "ok": true, "uptime_s": 12.5,
    "ports": [{
      "name": "p0", "backend": "loopback", "connected": true, "connections": 1, "protocol_errors": 0,
      "memory": "rcu", "backend_stats": {"frames": 7, "tap": {"up": true, "name": "tap0"}},
      "features": {"offered": ["CSUM"], "negotiated": ["MRG_RXBUF", "VERSION_1"], "guest_mtu": 1500},
      "queues": [
        {"index": 0, "direction": "tx", "pair": 0, "worker": "p0.w0", "started": true, "enabled": true,
         "broken": false, "poll": {"mode": "notify"}, "packets": 90, "bytes": 5760, "dropped": 10,
         "kicks": 0, "calls": 4, "calls_suppressed": 86, "polls": 0, "poll_ns": 0},
        {"index": 1, "direction": "rx", "pair": 0, "worker": "p0.w0", "started": true, "enabled": true,
         "broken": false, "poll": {"mode": "busy", "busy_us": 50, "exit": "accurate"},
         "packets": 100, "bytes": 6400, "dropped": 0, "kicks": 3, "calls": 2, "calls_suppressed": 98,
         "polls": 5, "poll_ns": 260000,
         "poll_exits": {"work": 3, "own_kick": 0, "other_queue": 0, "any_work": 0, "timeout": 2},
         "weight_yields": 0}
      ]
    }],
    "process": {"cpu_seconds": 1.25, "resident_bytes": 4096000, "virtual_bytes": 8192000, "open_fds": 12,
                "max_fds": 1024, "start_time_seconds": 1700000000.5},
    "workers": [{"name": "p0.w0", "cpu_ns": 123456789, "items_run": 1000, "wakeups": 10, "parks": 10,
                 "enqueue": "lockless", "queues": ["p0/0", "p0/1"]}]
  })");
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// The first line whose first words are `start` (e.g. {"p0", "1"} for queue 1 of p0).
std::vector<std::string> row(const std::string& table, const std::vector<std::string>& start) {
  for (const auto& line : lines_of(table)) {
    const auto words = words_of(line);
    if (words.size() >= start.size() && std::equal(start.begin(), start.end(), words.begin())) return words;
  }
  return {};
}

bool has_line(const std::string& text, const std::string& wanted) {
  const auto lines = lines_of(text);
  return std::find(lines.begin(), lines.end(), wanted) != lines.end();
}

// ------------------------------------------------------------------ tables

TEST(StatsTable, OneRowPerQueueAndPerWorkerWithTheirValues) {
  const std::string table = format_stats_table(sample_stats());
  SCOPED_TRACE(table);
  EXPECT_TRUE(has_line(table, "uptime 12.5 s"));

  // port queue dir state worker poll packets bytes dropped kicks calls suppressed polls poll-ms exits... yields
  const auto tx = row(table, {"p0", "1"});
  ASSERT_EQ(tx.size(), 20u);
  EXPECT_EQ(tx[2], "rx");  // vring 1: from the guest
  EXPECT_EQ(tx[3], "running");
  EXPECT_EQ(tx[4], "p0.w0");
  EXPECT_EQ(tx[5], "busy/50us/accurate");
  EXPECT_EQ(std::vector<std::string>(tx.begin() + 6, tx.begin() + 14),
            (std::vector<std::string>{"100", "6400", "0", "3", "2", "98", "5", "0.3"}));
  EXPECT_EQ(std::vector<std::string>(tx.begin() + 14, tx.end()),
            (std::vector<std::string>{"w3", "k0", "o0", "a0", "t2", "0"}));

  const auto rx = row(table, {"p0", "0"});
  ASSERT_EQ(rx.size(), 16u);
  EXPECT_EQ(rx[5], "notify");  // busy_us and exit do not apply
  EXPECT_EQ(rx[8], "10");
  EXPECT_EQ(rx[14], "-");  // no poll_exits
  EXPECT_EQ(rx[15], "-");  // no weight_yields

  EXPECT_EQ(row(table, {"p0.w0"}),
            (std::vector<std::string>{"p0.w0", "0.123", "1000", "10", "10", "lockless", "p0/0,p0/1"}));
  EXPECT_EQ(row(table, {"p0", "loopback"}),
            (std::vector<std::string>{"p0", "loopback", "yes", "1", "0", "rcu"}));
  EXPECT_TRUE(has_line(table, "p0 backend: frames=7 tap.name=tap0 tap.up=true")) << table;
}

TEST(StatsTable, ColumnsAreAlignedAndNumbersRightAligned) {
  json stats = sample_stats();
  stats["ports"][0]["queues"][0]["packets"] = 123456789;
  const auto lines = lines_of(format_stats_table(stats));
  const auto header = std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return l.rfind("port  queue", 0) == 0; });
  ASSERT_NE(header, lines.end());
  const size_t packets_end = header->find("packets") + std::string("packets").size();
  // The widest cell sets the width; every row's number ends where the others' do.
  const auto rx = *(header + 1);
  const auto tx = *(header + 2);
  EXPECT_EQ(rx.find("123456789") + 9, tx.find(" 100 ") + 4) << rx << "\n" << tx;
  EXPECT_LE(packets_end, rx.find("123456789") + 9);
  for (const auto& line : lines) EXPECT_TRUE(line.empty() || line.back() != ' ') << "trailing blank: '" << line << "'";
}

TEST(StatsTable, MissingAndMistypedFieldsPrintADash) {
  const json stats = json::parse(R"({
    "ports": [{"name": "p1", "queues": [{"index": 3, "packets": "many", "bytes": -5, "poll": {"busy_us": 5}}]},
              {"queues": [{}]}, "not an object", {"queues": "not an array"}],
    "workers": [{}, 7]
  })");
  std::string table;
  ASSERT_NO_THROW(table = format_stats_table(stats));
  SCOPED_TRACE(table);
  const auto p1 = row(table, {"p1", "3"});
  ASSERT_EQ(p1.size(), 16u);
  EXPECT_EQ(p1[5], "-/5us");  // the mode missing, the budget there
  for (size_t column : {2u, 3u, 4u, 6u, 7u, 8u, 13u, 14u}) EXPECT_EQ(p1[column], "-") << column;
  EXPECT_EQ(row(table, {"-", "-", "-", "-", "-", "-", "-"}).size(), 16u);  // the nameless port's empty queue
  EXPECT_FALSE(has_line(table, "uptime"));

  for (const json& odd : {json(), json::array(), json("x"), json::object()}) {
    EXPECT_NO_THROW((void)format_stats_table(odd));
    EXPECT_NO_THROW((void)format_stats_delta_table(odd, odd, 1.0));
    EXPECT_NO_THROW((void)format_prometheus(odd));
    EXPECT_NO_THROW((void)format_ports_table(odd));
  }
}

TEST(StatsTable, QueueStateShowsBrokenStoppedDisabled) {
  json stats = sample_stats();
  auto& queues = stats["ports"][0]["queues"];
  queues[0]["broken"] = true;
  queues[1]["started"] = false;
  const std::string table = format_stats_table(stats);
  EXPECT_EQ(row(table, {"p0", "0"})[3], "BROKEN");
  EXPECT_EQ(row(table, {"p0", "1"})[3], "stopped");
  queues[1]["started"] = true;
  queues[1]["enabled"] = false;
  EXPECT_EQ(row(format_stats_table(stats), {"p0", "1"})[3], "disabled");
}

TEST(StatsDeltaTable, RatesAreDifferencesOverTheInterval) {
  const json before = sample_stats();
  json after = sample_stats();
  auto& tx = after["ports"][0]["queues"][1];
  tx["packets"] = 100 + 2000;         // 1000 pps over 2 s
  tx["bytes"] = 6400 + 2'500'000;     // 1.25 MB/s = 10 Mbit/s
  tx["poll_ns"] = 260000 + 500'000'000;  // 0.25 s of each second: 25 %
  tx["kicks"] = 3 + 20;
  after["workers"][0]["cpu_ns"] = 123456789 + 1'000'000'000;  // 50 % of a CPU
  after["workers"][0]["wakeups"] = 10 + 6;
  after["ports"][0]["queues"][0]["packets"] = 10;  // went backwards: a new daemon

  const std::string table = format_stats_delta_table(before, after, 2.0);
  SCOPED_TRACE(table);
  EXPECT_TRUE(has_line(table, "rates over 2.00 s"));
  // port queue dir state worker poll pps Mbit/s drops/s kicks/s calls/s polls/s poll%
  EXPECT_EQ(row(table, {"p0", "1"}), (std::vector<std::string>{"p0", "1", "rx", "running", "p0.w0",
                                                               "busy/50us/accurate", "1000", "10.00", "0", "10", "0",
                                                               "0", "25.0"}));
  EXPECT_EQ(row(table, {"p0", "0"})[6], "-");
  EXPECT_EQ(row(table, {"p0.w0"}), (std::vector<std::string>{"p0.w0", "50.0", "0", "3", "0", "lockless"}));

  // A queue or worker the previous reply did not have, and a zero interval: dashes.
  json fresh = after;
  fresh["ports"][0]["queues"][1]["index"] = 5;
  fresh["workers"][0]["name"] = "p0.w9";
  const std::string unmatched = format_stats_delta_table(before, fresh, 2.0);
  EXPECT_EQ(row(unmatched, {"p0", "5"})[6], "-");
  EXPECT_EQ(row(unmatched, {"p0.w9"})[1], "-");
  EXPECT_EQ(row(format_stats_delta_table(before, after, 0.0), {"p0", "1"})[6], "-");
}

TEST(PortsTable, OneRowPerPort) {
  const json list = json::parse(R"({"ok": true, "ports": [
    {"name": "p0", "socket": "/run/a.sock", "client": false, "backend": "loopback", "queue_pairs": 1,
     "workers": "device", "connected": true},
    {"name": "p1", "socket": "/run/b.sock", "client": true}]})");
  const std::string table = format_ports_table(list);
  SCOPED_TRACE(table);
  EXPECT_EQ(words_of(lines_of(table)[0]),
            (std::vector<std::string>{"port", "socket", "mode", "backend", "pairs", "workers", "connected", "mtu"}));
  EXPECT_EQ(row(table, {"p0"}),
            (std::vector<std::string>{"p0", "/run/a.sock", "server", "loopback", "1", "device", "yes", "-"}));
  EXPECT_EQ(row(table, {"p1"}), (std::vector<std::string>{"p1", "/run/b.sock", "client", "-", "-", "-", "-", "-"}));
}

TEST(PortsTable, NegotiatedFeaturesByNameUnderTheTable) {
  const json list = json::parse(R"({"ok": true, "ports": [
    {"name": "p0", "socket": "/a", "client": false, "backend": "tap", "queue_pairs": 1, "workers": "device",
     "connected": true, "features": {"offered": ["CSUM", "GUEST_CSUM"], "negotiated": ["CSUM", "HOST_TSO4"], "guest_mtu": 1500}},
    {"name": "p1", "socket": "/b", "client": false, "backend": "sink", "queue_pairs": 1, "workers": "device",
     "connected": false, "features": {"offered": ["CSUM"], "negotiated": []}},
    {"name": "p2", "socket": "/c", "features": {"negotiated": [7, "odd"]}}]})");
  const std::string table = format_ports_table(list);
  SCOPED_TRACE(table);
  EXPECT_NE(table.find("negotiated by p0: CSUM HOST_TSO4\n"), std::string::npos);
  EXPECT_EQ(row(table, {"p0"}).back(), "1500");  // the guest's MTU
  EXPECT_EQ(row(table, {"p1"}).back(), "-");     // none set
  EXPECT_EQ(table.find("negotiated by p1"), std::string::npos);  // nothing negotiated: no line
  EXPECT_NE(table.find("negotiated by p2: odd\n"), std::string::npos);  // non-strings skipped
  EXPECT_EQ(row(table, {"p0"})[3], "tap");
}

// ------------------------------------------------------------------ Prometheus

TEST(Prometheus, FamiliesWithHelpTypeAndLabelledSamples) {
  const std::string text = format_prometheus(sample_stats());
  SCOPED_TRACE(text);
  const std::string rx = "port=\"p0\",pair=\"0\",queue=\"1\",direction=\"rx\"";  // from the guest: vring 1
  const std::string tx = "port=\"p0\",pair=\"0\",queue=\"0\",direction=\"tx\"";  // to the guest: vring 0
  EXPECT_TRUE(has_line(text, "# HELP uvhost_queue_packets_total Packets the queue carried."));
  EXPECT_TRUE(has_line(text, "# TYPE uvhost_queue_packets_total counter"));
  EXPECT_TRUE(has_line(text, "uvhost_queue_packets_total{" + rx + "} 100"));
  EXPECT_TRUE(has_line(text, "uvhost_queue_packets_total{" + tx + "} 90"));
  EXPECT_TRUE(has_line(text, "uvhost_queue_bytes_total{" + rx + "} 6400"));
  EXPECT_TRUE(has_line(text, "uvhost_queue_calls_suppressed_total{" + rx + "} 98"));
  EXPECT_TRUE(has_line(text, "uvhost_queue_poll_seconds_total{" + rx + "} 0.00026"));
  EXPECT_TRUE(has_line(text, "uvhost_queue_poll_exits_total{" + rx + ",reason=\"timeout\"} 2"));
  EXPECT_TRUE(has_line(text, "uvhost_queue_busy_poll_seconds{" + rx + "} 5e-05"));
  EXPECT_TRUE(has_line(text, "uvhost_queue_info{" + rx + ",worker=\"p0.w0\",poll_mode=\"busy\",poll_exit=\"accurate\"} 1"));
  EXPECT_TRUE(has_line(text, "uvhost_queue_broken{" + rx + "} 0"));
  EXPECT_TRUE(has_line(text, "uvhost_worker_cpu_seconds_total{worker=\"p0.w0\"} 0.123456789"));
  EXPECT_TRUE(has_line(text, "uvhost_worker_items_run_total{worker=\"p0.w0\"} 1000"));
  EXPECT_TRUE(has_line(text, "uvhost_port_connected{port=\"p0\"} 1"));
  EXPECT_TRUE(has_line(text, "uvhost_port_info{port=\"p0\",backend=\"loopback\",memory=\"rcu\"} 1"));
  EXPECT_TRUE(has_line(text, "uvhost_port_negotiated_feature_info{port=\"p0\",feature=\"MRG_RXBUF\"} 1"));
  EXPECT_TRUE(has_line(text, "uvhost_port_negotiated_feature_info{port=\"p0\",feature=\"VERSION_1\"} 1"));
  EXPECT_TRUE(has_line(text, "uvhost_port_guest_mtu_bytes{port=\"p0\"} 1500"));
  EXPECT_TRUE(has_line(text, "uvhost_port_backend_events_total{port=\"p0\",stat=\"frames\"} 7"));
  EXPECT_TRUE(has_line(text, "uvhost_port_backend_state{port=\"p0\",stat=\"tap.up\"} 1"));
  EXPECT_TRUE(has_line(text, "uvhost_uptime_seconds 12.5"));
  EXPECT_TRUE(has_line(text, "process_cpu_seconds_total 1.25"));
  EXPECT_TRUE(has_line(text, "process_resident_memory_bytes 4096000"));
  EXPECT_TRUE(has_line(text, "process_open_fds 12"));
  EXPECT_TRUE(has_line(text, "process_max_fds 1024"));
  EXPECT_TRUE(has_line(text, "process_start_time_seconds 1700000000.5"));
  EXPECT_EQ(text.find("tap0"), std::string::npos);  // a string is not a sample

  // Each family once, its samples right after its header; counters end in _total.
  std::vector<std::string> families;
  std::string current;
  for (const auto& line : lines_of(text)) {
    ASSERT_FALSE(line.empty());
    const auto words = words_of(line);
    if (words[0] == "#") {
      ASSERT_GE(words.size(), 4u);
      if (words[1] == "HELP") {
        EXPECT_EQ(std::find(families.begin(), families.end(), words[2]), families.end()) << words[2] << " twice";
        families.push_back(current = words[2]);
      } else {
        ASSERT_EQ(words[1], "TYPE");
        EXPECT_EQ(words[2], current);
        if (words[3] == "counter") {
          EXPECT_TRUE(current.ends_with("_total")) << current;
        }
      }
      continue;
    }
    EXPECT_EQ(line.substr(0, line.find_first_of("{ ")), current) << line;
  }
  EXPECT_GE(families.size(), 20u);
}

// backend_stats leaves go to typed families by kind: bytes apart from other counters,
// sizes, levels and yes/no states apart from both; strings are not samples.
TEST(Prometheus, BackendStatsAreSplitIntoTypedFamilies) {
  json stats = sample_stats();
  stats["ports"][0]["backend_stats"] = json::parse(R"({"name": "tap0", "mtu": 1500, "queues": 2, "gone": false,
      "tx": {"sent": 5, "bytes": 320, "full": 1}, "generated_bytes": 64, "rate_pps": 1000, "frame_size": 60,
      "offload_invalid": {"bad_csum": 3}})");
  const std::string text = format_prometheus(stats);
  SCOPED_TRACE(text);
  EXPECT_TRUE(has_line(text, "# TYPE uvhost_port_backend_bytes_total counter"));
  EXPECT_TRUE(has_line(text, "uvhost_port_backend_bytes_total{port=\"p0\",stat=\"tx.bytes\"} 320"));
  EXPECT_TRUE(has_line(text, "uvhost_port_backend_bytes_total{port=\"p0\",stat=\"generated_bytes\"} 64"));
  EXPECT_TRUE(has_line(text, "# TYPE uvhost_port_backend_events_total counter"));
  EXPECT_TRUE(has_line(text, "uvhost_port_backend_events_total{port=\"p0\",stat=\"tx.sent\"} 5"));
  EXPECT_TRUE(has_line(text, "uvhost_port_backend_events_total{port=\"p0\",stat=\"tx.full\"} 1"));
  EXPECT_TRUE(has_line(text, "uvhost_port_backend_events_total{port=\"p0\",stat=\"offload_invalid.bad_csum\"} 3"));
  EXPECT_TRUE(has_line(text, "# TYPE uvhost_port_backend_size_bytes gauge"));
  EXPECT_TRUE(has_line(text, "uvhost_port_backend_size_bytes{port=\"p0\",stat=\"mtu\"} 1500"));
  EXPECT_TRUE(has_line(text, "uvhost_port_backend_size_bytes{port=\"p0\",stat=\"frame_size\"} 60"));
  EXPECT_TRUE(has_line(text, "# TYPE uvhost_port_backend_level gauge"));
  EXPECT_TRUE(has_line(text, "uvhost_port_backend_level{port=\"p0\",stat=\"queues\"} 2"));
  EXPECT_TRUE(has_line(text, "uvhost_port_backend_level{port=\"p0\",stat=\"rate_pps\"} 1000"));
  EXPECT_TRUE(has_line(text, "# TYPE uvhost_port_backend_state gauge"));
  EXPECT_TRUE(has_line(text, "uvhost_port_backend_state{port=\"p0\",stat=\"gone\"} 0"));
  EXPECT_EQ(text.find("tap0"), std::string::npos);
  EXPECT_EQ(text.find("untyped"), std::string::npos);
  EXPECT_EQ(text.find("uvhost_port_backend_stat{"), std::string::npos);
}

// Every family is typed; names follow the units rule (no micro/milli units; sizes in
// bytes, times in seconds) and counters end in _total while nothing else does.
TEST(Prometheus, NamesFollowTheConventions) {
  const std::string text = format_prometheus(sample_stats());
  std::string family;
  for (const auto& line : lines_of(text)) {
    const auto words = words_of(line);
    if (words.size() >= 4 && words[0] == "#" && words[1] == "TYPE") {
      family = words[2];
      const std::string& type = words[3];
      EXPECT_TRUE(type == "counter" || type == "gauge") << line;
      EXPECT_EQ(type == "counter", family.ends_with("_total")) << line;
      for (const char* unit : {"micro", "milli", "nano", "_ms", "_us", "_ns", "kilo", "mega"})
        EXPECT_EQ(family.find(unit), std::string::npos) << line;
    }
  }
  EXPECT_FALSE(family.empty());
}

TEST(Prometheus, LabelValuesAreEscaped) {
  json stats = sample_stats();
  stats["ports"][0]["name"] = "a\"b\\c\nd";
  const std::string text = format_prometheus(stats);
  EXPECT_TRUE(has_line(text, "uvhost_port_connected{port=\"a\\\"b\\\\c\\nd\"} 1")) << text;
  EXPECT_TRUE(has_line(text, "uvhost_queue_kicks_total{port=\"a\\\"b\\\\c\\nd\",pair=\"0\",queue=\"1\",direction=\"rx\"} 3"))
      << text;
}

TEST(Prometheus, MissingFieldsAreLeftOutNotZero) {
  json stats = sample_stats();
  auto& tx = stats["ports"][0]["queues"][1];
  tx.erase("kicks");
  tx["packets"] = "lots";
  tx.erase("direction");
  stats.erase("uptime_s");
  stats.erase("workers");
  const std::string text = format_prometheus(stats);
  SCOPED_TRACE(text);
  EXPECT_EQ(text.find("uvhost_queue_kicks_total{port=\"p0\",pair=\"0\",queue=\"1\""), std::string::npos);
  EXPECT_EQ(text.find("uvhost_queue_packets_total{port=\"p0\",pair=\"0\",queue=\"1\""), std::string::npos);
  EXPECT_TRUE(has_line(text, "uvhost_queue_bytes_total{port=\"p0\",pair=\"0\",queue=\"1\"} 6400"));  // no direction label
  EXPECT_EQ(text.find("uvhost_uptime_seconds"), std::string::npos);
  EXPECT_EQ(text.find("uvhost_worker_"), std::string::npos);  // no empty family headers
}

}  // namespace
}  // namespace uvhost::serve
