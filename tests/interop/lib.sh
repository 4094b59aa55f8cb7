# shellcheck shell=bash disable=SC2034,SC2154  # sourced; globals are read by the sourcing script
# lib.sh - helpers shared by the serve_*.sh interop scripts that drive `uvhost serve`
# with DPDK's testpmd (sourced, not run; bash, `set -euo pipefail` safe).
#
#   source "$HERE/lib.sh"
#   ilib_init TAG            # $dir = mktemp -d /tmp/uvhost-TAG.XXXXXX, EXIT trap installed
#   ilib_require_testpmd     # exit 77 (ctest SKIP_RETURN_CODE) when testpmd is missing
#   ...checks calling fail "why"...
#   ilib_finish NAME         # "PASS: NAME" and exit 0, or "logs kept in $dir" and exit 1
#
# Every process started through ilib_serve_start / ilib_testpmd_start is remembered and
# stopped on exit, whatever the reason (TERM, then KILL after a grace period): a testpmd
# through its testpmd.sh wrapper, which stops testpmd and removes its EAL runtime
# directory (and `timeout` ends testpmd even if the wrapper is killed). A network
# namespace made by ilib_netns_create is emptied (its processes, by pid) and deleted.
# $dir is removed on success and kept (its path printed) on failure.
#
# Conventions: `uvhost serve` runs on CPU 0 unless told otherwise, testpmd on the CPU it
# is given; every wait is bounded (ILIB_WAIT_S seconds), never an exact-time assumption.

ILIB_HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
TESTPMD_SH=$ILIB_HERE/testpmd.sh
ILIB_WAIT_S=${ILIB_WAIT_S:-40}   # testpmd takes 1.5 to 6 s to start here; be generous
ILIB_PING_SLACK_S=${ILIB_PING_SLACK_S:-0.05}  # per ping request, on top of its interval (ilib_ping)

dir=""
failed=0
ILIB_PIDS=()        # background processes to stop on exit (newest stopped first)
ILIB_NETNS=""       # the namespace to delete on exit
NS=()               # command prefix that runs a command in that namespace (empty: none)
SERVE_PID=""
ILIB_LAST_PID=""

fail() { echo "FAIL: $*"; failed=1; }
note() { echo "$*"; }

# The value of KEY=VALUE in a line of such pairs (the last occurrence).
field() { sed -n "s/.*\b$2=\([^ ,]*\).*/\1/p" <<<"$1" | tail -n 1; }

ilib_require_testpmd() {
  command -v "${TESTPMD:-dpdk-testpmd}" >/dev/null 2>&1 || { echo "dpdk-testpmd not installed: skipped"; exit 77; }
}

# A process that still runs (a zombie child does not count: kill -0 would say yes).
ilib_alive() {
  local pid=$1 state
  [[ -r /proc/$pid/stat ]] || return 1
  state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [[ -n $state && $state != Z ]]
}

ilib_forget_pid() {
  local pid=$1 kept=() p
  for p in "${ILIB_PIDS[@]}"; do [[ $p == "$pid" ]] || kept+=("$p"); done
  ILIB_PIDS=("${kept[@]}")
}

# Sends SIG (default TERM) to PID, waits up to GRACE s, then SIGKILL; reaps it. Prints
# nothing; returns the process's exit status (137 when it had to be killed: 255 when it
# was not our child).
ilib_stop_pid() {
  local pid=$1 sig=${2:-TERM} grace=${3:-15} i rc=0
  kill "-$sig" "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 10; i++)); do
    ilib_alive "$pid" || break
    sleep 0.1
  done
  if ilib_alive "$pid"; then
    echo "note: pid $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-120)) ignored SIG$sig for ${grace}s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || rc=$?
  ilib_forget_pid "$pid"
  return "$rc"
}

