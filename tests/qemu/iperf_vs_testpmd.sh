#!/usr/bin/env bash
# iperf_vs_testpmd.sh - iperf3 TCP throughput and CPU cost of the same Linux guest through
# three host sides, alternated in every round: uvhost's tap backend, DPDK's vhost PMD
# forwarding to a DPDK tap, and QEMU's own virtio-net on a kernel tap (no vhost-user).
#
#   iperf_vs_testpmd.sh --uvhost PATH [--rounds 4] [--secs 5]
#                       [--arrangements uvhost,testpmd,qemu-tap] [--port-extra KEYS]
#                       [--qemu-cpus LIST] [--qemu-io-cpu C] [--uvhost-b PATH]
#                       [--port-extra-b KEYS] [--iommu off|strict|lazy]
#                       [--tap-rps MASK]
#
# Each round boots the guest once per arrangement (the order rotates from round to round,
# so no arrangement always goes first), and each boot prints the negotiated virtio
# features, runs `iperf3 -c 10.0.0.1 -t SECS` (guest -> host), then the same with -R
# (host -> guest), against an iperf3 -s in a private network namespace on the tap's
# address:
#   uvhost:   uvhost serve --port sock=S,backend=tap,tap=T[,KEYS]          (CPU 0)
#   testpmd:  dpdk-testpmd --vdev net_vhost0,iface=S --vdev net_tap0,iface=T
#             --forward-mode=io, no hugepages (--no-huge -m 512, 16384 mbufs), both
#             lcores on CPU 0
#   qemu-tap: QEMU's -netdev tap,ifname=T,script=no,downscript=no,vhost=off (QEMU
#             started inside the namespace; no /dev/vhost-net here)
#   uvhost-b: like uvhost with another build (--uvhost-b PATH, default the --uvhost
#             one) and its own port keys (--port-extra-b KEYS instead of --port-extra),
#             to compare two builds or two settings of uvhost in one run (add it to
#             --arrangements)
# The same guest image, MAC, addresses, virtio-net-pci options (vectors=0) and CPU
# placement: QEMU (all its threads) on CPU 1, the backend process and iperf3 -s on CPU 0;
# --qemu-cpus LIST puts QEMU on those CPUs instead (e.g. 0,1: the scheduler decides);
# with --qemu-io-cpu C, only QEMU's vCPU thread stays there and its other threads
# (the main loop: qemu-tap's tap I/O, vhost-user's interrupt injection) run on C.
# --iommu strict|lazy puts every arrangement's device behind a virtual IOMMU, as
# qemu_test.sh's iommu case does: -machine q35, -device intel-iommu,intremap=off,
# device-iotlb=on, the device on a -device pcie-root-port,id=rp0,chassis=1 with
# iommu_platform=on,ats=on,bus=rp0, and the guest's kernel with intel_iommu=on and
# iommu.strict=1 (strict: each buffer unmapped, the IOTLB invalidated, as soon as it is
# used) or iommu.strict=0 (lazy: invalidations batched); testpmd's vhost PMD then gets
# iommu-support=1 (without it DPDK offers no ACCESS_PLATFORM and QEMU refuses the
# device), uvhost's ports offer it always, and qemu-tap's device translates in QEMU.
# Default off: machine pc, no IOMMU.
# --tap-rps MASK sets every arrangement's tap's receive packet steering (its
# queues/rx-*/rps_cpus, a hex CPU mask, checked as such; the kernel's Documentation/networking/
# scaling.rst): what a process writes into the tap (the guest's frames, handed over by
# uvhost's worker, testpmd or QEMU's main loop) is then taken into the host's stack on
# those CPUs instead of in the writer's own system call. Default: left as it is (0,
# none).
#
# Figures per boot and direction: iperf3's receiver-side Mbit/s as the guest reports
# it, the sender's retransmits, and the CPU time (utime + stime from /proc/PID/stat) of
# QEMU and of the backend process (uvhost serve, testpmd; none for qemu-tap, whose tap
# work the kernel charges to QEMU's threads) over the test's window: from the guest's
# "UVHOST-BEGIN: name=iperf" line to its iperf result line (the window holds iperf3's
# connection setup too, the same for every arrangement). Throughput per CPU-second =
# Mbit moved (receiver Mbit/s x SECS) / CPU seconds of QEMU + backend in the window.
#
# The guest reports its own side of each run (scripts/guest-init.sh's iperf keys): the
# virtio devices' interrupts, eth0's frames, the kicks (notifications) it sent the device
# on its transmit and receive queues, and its vCPU's busy and softirq share; the
# second table gives them per MB moved, to tell a backend that makes the guest work
# more per byte from one that makes it wait.
#
# Output: one line per boot, then per arrangement and direction the mean with its 95%
# confidence interval (Student t, n-1 degrees of freedom) of Mbit/s, retransmits,
# CPU-seconds and Mbit per CPU-second, and the ratios uvhost / qemu-tap and uvhost /
# testpmd from the rounds' paired ratios (geometric mean, 95% CI of the mean log
# ratio). Exit 0 when every boot produced both figures, 1 otherwise, 77 when not root
# (testpmd missing: that arrangement is left out, with a note).
set -euo pipefail
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
# shellcheck source=lib.sh
source "$HERE/lib.sh"

