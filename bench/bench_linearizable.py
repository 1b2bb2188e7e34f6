"""Benchmark: exact linearizability checking of register histories.

Histories come from the simulated register (`workloads/sim_register.py`);
only the check is timed (`check_register` / `check_cas_register` on an
in-memory `History`), one process, no parallelism.

1. Seconds per history by concurrency (5, 10, 50 processes), for one
   cas-register and for the keyed `register` workload, with few and with
   many crashed (info) ops.
2. An etcd-like suite, as Jepsen's etcd test produces and Porcupine checks:
   100 cas-register histories of 80-300 ops from 5 processes, values 0-4, up
   to ~20 crashed ops; one in ten from a database with stale reads. Total
   seconds of checking (Porcupine, in Go, takes 0.9 s on its suite of 100).
3. Histories with a violation (the stale-read bug), where the search must
   rule out every linearization before giving up; the hardest rows (1,000
   ops, 10 and 50 processes, few and many crashed ops) must all be decided
   (none "unknown"): the count of unknown histories is printed.
4. `sleuth check` of 100,000-op `register` histories (100 keys, 10
   processes), with the stale-read bug and without, beside Porcupine's figure
   on this machine for such a history with the bug (0.34 s, measured when
   Porcupine could be installed here; it cannot be now, so the figure is
   quoted, not re-measured). Timed is the whole path a file takes: read,
   pair, split by key, search, explain (`judge_file`, in a fresh interpreter
   so numpy's import counts), by the columnar reader `sleuth check` uses and
   by the general one; then the whole command, start-up included.

    .venv/bin/python bench/bench_linearizable.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from sleuth.checker.linearizable import check_cas_register, check_register
from sleuth.history.jsonl import History, write_jsonl
from sleuth.workloads.sim_register import simulate

PORCUPINE_S = 0.34  # Porcupine on a 100k-op register history with a stale-read bug (quoted)


def timed(events, keyed: bool) -> tuple[float, object]:
    h = History(events, "bench")
    check = check_register if keyed else check_cas_register
    t = time.perf_counter()
    r = check(h)
    return time.perf_counter() - t, r


def row(label: str, times: list[float], results: list, infos: list[int]) -> None:
    verdicts = {str(r.valid): 0 for r in results}
    for r in results:
        verdicts[str(r.valid)] += 1
    configs = statistics.mean(r.stats["configurations-explored"] for r in results)
    print(f"{label:<60} {len(times):>4} {statistics.mean(infos):>6.1f} "
          f"{statistics.median(times) * 1e3:>9.2f} {statistics.mean(times) * 1e3:>9.2f} "
          f"{max(times) * 1e3:>9.2f} {configs:>9.0f}  "
          + " ".join(f"{k}:{v}" for k, v in sorted(verdicts.items())))


def header(title: str) -> None:
    print(f"\n{title}")
    print(f"{'histories':<60} {'n':>4} {'info':>6} {'median ms':>9} {'mean ms':>9} "
          f"{'max ms':>9} {'configs':>9}  verdicts")


def by_concurrency(seeds: int) -> None:
    header("1. seconds per history, by concurrency (values 0-4, valid histories)")
    for keyed, ops, keys in ((False, 500, None), (True, 5000, 10)):
        for procs in (5, 10, 50):
            for crash, name in ((0.02, "few crashed"), (0.25, "many crashed")):
                times, results, infos = [], [], []
                for seed in range(seeds):
                    events, stats = simulate(ops=ops, processes=procs, keys=keys, values=5,
                                             crash_rate=crash, seed=seed)
                    dt, r = timed(events, keyed)
                    times.append(dt)
                    results.append(r)
                    infos.append(stats["info"])
                what = f"register {keys} keys" if keyed else "cas-register"
                row(f"{what}, {ops} ops, {procs} procs, {name}", times, results, infos)


def etcd_suite() -> None:
    header("2. etcd-like suite: 100 cas-register histories, 80-300 ops, 5 procs")
    rnd = random.Random(2013)
    times, results, infos = [], [], []
    for seed in range(100):
        ops = rnd.randint(80, 300)
        bug = "stale-read" if seed % 10 == 9 else None
        events, stats = simulate(ops=ops, processes=5, values=5, crash_rate=0.05, seed=seed,
                                 bug=bug, stale_rate=0.05)
        dt, r = timed(events, False)
        times.append(dt)
        results.append(r)
        infos.append(stats["info"])
    row("etcd-like, 1 in 10 with stale reads", times, results, infos)
    print(f"   total: {sum(times):.3f} s of checking for 100 histories "
          f"(max {max(infos)} crashed ops in one)")


def violations(seeds: int) -> None:
    header("3. histories with stale reads (the search must exhaust every order)")
    unknown = total = 0
    for procs, ops, crash in ((5, 300, 0.05), (10, 300, 0.05), (10, 1000, 0.05),
                              (10, 1000, 0.25), (50, 1000, 0.05), (50, 1000, 0.25)):
        times, results, infos = [], [], []
        for seed in range(seeds):
            events, stats = simulate(ops=ops, processes=procs, values=5, crash_rate=crash,
                                     seed=seed, bug="stale-read", stale_rate=0.05)
            dt, r = timed(events, False)
            times.append(dt)
            results.append(r)
            infos.append(stats["info"])
        many = "many crashed" if crash > 0.1 else "few crashed"
        row(f"cas-register, {ops} ops, {procs} procs, stale reads, {many}", times, results,
            infos)
        if ops == 1000:
            unknown += sum(r.valid == "unknown" for r in results)
            total += len(results)
    print(f"   hardest rows (1,000 ops): {unknown} of {total} histories unknown")


# One `sleuth check` path, timed inside a fresh interpreter (so numpy's import,
# which the columnar reader pays, is counted): read, pair, search, explain.
PATH_TIMER = """
import gc, json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from sleuth.checker import WORKLOADS
from sleuth.checker.checks import Checks
from sleuth.cli.check import judge_file
spec = WORKLOADS["register"]
if sys.argv[2] == "general":  # the general reader, as before the columnar one
    from dataclasses import replace
    spec = replace(spec, reader=None)
