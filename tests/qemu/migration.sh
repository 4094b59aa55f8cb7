#!/usr/bin/env bash
# migration.sh - live migration of a real Linux guest between two uvhost ports, with
# traffic flowing: QEMU migrates the guest (TCG, memfd memory) from a source QEMU on
# one port to a destination QEMU (`-incoming`) on another, while the guest pings the
# host and downloads a file from it.
#
#   migration.sh --uvhost PATH CASE [--mb N] [--rate-kb N] [--max-lost N]
#
# CASE:
#   same-daemon   one `uvhost serve` with two tap ports: the source on port a, the
#                 destination on port b
#   two-daemons   two `uvhost serve` daemons, the source's with port a, the
#                 destination's with port b
#   qemu-tap      the control, without uvhost: QEMU's own virtio-net on kernel taps
#                 it makes itself (a and b), everything else the same (the RARP is
#                 QEMU's own announcement, written to tap b)
# Layout (both cases): a private network namespace with a Linux bridge holding the host
# address 10.0.0.1/24 and both ports' taps, so the host reaches the guest through
# whichever tap the bridge learned its MAC on. The guest (10.0.0.2) runs guest-init.sh's
# `migrate` test: iputils ping every 50 ms to the host while busybox wget fetches N MiB
# of random bytes (default 40) from paced_http.py at RATE KiB/s (default 2560), so the
# transfer spans the migration. The devices have guest_announce=off: QEMU cannot ask the
# guest to announce itself and sends VHOST_USER_SEND_RARP to the destination's backend.
# What must hold:
#   - QMP query-migrate says completed, the destination runs and the source stopped,
#     and the download was still going when the migration completed;
#   - the guest's sha256 of the file (printed on the destination's console) is the
#     host's, and it has every byte: a guest memory write of the datapath missing from
#     the dirty log would leave stale bytes on the destination;
#   - the ping across the migration: no duplicate, no error, at most MAX_LOST (20)
#     requests unanswered;
#   - the RARP announcement of the guest's MAC (ethertype 0x8035, op 3, sender and
#     target hardware address the MAC) came out of the destination's tap (a packet
#     socket on it, rarp_capture.py), and the bridge's fdb entry for the MAC moved to
#     that tap.
# Printed: `MIGRATION: case=... downtime_ms=... total_ms=... setup_ms=... ram_mb=...
# ping_sent=... ping_lost=... ping_duplicates=...` (query-migrate's figures).
# Root is needed (namespace, taps, bridge). Exit: 0 pass, 1 fail, 64 usage, 77 not root.
set -euo pipefail
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
# shellcheck source=lib.sh
source "$HERE/lib.sh"

uvhost="" case_name="" mb=40 rate_kb=2560 max_lost=20
while (($#)); do
  case $1 in
    --uvhost) uvhost=$2; shift 2 ;;
    --mb) mb=$2; shift 2 ;;
    --rate-kb) rate_kb=$2; shift 2 ;;
    --max-lost) max_lost=$2; shift 2 ;;
    same-daemon | two-daemons | qemu-tap) case_name=$1; shift ;;
    *) echo "usage: migration.sh --uvhost PATH same-daemon|two-daemons|qemu-tap [--mb N] [--rate-kb N] [--max-lost N]" >&2; exit 64 ;;
  esac
done
[[ -n $uvhost && -n $case_name ]] || { echo "usage: migration.sh --uvhost PATH same-daemon|two-daemons|qemu-tap" >&2; exit 64; }
[[ -x $uvhost ]] || { echo "no uvhost binary at $uvhost" >&2; exit 64; }
uvhost=$(readlink -f "$uvhost")
[[ $(id -u) -eq 0 ]] || { echo "not root (network namespace, taps and a bridge needed): skipped"; exit 77; }

