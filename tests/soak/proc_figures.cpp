// proc_figures.cpp - /proc/PID figures (proc_figures.h).
#include "proc_figures.h"

#include <filesystem>
#include <fstream>

namespace uvhost::soak {

std::optional<ProcFigures> read_proc_figures(pid_t pid, std::string& error) {
  const std::filesystem::path dir = "/proc/" + std::to_string(pid);
  ProcFigures figures;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir / "fd", ec), end; !ec && it != end; it.increment(ec)) {
    ++figures.fds;
  }
  if (ec) {
    error = (dir / "fd").string() + ": " + ec.message();
    return std::nullopt;
  }
  std::ifstream status(dir / "status");
  bool have_rss = false, have_threads = false;
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("VmRSS:")) have_rss = (figures.rss_kib = std::stol(line.substr(6)), true);
    if (line.starts_with("Threads:")) have_threads = (figures.threads = std::stol(line.substr(8)), true);
  }
  if (!have_rss || !have_threads) {
    error = (dir / "status").string() + ": no VmRSS or Threads line";
    return std::nullopt;
  }
  std::ifstream maps(dir / "maps");
  if (!maps) {
    error = (dir / "maps").string() + ": cannot read";
    return std::nullopt;
  }
  for (std::string line; std::getline(maps, line);) ++figures.maps;
  return figures;
}

}  // namespace uvhost::soak
