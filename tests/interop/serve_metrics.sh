#!/usr/bin/env bash
# serve_metrics.sh - `uvhost serve --metrics 127.0.0.1:0` as a process: its /metrics
# endpoint passes `promtool check metrics` (no complaint at all), with a frontend
# (uvhost-frontend-send) connected so the per-queue, feature and process families are
# there, and the directions are DPDK's and OVS's (rx = from the guest).
#
#   serve_metrics.sh --uvhost PATH --tool PATH [--promtool PATH]
#
# Checks: a bad --metrics address is a usage error (exit 2); the bound port is logged;
# GET /metrics is 200 with the 0.0.4 content type, other paths 404, POST 405; promtool
# is silent; the frontend's packets are counted under direction="rx" of vring 1 (pair
# 0) and its echo under direction="tx"; the negotiated features are samples and in
# `ctl list`; the summary table names its columns rx/tx; SIGTERM exits 0.
# Exit 77 (skipped) when promtool or python3 is missing.
set -uo pipefail
uvhost="" tool="" promtool=$(command -v promtool || true)
while (($#)); do
  case $1 in
    --uvhost) uvhost=$2; shift 2 ;;
    --tool) tool=$2; shift 2 ;;
    --promtool) promtool=$2; shift 2 ;;
    *) echo "serve_metrics.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done
