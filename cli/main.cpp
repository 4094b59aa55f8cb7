// main.cpp - the `uvhost` command: parses the subcommand and runs it.
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "commands.h"
#include "uvhost/serve/backend_program.h"
#include "uvhost/serve/serve_config.h"

namespace {

// QEMU's vhost-user backend-program conventions want `BINARY --socket-path PATH`,
// `BINARY --fd N` and `BINARY --print-capabilities` on the program itself, while our
// daemon is a subcommand. Installed as libexec/uvhost-vhost-user-net, a symlink to this
// binary (one executable, nothing to keep in sync, no shell in between), the name
// selects `uvhost serve`. As the conventions ask, --print-capabilities then ignores
// every other argument.
std::vector<char*> backend_program_argv(int argc, char** argv, bool& print_capabilities) {
  std::vector<char*> args(argv, argv + argc);
  const std::string_view invoked = argc > 0 ? std::string_view(argv[0]) : std::string_view();
  const std::string_view base = invoked.substr(invoked.rfind('/') + 1);
  if (base != uvhost::serve::kBackendProgramName) return args;
  static char serve[] = "serve";
  args.insert(args.begin() + 1, serve);
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--print-capabilities") print_capabilities = true;
  }
  return args;
}

// When the command line names no known subcommand but has a word where one goes:
// "unknown subcommand 'bogus' (version, serve, ctl, lab, bench)". Empty otherwise.
std::string unknown_subcommand(const CLI::App& app) {
  if (!app.get_subcommands().empty()) return {};
  for (const std::string& word : app.remaining()) {
    if (word.empty() || word.front() == '-') continue;
    std::string known;
    for (const CLI::App* sub : app.get_subcommands({})) known += (known.empty() ? "" : ", ") + sub->get_name();
    return "unknown subcommand '" + word + "' (" + known + ")";
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  bool print_capabilities = false;
  std::vector<char*> args = backend_program_argv(argc, argv, print_capabilities);
  if (print_capabilities) {
    std::cout << uvhost::serve::capabilities_json() << std::endl;
    return 0;
  }

  CLI::App app{
      "uvhost: a userspace vhost-user backend for virtio-net, and the lab that measures\n"
      "its synchronization and notification mechanisms."};
  app.require_subcommand(1);
  // Inherited by every subcommand made after this: the global options (--log-level) may
  // come after the subcommand too, and every --help shows each option's default.
  app.fallthrough();
  app.option_defaults()->always_capture_default();
  app.set_version_flag("--version", std::string("uvhost ") + UVHOST_VERSION);
  // Logs go to stderr in every subcommand: stdout carries results only (commands.h).
  spdlog::set_default_logger(spdlog::stderr_color_mt("uvhost"));
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn (or warning), error, critical, off")
      ->check(CLI::IsMember(
          std::vector<std::string>(std::begin(uvhost::serve::kLogLevels), std::end(uvhost::serve::kLogLevels))));
  app.parse_complete_callback([&] { spdlog::set_level(spdlog::level::from_str(log_level)); });

  uvhost::cli::add_version_command(app);
  uvhost::cli::add_serve_command(app);
  uvhost::cli::add_ctl_command(app);
  uvhost::cli::add_lab_command(app);
  uvhost::cli::add_bench_command(app);

  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    if (std::string unknown = unknown_subcommand(app); !unknown.empty()) {
      std::cerr << unknown << "\nRun with --help for more information.\n";
      return uvhost::cli::kExitUsage;
    }
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
