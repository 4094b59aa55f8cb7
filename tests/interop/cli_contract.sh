#!/usr/bin/env bash
# cli_contract.sh - the contract every `uvhost` subcommand keeps (cli/commands.h) and the
# whole daemon configuration in `uvhost serve`'s config file (serve_config.h), through
# the real binary. No peer needed: ctest runs it in every preset.
#
#   cli_contract.sh --uvhost PATH
#
# Checks: a bad command line exits 2 with nothing on stdout and the reason on stderr,
# for every subcommand; --help exits 0 on stdout; an unreachable daemon exits 1. Config
# files: bad ones are refused by --check-config (exit 2, the file and key named) without
# creating a socket; --print-config's output is a config file that prints itself back;
# a flag overrides its key; a daemon configured by the file alone (control socket,
# summary file, log level) serves, answers `uvhost ctl --control`, and writes its summary.
set -uo pipefail
uvhost=""
while (($#)); do
  case $1 in
    --uvhost) uvhost=$2; shift 2 ;;
    *) echo "cli_contract.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done
[[ -x $uvhost ]] || { echo "usage: cli_contract.sh --uvhost PATH" >&2; exit 64; }

dir=$(mktemp -d /tmp/uvhost-cli-contract.XXXXXX)
SERVE_PID=""
failed=0
fail() { echo "FAIL: $*"; failed=1; }
cleanup() {
  [[ -n $SERVE_PID ]] && kill -9 "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

# expect RC ARGS...: uvhost exits RC; a failure prints nothing on stdout and something on stderr.
expect() {
  local want=$1; shift
  "$uvhost" "$@" >"$dir/out" 2>"$dir/err"
  local rc=$?
  if ((rc != want)); then
    fail "uvhost $* exited $rc, expected $want"; cat "$dir/out" "$dir/err"; return
  fi
  if ((want != 0)); then
    [[ -s $dir/out ]] && fail "uvhost $*: exit $rc but stdout is not empty: $(head -c 300 "$dir/out")"
    [[ -s $dir/err ]] || fail "uvhost $*: exit $rc without a reason on stderr"
  fi
  echo "ok ($rc): uvhost $* -> $(tail -n 1 "$dir/err" | sed 's/.*\] //' | cut -c1-150)"
}

# ---- 1. one exit-status contract for every subcommand
expect 2
expect 2 --bogus
expect 2 --log-level loud version
expect 2 version --bogus
expect 2 serve --bogus
expect 2 serve --pool-workers 0 --port "sock=$dir/x.sock"
expect 2 serve --enqueue fast --port "sock=$dir/x.sock"
expect 2 ctl --bogus
expect 2 ctl list                      # no --socket
expect 2 ctl --socket "$dir/c.sock" stats --watch -1
expect 2 bench --bogus
expect 2 bench --workloads nothing
expect 2 bench compare --a poll=busy   # no --b
expect 2 lab --bogus
expect 2 lab delegation --bogus
expect 2 lab workqueue --threads zero
expect 1 ctl --socket "$dir/none.sock" list
expect 1 ctl --control "$dir/none.sock" list    # the name serve and its config file use
for cmd in "" serve ctl bench lab "lab delegation" version; do
  # shellcheck disable=SC2086
  "$uvhost" $cmd --help >"$dir/out" 2>"$dir/err"
  rc=$?
  ((rc == 0)) && [[ -s $dir/out ]] || fail "uvhost $cmd --help: exit $rc, $(wc -c <"$dir/out") bytes on stdout"
done
"$uvhost" --version >"$dir/out" 2>&1 && grep -q "^uvhost " "$dir/out" || fail "uvhost --version"

# ---- 2. config files that must be refused, without opening anything
check_refused() {  # NEEDLE JSON
  local needle=$1
  printf '%s\n' "$2" >"$dir/bad.json"
  expect 2 serve --config "$dir/bad.json" --check-config
  grep -qF -- "$needle" "$dir/err" || fail "config $2: the error does not say '$needle': $(cat "$dir/err")"
  grep -qF -- "$dir/bad.json" "$dir/err" || fail "config $2: the error does not name the file"
}
check_refused "unknown key 'verbose'" '{"verbose": true, "ports": [{"sock": "/tmp/a.sock"}]}'
check_refused "pool_workers '0'" '{"pool_workers": 0, "ports": [{"sock": "/tmp/a.sock"}]}'
check_refused "key 'control' given twice" '{"control": "/tmp/a", "control": "/tmp/b"}'
check_refused "ports[0]: 'queues' must be a number, not string" '{"ports": [{"sock": "/tmp/a.sock", "queues": "2"}]}'
check_refused "ports[0]: queues '0'" '{"ports": [{"sock": "/tmp/a.sock", "queues": 0}]}'
check_refused "not valid JSON: parse error at line 1" '{"ports": [}'
check_refused "'stats_interval' must be a number, not array" '{"stats_interval": [1]}'
check_refused "socket path longer than 107 bytes" "{\"ports\": [{\"sock\": \"/$(printf 'a%.0s' {1..120})\"}]}"
expect 2 serve --config "$dir" --check-config
expect 2 serve --config "$dir/missing.json" --check-config
printf '{"control": "%s"}\n' "$dir/ctl.sock" >"$dir/noports.json"
expect 2 serve --config "$dir/noports.json" --check-config   # no ports anywhere
grep -q "no ports" "$dir/err" || fail "no ports: $(cat "$dir/err")"

# ---- 3. --check-config and --print-config: the whole configuration, as a file
cat >"$dir/full.json" <<EOF
// a daemon configured by its file alone
{
  "control": "$dir/ctl.sock", "summary_json": "$dir/summary.json", "stats_interval": 0.5,
  "pool_workers": 3, "enqueue": "unlock_wake", "log_level": "warn",
  "ports": [
    {"name": "loop", "sock": "$dir/loop.sock", "backend": "loopback", "queues": 2, "mode": "0660", "workers": "pool"},
    {"sock": "$dir/sink.sock", "poll": "busy", "busy_us": 20}
  ]
}
EOF
expect 0 serve --config "$dir/full.json" --check-config
[[ -e $dir/loop.sock || -e $dir/ctl.sock ]] && fail "--check-config created a socket"
expect 0 serve --config "$dir/full.json" --print-config
cp "$dir/out" "$dir/printed.json"
expect 0 serve --config "$dir/printed.json" --print-config
cmp -s "$dir/out" "$dir/printed.json" || fail "--print-config does not print itself back: $(diff "$dir/printed.json" "$dir/out")"
for key in '"control"' '"pool_workers": 3' '"enqueue": "unlock_wake"' '"stats_interval": 0.5' '"name": "port1"' \
           '"switch_tap": ""' '"log_level": "warn"' '"workers": "pool"' '"busy_us": 20'; do
  grep -qF -- "$key" "$dir/printed.json" || fail "--print-config lacks $key: $(cat "$dir/printed.json")"
done
# A flag replaces its key; --port adds a port after the file's.
expect 0 serve --config "$dir/full.json" --pool-workers 5 --control "" --port "sock=$dir/extra.sock" --print-config
grep -qF '"pool_workers": 5' "$dir/out" || fail "--pool-workers 5 did not replace the file's 3"
grep -qF '"control": ""' "$dir/out" || fail "--control '' did not replace the file's control socket"
grep -qF '"name": "port2"' "$dir/out" || fail "--port did not add a third port"
expect 2 serve --config "$dir/full.json" --stats-interval nan --print-config
grep -qF -- "--stats-interval: stats_interval 'nan'" "$dir/err" || fail "the flag's error: $(cat "$dir/err")"

# ---- 4. a daemon from the file alone: control socket, log level, summary file
"$uvhost" serve --config "$dir/full.json" >"$dir/serve.out" 2>"$dir/serve.log" &
SERVE_PID=$!
up=0
for ((i = 0; i < 100; i++)); do
  "$uvhost" ctl --control "$dir/ctl.sock" list --json >"$dir/list.json" 2>/dev/null && { up=1; break; }
  kill -0 "$SERVE_PID" 2>/dev/null || break
  sleep 0.1
done
if ((up)); then
  grep -q '"loop"' "$dir/list.json" || fail "ctl list does not show the file's port: $(cat "$dir/list.json")"
  [[ $(stat -c %a "$dir/loop.sock") == 660 ]] || fail "loop.sock mode $(stat -c %a "$dir/loop.sock"), expected 660"
else
  fail "uvhost serve --config did not open its control socket"; cat "$dir/serve.log"
fi
kill -TERM "$SERVE_PID"
wait "$SERVE_PID"
rc=$?
SERVE_PID=""
((rc == 0)) || fail "uvhost serve exited $rc on SIGTERM"
[[ -s $dir/summary.json ]] || fail "no summary file from the config's summary_json"
grep -q "\[info\]" "$dir/serve.log" && fail "log_level warn from the file, but info lines were logged: $(head -3 "$dir/serve.log")"
# The command line's --log-level wins over the file's.
"$uvhost" --log-level info serve --config "$dir/full.json" --check-config 2>"$dir/check.log" >/dev/null
grep -q "configuration ok: 2 ports" "$dir/check.log" || fail "--log-level info did not override the file: $(cat "$dir/check.log")"

# ---- 5. the messages a person reads
# An unknown subcommand is named, with the known ones.
"$uvhost" bogus >"$dir/out" 2>"$dir/err"
rc=$?
((rc == 2)) || fail "uvhost bogus exited $rc"
grep -q "unknown subcommand 'bogus' (version, serve, ctl, lab, bench)" "$dir/err" ||
  fail "uvhost bogus does not name the subcommand: $(cat "$dir/err")"
# Global options after the subcommand, and the level names the log itself prints.
expect 0 serve --port "sock=$dir/g.sock" --log-level warning --check-config
expect 0 version --log-level critical
# Every default is shown in --help.
"$uvhost" bench --help | grep -q -- '--runs INT:INT in \[1 - 1000\]=3' || fail "bench --help shows no default for --runs"
# A control socket in a missing directory: its path once, then the reason.
expect 1 serve --port "sock=$dir/m.sock" --control "$dir/missing/ctl.sock"
n=$(grep -o "control socket $dir/missing/ctl.sock" "$dir/err" | wc -l)
((n == 1)) || fail "the control socket's path appears $n times in: $(cat "$dir/err")"
[[ -e $dir/m.sock ]] && fail "the port's socket was left behind after a failed start"
# A second daemon on a live daemon's socket is refused, and the first sees no phantom
# frontend (the stale-socket check does not connect to a listener it can see).
"$uvhost" serve --port "sock=$dir/live.sock" --control "$dir/live.ctl" 2>"$dir/live.err" &
SERVE_PID=$!
for _ in $(seq 100); do [[ -S $dir/live.ctl ]] && break; sleep 0.05; done
expect 1 serve --port "sock=$dir/live.sock"
grep -q "Address already in use" "$dir/err" || fail "the second daemon's reason: $(cat "$dir/err")"
"$uvhost" ctl --socket "$dir/live.ctl" stats --json >"$dir/live.json" || fail "ctl stats on the first daemon"
conns=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ports"][0]["connections"])' "$dir/live.json")
[[ $conns == 0 ]] || fail "the first daemon counted $conns connection(s) from the second one's probe"
grep -qi "frontend connected\|connection 1" "$dir/live.err" && fail "the first daemon logged a phantom frontend"
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null; SERVE_PID=""
# One run gives no interval, and the table says so instead of printing ±0.
"$uvhost" bench --workloads rr --sizes 64 --runs 1 --seconds 0.1 --warmup 0.05 >"$dir/bench.out" 2>/dev/null ||
  fail "bench --runs 1 failed"
grep -q "no interval" "$dir/bench.out" || fail "bench --runs 1 does not say there is no interval"
grep -q "±0" "$dir/bench.out" && fail "bench --runs 1 prints ±0"
echo "ok: messages (unknown subcommand, global options after it, defaults, control socket path, no phantom probe, one-run tables)"

if ((failed)); then exit 1; fi
echo "cli_contract: all checks passed"
