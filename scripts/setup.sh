#!/usr/bin/env bash
# setup.sh - install every build and test dependency of uvhost from Debian's packages.
#
# Idempotent and fast when already done: it asks dpkg what is missing and only then
# runs apt-get (as root, or through sudo). Safe to run before every build.
set -euo pipefail

PACKAGES=(
  # toolchain
  g++ cmake ninja-build pkg-config git
  lld           # the linker (CMakeLists.txt: UVHOST_LLD)
  # libraries (see cmake/Dependencies.cmake)
  libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev libboost-dev
  libck-dev liburcu-dev
  libsystemd-dev   # sd_notify and socket activation (LISTEN_FDS) for systemd units
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  spin          # model checker for the work queue's wake-up protocol
  clang libclang-rt-14-dev   # libFuzzer targets (fuzz preset) with ASan+UBSan
  valgrind      # callgrind instruction counts (stable benchmark figure)
  dpdk-dev      # dpdk-testpmd: the vhost-user interop peer (tests/interop)
  iproute2 iputils-ping   # tap tests: `ip` in a network namespace, `ping` through the tap
  jq            # the shell tests read uvhost's JSON stats and summaries
  systemd       # systemd-socket-activate and systemd-analyze verify (socket activation, units)
  gnuplot-nox   # `uvhost bench compare --plot` and the labs' plots
  prometheus    # promtool: the metrics endpoint's text is checked by `promtool check metrics`
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then SUDO=(sudo); fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
