#!/usr/bin/env bash
# callgrind-rr.sh - instructions per request/response transaction that the daemon's
# worker spends on a transaction's own work: one transmit burst of a loopback port
# (pop the request, reflect it, receive it into the other ring, publish both rings and
# decide both signals), counted by valgrind --tool=callgrind in `uvhost serve` while
# `uvhost bench` drives rr through it.
#
# Only DeviceDatapath::transmit_burst (and what it calls) is collected: the poll
# loop around it spins for as long as valgrind's slowed-down frontend takes, so its
# count says nothing. Transactions are the frames loopback reflected (`uvhost ctl
# stats`). Prints the total and the top functions (inclusive).
# Usage: scripts/callgrind-rr.sh [uvhost-binary] [size]   (default build/release/cli/uvhost, 64)
# Environment: SECONDS_RR (the bench window, default 3), POLL (default always),
# KEEP_OUT (a path: keep the callgrind profile there, for callgrind_annotate).
set -euo pipefail
cd "$(dirname "$0")/.."

uvhost="${1:-build/release/cli/uvhost}"
size="${2:-64}"
window="${SECONDS_RR:-3}"
poll="${POLL:-always}"

tmp="$(mktemp -d)"
serve_pid=""
cleanup() {
  [[ -n "$serve_pid" ]] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
  [[ -n "${KEEP_OUT:-}" ]] && cp "$tmp/callgrind.out" "$KEEP_OUT"; rm -rf "$tmp"
}
trap cleanup EXIT

valgrind --tool=callgrind --callgrind-out-file="$tmp/callgrind.out" \
  --toggle-collect='uvhost::datapath::DeviceDatapath::transmit_burst(uvhost::datapath::Vring&)' \
  "$uvhost" serve --control "$tmp/ctl.sock" --port "sock=$tmp/rr.sock,backend=loopback,poll=$poll" \
  >"$tmp/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 600); do
  [[ -S "$tmp/rr.sock" && -S "$tmp/ctl.sock" ]] && break
  sleep 0.1
done
[[ -S "$tmp/rr.sock" ]] || { cat "$tmp/serve.log" >&2; echo "callgrind-rr: the daemon did not start" >&2; exit 1; }

"$uvhost" bench --socket "$tmp/rr.sock" --backend-pid "$serve_pid" --workloads rr --sizes "$size" \
  --runs 1 --seconds "$window" --warmup 0.5 >"$tmp/bench.log"
transactions="$("$uvhost" ctl --socket "$tmp/ctl.sock" stats --json |
  python3 -c 'import json,sys
d = json.load(sys.stdin)
print(sum(p["backend_stats"]["reflected"] for p in d["ports"]))')"
kill -INT "$serve_pid"
wait "$serve_pid" || true
serve_pid=""

total="$(awk '/^(summary|totals):/ { print $2; exit }' "$tmp/callgrind.out")"
echo "rr ${size} B through loopback, poll=${poll}: ${transactions} transactions, ${total} instructions in transmit_burst"
awk -v t="$total" -v n="$transactions" 'BEGIN { printf "instructions per transaction: %.1f\n", t / n }'
callgrind_annotate --inclusive=yes "$tmp/callgrind.out" 2>/dev/null | sed -n '1,60p' | grep -E '^ *[0-9,]+ ' | head -30