uvhost="" rounds=4 secs=5 arrangements=uvhost,testpmd,qemu-tap port_extra="" io_cpu="" qemu_cpus=1 uvhost_b="" port_extra_b="" iommu=off tap_rps=""
while (($#)); do
  case $1 in
    --uvhost) uvhost=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --secs) secs=$2; shift 2 ;;
    --arrangements) arrangements=$2; shift 2 ;;
    --port-extra) port_extra=$2; shift 2 ;;
    --qemu-io-cpu) io_cpu=$2; shift 2 ;;
    --qemu-cpus) qemu_cpus=$2; shift 2 ;;
    --uvhost-b) uvhost_b=$2; shift 2 ;;
    --port-extra-b) port_extra_b=$2; shift 2 ;;
    --iommu) iommu=$2; shift 2 ;;
    --tap-rps) tap_rps=$2; shift 2 ;;
    *) echo "iperf_vs_testpmd.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done
[[ -x $uvhost && $rounds =~ ^[0-9]+$ && $secs =~ ^[0-9]+$ && $arrangements =~ ^[a-z,-]+$ && $iommu =~ ^(off|strict|lazy)$ && $tap_rps =~ ^[0-9a-fA-F,]*$ ]] ||
  { echo "usage: iperf_vs_testpmd.sh --uvhost PATH [--rounds N] [--secs N] [--arrangements uvhost,testpmd,qemu-tap,uvhost-b] [--port-extra KEYS] [--qemu-cpus LIST] [--qemu-io-cpu C] [--uvhost-b PATH] [--port-extra-b KEYS] [--iommu off|strict|lazy] [--tap-rps MASK]" >&2; exit 64; }
[[ $(id -u) -eq 0 ]] || { echo "not root (network namespace and tap needed): skipped"; exit 77; }
IFS=, read -r -a order <<<"$arrangements"
[[ -z $uvhost_b ]] && uvhost_b=$uvhost
if [[ " ${order[*]} " == *" uvhost-b "* && ! -x $uvhost_b ]]; then
  echo "iperf_vs_testpmd.sh: --uvhost-b $uvhost_b is not an executable uvhost" >&2
  exit 64
fi
if [[ " ${order[*]} " == *" testpmd "* ]] && ! command -v "${TESTPMD:-dpdk-testpmd}" >/dev/null; then
  echo "note: ${TESTPMD:-dpdk-testpmd} not found: the testpmd arrangement is left out"
  read -r -a order <<<"$(tr ' ' '\n' <<<"${order[*]}" | grep -vx testpmd | tr '\n' ' ')"
fi
# The virtual IOMMU (--iommu): QEMU's options (qlib_guest_start's), the guest's kernel
# arguments, testpmd's vhost PMD key.
iommu_qemu=() iommu_kernel=() iommu_vdev=""
if [[ $iommu != off ]]; then
  # shellcheck disable=SC2054  # the commas are QEMU's: one -device's properties
  iommu_qemu=(--machine q35 --qemu-arg -device --qemu-arg intel-iommu,intremap=off,device-iotlb=on
    --qemu-arg -device --qemu-arg pcie-root-port,id=rp0,chassis=1 --device-opts iommu_platform=on,ats=on,bus=rp0)
  iommu_kernel=(intel_iommu=on "iommu.strict=$([[ $iommu == strict ]] && echo 1 || echo 0)")
  iommu_vdev=",iommu-support=1"
