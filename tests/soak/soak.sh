#!/usr/bin/env bash
# soak.sh - the scale and soak test: one `uvhost serve` with many loopback ports on its
# shared worker pool, driven by uvhost-soak (traffic on every port, connect/disconnect
# cycles on a quarter of them) for a given time; see docs/OPERATIONS.md, "Scale and soak".
#
#   soak.sh --uvhost PATH --soak PATH [--ports 64] [--duration 60] [--cycles 100]
#           [--sample-interval 5] [--churn-ports PORTS/4] [--pool-workers 2] [--pps 500]
#           [--out DIR]
#
# Checks, besides what uvhost-soak checks (every frame of every port, the daemon's fds,
# threads and maps back to their steady values after each cycle and at each sample, RSS
# not growing): the daemon's fd count with no frontend is the same before and after
# the soak; it stops on SIGTERM with exit 0; its summary counts one connection per
# steady port and every connection of the churned ports (ports + cycles in all), no
# frontend turned away (each reconnect follows the end of the previous connection, so
# none is a second frontend), nothing dropped, as many frames to the guests as from
# them, and a steady port's frames are exactly the driver's. Exit 0 when all hold, 1 otherwise. --out keeps the daemon's log, the driver's
# table and its JSON there (default: a temporary directory, removed on success).
set -uo pipefail
uvhost="" soak="" ports=64 duration=60 cycles=100 interval=5 churn="" workers=2 pps=500 out=""
while (($#)); do
  case $1 in
    --uvhost) uvhost=$2; shift 2 ;;
    --soak) soak=$2; shift 2 ;;
    --ports) ports=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --cycles) cycles=$2; shift 2 ;;
    --sample-interval) interval=$2; shift 2 ;;
    --churn-ports) churn=$2; shift 2 ;;
    --pool-workers) workers=$2; shift 2 ;;
    --pps) pps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "soak.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done
[[ -x $uvhost && -x $soak ]] || { echo "usage: soak.sh --uvhost PATH --soak PATH [options]" >&2; exit 64; }
churn=${churn:-$((ports / 4))}
command -v jq >/dev/null || { echo "soak.sh: jq is needed" >&2; exit 64; }

if [[ -n $out ]]; then mkdir -p "$out" && dir=$out; else dir=$(mktemp -d /tmp/uvhost-soak.XXXXXX); fi
SERVE_PID=""
failed=0
fail() { echo "FAIL: $*"; failed=1; }
cleanup() { [[ -n $SERVE_PID ]] && kill -9 "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null; }
trap cleanup EXIT
fd_count() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }

# ---- the daemon: every port a listening loopback port on the shared pool
port_args=()
for ((i = 0; i < ports; i++)); do
  port_args+=(--port "sock=$dir/port$i.sock,name=port$i,backend=loopback,workers=pool")
done
"$uvhost" serve "${port_args[@]}" --pool-workers "$workers" --summary-json "$dir/serve.summary.json" \
  >"$dir/serve.out" 2>"$dir/serve.log" &
SERVE_PID=$!
for ((t = 0; t < 150; t++)); do
  grep -q "serving;" "$dir/serve.log" 2>/dev/null && break
  kill -0 "$SERVE_PID" 2>/dev/null || break
  sleep 0.1
done
if ! grep -q "serving;" "$dir/serve.log"; then
  echo "FAIL: uvhost serve did not come up; its log:"; cat "$dir/serve.log"; exit 1
fi
idle_fds=$(fd_count "$SERVE_PID")
echo "uvhost serve (pid $SERVE_PID): $ports ports, pool of $workers workers; $idle_fds fds with no frontend"

# ---- the soak
"$soak" --socket-pattern "$dir/port{}.sock" --ports "$ports" --churn-ports "$churn" --pid "$SERVE_PID" \
  --duration "$duration" --cycles "$cycles" --sample-interval "$interval" --pps "$pps" \
  --json "$dir/soak.json" | tee "$dir/soak.txt"
soak_rc=${PIPESTATUS[0]}
((soak_rc == 0)) || fail "uvhost-soak exited $soak_rc"

# ---- the daemon after its frontends left: the idle fd count again (closing is async)
after_fds=""
for ((t = 0; t < 50; t++)); do
  after_fds=$(fd_count "$SERVE_PID")
  ((after_fds == idle_fds)) && break
  sleep 0.1
done
if ((after_fds == idle_fds)); then echo "daemon fds with no frontend: $idle_fds before, $after_fds after"
else fail "daemon fds with no frontend: $idle_fds before, $after_fds after"; fi

kill -TERM "$SERVE_PID"
wait "$SERVE_PID"
serve_rc=$?
SERVE_PID=""
((serve_rc == 0)) || fail "uvhost serve exited $serve_rc on SIGTERM"

# ---- the daemon's books against the driver's
summary=$dir/serve.summary.json
if [[ ! -s $summary || ! -s $dir/soak.json ]]; then
  fail "no summary from the daemon or no JSON from the driver"
else
  errors=$(jq '[.ports[] | .rx_dropped + .broken_queues + .protocol_errors] | add' "$summary")
  ((errors == 0)) || fail "the daemon counts $errors frames dropped from guests, broken queues or protocol errors"
  # A loopback port's books: every frame taken from its guest went back to it, or was
  # dropped because its connection ended first (a churned connection closed with
  # frames in flight; never on a steady port, checked below).
  unbalanced=$(jq -r '.ports[] | select(.rx_packets != .tx_packets + .tx_dropped) | .name' "$summary")
  [[ -z $unbalanced ]] || fail "frames from the guest != frames to it + dropped on: $unbalanced"
  # Every connection the driver made is one the daemon served. A steady port's frames
  # are the driver's exactly; a churned port's daemon saw no more than the driver sent
  # (an abrupt close loses what the daemon had not taken yet) and gave back no fewer
  # than the driver checked.
  mismatches=$(jq -n --slurpfile d "$dir/soak.json" --slurpfile s "$summary" '
    [ $d[0].ports[] as $p | $s[0].ports[] | select(.name == "port\($p.port)")
      | select(.connections != $p.connections or
               ($p.steady and (.rx_packets != $p.sent or .tx_packets != $p.received or .tx_dropped != 0)) or
               ((($p.steady | not)) and (.rx_packets > $p.sent or .tx_packets < $p.received)))
      | "\(.name): daemon \(.connections) connections \(.rx_packets)/\(.tx_packets)/\(.tx_dropped) frames in/out/dropped, driver \($p.connections) \($p.sent)/\($p.received) sent/checked" ]
    | .[]' -r)
  [[ -z $mismatches ]] || fail "daemon and driver disagree: $mismatches"
  connections=$(jq '[.ports[].connections] | add' "$summary")
  rejected=$(jq '[.ports[].rejected] | add' "$summary")
  ((connections == ports + cycles)) || fail "the daemon served $connections connections, expected $((ports + cycles))"
  ((rejected == 0)) || fail "the daemon turned away $rejected reconnecting frontends as second frontends"
  in_flight=$(jq '[.ports[].tx_dropped] | add' "$summary")
  echo "daemon: $connections connections served, $rejected turned away; $in_flight frames dropped with their connection (churned ports' in-flight closes)"
fi

if ((failed)); then echo "soak.sh: FAILED (files in $dir)"; exit 1; fi
echo "soak.sh: passed"
[[ -n $out ]] || rm -rf "$dir"
exit 0
