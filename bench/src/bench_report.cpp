// bench_report.cpp - the sweep and its table / JSON / CSV (see bench_report.h).
#include "uvhost/bench/bench_report.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace uvhost::bench {

std::vector<Point> expand_points(const std::vector<Workload>& workloads, const std::vector<uint32_t>& sizes,
                                 const std::vector<uint32_t>& sessions, const std::vector<uint64_t>& rates,
                                 Arrivals arrivals) {
  std::vector<Point> out;
  for (Workload w : workloads) {
    for (uint32_t size : sizes) {
      for (uint32_t s : sessions) {
        if (w != Workload::kRr) {
          out.push_back(Point{w, size, s});
          continue;
        }
        for (uint64_t rate : rates) out.push_back(Point{w, size, s, rate, arrivals});
      }
    }
  }
  return out;
}

std::vector<PointRuns> run_sweep(const Config& config, const std::vector<Point>& points, const RunOptions& options,
                                 int runs, const RunObserver& observer) {
  std::vector<PointRuns> sweep;
  for (const Point& p : points) sweep.push_back(PointRuns{p, {}});
  for (int r = 0; r < runs; ++r) {
    for (size_t i = 0; i < points.size(); ++i) {
      RunEvent event{points[i], i, points.size(), r, runs, options.seconds, nullptr};
      if (observer) observer(event);
      sweep[i].runs.push_back(run_point(config, points[i], options));
      event.result = &sweep[i].runs.back();
      if (observer) observer(event);
    }
  }
  return sweep;
}

double side_cpu_seconds(const RunResult& run, const std::string& side) {
  double sum = 0;
  for (const ThreadCpu& t : run.threads) {
    if (t.side == side) sum += t.cpu_seconds;
  }
  return sum;
}

PointSummary summarize_point(Workload workload, const std::vector<RunResult>& runs) {
  std::vector<double> mpps, gbps, tps, p50, p99, p999, fe, be, norm;
  for (const RunResult& r : runs) {
    mpps.push_back(r.pps() * 1e-6);
    gbps.push_back(r.gbps());
    tps.push_back(r.tps());
    p50.push_back(r.p50_us);
    p99.push_back(r.p99_us);
    p999.push_back(r.p999_us);
    fe.push_back(r.seconds > 0 ? side_cpu_seconds(r, "frontend") / r.seconds : 0);
    be.push_back(r.seconds > 0 ? side_cpu_seconds(r, "backend") / r.seconds : 0);
    norm.push_back(r.normalized(workload));
  }
  return PointSummary{summarize(mpps), summarize(gbps), summarize(tps), summarize(p50), summarize(p99),
                      summarize(p999), summarize(fe), summarize(be), summarize(norm)};
}

namespace {

std::string cell(const Summary& s) { return with_ci(s); }

std::string si_cell(const Summary& s) { return si_with_ci(s); }

// The offered rate of an open-loop rr point ("10 k poisson"), "-" for closed loop.
std::string offered(const Point& point) {
  return point.rate == 0 ? "-" : fmt::format("{} {}", si(static_cast<double>(point.rate)), to_string(point.arrivals));
}

nlohmann::json summary_json(const Summary& s) {
  return {{"n", s.n},         {"mean", s.mean}, {"stddev", s.stddev}, {"ci95_half", s.ci95_half},
          {"min", s.min},     {"max", s.max},   {"median", s.median}};
}

}  // namespace

TextTable sweep_table(const std::vector<PointRuns>& sweep) {
  TextTable table({"workload", "size", "sessions", "offered/s", "Mpps", "Gbit/s", "trans/s", "p50 us", "p99 us", "p99.9 us",
                   "fe cores", "be cores", "per CPU-s"});
  for (const PointRuns& p : sweep) {
    const PointSummary s = summarize_point(p.point.workload, p.runs);
    const bool rr = p.point.workload == Workload::kRr;
    table.add_row({std::string(to_string(p.point.workload)), fmt::format("{}", p.point.size),
                   fmt::format("{}", p.point.sessions), offered(p.point), cell(s.mpps), cell(s.gbps), rr ? si_cell(s.tps) : "-",
                   rr ? cell(s.p50_us) : "-", rr ? cell(s.p99_us) : "-", rr ? cell(s.p999_us) : "-",
                   cell(s.frontend_cores), cell(s.backend_cores), si_cell(s.normalized)});
  }
  return table;
}

