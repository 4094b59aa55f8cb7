# shellcheck shell=bash disable=SC2034,SC2154  # sourced; globals are read by the sourcing script
# lib.sh - helpers of the QEMU end-to-end tests: a real Linux guest (its virtio-net
# driver) on `uvhost serve` through QEMU's vhost-user netdev. Sourced, not run.
#
#   source "$HERE/lib.sh"         # also sources ../interop/lib.sh (ilib_*: temp dir,
#                                 # process and namespace cleanup, serve start/stop, ctl)
#   ilib_init TAG
#   qlib_prepare || exit          # builds or finds the guest (scripts/build-guest.sh),
#                                 # chooses the accelerator
#   qlib_guest_start NAME --sock PATH [--server] [--cpu C] [--mac MAC] [--limit S]
#                    [--smp N] [--queues N] [--device-opts O] [--tap IFNAME] [--io-cpu C]
#                    [--reconnect S] [--machine M] [--qemu-arg A]... -- ARGS...
#   qlib_wait_marker NAME REGEX SECONDS && echo "$MARKER"
#   qlib_guest_wait NAME SECONDS  # until the guest powered off (bounded)
#   qlib_result NAME TEST         # RESULT = its "UVHOST-TEST: name=TEST ..." line; 0 if PASS
#
# Contract
# --------
#  - The guest is scripts/build-guest.sh's kernel + initramfs; what it runs and prints is
#    scripts/guest-init.sh's contract (kernel command line `uvhost.*=` in, lines
#    `UVHOST-TEST: name=... result=PASS|FAIL key=value...` out on the serial console).
#    Every verdict of these tests is read from that output (the guest's own view), plus
#    what uvhost and the host kernel count.
#  - QEMU: `-accel tcg` unless KVM is usable and a guest really boots under it (probed
#    once per guest build, remembered in the guest's cache folder; UVHOST_QEMU_ACCEL=tcg|kvm
#    forces one), one vCPU (--smp N: N) pinned with taskset (CPU 1 by default, --cpu
#    takes a taskset list; uvhost serve runs on CPU 0), QEMU's other threads (its main
#    loop: device emulation, a tap netdev's I/O, vhost-user's call eventfds) there too,
#    or on --io-cpu C when given (the vCPU threads, "CPU n/TCG", are then moved to
#    --cpu as soon as QEMU's pid is known); --queues N: the netdev's queues=N
#    and the device's mq=on (N queue pairs; the guest's driver uses min(N, vCPUs));
#    --device-opts: more virtio-net-pci properties (e.g. host_mtu=9000); --reconnect S:
#    the chardev's reconnect=S (QEMU 7.2's spelling: when the backend goes away QEMU
#    connects again every S seconds and replays the device's state); --machine M:
#    QEMU's -machine (default pc; q35 for intel-iommu); --qemu-arg A: one more QEMU
#    argument, repeatable (e.g. -qmp, -incoming for migration), given before the
#    network device (so a -device it adds, e.g. a pcie-root-port, can be the device's
#    bus= in --device-opts); --tap IFNAME:
#    no vhost-user but QEMU's own virtio-net on a kernel tap it creates itself
#    (`-netdev tap,ifname=IFNAME,script=no,downscript=no,vhost=off`; QEMU runs in the
#    namespace NS, if any, so the tap is made there: configure it after the start), guest memory a shared memfd (vhost-user needs the fd), virtio-net-pci with
#    vectors=0 (QEMU 7.2 + TCG + vhost-user crashes with MSI-X vectors, PEERS.md),
#    -nodefaults -nographic, the serial console into $dir/guest-NAME.log, -no-reboot
#    (the guest's poweroff or a panic ends QEMU), and the whole run under `timeout`
#    (--limit s, default QLIB_GUEST_S); no option ROM (romfile=: no iPXE to wait for). The QEMU process is remembered and stopped on exit
#    like every ilib process; its pid (not timeout's) is QEMU_PID[NAME].
#  - Every wait is bounded and ends early when the guest's QEMU is gone.
#  - The guest's markers are whole lines; $dir is kept on failure with every log.