fi
ilib_init qemu-iperf
CLK_TCK=$(getconf CLK_TCK)
echo "# $(date -u +'%F %T') load $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1)); $rounds rounds x (${order[*]}), iperf3 ${secs} s each way; QEMU's vCPU on CPU $qemu_cpus, its other threads on CPU ${io_cpu:-$qemu_cpus}; IOMMU $iommu${iommu_kernel[*]:+ (${iommu_kernel[*]})}${tap_rps:+; RPS CPU mask of the taps $tap_rps}"

host_ip=10.0.0.1 guest_ip=10.0.0.2
results=$dir/results.txt   # arrangement round direction mbps retransmits cpu_qemu cpu_backend window_s
#                            guest_irqs guest_tx_frames guest_rx_frames guest_busy_pct guest_softirq_pct
#                            guest_tx_kicks guest_rx_kicks
: >"$results"

# TAP up with HOST/24 (qlib_tap_up), then its receive packet steering (--tap-rps).
tap_up() {
  local tap=$1 addr=$2 queue
  qlib_tap_up "$tap" "$addr" || return 1
  [[ -z $tap_rps ]] && return 0
  for queue in $("${NS[@]}" sh -c "ls -d /sys/class/net/$tap/queues/rx-*"); do
    "${NS[@]}" sh -c "echo $tap_rps >$queue/rps_cpus" || { fail "$tap: cannot set $queue/rps_cpus to $tap_rps"; return 1; }
  done
}

# CPU seconds (utime + stime, every thread) of PID; empty when it is gone.
cpu_s() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  # Fields after the command name (which may hold spaces): 12 and 13 are utime, stime.
  awk -v t="$CLK_TCK" '{ printf "%.3f", ($12 + $13) / t }' <<<"${stat##*) }"
}
now_s() { awk '{ print $1 }' /proc/uptime; }

