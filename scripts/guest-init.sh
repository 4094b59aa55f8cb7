#!/bin/sh
# guest-init.sh - the /init of the QEMU test guest (busybox sh; built into the initramfs
# by scripts/build-guest.sh, run as PID 1 by the guest kernel).
#
# Contract
# --------
#  Reads its orders from the kernel command line (/proc/cmdline):
#    uvhost.tests=T1,T2,...   tests to run, in order (default: link)
#    uvhost.ip=ADDR/LEN       eth0's address (required by every test but link)
#    uvhost.peer=ADDR         the host (or other guest) the tests talk to
#    uvhost.count=N           ping: echo requests (default 2000)
#    uvhost.interval=S        ping: seconds between requests (default 0.002; 0: -A, the
#                             next request as soon as the reply came)
#    uvhost.secs=N            iperf: seconds of traffic (default 5)
#    uvhost.wait=N            seconds to wait for the peer's first echo reply (default 30)
#    uvhost.hold=N            seconds to stay up after the last test (default 0), so a
#                             peer can still reach us or the host can read counters
#  Tests (each prints one result line, see below):
#    link     eth0 exists, its driver is virtio_net, operstate up and carrier 1 after
#             `ip link set up`; prints the negotiated feature bits
#             (/sys/class/net/eth0/device/features: 64 '0'/'1' characters, bit 0 first)
#    ping     iputils' `ping -c COUNT -i INTERVAL -W 5 PEER` after the peer answered once:
#             PASS when every request was answered exactly once (its summary line)
#    iperf    `iperf3 -c PEER -t SECS -f m`: guest -> peer TCP; PASS with a throughput
#    iperf-r  the same with -R: peer -> guest
#    idle     nothing (for a guest that only answers, e.g. the second guest on a switch)
#  Output (serial console), one line each, easy to grep:
#    UVHOST-GUEST: up kernel=VERSION
#    UVHOST-BEGIN: name=TEST
#    UVHOST-TEST: name=TEST result=PASS|FAIL key=value...
#    UVHOST-STATS: tx_packets=N rx_packets=N tx_bytes=N rx_bytes=N tx_dropped=N rx_dropped=N
#       (eth0's counters, printed after the tests, before the hold)
#    UVHOST-DONE: passed=N failed=N
#  then `poweroff -f` (QEMU runs with -no-reboot, so a panic ends it too).
export PATH=/bin:/sbin:/usr/bin:/usr/sbin

mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /tmp /run
mount -t tmpfs tmp /tmp

arg() {  # arg NAME DEFAULT: the value of uvhost.NAME= on the kernel command line
  v=$(tr ' ' '\n' </proc/cmdline | sed -n "s/^uvhost\.$1=//p" | tail -n 1)
  echo "${v:-$2}"
}

say() { echo "$*" >/dev/console; }

say "UVHOST-GUEST: up kernel=$(uname -r)"

# The virtio-net driver and what it needs, in dependency order (a module that is not
# in the image is built into the kernel).
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci failover net_failover virtio_net; do
  f=$(find /lib/modules -name "$m.ko" | head -n 1)
  [ -n "$f" ] && insmod "$f" 2>/dev/null
done

tests=$(arg tests link)
ip_addr=$(arg ip "")
peer=$(arg peer "")
count=$(arg count 2000)
interval=$(arg interval 0.002)
secs=$(arg secs 5)
wait_s=$(arg wait 30)
hold=$(arg hold 0)

# eth0 appears when virtio_net probed the device.
i=0
while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
ip link set lo up
if [ -e /sys/class/net/eth0 ]; then
  [ -n "$ip_addr" ] && ip addr add "$ip_addr" dev eth0
  ip link set eth0 up
  # carrier follows the device's status (VIRTIO_NET_F_STATUS) or is 1 at once; operstate
  # follows carrier through the kernel's linkwatch work, up to a second later.
  i=0
  while { [ "$(cat /sys/class/net/eth0/carrier 2>/dev/null)" != 1 ] ||
          [ "$(cat /sys/class/net/eth0/operstate 2>/dev/null)" != up ]; } && [ $i -lt 100 ]; do
    sleep 0.1
    i=$((i + 1))
  done
fi

