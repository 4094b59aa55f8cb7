#!/usr/bin/env bash
# compare-builds.sh - one `uvhost bench` workload against two uvhost builds, interleaved:
# each round starts `uvhost serve` from build A and from build B in turn (the order
# alternating), runs one measured bench against it and stops it; then the geometric mean
# of the per-round ratios B/A with its 95% confidence interval (Student t on the log
# ratios), and the medians.
#
#   scripts/compare-builds.sh ROUNDS WORKLOAD SIZE UVHOST_A UVHOST_B [PORT_KEYS]
#
# WORKLOAD: stream-tx (backend sink), stream-rx (backend source, frames of SIZE bytes)
# or rr (backend loopback). PORT_KEYS (e.g. ",poll=always") go on the port of both. The
# daemon runs on CPU 1, the bench frontend (build B's, the same for both) on CPU 0;
# 0.2 s warm-up and 0.5 s measured per run. Prints one line per run (round, side,
# packets/s) and the summary.
set -euo pipefail
(($# >= 5)) || { sed -n 2,14p "$0" >&2; exit 64; }
rounds=$1 workload=$2 size=$3 uvhost_a=$4 uvhost_b=$5 keys=${6:-}
case $workload in
  stream-tx) backend=sink ;;
  stream-rx) backend="source,size=$size" ;;
  rr) backend=loopback ;;
  *) echo "compare-builds.sh: unknown workload $workload" >&2; exit 64 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sock=$tmp/port.sock

one_run() {  # one_run BINARY: packets/s of one measured bench
  rm -f "$sock"
  taskset -c 1 "$1" --log-level warn serve --port "sock=$sock,backend=$backend,name=p0$keys" >/dev/null 2>&1 &
  local serve=$!
  for _ in $(seq 50); do [[ -S $sock ]] && break; sleep 0.02; done
  taskset -c 0 "$uvhost_b" bench --socket "$sock" --backend-pid "$serve" --workloads "$workload" --sizes "$size" \
    --runs 1 --seconds 0.5 --warmup 0.2 --no-pin --json "$tmp/run.json" >/dev/null 2>&1 || true
  kill "$serve" 2>/dev/null || true
  wait "$serve" 2>/dev/null || true
  python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['points'][0]['runs'][0]['pps'])" "$tmp/run.json" 2>/dev/null || echo 0
}

for ((r = 1; r <= rounds; r++)); do
  order="A B"
  ((r % 2 == 0)) && order="B A"
  for side in $order; do
    binary=$uvhost_a
    [[ $side == B ]] && binary=$uvhost_b
    echo "$r $side $(one_run "$binary")"
  done
done | tee "$tmp/runs.txt"
python3 - "$tmp/runs.txt" <<'PY'
import math, statistics as st, sys
rows = [line.split() for line in open(sys.argv[1]) if len(line.split()) == 3]
a = {int(r[0]): float(r[2]) for r in rows if r[1] == "A" and float(r[2]) > 0}
b = {int(r[0]): float(r[2]) for r in rows if r[1] == "B" and float(r[2]) > 0}
logs = [math.log(b[i] / a[i]) for i in a if i in b]
if len(logs) < 2:
    sys.exit("compare-builds.sh: fewer than two complete rounds")
# Student t, 97.5% quantile, for n-1 degrees of freedom (n up to 31; beyond: 2.0).
t = [12.71, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
     2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
n = len(logs)
half = (t[n - 2] if n - 2 < len(t) else 2.0) * st.stdev(logs) / math.sqrt(n)
m = st.mean(logs)
print(f"A median {st.median(a.values()):.4g} packets/s, B median {st.median(b.values()):.4g}; "
      f"B/A {math.exp(m):.3f}x [{math.exp(m - half):.3f}, {math.exp(m + half):.3f}] (95% CI, {n} rounds)")
PY