# One boot of the guest (NAME) with iperf3 -s on the host address: waits for the guest's
# markers, sampling the CPU time of QEMU and of BACKEND_PID (empty: none) at the edges
# of each iperf test; appends its figures to $results.
measure() {
  local arrangement=$1 round=$2 backend_pid=$3; shift 3
  local name=$arrangement-$round t
  # The tap (and its address, which iperf3 -s binds) exists before the guest starts,
  # except QEMU's own: made by QEMU, configured once it is there (the guest waits for
  # its peer to answer a ping before iperf3 begins).
  if [[ $arrangement != qemu-tap ]]; then qlib_iperf_server "$host_ip" 0 || return 1; fi
  qlib_guest_start "$name" --cpu "$qemu_cpus" ${io_cpu:+--io-cpu "$io_cpu"} "${iommu_qemu[@]}" "$@" -- uvhost.tests=link,iperf,iperf-r \
    uvhost.ip="$guest_ip/24" uvhost.peer="$host_ip" uvhost.secs="$secs" uvhost.hold=1 "${iommu_kernel[@]}" || return 1
  if [[ $arrangement == qemu-tap ]]; then
    tap_up "$tap" "$host_ip" || return 1
    qlib_iperf_server "$host_ip" 0 || return 1
  fi
  local iperf_pid=$IPERF_PID
  local qemu_pid=${QEMU_PID[$name]} log=$dir/guest-$name.log
  local -A cpu_q=() cpu_b=() at=()
  # Edges: b1 = iperf begins, e1 = its result (guest -> host); b2, e2 the same for iperf-r.
  # (uvhost.hold=1 keeps the guest, and so QEMU's /proc entry, up for a second after its
  # last result: without it QEMU could exit before e2's CPU sample and lose the figure.)
  local edge regex
  for edge in b1 e1 b2 e2; do
    case $edge in
      b1) regex='^UVHOST-BEGIN: name=iperf([^-]|$)' ;;
      e1) regex='^UVHOST-TEST: name=iperf ' ;;
      b2) regex='^UVHOST-BEGIN: name=iperf-r' ;;
      e2) regex='^UVHOST-TEST: name=iperf-r ' ;;
    esac
    if ! qlib_wait_marker_fast "$name" "$regex" "$QLIB_GUEST_S"; then
      fail "$name: no '$regex' line from the guest"
      break
    fi
    cpu_q[$edge]=$(cpu_s "$qemu_pid")
    cpu_b[$edge]=$([[ -n $backend_pid ]] && cpu_s "$backend_pid" || echo 0)
    at[$edge]=$(now_s)
  done
  qlib_wait_marker "$name" '^UVHOST-DONE' 60 || true
  qlib_guest_wait "$name" 30 || true
  ilib_stop_pid "$iperf_pid" TERM 5 || true
  local line="" dirn b e
  for t in iperf iperf-r; do
    qlib_result "$name" "$t" || continue
    if [[ $t == iperf ]]; then dirn=guest-host b=b1 e=e1; else dirn=host-guest b=b2 e=e2; fi
    [[ -n ${cpu_q[$e]:-} ]] || continue
    local cq cb w
    cq=$(awk -v a="${cpu_q[$b]}" -v z="${cpu_q[$e]}" 'BEGIN { printf "%.3f", z - a }')
    cb=$(awk -v a="${cpu_b[$b]}" -v z="${cpu_b[$e]}" 'BEGIN { printf "%.3f", z - a }')
    w=$(awk -v a="${at[$b]}" -v z="${at[$e]}" 'BEGIN { printf "%.2f", z - a }')
    local irqs txp rxp busy soft txk rxk
    irqs=$(field "$RESULT" guest_irqs) txp=$(field "$RESULT" eth_tx_packets) rxp=$(field "$RESULT" eth_rx_packets)
    busy=$(field "$RESULT" guest_busy_pct) soft=$(field "$RESULT" guest_softirq_pct)
    txk=$(field "$RESULT" guest_tx_kicks) rxk=$(field "$RESULT" guest_rx_kicks)
    echo "$arrangement $round $dirn $(field "$RESULT" receiver_mbps) $(field "$RESULT" retransmits) $cq $cb $w ${irqs:--} ${txp:--} ${rxp:--} ${busy:--} ${soft:--} ${txk:--} ${rxk:--}" >>"$results"
    line+=" $dirn $(field "$RESULT" receiver_mbps) Mbit/s (retr $(field "$RESULT" retransmits); CPU s qemu $cq backend $cb in ${w} s; guest: $irqs interrupts, $txp/$rxp frames out/in, $txk/$rxk kicks tx/rx, ${busy}% busy, ${soft}% softirq);"
  done
  echo "round $round $arrangement:$line"
  if qlib_result "$name" link; then
    echo "round $round $arrangement: negotiated $(qlib_feature_names "$(field "$RESULT" features)")"
  fi
}

# qlib_wait_marker, polling every 20 ms (the CPU samples sit close to the edges).
qlib_wait_marker_fast() {
  local name=$1 regex=$2 seconds=$3 log=$dir/guest-$1.log i
  for ((i = 0; i < seconds * 50; i++)); do
    grep -Eq "$regex" "$log" 2>/dev/null && return 0
    qlib_guest_alive "$name" || return 1
    sleep 0.02
  done
  return 1
}

# round_uvhost ROUND [ARRANGEMENT BINARY KEYS]: uvhost serve (the --uvhost build with
# --port-extra, or BINARY with KEYS).
round_uvhost() {
  local r=$1 arrangement=${2:-uvhost} sock=$dir/uv-$1.sock saved=$uvhost keys=$port_extra
  if [[ -n ${3:-} ]]; then uvhost=$3 keys=${4:-}; fi
  tap=uvqu$$
  ilib_serve_start "$arrangement-$r" -- --port "sock=$sock,backend=tap,tap=$tap,name=p0${keys:+,$keys}" ||
    { uvhost=$saved; return 0; }
  tap_up "$tap" "$host_ip" || { uvhost=$saved; return 0; }
  measure "$arrangement" "$r" "$SERVE_PID" --sock "$sock" || true
  ilib_serve_stop "$arrangement-$r"
  uvhost=$saved
}

