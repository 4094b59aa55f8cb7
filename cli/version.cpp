// version.cpp - `uvhost version`: version and the build's configuration.
#include <fmt/format.h>

#include "commands.h"

namespace uvhost::cli {

void add_version_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("version", "Print the version and build configuration");
  cmd->callback([] {
    fmt::print("uvhost {}\n", UVHOST_VERSION);
#ifdef NDEBUG
    const char* checks = "off (release)";
#else
    const char* checks = "on (debug)";
#endif
#if defined(UVHOST_SANITIZER_ADDRESS)
    const char* sanitizer = "address,undefined";
#elif defined(UVHOST_SANITIZER_THREAD)
    const char* sanitizer = "thread";
#else
    const char* sanitizer = "none";
#endif
    fmt::print("compiler: {}\nmisuse checks: {}\nsanitizers: {}\n", __VERSION__, checks, sanitizer);
  });
}

}  // namespace uvhost::cli