QLIB_HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
QLIB_ROOT=$(cd "$QLIB_HERE/../.." && pwd)
# shellcheck source=../interop/lib.sh
source "$QLIB_HERE/../interop/lib.sh"

QEMU=${QEMU:-qemu-system-x86_64}
QLIB_GUEST_S=${QLIB_GUEST_S:-240}   # one guest's whole life (boot 5 s idle, 30+ s loaded)
QLIB_MEM_MB=${QLIB_MEM_MB:-256}
QLIB_ACCEL=""
GUEST_KERNEL="" GUEST_INITRD="" GUEST_VERSION=""
declare -A QEMU_PID=()     # guest name -> QEMU's pid
declare -A QEMU_WRAP=()    # guest name -> the `timeout` wrapping it (our child)
declare -A QEMU_SMP=()       # guest name -> its vCPU count
declare -A QEMU_VCPU_CPU=()  # guest name -> the CPUs of its vCPU threads when they differ from QEMU's
MARKER="" RESULT=""

# ---------------------------------------------------------------- the guest

qlib_prepare() {
  local line
  if ! line=$("$QLIB_ROOT/scripts/build-guest.sh" --quiet | tail -n 1); then
    fail "scripts/build-guest.sh failed"
    return 1
  fi
  eval "$line"
  [[ -s $GUEST_KERNEL && -s $GUEST_INITRD ]] || { fail "build-guest.sh printed no guest: $line"; return 1; }
  qlib_choose_accel
  note "# guest: Linux $GUEST_VERSION, $(basename "$(dirname "$GUEST_KERNEL")"); qemu: $("$QEMU" --version | head -n 1); accel: $QLIB_ACCEL"
}

# KVM only when it is there and a guest actually boots under it: on the machines this
# was written on /dev/kvm is a nested device on which a stock kernel does not boot.
qlib_choose_accel() {
  local cache
  cache=$(dirname "$GUEST_KERNEL")/accel
  if [[ -n ${UVHOST_QEMU_ACCEL:-} ]]; then QLIB_ACCEL=$UVHOST_QEMU_ACCEL; return; fi
  if [[ ! -w /dev/kvm ]]; then QLIB_ACCEL=tcg; return; fi
  if [[ -s $cache ]]; then QLIB_ACCEL=$(cat "$cache"); return; fi
  # Probe: no network device, the guest's `idle` test; it must print its result in 60 s.
  local log=$dir/kvm-probe.log
  timeout -k 5 60 "$QEMU" -accel kvm -m "$QLIB_MEM_MB" -smp 1 -kernel "$GUEST_KERNEL" -initrd "$GUEST_INITRD" \
    -append "console=ttyS0 loglevel=4 panic=-1 uvhost.tests=idle" -nodefaults -nographic \
    -serial "file:$log" -no-reboot </dev/null >/dev/null 2>&1 || true
  if grep -q "UVHOST-TEST: name=idle result=PASS" "$log" 2>/dev/null; then QLIB_ACCEL=kvm; else QLIB_ACCEL=tcg; fi
  echo "$QLIB_ACCEL" >"$cache"
}

