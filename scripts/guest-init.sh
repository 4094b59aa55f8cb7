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
#    uvhost.wait=N            seconds to wait for the peer's first echo reply, for its
#                             iperf3 server (iperf), for its clients (iperf-server)
#                             (default 30)
#    uvhost.hold=N            seconds to stay up after the last test (default 0), so a
#                             peer can still reach us or the host can read counters
#    uvhost.warmup=N          bench-*: whole seconds of traffic before the measured window
#                             (default 1)
#    uvhost.size=N            bench-*: stream: iperf3's write size (-l); rr: the Ethernet
#                             frame of each echo request/reply (ICMP payload N-42, N >= 58
#                             so the payload holds ping's timestamp) (default 1500)
#    uvhost.sessions=N        bench-*: stream: iperf3 -P N; rr: N echo requests in flight
#                             (ping -l N-1) (default 1)
#    uvhost.queues=N          mq, queues: queue pairs to use (ethtool -L eth0 combined N)
#                             (default 2)
#    uvhost.url=URL           migrate: what to download (default http://PEER:8000/blob)
#    uvhost.servers=N         iperf-server: iperf3 servers, on ports 5201.. (default 1)
#    uvhost.serves=N          iperf-server: client tests each server waits for (default 2)
#    uvhost.background=iperf  ping-gaps: an iperf3 TCP stream guest -> PEER for as long as
#                             the ping runs (default: none)
#    uvhost.rate=R            ping-gaps: that stream's iperf3 -b (default 100M)
#  Tests (each prints one result line, see below):
#    link     eth0 exists, its driver is virtio_net, operstate up and carrier 1 after
#             `ip link set up`; prints the negotiated feature bits
#             (/sys/class/net/eth0/device/features: 64 '0'/'1' characters, bit 0 first)
#    ping     iputils' `ping -c COUNT -i INTERVAL -W 5 PEER` after the peer answered once:
#             PASS when every request was answered exactly once (its summary line)
#    iperf    `iperf3 -c PEER -t SECS -f m`: guest -> peer TCP; PASS with a throughput
#             (a peer whose server is not up yet: tried again each second, up to WAIT s)
#    iperf-r  the same with -R: peer -> guest
#             Both also report what the guest spent on the run: guest_irqs (interrupts
#             of the virtio devices, /proc/interrupts), eth_tx_packets / eth_rx_packets
#             (eth0's counters), guest_tx_kicks / guest_rx_kicks (the notifications
#             virtio-net sent the device for its transmit and receive queues, `ethtool
#             -S eth0`'s *_kicks) and guest_busy_pct / guest_softirq_pct (the vCPU's time
#             not idle, and in softirq, /proc/stat), each over the iperf3 client's run
#    iperf-server  SERVERS `iperf3 -s` (port 5201+i; pinned to vCPU i when SERVERS > 1,
#             so what server i sends starts on transmit queue i: XPS by the sending
#             vCPU, which the kernel may change for a flow with nothing in flight),
#             until each served SERVES client tests or WAIT s passed; then stopped.
#             Keys served (total), per server the count; PASS when every server
#             served SERVES
#    queues   `ethtool -L eth0 combined QUEUES`: PASS when `ethtool -l` shows it
#    checksums  the guest kernel's own verdict on what it received (/proc/net/snmp):
#             keys ip_in_hdr_errors, tcp_in_csum_errors, udp_in_csum_errors, tcp_in_segs,
#             tcp_retrans_segs, and from /proc/net/netstat tcp_ofo_queue (segments that
#             arrived out of order) and tcp_dsack_recv (D-SACKs: a retransmission the
#             peer already had); PASS when the three error counters are 0
#    ping-gaps  a ping meant to cross backend restarts: prints `UVHOST-PING: started` once the
#             peer answered, then runs `iputils-ping -D -c COUNT -i INTERVAL -W 5 PEER` (each
#             reply with the guest's time), with the background stream if asked; then one
#             line per run of unanswered requests, `UVHOST-GAP: first_seq=A last_seq=B
#             lost=N silent_s=S rtt_before_ms=R before_t=T` (S: from the last reply before
#             the run to the first one after it, by the replies' times; R: that last
#             reply's round trip, what was in flight before the run; T: that reply's
#             time, seconds since the epoch by the guest's clock); one line per pause of
#             more than 0.5 s between two replies in arrival order, lost or not,
#             `UVHOST-SILENCE: silent_s=S before_t=T0 after_t=T1`; and the result: keys sent, received
#             (replies, duplicates included), unique, duplicates, lost, gaps, rtt_max_ms,
#             carrier_down / carrier_up (eth0's carrier changes while it ran), tx_packets /
#             rx_packets (eth0's counters grown while it ran), iperf_rc, iperf_mbps,
#             iperf_retransmits; PASS when ping summed up and no reply came twice
#    idle     nothing (for a guest that only answers, e.g. the second guest on a switch)
#    offload  eth0's offload state as the driver set it from the negotiated features
#             (`ethtool -k`): keys tx_csum, rx_csum, tso, gso, gro (on/off); PASS when
#             ethtool answered
#    mq       `ethtool -L eth0 combined QUEUES` (PASS needs `ethtool -l` to show it),
#             then one iperf3 TCP stream per queue pair in parallel (each as iperf's:
#             tried again while the peer's server is not up), stream i pinned
#             to vCPU i (-A i, so the driver's XPS sends it on transmit queue i) to
#             port 5201+i of PEER, SECS s guest -> peer, then the same with -R; keys
#             combined, tx_mbps, rx_mbps (sums of the receivers' figures), and eth0's
#             per-queue packet counters after both (`ethtool -S`): tx_q0 rx_q0 tx_q1 ...
#    migrate  the traffic of a live migration (the guest does not know it moves): iputils
#             ping to PEER every INTERVAL s in the background while busybox wget fetches
#             URL straight into sha256sum (nothing stored: the file may be larger
#             than the guest's memory); then the ping is stopped (SIGINT, its
#             summary). bytes: the Content-Length wget announced (-S) when it exited 0,
#             which it does only with that many bytes of body written out (busybox
#             wget fails "connection closed prematurely" on a short one), else 0.
#             Keys: bytes, sha256, wget_rc, ping_sent, ping_received,
#             ping_duplicates, ping_errors. PASS when wget exited 0 (the host compares
#             the checksum and judges the ping counts)
#    bench-tx, bench-rx, bench-rr   `uvhost bench --frontend qemu`'s traffic (secs is the
#             measured window): bench-tx/-rx run `iperf3 -c PEER -O WARMUP -t SECS -P
#             SESSIONS -l SIZE` (-R for rx) in the background, sleep WARMUP, print
#             UVHOST-WINDOW: begin, sleep SECS, print UVHOST-WINDOW: end, with eth0's
#             counters of the measured direction read at both edges; bench-rr runs
#             `ping -A` for WARMUP s (discarded), then UVHOST-WINDOW: begin, `ping -A -w
#             SECS` with every reply's time written to /tmp (not the console), then
#             UVHOST-WINDOW: end; the guest sorts the times itself. Result keys: seconds
#             (the window by /proc/uptime, 10 ms steps), packets, bytes (eth0's counters:
#             the driver's packets, so GSO super-packets when TSO is on; frame bytes),
#             transactions, p50_us, p99_us, p999_us (rr), iperf3's sender/receiver Mbits/s.
#    bench-serve  `uvhost bench compare --frontend qemu --interleave processes`: runs
#             the bench-* tests on the host's orders, one per line on /dev/ttyS1 (QEMU's
#             second serial port): `bench-tx SECS`, `bench-rx SECS` or `bench-rr SECS`
#             runs that test with uvhost.secs=SECS (same output), `quit` ends; anything
#             else is a FAIL result named `bench-serve`. Prints UVHOST-SERVE: ready
#             before the first order and after each one.
#  Output (serial console), one line each, easy to grep:
#    UVHOST-GUEST: up kernel=VERSION
#    UVHOST-BEGIN: name=TEST
#    UVHOST-WINDOW: begin|end name=TEST   (bench-* only: the measured window's edges)
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
warmup=$(arg warmup 1)
size=$(arg size 1500)
sessions=$(arg sessions 1)
queues=$(arg queues 2)
servers=$(arg servers 1)
serves=$(arg serves 2)
background=$(arg background none)
rate=$(arg rate 100M)

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

