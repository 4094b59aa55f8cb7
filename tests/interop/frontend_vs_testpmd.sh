#!/usr/bin/env bash
# frontend_vs_testpmd.sh - our embedded frontend (uvhost-frontend-send) against DPDK's
# vhost PMD (testpmd), for ctest.
#
#   frontend_vs_testpmd.sh --tool PATH --arrangement vhost-server|vhost-client
#                          --mode rxonly|io|macswap [--packets N]
#
# vhost-server: testpmd listens, we connect. vhost-client: we listen (--server), testpmd
# connects (client=1). rxonly: testpmd's RX count must equal what we sent (the tool
# waits until every TX buffer came back used, so nothing is in flight at the end). io /
# macswap: every packet must come back to us exactly once, in order, byte for byte as
# sent (sequence number, checksum and filler: frontend_frame.h), its MACs as sent (io) or
# exchanged (macswap), and testpmd must count N received and N sent, exactly.
# Exit: 0 pass, 1 fail, 77 testpmd not installed (ctest SKIP_RETURN_CODE).
set -uo pipefail
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
tool="" arrangement=vhost-server mode=rxonly packets=100000
while (($#)); do
  case $1 in
    --tool) tool=$2; shift 2 ;;
    --arrangement) arrangement=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --packets) packets=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 64 ;;
  esac
done
command -v "${TESTPMD:-dpdk-testpmd}" >/dev/null 2>&1 || { echo "dpdk-testpmd not installed: skipped"; exit 77; }
[[ -x $tool ]] || { echo "no tool at '$tool'" >&2; exit 64; }

dir=$(mktemp -d /tmp/uvhost-fe-testpmd.XXXXXX)
sock=$dir/vhost.sock
tp_pid="" tool_pid=""
cleanup() {
  [[ -n $tool_pid ]] && kill "$tool_pid" 2>/dev/null
  [[ -n $tp_pid ]] && kill -TERM "$tp_pid" 2>/dev/null && wait "$tp_pid" 2>/dev/null
  rm -f "$sock"
}
trap cleanup EXIT

tool_args=(--socket "$sock" --packets "$packets" --size 64 --timeout-ms 20000)
case $mode in
  rxonly) ;;
  io) tool_args+=(--io) ;;
  macswap) tool_args+=(--macswap) ;;
  *) echo "bad mode $mode" >&2; exit 64 ;;
esac

start_testpmd() {
  local flag=$1
  "$HERE/testpmd.sh" run --role vhost --socket "$sock" "$flag" --mode "$mode" --seconds 60 --cpu 0 \
    --prefix "uvh-fe-$$" --log "$dir/testpmd.log" >"$dir/testpmd.out" 2>&1 &
  tp_pid=$!
}

if [[ $arrangement == vhost-server ]]; then
  start_testpmd --server
  # Connect only once testpmd forwards: it flushes, uncounted, what its queues hold
  # when forwarding starts.
  for ((i = 0; i < 300; i++)); do grep -q "start packet forwarding" "$dir/testpmd.log" 2>/dev/null && break; sleep 0.1; done
  taskset -c 1 "$tool" "${tool_args[@]}" >"$dir/tool.out" 2>&1
  tool_rc=$?
else
  # testpmd flushes (uncounted) what its queues hold when its forwarding starts: the
  # tool waits for go-file, created once testpmd says it is forwarding.
  taskset -c 1 "$tool" "${tool_args[@]}" --server --go-file "$dir/go" >"$dir/tool.out" 2>&1 &
  tool_pid=$!
  for ((i = 0; i < 100; i++)); do [[ -S $sock ]] && break; sleep 0.1; done
  start_testpmd --client
  for ((i = 0; i < 300; i++)); do grep -q "start packet forwarding" "$dir/testpmd.log" 2>/dev/null && break; sleep 0.1; done
  touch "$dir/go"
  wait "$tool_pid"
  tool_rc=$?
  tool_pid=""
fi
sleep 0.5
kill -TERM "$tp_pid" 2>/dev/null
wait "$tp_pid"
tp_rc=$?
tp_pid=""
cat "$dir/tool.out" "$dir/testpmd.out"

line=$(grep '^rx_packets=' "$dir/testpmd.out")
rx=$(sed -n 's/.*\brx_packets=\([0-9]*\).*/\1/p' <<<"$line")
tx=$(sed -n 's/.*\btx_packets=\([0-9]*\).*/\1/p' <<<"$line")
fail=0
((tool_rc == 0)) || { echo "FAIL: frontend tool exited $tool_rc"; fail=1; }
((tp_rc == 0)) || { echo "FAIL: testpmd run exited $tp_rc"; fail=1; }
[[ ${rx:-x} == "$packets" ]] || { echo "FAIL: testpmd received ${rx:-?}, we sent $packets"; fail=1; }
if [[ $mode != rxonly && ${tx:-x} != "$packets" ]]; then echo "FAIL: testpmd sent back ${tx:-?} of $packets"; fail=1; fi
if ((fail)); then
  echo "logs kept in $dir"
  trap - EXIT; cleanup
  exit 1
fi
echo "PASS: $arrangement $mode: sent $packets, testpmd counted rx=$rx tx=$tx"
rm -rf "$dir"
exit 0
