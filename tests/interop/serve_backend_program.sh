#!/usr/bin/env bash
# serve_backend_program.sh - `uvhost serve` as a vhost-user backend program that other
# software starts: QEMU's backend-program conventions (--socket-path, --fd,
# --print-capabilities, the installed descriptor) and systemd's socket activation.
#
#   serve_backend_program.sh --uvhost PATH [--build-dir DIR] CASE [--seconds N]
#
# CASE:
#   flags       --print-capabilities prints {"type": "net"} (also with other arguments
#               on the conventional name); --fd on what is not a socket, sock= next to
#               --socket-path, --fd with --socket-path: refused, exit != 0, the reason said
#   activation  `systemd-socket-activate -l a.sock -l b.sock --fdname=p0:unknown uvhost
#               serve ...`: uvhost starts on testpmd's connection and adopts both
#               sockets (p0 by its name, p1 by its path); testpmd virtio_user txonly for
#               SECONDS into p0's sink: uvhost counts exactly what testpmd sent; SIGTERM:
#               exit 0, and both socket files are still there (not ours to remove);
#               an inherited socket no port claims: exit 2, the reason said
#   fd          a launcher binds and listens, hands the socket over as `--fd 5`:
#               testpmd's frames counted exactly; the path left in place
#   install     `cmake --install DIR --prefix TMP`: the descriptor
#               share/qemu/vhost-user/50-uvhost-net.json is valid (type net, a
#               description, binary = TMP/libexec/uvhost-vhost-user-net, executable),
#               that binary answers --print-capabilities, and run with --socket-path it
#               serves testpmd (exact count) and removes its socket on SIGTERM
# Exit: 0 pass, 1 fail, 64 usage, 77 skipped (no testpmd / systemd-socket-activate).
set -euo pipefail
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
# shellcheck source=lib.sh
source "$HERE/lib.sh"

uvhost="" build_dir="" case_name="" seconds=2
while (($#)); do
  case $1 in
    --uvhost) uvhost=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    flags | activation | fd | install) case_name=$1; shift ;;
    *) echo "serve_backend_program.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done
[[ -x $uvhost && -n $case_name ]] || { echo "usage: serve_backend_program.sh --uvhost PATH [--build-dir DIR] flags|activation|fd|install" >&2; exit 64; }
[[ $case_name == flags ]] || ilib_require_testpmd
ilib_init "backend-program"

# expect_refusal WHAT TEXT CMD...: CMD exits non-zero and says TEXT.
expect_refusal() {
  local what=$1 text=$2 rc=0; shift 2
  "$@" >"$dir/refused.out" 2>&1 || rc=$?
  if ((rc == 0)); then fail "$what: accepted (exit 0)"; return 0; fi
  grep -qF -- "$text" "$dir/refused.out" || { fail "$what: exit $rc without '$text': $(cat "$dir/refused.out")"; return 0; }
  echo "$what: refused, exit $rc: $(grep -F -- "$text" "$dir/refused.out" | head -n 1 | sed 's/.*\] //')"
}

# expect_capabilities WHAT CMD...: CMD prints exactly {"type":"net"} and exits 0.
expect_capabilities() {
  local what=$1 out; shift
  out=$("$@" 2>"$dir/caps.err") || { fail "$what: exit $?: $(cat "$dir/caps.err")"; return 0; }
  [[ $(jq -c . <<<"$out" 2>/dev/null) == '{"type":"net"}' ]] || { fail "$what printed '$out'"; return 0; }
  echo "$what: $out"
}

# Sink accounting: testpmd's TX count == the port's count for the connection, exactly.
check_sink() {
  local tag=$1 sent got
  sent=$(field "$TP_LINE" tx_packets); got=$(field "$END_LINE" rx_packets)
  echo "$tag: testpmd sent=$sent; uvhost received=$got"
  ((sent > 0)) || fail "$tag: testpmd sent nothing"
  [[ $sent == "$got" ]] || fail "$tag: testpmd sent $sent, uvhost received $got"
}

