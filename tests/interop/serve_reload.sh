#!/usr/bin/env bash
# serve_reload.sh - `uvhost serve` under a service manager: SIGHUP reloads the config
# file port by port while traffic runs, sd_notify messages reach NOTIFY_SOCKET, SIGTERM
# removes every socket.
#
#   serve_reload.sh --uvhost PATH [--seconds 1]
#
#  1. A python3 datagram listener stands in for systemd's notify socket (NOTIFY_SOCKET).
#     `uvhost serve --config C --control CTL` starts with ports pa and pb (sink); the
#     listener gets READY=1 with "STATUS=2 ports, 0 connected".
#  2. testpmd (virtio_user, txonly, CPU 1) sends into pa. Once pa's packet count grows,
#     C is rewritten to pa (unchanged) and pc (new), pb gone, and SIGHUP sent: the
#     daemon lives, pb's socket is gone, pc's listens, `ctl list` shows pa and pc,
#     RELOADING=1 then READY=1 arrive, and pa's packet count keeps growing with pa's
#     connection count still 1.
#  3. A config that is not JSON, then one whose new port's directory is missing: each
#     SIGHUP is refused and logged ("reload ... refused"), and nothing changes (pa still
#     on its first connection, pc still listening, pb still absent).
#  4. testpmd stops: pa's one connection carried exactly what testpmd sent, before,
#     during and after the reloads.
#  5. SIGTERM: exit 0, STOPPING=1 arrives, pa's, pc's and the control socket are gone.
#  6. A daemon without --config: SIGHUP logs that there is nothing to reload, and it
#     runs on (it used to die with status 129).
# Exit: 0 pass, 1 fail, 64 usage, 77 testpmd not installed (ctest skip).
set -euo pipefail
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
# shellcheck source=lib.sh
source "$HERE/lib.sh"

uvhost="" seconds=1
while (($#)); do
  case $1 in
    --uvhost) uvhost=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    *) echo "serve_reload.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done
[[ -x $uvhost && $seconds =~ ^[0-9]+$ ]] || { echo "usage: serve_reload.sh --uvhost PATH [--seconds N]" >&2; exit 64; }
ilib_require_testpmd
command -v python3 >/dev/null || { echo "python3 not installed: skipped"; exit 77; }
ilib_init reload

conf=$dir/uvhost.json ctl=$dir/ctl.sock notify=$dir/notify.sock notes=$dir/notify.log
sock_a=$dir/a.sock sock_b=$dir/b.sock sock_c=$dir/c.sock

# The notify socket: every datagram becomes one line of $notes ("; " between its fields).
python3 - "$notify" "$notes" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as out:
    while True:
        out.write(s.recv(4096).decode().replace("\n", "; ") + "\n")
PY
ILIB_PIDS+=("$!")
ilib_wait_until 10 test -S "$notify" || { fail "the notify listener did not come up"; ilib_finish serve_reload; }
: >"$notes"

