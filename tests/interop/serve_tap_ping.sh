#!/usr/bin/env bash
# serve_tap_ping.sh - the host pings a guest through `uvhost serve`'s tap backend; the
# guest is DPDK's testpmd (virtio_user) in icmpecho mode, which answers ARP requests and
# ICMP echo requests.
#
#   serve_tap_ping.sh --uvhost PATH [--count 2000] [--interval 0.001]
#
# Everything network-facing lives in a private network namespace (uvh-tap-PID, deleted
# on exit): `uvhost serve --control C --port sock=S,backend=tap,tap=uvtapPID` creates the
# tap there; testpmd (CPU 1) connects to S as the guest (MAC 02:00:00:00:77:02); the tap
# gets 10.77.0.1/24 and is set up; then, from the namespace,
#   ping -c COUNT -i INTERVAL -q 10.77.0.2
# must see every echo answered exactly once (0% loss). Then `uvhost ctl stats --json`
# must show the port's guest-TX and guest-RX queues with at least COUNT packets each
# (the pings, the warm-up pings and ARP), and at the end, exactly: testpmd answered every
# frame it received (ARP and echo requests only: IPv6 is off in the namespace), what
# testpmd sent == what the port took from the guest, and what the port delivered to the
# guest == what testpmd received (testpmd is stopped once it reported as received all
# the port delivered to it; the host sends nothing to it after the ping: the tap's
# neighbour entry for it is made permanent then, so no ARP probe follows).
# Then what testpmd's generated frames carry, checked by the host's kernel: a second
# testpmd (connection 2: rxonly --tx-first --burst 256, --eth-peer the tap's MAC) sends
# one burst of txonly frames (DPDK 22.11 app/test-pmd/txonly.c: Ethernet, IPv4
# 198.18.0.1 -> 198.18.0.2 with its header checksum, UDP 9 -> 9, 64 bytes in all); the
# tap also holds 198.18.0.2 and nothing listens on UDP port 9, so the namespace's kernel
# must take every frame as an IPv4 packet (Ip InReceives) holding a UDP datagram for a
# closed port (Udp NoPorts), each == what testpmd sent == what the port took, exactly,
# and count no IPv4 header, address or checksum error and no UDP error.
# Root is needed (netns, tap). Helpers: lib.sh.
# Exit: 0 pass, 1 fail, 64 usage, 77 testpmd not installed or not root (ctest skip).
set -euo pipefail
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
# shellcheck source=lib.sh
source "$HERE/lib.sh"

uvhost="" count=2000 interval=0.001
while (($#)); do
  case $1 in
    --uvhost) uvhost=$2; shift 2 ;;
    --count) count=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    *) echo "serve_tap_ping.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done
[[ -x $uvhost && $count =~ ^[0-9]+$ ]] || { echo "usage: serve_tap_ping.sh --uvhost PATH [--count N] [--interval S]" >&2; exit 64; }
ilib_require_testpmd
[[ $(id -u) -eq 0 ]] || { echo "not root (network namespace and tap needed): skipped"; exit 77; }
ilib_init tap-ping

tap=uvtap$$
guest_mac=02:00:00:00:77:02
sock=$dir/tap.sock ctl=$dir/ctl.sock
echo "# $(date -u +'%F %T') load $(cut -d' ' -f1-3 /proc/loadavg)"

