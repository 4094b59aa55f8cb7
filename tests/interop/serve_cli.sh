#!/usr/bin/env bash
# serve_cli.sh - `uvhost serve` through its real entry point, driven by our embedded
# frontend (uvhost-frontend-send). No third-party peer: ctest runs it in every preset,
# so the daemon also carries traffic under ASan/UBSan and TSan.
#
#   serve_cli.sh --uvhost PATH --tool PATH [--packets N]
#
# Checks: bad command lines are refused (exit 2) and a socket in a missing directory
# fails the start (exit 1); three ports in one daemon (sink server, loopback server with
# 2 queue pairs and mode 0660, loopback client) carry traffic with exact counts; socket
# permissions; a second frontend on a busy port is turned away while the first one
# goes on; the daemon's fd count is the same before and after its frontends; SIGTERM
# stops it with exit 0, sockets removed and a summary (table and JSON) that adds up; a
# socket file left by a SIGKILLed daemon is replaced by the next one.
set -uo pipefail
uvhost="" tool="" packets=100000
while (($#)); do
  case $1 in
    --uvhost) uvhost=$2; shift 2 ;;
    --tool) tool=$2; shift 2 ;;
    --packets) packets=$2; shift 2 ;;
    *) echo "serve_cli.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done
[[ -x $uvhost && -x $tool ]] || { echo "usage: serve_cli.sh --uvhost PATH --tool PATH" >&2; exit 64; }

dir=$(mktemp -d /tmp/uvhost-serve-cli.XXXXXX)
SERVE_PID=""
failed=0
fail() { echo "FAIL: $*"; failed=1; }
cleanup() {
  [[ -n $SERVE_PID ]] && kill -9 "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null
  jobs -p | xargs -r kill -9 2>/dev/null
}
trap cleanup EXIT

expect_exit() {
  local want=$1; shift
  "$uvhost" serve "$@" >"$dir/bad.out" 2>&1
  local rc=$?
  if ((rc != want)); then fail "uvhost serve $* exited $rc, expected $want"; cat "$dir/bad.out"
  else echo "refused as expected ($rc): $* -> $(tail -n 1 "$dir/bad.out" | sed 's/.*\] //')"; fi
}

# ---- 1. command lines that must be refused
expect_exit 2 --port "queues=2"
expect_exit 2 --port "sock=$dir/x.sock,queues=0"
expect_exit 2 --port "sock=$dir/x.sock,backend=tap0"
expect_exit 2 --port "sock=$dir/x.sock,speed=fast"
expect_exit 2 --port "sock=$dir/x.sock,mode=0999"
expect_exit 2 --port "sock=$dir/x.sock" --port "sock=$dir/x.sock"
expect_exit 2
expect_exit 1 --port "sock=$dir/no/such/dir/x.sock"
echo '{"ports": [{"sock": "'"$dir"'/x.sock", "queues": "many"}]}' >"$dir/bad.json"
expect_exit 2 --config "$dir/bad.json"

# ---- 2. a daemon with three ports, from a config file and the command line
cat >"$dir/ports.json" <<EOF
{"ports": [
  {"name": "sink", "sock": "$dir/sink.sock", "backend": "sink"},
  {"name": "loop", "sock": "$dir/loop.sock", "backend": "loopback", "queues": 2, "mode": "0660"}
]}
EOF
start_serve() {
  # Emptied here, not by the redirection below: that one happens in the child, after
  # this shell may already have read the previous daemon's "ready" lines.
  : >"$dir/serve.log"
  "$uvhost" serve --config "$dir/ports.json" --port "sock=$dir/client.sock,client,backend=loopback,name=cl" \
    --stats-interval 1 --summary-json "$dir/summary.json" >"$dir/serve.out" 2>"$dir/serve.log" &
  SERVE_PID=$!
  local i
  for ((i = 0; i < 100; i++)); do
    # Every port logs "ready" once it listens or started connecting.
    (($(grep -c ": ready" "$dir/serve.log" 2>/dev/null) == 3)) && return 0
    kill -0 "$SERVE_PID" 2>/dev/null || break
    sleep 0.1
  done
  fail "uvhost serve did not come up"; cat "$dir/serve.log"; exit 1
}
start_serve
pid=$SERVE_PID
sleep 0.3
fd0=$(ls /proc/$pid/fd | wc -l)
[[ $(stat -c %a "$dir/sink.sock") == 600 ]] || fail "sink.sock mode $(stat -c %a "$dir/sink.sock"), want 600"
[[ $(stat -c %a "$dir/loop.sock") == 660 ]] || fail "loop.sock mode $(stat -c %a "$dir/loop.sock"), want 660"

