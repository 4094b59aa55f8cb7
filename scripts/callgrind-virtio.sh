#!/usr/bin/env bash
# callgrind-virtio.sh - instructions per 64-byte packet of the device-side virtqueue
# walk (pop + validate chain, copy header and frame out, add used; publish and the
# signal check once per 128-packet batch), counted by valgrind --tool=callgrind.
#
# Runs virtio/tools/virtio_walk.cpp (uvhost-virtio-walk) twice, with SMALL and LARGE
# packet counts, and divides the difference in instructions by the difference in
# packets, so process start-up and set-up cancel out.
# Usage: scripts/callgrind-virtio.sh [build-dir]   (default build/vio-release, built
# from the release preset if missing). Environment: SMALL (default 100000),
# LARGE (default 1100000).
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir="${1:-build/vio-release}"
small="${SMALL:-100000}"
large="${LARGE:-1100000}"

if [[ ! -f "${build_dir}/build.ninja" ]]; then
  cmake --preset release -B "$build_dir" >/dev/null
fi
ninja -C "$build_dir" -j2 uvhost-virtio-walk >/dev/null
binary="${build_dir}/virtio/uvhost-virtio-walk"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

instructions() {  # total Ir of one run
  valgrind --tool=callgrind --callgrind-out-file="$tmp/out.$1" "$binary" "$1" >/dev/null 2>"$tmp/log.$1"
  awk '/^(summary|totals):/ { print $2; exit }' "$tmp/out.$1"
}

ir_small="$(instructions "$small")"
ir_large="$(instructions "$large")"
# The walker rounds up to whole 128-packet batches: count what it actually ran.
packets_of() { "$binary" "$1" | awk '{ print $2 }'; }
p_small="$(packets_of "$small")"
p_large="$(packets_of "$large")"

echo "callgrind: ${p_small} packets: ${ir_small} instructions; ${p_large} packets: ${ir_large} instructions"
awk -v a="$ir_small" -v b="$ir_large" -v pa="$p_small" -v pb="$p_large" \
  'BEGIN { printf "instructions per packet: %.1f\n", (b - a) / (pb - pa) }'
