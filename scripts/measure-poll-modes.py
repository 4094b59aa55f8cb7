#!/usr/bin/env python3
"""measure-poll-modes.py - what each poll mode costs and buys, through the real stack.

For every poll mode (notify, busy 50 us, always, adaptive <= 50 us), interleaved
(A B C D A B C D ...) and repeated --runs times, on one `uvhost serve` per run (port
backend=loopback, the mode under test) with our embedded frontend as the guest
(tests/interop/frontend_send.cpp):
  - idle: the frontend is connected and sends nothing for --idle-seconds: the worker's
    CPU time over that interval, from `uvhost ctl stats --json` (CLOCK_THREAD_CPUTIME_ID
    of the worker thread), as % of one core;
  - rr: one request in flight at a time (--window 1 --echo), --transactions of them:
    transactions per second (the inverse is the round-trip latency), and the worker's
    CPU per transaction.
Each figure is the mean over runs with a 95% bootstrap percentile confidence interval
(10000 resamples of the runs; no distribution assumed). Frontend and daemon are pinned
to different cores (taskset) unless --no-pin.

Usage: scripts/measure-poll-modes.py --uvhost build/release/cli/uvhost \
         --frontend build/release/tests/interop/uvhost-frontend-send [--runs 5]
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

MODES = [("notify", "poll=notify"), ("busy50", "poll=busy,busy_us=50"), ("always", "poll=always"),
         ("adaptive", "poll=adaptive,busy_us=50")]


def bootstrap_ci(values, resamples=10000, seed=1):
    rng = random.Random(seed)
    n = len(values)
    if n < 2:
        return (values[0], values[0])
    means = sorted(statistics.fmean(rng.choices(values, k=n)) for _ in range(resamples))
    return (means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1])


def worker_cpu_ns(uvhost, control):
    out = subprocess.run([uvhost, "ctl", "--socket", control, "stats", "--json"], check=True,
                         capture_output=True, text=True).stdout
    return sum(w["cpu_ns"] for w in json.loads(out)["workers"])


def wait_for(path, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path} did not appear")
        time.sleep(0.01)


def one_run(args, mode_keys, workdir):
    sock, control, go = (os.path.join(workdir, n) for n in ("p.sock", "c.sock", "go"))
    for p in (sock, control, go):
        if os.path.exists(p):
            os.unlink(p)
    pin_daemon = ["taskset", "-c", "0"] if args.pin else []
    pin_frontend = ["taskset", "-c", "1"] if args.pin else []
    daemon = subprocess.Popen(pin_daemon + [args.uvhost, "--log-level", "warn", "serve", "--port",
                                            f"sock={sock},backend=loopback,{mode_keys}", "--control", control],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(control)
        frontend = subprocess.Popen(pin_frontend + [args.frontend, "--socket", sock, "--packets",
                                                    str(args.transactions), "--echo", "--window", "1", "--go-file",
                                                    go, "--timeout-ms", "60000"],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(0.5)  # connected, rings up, then idle
        cpu0 = worker_cpu_ns(args.uvhost, control)
        t0 = time.monotonic()
        time.sleep(args.idle_seconds)
        cpu1 = worker_cpu_ns(args.uvhost, control)
        idle_pct = 100.0 * (cpu1 - cpu0) / ((time.monotonic() - t0) * 1e9)
        open(go, "w").close()
        out, _ = frontend.communicate(timeout=120)
        cpu2 = worker_cpu_ns(args.uvhost, control)
        fields = dict(kv.split("=", 1) for kv in out.split() if "=" in kv)
        if frontend.returncode != 0 or int(fields.get("received", 0)) != args.transactions:
            raise RuntimeError(f"frontend failed: {out}")
        tps = args.transactions / float(fields["seconds"])
        cpu_per_tx_us = (cpu2 - cpu1) / 1e3 / args.transactions
        return {"idle_cpu_pct": idle_pct, "rr_tps": tps, "rr_cpu_us_per_tx": cpu_per_tx_us}
    finally:
        daemon.send_signal(2)
        daemon.wait(timeout=20)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--uvhost", required=True)
    parser.add_argument("--frontend", required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--transactions", type=int, default=20000)
    parser.add_argument("--idle-seconds", type=float, default=2.0)
    parser.add_argument("--no-pin", dest="pin", action="store_false")
    parser.add_argument("--json", help="also write the per-run figures here")
    args = parser.parse_args()

    results = {name: [] for name, _ in MODES}
    with tempfile.TemporaryDirectory(prefix="uvhost-poll-") as workdir:
        for run in range(args.runs):
            for name, keys in MODES:
                results[name].append(one_run(args, keys, workdir))
                print(f"run {run + 1}/{args.runs} {name}: {results[name][-1]}", file=sys.stderr)

    metrics = [("rr_tps", "rr trans/s", "{:.0f}"), ("rr_cpu_us_per_tx", "worker CPU us/trans", "{:.2f}"),
               ("idle_cpu_pct", "idle worker CPU %", "{:.2f}")]
    print(f"poll modes, loopback port, {args.runs} interleaved runs, mean [95% bootstrap CI]")
    header = f"{'mode':<10}" + "".join(f"{label:>34}" for _, label, _ in metrics) + f"{'rr vs notify':>16}"
    print(header)
    base = statistics.fmean(r["rr_tps"] for r in results["notify"])
    for name, _ in MODES:
        row = f"{name:<10}"
        for key, _, fmt in metrics:
            values = [r[key] for r in results[name]]
            low, high = bootstrap_ci(values)
            row += f"{(fmt + ' [' + fmt + ', ' + fmt + ']').format(statistics.fmean(values), low, high):>34}"
        row += f"{statistics.fmean(r['rr_tps'] for r in results[name]) / base:>15.2f}x"
        print(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
