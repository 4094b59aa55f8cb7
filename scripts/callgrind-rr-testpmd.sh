#!/usr/bin/env bash
# callgrind-rr-testpmd.sh - instructions per request/response transaction in DPDK's
# vhost library, the counterpart of callgrind-rr.sh for the backend we compare with:
# testpmd's vhost PMD in macswap mode under valgrind --tool=callgrind while
# `uvhost bench` drives rr through it.
#
# Debian's testpmd and PMDs carry no symbols, so only the vhost library's exported
# burst calls are collected: rte_vhost_dequeue_burst (the request) and
# rte_vhost_enqueue_burst (the reply). The PMD's wrappers around them, the mbuf frees
# and testpmd's forwarding loop are not counted. A dequeue that finds nothing is
# counted too; a second, almost idle run (open loop, 1000 transactions/s) measures
# what such a call costs, and the closed-loop figure is given with and without them.
# Usage: scripts/callgrind-rr-testpmd.sh [uvhost-binary] [size]   (default build/release/cli/uvhost, 64)
set -euo pipefail
cd "$(dirname "$0")/.."

uvhost="$(realpath "${1:-build/release/cli/uvhost}")"
size="${2:-64}"
tmp="$(mktemp -d)"
vpid=""
cleanup() {
  [[ -n "$vpid" ]] && kill -INT "$vpid" 2>/dev/null && wait "$vpid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# run_one NAME [bench args...]: testpmd under callgrind, one bench run through it;
# prints "transactions dequeue_instructions dequeue_calls enqueue_instructions".
run_one() {
  local name="$1"
  shift
  local dir="$tmp/$name"
  mkdir -p "$dir"
  valgrind --tool=callgrind --fair-sched=yes --callgrind-out-file="$dir/callgrind.out" \
    --toggle-collect=rte_vhost_dequeue_burst --toggle-collect=rte_vhost_enqueue_burst \
    dpdk-testpmd --no-huge -m 512 --no-pci --lcores '0@(0-1),1@(0-1)' --file-prefix "uvhost-cg-$$-$name" \
    --vdev "net_vhost0,iface=$dir/rr.sock,queues=1" -- --total-num-mbufs=16384 --stats-period 1 \
    --forward-mode=macswap --rxq=1 --txq=1 -a >"$dir/testpmd.log" 2>&1 &
  vpid=$!
  for _ in $(seq 180); do
    [[ -S "$dir/rr.sock" ]] && break
    sleep 1
  done
  [[ -S "$dir/rr.sock" ]] || { tail -n 20 "$dir/testpmd.log" >&2; echo "callgrind-rr-testpmd: testpmd did not start" >&2; exit 1; }
  sleep 3  # the forwarding lcore is up
  "$uvhost" bench --socket "$dir/rr.sock" --backend-pid "$vpid" --workloads rr --sizes "$size" \
    --runs 1 --seconds 3 --warmup 0.5 "$@" >"$dir/bench.log"
  kill -INT "$vpid"
  wait "$vpid" || true
  vpid=""
  python3 - "$dir" <<'EOF'
import re, sys
d = sys.argv[1]
# Transactions: the packets testpmd forwarded (one request in, one reply out each).
log = open(f"{d}/testpmd.log").read()
forwarded = int(re.search(r"Forward statistics for port 0.*?RX-packets:\s+(\d+)", log, re.S).group(1))
# Per function: inclusive instructions of its calls from outside, and how many calls.
names, calls, cost, current = {}, {}, {}, None
pending = False
for line in open(f"{d}/callgrind.out"):
    m = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?", line)
    if m:
        kind, ident, name = m.groups()
        if name:
            names[ident] = name.strip()
        if kind == "cfn":
            current = ident
        continue
    m = re.match(r"calls=(\d+)", line)
    if m and current:
        calls[current] = calls.get(current, 0) + int(m.group(1))
        pending = True
        continue
    if pending:  # the line after calls=: position and inclusive cost of those calls
        cost[current] = cost.get(current, 0) + int(line.split()[1])
        pending = False
by_name = {names[i]: (calls.get(i, 0), cost.get(i, 0)) for i in calls}
dq_calls, dq_cost = by_name.get("rte_vhost_dequeue_burst", (0, 0))
_, enq_cost = by_name.get("rte_vhost_enqueue_burst", (0, 0))
print(forwarded, dq_cost, dq_calls, enq_cost)
EOF
}

idle="$(run_one idle --rates 1000)"
closed="$(run_one closed)"
# shellcheck disable=SC2086  # each is four numbers
python3 - $idle $closed <<'EOF'
import sys
idle_n, idle_dq, idle_calls, idle_enq, n, dq, calls, enq = map(int, sys.argv[1:])
enq_per = enq / n
# The idle run's dequeues: idle_n with a request (costed as in the closed run, first
# approximation: the request's share of the closed run's dequeue), the rest empty.
empty = (idle_dq - idle_n * dq / calls) / (idle_calls - idle_n) if idle_calls > idle_n else 0.0
dq_with = (dq - (calls - n) * empty) / n
print(f"rr through testpmd's vhost PMD (macswap): {n} transactions, {calls} dequeue calls ({calls - n} found nothing)")
print(f"empty dequeue: {empty:.1f} instructions (idle run: {idle_calls} calls, {idle_n} transactions)")
print(f"rte_vhost_dequeue_burst per transaction: {dq / n:.1f} with the empty calls, {dq_with:.1f} without")
print(f"rte_vhost_enqueue_burst per transaction: {enq_per:.1f}")
print(f"vhost library per transaction: {dq_with + enq_per:.1f} (without the PMD, mbuf frees and testpmd's loop)")
EOF