passed=0
failed=0
result() {  # result NAME PASS|FAIL key=value...
  say "UVHOST-TEST: name=$*"
  if [ "$2" = "result=PASS" ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}

# Waits until PEER answers one echo request (ARP resolved, the path up): up to wait_s s.
peer_reachable() {
  i=0
  while [ $i -lt "$wait_s" ]; do
    ping -c 1 -W 1 "$peer" >/dev/null 2>&1 && return 0
    i=$((i + 1))
  done
  return 1
}

t_link() {
  if [ ! -e /sys/class/net/eth0 ]; then result link result=FAIL why=no-eth0; return; fi
  driver=$(basename "$(readlink /sys/class/net/eth0/device/driver)")
  oper=$(cat /sys/class/net/eth0/operstate)
  carrier=$(cat /sys/class/net/eth0/carrier)
  features=$(cat /sys/class/net/eth0/device/features)
  mac=$(cat /sys/class/net/eth0/address)
  mtu=$(cat /sys/class/net/eth0/mtu)
  r=FAIL
  [ "$driver" = virtio_net ] && [ "$oper" = up ] && [ "$carrier" = 1 ] && r=PASS
  result link result="$r" driver="$driver" operstate="$oper" carrier="$carrier" mac="$mac" mtu="$mtu" features="$features"
}

t_ping() {
  if ! peer_reachable; then result ping result=FAIL why="peer-$peer-never-answered"; return; fi
  # iputils' ping, not busybox's: under TCG busybox's counted up to 3% fewer replies than
  # the guest's kernel had received (uvhost delivered every reply; the books in
  # tests/qemu's stats case agreed to the packet). -W 5: a reply may be late when the
  # vCPU was descheduled; iputils waits that long for the last ones too.
  if [ "$interval" = 0 ]; then
    out=$(iputils-ping -c "$count" -A -W 5 -q "$peer" 2>&1)  # the next request as soon as the reply came
  else
    out=$(iputils-ping -c "$count" -i "$interval" -W 5 -q "$peer" 2>&1)
  fi
  echo "$out" | grep -E 'transmitted|^rtt' | sed 's/^/ping: /' >/dev/console
  # "2000 packets transmitted, 2000 received, [+N duplicates, ][+N errors, ]0% packet loss, time 5003ms"
  summary=$(echo "$out" | grep 'packets transmitted')
  sent=$(echo "$summary" | sed -n 's/^\([0-9]*\) packets transmitted.*/\1/p')
  got=$(echo "$summary" | sed -n 's/.* \([0-9]*\) received.*/\1/p')
  loss=$(echo "$summary" | sed -n 's/.* \([0-9.]*%\) packet loss.*/\1/p')
  rtt=$(echo "$out" | sed -n 's/^rtt min\/avg\/max\/mdev = \([^ ]*\) ms.*/\1/p')
  r=FAIL
  [ "$sent" = "$count" ] && [ "$got" = "$count" ] && ! echo "$summary" | grep -Eq 'duplicates|errors' && r=PASS
  result ping result="$r" sent="${sent:-0}" received="${got:-0}" loss="${loss:-?}" rtt_ms="${rtt:-?}" peer="$peer"
}

t_iperf() {  # t_iperf NAME [-R]
  name=$1; shift
  if ! peer_reachable; then result "$name" result=FAIL why="peer-$peer-never-answered"; return; fi
  out=$(iperf3 -c "$peer" -t "$secs" -f m "$@" 2>&1)
  echo "$out" | sed 's/^/iperf3: /' >/dev/console
  # The summary lines: "[  5]   0.00-5.00   sec   375 MBytes   629 Mbits/sec    0   sender"
  snd=$(echo "$out" | awk '/ sender$/ { for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") v = $(i - 1) } END { print v }')
  rcv=$(echo "$out" | awk '/ receiver$/ { for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") v = $(i - 1) } END { print v }')
  retr=$(echo "$out" | awk '/ sender$/ { for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") v = $(i + 1) } END { print v }')
  r=FAIL
  [ -n "$rcv" ] && awk -v v="$rcv" 'BEGIN { exit !(v > 0) }' && r=PASS
  result "$name" result="$r" sender_mbps="${snd:-?}" receiver_mbps="${rcv:-?}" retransmits="${retr:-?}" seconds="$secs" peer="$peer"
}

for t in $(echo "$tests" | tr ',' ' '); do
  say "UVHOST-BEGIN: name=$t"
  case $t in
    link) t_link ;;
    ping) t_ping ;;
    iperf) t_iperf iperf ;;
    iperf-r) t_iperf iperf-r -R ;;
    idle) result idle result=PASS ;;
    *) result "$t" result=FAIL why=unknown-test ;;
  esac
done

s=/sys/class/net/eth0/statistics
if [ -d $s ]; then
  say "UVHOST-STATS: tx_packets=$(cat $s/tx_packets) rx_packets=$(cat $s/rx_packets) tx_bytes=$(cat $s/tx_bytes) rx_bytes=$(cat $s/rx_bytes) tx_dropped=$(cat $s/tx_dropped) rx_dropped=$(cat $s/rx_dropped)"
fi
say "UVHOST-DONE: passed=$passed failed=$failed"
[ "$hold" -gt 0 ] 2>/dev/null && sleep "$hold"
poweroff -f