PYTHON=$(command -v python3) || { echo "python3 needed (QMP, the paced server, the RARP capture): skipped"; exit 77; }
host_ip=10.0.0.1 guest_ip=10.0.0.2 mac=52:54:00:12:34:56 http_port=8000
MIGRATE_S=${MIGRATE_S:-240}   # the migration itself, bounded (TCG, a loaded machine)

ilib_init migration
qlib_prepare || exit 1
ilib_netns_create migr || exit 1

tap_a=uvm$$a tap_b=uvm$$b
sock_a=$dir/a.sock sock_b=$dir/b.sock
qmp_src=$dir/qmp-src.sock qmp_dst=$dir/qmp-dst.sock
migrate_sock=$dir/migrate.sock
state=$dir/http-state
mkdir -p "$state"

qmp() { "$PYTHON" "$HERE/qmp.py" "$@"; }

# ---------------------------------------------------------------- host side

# The daemons: one with both ports, or one per port.
start_daemons() {
  case $case_name in
    same-daemon)
      ilib_serve_start serve -- --control "$dir/ctl.sock" \
        --port "sock=$sock_a,backend=tap,tap=$tap_a,name=a" --port "sock=$sock_b,backend=tap,tap=$tap_b,name=b"
      SERVE_TAGS=(serve) SERVE_PIDS=("$SERVE_PID")
      ;;
    two-daemons)
      ilib_serve_start serve-src -- --control "$dir/ctl-src.sock" --port "sock=$sock_a,backend=tap,tap=$tap_a,name=a"
      SERVE_PIDS=("$SERVE_PID")
      ilib_serve_start serve-dst -- --control "$dir/ctl-dst.sock" --port "sock=$sock_b,backend=tap,tap=$tap_b,name=b"
      SERVE_TAGS=(serve-src serve-dst) SERVE_PIDS+=("$SERVE_PID")
      ;;
    qemu-tap) ;;  # QEMU makes the taps when it starts
  esac
}

# The bridge with the host address and both taps.
bridge_up() {
  ilib_wait_link "$tap_a" && ilib_wait_link "$tap_b" || return 1
  "${NS[@]}" ip link add br0 type bridge
  "${NS[@]}" ip addr add "$host_ip/24" dev br0
  local tap
  for tap in "$tap_a" "$tap_b"; do
    "${NS[@]}" ip link set "$tap" master br0
    "${NS[@]}" ip link set "$tap" up
  done
  "${NS[@]}" ip link set br0 up
}

# The tap the bridge's fdb has the guest's MAC on (empty: none).
fdb_port() { "${NS[@]}" bridge fdb show br br0 | awk -v m="$mac" '$1 == m && $2 == "dev" { print $3; exit }'; }

start_helpers() {
  head -c "$((mb * 1024 * 1024))" /dev/urandom >"$dir/blob"
  blob_sha=$(sha256sum "$dir/blob" | cut -d' ' -f1)
  # Both its outputs to the log: nothing started in the background keeps ctest's pipe.
  "${NS[@]}" "$PYTHON" "$HERE/paced_http.py" "$dir/blob" "$host_ip" "$http_port" "$((rate_kb * 1024))" "$state" \
    >"$dir/http.log" 2>&1 &
  ILIB_PIDS+=("$!")
  "${NS[@]}" "$PYTHON" "$HERE/rarp_capture.py" "$tap_b" >"$dir/rarp-$tap_b.txt" 2>"$dir/rarp.log" &
  ILIB_PIDS+=("$!")
  ilib_wait_until 10 grep -q capturing "$dir/rarp.log" || { fail "rarp_capture.py did not start: $(cat "$dir/rarp.log")"; return 1; }
  ilib_wait_until 10 grep -q serving "$dir/http.log" || { fail "paced_http.py did not start: $(cat "$dir/http.log")"; return 1; }
}

# ---------------------------------------------------------------- the guests

