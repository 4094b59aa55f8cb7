// main.cpp - the `uvhost` command: parses the subcommand and runs it.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "commands.h"
#include "uvhost/serve/serve_config.h"

int main(int argc, char** argv) {
  CLI::App app{
      "uvhost: a userspace vhost-user backend for virtio-net, and the lab that measures\n"
      "its synchronization and notification mechanisms."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("uvhost ") + UVHOST_VERSION);
  // Logs go to stderr in every subcommand: stdout carries results only (commands.h).
  spdlog::set_default_logger(spdlog::stderr_color_mt("uvhost"));
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off")
      ->check(CLI::IsMember(
          std::vector<std::string>(std::begin(uvhost::serve::kLogLevels), std::end(uvhost::serve::kLogLevels))));
  app.parse_complete_callback([&] { spdlog::set_level(spdlog::level::from_str(log_level)); });

  uvhost::cli::add_version_command(app);
  uvhost::cli::add_serve_command(app);
  uvhost::cli::add_ctl_command(app);
  uvhost::cli::add_lab_command(app);
  uvhost::cli::add_bench_command(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    // Every subcommand promises 2 for a bad command line; CLI11's own codes are 100 and
    // up (a callback's CLI::RuntimeError carries its code as is).
    if (code >= static_cast<int>(CLI::ExitCodes::IncorrectConstruction)) return uvhost::cli::kExitUsage;
    return code;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return uvhost::cli::kExitFailure;
  }
  return 0;
}