nlohmann::json run_to_json(const RunResult& run) {
  nlohmann::json threads = nlohmann::json::array();
  for (const ThreadCpu& t : run.threads) threads.push_back({{"name", t.name}, {"side", t.side}, {"cpu_seconds", t.cpu_seconds}});
  nlohmann::json j = {{"seconds", run.seconds},   {"packets", run.packets}, {"bytes", run.bytes},
                      {"transactions", run.transactions}, {"p50_us", run.p50_us}, {"p99_us", run.p99_us},
                      {"p999_us", run.p999_us},   {"cpu_seconds", run.cpu_seconds}, {"threads", threads},
                      {"pps", run.pps()},         {"gbps", run.gbps()},     {"tps", run.tps()}};
  if (!run.slices.empty()) {
    nlohmann::json slices = nlohmann::json::array();
    for (const SliceResult& s : run.slices) {
      slices.push_back({{"start_seconds", s.start_seconds}, {"seconds", s.seconds}, {"throughput", s.throughput},
                        {"steal_seconds", s.steal_seconds}});
    }
    j["slices"] = std::move(slices);
  }
  return j;
}

nlohmann::json sweep_to_json(const Config& config, const RunOptions& options, const std::vector<PointRuns>& sweep) {
  nlohmann::json points = nlohmann::json::array();
  for (const PointRuns& p : sweep) {
    nlohmann::json runs = nlohmann::json::array();
    for (const RunResult& r : p.runs) {
      nlohmann::json j = run_to_json(r);
      j["normalized"] = r.normalized(p.point.workload);
      runs.push_back(std::move(j));
    }
    const PointSummary s = summarize_point(p.point.workload, p.runs);
    points.push_back({{"workload", std::string(to_string(p.point.workload))},
                      {"size", p.point.size},
                      {"sessions", p.point.sessions},
                      {"offered_rate", p.point.rate},
                      {"arrivals", std::string(to_string(p.point.arrivals))},
                      {"runs", runs},
                      {"summary",
                       {{"mpps", summary_json(s.mpps)},
                        {"gbps", summary_json(s.gbps)},
                        {"tps", summary_json(s.tps)},
                        {"p50_us", summary_json(s.p50_us)},
                        {"p99_us", summary_json(s.p99_us)},
                        {"p999_us", summary_json(s.p999_us)},
                        {"frontend_cores", summary_json(s.frontend_cores)},
                        {"backend_cores", summary_json(s.backend_cores)},
                        {"normalized", summary_json(s.normalized)}}}});
  }
  return {{"config", {{"label", config.label}, {"describe", describe(config)}}},
          {"options",
           {{"seconds", options.seconds},
            {"warmup_seconds", options.warmup_seconds},
            {"queue_pairs", options.queue_pairs},
            {"pin", options.pin},
            {"frontend_cpu", options.frontend_cpu},
            {"backend_cpu", options.backend_cpu}}},
          {"points", points}};
}

