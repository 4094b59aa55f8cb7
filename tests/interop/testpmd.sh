#!/usr/bin/env bash
# testpmd.sh - run DPDK's testpmd as a vhost-user peer and read its counters.
#
# Contract
# --------
#  run       One testpmd in one role; prints, at the end, one machine-readable line
#              rx_packets=N tx_packets=N tx_dropped=N rx_pps=X tx_pps=X rx_pps_peak=X tx_pps_peak=X samples=N
#            (pps: the mean of testpmd's per-second "Rx-pps"/"Tx-pps" samples taken
#            while traffic flowed, the first and last such sample left out because they
#            cover a part of a second; the peak is the largest sample).
#            Exit 0 when testpmd started forwarding and printed its final statistics,
#            2 when it failed to start or to report, 77 when testpmd is not installed.
#  baseline  The issue's reference: testpmd virtio_user (txonly, 64-byte packets) ->
#            testpmd vhost PMD (rxonly), in one or both socket arrangements, --runs times.
#            Prints one line per run and a mean/spread summary per arrangement. With
#            --check it exits 1 unless both sides counted traffic and the receiver's count
#            is at most the sender's, and short of it by no more than RING_SIZE (the
#            receiver counts from its first frame: it does not flush its RX queue when
#            it starts forwarding; see RING_SIZE for what can still be lost at the end),
#            77 when testpmd is not installed (ctest SKIP_RETURN_CODE).
#
#  Every testpmd runs under `timeout` (its forwarding time plus a startup allowance, then
#  SIGKILL after a grace period), so nothing outlives the script. On exit, whatever the
#  reason, the script stops its testpmds, removes the sockets it made listen and the
#  EAL runtime directory of each --file-prefix it used.
#
#  Machine facts (docs: ../../../shared/PEERS.md): no hugepages, so --no-huge -m 512 and a
#  16384-mbuf pool; two lcores mapped onto one CPU per process; --no-pci; a distinct
#  --file-prefix per process; --stats-period 1 lets testpmd run without a terminal, and
#  SIGINT makes it stop forwarding and print its final "Forward statistics".
#  --no-mlockall: locking (and so touching) every page of its memory at start took
#  testpmd past STARTUP_MAX on a loaded machine; nothing here needs the pages locked.
set -uo pipefail

TESTPMD=${TESTPMD:-dpdk-testpmd}
# A testpmd here takes 1.5 to 6 s to start (EAL zeroes its 512 MB, and the machine is
# shared): generous, because a slow start must not read as a failure.
STARTUP_MAX=${STARTUP_MAX:-30}
STOP_GRACE=5
# At its stop the sender counts every frame it put in its TX ring, prints its count and
# closes its device at once; the vhost PMD stops dequeuing when the device goes away, so
# the frames it had not taken by then are lost uncounted, and nothing reports how many.
# They were in the ring: at most its size (virtio_user's default queue_size). The
# receiver polls without pause, so this is 0 unless it was descheduled at that moment.
RING_SIZE=256

