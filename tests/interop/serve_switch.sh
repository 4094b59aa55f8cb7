#!/usr/bin/env bash
# serve_switch.sh - `uvhost serve`'s L2 learning switch: two switch ports and a tap
# uplink, DPDK's testpmd (virtio_user) as the guests.
#
#   serve_switch.sh --uvhost PATH --tool PATH/uvhost-frontend-send [--count 1000]
#                   [--interval 0.002] [--seconds 3] [--paced 50000] [--pps 25000]
#
# In a private network namespace (uvh-switch-PID, deleted on exit):
#   uvhost serve --control C --switch-tap uvswPID
#                --port sock=A,backend=switch,name=pa --port sock=B,backend=switch,name=pb
# the tap gets 10.78.0.1/24 and is set up.
#  1. ping through the switch: testpmd icmpecho on port A (MAC 02:00:00:00:78:0a, CPU 1)
#     is the guest; COUNT pings from the tap's address to 10.78.0.2 must all be answered
#     exactly once (0% loss, no duplicates). Then this testpmd stops.
#  2. two testpmds, guest to guest: testpmd rxonly on port B (MAC 02:00:00:00:00:02,
#     CPU 1) starts first, then testpmd txonly on port A (CPU 0, with uvhost) sends
#     64-byte frames to B's MAC, as fast as it can, for --seconds. B never sent, so the
#     switch floods them (to B and the uplink). The switch never waits for a slow
#     receiver (switch_backend.h): with three busy threads on two CPUs, B's inbound
#     frame ring overruns and some copies are dropped, counted. So: pa took exactly what
#     testpmd A sent, and pb's delivered + dropped (ctl stats) == that, exactly.
#  3. paced, guest to guest: our frontend (uvhost-frontend-send --pps) on port A sends
#     --paced frames to B's MAC at --pps frames/s: pb must deliver every one (none
#     dropped).
#  At the end testpmd B's RX count == what pb delivered (its connection's summary line
#  and ctl stats), exactly. The switch's counters (`uvhost ctl stats --json`) are
#  printed after parts 1 and 2. Root is needed. Helpers: lib.sh.
# Exit: 0 pass, 1 fail, 64 usage, 77 testpmd not installed or not root (ctest skip).
set -euo pipefail
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
# shellcheck source=lib.sh
source "$HERE/lib.sh"

uvhost="" tool="" count=1000 interval=0.002 seconds=3 paced=50000 pps=25000
while (($#)); do
  case $1 in
    --uvhost) uvhost=$2; shift 2 ;;
    --tool) tool=$2; shift 2 ;;
    --paced) paced=$2; shift 2 ;;
    --pps) pps=$2; shift 2 ;;
    --count) count=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    *) echo "serve_switch.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done
[[ -x $uvhost && -x $tool && $count =~ ^[0-9]+$ && $seconds =~ ^[0-9]+$ ]] ||
  { echo "usage: serve_switch.sh --uvhost PATH --tool uvhost-frontend-send [--count N] [--interval S] [--seconds N] [--paced N] [--pps R]" >&2; exit 64; }
ilib_require_testpmd
[[ $(id -u) -eq 0 ]] || { echo "not root (network namespace and tap needed): skipped"; exit 77; }
ilib_init switch

tap=uvsw$$
mac_a=02:00:00:00:78:0a
mac_b=02:00:00:00:00:02  # uvhost-frontend-send's destination MAC
sock_a=$dir/a.sock sock_b=$dir/b.sock ctl=$dir/ctl.sock
echo "# $(date -u +'%F %T') load $(cut -d' ' -f1-3 /proc/loadavg)"

# One line of the switch's counters: per port and the uplink, forwarding and delivery.
switch_stats() {
  local stats
  stats=$(ilib_ctl "$ctl" stats --json 2>&1) || { fail "uvhost ctl stats --json: $stats"; return 0; }
  jq -c '.switch | {ports: [.ports[] | {name, forwarding: (.forwarding | with_entries(select(.value != 0))),
           delivery: (.delivery | with_entries(select(.value != 0)))}],
         uplink: (.uplink | if . == null then null else {forwarding: (.forwarding | with_entries(select(.value != 0))),
           delivery: (.delivery | with_entries(select(.value != 0))), queue_full} end),
         table: (.table | with_entries(select(.value != 0)))}' <<<"$stats" 2>/dev/null ||
    echo "(no .switch in ctl stats: $(head -c 300 <<<"$stats"))"
}

# pb's queues to its guest (direction tx), from `ctl stats --json`: "delivered dropped" (dropped includes
# inject_dropped: refused at inject, the inbound frame ring full).
pb_rx() {
  local stats
  stats=$(ilib_ctl "$ctl" stats --json 2>&1) || { fail "uvhost ctl stats --json: $stats"; echo "0 0"; return 0; }
  jq -r '[.ports[] | select(.name == "pb") | .queues[] | select(.direction == "tx")]
         | "\(map(.packets) | add // 0) \(map(.dropped) | add // 0)"' <<<"$stats"
}

# True once pb delivered + dropped, since the "delivered dropped" pair FROM, at least N.
pb_accounted() {
  local from now
  read -r -a from <<<"$1"
  read -r -a now <<<"$(pb_rx)"
  ((now[0] - from[0] + now[1] - from[1] >= $2))
}

