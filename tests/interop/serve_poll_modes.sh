#!/usr/bin/env bash
# serve_poll_modes.sh - `uvhost serve`'s datapath in every poll mode against DPDK's
# testpmd (virtio_user) as the frontend, and poll modes switched under load.
#
#   serve_poll_modes.sh --uvhost PATH [--modes "notify busy always adaptive"]
#                       [--cases sink,loopback,switch] [--seconds 2] [--switch-seconds 3]
#
# Cases (for each mode in --modes; busy runs with busy_us=50):
#   sink      testpmd txonly (64 B) -> a sink port with poll=MODE for --seconds:
#             the port's count for the connection == testpmd's TX count, exactly.
#   loopback  testpmd io --tx-first -> a loopback port with poll=MODE -> back: both
#             directions carry traffic; testpmd's and uvhost's books add up exactly
#             (loopback_books.sh): only the frames left unread in testpmd's RX ring at
#             its stop are not observable, and they are what is left of testpmd's first
#             burst (at most 32).
#   switch    (once, not per mode) one serve with --control, testpmd txonly into a sink
#             port; while traffic runs, `uvhost ctl set --poll X` cycles through
#             notify, busy (--busy-us 50), always, adaptive every 200 ms for
#             --switch-seconds; each change must be accepted and show in `ctl stats`;
#             at the end testpmd's TX count == the port's count, exactly (no loss).
# `uvhost serve` runs on CPU 0, testpmd on CPU 1. Helpers: lib.sh.
# Exit: 0 pass, 1 fail, 64 usage, 77 testpmd not installed (ctest SKIP_RETURN_CODE).
set -euo pipefail
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
# shellcheck source=lib.sh
source "$HERE/lib.sh"
# shellcheck source=loopback_books.sh
source "$HERE/loopback_books.sh"

uvhost="" modes="notify busy always adaptive" cases="sink,loopback,switch" seconds=2 switch_seconds=3
while (($#)); do
  case $1 in
    --uvhost) uvhost=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --switch-seconds) switch_seconds=$2; shift 2 ;;
    *) echo "serve_poll_modes.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done
[[ -x $uvhost ]] || { echo "usage: serve_poll_modes.sh --uvhost PATH [--modes LIST] [--cases sink,loopback,switch]" >&2; exit 64; }
for m in $modes; do
  case $m in notify|busy|always|adaptive) ;; *) echo "unknown mode $m" >&2; exit 64 ;; esac
done
ilib_require_testpmd
ilib_init poll-modes

# The port key for a mode: busy polls for 50 us before it sleeps on the kick.
poll_keys() { if [[ $1 == busy ]]; then echo "poll=busy,busy_us=50"; else echo "poll=$1"; fi; }

case_sink() {
  local mode=$1 tag="sink-$1" sock="$dir/sink-$1.sock"
  ilib_serve_start "$tag" -- --port "sock=$sock,backend=sink,name=p0,$(poll_keys "$mode")" || return 0
  ilib_testpmd_run "$tag" 1 txonly "$sock" "$seconds" || { ilib_serve_stop "$tag"; return 0; }
  ilib_connection_end "$tag" p0 1 || { ilib_serve_stop "$tag"; return 0; }
  local tp=$TP_LINE end=$END_LINE
  ilib_serve_stop "$tag"
  local sent got poll
  sent=$(field "$tp" tx_packets); got=$(field "$end" rx_packets)
  poll=$(ilib_summary "$tag" p0 poll)
  echo "[$mode] sink: testpmd sent=$sent ($(mpps "$(field "$tp" tx_pps)") Mpps); uvhost received=$got dropped=$(field "$end" rx_dropped) (port poll: $poll)"
  ((sent > 0)) || fail "[$mode] sink: testpmd sent nothing"
  [[ $sent == "$got" ]] || fail "[$mode] sink: testpmd sent $sent, uvhost received $got (difference $((sent - got)))"
  [[ $(ilib_summary "$tag" p0 rx_packets) == "$got" ]] || fail "[$mode] sink: summary JSON rx_packets $(ilib_summary "$tag" p0 rx_packets) != the connection's $got"
}

case_loopback() {
  local mode=$1 tag="loop-$1" sock="$dir/loop-$1.sock"
  ilib_serve_start "$tag" -- --port "sock=$sock,backend=loopback,name=p0,$(poll_keys "$mode")" || return 0
  ilib_testpmd_run "$tag" 1 io "$sock" "$seconds" --tx-first || { ilib_serve_stop "$tag"; return 0; }
  ilib_connection_end "$tag" p0 1 || { ilib_serve_stop "$tag"; return 0; }
  local tp=$TP_LINE end=$END_LINE
  ilib_serve_stop "$tag"
  local tp_tx tp_txd tp_rx sv_from sv_to sv_drop
  tp_tx=$(field "$tp" tx_packets); tp_txd=$(field "$tp" tx_dropped); tp_rx=$(field "$tp" rx_packets)
  sv_from=$(field "$end" rx_packets); sv_to=$(field "$end" tx_packets); sv_drop=$(field "$end" tx_dropped)
  echo "[$mode] loopback: testpmd tx=$tp_tx tx_dropped=$tp_txd rx=$tp_rx ($(mpps "$(field "$tp" rx_pps)") Mpps); uvhost from guest=$sv_from to guest=$sv_to dropped=$sv_drop"
  loopback_books "[$mode] loopback" "$tp_tx" "$tp_txd" "$tp_rx" "$sv_from" "$sv_to" "$sv_drop"
}