# A port's packets (every queue: a sink port with txonly only receives from the guest)
# and connections, from `ctl stats --json`.
port_stat() {
  ilib_ctl "$ctl" stats --json 2>/dev/null |
    jq -r --arg p "$1" --arg k "$2" '.ports[] | select(.name == $p)
      | if $k == "packets" then ([.queues[].packets] | add // 0) else .[$k] end' 2>/dev/null || echo "?"
}
port_names() { ilib_ctl "$ctl" list --json 2>/dev/null | jq -r '[.ports[].name] | join(",")' 2>/dev/null || echo "?"; }
# Waits until pa's packet count is above $1; PACKETS = the count seen.
PACKETS=0
wait_growth() {
  local floor=$1 i
  for ((i = 0; i < 100; i++)); do
    PACKETS=$(port_stat pa packets)
    [[ $PACKETS =~ ^[0-9]+$ ]] && ((PACKETS > floor)) && return 0
    sleep 0.1
  done
  return 1
}
write_config() {  # write_config PORT_JSON...
  local IFS=,
  echo "{\"ports\": [$*]}" >"$conf.tmp" && mv "$conf.tmp" "$conf"
}
port_a='{"name": "pa", "sock": "'$sock_a'", "backend": "sink"}'
port_b='{"name": "pb", "sock": "'$sock_b'", "backend": "sink"}'
port_c='{"name": "pc", "sock": "'$sock_c'", "backend": "sink"}'

# 1. Start, READY=1.
write_config "$port_a" "$port_b"
export NOTIFY_SOCKET=$notify
ilib_serve_start serve -- --config "$conf" --control "$ctl" || ilib_finish serve_reload
unset NOTIFY_SOCKET
pid=$SERVE_PID
ilib_wait_until 10 grep -q "^READY=1; STATUS=2 ports, 0 connected$" "$notes" ||
  fail "no READY=1 with '2 ports, 0 connected' on NOTIFY_SOCKET: $(cat "$notes")"

# 2. Traffic into pa, then SIGHUP: pb removed, pc added.
ilib_testpmd_start pa 1 txonly "$sock_a" || ilib_finish serve_reload
tp=$ILIB_LAST_PID
wait_growth 0 || fail "pa carried nothing from testpmd (packets: $PACKETS)"
before=$PACKETS
write_config "$port_a" "$port_c"
kill -HUP "$pid"
ilib_wait_until 10 grep -q "SIGHUP: reloaded" "$dir/serve.log" || fail "no 'SIGHUP: reloaded' in the log"
ilib_alive "$pid" || fail "uvhost serve died on SIGHUP"
grep "SIGHUP: reloaded" "$dir/serve.log" | tail -n 1
grep -q "kept pa; added pc; removed pb; restarted none" "$dir/serve.log" || fail "the reload did not keep pa, add pc, remove pb"
[[ -e $sock_b ]] && fail "pb's socket $sock_b is still there"
[[ -S $sock_c ]] || fail "pc's socket $sock_c is not there"
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' "$sock_c" ||
  fail "nobody listens on pc's socket"
[[ $(port_names) == "pa,pc" ]] || fail "ctl list after the reload: $(port_names), expected pa,pc"
ilib_wait_until 10 grep -q "^READY=1; STATUS=2 ports, 1 connected$" "$notes" ||
  fail "no READY=1 with '2 ports, 1 connected' after the reload: $(cat "$notes")"
grep -q "^RELOADING=1; MONOTONIC_USEC=[0-9]*; STATUS=" "$notes" || fail "no RELOADING=1 on NOTIFY_SOCKET: $(cat "$notes")"
wait_growth "$before" || fail "pa's traffic stopped with the reload (packets $PACKETS, before the reload $before)"
sleep "$seconds"
wait_growth "$PACKETS" || fail "pa's traffic stopped after the reload (packets $PACKETS)"
after_reload=$PACKETS
[[ $(port_stat pa connections) == 1 ]] || fail "pa's connections: $(port_stat pa connections), expected 1 (never dropped)"

# 3. Bad configs change nothing.
echo '{"ports": [' >"$conf"
kill -HUP "$pid"
ilib_wait_until 10 grep -q "reload of $conf refused" "$dir/serve.log" || fail "a config that is not JSON was not refused in the log"
write_config "$port_a" "$port_c" '{"name": "pd", "sock": "'$dir/missing/d.sock'", "backend": "sink"}'
kill -HUP "$pid"
refusals() { (($(grep -c "reload of $conf refused" "$dir/serve.log") >= $1)); }
ilib_wait_until 10 refusals 2 || fail "a config with an unbindable port was not refused in the log"
grep "refused" "$dir/serve.log" | sed 's/^/  log: /'
ilib_alive "$pid" || fail "uvhost serve died on a bad config"
[[ $(port_names) == "pa,pc" ]] || fail "ctl list after the bad configs: $(port_names), expected pa,pc"
[[ -S $sock_c && ! -e $sock_b ]] || fail "a bad config changed the sockets"
grep -q "applied in part" "$dir/serve.log" && fail "a refused config was applied in part"
wait_growth "$after_reload" || fail "pa's traffic stopped after the bad configs"
[[ $(port_stat pa connections) == 1 ]] || fail "pa's connections after the bad configs: $(port_stat pa connections)"

# 4. Exact counts: the one connection carried everything testpmd sent.
ilib_testpmd_stop pa "$tp" || true
tp_line=$TP_LINE
ilib_connection_end serve pa 1 || true
sent=$(field "$tp_line" tx_packets) got=$(field "$END_LINE" rx_packets)
echo "pa: testpmd sent=$sent, uvhost received=$got over one connection (before the reload: $before, after: $after_reload)"
((sent > 0)) || fail "testpmd sent nothing"
[[ $sent == "$got" ]] || fail "testpmd sent $sent, pa's connection received $got"

# 5. SIGTERM: clean exit, STOPPING=1, every socket gone.
ilib_serve_stop serve "$pid"
ilib_wait_until 5 grep -q "^STOPPING=1" "$notes" || fail "no STOPPING=1 on NOTIFY_SOCKET: $(cat "$notes")"
for s in "$sock_a" "$sock_c" "$ctl"; do [[ -e $s ]] && fail "$s is left after SIGTERM"; done
[[ $(ilib_summary serve pa rx_packets) == "$got" ]] || fail "summary JSON: pa rx_packets $(ilib_summary serve pa rx_packets) != $got"
echo "notify messages:"; sed 's/^/  /' "$notes"

# 6. No --config: SIGHUP is harmless.
ilib_serve_start plain -- --port "sock=$dir/p.sock,name=p0" || ilib_finish serve_reload
kill -HUP "$SERVE_PID"
ilib_wait_until 10 grep -q "nothing to reload" "$dir/plain.log" || fail "SIGHUP without --config: no 'nothing to reload' in the log"
sleep 0.2
ilib_alive "$SERVE_PID" || fail "SIGHUP without --config killed the daemon"
ilib_serve_stop plain
[[ -e $dir/p.sock ]] && fail "p.sock is left after SIGTERM"

ilib_finish serve_reload