[[ -x $uvhost && -x $tool ]] || { echo "usage: serve_metrics.sh --uvhost PATH --tool PATH" >&2; exit 64; }
[[ -n $promtool && -x $promtool ]] || { echo "SKIP: no promtool (Debian package prometheus)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }

dir=$(mktemp -d /tmp/uvhost-serve-metrics.XXXXXX)
SERVE_PID="" FRONT_PID=""
failed=0
fail() { echo "FAIL: $*"; failed=1; }
cleanup() {
  [[ -n $FRONT_PID ]] && kill -9 "$FRONT_PID" 2>/dev/null
  [[ -n $SERVE_PID ]] && kill -9 "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

# http METHOD PATH OUTFILE: prints "STATUS CONTENT-TYPE"; the body goes to OUTFILE.
http() {
  python3 - "$port" "$1" "$2" "$3" <<'PY'
import http.client, sys
port, method, path, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
c.request(method, path)
r = c.getresponse()
open(out, "wb").write(r.read())
print(r.status, r.getheader("Content-Type"))
PY
}

# ---- 1. a bad address is a usage error
"$uvhost" serve --port "sock=$dir/x.sock" --metrics "localhost:9477" >"$dir/bad.out" 2>&1
rc=$?
((rc == 2)) || fail "--metrics localhost:9477 exited $rc, want 2: $(cat "$dir/bad.out")"

# ---- 2. the daemon, a loopback port with two queue pairs, metrics on a free port
"$uvhost" serve --port "sock=$dir/p0.sock,backend=loopback,queues=2,name=p0" --control "$dir/ctl.sock" \
  --metrics 127.0.0.1:0 >"$dir/serve.out" 2>"$dir/serve.log" &
SERVE_PID=$!
port=""
for ((i = 0; i < 100; i++)); do
  port=$(sed -n 's|.*metrics: http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$dir/serve.log" | head -n 1)
  [[ -n $port ]] && grep -q ": ready" "$dir/serve.log" && break
  kill -0 "$SERVE_PID" 2>/dev/null || break
  sleep 0.1
done
[[ -n $port && $port != 0 ]] || { fail "no metrics port in the log"; cat "$dir/serve.log"; exit 1; }
echo "metrics on port $port"

packets=5000
"$tool" --socket "$dir/p0.sock" --packets "$packets" --size 100 --echo >"$dir/first.out" 2>&1 ||
  fail "frontend: $(cat "$dir/first.out")"
# A second frontend stays connected (waiting for its go file) while we scrape.
"$tool" --socket "$dir/p0.sock" --packets 10 --go-file "$dir/go" --timeout-ms 20000 >"$dir/second.out" 2>&1 &
FRONT_PID=$!
for ((i = 0; i < 50; i++)); do grep -q "connection 2)" "$dir/serve.log" && break; sleep 0.1; done
sleep 0.3  # its features negotiated, its rings started

read -r status ctype < <(http GET /metrics "$dir/metrics.txt")
[[ $status == 200 ]] || fail "GET /metrics: $status"
[[ $ctype == "text/plain; version=0.0.4; charset=utf-8" ]] || fail "GET /metrics Content-Type '$ctype'"
if ! "$promtool" check metrics <"$dir/metrics.txt" >"$dir/promtool.out" 2>&1 || [[ -s $dir/promtool.out ]]; then
  fail "promtool check metrics complains:"; cat "$dir/promtool.out"
else
  echo "promtool check metrics: clean ($(grep -c '^# TYPE' "$dir/metrics.txt") families, $(grep -vc '^#' "$dir/metrics.txt") samples)"
fi
want() { grep -qxF "$1" "$dir/metrics.txt" || fail "no line '$1' in /metrics"; }
want_prefix() { grep -q "^$1" "$dir/metrics.txt" || fail "no sample starting '$1' in /metrics"; }
want "uvhost_queue_packets_total{port=\"p0\",pair=\"0\",queue=\"1\",direction=\"rx\"} $packets"
want "uvhost_queue_packets_total{port=\"p0\",pair=\"0\",queue=\"0\",direction=\"tx\"} $packets"
want "uvhost_queue_bytes_total{port=\"p0\",pair=\"0\",queue=\"1\",direction=\"rx\"} $((packets * 100))"
want_prefix 'uvhost_queue_packets_total{port="p0",pair="1",queue="3",direction="rx"} '
want "uvhost_port_connected{port=\"p0\"} 1"
want "uvhost_port_negotiated_feature_info{port=\"p0\",feature=\"VERSION_1\"} 1"
want "# TYPE uvhost_queue_busy_poll_seconds gauge"
for family in process_cpu_seconds_total process_resident_memory_bytes process_virtual_memory_bytes \
  process_open_fds process_max_fds process_start_time_seconds uvhost_uptime_seconds uvhost_port_backend_events_total; do
  grep -q "^$family[ {]" "$dir/metrics.txt" || fail "no sample of $family in /metrics"
  grep -q "^# TYPE $family " "$dir/metrics.txt" || fail "no # TYPE for $family"
done
grep -q 'untyped\|_microseconds\|uvhost_port_backend_stat{' "$dir/metrics.txt" && fail "an untyped or non-base-unit family is left"

read -r status _ < <(http GET /nope "$dir/404.txt")
[[ $status == 404 ]] || fail "GET /nope: $status, want 404"
read -r status _ < <(http POST /metrics "$dir/405.txt")
[[ $status == 405 ]] || fail "POST /metrics: $status, want 405"

# ---- 3. the same names in `ctl`
"$uvhost" ctl --socket "$dir/ctl.sock" list >"$dir/list.txt" 2>&1 || fail "ctl list: $(cat "$dir/list.txt")"
grep -q "^negotiated by p0: .*VERSION_1" "$dir/list.txt" || fail "ctl list names no negotiated feature: $(cat "$dir/list.txt")"
head -n 1 "$dir/list.txt" | grep -q " mtu$" || fail "ctl list has no mtu column: $(head -n 1 "$dir/list.txt")"
"$uvhost" ctl --socket "$dir/ctl.sock" stats --json >"$dir/stats.json" 2>&1 || fail "ctl stats --json failed"
python3 - "$dir/stats.json" "$packets" <<'PY' || fail "ctl stats --json: directions or features wrong"
import json, sys
stats, packets = json.load(open(sys.argv[1])), int(sys.argv[2])
port = stats["ports"][0]
queues = {q["index"]: q for q in port["queues"]}
assert queues[1]["direction"] == "rx" and queues[1]["packets"] == packets, queues[1]
assert queues[0]["direction"] == "tx" and queues[0]["packets"] == packets, queues[0]
assert "VERSION_1" in port["features"]["negotiated"], port["features"]
assert "guest_mtu" in port["features"]
assert stats["process"]["open_fds"] > 0
PY

# ---- 4. SIGTERM: exit 0, the summary's columns are rx/tx
touch "$dir/go"
wait "$FRONT_PID" || fail "the second frontend failed: $(cat "$dir/second.out")"
FRONT_PID=""
kill -TERM "$SERVE_PID"
wait "$SERVE_PID"
rc=$?
SERVE_PID=""
((rc == 0)) || fail "exit $rc on SIGTERM"
cat "$dir/serve.out"
head -n 1 "$dir/serve.out" | grep -q "rx pkts .* tx pkts" || fail "summary columns: $(head -n 1 "$dir/serve.out")"

((failed)) && { echo "serve_metrics: FAILED"; tail -n 20 "$dir/serve.log"; exit 1; }
echo "serve_metrics: OK"
