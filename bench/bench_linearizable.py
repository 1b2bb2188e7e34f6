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
4. One 100,000-op `register` history (100 keys, 10 processes) with the
   stale-read bug, beside Porcupine's figure on this machine for such a
   history (0.34 s, measured when Porcupine could be installed here; it cannot
   be now, so the figure is quoted, not re-measured). The time includes
   pairing invocations with completions, as `timed` always does.

    .venv/bin/python bench/bench_linearizable.py [--quick]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from sleuth.checker.linearizable import check_cas_register, check_register
from sleuth.history import History
from sleuth.workloads.sim_register import simulate


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


def large_stale(seeds: int) -> None:
    header("4. one 100,000-op register history with stale reads (100 keys, 10 procs)")
    events, stats = simulate(ops=100_000, processes=10, keys=100, values=5, crash_rate=0.05,
                             seed=0, bug="stale-read", stale_rate=0.05)
    times, results, cpu = [], [], []
    for _ in range(seeds):
        c = time.process_time()
        dt, r = timed(events, True)
        cpu.append(time.process_time() - c)
        times.append(dt)
        results.append(r)
    row("register 100 keys, 100,000 ops, stale reads", times, results, [stats["info"]])
    print(f"   median {statistics.median(times):.2f} s ({statistics.median(cpu):.2f} s of CPU, "
          "which other load on the machine does not inflate); Porcupine (Go) took 0.34 s on "
          "such a history on this machine (quoted: it cannot be installed here)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer histories per row")
    args = ap.parse_args()
    t = time.perf_counter()
    by_concurrency(3 if args.quick else 10)
    etcd_suite()
    violations(3 if args.quick else 10)
    large_stale(1 if args.quick else 3)
    print(f"\nbench took {time.perf_counter() - t:.1f} s (including simulation)")


if __name__ == "__main__":
    main()
