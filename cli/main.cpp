// main.cpp - the `uvhost` command: parses the subcommand and runs it.
#include <spdlog/spdlog.h>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "uvhost: a userspace vhost-user backend for virtio-net, and the lab that measures\n"
      "its synchronization and notification mechanisms."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("uvhost ") + UVHOST_VERSION);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.parse_complete_callback([&] { spdlog::set_level(spdlog::level::from_str(log_level)); });

  uvhost::cli::add_version_command(app);
  uvhost::cli::add_serve_command(app);
  CLI::App* ctl = uvhost::cli::add_ctl_command(app);
  uvhost::cli::add_lab_command(app);
  uvhost::cli::add_bench_command(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    // `uvhost ctl` promises scripts 2 for bad arguments; CLI11's own codes are 100 and
    // up (a callback's CLI::RuntimeError carries its code as is).
    if (ctl->parsed() && code >= static_cast<int>(CLI::ExitCodes::IncorrectConstruction)) return 2;
    return code;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
  return 0;
}
