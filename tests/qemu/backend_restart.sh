#!/usr/bin/env bash
# backend_restart.sh - `uvhost serve` stopped and started again under a running guest:
# the guest's traffic resumes without a driver reset, nothing is delivered twice, and
# what is lost is what crossed the outage.
#
#   backend_restart.sh --uvhost PATH [--cases kill,term] [--interval S] [--settle S]
#                      [--iperf on|off] [--rate R] [--resume-limit S]
#                      [--tx-delivery at_most_once|in_place]
#
# Layout (as qemu_test.sh's): uvhost serve on CPU 0 in the namespace uvh-restart-PID,
# the guest's vCPU on CPU 1. Like libvirt, the test makes the tap itself beforehand, a
# persistent one (`ip tuntap add ... mode tap vnet_hdr`, single queue as the port) with
# the host address 10.0.0.1/24, so it and its address outlive every uvhost; uvhost
# attaches to it. QEMU is the vhost-user client with `reconnect=1` on its chardev: when
# the backend goes away it sets the link down and connects again every second, then
# replays features, memory table and vring bases (from the used indexes: GET_VRING_BASE
# cannot be asked of a dead backend).
#
# The port's tx_delivery (default at_most_once, datapath/tx_delivery.h): frames from the
# guest are copied out and their used entries published before they are sent, so a
# SIGKILL never has one sent twice (in_place: sent from the guest's buffers, then
# published; a SIGKILL between the two has up to one burst sent again after the replay).
# The guest (scripts/guest-init.sh, test ping-gaps) pings 10.0.0.1 with timestamps
# (iputils -D, INTERVAL s apart), an iperf3 stream to the namespace beside it (--iperf
# on, -b RATE). Once it pings, the test waits SETTLE s, then for each case in order:
#   kill  SIGKILL the daemon (nothing of it runs any more)
#   term  SIGTERM the daemon (a graceful stop: it must exit 0 and write its summary)
# and starts it again at once with the same --config; then waits SETTLE s of traffic.
# The ping runs until SETTLE s after the last restart. Host side per restart: seconds
# from the signal to the daemon's exit, to its restart, to QEMU's new connection, to
# the first frame from the guest on the tap. Guest side, matched to the restart nearest
# in time: its silence (UVHOST-SILENCE: from the last reply before to the first reply
# after, lost or not; the guest's requests mostly wait in its qdisc while its link is
# down) and its run of unanswered requests (UVHOST-GAP).
# Checks:
#   - no reply twice (ping's DUP!), none at any restart;
#   - at most one run of lost requests per restart (nothing lost anywhere else), and
#     each restart's silence at most --resume-limit s (default 30);
#   - each run's loss bounded by what crossed the outage: the requests sent while it
#     was silent plus those in flight at the signal (one round trip's worth, the round
#     trip of the last reply before), lost <= silent_s / INTERVAL + rtt_before /
#     INTERVAL + 2;
#   - the replay: each restart's rings start where the guest is (uvhost's "starts at
#     avail position P, used index U" log lines: P == U, and not 0 for the ring from the
#     guest), the tap the test made is the one in use (same ifindex, address kept);
#   - the guest's eth0 counters only grow (no driver reset: tx_packets and rx_packets
#     while it pinged >= the replies), and its link went down and up once per restart
#     (QEMU's link down on disconnect; printed, and up == down checked: the link ends up);
#   - the background iperf3 stream (if on) completed (its retransmits printed).
# Exit: 0 pass, 1 fail, 64 usage, 77 not root.
set -euo pipefail
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
# shellcheck source=lib.sh
source "$HERE/lib.sh"

uvhost="" cases=kill,term interval=0.01 settle=5 iperf=on rate=100M resume_limit=30 delivery=at_most_once
while (($#)); do
  case $1 in
    --uvhost) uvhost=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    --settle) settle=$2; shift 2 ;;
    --iperf) iperf=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --resume-limit) resume_limit=$2; shift 2 ;;
    --tx-delivery) delivery=$2; shift 2 ;;
    *) echo "backend_restart.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done
[[ -x $uvhost && $cases =~ ^(kill|term)(,(kill|term))*$ && $settle =~ ^[0-9]+$ && $iperf =~ ^(on|off)$ && $delivery =~ ^(at_most_once|in_place)$ ]] ||
  { echo "usage: backend_restart.sh --uvhost PATH [--cases kill,term] [--interval S] [--settle S] [--iperf on|off] [--rate R] [--resume-limit S] [--tx-delivery at_most_once|in_place]" >&2; exit 64; }
