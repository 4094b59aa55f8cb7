#!/usr/bin/env bash
# run-main.sh - set up, build (release) and run uvhost's main job.
#
# Until the datapath exists, the main job is seed 004's experiment:
# `uvhost lab delegation`. Extra arguments go to that command.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release
exec ./build/release/cli/uvhost lab delegation "$@"
