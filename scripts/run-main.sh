#!/usr/bin/env bash
# run-main.sh - set up, build (release) and run uvhost's main job: a short
# `uvhost bench` through the real stack. Our embedded frontend (the guest's side)
# talks vhost-user to a `uvhost serve` started for each run, over real Unix sockets,
# eventfds and shared memory: request/response against the loopback backend and a
# guest-to-host stream into the sink, 64- and 1500-byte frames, 1 and 4 sessions,
# 3 interleaved runs per point, with latency percentiles, the CPU of every thread
# and the throughput per CPU-second. Takes about a minute.
# Extra arguments go to `uvhost bench` (e.g. --backend testpmd, --json FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release
exec ./build/release/cli/uvhost bench --workloads rr,stream-tx --sizes 64,1500 --sessions 1,4 \
  --runs 3 --seconds 1 --warmup 0.3 "$@"
