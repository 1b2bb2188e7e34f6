"""Benchmark: linearizability checking on simulated registers.

Seconds per history for single-register histories with 5, 10 and 50
concurrent processes, with no crashes and with many crashed (info) ops; then
an etcd-like suite (100 cas-register histories of 80-300 ops from 5
processes, values 0-4, up to ~20 crashed ops, as Jepsen's etcd tests make
them) checked by one `sleuth check` process, start-up included.

    .venv/bin/python bench/bench_linearizable.py
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

from sleuth.checker.linearizable import check_register
from sleuth.history import History
from sleuth.workloads.sim_register import simulate, write_history

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out", "etcd")


def per_history() -> None:
    print("register (independent keys, about 5 processes per key, as Jepsen's independent\n"
          "generator runs them), 1,000 ops per history, 10 histories each")
    print(f"{'processes':>9} {'keys':>5} {'crashed':>8} {'ms/history':>11} {'max ms':>7} {'verdicts':>10}")
    for procs in (5, 10, 50):
        for crash in (0.0, 0.3):
            times, valid = [], 0
            keys = max(1, procs // 5)
            for seed in range(10):
                events, _ = simulate(ops=1000, processes=procs, crash_rate=crash, keys=keys, seed=seed)
                h = History(events, "sim")
                h.ops()
                t = time.perf_counter()
                r = check_register(h)
                times.append(time.perf_counter() - t)
                valid += r.valid is True
            print(f"{procs:>9} {keys:>5} {crash:>8.0%} {1000 * sum(times) / len(times):>11.2f} "
                  f"{1000 * max(times):>7.1f} {valid:>4}/10 ok", flush=True)


def etcd_suite(count: int = 100) -> None:
    os.makedirs(OUT, exist_ok=True)
    paths = []
    for i in range(count):
        rnd = random.Random(i)
        path = os.path.join(OUT, f"etcd_{i:03d}.jsonl")
        if not os.path.exists(path):
            write_history(path, ops=rnd.randint(80, 300), processes=5,
                          crash_rate=rnd.uniform(0.02, 0.08), values=5, seed=i,
                          stale_reads=i % 10 == 9)
        paths.append(path)
    sleuth = os.path.join(os.path.dirname(sys.executable), "sleuth")
    t = time.perf_counter()
    p = subprocess.run([sleuth, "check", "--workload", "cas-register", "--json", *paths],
                       capture_output=True, text=True)
    dt = time.perf_counter() - t
    invalid = p.stdout.count('"valid": false')
    print(f"\netcd-like suite: {count} cas-register histories, one `sleuth check` process: "
          f"{dt:.2f} s in all, start-up included ({invalid} invalid, exit {p.returncode})")


if __name__ == "__main__":
    per_history()
    etcd_suite()