# iperf3 -c PEER ARGS..., again each second while the peer's server is not up yet or
# still busy with the last test (up to WAIT s): its output in $out.
# A run that iperf3 itself ends in error after connecting (Debian 12's iperf3 3.12 now
# and then loses its control connection: "control socket has closed unexpectedly",
# "select failed") is run once more, and the console says so.
iperf_client() {
  tries=0 again=1
  while :; do
    out=$(iperf3 -c "$peer" "$@" 2>&1)
    rc=$?
    if echo "$out" | grep -Eq 'unable to connect|server is busy' && [ $tries -lt "$wait_s" ]; then
      tries=$((tries + 1))
      sleep 1
      continue
    fi
    if [ "$rc" != 0 ] && [ "$again" = 1 ]; then
      again=0
      echo "$out" | grep -i error | head -n 2 | sed 's/^/UVHOST-RETRY: iperf3 failed, once more: /' >/dev/console
      sleep 1
      continue
    fi
    break
  done
}

# The guest's own counters for a run: "IRQS TX RX BUSY SOFTIRQ TOTAL" (the virtio
# devices' interrupts summed over CPUs, eth0's packets, and /proc/stat's cpu jiffies:
# busy = all but idle and iowait).
guest_counters() {
  irqs=$(awk '/virtio/ { for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) n += $i } END { print n + 0 }' /proc/interrupts)
  tx=$(cat /sys/class/net/eth0/statistics/tx_packets 2>/dev/null || echo 0)
  rx=$(cat /sys/class/net/eth0/statistics/rx_packets 2>/dev/null || echo 0)
  cpu=$(awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, $8, t }' /proc/stat)
  kicks=$(ethtool -S eth0 2>/dev/null | awk '/^ *tx_queue_[0-9]+_kicks:/ { t += $2 } /^ *rx_queue_[0-9]+_kicks:/ { r += $2 }
    END { print t + 0, r + 0 }')
  echo "$irqs $tx $rx $cpu ${kicks:-0 0}"
}

t_iperf() {  # t_iperf NAME [-R]
  name=$1; shift
  if ! peer_reachable; then result "$name" result=FAIL why="peer-$peer-never-answered"; return; fi
  before=$(guest_counters)
  iperf_client -t "$secs" -f m "$@"
  after=$(guest_counters)
  # Eight fields per sample: irqs tx rx busy softirq total tx_kicks rx_kicks.
  spent=$(echo "$before $after" | awk '{ printf "guest_irqs=%d eth_tx_packets=%d eth_rx_packets=%d guest_busy_pct=%.1f guest_softirq_pct=%.1f guest_tx_kicks=%d guest_rx_kicks=%d",
    $9 - $1, $10 - $2, $11 - $3, ($14 > $6) ? 100 * ($12 - $4) / ($14 - $6) : 0, ($14 > $6) ? 100 * ($13 - $5) / ($14 - $6) : 0,
    $15 - $7, $16 - $8 }')
  echo "$out" | sed 's/^/iperf3: /' >/dev/console
  # The summary lines: "[  5]   0.00-5.00   sec   375 MBytes   629 Mbits/sec    0   sender"
  snd=$(echo "$out" | awk '/ sender$/ { for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") v = $(i - 1) } END { print v }')
  rcv=$(echo "$out" | awk '/ receiver$/ { for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") v = $(i - 1) } END { print v }')
  retr=$(echo "$out" | awk '/ sender$/ { for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") v = $(i + 1) } END { print v }')
  r=FAIL
  [ -n "$rcv" ] && awk -v v="$rcv" 'BEGIN { exit !(v > 0) }' && r=PASS
  result "$name" result="$r" sender_mbps="${snd:-?}" receiver_mbps="${rcv:-?}" retransmits="${retr:-?}" seconds="$secs" peer="$peer" $spent
}

t_offload() {
  if ! out=$(ethtool -k eth0 2>&1); then result offload result=FAIL why=ethtool-k-failed; return; fi
  echo "$out" | grep -E '^(tx-checksumming|rx-checksumming|tcp-segmentation-offload|generic-segmentation-offload|generic-receive-offload|udp-fragmentation-offload|large-receive-offload|	tx-tcp-segmentation|	tx-tcp6-segmentation|	tx-tcp-ecn-segmentation|	tx-udp-segmentation|	rx-gro-hw):' |
    sed 's/^/ethtool-k: /' >/dev/console
  k() { echo "$out" | sed -n "s/^$1: \([a-z]*\).*/\1/p" | head -n 1; }
  result offload result=PASS tx_csum="$(k tx-checksumming)" rx_csum="$(k rx-checksumming)" \
    tso="$(k tcp-segmentation-offload)" gso="$(k generic-segmentation-offload)" gro="$(k generic-receive-offload)"
}

# The summed receiver Mbit/s of the iperf3 outputs in /tmp/mq-*.out.
mq_sum() {
  cat /tmp/mq-*.out | awk '/ receiver$/ { for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") s += $(i - 1); n++ }
    END { if (n > 0) printf "%.0f", s }'
}

# combined = the queue pairs eth0 uses after asking for QUEUES.
set_queues() {
  if ! ethtool -L eth0 combined "$queues" 2>/dev/null; then
    : # already at QUEUES (the driver starts with min(pairs, CPUs)): ethtool -l tells
  fi
  combined=$(ethtool -l eth0 2>/dev/null | awk '/^Current hardware settings/ { cur = 1 } cur && /^Combined:/ { print $2; exit }')
  ethtool -l eth0 2>&1 | sed 's/^/ethtool-l: /' >/dev/console
}

t_queues() {
  set_queues
  r=FAIL
  [ "$combined" = "$queues" ] && r=PASS
  result queues result="$r" combined="${combined:-?}"
}

t_mq() {
  set_queues
  if ! peer_reachable; then result mq result=FAIL why="peer-$peer-never-answered" combined="$combined"; return; fi
  for way in tx rx; do
    rm -f /tmp/mq-*.out
    r=""
    [ "$way" = rx ] && r=-R
    q=0
    while [ $q -lt "$queues" ]; do
      # shellcheck disable=SC2086  # $r: no option or one
      (iperf_client -p $((5201 + q)) -A "$q" -t "$secs" -f m $r; echo "$out" >/tmp/mq-$q.out) &
      q=$((q + 1))
    done
    wait
    for f in /tmp/mq-*.out; do grep -E ' (sender|receiver)$|error' "$f" | sed "s|^|iperf3 mq $way $(basename "$f" .out): |"; done >/dev/console
    eval "${way}_mbps=$(mq_sum)"
  done
  stats=$(ethtool -S eth0 2>/dev/null)
  echo "$stats" | grep -E '_queue_[0-9]+_(packets|bytes):' | sed 's/^ */ethtool-S: /' >/dev/console
  counters=""
  q=0
  while [ $q -lt "$queues" ]; do
    for d in tx rx; do
      counters="$counters ${d}_q$q=$(echo "$stats" | sed -n "s/^ *${d}_queue_${q}_packets: //p")"
    done
    q=$((q + 1))
  done
  res=FAIL
  [ "$combined" = "$queues" ] && [ -n "$tx_mbps" ] && [ -n "$rx_mbps" ] && res=PASS
  # shellcheck disable=SC2086  # $counters: key=value words
  result mq result="$res" combined="${combined:-?}" tx_mbps="${tx_mbps:-?}" rx_mbps="${rx_mbps:-?}" $counters
}

# Client tests iperf3 server i has finished: it says "Server listening" once at the
# start and once after each test.
served_by() { n=$(grep -c 'Server listening' "/tmp/server-$1.out" 2>/dev/null); echo $((${n:-0} > 0 ? n - 1 : 0)); }

t_iperf_server() {
  pids=""
  i=0
  while [ $i -lt "$servers" ]; do
    pin=""
    [ "$servers" -gt 1 ] && pin="-A $i"
    # shellcheck disable=SC2086  # $pin: no option or two words
    iperf3 -s -p $((5201 + i)) $pin -f m --forceflush >"/tmp/server-$i.out" 2>&1 &
    pids="$pids $!"
    i=$((i + 1))
  done
  waited=0
  while [ $waited -lt "$wait_s" ]; do
    done_all=1
    i=0
    while [ $i -lt "$servers" ]; do
      [ "$(served_by $i)" -ge "$serves" ] || done_all=0
      i=$((i + 1))
    done
    [ $done_all = 1 ] && break
    sleep 1
    waited=$((waited + 1))
  done
  total=0 counts="" r=PASS
  i=0
  while [ $i -lt "$servers" ]; do
    n=$(served_by $i)
    total=$((total + n))
    counts="$counts server$i=$n"
    [ "$n" -ge "$serves" ] || r=FAIL
    grep -E ' (sender|receiver)$' "/tmp/server-$i.out" | sed "s/^/iperf3 server $i: /" >/dev/console
    i=$((i + 1))
  done
  # shellcheck disable=SC2086  # $pids: one word per server
  kill $pids 2>/dev/null
  wait 2>/dev/null
  # shellcheck disable=SC2086  # $counts: key=value words
  result iperf-server result="$r" served="$total" $counts
}

# snmp PROTO FIELD [FILE]: the value of FIELD in FILE's PROTO lines (names, then
# values); FILE: /proc/net/snmp unless given (/proc/net/netstat holds TcpExt).
snmp() {
  awk -v p="$1:" -v f="$2" '$1 == p { if (!n) { for (i = 2; i <= NF; i++) col[$i] = i; n = 1 } else { print $col[f]; exit } }' "${3:-/proc/net/snmp}"
}

t_checksums() {
  ip_err=$(snmp Ip InHdrErrors) tcp_err=$(snmp Tcp InCsumErrors) udp_err=$(snmp Udp InCsumErrors)
  r=FAIL
  [ "$ip_err" = 0 ] && [ "$tcp_err" = 0 ] && [ "$udp_err" = 0 ] && r=PASS
  result checksums result="$r" ip_in_hdr_errors="${ip_err:-?}" tcp_in_csum_errors="${tcp_err:-?}" \
    udp_in_csum_errors="${udp_err:-?}" tcp_in_segs="$(snmp Tcp InSegs)" tcp_retrans_segs="$(snmp Tcp RetransSegs)" \
    tcp_ofo_queue="$(snmp TcpExt TCPOFOQueue /proc/net/netstat)" tcp_dsack_recv="$(snmp TcpExt TCPDSACKRecv /proc/net/netstat)"
}

uptime_s() { cut -d' ' -f1 /proc/uptime; }
stat_of() { cat "/sys/class/net/eth0/statistics/$1" 2>/dev/null || echo 0; }

t_bench_stream() {  # t_bench_stream NAME tx|rx
  name=$1 way=$2
  if ! peer_reachable; then result "$name" result=FAIL why="peer-$peer-never-answered"; return; fi
  r=""
  [ "$way" = rx ] && r=-R
  # A run iperf3 ends in error (see iperf_client) is measured once more: a new window,
  # whose edges the host's snapshots follow.
  for attempt in 1 2; do
    # shellcheck disable=SC2086  # $r: no option or one
    iperf3 -c "$peer" -O "$warmup" -t "$secs" -P "$sessions" -l "$size" -f m $r >/tmp/iperf.out 2>&1 &
    ipid=$!
    sleep "$warmup"
    p0=$(stat_of "${way}_packets") b0=$(stat_of "${way}_bytes") t0=$(uptime_s)
    say "UVHOST-WINDOW: begin name=$name"
    sleep "$secs"
    p1=$(stat_of "${way}_packets") b1=$(stat_of "${way}_bytes") t1=$(uptime_s)
    say "UVHOST-WINDOW: end name=$name"
    wait "$ipid"
    rc=$?
    out=$(cat /tmp/iperf.out)
    [ "$rc" = 0 ] || [ "$attempt" = 2 ] && break
    echo "$out" | grep -i error | head -n 2 | sed 's/^/UVHOST-RETRY: iperf3 failed, measured once more: /' >/dev/console
    sleep 1
  done
  # The summary (the last lines), or on failure the reason (iperf3's first lines).
  if [ "$rc" = 0 ]; then echo "$out" | tail -n 6; else echo "$out" | head -n 3; fi | sed 's/^/iperf3: /' >/dev/console
  snd=$(echo "$out" | awk '/ sender$/ { for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") v = $(i - 1) } END { print v }')
  rcv=$(echo "$out" | awk '/ receiver$/ { for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") v = $(i - 1) } END { print v }')
  res=FAIL
  [ "$rc" = 0 ] && [ $((p1 - p0)) -gt 0 ] && res=PASS
  result "$name" result="$res" seconds="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" \
    packets=$((p1 - p0)) bytes=$((b1 - b0)) transactions=0 sender_mbps="${snd:-?}" receiver_mbps="${rcv:-?}" iperf_rc="$rc"
}

t_bench_rr() {
  name=bench-rr
  if ! peer_reachable; then result "$name" result=FAIL why="peer-$peer-never-answered"; return; fi
  if [ "$size" -lt 58 ]; then result "$name" result=FAIL why=size-below-58; return; fi
  pre=""
  [ "$sessions" -gt 1 ] && pre="-l $((sessions - 1))"
  # shellcheck disable=SC2086  # $pre: no option or two words
  iputils-ping -A $pre -s $((size - 42)) -w "$warmup" -q "$peer" >/dev/null 2>&1
  t0=$(uptime_s)
  say "UVHOST-WINDOW: begin name=$name"
  # shellcheck disable=SC2086
  iputils-ping -A $pre -s $((size - 42)) -w "$secs" "$peer" >/tmp/rr.out 2>&1
  t1=$(uptime_s)
  say "UVHOST-WINDOW: end name=$name"
  # "1508 bytes from 10.0.9.1: icmp_seq=7 ttl=64 time=0.912 ms": one line per reply.
  sed -n 's/.* time=\([0-9.]*\) ms.*/\1/p' /tmp/rr.out | sort -n >/tmp/rtt
  n=$(wc -l </tmp/rtt)
  tail -n 2 /tmp/rr.out | sed 's/^/ping: /' >/dev/console
  res=FAIL
  [ "$n" -gt 0 ] && res=PASS
  # The q-th percentile: the ceil(n*q)-th smallest time (ms in, us out).
  pct=$(awk -v n="$n" 'function at(q,  i) { i = int(n * q); if (i < n * q) i++; if (i < 1) i = 1; return v[i] * 1000 }
    { v[NR] = $1 } END { if (n > 0) printf "p50_us=%.1f p99_us=%.1f p999_us=%.1f", at(0.5), at(0.99), at(0.999) }' /tmp/rtt)
  # shellcheck disable=SC2086  # $pct: three key=value words
  result "$name" result="$res" seconds="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" \
    packets="$n" bytes=$((n * size)) transactions="$n" $pct
  rm -f /tmp/rr.out /tmp/rtt
}

# The runs of requests without a reply in ping -D's output FILE (sent requests SENT):
# one UVHOST-GAP line each, to the console.
ping_gaps() {
  awk -v sent="$2" '
    /icmp_seq=/ {
      seq = $0; sub(/.*icmp_seq=/, "", seq); sub(/ .*/, "", seq)
      t = $1; gsub(/[][]/, "", t)
      rtt = $0; sub(/.* time=/, "", rtt); sub(/ .*/, "", rtt)
      if (!(seq in at)) { at[seq] = t; rtt_of[seq] = rtt }
      # Replies in arrival order: a pause of more than half a second is a silence.
      if (prev != "" && t - prev > 0.5) printf "UVHOST-SILENCE: silent_s=%.3f before_t=%s after_t=%s\n", t - prev, prev, t
      prev = t
    }
    END {
      last = 0
      for (s = 1; s <= sent + 1; s++) {
        if (s <= sent && !(s in at)) continue
        if (s > last + 1) {
          before = (last in at) ? at[last] : ""
          after = (s in at) ? at[s] : ""
          silent = (before != "" && after != "") ? sprintf("%.3f", after - before) : "?"
          printf "UVHOST-GAP: first_seq=%d last_seq=%d lost=%d silent_s=%s rtt_before_ms=%s before_t=%s\n", last + 1, s - 1,
            s - 1 - last, silent, (last in rtt_of) ? rtt_of[last] : "?", before == "" ? "?" : before
        }
        last = s
      }
    }' "$1" >/dev/console
}

t_ping_gaps() {
  if ! peer_reachable; then result ping-gaps result=FAIL why="peer-$peer-never-answered"; return; fi
  q=/sys/class/net/eth0
  down0=$(cat $q/carrier_down_count) up0=$(cat $q/carrier_up_count)
  tx0=$(stat_of tx_packets) rx0=$(stat_of rx_packets)
  ipid=""
  if [ "$background" = iperf ]; then
    iperf_s=$(awk -v c="$count" -v i="$interval" 'BEGIN { printf "%d", c * i + 1 }')
    iperf3 -c "$peer" -t "$iperf_s" -b "$rate" -f m >/tmp/gaps-iperf.out 2>&1 &
    ipid=$!
  fi
  say "UVHOST-PING: started count=$count interval=$interval background=$background"
  iputils-ping -D -c "$count" -i "$interval" -W 5 "$peer" >/tmp/gaps.out 2>&1
  irc=none mbps="?" retr="?"
  if [ -n "$ipid" ]; then
    wait "$ipid"
    irc=$?
    grep -E ' (sender|receiver)$|error' /tmp/gaps-iperf.out | sed 's/^/iperf3: /' >/dev/console
    mbps=$(awk '/ receiver$/ { for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") v = $(i - 1) } END { print v }' /tmp/gaps-iperf.out)
    retr=$(awk '/ sender$/ { for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") v = $(i + 1) } END { print v }' /tmp/gaps-iperf.out)
  fi
  grep -E 'transmitted|^rtt' /tmp/gaps.out | sed 's/^/ping: /' >/dev/console
  summary=$(grep 'packets transmitted' /tmp/gaps.out)
  sent=$(echo "$summary" | sed -n 's/^\([0-9]*\) packets transmitted.*/\1/p')
  got=$(grep -c 'icmp_seq=.* time=' /tmp/gaps.out)
  dups=$(grep -c '(DUP!)' /tmp/gaps.out)
  unique=$(sed -n 's/.*icmp_seq=\([0-9]*\) .* time=.*/\1/p' /tmp/gaps.out | sort -un | wc -l)
  rtt_max=$(sed -n 's/^rtt min\/avg\/max\/mdev = [^/]*\/[^/]*\/\([^/]*\)\/.*/\1/p' /tmp/gaps.out)
  ping_gaps /tmp/gaps.out "${sent:-0}"
  gaps=$(awk -v sent="${sent:-0}" '/icmp_seq=/ { s = $0; sub(/.*icmp_seq=/, "", s); sub(/ .*/, "", s); at[s] = 1 }
    END { n = 0; for (s = 1; s <= sent; s++) if (!(s in at) && (s == 1 || (s - 1) in at)) n++; print n }' /tmp/gaps.out)
  r=FAIL
  [ -n "$sent" ] && [ "$dups" = 0 ] && r=PASS
  result ping-gaps result="$r" sent="${sent:-0}" received="$got" unique="$unique" duplicates="$dups" \
    lost=$((${sent:-0} - unique)) gaps="$gaps" rtt_max_ms="${rtt_max:-?}" \
    carrier_down=$(($(cat $q/carrier_down_count) - down0)) carrier_up=$(($(cat $q/carrier_up_count) - up0)) \
    tx_packets=$(($(stat_of tx_packets) - tx0)) rx_packets=$(($(stat_of rx_packets) - rx0)) \
    iperf_rc="$irc" iperf_mbps="${mbps:-?}" iperf_retransmits="${retr:-?}" peer="$peer"
}

t_migrate() {
  url=$(arg url "http://$peer:8000/blob")
  if ! peer_reachable; then result migrate result=FAIL why="peer-$peer-never-answered"; return; fi
  iputils-ping -i "$interval" -W 5 -q "$peer" >/tmp/ping.out 2>&1 &
  ping_pid=$!
  # One reader of the body, sha256sum: a copy through busybox tee to a second reader
  # (wc -c) came up short now and then while the hashed copy was whole (tee ignores a
  # short write to an output). The count is wget's own: it checks the body against the
  # Content-Length it announced.
  sum=$( { wget -S -q -O - "$url" 2>/tmp/wget.headers; echo $? >/tmp/wget.rc; } | sha256sum | cut -d' ' -f1)
  wget_rc=$(cat /tmp/wget.rc)
  bytes=0
  [ "$wget_rc" = 0 ] && bytes=$(sed -n 's/^ *Content-Length: *\([0-9]*\).*/\1/p' /tmp/wget.headers | tail -n 1)
  sleep 1  # a few echo requests after the transfer too
  kill -INT "$ping_pid"
  wait "$ping_pid"
  # "N packets transmitted, M received, [+D duplicates, ][+E errors, ]L% packet loss, ..."
  summary=$(grep 'packets transmitted' /tmp/ping.out)
  say "ping: $summary"
  sent=$(echo "$summary" | sed -n 's/^\([0-9]*\) packets transmitted.*/\1/p')
  got=$(echo "$summary" | sed -n 's/.* \([0-9]*\) received.*/\1/p')
  dups=$(echo "$summary" | sed -n 's/.*+\([0-9]*\) duplicates.*/\1/p')
  errs=$(echo "$summary" | sed -n 's/.*+\([0-9]*\) errors.*/\1/p')
  rm -f /tmp/wget.headers /tmp/wget.rc /tmp/ping.out
  r=FAIL
  [ "$wget_rc" = 0 ] && r=PASS
  result migrate result="$r" bytes="${bytes:-0}" sha256="${sum:-none}" wget_rc="$wget_rc" ping_sent="${sent:-0}" \
    ping_received="${got:-0}" ping_duplicates="${dups:-0}" ping_errors="${errs:-0}"
}

t_bench_serve() {
  # The port stays open for the whole loop: bytes that arrive while no one has the tty
  # open are dropped. No echo of the orders back to the host (nobody reads that way).
  exec 3</dev/ttyS1
  stty -F /dev/ttyS1 raw -echo 2>/dev/null
  say "UVHOST-SERVE: ready"
  while read -r order n <&3; do
    n=$(echo "$n" | tr -cd '0-9')
    [ -z "$order" ] && continue  # an empty line (a stray line end on the port)
    case "$order $n" in
      "quit "*) break ;;
      bench-tx\ [1-9]* | bench-rx\ [1-9]* | bench-rr\ [1-9]*)
        secs=$n
        case $order in
          bench-tx) t_bench_stream bench-tx tx ;;
          bench-rx) t_bench_stream bench-rx rx ;;
          bench-rr) t_bench_rr ;;
        esac ;;
      *) result bench-serve result=FAIL why=unknown-order order="$(echo "$order $n" | tr -c 'a-z0-9 -' '?')" ;;
    esac
    say "UVHOST-SERVE: ready"
  done
  exec 3<&-
}

for t in $(echo "$tests" | tr ',' ' '); do
  say "UVHOST-BEGIN: name=$t"
  case $t in
    link) t_link ;;
    ping) t_ping ;;
    ping-gaps) t_ping_gaps ;;
    iperf) t_iperf iperf ;;
    iperf-r) t_iperf iperf-r -R ;;
    idle) result idle result=PASS ;;
    offload) t_offload ;;
    mq) t_mq ;;
    queues) t_queues ;;
    iperf-server) t_iperf_server ;;
    checksums) t_checksums ;;
    bench-tx) t_bench_stream bench-tx tx ;;
    bench-rx) t_bench_stream bench-rx rx ;;
    bench-rr) t_bench_rr ;;
    bench-serve) t_bench_serve ;;
    migrate) t_migrate ;;
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