# qlib_guest_start NAME --sock PATH [--server] [--cpu C] [--mac MAC] [--limit S] -- ARGS...
# Boots guest NAME on the vhost-user socket PATH (QEMU connects; --server: QEMU listens,
# server=on,wait=on, and starts the guest only once a backend connected). ARGS go on the
# kernel command line (uvhost.tests=..., uvhost.ip=..., see guest-init.sh). Returns once
# QEMU wrote its pid file (or failed: then 1).
qlib_guest_start() {
  local name=$1 sock="" server=0 cpu=1 mac=52:54:00:12:34:56 limit=$QLIB_GUEST_S smp=1 queues=1 devopts="" tapname="" iocpu="" reconnect="" machine=pc
  local -a qemu_args=()
  shift
  while (($#)); do
    case $1 in
      --sock) sock=$2; shift 2 ;;
      --server) server=1; shift ;;
      --cpu) cpu=$2; shift 2 ;;
      --mac) mac=$2; shift 2 ;;
      --limit) limit=$2; shift 2 ;;
      --smp) smp=$2; shift 2 ;;
      --queues) queues=$2; shift 2 ;;
      --device-opts) devopts=$2; shift 2 ;;
      --tap) tapname=$2; shift 2 ;;
      --io-cpu) iocpu=$2; shift 2 ;;
      --reconnect) reconnect=$2; shift 2 ;;
      --machine) machine=$2; shift 2 ;;
      --qemu-arg) qemu_args+=("$2"); shift 2 ;;
      --) shift; break ;;
      *) fail "qlib_guest_start: unknown option $1"; return 1 ;;
    esac
  done
  local chardev="socket,id=c0,path=$sock" pidfile=$dir/qemu-$name.pid netdev=vhost-user,id=n0,chardev=c0
  local device="virtio-net-pci,netdev=n0,mac=$mac,vectors=0,romfile="
  ((server)) && chardev+=",server=on,wait=on"
  [[ -n $reconnect ]] && chardev+=",reconnect=$reconnect"
  local -a inns=() chardev_args=(-chardev "$chardev")
  if [[ -n $tapname ]]; then
    netdev="tap,id=n0,ifname=$tapname,script=no,downscript=no,vhost=off"
    inns=("${NS[@]}")
    chardev_args=()
  fi
  ((queues > 1)) && { netdev+=",queues=$queues"; device+=",mq=on"; }
  [[ -n $devopts ]] && device+=",$devopts"
  rm -f "$pidfile"
  : >"$dir/guest-$name.log"
  QEMU_VCPU_CPU[$name]=""
  QEMU_SMP[$name]=$smp
  [[ -n $iocpu ]] && QEMU_VCPU_CPU[$name]=$cpu
  "${inns[@]}" timeout -k 5 "$limit" taskset -c "${iocpu:-$cpu}" "$QEMU" -name "uvhost-$name,debug-threads=on" -accel "$QLIB_ACCEL" -machine "$machine" \
    -m "$QLIB_MEM_MB" -smp "$smp" \
    -object "memory-backend-memfd,id=mem,size=${QLIB_MEM_MB}M,share=on" -numa node,memdev=mem \
    -kernel "$GUEST_KERNEL" -initrd "$GUEST_INITRD" \
    -append "console=ttyS0 loglevel=4 panic=-1 $*" \
    "${qemu_args[@]}" "${chardev_args[@]}" -netdev "$netdev" -device "$device" \
    -nodefaults -nographic -serial "file:$dir/guest-$name.log" -no-reboot -pidfile "$pidfile" \
    </dev/null >"$dir/qemu-$name.out" 2>&1 &
  QEMU_WRAP[$name]=$!
  ILIB_PIDS+=("$!")
  # With server=on,wait=on QEMU writes its pid file only after the backend connected:
  # then the caller waits for the pid later (qlib_guest_pid).
  ((server)) && return 0
  qlib_guest_pid "$name" 20
}

# Waits up to SECONDS for NAME's pid file: QEMU_PID[NAME]. 1 when QEMU did not get there.
qlib_guest_pid() {
  local name=$1 seconds=$2 pidfile=$dir/qemu-$1.pid
  if ! ilib_wait_until "$seconds" qlib_pid_ready "$name"; then :; fi
  if [[ ! -s $pidfile ]]; then
    fail "QEMU ($name) did not start: $(tail -n 5 "$dir/qemu-$name.out")"
    return 1
  fi
  QEMU_PID[$name]=$(cat "$pidfile")
  [[ -n ${QEMU_VCPU_CPU[$name]:-} ]] && qlib_pin_vcpus "$name" "${QEMU_VCPU_CPU[$name]}" "${QEMU_SMP[$name]}"
  return 0
}

