#!/usr/bin/env bash
# check_workqueue_model.sh - model-check WorkQueue's park/wake protocol with spin.
#
# Runs an exhaustive safety search (spin -a; gcc pan.c -DSAFETY; ./pan) of
# workqueue_wakeup.pml for a few sizes, and of its deliberately buggy variants:
#   - the correct model must report "errors: 0";
#   - BUG_CHECK_BEFORE_ANNOUNCE and BUG_WAKE_BEFORE_PUBLISH must report a violation,
#     which shows the model and its property can fail.
# Exit status 0 only if all of that holds. Usage: check_workqueue_model.sh [--full]
#   --full  also checks 3 producers x 2 rounds (~27M states, about a minute).
# Environment: SPIN (default: spin), CC (default: gcc).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
model="$here/workqueue_wakeup.pml"
spin_bin="${SPIN:-spin}"
cc_bin="${CC:-gcc}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

sizes=("-DNPROD=2 -DROUNDS=2" "-DNPROD=3 -DROUNDS=1")
if [[ "${1:-}" == "--full" ]]; then sizes+=("-DNPROD=3 -DROUNDS=2"); fi

failures=0

# run_pan <label> <expect: pass|fail> <spin -D flags...>
run_pan() {
  local label="$1" expect="$2"
  shift 2
  cp "$model" "$work/model.pml"
  (cd "$work" && rm -f pan* model.pml.trail && "$spin_bin" "$@" -a model.pml >/dev/null &&
    "$cc_bin" -O2 -DSAFETY -DCOLLAPSE -o pan pan.c)
  local out
  out="$(cd "$work" && ./pan -m200000 -n 2>&1 || true)"
  local errors states
  errors="$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' <<<"$out" | head -n1)"
  states="$(sed -n 's/^ *\([0-9]*\) states, stored.*/\1/p' <<<"$out" | head -n1)"
  local violation
  violation="$(grep -m1 -E 'assertion violated|invalid end state' <<<"$out" || true)"
  if [[ -z "$errors" ]]; then
    echo "FAIL  $label: could not parse pan output"; echo "$out"; failures=$((failures + 1)); return
  fi
  if grep -q "Search not completed" <<<"$out" && [[ "$errors" == 0 ]]; then
    echo "FAIL  $label: search incomplete"; echo "$out"; failures=$((failures + 1)); return
  fi
  if [[ "$expect" == pass && "$errors" == 0 ]]; then
    echo "ok    $label: no lost wake-up, $states states, errors: 0"
  elif [[ "$expect" == fail && "$errors" != 0 ]]; then
    echo "ok    $label: bug caught after $states states: ${violation#pan:1: }"
  else
    echo "FAIL  $label: expected $expect, pan says errors: $errors"; echo "$out"
    failures=$((failures + 1))
  fi
}

for size in "${sizes[@]}"; do
  # shellcheck disable=SC2086  # $size holds several -D flags
  run_pan "correct   [$size]" pass $size
  # shellcheck disable=SC2086
  run_pan "bug: check-before-announce [$size]" fail $size -DBUG_CHECK_BEFORE_ANNOUNCE
  # shellcheck disable=SC2086
  run_pan "bug: wake-before-publish   [$size]" fail $size -DBUG_WAKE_BEFORE_PUBLISH
done

if ((failures > 0)); then
  echo "workqueue model check: $failures unexpected result(s)"
  exit 1
fi
echo "workqueue model check: all expected results"