run() {
  ilib_netns_create tap || return 0
  ilib_serve_start tap -- --control "$ctl" --port "sock=$sock,backend=tap,tap=$tap,name=p0" || return 0
  ilib_wait_link "$tap" || return 0
  "${NS[@]}" ip addr add 10.77.0.1/24 dev "$tap"
  "${NS[@]}" ip link set "$tap" up
  ilib_testpmd_start guest 1 icmpecho "$sock" --vdev-extra "mac=$guest_mac" || return 0
  local tp_pid=$ILIB_LAST_PID

  ilib_ping guest 10.77.0.2 "$count" "$interval" || true
  ilib_neigh_freeze 10.77.0.2 "$guest_mac" "$tap"
  echo "ping 10.77.0.2 via $tap: $PING_SUMMARY"
  echo "ping: $PING_RTT"

  # The port's queues as the control socket reports them (while the guest is connected).
  local stats tx rx
  if stats=$(ilib_ctl "$ctl" stats --json 2>&1); then
    rx=$(jq '[.ports[] | select(.name == "p0") | .queues[] | select(.direction == "rx") | .packets] | add // 0' <<<"$stats")
    tx=$(jq '[.ports[] | select(.name == "p0") | .queues[] | select(.direction == "tx") | .packets] | add // 0' <<<"$stats")
    echo "ctl stats: p0 rx (from the guest)=$rx tx (to the guest)=$tx; tap: $(jq -c '.ports[] | select(.name == "p0") | .backend_stats | {tx: .tx.sent, rx: .rx.frames, full: .tx.full, down: .tx.down}' <<<"$stats")"
    ((tx >= count && rx >= count)) || fail "ctl stats: p0 tx=$tx rx=$rx, expected >= $count each"
    # Stopped once it counted every frame delivered to it (none is left in its RX ring).
    ilib_wait_until 15 ilib_testpmd_rx_reached guest "$tx" || echo "note: testpmd had not reported $tx received after 15 s"
  else
    fail "uvhost ctl stats --json: $stats"
  fi

  ilib_testpmd_stop guest "$tp_pid" || { ilib_serve_stop tap; return 0; }
  local tp=$TP_LINE
  ilib_connection_end tap p0 1 || { ilib_serve_stop tap; return 0; }
  local end=$END_LINE
  txonly_frames
  ilib_serve_stop tap
  local tp_rx tp_tx sv_from sv_to
  tp_rx=$(field "$tp" rx_packets); tp_tx=$(field "$tp" tx_packets)
  sv_from=$(field "$end" rx_packets); sv_to=$(field "$end" tx_packets)
  echo "testpmd icmpecho: rx=$tp_rx tx=$tp_tx; uvhost p0: from guest=$sv_from to guest=$sv_to rx_dropped=$(field "$end" rx_dropped) tx_dropped=$(field "$end" tx_dropped)"
  ((tp_rx > count)) || fail "testpmd received $tp_rx frames, fewer than the $count pings and a warm-up"
  [[ $tp_tx == "$tp_rx" ]] || fail "testpmd answered $tp_tx of the $tp_rx frames it received"
  [[ $tp_tx == "$sv_from" ]] || fail "testpmd sent $tp_tx, uvhost took $sv_from from the guest"
  [[ $sv_to == "$tp_rx" ]] || fail "uvhost delivered $sv_to to the guest, testpmd received $tp_rx"
}

# The namespace's IP and UDP counters, absolute ("NAME VALUE" lines; a private history
# file, so no other nstat user's reset interferes).
kernel_counters() { "${NS[@]}" env NSTAT_HISTORY="$dir/nstat.history" nstat -asz | awk 'NF >= 2 { print $1, $2 }'; }
counter() { awk -v k="$2" '$1 == k { v = $2 } END { print v + 0 }' <<<"$1"; }

# testpmd txonly's frames into the tap's kernel (see the header): connection 2 of p0.
txonly_frames() {
  local burst=256 mac before after tp c d
  mac=$("${NS[@]}" cat "/sys/class/net/$tap/address")
  "${NS[@]}" ip addr add 198.18.0.2/24 dev "$tap"
  before=$(kernel_counters)
  ilib_testpmd_run gen 1 rxonly "$sock" 1 --tx-first --arg "--burst=$burst" --arg "--txpkts=64" \
    --arg "--eth-peer=0,$mac" || return 0
  tp=$TP_LINE
  ilib_connection_end tap p0 2 || return 0
  after=$(kernel_counters)
  local sent took
  sent=$(field "$tp" tx_packets); took=$(field "$END_LINE" rx_packets)
  echo "testpmd txonly burst: sent=$sent dropped=$(field "$tp" tx_dropped); uvhost p0 took $took; the namespace's kernel:" \
       "$(for c in IpInReceives UdpNoPorts IpInHdrErrors IpInAddrErrors IpExtInCsumErrors UdpInErrors UdpInCsumErrors; do
            printf '%s +%d ' "$c" $(($(counter "$after" "$c") - $(counter "$before" "$c"))); done)"
  [[ $sent == "$burst" ]] || fail "testpmd sent $sent of its burst of $burst"
  [[ $took == "$sent" ]] || fail "testpmd sent $sent txonly frames, uvhost took $took"
  for c in IpInReceives UdpNoPorts; do
    d=$(($(counter "$after" "$c") - $(counter "$before" "$c")))
    ((d == sent)) || fail "the kernel counted $c +$d for testpmd's $sent txonly frames"
  done
  for c in IpInHdrErrors IpInAddrErrors IpExtInCsumErrors UdpInErrors UdpInCsumErrors; do
    d=$(($(counter "$after" "$c") - $(counter "$before" "$c")))
    ((d == 0)) || fail "the kernel counted $c +$d for testpmd's txonly frames"
  done
}

run
ilib_finish "serve tap ping ($count pings)"
