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

# first_run_section output|verdict NAME LOG: from a ctest LastTest.log, what test NAME
# printed, or ctest's lines after it (time, "Test Failed." and the reason, end time).
first_run_section() {
  awk -v part="$1" -v t="$2" '$0 ~ ("Testing: " t "$") { on = 1; next }
      on && /^<end of output>/ { if (part == "output") exit; on = 0; verdict = 1; next }
      on && part == "output" { print }
      verdict && !/^-+$/ { print "[ctest] " $0 }
      verdict && / end time: / { exit }' "$3"
}

jobs=$(nproc)
failed=()
# The failing tests' names and the tail of their output are printed again at the very
# end, after the fuzzers' long output, so a CI log that keeps only its last lines
# still says what failed and why.
failure_report=""
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
  # Its console output is kept too: only there does ctest say why a test failed
  # ("(Failed)", "(Timeout)", "(SEGFAULT)").
  if ! ctest --preset "$preset" -j "$jobs" --timeout 600 "${exclude[@]}" | tee "build/${preset}/ctest.log"; then
    failed+=("$preset")
    list="build/${preset}/Testing/Temporary/LastTestsFailed.log"
    names="$(cut -d: -f2- "$list" 2>/dev/null | tr '\n' ' ' || true)"
    failure_report+="=== ${preset}: failed: ${names}"$'\n'
    # ctest rewrites LastTest.log on every run, the rerun below included: keep the first
    # run's copy, whose output and verdict the report quotes.
    first_log="build/${preset}/first-run.log"
    cp "build/${preset}/Testing/Temporary/LastTest.log" "$first_log" 2>/dev/null || : >"$first_log"
    # Run each failed test once more, alone, to tell a flaky failure from a steady
    # one; the preset stays failed either way.
    if ctest --preset "$preset" --rerun-failed --output-on-failure --timeout 600 \
        >"build/${preset}/rerun-failed.log" 2>&1; then
      failure_report+="    (each passed when run again alone: flaky under load)"$'\n'
    else
      failure_report+="    (failed again when run alone)"$'\n'
    fi
    # The first run's own output of each failed test (last lines), then ctest's verdict
    # on it: its time (LastTest.log) and why it failed (the console: Failed, Timeout).
    for name in $names; do
      failure_report+="--- ${name} (first run):"$'\n'
      failure_report+="$(first_run_section output "$name" "$first_log" | tail -n 40 || true)"$'\n'
      failure_report+="$(first_run_section verdict "$name" "$first_log" || true)"$'\n'
      failure_report+="$(grep -E "^[[:space:]]*[0-9]+ - ${name} \\(" "build/${preset}/ctest.log" | sed 's/^[[:space:]]*/[ctest] /' || true)"$'\n'
    done
    failure_report+="--- run again alone:"$'\n'
    failure_report+="$(tail -n 30 "build/${preset}/rerun-failed.log" || true)"$'\n'
  fi
done

if ((${#failed[@]})); then
  printf '%s' "$failure_report"
  echo "run-tests: FAILED under: ${failed[*]}"
  exit 1
fi
echo "run-tests: all presets passed (${presets[*]})"
