#!/usr/bin/env bash
# units_install_test.sh BUILD_DIR - `cmake --install` of a configured, built tree into a
# temporary prefix puts the systemd units under lib/systemd/system with ExecStart naming
# the installed binary, their keys are the ones uvhost relies on, and
# `systemd-analyze verify` (no running systemd needed) accepts them without a word.
set -euo pipefail
build=${1:?usage: units_install_test.sh BUILD_DIR}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$prefix/install.log" 2>&1 || { cat "$prefix/install.log"; fail "cmake --install"; }
units=$prefix/lib/systemd/system
for f in "$units/uvhost.service" "$units/uvhost.socket" "$units/uvhost-port@.socket" \
         "$prefix/bin/uvhost" "$prefix/share/doc/uvhost/examples/uvhost.json"; do
  [[ -f $f ]] || fail "$f not installed"
done

# key=value must appear as a line of the unit.
expect() { grep -qxF -- "$2" "$1" || fail "$(basename "$1"): no line '$2'"; }
service=$units/uvhost.service
expect "$service" "Type=notify"
expect "$service" "ExecStart=$prefix/bin/uvhost serve --config /etc/uvhost/uvhost.json"
expect "$service" 'ExecReload=/bin/kill -HUP $MAINPID'
expect "$service" "Restart=on-failure"
expect "$service" "RuntimeDirectory=uvhost"
expect "$service" "RuntimeDirectoryPreserve=yes"
expect "$service" "CapabilityBoundingSet=CAP_NET_ADMIN"
expect "$service" "DeviceAllow=/dev/net/tun rw"
expect "$units/uvhost.socket" "ListenStream=/run/uvhost/vm0.sock"
expect "$units/uvhost.socket" "FileDescriptorName=vm0"
expect "$units/uvhost.socket" "Service=uvhost.service"
expect "$units/uvhost-port@.socket" "ListenStream=/run/uvhost/%i.sock"
expect "$units/uvhost-port@.socket" "FileDescriptorName=%i"
grep -q '@UVHOST' "$units"/* && fail "an unsubstituted @VARIABLE@ is left in a unit"

# The example configuration names the socket unit's port.
python3 -c 'import json,sys; ports=json.load(open(sys.argv[1]))["ports"]; sys.exit(0 if ports[0]["name"]=="vm0" and ports[0]["sock"]=="/run/uvhost/vm0.sock" else 1)' \
  "$prefix/share/doc/uvhost/examples/uvhost.json" || fail "the example config's first port is not vm0 on /run/uvhost/vm0.sock"

if ! command -v systemd-analyze >/dev/null; then
  echo "systemd-analyze not installed: keys checked, verify skipped"
  exit 0
fi
cp "$units/uvhost-port@.socket" "$units/uvhost-port@vm1.socket"  # verify takes instances, not templates
out=$(cd "$units" && systemd-analyze verify --man=no ./uvhost.service ./uvhost.socket ./uvhost-port@vm1.socket 2>&1) ||
  fail "systemd-analyze verify: $out"
# verify warns about unknown keys or bad values but still exits 0: any output is a failure.
[[ -z $out ]] || fail "systemd-analyze verify complained: $out"
echo "PASS: units installed under $units and verified"