round_testpmd() {
  local r=$1 sock=$dir/tp-$1.sock log=$dir/testpmd-$1.log
  tap=uvqt$$
  "${NS[@]}" timeout -k 5 -s INT $((QLIB_GUEST_S + 60)) "${TESTPMD:-dpdk-testpmd}" --no-huge -m 512 --no-pci \
    --lcores '0@0,1@0' --file-prefix "uvh-iperf-$$-$r" \
    --vdev "net_vhost0,iface=$sock,queues=1$iommu_vdev" --vdev "net_tap0,iface=$tap" -- \
    --total-num-mbufs=16384 --forward-mode=io --stats-period 1 >"$log" 2>&1 &
  local tp=$!
  ILIB_PIDS+=("$tp")
  if ! ilib_wait_until "$ILIB_WAIT_S" tp_ready "$log" "$tp"; then
    fail "testpmd did not start forwarding: $(tail -n 5 "$log")"
    ilib_stop_pid "$tp" INT 10 || true
    return 0
  fi
  tap_up "$tap" "$host_ip" || { ilib_stop_pid "$tp" INT 10 || true; return 0; }
  # `timeout` runs testpmd as its child: the CPU is the child's.
  measure testpmd "$r" "$(pgrep -P "$tp" | head -n 1)" --sock "$sock" || true
  ilib_stop_pid "$tp" INT 15 || true
  rm -rf "/var/run/dpdk/uvh-iperf-$$-$r"
}
# shellcheck disable=SC2317  # called through ilib_wait_until
tp_ready() { grep -q "start packet forwarding" "$1" 2>/dev/null || ! ilib_alive "$2"; }

round_qemu_tap() {
  local r=$1
  tap=uvqq$$
  measure qemu-tap "$r" "" --tap "$tap" || true
}