gc.disable()  # as judge_file runs under `sleuth check`
t, c = time.perf_counter(), time.process_time()
status, record, result, history = judge_file(sys.argv[1], spec, Checks(checker="register"))
print(json.dumps({"wall": time.perf_counter() - t, "cpu": time.process_time() - c,
                  "valid": record["valid"], "bad": result.stats["nonlinearizable-keys"]}))
"""


def check_path(path: str, reader: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PATH_TIMER, path, reader], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def whole_command(path: str) -> tuple[float, float]:
    """(wall, CPU) of `sleuth check` as a user runs it: interpreter, imports and all."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([os.path.join(os.path.dirname(sys.executable), "sleuth"), "check", path,
                    "--workload", "register"], capture_output=True, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def large_register(seeds: int) -> None:
    print("\n4. `sleuth check` of one 100,000-op register history (100 keys, 10 procs), with "
          "and without the stale-read bug;\n   Porcupine (Go) took 0.34 s on such a history with "
          "the bug on this machine (quoted: it cannot be installed here, so not re-measured)")
    print(f"{'history':<22} {'reader':<9} {'verdict':>8} {'bad keys':>8} {'CPU s':>7} "
          f"{'wall s':>7} {'CPU / Porcupine':>16}")
    with tempfile.TemporaryDirectory() as tmp:
        for bug in ("stale-read", None):
            path = os.path.join(tmp, "h.jsonl")
            write_jsonl(simulate(ops=100_000, processes=10, keys=100, values=5,
                                 crash_rate=0.05, seed=0, bug=bug, stale_rate=0.05)[0], path)
            name = "stale reads" if bug else "correct"
            for reader in ("columns", "general"):
                runs = [check_path(path, reader) for _ in range(seeds)]
                cpu = statistics.median(r["cpu"] for r in runs)
                wall = statistics.median(r["wall"] for r in runs)
                print(f"{name:<22} {reader:<9} {str(runs[0]['valid']):>8} {runs[0]['bad']:>8} "
                      f"{cpu:>7.2f} {wall:>7.2f} {cpu / PORCUPINE_S:>15.1f}x")
            whole = [whole_command(path) for _ in range(seeds)]
            print(f"{name:<22} {'command':<9} {'':>8} {'':>8} "
                  f"{statistics.median(c for _, c in whole):>7.2f} "
                  f"{statistics.median(w for w, _ in whole):>7.2f}   (the whole `sleuth check`: "
                  "interpreter start, imports, output)")
    print("   columns: the columnar reader (checker/register_columns.py) `sleuth check` uses for "
          "large JSON Lines register files; general: the general reader, for comparison. "
          "CPU is the path's own (other load on the machine inflates wall, not CPU), median "
          "of fresh interpreters.")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer histories per row")
    args = ap.parse_args()
    t = time.perf_counter()
    by_concurrency(3 if args.quick else 10)
    etcd_suite()
    violations(3 if args.quick else 10)
    large_register(1 if args.quick else 3)
    print(f"\nbench took {time.perf_counter() - t:.1f} s (including simulation)")


if __name__ == "__main__":
    main()
