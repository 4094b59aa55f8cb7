// lab_output.h - what the sync-level `uvhost lab` commands (iommu-lock, workqueue,
// delegation) write besides their tables: `--json FILE` and `--plot FILE`.
//
// Both print one line naming the file on stdout when done; on failure they print
// "uvhost lab NAME: ..." on stderr and throw CLI::RuntimeError(1).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "uvhost/bench/gnuplot.h"

namespace uvhost::cli {

// `json`, indented, into `path`.
void write_lab_json(std::string_view lab, const std::string& path, const nlohmann::json& json);

// `charts` on one page, `columns` per row (bench/gnuplot.h write_bar_charts: .svg or
// PNG by the file's extension), titled "uvhost lab NAME (...)".
void write_lab_plot(std::string_view lab, const std::string& path, const std::vector<bench::BarChart>& charts,
                    int columns);

}  // namespace uvhost::cli
