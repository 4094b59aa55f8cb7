#!/usr/bin/env bash
# serve_vs_testpmd.sh - `uvhost serve` against DPDK's testpmd as the frontend
# (net_virtio_user), for ctest and for the baseline figure of the datapath.
#
#   serve_vs_testpmd.sh --uvhost PATH CASE [--arrangement serve-server|serve-client]
#                       [--seconds N] [--runs R] [--port-extra KEYS] [--also-vdev K=V] [--packed]
#
# Cases (the vhost-user issue's interop list):
#   sink       testpmd virtio_user txonly -> `uvhost serve` sink: testpmd's TX count and
#              the port's count for that connection are equal (uvhost's worker takes
#              each burst on its kick; testpmd stops forwarding and prints its counts
#              before it stops the ring; uvhost's count is read once the connection
#              ended; docs/OPERATIONS.md names the race this leaves in principle).
#   loopback   testpmd virtio_user io --tx-first -> `uvhost serve` loopback -> back to
#              testpmd: both directions carry traffic, and the two processes' books add
#              up exactly, but for the frames left unread in testpmd's RX ring
#              (loopback_books.sh); testpmd negotiated IN_ORDER (its in-order paths).
#   reconnect  testpmd txonly, SIGKILLed mid-traffic, then started again: the same serve
#              process (no restart) serves the second testpmd, that connection's counts
#              agree, and serve's open fd count is back where it was before the first.
#   bench      --runs R pairs, interleaved: testpmd virtio_user txonly -> testpmd vhost PMD
#              rxonly (testpmd's own figure), then -> `uvhost serve` sink; prints the
#              sender's Mpps per run, means with a 95% interval and the ratio.
#              --also-vdev K=V[,K=V] adds a third receiver to every run: `uvhost serve`
#              again, the sender's vdev string extended by K=V (e.g. in_order=0: the
#              sender's path before uvhost offered IN_ORDER), and the per-run ratios
#              uvhost / that arm (geometric mean, 95% interval of the log ratios).
# --packed: testpmd's virtio_user takes packed rings (packed_vq=1) in every case, and
# the case also checks that RING_PACKED was negotiated.
# --arrangement: serve-server (uvhost listens, testpmd connects; the default) or
# serve-client (testpmd's virtio_user listens with server=1, uvhost connects). The
# `uvhost serve` runs on CPU 0, testpmd on CPU 1.
# Exit: 0 pass, 1 fail, 64 usage, 77 testpmd not installed (ctest SKIP_RETURN_CODE).
set -uo pipefail
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
TESTPMD_SH=$HERE/testpmd.sh
# shellcheck source=loopback_books.sh
source "$HERE/loopback_books.sh"

uvhost="" case_name="" arrangement=serve-server seconds=3 runs=5 port_extra="" also_vdev="" packed=0
while (($#)); do
  case $1 in
    --uvhost) uvhost=$2; shift 2 ;;
    --arrangement) arrangement=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --port-extra) port_extra=$2; shift 2 ;;  # more port keys, e.g. poll=always,busy_us=50
    --also-vdev) also_vdev=$2; shift 2 ;;    # bench: a third arm (see the header)
    --packed) packed=1; shift ;;
    sink|loopback|reconnect|bench) case_name=$1; shift ;;
    *) echo "serve_vs_testpmd.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done
[[ -x $uvhost && -n $case_name ]] || { echo "usage: serve_vs_testpmd.sh --uvhost PATH sink|loopback|reconnect|bench ..." >&2; exit 64; }
case $arrangement in serve-server|serve-client) ;; *) echo "bad --arrangement $arrangement" >&2; exit 64 ;; esac
command -v "${TESTPMD:-dpdk-testpmd}" >/dev/null 2>&1 || { echo "dpdk-testpmd not installed: skipped"; exit 77; }

dir=$(mktemp -d /tmp/uvhost-serve-testpmd.XXXXXX)
sock=$dir/vhost.sock
SERVE_PID="" TP_PID=""
failed=0
fail() { echo "FAIL: $*"; failed=1; }

