// lab_delegation.cpp - `uvhost lab delegation` (seed 004). Placeholder wiring; the lab lands next.
#include "commands.h"

namespace uvhost::cli {
void add_lab_delegation(CLI::App& lab) {
  lab.add_subcommand("delegation", "Seed 004: delegation lock vs spinlocks on a SLAB refill/flush section");
}
}  // namespace uvhost::cli