# The source (NAME src) boots and runs the test; the destination (dst) waits for the
# migration stream. Same kernel, command line, memory and device.
start_guests() {
  local -a net_a=(--sock "$sock_a") net_b=(--sock "$sock_b")
  [[ $case_name == qemu-tap ]] && net_a=(--tap "$tap_a") net_b=(--tap "$tap_b")
  local -a guest_args=(uvhost.tests=migrate "uvhost.ip=$guest_ip/24" "uvhost.peer=$host_ip" uvhost.interval=0.05
    "uvhost.url=http://$host_ip:$http_port/blob")
  qlib_guest_start src "${net_a[@]}" --cpu 1 --mac "$mac" --limit 600 --device-opts guest_announce=off \
    --qemu-arg -qmp --qemu-arg "unix:$qmp_src,server=on,wait=off" -- "${guest_args[@]}" || return 1
  qlib_guest_start dst "${net_b[@]}" --cpu 1 --mac "$mac" --limit 600 --device-opts guest_announce=off \
    --qemu-arg -qmp --qemu-arg "unix:$qmp_dst,server=on,wait=off" \
    --qemu-arg -incoming --qemu-arg "unix:$migrate_sock" -- "${guest_args[@]}" || return 1
  ilib_wait_until 20 test -S "$migrate_sock" || { fail "the destination QEMU never listened on $migrate_sock"; return 1; }
}

# Migrates src to dst once the download runs; MIGRATION = query-migrate's last answer.
MIGRATION="" sent_at_switchover=0
migrate() {
  qlib_wait_marker src '^UVHOST-BEGIN: name=migrate' "$QLIB_GUEST_S" || { fail "the source guest never began its test"; return 1; }
  ilib_wait_until 120 test -e "$state/started" || { fail "the guest never started its download"; return 1; }
  sleep 1
  note "# migrating (download and ping running; fdb: $mac on $(fdb_port))"
  qmp "$qmp_src" migrate-set-parameters '{"max-bandwidth": 1073741824}' >/dev/null
  qmp "$qmp_src" migrate "{\"uri\": \"unix:$migrate_sock\"}" >/dev/null
  local i status=""
  for ((i = 0; i < MIGRATE_S * 2; i++)); do
    MIGRATION=$(qmp "$qmp_src" query-migrate)
    status=$(jq -r .status <<<"$MIGRATION")
    [[ $status == completed || $status == failed || $status == cancelled ]] && break
    sleep 0.5
  done
  [[ $status == completed ]] || { fail "migration did not complete: $MIGRATION"; return 1; }
  if [[ -e $state/finished ]]; then
    fail "the download ended before the migration completed (raise --mb or lower --rate-kb): nothing was checked across it"
  fi
  sent_at_switchover=$(cat "$state/sent" 2>/dev/null || echo 0)
}

# ---------------------------------------------------------------- checks