# Waits for the background uvhost PID (TAG.log) to exit after SIGTERM: exit 0 wanted.
stop_background() {
  local tag=$1 pid=$2 rc=0
  ilib_stop_pid "$pid" TERM 20 || rc=$?
  ((rc == 0)) || { fail "$tag: exit $rc on SIGTERM; log tail:"; tail -n 15 "$dir/$tag.log"; }
}

case_flags() {
  expect_capabilities "uvhost serve --print-capabilities" "$uvhost" serve --print-capabilities
  local conventional=$dir/uvhost-vhost-user-net
  ln -s "$(readlink -f "$uvhost")" "$conventional"
  expect_capabilities "uvhost-vhost-user-net --print-capabilities --bogus" "$conventional" --print-capabilities --bogus
  expect_refusal "--fd on /dev/null" "fd 0 is not a socket" "$uvhost" serve --fd 0 </dev/null
  expect_refusal "--fd on a closed fd" "fd 9 is not open" "$uvhost" serve --fd 9
  expect_refusal "--socket-path with sock=" "without sock=" "$uvhost" serve --socket-path "$dir/x.sock" --port sock=/y
  expect_refusal "--fd with --socket-path" "excludes" "$uvhost" serve --fd 0 --socket-path "$dir/x.sock"
  expect_refusal "--socket-path with two --port" "at most one --port" \
    "$uvhost" serve --socket-path "$dir/x.sock" --port queues=1 --port queues=2
  # Through the conventional name, --socket-path is a port of its own.
  expect_refusal "uvhost-vhost-user-net --socket-path, bad keys" "queues" \
    "$conventional" --socket-path "$dir/x.sock" --port queues=0
  [[ -e $dir/x.sock ]] && fail "a refused command line left $dir/x.sock behind"
  return 0
}

case_activation() {
  command -v systemd-socket-activate >/dev/null || { echo "systemd-socket-activate not installed: skipped"; exit 77; }
  local a=$dir/a.sock b=$dir/b.sock
  # uvhost runs only once a frontend connects (then systemd-socket-activate execs it).
  taskset -c 0 systemd-socket-activate -l "$a" -l "$b" --fdname=p0:unknown \
    "$uvhost" serve --port "sock=$dir/never-bound.sock,name=p0,backend=sink" --port "sock=$b,name=p1" \
    --summary-json "$dir/act.summary.json" >"$dir/act.out" 2>"$dir/act.log" &
  local pid=$!
  ILIB_PIDS+=("$pid")
  ilib_wait_until 10 test -S "$a" || { fail "systemd-socket-activate never listened on $a"; return 0; }
  ilib_wait_until 10 test -S "$b" || { fail "systemd-socket-activate never listened on $b"; return 0; }
  ilib_testpmd_run act 1 txonly "$a" "$seconds" || { stop_background act "$pid"; return 0; }
  ilib_connection_end act p0 1 || { stop_background act "$pid"; return 0; }
  grep -q "p0: serving the listening socket handed over as fd 3 $a" "$dir/act.log" || fail "p0 did not adopt fd 3 (by name)"
  grep -q "p1: serving the listening socket handed over as fd 4 $b" "$dir/act.log" || fail "p1 did not adopt fd 4 (by path)"
  check_sink activation
  stop_background act "$pid"
  [[ -S $a && -S $b ]] || fail "uvhost removed an inherited socket ($(ls "$dir"))"
  [[ -e $dir/never-bound.sock ]] && fail "p0 bound its own socket though it inherited one"
  [[ $(ilib_summary act p0 rx_packets) == "$(field "$END_LINE" rx_packets)" ]] || fail "summary JSON disagrees"

  # A socket no port claims: the start fails, exit 2 (usage), saying which.
  local c=$dir/c.sock rc=0
  systemd-socket-activate -l "$c" "$uvhost" serve --port "sock=$dir/d.sock" >"$dir/unclaimed.log" 2>&1 &
  pid=$!
  ILIB_PIDS+=("$pid")
  ilib_wait_until 10 test -S "$c" || { fail "systemd-socket-activate never listened on $c"; return 0; }
  python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.recv(1)' "$c" 2>/dev/null || true
  ilib_wait_until 10 eval "! ilib_alive $pid" || true
  wait "$pid" || rc=$?
  ilib_forget_pid "$pid"
  ((rc == 2)) || fail "an unclaimed inherited socket: exit $rc, not 2: $(cat "$dir/unclaimed.log")"
  grep -q "no port claims the inherited socket fd 3" "$dir/unclaimed.log" || fail "unclaimed: no reason given: $(cat "$dir/unclaimed.log")"
  echo "unclaimed inherited socket: exit $rc: $(grep -o 'no port claims.*' "$dir/unclaimed.log")"
}

