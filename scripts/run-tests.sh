#!/usr/bin/env bash
# run-tests.sh - set up, build and run every test of uvhost.
#
# Builds and tests under the release preset, then ASan+UBSan and TSan, each with
# warnings as errors, then runs every libFuzzer target for a bounded time
# (UVHOST_FUZZ_SECONDS, default 60 s each) and fails on any finding.
# Usage: scripts/run-tests.sh [preset ...]   (default: release asan tsan fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

presets=("$@")
if ((${#presets[@]} == 0)); then presets=(release asan tsan fuzz); fi

jobs=$(nproc)
failed=()
for preset in "${presets[@]}"; do
  if [[ "$preset" == fuzz ]]; then
    ./scripts/run-fuzzers.sh "${UVHOST_FUZZ_SECONDS:-60}" || failed+=(fuzz)
    continue
  fi
  echo "=== ${preset}: configure and build"
  cmake --preset "$preset" -DUVHOST_WERROR=ON >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  echo "=== ${preset}: test"
  # The interop tests (label "interop": real DPDK testpmd as the peer) and the QEMU
  # guest's smoke (label "qemu") run in the release build only; under the sanitizers
  # the same code runs in the unit tests.
  exclude=()
  if [[ "$preset" != release ]]; then exclude=(-LE 'interop|qemu'); fi
  if ! ctest --preset "$preset" -j "$jobs" --timeout 600 "${exclude[@]}"; then
    failed+=("$preset")
  fi
done

if ((${#failed[@]})); then
  echo "run-tests: FAILED under: ${failed[*]}"
  exit 1
fi
echo "run-tests: all presets passed (${presets[*]})"