# Microseconds since the epoch, without a fork (bash 5's EPOCHREALTIME).
us_now() { local t=${EPOCHREALTIME/[.,]/}; echo "$((10#$t))"; }

# The guest-TX queue's poll mode as `ctl stats --json` reports it.
tx_queue_mode() {
  ilib_ctl "$1" stats --json | jq -r '.ports[] | select(.name == "p0") | .queues[] | select(.direction == "rx") | .poll.mode' | head -n 1
}

case_switch() {
  local tag=switch sock="$dir/switch.sock" ctl="$dir/ctl.sock"
  ilib_serve_start "$tag" -- --control "$ctl" --port "sock=$sock,backend=sink,name=p0" || return 0
  ilib_testpmd_start "$tag" 1 txonly "$sock" || { ilib_serve_stop "$tag"; return 0; }
  local tp_pid=$ILIB_LAST_PID
  # Every 200 ms the next mode, for --switch-seconds, and at least one full cycle: on a
  # loaded machine one `ctl set` (a process start and a round trip) can take 100-250 ms,
  # so the period is kept from the start of one change to the next, not added to it.
  local cycle=(notify busy always adaptive) i=0 mode="" out rc t0 next now elapsed_ms=0 seen
  local -i slowest_ms=0 took_ms
  sleep 0.3  # traffic flowing before the first change
  t0=$(us_now); next=$t0
  while ((elapsed_ms < switch_seconds * 1000 || i < ${#cycle[@]})); do
    now=$(us_now)
    ((now < next)) && sleep "$(printf '0.%06d' $((next - now)))"
    next=$((next + 200000))
    mode=${cycle[i % ${#cycle[@]}]}
    local args=(set --port p0 --poll "$mode")
    [[ $mode == busy ]] && args+=(--busy-us 50)
    rc=0 now=$(us_now)
    out=$(ilib_ctl "$ctl" "${args[@]}" 2>&1) || rc=$?
    took_ms=$((($(us_now) - now) / 1000)); ((took_ms > slowest_ms)) && slowest_ms=$took_ms
    if ((rc != 0)); then fail "ctl ${args[*]}: rc $rc: $out"; break; fi
    # The reply names each changed vring: "p0/0 poll=busy(50us,accurate)".
    [[ $out == *"p0/0 poll=$mode"* ]] || { fail "ctl ${args[*]} answered: $out"; break; }
    i=$((i + 1))
    [[ -d /proc/$tp_pid ]] || { fail "testpmd stopped while modes were switched"; break; }
    elapsed_ms=$((($(us_now) - t0) / 1000))
  done
  seen=$(tx_queue_mode "$ctl" 2>&1) || true
  echo "switch: $i poll-mode changes in $elapsed_ms ms while testpmd sent (slowest ctl set: $slowest_ms ms; last: $mode; ctl stats shows the TX queue in $seen)"
  [[ $seen == "$mode" ]] || fail "after the last ctl set --poll $mode, ctl stats shows the TX queue in '$seen'"
  ilib_testpmd_stop "$tag" "$tp_pid" || { ilib_serve_stop "$tag"; return 0; }
  ilib_connection_end "$tag" p0 1 || { ilib_serve_stop "$tag"; return 0; }
  local tp=$TP_LINE end=$END_LINE
  ilib_serve_stop "$tag"
  local sent got
  sent=$(field "$tp" tx_packets); got=$(field "$end" rx_packets)
  echo "switch: testpmd sent=$sent ($(mpps "$(field "$tp" tx_pps)") Mpps); uvhost received=$got dropped=$(field "$end" rx_dropped)"
  ((sent > 0)) || fail "switch: testpmd sent nothing"
  [[ $sent == "$got" ]] || fail "switch: testpmd sent $sent, uvhost received $got (difference $((sent - got)))"
}

echo "# $(date -u +'%F %T') load $(cut -d' ' -f1-3 /proc/loadavg); modes: $modes; cases: $cases; $seconds s each"
IFS=, read -r -a case_list <<<"$cases"
for c in "${case_list[@]}"; do
  case $c in
    sink|loopback) for m in $modes; do "case_$c" "$m"; done ;;
    switch) case_switch ;;
    *) fail "unknown case $c" ;;
  esac
done
ilib_finish "serve poll modes ($modes; $cases)"
