// lab_output.cpp - see lab_output.h.
#include "lab_output.h"

#include <fmt/format.h>

#include <fstream>

#include "commands.h"

namespace uvhost::cli {

void write_lab_json(std::string_view lab, const std::string& path, const nlohmann::json& json) {
  std::ofstream file(path);
  file << json.dump(2) << "\n";
  file.close();
  if (!file) {
    fmt::print(stderr, "uvhost lab {}: cannot write {}\n", lab, path);
    throw CLI::RuntimeError(1);
  }
  fmt::print("\nJSON written to {}\n", path);
}

void write_lab_plot(std::string_view lab, const std::string& path, const std::vector<bench::BarChart>& charts,
                    int columns) {
  std::string error;
  const std::string title = fmt::format("uvhost lab {} (bars: mean, whiskers: 95% CI)", lab);
  if (!bench::write_bar_charts(path, title, charts, columns, error)) {
    fmt::print(stderr, "uvhost lab {}: plot: {}\n", lab, error);
    throw CLI::RuntimeError(1);
  }
  fmt::print("plot written to {}\n", path);
}

}  // namespace uvhost::cli