# Moves NAME's vCPU threads (named "CPU n/TCG" or "CPU n/KVM" with debug-threads=on)
# to CPUS.
# QEMU writes its pid file before it creates the vCPU threads: looks for them for up to
# 20 s (until as many as the guest has, -smp, are there).
qlib_pin_vcpus() {
  local name=$1 cpus=$2 want=$3 task moved i
  for ((i = 0; i < 200; i++)); do
    moved=0
    for task in /proc/"${QEMU_PID[$name]}"/task/*; do
      if grep -Eq '^CPU [0-9]+/(TCG|KVM)$' "$task/comm" 2>/dev/null; then
        taskset -pc "$cpus" "${task##*/}" >/dev/null && ((moved += 1))
      fi
    done
    ((moved >= want)) && return 0
    qlib_guest_alive "$name" || break
    sleep 0.1
  done
  fail "guest $name: found $moved of $want vCPU threads to pin to CPU $cpus"
}
qlib_pid_ready() { [[ -s $dir/qemu-$1.pid ]] || ! ilib_alive "${QEMU_WRAP[$1]}"; }

qlib_guest_alive() { ilib_alive "${QEMU_WRAP[$1]}"; }

# qlib_wait_marker NAME REGEX SECONDS: waits until a line of NAME's console matches the
# extended REGEX; MARKER = the last such line. 1 (no fail printed) on timeout or when the
# guest is gone first.
qlib_wait_marker() {
  local name=$1 regex=$2 seconds=$3 log=$dir/guest-$1.log i
  MARKER=""
  for ((i = 0; i < seconds * 10; i++)); do
    if grep -Eq "$regex" "$log" 2>/dev/null; then
      MARKER=$(grep -E "$regex" "$log" | tail -n 1 | tr -d '\r')
      return 0
    fi
    if ! qlib_guest_alive "$name"; then
      grep -Eq "$regex" "$log" 2>/dev/null && { MARKER=$(grep -E "$regex" "$log" | tail -n 1 | tr -d '\r'); return 0; }
      return 1
    fi
    sleep 0.1
  done
  return 1
}

# Waits (up to SECONDS) until NAME's QEMU ended; 1 (fail) when it had to be stopped, or
# QEMU itself reported an error.
qlib_guest_wait() {
  local name=$1 seconds=$2 rc=0
  ilib_wait_until "$seconds" qlib_guest_gone "$name" || true
  if qlib_guest_alive "$name"; then
    fail "guest $name still running after ${seconds}s: stopped"
    ilib_stop_pid "${QEMU_WRAP[$name]}" TERM 5 || true
    return 1
  fi
  ilib_stop_pid "${QEMU_WRAP[$name]}" TERM 1 || rc=$?
  if ((rc == 124)); then fail "guest $name: QEMU ran past its time limit"; return 1; fi
  if ((rc != 0)); then fail "guest $name: QEMU exited $rc: $(tail -n 3 "$dir/qemu-$name.out")"; return 1; fi
}
qlib_guest_gone() { ! qlib_guest_alive "$1"; }

# Stops NAME's QEMU now (a guest in its hold period): SIGTERM, QEMU exits at once.
qlib_guest_stop() { ilib_stop_pid "${QEMU_WRAP[$1]}" TERM 10 || true; }

# qlib_result NAME TEST: RESULT = the guest's line for TEST (empty if none); 0 when it
# says PASS, else 1 with the failure reported.
qlib_result() {
  local name=$1 test=$2
  RESULT=$(grep -E "^UVHOST-TEST: name=$test " "$dir/guest-$name.log" 2>/dev/null | tail -n 1 | tr -d '\r' || true)
  if [[ -z $RESULT ]]; then
    fail "guest $name printed no result for $test; console tail:"
    tail -n 15 "$dir/guest-$name.log" | sed 's/^/  | /'
    return 1
  fi
  if [[ $(field "$RESULT" result) != PASS ]]; then
    fail "guest $name: $RESULT"
    return 1
  fi
}