run_tool() {  # name, tool args...
  local name=$1; shift
  if "$tool" "$@" >"$dir/$name.out" 2>&1; then echo "$name: $(grep '^sent=' "$dir/$name.out")"
  else fail "$name: $(cat "$dir/$name.out")"; fi
}
run_tool sink --socket "$dir/sink.sock" --packets "$packets" --size 64
run_tool loop --socket "$dir/loop.sock" --packets "$packets" --size 1000 --echo --macswap
# The client port connects to us: we listen, the daemon finds us (backoff).
run_tool client --socket "$dir/client.sock" --server --packets "$packets" --size 128 --echo --macswap

# A second frontend on a busy port is turned away; the first one is not disturbed.
"$tool" --socket "$dir/sink.sock" --packets 1000 --go-file "$dir/go" --timeout-ms 20000 >"$dir/first.out" 2>&1 &
first=$!
for ((i = 0; i < 50; i++)); do grep -q "connection 2)" "$dir/serve.log" && break; sleep 0.1; done
if "$tool" --socket "$dir/sink.sock" --packets 10 --timeout-ms 2000 >"$dir/second.out" 2>&1; then
  fail "a second frontend was served on a busy port"
else
  echo "second frontend refused: $(tail -n 1 "$dir/second.out")"
fi
touch "$dir/go"
wait "$first" || fail "the first frontend failed after the second was turned away: $(cat "$dir/first.out")"
grep -q "a second frontend connected while one is served" "$dir/serve.log" || fail "no log line for the rejected frontend"

sleep 0.3
fd1=$(ls /proc/$pid/fd | wc -l)
echo "daemon fds: before=$fd0 after=$fd1"
((fd1 == fd0)) || fail "fd count went from $fd0 to $fd1"

# ---- 3. SIGTERM: clean exit, sockets gone, summary adds up
sleep 1.2  # at least one --stats-interval tick
kill -TERM "$pid"
wait "$pid"
rc=$?
SERVE_PID=""
((rc == 0)) || fail "exit $rc on SIGTERM"
for s in sink loop; do [[ -e $dir/$s.sock ]] && fail "$s.sock left behind"; done
cat "$dir/serve.out"
grep -q "running: connections=" "$dir/serve.log" || fail "no periodic stats line (--stats-interval)"
json_field() {  # port name, key -> value from summary.json (nlohmann sorts keys: gather a block first)
  awk -v name="$1" -v key="$2" '
    /^ *\{ *$/ { delete kv; next }
    /^ *"[a-z_]+": / { k = $1; gsub(/[":]/, "", k); v = $2; gsub(/[",]/, "", v); kv[k] = v; next }
    /^ *\},? *$/ { if (kv["name"] == name) print kv[key]; delete kv }' "$dir/summary.json"
}
expect_json() {
  local got
  got=$(json_field "$1" "$2")
  [[ $got == "$3" ]] || fail "summary: $1.$2 = '$got', want $3"
}
expect_json sink rx_packets $((packets + 1000))  # rx: from the guest, tx: to it (as DPDK and OVS)
expect_json sink connections 2
expect_json sink rejected 1
expect_json loop rx_packets "$packets"
expect_json loop tx_packets "$packets"
expect_json loop tx_bytes $((packets * 1000))
expect_json cl rx_packets "$packets"
expect_json cl tx_packets "$packets"
expect_json cl protocol_errors 0

# ---- 4. a daemon killed with SIGKILL leaves its socket file; the next one replaces it
start_serve
kill -9 "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null; SERVE_PID=""
[[ -S $dir/sink.sock ]] || fail "expected a stale socket after SIGKILL"
start_serve
grep -q "replacing the stale socket" "$dir/serve.log" || fail "the stale socket was not reported"
run_tool sink-again --socket "$dir/sink.sock" --packets 1000 --size 64
kill -INT "$SERVE_PID"; wait "$SERVE_PID"; rc=$?; SERVE_PID=""
((rc == 0)) || fail "exit $rc on SIGINT"

if ((failed)); then echo "logs kept in $dir"; exit 1; fi
echo "PASS"
rm -rf "$dir"
