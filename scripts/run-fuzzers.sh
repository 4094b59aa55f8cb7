#!/usr/bin/env bash
# run-fuzzers.sh - build the fuzz preset and run every libFuzzer target for a bounded
# time each; fails on any crash, sanitizer report, leak, timeout or out-of-memory.
#
# Usage: scripts/run-fuzzers.sh [seconds-per-fuzzer]   (default 60)
# Environment: UVHOST_FUZZ_BUILD_DIR (default build/fuzz), UVHOST_FUZZ_JOBS (default 2:
#              the build's jobs, and how many fuzzers run at once),
#              UVHOST_FUZZ_ARGS (extra libFuzzer flags, e.g. -runs=10000000, or
#              "-jobs=2 -workers=2" for parallel workers, each logging to fuzz-N.log),
#              UVHOST_FUZZ_ONLY (run only the fuzzer of this name).
# Each fuzzer starts from its seed corpus (<layer>/fuzz/corpus/, read-only here) and
# writes new inputs to a scratch corpus under the build dir; crash inputs land in
# <build dir>/fuzz-artifacts/. Each fuzzer runs in <build dir>/fuzz-logs/<name>/, so
# the per-worker logs of -jobs land there, not in the source tree.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
build_dir="${UVHOST_FUZZ_BUILD_DIR:-build/fuzz}"
jobs="${UVHOST_FUZZ_JOBS:-2}"

# name of the target : its seed corpus
fuzzers=(
  "virtio_device_fuzz:virtio/fuzz/corpus"
  "virtio_packed_device_fuzz:virtio/fuzz/corpus-packed"
  "vhost_user_message_fuzz:vhost-user/fuzz/corpus"
  "backends_offload_fuzz:backends/fuzz/corpus"
)
if [[ -n "${UVHOST_FUZZ_ONLY:-}" ]]; then
  selected=()
  for entry in "${fuzzers[@]}"; do
    [[ "${entry%%:*}" == "$UVHOST_FUZZ_ONLY" ]] && selected+=("$entry")
  done
  if ((${#selected[@]} == 0)); then
    echo "run-fuzzers: no fuzzer named '${UVHOST_FUZZ_ONLY}'" >&2
    exit 2
  fi
  fuzzers=("${selected[@]}")
fi

echo "=== fuzz: configure and build (${build_dir})"
cmake --preset fuzz -B "$build_dir" >/dev/null
targets=()
for entry in "${fuzzers[@]}"; do targets+=("${entry%%:*}"); done
ninja -C "$build_dir" -j "$jobs" "${targets[@]}"

artifacts="$(realpath -m "${build_dir}/fuzz-artifacts")"
mkdir -p "$artifacts"
logs_root="$(realpath -m "${build_dir}/fuzz-logs")"  # one folder per fuzzer below

# run_fuzzer NAME SEEDS: one fuzzer for $seconds in its own logs folder; libFuzzer's
# progress lines go to run.log there, its final stats (or on a finding, the report)
# to summary.log. Fails on a finding.
run_fuzzer() {
  local name="$1" seeds binary scratch logs
  seeds="$(realpath "$2")"
  binary="$(realpath "$(find "$build_dir" -type f -name "$name" -perm -u+x | head -n1)")"
  scratch="$(realpath -m "${build_dir}/fuzz-corpus/${name}")"
  logs="${logs_root}/${name}"
  mkdir -p "$scratch" "$logs"
  # -error_exitcode: any crash or sanitizer report; -timeout: one input taking > 10 s
  # counts as a hang; -rss_limit_mb: memory blow-up counts as a failure.
  # shellcheck disable=SC2086
  if (cd "$logs" && ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
      "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -error_exitcode=77 \
      -print_final_stats=1 -artifact_prefix="${artifacts}/${name}-" ${UVHOST_FUZZ_ARGS:-} \
      "$scratch" "$seeds" >run.log 2>&1); then
    grep -E '^(stat::|Done )' "${logs}/run.log" >"${logs}/summary.log" || true
  else
    tail -n 80 "${logs}/run.log" >"${logs}/summary.log" || true
    return 1
  fi
}

# Up to $jobs fuzzers run at once (each is one process on one CPU), so the whole set
# takes ceil(fuzzers / jobs) times $seconds; each fuzzer still gets its full time.
declare -A pid_of=()
for entry in "${fuzzers[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  name="${entry%%:*}"
  echo "=== fuzz: ${name} for ${seconds} s"
  run_fuzzer "$name" "${entry#*:}" &
  pid_of[$name]=$!
done
failed=()
for entry in "${fuzzers[@]}"; do
  name="${entry%%:*}"
  status=0
  wait "${pid_of[$name]}" || status=$?
  echo "--- fuzz: ${name}"
  cat "${logs_root}/${name}/summary.log" 2>/dev/null || true
  ((status == 0)) || failed+=("$name")
done

if ((${#failed[@]})); then
  echo "run-fuzzers: FAILED: ${failed[*]} (inputs in ${artifacts})"
  exit 1
fi
echo "run-fuzzers: every fuzzer finished (at most ${seconds} s each) without a finding"