void write_csv(std::ostream& out, const Config& config, const std::vector<PointRuns>& sweep) {
  out << "label,config,workload,size,sessions,offered_rate,arrivals,run,seconds,packets,bytes,transactions,pps,gbps,tps,"
         "p50_us,p99_us,p999_us,frontend_cpu_s,backend_cpu_s,cpu_s,normalized\n";
  // The config's text may hold commas: quoted, as CSV does.
  const std::string described = "\"" + describe(config) + "\"";
  for (const PointRuns& p : sweep) {
    for (size_t i = 0; i < p.runs.size(); ++i) {
      const RunResult& r = p.runs[i];
      out << fmt::format("{},{},{},{},{},{},{},{},{:.6f},{},{},{},{:.1f},{:.6f},{:.1f},{:.3f},{:.3f},{:.3f},{:.6f},{:.6f},{:.6f},{:.1f}\n",
                         config.label, described, to_string(p.point.workload), p.point.size, p.point.sessions,
                         p.point.rate, to_string(p.point.arrivals), i,
                         r.seconds, r.packets, r.bytes, r.transactions, r.pps(), r.gbps(), r.tps(), r.p50_us, r.p99_us,
                         r.p999_us, side_cpu_seconds(r, "frontend"), side_cpu_seconds(r, "backend"), r.cpu_seconds,
                         r.normalized(p.point.workload));
    }
  }
}

std::string run_line(const Point& point, const RunResult& run) {
  const double fe = run.seconds > 0 ? side_cpu_seconds(run, "frontend") / run.seconds : 0;
  const double be = run.seconds > 0 ? side_cpu_seconds(run, "backend") / run.seconds : 0;
  if (point.workload == Workload::kRr) {
    return fmt::format("{}: {} trans/s, p50 {:.1f} us, p99 {:.1f} us, cpu fe {:.2f} be {:.2f}", describe(point),
                       si(run.tps()), run.p50_us, run.p99_us, fe, be);
  }
  return fmt::format("{} {} B x{}: {}pps, {:.2f} Gbit/s, cpu fe {:.2f} be {:.2f}", to_string(point.workload),
                     point.size, point.sessions, si(run.pps()), run.gbps(), fe, be);
}

RunObserver stderr_progress() {
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  return [tty](const RunEvent& e) {
    const std::string where = fmt::format("[{}/{} run {}/{}]", e.point_index + 1, e.point_count, e.run + 1, e.runs);
    if (tty) {
      // \r + erase line: the same line is rewritten for the next run.
      if (e.result == nullptr) {
        fmt::print(stderr, "\r\x1b[K{} {} {} B x{}: measuring {:.1f} s...", where, to_string(e.point.workload),
                   e.point.size, e.point.sessions, e.seconds);
      } else {
        fmt::print(stderr, "\r\x1b[K{} {}", where, run_line(e.point, *e.result));
        if (e.point_index + 1 == e.point_count && e.run + 1 == e.runs) fmt::print(stderr, "\n");
      }
      std::fflush(stderr);
    } else if (e.result != nullptr) {
      fmt::print(stderr, "{} {}\n", where, run_line(e.point, *e.result));
    }
  };
}

namespace {

// The retry loop both runners share: `what` names the run in the message.
template <typename Run>
auto with_retries(const Run& run, int retries, size_t* failures, const std::string& what) {
  for (int attempt = 0;; ++attempt) {
    try {
      return run();
    } catch (const std::exception& e) {
      if (failures) ++*failures;
      if (attempt >= retries) throw;
      std::fprintf(stderr, "uvhost bench: a run of %s failed and is repeated (%d of %d): %s\n", what.c_str(),
                   attempt + 1, retries, e.what());
    }
  }
}

}  // namespace

PointRunFn retrying(PointRunFn runner, int retries, std::shared_ptr<size_t> failures) {
  return [runner = std::move(runner), retries, failures](const Config& config, const Point& point) {
    return with_retries([&] { return runner(config, point); }, retries, failures.get(), describe(config));
  };
}

PairRunFn retrying_pairs(PairRunFn runner, int retries, std::shared_ptr<size_t> failures) {
  return [runner = std::move(runner), retries, failures](const Config& a, const Config& b, bool a_first,
                                                         const Point& point) {
    return with_retries([&] { return runner(a, b, a_first, point); }, retries, failures.get(),
                        describe(a) + " with " + describe(b) + " in slices");
  };
}

}  // namespace uvhost::bench