cleanup() {
  [[ -n $TP_PID ]] && kill -TERM "$TP_PID" 2>/dev/null && wait "$TP_PID" 2>/dev/null
  [[ -n $SERVE_PID ]] && kill -TERM "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null
  pkill -9 -f "file-prefix uvh-sv-$$" 2>/dev/null
  rm -f "$sock"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- helpers

field() { sed -n "s/.*\b$2=\([^ ]*\).*/\1/p" <<<"$1" | tail -n 1; }
fd_count() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
# The smallest of a few samples: in client mode a connect attempt briefly holds a socket.
stable_fd_count() {
  local pid=$1 i n best=999999
  for ((i = 0; i < 6; i++)); do
    n=$(fd_count "$pid"); ((n < best)) && best=$n
    sleep 0.05
  done
  echo "$best"
}

# Starts `uvhost serve` with one port on CPU 0; waits until it listens (server) or runs.
start_serve() {
  local backend=$1
  local port="sock=$sock,backend=$backend,name=p0"
  [[ -n $port_extra ]] && port+=",$port_extra"
  [[ $arrangement == serve-client ]] && port+=",client"
  taskset -c 0 "$uvhost" serve --port "$port" --summary-json "$dir/summary.json" \
    >"$dir/serve.out" 2>"$dir/serve.log" &
  SERVE_PID=$!
  local i
  for ((i = 0; i < 100; i++)); do
    if [[ $arrangement == serve-client ]]; then grep -qs "ready" "$dir/serve.log" && return 0
    else [[ -S $sock ]] && return 0; fi
    kill -0 "$SERVE_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "uvhost serve did not come up:"; cat "$dir/serve.log"
  return 1
}

stop_serve() {
  kill -TERM "$SERVE_PID"
  wait "$SERVE_PID"
  local rc=$?
  SERVE_PID=""
  ((rc == 0)) || fail "uvhost serve exited $rc on SIGTERM"
  [[ -e $sock && $arrangement == serve-server ]] && fail "uvhost serve left its socket behind"
  return 0
}

# testpmd as the frontend (virtio_user): connects to serve, or listens for it.
testpmd_flag() { [[ $arrangement == serve-server ]] && echo --client || echo --server; }

# Runs testpmd virtio_user in the foreground; its summary line goes to $dir/tp-$tag.out.
run_testpmd() {
  local tag=$1 mode=$2 secs=$3; shift 3
  local ring=()
  ((packed)) && ring=(--vdev-extra packed_vq=1)
  "$TESTPMD_SH" run --role virtio-user --socket "$sock" "$(testpmd_flag)" --mode "$mode" --seconds "$secs" \
    --cpu 1 --prefix "uvh-sv-$$-$tag" --log "$dir/testpmd-$tag.log" "${ring[@]}" "$@" >"$dir/tp-$tag.out" 2>&1
}

# With --packed: did the connection negotiate packed rings?
check_ring_format() {
  ((packed)) || return 0
  grep -q "negotiated features:.*RING_PACKED" "$dir/serve.log" || fail "testpmd's virtio_user did not negotiate RING_PACKED"
}

# Waits for serve to log the end of connection N; prints that line.
connection_end() {
  local n=$1 i line
  for ((i = 0; i < 100; i++)); do
    line=$(grep "connection $n ended" "$dir/serve.log")
    [[ -n $line ]] && { echo "$line"; return 0; }
    sleep 0.1
  done
  return 1
}

# a == b, with a > 0.
agree() { (($1 > 0 && $1 == $2)); }

# ---------------------------------------------------------------- cases

case_sink() {
  start_serve sink || return 1
  run_testpmd sink txonly "$seconds" || { fail "testpmd: $(cat "$dir/tp-sink.out")"; return 1; }
  local tp end
  tp=$(grep '^rx_packets=' "$dir/tp-sink.out")
  end=$(connection_end 1) || { fail "serve never saw the connection end"; return 1; }
  stop_serve
  local sent got
  sent=$(field "$tp" tx_packets); got=$(field "$end" rx_packets)
  echo "testpmd virtio_user txonly: sent=$sent tx_mpps=$(awk -v p="$(field "$tp" tx_pps)" 'BEGIN{printf "%.3f", p/1e6}')"
  echo "uvhost serve sink:          received=$got"
  agree "$sent" "$got" || fail "testpmd sent $sent, uvhost serve counted $got"
  check_ring_format
}

case_loopback() {
  start_serve loopback || return 1
  run_testpmd loop io "$seconds" --tx-first || { fail "testpmd: $(cat "$dir/tp-loop.out")"; return 1; }
  local tp end
  tp=$(grep '^rx_packets=' "$dir/tp-loop.out")
  end=$(connection_end 1) || { fail "serve never saw the connection end"; return 1; }
  stop_serve
  local tp_tx tp_txd tp_rx sv_from sv_to sv_drop
  tp_tx=$(field "$tp" tx_packets); tp_txd=$(field "$tp" tx_dropped); tp_rx=$(field "$tp" rx_packets)
  sv_from=$(field "$end" rx_packets); sv_to=$(field "$end" tx_packets); sv_drop=$(field "$end" tx_dropped)
  echo "testpmd virtio_user io: tx=$tp_tx tx_dropped=$tp_txd rx=$tp_rx"
  echo "uvhost serve loopback:  from guest=$sv_from to guest=$sv_to dropped=$sv_drop"
  # DPDK's virtio PMD asks for IN_ORDER by default: its in-order paths are the ones
  # these books check.
  grep -m1 "negotiated features:" "$dir/serve.log"
  grep -q "negotiated features:.*IN_ORDER" "$dir/serve.log" || fail "testpmd's virtio_user did not negotiate IN_ORDER"
  loopback_books loopback "$tp_tx" "$tp_txd" "$tp_rx" "$sv_from" "$sv_to" "$sv_drop"
  check_ring_format
}

case_reconnect() {
  start_serve sink || return 1
  local pid=$SERVE_PID fd0 fd_live fd_after
  fd0=$(stable_fd_count "$pid")
  # First testpmd: long run, killed with SIGKILL while it sends.
  "$TESTPMD_SH" run --role virtio-user --socket "$sock" "$(testpmd_flag)" --mode txonly --seconds 60 \
    --cpu 1 --prefix "uvh-sv-$$-k" --log "$dir/testpmd-k.log" >"$dir/tp-k.out" 2>&1 &
  TP_PID=$!
  local i
  for ((i = 0; i < 300; i++)); do grep -q "start packet forwarding" "$dir/testpmd-k.log" 2>/dev/null && break; sleep 0.1; done
  sleep 2
  fd_live=$(fd_count "$pid")
  pkill -9 -f "file-prefix uvh-sv-$$-k" || fail "no testpmd to kill"
  # The testpmd.sh wrapper would sit out its 60 s; TERM makes it give up now (it then
  # finds no final statistics from the killed testpmd, as expected).
  kill -TERM "$TP_PID" 2>/dev/null
  wait "$TP_PID" 2>/dev/null
  TP_PID=""
  local end1
  end1=$(connection_end 1) || { fail "serve did not notice the killed frontend"; return 1; }
  echo "killed testpmd; serve: $end1"
  (($(field "$end1" rx_packets) > 0)) || fail "no traffic before the kill"
  kill -0 "$pid" 2>/dev/null || { fail "uvhost serve died"; return 1; }
  sleep 0.3
  fd_after=$(stable_fd_count "$pid")
  echo "serve fds: before=$fd0 with frontend=$fd_live after kill=$fd_after"
  ((fd_after == fd0)) || fail "fd count $fd_after after the killed frontend, $fd0 before"
  rm -rf "/var/run/dpdk/uvh-sv-$$-k" "${XDG_RUNTIME_DIR:-/tmp}/dpdk/uvh-sv-$$-k"

  # Second testpmd: served by the same process.
  run_testpmd again txonly "$seconds" || { fail "second testpmd: $(cat "$dir/tp-again.out")"; return 1; }
  local tp end2
  tp=$(grep '^rx_packets=' "$dir/tp-again.out")
  end2=$(connection_end 2) || { fail "serve did not serve the second testpmd"; return 1; }
  local sent got
  sent=$(field "$tp" tx_packets); got=$(field "$end2" rx_packets)
  echo "second testpmd: sent=$sent; serve connection 2 received=$got"
  agree "$sent" "$got" || fail "second connection: testpmd sent $sent, uvhost counted $got"
  sleep 0.3
  fd_after=$(stable_fd_count "$pid")
  echo "serve fds after the second frontend: $fd_after"
  ((fd_after == fd0)) || fail "fd count $fd_after after the second frontend, $fd0 before"
  [[ $SERVE_PID == "$pid" ]] || fail "uvhost serve was restarted"
  stop_serve
}

mean_ci() {  # prints "mean half_width" (95%, t-distribution) of the numbers on stdin
  awk '{ v[n++] = $1; s += $1 }
    END {
      split("12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228 2.201 2.179 2.160 2.145 2.131 2.120 2.110 2.101 2.093 2.086", t, " ")
      m = s / n; var = 0
      for (i = 0; i < n; i++) var += (v[i] - m)^2
      sd = n > 1 ? sqrt(var / (n - 1)) : 0
      q = (n - 1 >= 1 && n - 1 <= 20) ? t[n - 1] : 1.96
      printf "%.3f %.3f\n", m, (n > 1 ? q * sd / sqrt(n) : 0)
    }'
}

# Prints "LABEL, per run: Gx [lo, hi]": the geometric mean of the per-run ratios
# num[i] / den[i] and the 95% interval of their mean log (the arrays are given by name).
ratio_ci() {
  local label=$1 i r
  local -n num=$2 den=$3
  r=($(for ((i = 0; i < ${#num[@]}; i++)); do
    awk -v b="${num[i]}" -v c="${den[i]}" 'BEGIN { print log(b / c) }'
  done | mean_ci))
  awk -v m="${r[0]}" -v h="${r[1]}" -v l="$label" \
    'BEGIN { printf "%s, per run: %.2fx [%.2f, %.2f]\n", l, exp(m), exp(m - h), exp(m + h) }'
}

case_bench() {
  local r base_rates=() serve_rates=() also_rates=()
  echo "# sender: testpmd virtio_user txonly, 64-byte packets, CPU 1; receiver on CPU 0; $seconds s per run, $runs runs interleaved"
  echo "# $(date -u +%F) load $(cut -d' ' -f1-3 /proc/loadavg)"
  for ((r = 1; r <= runs; r++)); do
    # A: testpmd's own vhost PMD (rxonly) as the receiver.
    local bdir="$dir/base-$r"
    mkdir -p "$bdir"
    if "$TESTPMD_SH" baseline --arrangement vhost-server --seconds "$seconds" --runs 1 --dir "$bdir" >"$bdir/out" 2>&1; then
      local line
      line=$(grep -A1 '^role=virtio-user' "$bdir/runs.log" | grep '^rx_packets=')
      base_rates+=("$(field "$line" tx_pps)")
      echo "run $r testpmd-vhost: tx_mpps=$(awk -v p="$(field "$line" tx_pps)" 'BEGIN{printf "%.3f", p/1e6}') $(grep 'run 1' "$bdir/out")"
    else
      fail "baseline run $r"; cat "$bdir/out"
    fi
    # B: uvhost serve sink as the receiver.
    start_serve sink || return 1
    if run_testpmd "b$r" txonly "$seconds"; then
      local tp end
      tp=$(grep '^rx_packets=' "$dir/tp-b$r.out")
      end=$(connection_end 1)
      serve_rates+=("$(field "$tp" tx_pps)")
      echo "run $r uvhost-serve:  tx_mpps=$(awk -v p="$(field "$tp" tx_pps)" 'BEGIN{printf "%.3f", p/1e6}') sent=$(field "$tp" tx_packets) received=$(field "$end" rx_packets)"
    else
      fail "uvhost run $r: $(cat "$dir/tp-b$r.out")"
    fi
    stop_serve
    rm -f "$dir/serve.log"
    # C: uvhost serve sink again, the sender's vdev string extended.
    if [[ -n $also_vdev ]]; then
      start_serve sink || return 1
      if run_testpmd "c$r" txonly "$seconds" --vdev-extra "$also_vdev"; then
        tp=$(grep '^rx_packets=' "$dir/tp-c$r.out")
        end=$(connection_end 1)
        also_rates+=("$(field "$tp" tx_pps)")
        echo "run $r uvhost-serve ($also_vdev): tx_mpps=$(awk -v p="$(field "$tp" tx_pps)" 'BEGIN{printf "%.3f", p/1e6}') sent=$(field "$tp" tx_packets) received=$(field "$end" rx_packets)"
        agree "$(field "$tp" tx_packets)" "$(field "$end" rx_packets)" || fail "run $r ($also_vdev): sent and counted differ"
      else
        fail "uvhost run $r ($also_vdev): $(cat "$dir/tp-c$r.out")"
      fi
      stop_serve
      rm -f "$dir/serve.log"
    fi
  done
  local a b
  a=($(printf '%s\n' "${base_rates[@]}" | awk '{print $1/1e6}' | mean_ci))
  b=($(printf '%s\n' "${serve_rates[@]}" | awk '{print $1/1e6}' | mean_ci))
  echo "testpmd virtio_user -> testpmd vhost PMD: ${a[0]} ±${a[1]} Mpps (n=${#base_rates[@]})"
  echo "testpmd virtio_user -> uvhost serve sink: ${b[0]} ±${b[1]} Mpps (n=${#serve_rates[@]})"
  awk -v a="${a[0]}" -v b="${b[0]}" 'BEGIN { if (a > 0) printf "uvhost / testpmd: %.2fx\n", b / a }'
  ((${#base_rates[@]} == ${#serve_rates[@]})) && ratio_ci "uvhost / testpmd" serve_rates base_rates
  if [[ -n $also_vdev && ${#also_rates[@]} -eq ${#serve_rates[@]} ]]; then
    local c
    c=($(printf '%s\n' "${also_rates[@]}" | awk '{print $1/1e6}' | mean_ci))
    echo "testpmd virtio_user ($also_vdev) -> uvhost serve sink: ${c[0]} ±${c[1]} Mpps (n=${#also_rates[@]})"
    ratio_ci "uvhost / uvhost ($also_vdev)" serve_rates also_rates
  fi
}

"case_$case_name"
if ((failed)); then
  echo "logs kept in $dir"
  exit 1
fi
echo "PASS: $case_name ($arrangement)"
rm -rf "$dir"
exit 0