case_fd() {
  local h=$dir/handed.sock
  taskset -c 0 python3 "$HERE/handover.py" listen "$h" 5 -- \
    "$uvhost" serve --fd 5 --port backend=sink,name=p0 --summary-json "$dir/fd.summary.json" \
    >"$dir/fd.out" 2>"$dir/fd.log" &
  local pid=$!
  ILIB_PIDS+=("$pid")
  ilib_wait_until 15 grep -q "serving;" "$dir/fd.log" || { fail "uvhost --fd 5 did not come up: $(cat "$dir/fd.log")"; return 0; }
  ilib_testpmd_run fd 1 txonly "$h" "$seconds" || { stop_background fd "$pid"; return 0; }
  ilib_connection_end fd p0 1 || { stop_background fd "$pid"; return 0; }
  check_sink "--fd (listening)"
  stop_background fd "$pid"
  [[ -S $h ]] || fail "uvhost removed the socket it was handed"
}

case_install() {
  [[ -d $build_dir ]] || { fail "install: --build-dir needed"; return 0; }
  local prefix=$dir/prefix
  cmake --install "$build_dir" --prefix "$prefix" >"$dir/install.log" 2>&1 || { fail "cmake --install: $(tail -n 5 "$dir/install.log")"; return 0; }
  local descriptor=$prefix/share/qemu/vhost-user/50-uvhost-net.json binary
  [[ -s $descriptor ]] || { fail "no descriptor at $descriptor"; return 0; }
  jq -e '.type == "net" and (.description | type == "string" and length > 0) and (.binary | startswith("/"))
         and (keys - ["binary", "description", "tags", "type"] | length == 0)' "$descriptor" >/dev/null ||
    fail "descriptor does not fit vhost-user.json's VhostUserBackend: $(cat "$descriptor")"
  binary=$(jq -r .binary "$descriptor")
  echo "descriptor: $(jq -c . "$descriptor")"
  [[ $binary == "$prefix/libexec/uvhost-vhost-user-net" && -x $binary ]] || { fail "binary $binary: not the installed program"; return 0; }
  [[ -x $prefix/bin/uvhost ]] || fail "bin/uvhost not installed"
  expect_capabilities "$binary --print-capabilities" "$binary" --print-capabilities
  local s=$dir/conv.sock
  taskset -c 0 "$binary" --socket-path "$s" --port backend=sink,name=p0 >"$dir/conv.out" 2>"$dir/conv.log" &
  local pid=$!
  ILIB_PIDS+=("$pid")
  ilib_wait_until 15 grep -q "serving;" "$dir/conv.log" || { fail "$binary --socket-path did not come up: $(cat "$dir/conv.log")"; return 0; }
  ilib_testpmd_run conv 1 txonly "$s" "$seconds" || { stop_background conv "$pid"; return 0; }
  ilib_connection_end conv p0 1 || { stop_background conv "$pid"; return 0; }
  check_sink "installed uvhost-vhost-user-net --socket-path"
  stop_background conv "$pid"
  [[ -e $s ]] && fail "the socket uvhost created is left behind"
  return 0
}

"case_$case_name"
ilib_finish "backend program: $case_name"