[[ $(id -u) -eq 0 ]] || { echo "not root (network namespace and tap needed): skipped"; exit 77; }
ilib_init restart
echo "# $(date -u +'%F %T') backend restart: cases $cases, ping every $interval s, iperf3 $iperf, tx_delivery $delivery; load $(cut -d' ' -f1-3 /proc/loadavg)"

host_ip=10.0.0.1 guest_ip=10.0.0.2
tap=uvr$$
sock=$dir/vu.sock ctl=$dir/ctl.sock config=$dir/uvhost.json
IFS=, read -r -a restarts <<<"$cases"

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# The tap's kernel counter (rx_packets: frames uvhost wrote into it, from the guest).
tap_rx() { "${NS[@]}" cat "/sys/class/net/$tap/statistics/rx_packets"; }
tap_ifindex() { "${NS[@]}" cat "/sys/class/net/$tap/ifindex"; }
tap_has_address() { "${NS[@]}" ip -4 -o addr show dev "$tap" | grep -q " $host_ip/24 "; }

# uvhost's log line count of TAG matching REGEX.
log_count() { grep -cE "$2" "$dir/$1.log" 2>/dev/null || true; }
tap_grew() { (($(tap_rx) > $1)); }

# The persistent tap, made the way libvirt makes one before starting the backend.
make_tap() {
  "${NS[@]}" ip tuntap add dev "$tap" mode tap vnet_hdr || { fail "ip tuntap add $tap failed"; return 1; }
  "${NS[@]}" ip addr add "$host_ip/24" dev "$tap"
  "${NS[@]}" ip link set "$tap" up
}

write_config() {
  cat >"$config" <<EOF
{
  // The one port of the restart test: a tap port on the persistent tap made beforehand.
  "control": "$ctl",
  "ports": [{"name": "p0", "sock": "$sock", "backend": "tap", "tap": "$tap", "tx_delivery": "$delivery"}]
}
EOF
}