# The guest's eth0 counters line (UVHOST-STATS: ...), or empty.
qlib_guest_stats() { grep '^UVHOST-STATS:' "$dir/guest-$1.log" 2>/dev/null | tail -n 1 | tr -d '\r' || true; }

# qlib_feature_names BITS: the virtio-net feature names of a sysfs features string
# (64 characters '0'/'1', bit 0 first).
qlib_feature_names() {
  local bits=$1 i names=()
  local -A known=([0]=CSUM [1]=GUEST_CSUM [2]=CTRL_GUEST_OFFLOADS [3]=MTU [5]=MAC [7]=GUEST_TSO4
    [8]=GUEST_TSO6 [9]=GUEST_ECN [10]=GUEST_UFO [11]=HOST_TSO4 [12]=HOST_TSO6 [13]=HOST_ECN
    [14]=HOST_UFO [15]=MRG_RXBUF [16]=STATUS [17]=CTRL_VQ [18]=CTRL_RX [19]=CTRL_VLAN
    [21]=GUEST_ANNOUNCE [22]=MQ [23]=CTRL_MAC_ADDR [24]=NOTIFY_ON_EMPTY [27]=ANY_LAYOUT
    [28]=RING_INDIRECT_DESC [29]=RING_EVENT_IDX [32]=VERSION_1 [33]=ACCESS_PLATFORM
    [34]=RING_PACKED [35]=IN_ORDER [36]=ORDER_PLATFORM [37]=SR_IOV [38]=NOTIFICATION_DATA
    [54]=GUEST_USO4 [55]=GUEST_USO6 [56]=HOST_USO [63]=SPEED_DUPLEX)
  for ((i = 0; i < ${#bits}; i++)); do
    [[ ${bits:i:1} == 1 ]] && names+=("${known[$i]:-bit$i}")
  done
  echo "${names[*]}"
}

# ---------------------------------------------------------------- host side

# A tap port's host end: waits for TAP in the namespace, gives it ADDR/24, sets it up.
qlib_tap_up() {
  local tap=$1 addr=$2
  ilib_wait_link "$tap" || return 1
  "${NS[@]}" ip addr add "$addr/24" dev "$tap"
  "${NS[@]}" ip link set "$tap" up
}

# iperf3 -s in the namespace, bound to ADDR, on CPU C (default 0): IPERF_PID.
IPERF_PID=""
qlib_iperf_server() {
  local addr=$1 cpu=${2:-0}
  "${NS[@]}" taskset -c "$cpu" iperf3 -s -B "$addr" >"$dir/iperf3-server.log" 2>&1 &
  IPERF_PID=$!
  ILIB_PIDS+=("$IPERF_PID")
  sleep 0.5
  ilib_alive "$IPERF_PID" || { fail "iperf3 -s did not start: $(cat "$dir/iperf3-server.log")"; return 1; }
}

# qlib_missing_features NAMES WANTED...: the WANTED feature names missing from NAMES (a
# space-separated list, as qlib_feature_names prints it); empty when none is.
qlib_missing_features() {
  local names=" $1 " want missing=(); shift
  for want in "$@"; do [[ $names == *" $want "* ]] || missing+=("$want"); done
  echo "${missing[*]}"
}

# uvhost's `ctl stats --json`, port P: "rx_packets rx_dropped tx_packets tx_dropped"
# summed over the port's queues (rx: taken from the guest; tx: delivered to it).
qlib_port_counts() {
  local stats=$1 port=$2
  jq -r --arg p "$port" '[.ports[] | select(.name == $p) | .queues[]] as $q
    | [($q | map(select(.direction == "rx") | .packets) | add // 0),
       ($q | map(select(.direction == "rx") | .dropped) | add // 0),
       ($q | map(select(.direction == "tx") | .packets) | add // 0),
       ($q | map(select(.direction == "tx") | .dropped) | add // 0)] | map(tostring) | join(" ")' <<<"$stats"
}

# A process's open fd count.
qlib_fd_count() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