run() {
  ilib_netns_create switch || return 0
  ilib_serve_start sw -- --control "$ctl" --switch-tap "$tap" \
    --port "sock=$sock_a,backend=switch,name=pa" --port "sock=$sock_b,backend=switch,name=pb" || return 0
  ilib_wait_link "$tap" || return 0
  "${NS[@]}" ip addr add 10.78.0.1/24 dev "$tap"
  "${NS[@]}" ip link set "$tap" up

  # 1. the host pings guest A through the switch.
  ilib_testpmd_start echo-a 1 icmpecho "$sock_a" --vdev-extra "mac=$mac_a" || return 0
  local pid_a=$ILIB_LAST_PID
  ilib_ping guest-a 10.78.0.2 "$count" "$interval" || true
  # No ARP probe of guest A after this: flooded to B once A is gone (its MAC flushed),
  # it would be one frame more than A sent in parts 2 and 3.
  ilib_neigh_freeze 10.78.0.2 "$mac_a" "$tap"
  echo "1. ping 10.78.0.2 (guest A) via $tap and the switch: $PING_SUMMARY"
  echo "1. ping: $PING_RTT"
  echo "1. switch: $(switch_stats)"
  ilib_testpmd_stop echo-a "$pid_a" || return 0
  echo "1. testpmd icmpecho (A): $TP_LINE"
  ilib_connection_end sw pa 1 || return 0

  # 2. guest A (testpmd txonly, as fast as it can) sends to guest B's MAC; B only receives.
  ilib_testpmd_start rx-b 1 rxonly "$sock_b" --vdev-extra "mac=$mac_b" || return 0
  local pid_b=$ILIB_LAST_PID s0 s1 s2
  read -r -a s0 <<<"$(pb_rx)"
  ilib_testpmd_start tx-a 0 txonly "$sock_a" --vdev-extra "mac=$mac_a" --arg "--eth-peer=0,$mac_b" || return 0
  pid_a=$ILIB_LAST_PID
  sleep "$seconds"
  ilib_testpmd_stop tx-a "$pid_a" || return 0
  local tp_a=$TP_LINE
  ilib_connection_end sw pa 2 || return 0
  local end_a=$END_LINE
  # What the switch still holds for B reaches B's ring (or is dropped) as B takes it.
  ilib_wait_until 20 pb_accounted "${s0[*]}" "$(field "$end_a" rx_packets)" ||
    echo "note: pb had not accounted for all of A's frames after 20 s"
  read -r -a s1 <<<"$(pb_rx)"
  echo "2. switch: $(switch_stats)"
  local sent a_in delivered dropped
  sent=$(field "$tp_a" tx_packets); a_in=$(field "$end_a" rx_packets)
  delivered=$((s1[0] - s0[0])); dropped=$((s1[1] - s0[1]))
  echo "2. testpmd A sent=$sent ($(mpps "$(field "$tp_a" tx_pps)") Mpps accepted, tx_dropped=$(field "$tp_a" tx_dropped)); pa took $a_in; pb delivered $delivered to B, dropped $dropped ($(awk -v d="$dropped" -v s="$sent" 'BEGIN { printf "%.1f", s ? 100 * d / s : 0 }')%: B's inbound ring overran)"
  ((sent > 0 && delivered > 0)) || fail "2. nothing went from A to B (sent $sent, delivered $delivered)"
  [[ $a_in == "$sent" ]] || fail "2. testpmd A sent $sent, port pa took $a_in from the guest"
  ((delivered + dropped == sent)) || fail "2. A sent $sent, pb delivered $delivered + dropped $dropped = $((delivered + dropped))"

  # 3. guest A paced (our frontend, --pps): B must get every frame.
  local out rc=0
  out=$(timeout 60 taskset -c 0 "$tool" --socket "$sock_a" --packets "$paced" --pps "$pps" --timeout-ms 40000 2>&1) || rc=$?
  echo "3. uvhost-frontend-send (A): $(grep '^sent=' <<<"$out" || echo "$out")"
  ((rc == 0)) || fail "3. uvhost-frontend-send exited $rc: $out"
  ilib_connection_end sw pa 3 || return 0
  local end_a3=$END_LINE
  ilib_wait_until 20 pb_accounted "${s1[*]}" "$(field "$end_a3" rx_packets)" ||
    echo "note: pb had not accounted for all of A's paced frames after 20 s"
  read -r -a s2 <<<"$(pb_rx)"
  delivered=$((s2[0] - s1[0])); dropped=$((s2[1] - s1[1]))
  echo "3. pa took $(field "$end_a3" rx_packets); pb delivered $delivered to B, dropped $dropped"
  [[ $(field "$end_a3" rx_packets) == "$paced" ]] || fail "3. we sent $paced, pa took $(field "$end_a3" rx_packets)"
  ((delivered == paced && dropped == 0)) || fail "3. we sent $paced at $pps/s, pb delivered $delivered and dropped $dropped"

  # B may still be reading what pb put in its RX ring: stop it once it counted all of it.
  ilib_wait_until 15 ilib_testpmd_rx_reached rx-b "${s2[0]}" || echo "note: testpmd B had not reported ${s2[0]} received after 15 s"
  ilib_testpmd_stop rx-b "$pid_b" || return 0
  local tp_b=$TP_LINE
  ilib_connection_end sw pb 1 || return 0
  local end_b=$END_LINE
  ilib_serve_stop sw
  local got b_out
  got=$(field "$tp_b" rx_packets); b_out=$(field "$end_b" tx_packets)
  echo "testpmd B received=$got in all; pb delivered $b_out (tx_dropped=$(field "$end_b" tx_dropped))"
  [[ $b_out == "$got" ]] || fail "pb delivered $b_out, testpmd B received $got"
  [[ $got == "${s2[0]}" ]] || fail "testpmd B received $got, ctl stats counted ${s2[0]} delivered to it"
}

run
ilib_finish "serve switch (ping $count, guest to guest)"
