#!/usr/bin/env bash
# iperf_vs_testpmd.sh - iperf3 TCP throughput of the same Linux guest through uvhost's
# tap backend and through DPDK's vhost PMD forwarding to a DPDK tap, alternated.
#
#   iperf_vs_testpmd.sh --uvhost PATH [--rounds 3] [--secs 5]
#
# Each round boots the guest twice (uvhost first, then testpmd), and each boot prints the
# negotiated virtio features, runs `iperf3 -c 10.0.0.1 -t SECS` (guest -> host), then the
# same with -R (host -> guest)
# against an iperf3 -s in a private network namespace, on the tap's address:
#   uvhost:  uvhost serve --port sock=S,backend=tap,tap=T          (CPU 0)
#   testpmd: dpdk-testpmd --vdev net_vhost0,iface=S --vdev net_tap0,iface=T
#            --forward-mode=io, no hugepages (--no-huge -m 512, 16384 mbufs), both
#            lcores on CPU 0
# QEMU's vCPU on CPU 1, iperf3 -s on CPU 0, the same guest image, MAC and addresses.
# The figure is iperf3's receiver-side Mbit/s as the guest reports it. Prints one line
# per boot and a table (mean, sample standard deviation, min, max per backend and
# direction). Exit 0 when every boot produced both figures, 1 otherwise, 77 when not
# root or testpmd is missing.
set -euo pipefail
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
# shellcheck source=lib.sh
source "$HERE/lib.sh"

uvhost="" rounds=3 secs=5
while (($#)); do
  case $1 in
    --uvhost) uvhost=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --secs) secs=$2; shift 2 ;;
    *) echo "iperf_vs_testpmd.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done
[[ -x $uvhost && $rounds =~ ^[0-9]+$ && $secs =~ ^[0-9]+$ ]] ||
  { echo "usage: iperf_vs_testpmd.sh --uvhost PATH [--rounds N] [--secs N]" >&2; exit 64; }
ilib_require_testpmd
[[ $(id -u) -eq 0 ]] || { echo "not root (network namespace and tap needed): skipped"; exit 77; }
ilib_init qemu-iperf
echo "# $(date -u +'%F %T') load $(cut -d' ' -f1-3 /proc/loadavg); $rounds rounds x (uvhost, testpmd), iperf3 ${secs} s each way"

host_ip=10.0.0.1 guest_ip=10.0.0.2
results=$dir/results.txt   # backend direction mbps retransmits
: >"$results"

# One boot of the guest against SOCK with iperf3 -s on the host address: appends its
# figures to $results.
measure() {
  local backend=$1 round=$2 sock=$3 name=$1-$2 t
  qlib_iperf_server "$host_ip" 0 || return 1
  local iperf_pid=$IPERF_PID
  qlib_guest_start "$name" --sock "$sock" --cpu 1 -- uvhost.tests=link,iperf,iperf-r uvhost.ip="$guest_ip/24" \
    uvhost.peer="$host_ip" uvhost.secs="$secs" || return 1
  qlib_wait_marker "$name" '^UVHOST-DONE' "$QLIB_GUEST_S" || true
  qlib_guest_wait "$name" 30 || true
  ilib_stop_pid "$iperf_pid" TERM 5 || true
  local line=""
  for t in iperf iperf-r; do
    qlib_result "$name" "$t" || continue
    local dirn=guest-host
    [[ $t == iperf-r ]] && dirn=host-guest
    echo "$backend $dirn $(field "$RESULT" receiver_mbps) $(field "$RESULT" retransmits)" >>"$results"
    line+=" $dirn $(field "$RESULT" receiver_mbps) Mbit/s (retr $(field "$RESULT" retransmits));"
  done
  echo "round $round $backend:$line"
  if qlib_result "$name" link; then
    echo "round $round $backend: negotiated $(qlib_feature_names "$(field "$RESULT" features)")"
  fi
}

round_uvhost() {
  local r=$1 sock=$dir/uv-$1.sock tap=uvqu$$
  ilib_serve_start "uv-$r" -- --port "sock=$sock,backend=tap,tap=$tap,name=p0" || return 0
  qlib_tap_up "$tap" "$host_ip" || return 0
  measure uvhost "$r" "$sock" || true
  ilib_serve_stop "uv-$r"
}

round_testpmd() {
  local r=$1 sock=$dir/tp-$1.sock tap=uvqt$$ log=$dir/testpmd-$1.log
  "${NS[@]}" timeout -k 5 -s INT $((QLIB_GUEST_S + 60)) "${TESTPMD:-dpdk-testpmd}" --no-huge -m 512 --no-pci \
    --lcores '0@0,1@0' --file-prefix "uvh-iperf-$$-$r" \
    --vdev "net_vhost0,iface=$sock,queues=1" --vdev "net_tap0,iface=$tap" -- \
    --total-num-mbufs=16384 --forward-mode=io --stats-period 1 >"$log" 2>&1 &
  local tp=$!
  ILIB_PIDS+=("$tp")
  if ! ilib_wait_until "$ILIB_WAIT_S" tp_ready "$log" "$tp"; then
    fail "testpmd did not start forwarding: $(tail -n 5 "$log")"
    ilib_stop_pid "$tp" INT 10 || true
    return 0
  fi
  qlib_tap_up "$tap" "$host_ip" || { ilib_stop_pid "$tp" INT 10 || true; return 0; }
  measure testpmd "$r" "$sock" || true
  ilib_stop_pid "$tp" INT 15 || true
  rm -rf "/var/run/dpdk/uvh-iperf-$$-$r"
}
# shellcheck disable=SC2317  # called through ilib_wait_until
tp_ready() { grep -q "start packet forwarding" "$1" 2>/dev/null || ! ilib_alive "$2"; }

run() {
  qlib_prepare || return 0
  ilib_netns_create qemu || return 0
  local r
  for ((r = 1; r <= rounds; r++)); do
    round_uvhost "$r"
    round_testpmd "$r"
  done
  echo
  echo "iperf3 TCP, receiver Mbit/s as the guest reports it ($rounds runs each, alternated; ${secs} s per run)"
  awk '{ k = $1 " " $2; n[k]++; s[k] += $3; q[k] += $3 * $3; r[k] += $4
         if (!(k in mn) || $3 < mn[k]) mn[k] = $3; if (!(k in mx) || $3 > mx[k]) mx[k] = $3 }
       END {
         printf "| %-8s | %-10s | %4s | %8s | %7s | %8s | %8s | %11s |\n", "backend", "direction", "runs", "mean", "sd", "min", "max", "retransmits"
         printf "|----------|------------|------|----------|---------|----------|----------|-------------|\n"
         split("uvhost guest-host,testpmd guest-host,uvhost host-guest,testpmd host-guest", order, ",")
         for (i = 1; i <= 4; i++) { k = order[i]; if (!(k in n)) continue
           sd = n[k] > 1 ? sqrt((q[k] - s[k] * s[k] / n[k]) / (n[k] - 1)) : 0
           split(k, p, " ")
           printf "| %-8s | %-10s | %4d | %8.1f | %7.1f | %8.1f | %8.1f | %11.1f |\n", p[1], p[2], n[k], s[k] / n[k], sd, mn[k], mx[k], r[k] / n[k] }
       }' "$results"
  local got
  got=$(wc -l <"$results")
  ((got == 4 * rounds)) || fail "$got of $((4 * rounds)) figures measured"
}

run
ilib_finish "iperf3 through uvhost and testpmd"