# Checks the rings of serve TAG started where the guest is: each "starts at avail
# position P, used index U" line has P == U, and the ring from the guest (vring 1) is
# not at 0 (the guest sent before the restart). Prints them.
check_ring_starts() {
  local tag=$1 line p u ring
  local -a lines
  mapfile -t lines < <(grep -E 'vring [0-9]+ \(.*\) starts at avail position' "$dir/$tag.log" | sed 's/.*\] //')
  ((${#lines[@]})) || { fail "[$tag] no ring start in uvhost's log"; return 1; }
  for line in "${lines[@]}"; do
    echo "[$tag] $line"
    ring=$(sed -n 's/.*vring \([0-9]*\) .*/\1/p' <<<"$line")
    p=$(sed -n 's/.*avail position \([0-9]*\),.*/\1/p' <<<"$line")
    u=$(sed -n 's/.*used index \([0-9]*\),.*/\1/p' <<<"$line")
    [[ $p == "$u" ]] || fail "[$tag] vring $ring starts at avail position $p but its used index is $u"
    [[ $ring == 1 && $p == 0 ]] && fail "[$tag] vring 1 (from the guest) starts at 0: no replayed base"
  done
  return 0
}

# One restart: signal SIG to the running daemon, start it again (serve TAG), measure.
RESTART_LINES=() RESTART_T0=()
restart_once() {
  local sig=$1 tag=$2 old=$SERVE_PID t0 t_dead t_up t_conn t_frame rx0 rc=0 ifindex0
  ifindex0=$(tap_ifindex)
  t0=$(now)
  RESTART_T0+=("$t0")
  if [[ $sig == KILL ]]; then
    kill -KILL "$old"
    ilib_stop_pid "$old" KILL 10 2>/dev/null || rc=$?  # (bash's "Killed" job notice: expected)
    ((rc == 137)) || fail "[$tag] SIGKILLed uvhost exited $rc, not 137"
  else
    ilib_stop_pid "$old" TERM 20 || rc=$?
    ((rc == 0)) || fail "[$tag] uvhost exited $rc on SIGTERM (not a graceful stop)"
  fi
  t_dead=$(now)
  rx0=$(tap_rx)  # nothing writes into the tap until the next daemon
  # The persistent tap and its address outlive the daemon.
  [[ $(tap_ifindex 2>/dev/null) == "$ifindex0" ]] || fail "[$tag] the tap $tap is gone or replaced after the stop"
  tap_has_address || fail "[$tag] the tap lost its address $host_ip after the stop"
  ilib_serve_start "$tag" -- --config "$config" || return 1
  t_up=$(now)
  if ilib_wait_until "$resume_limit" grep -q 'p0: frontend connected' "$dir/$tag.log"; then t_conn=$(now); else
    fail "[$tag] QEMU did not connect again within ${resume_limit}s"; return 1
  fi
  if ilib_wait_until "$resume_limit" tap_grew "$rx0"; then t_frame=$(now); else
    fail "[$tag] no frame from the guest reached the tap within ${resume_limit}s of the restart"; return 1
  fi
  [[ $(tap_ifindex) == "$ifindex0" ]] || fail "[$tag] uvhost did not attach to the tap made beforehand (ifindex changed)"
  tap_has_address || fail "[$tag] the tap lost its address $host_ip after the restart"
  RESTART_LINES+=("$(printf '%-5s host: exited %s s after SIG%s, up again %s s, QEMU connected %s s, first guest frame on the tap %s s' \
    "${tag#serve-}" "$(since "$t0" "$t_dead")" "$sig" "$(since "$t0" "$t_up")" "$(since "$t0" "$t_conn")" "$(since "$t0" "$t_frame")")")
  echo "${RESTART_LINES[-1]}"
  # The ring starts are logged while QEMU replays the device's state (after the kick).
  ilib_wait_until 10 grep -q 'vring 1 (.*) starts at' "$dir/$tag.log" || true
  check_ring_starts "$tag"
}

# The ping's length: SETTLE s before the first restart and after each, plus 5 s per
# restart for the outage itself (the guest keeps pinging through it) and 5 s at the end;
# a ping that ended before the last restart's SETTLE s is a failure of the test's timing.
ping_seconds=$((settle + ${#restarts[@]} * (settle + 5) + 5))
count=$(awk -v s="$ping_seconds" -v i="$interval" 'BEGIN { printf "%d", s / i }')

ilib_netns_create restart || exit 1
make_tap || exit 1
write_config
[[ $iperf == on ]] && { qlib_iperf_server "$host_ip" 0 || exit 1; }
qlib_prepare || exit 1
ilib_serve_start serve-0 -- --config "$config" || exit 1
qlib_guest_start g --sock "$sock" --cpu 1 --reconnect 1 --limit $((QLIB_GUEST_S + ping_seconds)) -- \
  uvhost.tests=ping-gaps uvhost.ip="$guest_ip/24" uvhost.peer="$host_ip" uvhost.count="$count" \
  uvhost.interval="$interval" uvhost.background="$([[ $iperf == on ]] && echo iperf || echo none)" uvhost.rate="$rate" || exit 1
if ! qlib_wait_marker g '^UVHOST-PING: started' "$QLIB_GUEST_S"; then
  fail "the guest never started pinging; console tail:"
  tail -n 15 "$dir/guest-g.log" | sed 's/^/  | /'
  exit 1
fi
echo "guest: $MARKER ($count requests, about ${ping_seconds}s)"
sleep "$settle"

i=0
for c in "${restarts[@]}"; do
  i=$((i + 1))
  sig=KILL
  [[ $c == term ]] && sig=TERM
  restart_once "$sig" "serve-$c" || break
  sleep "$settle"
done
! grep -q '^UVHOST-TEST: name=ping-gaps' "$dir/guest-g.log" ||
  fail "the guest's ping ended before the last restart's ${settle}s of traffic: the test's timing, not uvhost"

qlib_wait_marker g '^UVHOST-DONE' $((ping_seconds + 120)) || true
qlib_guest_wait g 30 || true
qlib_result g ping-gaps || true
echo "guest: $RESULT"
grep -E '^(ping|iperf3): ' "$dir/guest-g.log" | tr -d '\r' | sed 's/^/guest: /'
mapfile -t gaps < <(grep -E '^UVHOST-GAP:' "$dir/guest-g.log" | tr -d '\r')

# The guest's verdict on the data.
dups=$(field "$RESULT" duplicates) lost=$(field "$RESULT" lost) unique=$(field "$RESULT" unique)
[[ $dups == 0 ]] || fail "the guest got ${dups:-?} duplicate replies (DUP!)"
((${#gaps[@]} <= ${#restarts[@]})) ||
  fail "${#gaps[@]} runs of lost requests for ${#restarts[@]} restarts: loss outside the restarts"
# Each silence (a pause of more than 0.5 s between two replies) and each run of lost
# requests belongs to the restart whose signal is nearest to its last reply before (the
# guest's clock follows the host's to within about a second under QEMU; restarts are
# SETTLE + a few s apart).
mapfile -t silences < <(grep -E '^UVHOST-SILENCE:' "$dir/guest-g.log" | tr -d '\r')
nearest_restart() {  # prints "INDEX DISTANCE" of the restart nearest to time $1, or nothing
  local t=$1 r d best=-1 best_d=""
  [[ $t == "?" || -z $t ]] && return 0
  for ((r = 0; r < ${#restarts[@]}; r++)); do
    d=$(awk -v a="$t" -v b="${RESTART_T0[r]:-0}" 'BEGIN { d = b - a; if (d < 0) d = -d; printf "%.3f", d }')
    if [[ -z $best_d ]] || awk -v a="$d" -v b="$best_d" 'BEGIN { exit !(a < b) }'; then best=$r best_d=$d; fi
  done
  awk -v d="$best_d" -v s="$settle" 'BEGIN { exit !(d <= s) }' && echo "$best $best_d"
  return 0
}
declare -A gap_of=() silence_of=()
for g in "${gaps[@]}"; do
  read -r r d <<<"$(nearest_restart "$(field "$g" before_t)")"
  if [[ -z ${r:-} || -n ${gap_of[$r]:-} ]]; then
    fail "a run of lost requests that is no restart's (or a second one for a restart): $g"
    continue
  fi
  gap_of[$r]="$g apart_s=$d"
done
for g in "${silences[@]}"; do
  read -r r d <<<"$(nearest_restart "$(field "$g" before_t)")"
  if [[ -z ${r:-} ]]; then echo "note: a silence away from the restarts (the guest's vCPU descheduled?): $g"; continue; fi
  [[ -n ${silence_of[$r]:-} ]] && { echo "note: a second silence at restart $((r + 1)): $g"; continue; }
  silence_of[$r]="$g apart_s=$d"
done
gap_sum=0
for ((r = 0; r < ${#restarts[@]}; r++)); do
  label=${restarts[r]} g=${gap_of[$r]:-} quiet=${silence_of[$r]:-}
  silent="<0.5"
  [[ -n $quiet ]] && silent=$(field "$quiet" silent_s)
  gl=0 seqs=""
  [[ -n $g ]] && { gl=$(field "$g" lost); seqs=" (seq $(field "$g" first_seq)-$(field "$g" last_seq))"; }
  gap_sum=$((gap_sum + gl))
  printf '%-5s guest: resumed after %s s without a reply (last reply before %s s from the signal by the two clocks); %s requests lost%s\n' \
    "$label" "$silent" "$(field "$quiet" apart_s)" "$gl" "$seqs"
  if [[ -n $quiet ]] && ! awk -v s="$silent" -v l="$resume_limit" 'BEGIN { exit !(s <= l) }'; then
    fail "$label: traffic resumed only after $silent s (limit $resume_limit)"
  fi
  if [[ -n $g ]]; then
    rtt_before=$(field "$g" rtt_before_ms) gs=$(field "$g" silent_s)
    bound=$(awk -v s="$gs" -v i="$interval" -v r="$rtt_before" 'BEGIN { if (s == "?" || r == "?") print -1; else printf "%d", s / i + r / 1000 / i + 2 }')
    echo "      bound on the loss: ${gs}s silent / ${interval}s + one round trip (${rtt_before} ms) in flight + 2 = $bound"
    ((gl <= bound)) || fail "$label: $gl requests lost, more than what crossed the outage ($bound)"
  fi
done
[[ -n $lost && $lost == "$gap_sum" ]] || fail "the guest lost $lost requests, but its runs of lost requests add up to $gap_sum"
# No driver reset: eth0's counters went on growing, and the link came back up each time.
tx=$(field "$RESULT" tx_packets) rx=$(field "$RESULT" rx_packets)
((tx >= unique && rx >= unique)) || fail "eth0's counters grew by tx $tx rx $rx while $unique replies came: reset?"
down=$(field "$RESULT" carrier_down) up=$(field "$RESULT" carrier_up)
[[ $down == "$up" ]] || fail "the guest's link went down $down times but up $up times"
echo "guest link: down $down times, up $up times, for ${#restarts[@]} restarts; eth0 grew tx $tx rx $rx packets"
if [[ $iperf == on ]]; then
  [[ $(field "$RESULT" iperf_rc) == 0 ]] || fail "the background iperf3 failed (rc $(field "$RESULT" iperf_rc)): see guest-g.log"
  echo "iperf3 beside the ping: $(field "$RESULT" iperf_mbps) Mbit/s, $(field "$RESULT" iperf_retransmits) retransmits"
fi
# What QEMU said about the lost backend (its vhost code logs the failed requests).
if [[ -s $dir/qemu-g.out ]]; then
  echo "QEMU's messages (count, text):"
  sed -E 's/^qemu-system-x86_64: //' "$dir/qemu-g.out" | sort | uniq -c | sort -rn | head -n 12 | sed 's/^/  /'
fi
echo "summary: sent $(field "$RESULT" sent) unique replies $unique lost $lost duplicates $dups"
ilib_serve_stop "serve-${restarts[-1]}"
ilib_finish "backend restart ($cases)"