usage() {
  cat >&2 <<'EOF'
usage:
  testpmd.sh run --role vhost|virtio-user --socket PATH [--client|--server]
                 --mode txonly|rxonly|io|macswap --seconds N --cpu C --prefix NAME
                 [--txpkts 64] [--tx-first] [--log FILE] [--vdev-extra K=V[,K=V]]
                 [--arg TESTPMD_ARG]...
      --mode also takes icmpecho (answers ARP requests and ICMP echo: a pingable guest).
      --server: this testpmd listens on PATH, --client: it connects. Default: the vhost
      PMD listens and virtio_user connects (the usual QEMU-like arrangement).
      --vdev-extra: appended to the --vdev string (e.g. mac=02:00:00:00:00:0a; repeatable);
      --arg: one more testpmd application argument (e.g. --eth-peer=0,02:00:00:00:00:0b
      for txonly's destination MAC); repeatable.
      --tx-first: send one burst before forwarding (io/macswap against a reflecting
      peer: the burst then circulates).
  testpmd.sh baseline [--arrangement vhost-server|vhost-client|both] [--seconds N]
                 [--runs R] [--txpkts 64] [--check] [--dir DIR]
EOF
  exit 64
}

# ---------------------------------------------------------------- helpers

have_testpmd() { command -v "$TESTPMD" >/dev/null 2>&1; }

# EAL keeps a runtime directory per --file-prefix (its multi-process socket, config).
runtime_dir_of() {
  if [[ $(id -u) -eq 0 ]]; then
    echo "/var/run/dpdk/$1"
  else
    echo "${XDG_RUNTIME_DIR:-/tmp}/dpdk/$1"
  fi
}

# testpmd's stats block redraws the terminal; strip the escapes before parsing.
strip_ansi() { sed -e 's/\x1b\[[0-9;]*[A-Za-z]//g' "$1"; }

# Final counters from the "Forward statistics for port 0" block (printed on stop).
# Prints "rx tx tx_dropped", or nothing if the block is missing.
final_counts() {
  strip_ansi "$1" | awk '
    /Forward statistics for port/ { inblock = 1; next }
    inblock && /RX-packets:/ { rx = $2 }
    inblock && /TX-packets:/ { tx = $2; txd = $4; print rx, tx, txd; exit }'
}

# Per-second rate samples ("Rx-pps:" or "Tx-pps:"), nonzero ones only, first and last
# dropped when there are at least 3 (they cover part of a second). Prints "mean peak n".
rate_summary() {
  local key=$2
  strip_ansi "$1" | awk -v key="$key" '
    $1 == key { v = $2 + 0; if (v > 0) s[n++] = v }
    END {
      lo = 0; hi = n - 1
      if (n >= 3) { lo = 1; hi = n - 2 }
      sum = 0; peak = 0; m = 0
      for (i = lo; i <= hi && n > 0; i++) { sum += s[i]; m++ }
      for (i = 0; i < n; i++) if (s[i] > peak) peak = s[i]
      printf "%.0f %.0f %d\n", (m ? sum / m : 0), peak, m
    }'
}

# ---------------------------------------------------------------- run

# Globals of the one testpmd this shell runs (so the trap can stop and clean it).
RUN_PID=""
RUN_PREFIX=""
RUN_LISTEN_SOCKET=""

run_cleanup() {
  if [[ -n $RUN_PID ]] && kill -0 "$RUN_PID" 2>/dev/null; then
    kill -INT "$RUN_PID" 2>/dev/null
    # `timeout` forwards the signal and SIGKILLs after its grace; wait for it.
    wait "$RUN_PID" 2>/dev/null
  fi
  [[ -n $RUN_PREFIX ]] && rm -rf "$(runtime_dir_of "$RUN_PREFIX")"
  [[ -n $RUN_LISTEN_SOCKET ]] && rm -f "$RUN_LISTEN_SOCKET"
  RUN_PID=""
}

cmd_run() {
  local role="" socket="" listen="" mode="" seconds="" cpu="" prefix="" txpkts=64 log="" tx_first=0
  local vdev_extra="" extra_args=()
  while (($#)); do
    case $1 in
      --role) role=$2; shift 2 ;;
      --socket) socket=$2; shift 2 ;;
      --client) listen=0; shift ;;
      --server) listen=1; shift ;;
      --mode) mode=$2; shift 2 ;;
      --seconds) seconds=$2; shift 2 ;;
      --cpu) cpu=$2; shift 2 ;;
      --prefix) prefix=$2; shift 2 ;;
      --txpkts) txpkts=$2; shift 2 ;;
      --tx-first) tx_first=1; shift ;;
      --log) log=$2; shift 2 ;;
      --vdev-extra) vdev_extra+="${vdev_extra:+,}$2"; shift 2 ;;  # may be given more than once
      --arg) extra_args+=("$2"); shift 2 ;;
      *) echo "testpmd.sh run: unknown argument $1" >&2; usage ;;
    esac
  done
  [[ -n $role && -n $socket && -n $mode && -n $seconds && -n $cpu && -n $prefix ]] || usage
  [[ $seconds =~ ^[0-9]+$ && $cpu =~ ^[0-9]+$ && $txpkts =~ ^[0-9]+$ ]] || usage
  case $mode in txonly|rxonly|io|macswap|icmpecho) ;; *) usage ;; esac
  if ! have_testpmd; then
    echo "testpmd.sh: $TESTPMD not installed (scripts/setup.sh installs dpdk-dev)" >&2
    return 77
  fi

  local vdev
  case $role in
    vhost)
      [[ -z $listen ]] && listen=1
      vdev="net_vhost0,iface=$socket,queues=1"
      ((listen)) || vdev+=",client=1" ;;
    virtio-user)
      [[ -z $listen ]] && listen=0
      vdev="net_virtio_user0,path=$socket,queues=1"
      ((listen)) && vdev+=",server=1" ;;
    *) usage ;;
  esac
  [[ -n $vdev_extra ]] && vdev+=",$vdev_extra"
  [[ -n $log ]] || log=$(mktemp "/tmp/testpmd-$prefix.XXXXXX.log")

  RUN_PREFIX=$prefix
  if ((listen)); then
    RUN_LISTEN_SOCKET=$socket
    rm -f "$socket"  # a stale socket file makes bind() fail
  fi
  trap 'run_cleanup' EXIT
  trap 'run_cleanup; exit 130' INT TERM

  local args=(--no-huge -m 512 --lcores "0@$cpu,1@$cpu" --no-pci --file-prefix "$prefix"
              --vdev "$vdev" --
              --total-num-mbufs=16384 --forward-mode="$mode" --stats-period 1 --no-mlockall)
  [[ $mode == txonly ]] && args+=(--txpkts="$txpkts")
  ((tx_first)) && args+=(--tx-first)
  ((${#extra_args[@]})) && args+=("${extra_args[@]}")

  # Backstop: even if this script is SIGKILLed, timeout ends testpmd.
  timeout -k "$STOP_GRACE" -s INT $((seconds + STARTUP_MAX)) "$TESTPMD" "${args[@]}" >"$log" 2>&1 &
  RUN_PID=$!

  # Forwarding starts once testpmd prints this (after its port started; for a connecting
  # peer, after the vhost-user handshake began).
  local waited=0
  until grep -q "start packet forwarding" "$log" 2>/dev/null; do
    if ! kill -0 "$RUN_PID" 2>/dev/null || ((waited >= STARTUP_MAX * 10)); then
      echo "testpmd.sh: testpmd ($role, $prefix) did not start; its log ($log) ends with:" >&2
      tail -n 15 "$log" >&2
      run_cleanup
      return 2
    fi
    sleep 0.1
    ((waited++))
  done

  # Forward for N seconds, or until told to stop (SIGINT/SIGTERM now means "stop early
  # and report", which is how `baseline` ends a receiver). `wait` on a background sleep
  # returns as soon as a trapped signal arrives.
  local sleeper
  sleep "$seconds" &
  sleeper=$!
  trap 'kill "$sleeper" 2>/dev/null' INT TERM
  wait "$sleeper" 2>/dev/null
  kill "$sleeper" 2>/dev/null
  trap 'run_cleanup; exit 130' INT TERM
  kill -INT "$RUN_PID" 2>/dev/null
  wait "$RUN_PID" 2>/dev/null
  RUN_PID=""

  local counts
  counts=$(final_counts "$log")
  if [[ -z $counts ]]; then
    echo "testpmd.sh: testpmd ($role, $prefix) printed no final statistics; log: $log" >&2
    tail -n 15 "$log" >&2
    run_cleanup
    return 2
  fi
  local rx tx txd rxr txr
  read -r rx tx txd <<<"$counts"
  rxr=($(rate_summary "$log" Rx-pps:))
  txr=($(rate_summary "$log" Tx-pps:))
  run_cleanup
  echo "role=$role mode=$mode log=$log"
  echo "rx_packets=$rx tx_packets=$tx tx_dropped=$txd rx_pps=${rxr[0]} tx_pps=${txr[0]}" \
       "rx_pps_peak=${rxr[1]} tx_pps_peak=${txr[1]} samples=$((rxr[2] > txr[2] ? rxr[2] : txr[2]))"
  return 0
}

# ---------------------------------------------------------------- baseline

field() { sed -n "s/.*\b$2=\([^ ]*\).*/\1/p" <<<"$1" | tail -n 1; }

SELF=$(readlink -f "${BASH_SOURCE[0]}")
PAIR_PIDS=()
pair_cleanup() {
  local pid
  for pid in "${PAIR_PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null  # each `run` traps TERM and stops its own testpmd
  done
  for pid in "${PAIR_PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  PAIR_PIDS=()
}

# One run: sender virtio_user txonly on CPU 1, receiver vhost rxonly on CPU 0.
# Prints "tx rx rx_pps"; returns nonzero if either side failed.
pair_once() {
  local arrangement=$1 seconds=$2 txpkts=$3 dir=$4 tag=$5
  local sock="$dir/vhost-$tag.sock" rx_out="$dir/rx-$tag.out" tx_out="$dir/tx-$tag.out"
  local vhost_flag virtio_flag
  if [[ $arrangement == vhost-server ]]; then vhost_flag=--server; virtio_flag=--client
  else vhost_flag=--client; virtio_flag=--server; fi
  # The receiver runs longer than the sender: it must be up before the sender starts
  # and must drain the ring after the sender stopped. It is stopped explicitly.
  local receiver_seconds=$((seconds + STARTUP_MAX + 10))
  local listener_role
  [[ $arrangement == vhost-server ]] && listener_role=vhost || listener_role=virtio-user

  # --no-flush-rx: by default testpmd empties its RX queues, uncounted, when forwarding
  # starts; when the sender listens (vhost-client), the receiver connects and its port is
  # up before it forwards, so the sender's first frames would be discarded that way.
  start_vhost() {
    "$SELF" run --role vhost --socket "$sock" "$vhost_flag" --mode rxonly --arg --no-flush-rx \
      --seconds "$receiver_seconds" --cpu 0 --prefix "uvh-$tag-vh" --log "$dir/vhost-$tag.log" >"$rx_out" 2>&1 &
    VHOST_PID=$!
    PAIR_PIDS+=("$VHOST_PID")
  }
  start_virtio() {
    "$SELF" run --role virtio-user --socket "$sock" "$virtio_flag" --mode txonly --txpkts "$txpkts" \
      --seconds "$seconds" --cpu 1 --prefix "uvh-$tag-vu" --log "$dir/virtio-$tag.log" >"$tx_out" 2>&1 &
    VIRTIO_PID=$!
    PAIR_PIDS+=("$VIRTIO_PID")
  }
  wait_socket() {
    local i
    for ((i = 0; i < STARTUP_MAX * 10; i++)); do
      [[ -S $sock ]] && return 0
      sleep 0.1
    done
    echo "testpmd.sh: the listener never created $sock" >&2
    return 1
  }

  VHOST_PID="" VIRTIO_PID=""
  if [[ $listener_role == vhost ]]; then start_vhost; wait_socket || { pair_cleanup; return 1; }; start_virtio
  else start_virtio; wait_socket || { pair_cleanup; return 1; }; start_vhost; fi

  wait "$VIRTIO_PID"
  local tx_rc=$?
  # Let the receiver drain what is still in the ring, then stop it (it reports on TERM).
  sleep 1
  kill -TERM "$VHOST_PID" 2>/dev/null
  wait "$VHOST_PID"
  local rx_rc=$?
  PAIR_PIDS=()
  cat "$tx_out" "$rx_out" >>"$dir/runs.log"
  if ((tx_rc != 0 || rx_rc != 0)); then
    echo "testpmd.sh: sender rc $tx_rc, receiver rc $rx_rc:" >&2
    cat "$tx_out" "$rx_out" >&2
    return 1
  fi
  local tx_line rx_line
  tx_line=$(grep '^rx_packets=' "$tx_out")
  rx_line=$(grep '^rx_packets=' "$rx_out")
  echo "$(field "$tx_line" tx_packets) $(field "$rx_line" rx_packets) $(field "$rx_line" rx_pps)" \
       "$(field "$rx_line" rx_pps_peak) $(field "$rx_line" samples)"
}

cmd_baseline() {
  local arrangement=both seconds=5 runs=3 txpkts=64 check=0 dir=""
  while (($#)); do
    case $1 in
      --arrangement) arrangement=$2; shift 2 ;;
      --seconds) seconds=$2; shift 2 ;;
      --runs) runs=$2; shift 2 ;;
      --txpkts) txpkts=$2; shift 2 ;;
      --check) check=1; shift ;;
      --dir) dir=$2; shift 2 ;;
      *) echo "testpmd.sh baseline: unknown argument $1" >&2; usage ;;
    esac
  done
  if ! have_testpmd; then
    echo "testpmd.sh: $TESTPMD not installed (scripts/setup.sh installs dpdk-dev): skipped" >&2
    return 77
  fi
  local arrangements
  case $arrangement in
    both) arrangements=(vhost-server vhost-client) ;;
    vhost-server|vhost-client) arrangements=("$arrangement") ;;
    *) usage ;;
  esac
  local own_dir=0
  if [[ -z $dir ]]; then dir=$(mktemp -d /tmp/uvhost-testpmd.XXXXXX); own_dir=1; fi
  trap 'pair_cleanup' EXIT
  trap 'pair_cleanup; exit 130' INT TERM

  local failed=0 a r
  echo "# testpmd virtio_user txonly ($txpkts-byte packets) -> vhost PMD rxonly, $seconds s per run; $(date -u +%F); load $(cut -d' ' -f1-3 /proc/loadavg)"
  for a in "${arrangements[@]}"; do
    local rates=()
    for ((r = 1; r <= runs; r++)); do
      local out
      if ! out=$(pair_once "$a" "$seconds" "$txpkts" "$dir" "$$-$a-$r"); then
        echo "$a run $r: FAILED"; failed=1; continue
      fi
      local tx rx pps peak n
      read -r tx rx pps peak n <<<"$out"
      echo "$a run $r: sent=$tx received=$rx rx_mpps=$(awk -v p="$pps" 'BEGIN{printf "%.3f", p/1e6}') peak_mpps=$(awk -v p="$peak" 'BEGIN{printf "%.3f", p/1e6}') samples=$n"
      rates+=("$pps")
      if ((check)); then
        if ((tx <= 0 || rx <= 0)); then
          echo "$a run $r: CHECK FAILED: a side counted no traffic (sent=$tx received=$rx)"; failed=1
        elif ((rx > tx || tx - rx > RING_SIZE)); then
          echo "$a run $r: CHECK FAILED: received $rx of $tx sent (difference $((tx - rx)), at most $RING_SIZE may be left in the ring)"; failed=1
        elif ((rx != tx)); then
          echo "$a run $r: note: $((tx - rx)) frames left in the sender's ring at its close"
        fi
      fi
    done
    if ((${#rates[@]})); then
      printf '%s\n' "${rates[@]}" | awk -v a="$a" '
        { v[n++] = $1 / 1e6; s += $1 / 1e6 }
        END {
          m = s / n; var = 0; lo = v[0]; hi = v[0]
          for (i = 0; i < n; i++) { var += (v[i] - m)^2; if (v[i] < lo) lo = v[i]; if (v[i] > hi) hi = v[i] }
          sd = n > 1 ? sqrt(var / (n - 1)) : 0
          printf "%s: runs=%d mean_mpps=%.3f sd_mpps=%.3f min_mpps=%.3f max_mpps=%.3f\n", a, n, m, sd, lo, hi
        }'
    fi
  done
  ((own_dir)) && ((failed == 0)) && rm -rf "$dir"
  ((failed)) && echo "logs kept in $dir"
  return $failed
}

# ---------------------------------------------------------------- main

(($#)) || usage
sub=$1; shift
case $sub in
  run) cmd_run "$@" ;;
  baseline) cmd_baseline "$@" ;;
  *) usage ;;
esac
