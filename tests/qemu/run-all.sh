#!/usr/bin/env bash
# run-all.sh - every QEMU end-to-end case (tests/qemu/README.md), one after another.
#
#   tests/qemu/run-all.sh [--uvhost PATH] [CASE...]
#
# PATH defaults to build/release/cli/uvhost; CASE defaults to all of: basic switch
# sockets restart stats offload mq switch-tso switch-mixed switch-mq (qemu_test.sh's
# cases 1-12), backend-restart (backend_restart.sh: the daemon killed and stopped
# under a running guest) and migration.sh's same-daemon and two-daemons (live
# migration). Each case's output is printed as it runs; at the end one line per case
# (PASS / FAIL / SKIP and seconds). Exit 0 when every case passed, 1 otherwise. Under
# TCG on a shared 2-core machine the first seven took about 3 minutes at load average
# 10, 11 at load 15; the three switch-* cases 18-20 s each at load 1-2.
set -uo pipefail
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
ROOT=$(cd "$HERE/../.." && pwd)

uvhost=$ROOT/build/release/cli/uvhost
cases=()
while (($#)); do
  case $1 in
    --uvhost) uvhost=$2; shift 2 ;;
    basic | switch | sockets | restart | stats | smoke | offload | mq | switch-tso | switch-mixed | switch-mq | backend-restart | same-daemon | two-daemons) cases+=("$1"); shift ;;
    *) echo "usage: run-all.sh [--uvhost PATH] [basic|switch|sockets|restart|stats|smoke|offload|mq|switch-tso|switch-mixed|switch-mq|backend-restart|same-daemon|two-daemons]..." >&2; exit 64 ;;
  esac
done
((${#cases[@]})) || cases=(basic switch sockets restart stats offload mq switch-tso switch-mixed switch-mq backend-restart same-daemon two-daemons)
[[ -x $uvhost ]] || { echo "run-all.sh: no uvhost binary at $uvhost (build it, or give --uvhost)" >&2; exit 64; }

summary=() bad=0
for c in "${cases[@]}"; do
  args=()
  case $c in
    switch) args=(--count 1000) ;;
    sockets | restart) args=(--count 500) ;;
    stats) args=(--count 3000 --secs 3) ;;
  esac
  echo "=== qemu $c"
  start=$SECONDS rc=0
  case $c in
    backend-restart) "$HERE/backend_restart.sh" --uvhost "$uvhost" --cases kill,term || rc=$? ;;
    same-daemon | two-daemons) "$HERE/migration.sh" --uvhost "$uvhost" "$c" "${args[@]}" || rc=$? ;;
    *) "$HERE/qemu_test.sh" --uvhost "$uvhost" "$c" "${args[@]}" || rc=$? ;;
  esac
  case $rc in
    0) verdict=PASS ;;
    77) verdict=SKIP ;;
    *) verdict="FAIL (exit $rc)"; bad=1 ;;
  esac
  summary+=("$(printf '%-12s %-14s %4d s' "$c" "$verdict" $((SECONDS - start)))")
done
echo "=== summary"
printf '%s\n' "${summary[@]}"
exit "$bad"