ilib_cleanup() {
  local rc=$? i
  trap - EXIT INT TERM
  for ((i = ${#ILIB_PIDS[@]} - 1; i >= 0; i--)); do
    ilib_stop_pid "${ILIB_PIDS[i]}" TERM 10 || true
  done
  if [[ -n $ILIB_NETNS ]]; then
    local pid
    for pid in $(ip netns pids "$ILIB_NETNS" 2>/dev/null); do
      echo "note: pid $pid still in netns $ILIB_NETNS at exit: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    done
    ip netns del "$ILIB_NETNS" 2>/dev/null || true
  fi
  ((rc != 0 && rc != 77 && failed == 0)) && echo "FAIL: the script stopped with status $rc"
  if [[ -n $dir && -d $dir ]]; then
    if ((failed || rc != 0)) && ((rc != 77)); then
      echo "logs kept in $dir"
    else
      rm -rf "$dir"
    fi
  fi
  exit "$rc"
}

ilib_init() {
  dir=$(mktemp -d "/tmp/uvhost-$1.XXXXXX")
  set -o errtrace
  trap 'echo "error: ${BASH_SOURCE[0]##*/}:$LINENO: \"$BASH_COMMAND\" failed" >&2' ERR
  trap ilib_cleanup EXIT
  trap 'echo "interrupted"; failed=1; exit 130' INT TERM
}

ilib_finish() {
  if ((failed)); then exit 1; fi
  echo "PASS: $1"
  exit 0
}

# Waits until COMMAND... succeeds, up to SECONDS (checked every 0.1 s).
ilib_wait_until() {
  local seconds=$1 i; shift
  for ((i = 0; i < seconds * 10; i++)); do
    "$@" && return 0
    sleep 0.1
  done
  return 1
}

# ---------------------------------------------------------------- network namespace

# Makes a private network namespace (loopback up); NS=(ip netns exec NAME) runs in it.
ilib_netns_create() {
  # A run killed outright (ctest's timeout sends SIGKILL: no trap runs) leaves its
  # namespace behind: delete ours (uvh-TAG-PID) whose PID is gone.
  local stale
  for stale in $(ip netns list 2>/dev/null | awk '{ print $1 }' | grep -E "^uvh-$1-[0-9]+\$" || true); do
    [[ -d /proc/${stale##*-} ]] || { echo "note: deleting the stale namespace $stale"; ip netns del "$stale" || true; }
  done
  ILIB_NETNS="uvh-$1-$$"
  ip netns add "$ILIB_NETNS" || { ILIB_NETNS=""; fail "ip netns add failed (root needed)"; return 1; }
  NS=(ip netns exec "$ILIB_NETNS")
  "${NS[@]}" ip link set lo up
  # No IPv6 chatter (router solicitations, MLD) on the taps: only the test's traffic.
  "${NS[@]}" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 || true
}

# ---------------------------------------------------------------- uvhost serve

# ilib_serve_start TAG [--cpu C] -- SERVE_ARGS...: starts `uvhost serve SERVE_ARGS
# --summary-json $dir/TAG.summary.json` (in the namespace if one was made) on CPU C
# (default 0); logs in $dir/TAG.log (stderr) and $dir/TAG.out (the summary table).
# Waits until it says "serving". Sets SERVE_PID.
ilib_serve_start() {
  local tag=$1 cpu=0; shift
  if [[ ${1:-} == --cpu ]]; then cpu=$2; shift 2; fi
  [[ ${1:-} == -- ]] && shift
  "${NS[@]}" taskset -c "$cpu" "$uvhost" serve "$@" --summary-json "$dir/$tag.summary.json" \
    >"$dir/$tag.out" 2>"$dir/$tag.log" &
  SERVE_PID=$!
  ILIB_PIDS+=("$SERVE_PID")
  ilib_wait_until 15 ilib_serve_ready "$tag" "$SERVE_PID" || true
  if ! grep -q "serving;" "$dir/$tag.log" 2>/dev/null || ! ilib_alive "$SERVE_PID"; then
    fail "uvhost serve ($tag) did not come up; its log:"
    cat "$dir/$tag.log"
    ilib_stop_pid "$SERVE_PID" TERM 5 || true
    SERVE_PID=""
    return 1
  fi
}
ilib_serve_ready() { grep -q "serving;" "$dir/$1.log" 2>/dev/null || ! ilib_alive "$2"; }

# Stops serve SERVE_PID with SIGTERM (bounded): it must exit 0 and write its summary.
ilib_serve_stop() {
  local tag=$1 pid=${2:-$SERVE_PID} rc=0
  ilib_stop_pid "$pid" TERM 20 || rc=$?
  [[ $pid == "$SERVE_PID" ]] && SERVE_PID=""
  ((rc == 0)) || { fail "uvhost serve ($tag) exited $rc on SIGTERM (137: it hung and was killed); log tail:"; tail -n 20 "$dir/$tag.log"; }
  [[ -s $dir/$tag.summary.json ]] || fail "uvhost serve ($tag) wrote no --summary-json"
  return 0
}

# A port's counter from the summary JSON: ilib_summary TAG PORT KEY.
# Prints "?" when there is no such file or counter.
ilib_summary() {
  jq -r --arg p "$2" --arg k "$3" '.ports[] | select(.name == $p) | .[$k] // "?"' "$dir/$1.summary.json" 2>/dev/null || echo "?"
}

# Waits (up to 10 s) for the "connection N ended" line of PORT in serve TAG's log and
# puts it in END_LINE. (The ilib_* functions that can fail set globals instead of
# printing: a `fail` inside $(...) would be lost with its subshell.)
END_LINE=""
ilib_connection_end() {
  local tag=$1 port=$2 n=$3
  END_LINE=""
  if ! ilib_wait_until 10 grep -q "$port: connection $n ended" "$dir/$tag.log"; then
    fail "uvhost serve ($tag) never logged the end of $port's connection $n"
    return 1
  fi
  END_LINE=$(grep "$port: connection $n ended" "$dir/$tag.log" | tail -n 1)
}

# Waits (up to 10 s) until interface IFNAME exists (in the namespace, if any).
ilib_wait_link() { ilib_wait_until 10 "${NS[@]}" ip link show "$1" >/dev/null 2>&1 || { fail "interface $1 never appeared"; return 1; }; }

# `uvhost ctl` against a control socket (bounded by timeout).
ilib_ctl() { local sock=$1; shift; timeout 10 "$uvhost" ctl --socket "$sock" --timeout 5 "$@"; }

# ---------------------------------------------------------------- testpmd (virtio_user)

# ilib_testpmd_start TAG CPU MODE SOCK [testpmd.sh run args...]: testpmd virtio_user
# connecting to SOCK, in the background for up to 120 s (stopped by ilib_testpmd_stop);
# waits until it forwards. Sets ILIB_LAST_PID (the testpmd.sh wrapper).
ilib_testpmd_start() {
  local tag=$1 cpu=$2 mode=$3 sock=$4; shift 4
  "$TESTPMD_SH" run --role virtio-user --socket "$sock" --client --mode "$mode" --seconds 120 \
    --cpu "$cpu" --prefix "uvh-$tag-$$" --log "$dir/testpmd-$tag.log" "$@" >"$dir/tp-$tag.out" 2>&1 &
  ILIB_LAST_PID=$!
  ILIB_PIDS+=("$ILIB_LAST_PID")
  if ! ilib_wait_until "$ILIB_WAIT_S" ilib_testpmd_forwarding "$tag" "$ILIB_LAST_PID"; then
    fail "testpmd ($tag) did not start forwarding; its output:"
    cat "$dir/tp-$tag.out"
    tail -n 15 "$dir/testpmd-$tag.log" 2>/dev/null || true
    return 1
  fi
  if ! ilib_alive "$ILIB_LAST_PID"; then
    fail "testpmd ($tag) exited early: $(cat "$dir/tp-$tag.out")"
    return 1
  fi
}
ilib_testpmd_forwarding() { grep -q "start packet forwarding" "$dir/testpmd-$1.log" 2>/dev/null || ! ilib_alive "$2"; }

# True once testpmd TAG's latest per-second NIC statistics (--stats-period 1) show at
# least N packets received: waited for before stopping a receiver, so that frames
# already in its RX ring are taken (and counted) rather than left there at its stop.
ilib_testpmd_rx_reached() {
  local n
  n=$(sed -e 's/\x1b\[[0-9;]*[A-Za-z]//g' "$dir/testpmd-$1.log" 2>/dev/null | awk '/RX-packets:/ { v = $2 } END { print v + 0 }')
  ((n >= $2))
}

# Stops the testpmd.sh wrapper PID (it then stops testpmd, which prints its final
# statistics); TP_LINE = testpmd's "rx_packets=... tx_packets=..." line.
TP_LINE=""
ilib_testpmd_stop() {
  local tag=$1 pid=$2 rc=0
  ilib_stop_pid "$pid" TERM 20 || rc=$?
  TP_LINE=$(grep '^rx_packets=' "$dir/tp-$tag.out" || true)
  if [[ -z $TP_LINE ]]; then
    fail "testpmd ($tag) reported no counts (wrapper rc $rc): $(cat "$dir/tp-$tag.out")"
    return 1
  fi
}

# Runs testpmd virtio_user in the foreground for SECONDS of forwarding: ilib_testpmd_run
# TAG CPU MODE SOCK SECONDS [testpmd.sh run args...]; TP_LINE = its counts line.
ilib_testpmd_run() {
  local tag=$1 cpu=$2 mode=$3 sock=$4 secs=$5 rc=0; shift 5
  TP_LINE=""
  timeout -k 10 $((secs + 60)) "$TESTPMD_SH" run --role virtio-user --socket "$sock" --client --mode "$mode" \
    --seconds "$secs" --cpu "$cpu" --prefix "uvh-$tag-$$" --log "$dir/testpmd-$tag.log" "$@" \
    >"$dir/tp-$tag.out" 2>&1 || rc=$?
  if ((rc != 0)); then
    fail "testpmd ($tag) failed (rc $rc): $(cat "$dir/tp-$tag.out")"
    return 1
  fi
  TP_LINE=$(grep '^rx_packets=' "$dir/tp-$tag.out")
}

# ilib_neigh_freeze ADDR MAC DEV: makes the namespace's neighbour entry for ADDR on DEV
# permanent (MAC), so the kernel sends the guest nothing more on its own: once its
# reachable time ran out during a ping, the kernel probes the entry with unicast ARP
# requests some seconds after its next use, which can be after the ping ended, when
# the test expects no more frames toward the guest (exact counts at a guest's stop).
ilib_neigh_freeze() { "${NS[@]}" ip neigh replace "$1" lladdr "$2" dev "$3" nud permanent; }

# ---------------------------------------------------------------- arithmetic

mpps() { awk -v p="${1:-0}" 'BEGIN { printf "%.3f", p / 1e6 }'; }

# ---------------------------------------------------------------- ping

# ilib_ping TAG ADDR COUNT INTERVAL: from the namespace (if any), first up to 10 single
# pings until one is answered (ARP resolved, the path up), then COUNT pings INTERVAL s
# apart: every one must be answered exactly once (0% loss, no duplicates, no errors).
# PING_SUMMARY and PING_RTT: ping's two summary lines. Log: $dir/ping-TAG.log.
PING_SUMMARY="" PING_RTT=""
ilib_ping() {
  local tag=$1 addr=$2 count=$3 interval=$4 i ok=0 rc=0 limit
  PING_SUMMARY="" PING_RTT=""
  for ((i = 0; i < 10; i++)); do
    if "${NS[@]}" ping -c 1 -W 2 -q "$addr" >>"$dir/ping-$tag-warmup.log" 2>&1; then ok=1; break; fi
  done
  if ((!ok)); then fail "ping $addr ($tag): none of 10 warm-up pings was answered"; return 1; fi
  # The bound: on a loaded machine ping itself waits for a CPU before each request, so
  # a run takes up to tens of ms per request whatever INTERVAL asks (ILIB_PING_SLACK_S each).
  limit=$(awk -v c="$count" -v i="$interval" -v s="$ILIB_PING_SLACK_S" 'BEGIN { printf "%d", c * (i * 4 + s) + 30 }')
  "${NS[@]}" timeout "$limit" ping -c "$count" -i "$interval" -W 2 -q "$addr" >"$dir/ping-$tag.log" 2>&1 || rc=$?
  PING_SUMMARY=$(grep 'packets transmitted' "$dir/ping-$tag.log" || true)
  PING_RTT=$(grep '^rtt' "$dir/ping-$tag.log" || true)
  local sent got
  sent=$(sed -n 's/^\([0-9]*\) packets transmitted.*/\1/p' <<<"$PING_SUMMARY")
  got=$(sed -n 's/.* \([0-9]*\) received.*/\1/p' <<<"$PING_SUMMARY")
  if ((rc != 0)) || [[ $sent != "$count" || $got != "$count" ]] || grep -q 'duplicates\|errors' <<<"$PING_SUMMARY"; then
    fail "ping $addr ($tag): rc $rc: ${PING_SUMMARY:-no summary}: $(tail -n 3 "$dir/ping-$tag.log")"
    return 1
  fi
}
