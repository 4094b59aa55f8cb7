#!/usr/bin/env bash
# bench_qemu.sh - `uvhost bench --frontend qemu` end to end: a real Linux guest (its
# virtio-net driver, iperf3 and ping) as the bench's traffic source on `uvhost serve`.
#
#   bench_qemu.sh --uvhost PATH [--seconds N]
#
# Contract
# --------
#  - Builds or finds the guest with scripts/build-guest.sh (as qemu_smoke does), then runs
#    `uvhost bench --frontend qemu --guest-dir DIR --workloads stream-tx,rr --sizes 1500
#    --runs 1 --seconds N --json F` and checks invariants of F, never speeds:
#    stream-tx: packets, bytes and Gbit/s > 0; rr: transactions > 0 and
#    0 < p50 <= p99 <= p99.9; each run: a window > 0 s, frontend (QEMU) and backend
#    (uvhost) CPU > 0, and the port's datapath worker thread ("bench.w0") on the backend side.
#  - Then the two-guest side by side: `uvhost bench compare --frontend qemu --a poll=notify
#    --b burst=32 --workloads stream-tx --sizes 1500 --runs 2 --seconds 2 --slice 1` and
#    checks of its JSON: interleave "processes" with frontend "qemu"; per round and side
#    two 1 s windows (slices) in A B B A order (B A A B in the round B went first), each
#    with packets; the windows add up to the side's seconds; QEMU and uvhost CPU (a
#    bench.w worker) on each side.
#  - Needs root (network namespace, tap): exit 77 (skipped) otherwise. Exit 0 on success,
#    1 with the reasons; the JSON and the bench's output are kept in a temp folder on
#    failure.
set -uo pipefail
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
ROOT=$(cd "$HERE/../.." && pwd)
uvhost="" seconds=3
while (($#)); do
  case $1 in
    --uvhost) uvhost=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    *) echo "usage: bench_qemu.sh --uvhost PATH [--seconds N]" >&2; exit 64 ;;
  esac
done
[[ -x $uvhost ]] || { echo "no uvhost binary: $uvhost" >&2; exit 64; }
[[ $(id -u) -eq 0 ]] || { echo "root needed (network namespace, tap): skipped"; exit 77; }
command -v jq >/dev/null || { echo "jq needed"; exit 1; }

line=$("$ROOT/scripts/build-guest.sh" --quiet | tail -n 1) || { echo "FAIL: scripts/build-guest.sh failed"; exit 1; }
eval "$line"
[[ -s ${GUEST_KERNEL:-} ]] || { echo "FAIL: build-guest.sh printed no guest: $line"; exit 1; }

dir=$(mktemp -d /tmp/uvhost-bench-qemu-test.XXXXXX)
json=$dir/bench.json
failed=0
fail() { echo "FAIL: $*"; failed=1; }
check() {  # check DESCRIPTION JQ_BOOLEAN [JSON]: JSON ($json by default) must make JQ_BOOLEAN true
  local v
  v=$(jq -r "$2" "${3:-$json}" 2>&1)
  [[ $v == true ]] || fail "$1 ($2 -> $v)"
}

started=$SECONDS
"$uvhost" bench --frontend qemu --guest-dir "$(dirname "$GUEST_KERNEL")" --workloads stream-tx,rr --sizes 1500 \
  --runs 1 --seconds "$seconds" --json "$json" 2>&1 | tee "$dir/bench.out"
rc=${PIPESTATUS[0]}
echo "# uvhost bench took $((SECONDS - started)) s"
((rc == 0)) || fail "uvhost bench exited $rc"

if [[ -s $json ]]; then
  check "two points: stream-tx and rr" '[.points[].workload] == ["stream-tx", "rr"]'
  check "every point has its run" '[.points[].runs | length] == [1, 1]'
  check "windows > 0 s" 'all(.points[].runs[]; .seconds > 0)'
  check "stream-tx moved packets and bytes" \
    '.points[] | select(.workload == "stream-tx") | all(.runs[]; .packets > 0 and .bytes > 0 and .gbps > 0)'
  check "rr: transactions and ordered percentiles" \
    '.points[] | select(.workload == "rr") | all(.runs[]; .transactions > 0 and .tps > 0 and .p50_us > 0
       and .p50_us <= .p99_us and .p99_us <= .p999_us)'
  check "frontend (QEMU) CPU > 0" 'all(.points[].runs[]; ([.threads[] | select(.side == "frontend") | .cpu_seconds] | add // 0) > 0)'
  check "backend (uvhost) CPU > 0" 'all(.points[].runs[]; ([.threads[] | select(.side == "backend") | .cpu_seconds] | add // 0) > 0)'
  check "a uvhost worker thread on the backend side" \
    'all(.points[].runs[]; any(.threads[]; .side == "backend" and (.name | startswith("bench.w"))))'
  echo "threads: $(jq -c '[.points[] | {workload, threads: [.runs[0].threads[] | "\(.side):\(.name)=\(.cpu_seconds * 1000 | floor)ms"]}]' "$json")"
else
  fail "no JSON written"
fi

cjson=$dir/compare.json
started=$SECONDS
"$uvhost" bench compare --frontend qemu --guest-dir "$(dirname "$GUEST_KERNEL")" --a poll=notify --b burst=32 \
  --workloads stream-tx --sizes 1500 --runs 2 --seconds 2 --slice 1 --json "$cjson" 2>&1 | tee "$dir/compare.out"
rc=${PIPESTATUS[0]}
echo "# uvhost bench compare took $((SECONDS - started)) s"
((rc == 0)) || fail "uvhost bench compare exited $rc"
grep -q 'two Linux guests under QEMU' "$dir/compare.out" || fail "compare did not say how it interleaved"
if [[ -s $cjson ]]; then
  ccheck() { check "compare: $1" "$2" "$cjson"; }
  ccheck "two guests side by side" '.interleave == "processes" and .frontend == "qemu"'
  ccheck "two rounds, the first side alternating" '[.points[0].runs[].a_first] | (length == 2 and .[0] != .[1])'
  ccheck "two windows per side and round, each with packets" \
    'all(.points[0].runs[] | .a, .b; (.slices | length) == 2 and all(.slices[]; .throughput > 0 and .seconds > 0) and .packets > 0)'
  ccheck "the windows add up to the side's seconds" \
    'all(.points[0].runs[] | .a, .b; (([.slices[].seconds] | add) - .seconds | fabs) < 0.01)'
  ccheck "A B B A (B A A B) order" \
    'all(.points[0].runs[]; (if .a_first then [.a, .b] else [.b, .a] end) as [$f, $s]
       | $f.slices[0].start_seconds < $s.slices[0].start_seconds and $s.slices[0].start_seconds < $s.slices[1].start_seconds
         and $s.slices[1].start_seconds < $f.slices[1].start_seconds)'
  ccheck "QEMU and uvhost CPU on each side, a bench.w worker among uvhost's" \
    'all(.points[0].runs[] | .a, .b; ([.threads[] | select(.side == "frontend") | .cpu_seconds] | add // 0) > 0
       and any(.threads[]; .side == "backend" and (.name | startswith("bench.w")) and .cpu_seconds > 0))'
else
  fail "compare: no JSON written"
fi

if ((failed)); then
  echo "FAIL: kept $dir"
  exit 1
fi
rm -rf "$dir"
echo "PASS"