# The table: per arrangement and direction, mean and 95% CI of each figure, then the
# paired ratios of uvhost to the others.
report() {
  awk -v secs="$secs" '
    function tq(df) {  # two-sided 95% Student t quantile
      split("12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228 2.201 2.179 2.160 2.145 2.131 2.120 2.110 2.101 2.093 2.086", t, " ")
      return df <= 20 ? t[df] : 1.96 + 2.5 / df
    }
    function add(k, x) { n[k]++; s[k] += x; q[k] += x * x }
    function mean(k) { return s[k] / n[k] }
    function half(k,  sd) { if (n[k] < 2) return 0; sd = sqrt((q[k] - s[k] * s[k] / n[k]) / (n[k] - 1)); return tq(n[k] - 1) * sd / sqrt(n[k]) }
    function cell(k, f) { return sprintf(f " ± " f, mean(k), half(k)) }
    {
      a = $1; r = $2; d = $3; mb = $4; cpu = $6 + $7
      key = a SUBSEP d
      add(key SUBSEP "mbps", mb); add(key SUBSEP "retr", $5); add(key SUBSEP "cpuq", $6); add(key SUBSEP "cpub", $7)
      if (cpu > 0) add(key SUBSEP "eff", mb * secs / cpu)
      if ($9 ~ /^[0-9]+$/ && mb > 0) {  # the guest counters, per MB moved
        moved = mb * secs / 8
        add(key SUBSEP "irq", $9 / moved); add(key SUBSEP "frames", ($10 + $11) / moved)
        if ($9 > 0) add(key SUBSEP "fpi", ($10 + $11) / $9)
        add(key SUBSEP "busy", $12); add(key SUBSEP "soft", $13)
        if ($14 ~ /^[0-9]+$/) add(key SUBSEP "kicks", ($14 + $15) / moved)
      }
      seen[a] = 1; dirs[d] = 1
      val[a, r, d, "mbps"] = mb; if (cpu > 0) val[a, r, d, "eff"] = mb * secs / cpu
      rounds[r] = 1
    }
    END {
      printf "| arrangement | direction | runs | Mbit/s | retransmits | CPU s QEMU | CPU s backend | Mbit per CPU-second |\n"
      printf "|---|---|---|---|---|---|---|---|\n"
      split("guest-host host-guest", dl, " "); split("uvhost testpmd qemu-tap uvhost-b", al, " ")
      for (i = 1; i <= 2; i++) for (j = 1; j <= 4; j++) {
        k = al[j] SUBSEP dl[i]
        if (!((k SUBSEP "mbps") in n)) continue
        printf "| %s | %s | %d | %s | %s | %s | %s | %s |\n", al[j], dl[i], n[k SUBSEP "mbps"],
          cell(k SUBSEP "mbps", "%.0f"), cell(k SUBSEP "retr", "%.0f"), cell(k SUBSEP "cpuq", "%.2f"),
          cell(k SUBSEP "cpub", "%.2f"), ((k SUBSEP "eff") in n) ? cell(k SUBSEP "eff", "%.0f") : "-"
      }
      printf "\nThe guest side of the same runs (its virtio interrupts, eth0 frames and kicks to the device per MB moved, frames per interrupt, the share of its vCPU time busy and in softirq):\n\n"
      printf "| arrangement | direction | interrupts per MB | frames per MB | kicks per MB | frames per interrupt | guest busy %% | guest softirq %% |\n"
      printf "|---|---|---|---|---|---|---|---|\n"
      for (i = 1; i <= 2; i++) for (j = 1; j <= 4; j++) {
        k = al[j] SUBSEP dl[i]
        if (!((k SUBSEP "irq") in n)) continue
        printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", al[j], dl[i], cell(k SUBSEP "irq", "%.1f"), cell(k SUBSEP "frames", "%.1f"),
          ((k SUBSEP "kicks") in n) ? cell(k SUBSEP "kicks", "%.1f") : "-",
          ((k SUBSEP "fpi") in n) ? cell(k SUBSEP "fpi", "%.2f") : "-", cell(k SUBSEP "busy", "%.0f"), cell(k SUBSEP "soft", "%.0f")
      }
      printf "\nuvhost (and uvhost-b) / other, paired by round (geometric mean of the per-round ratios, 95%% CI):\n\n"
      printf "| ratio | direction | rounds | Mbit/s | Mbit per CPU-second |\n|---|---|---|---|---|\n"
      np = split("uvhost:testpmd uvhost:qemu-tap uvhost:uvhost-b uvhost-b:qemu-tap uvhost-b:testpmd", pairs, " ")
      for (j = 1; j <= np; j++) for (i = 1; i <= 2; i++) {
        split(pairs[j], ab, ":"); u = ab[1]; o = ab[2]; d = dl[i]; line = ""
        for (f = 1; f <= 2; f++) {
          fig = f == 1 ? "mbps" : "eff"; m = 0; ss = 0; c = 0
          for (r in rounds) if (((u, r, d, fig) in val) && ((o, r, d, fig) in val) && val[o, r, d, fig] > 0 && val[u, r, d, fig] > 0) {
            x = log(val[u, r, d, fig] / val[o, r, d, fig]); m += x; ss += x * x; c++
          }
          if (c == 0) { line = line " | -"; continue }
          mu = m / c; h = c > 1 ? tq(c - 1) * sqrt((ss - m * m / c) / (c - 1)) / sqrt(c) : 0
          line = line sprintf(" | %.2fx [%.2f, %.2f]", exp(mu), exp(mu - h), exp(mu + h))
          cnt = c
        }
        if (line != " | - | -") printf "| %s / %s | %s | %d%s |\n", u, o, d, cnt, line
      }
    }' "$results"
}

run() {
  qlib_prepare || return 0
  ilib_netns_create qemu || return 0
  local r i n=${#order[@]}
  for ((r = 1; r <= rounds; r++)); do
    for ((i = 0; i < n; i++)); do
      case ${order[(i + r - 1) % n]} in
        uvhost) round_uvhost "$r" ;;
        uvhost-b) round_uvhost "$r" uvhost-b "$uvhost_b" "$port_extra_b" ;;
        testpmd) round_testpmd "$r" ;;
        qemu-tap) round_qemu_tap "$r" ;;
        *) fail "unknown arrangement ${order[(i + r - 1) % n]}" ;;
      esac
    done
  done
  echo
  echo "iperf3 TCP, receiver Mbit/s as the guest reports it; mean ± 95% CI half-width over $rounds rounds (alternated, ${secs} s per run; IOMMU $iommu); CPU s: QEMU's and the backend's CPU time in the run's window"
  echo
  report
  local got
  got=$(wc -l <"$results")
  ((got == 2 * n * rounds)) || fail "$got of $((2 * n * rounds)) figures measured"
}

run
ilib_finish "iperf3 through ${order[*]}"