check_after() {
  local src_status dst_status
  # A QEMU that exited already (its guest crashed and powered off) has no monitor.
  src_status=$(qmp "$qmp_src" query-status 2>/dev/null | jq -r .status) || src_status="gone (QEMU exited)"
  dst_status=$(qmp "$qmp_dst" query-status 2>/dev/null | jq -r .status) || dst_status="gone (QEMU exited)"
  [[ $src_status == postmigrate ]] || fail "the source is $src_status after the migration (postmigrate expected)"
  [[ $dst_status == running ]] || fail "the destination is $dst_status after the migration (running expected)"
  qmp "$qmp_src" quit >/dev/null || true
  qlib_guest_wait src 30 || true

  # The guest's verdict, printed by the destination after the move.
  qlib_wait_marker dst '^UVHOST-DONE' 300 || true
  if grep -Eq 'BUG:|Oops|Kernel panic|general protection' "$dir/guest-dst.log"; then
    fail "the guest's kernel failed on the destination:"
    grep -E 'BUG:|Oops|Kernel panic|general protection|RIP:|Comm:' "$dir/guest-dst.log" | tr -d '\r' | head -n 12 | sed 's/^/  | /'
  fi
  qlib_result dst migrate || return 0
  echo "[dst] $RESULT"
  grep -E '^ping: ' "$dir/guest-dst.log" | tr -d '\r' | sed 's/^/[dst] /'
  local sha bytes sent got dups errs lost
  sha=$(field "$RESULT" sha256) bytes=$(field "$RESULT" bytes)
  sent=$(field "$RESULT" ping_sent) got=$(field "$RESULT" ping_received)
  dups=$(field "$RESULT" ping_duplicates) errs=$(field "$RESULT" ping_errors)
  lost=$((sent - got))
  [[ $sha == "$blob_sha" ]] || fail "the guest's sha256 $sha is not the host's $blob_sha"
  ((bytes == mb * 1024 * 1024)) || fail "the guest received $bytes bytes of $((mb * 1024 * 1024))"
  ((sent > 0 && dups == 0 && errs == 0)) || fail "ping: $sent sent, $dups duplicates, $errs errors"
  ((lost <= max_lost)) || fail "ping: $lost of $sent unanswered across the migration (at most $max_lost allowed)"

  # The announcement: the destination's backend wrote it to its tap.
  local rarp
  rarp=$(grep -c "src=$mac op=3 sha=$mac tha=$mac" "$dir/rarp-$tap_b.txt" || true)
  ((rarp >= 1)) || { fail "no RARP announcement of $mac came out of $tap_b; captured:"; sed 's/^/  | /' "$dir/rarp-$tap_b.txt"; }
  # (QEMU's own taps go away with their QEMU, the destination's when its guest powered off.)
  local where
  where=$(fdb_port)
  [[ $where == "$tap_b" || $case_name == qemu-tap ]] || fail "the bridge has $mac on '$where', not on the destination's tap $tap_b"
  if [[ $case_name != qemu-tap ]]; then
    grep -h "announced $mac" "$dir"/serve*.log | sed 's/^/[uvhost] /' || fail "uvhost logged no RARP announcement"
    # The source's port logged while QEMU migrated (VHOST_F_LOG_ALL on, then off or closed).
    grep -h "a: dirty-page logging on" "$dir"/serve*.log | sed 's/^/[uvhost] /' ||
      fail "port a never turned dirty-page logging on"
  fi

  local downtime total setup ram
  downtime=$(jq -r '.downtime // "?"' <<<"$MIGRATION") total=$(jq -r '."total-time" // "?"' <<<"$MIGRATION")
  setup=$(jq -r '."setup-time" // "?"' <<<"$MIGRATION")
  ram=$(jq -r '(.ram.transferred // 0) / 1048576 | floor' <<<"$MIGRATION")
  echo "MIGRATION: case=$case_name downtime_ms=$downtime total_ms=$total setup_ms=$setup ram_mb=$ram" \
    "ping_sent=$sent ping_lost=$lost ping_duplicates=$dups rarp_frames=$rarp file_mb=$mb" \
    "file_mb_at_switchover=$((sent_at_switchover / 1048576)) sha256_ok=$([[ $sha == "$blob_sha" ]] && echo yes || echo no)"
  qlib_guest_wait dst 60 || true
}

stop_daemons() {
  local i
  for i in "${!SERVE_PIDS[@]}"; do ilib_serve_stop "${SERVE_TAGS[i]}" "${SERVE_PIDS[i]}"; done
}

SERVE_TAGS=() SERVE_PIDS=()
start_daemons || exit 1
if [[ $case_name == qemu-tap ]]; then
  # The taps exist once QEMU runs; the guest waits for the host's first echo reply.
  start_guests || exit 1
  bridge_up || exit 1
  start_helpers || exit 1
else
  bridge_up || exit 1
  start_helpers || exit 1
  start_guests || exit 1
fi
if migrate; then check_after; fi
stop_daemons
ilib_finish "migration $case_name"
