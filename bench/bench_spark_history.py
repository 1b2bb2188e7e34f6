"""One large list-append history checked by `sleuth check --spark` (issue 14).

For each size (default 1M transactions; `--sizes 1000000,10000000` adds
10M, which takes long on a busy 2-core machine): a `sleuth sim` history,
checked on Spark with `local[1]` and with `local[2]`, and at the first size
by the single-process checker too, each in a fresh process, with the paired
operations rebuilt every time (the cache beside the input is removed).
Printed: seconds (apart from the start: the Spark session and its Python
workers with the checker imported, which a check starts before its first
job, a constant), seconds per million transactions,
local[2] over local[1], the CPU seconds the check used (the driver, the JVM
and its Python workers, from /proc: the work done, where the wall clock on
a shared machine also counts the waiting), and the peak memory of the driver's Python process
(where the integer graph lives) beside the JVM's (in local mode it hosts the
executors; their Python workers are its children).

    python bench/bench_spark_history.py [--sizes 1000000] [--db serializable] [--out DIR] [--today REF] [--repeat N]

`--today REF` (default `main`; `none` skips it) also runs the same checks
with the code of git revision REF (`git archive` into a temporary directory,
first on `PYTHONPATH`), in the same run, so the figures before and after a
change are side by side under the same load (issue 46: no more than 20%
slower at local[2]).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GIB = 1 << 30


def _descendants(field) -> int:
    """The sum of `field(stat fields after the name, pid)` over this process's descendants (the
    JVM, its Python daemon and workers), from /proc."""
    parent: dict[int, int] = {}
    value: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            parent[int(d)] = int(fields[1])
            value[int(d)] = field(fields, d)
        except (OSError, IndexError, ValueError):
            continue
    mine, total = {os.getpid()}, 0
    for _ in range(4):  # JVM -> pyspark daemon -> workers
        for pid, pp in parent.items():
            if pp in mine and pid not in mine:
                mine.add(pid)
                total += value.get(pid, 0)
    return total


def _rss(fields: list[str], pid: str) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def descendants_rss() -> int:
    """Bytes resident in this process's descendants (the JVM, its Python workers), from /proc."""
    return _descendants(_rss)


def descendants_cpu() -> float:
    """CPU seconds (user + system) this process's descendants have used so far, with the children
    they reaped (the JVM, its Python daemon and the workers it forked and reaped), from /proc: on a
    machine shared with other work, the work done, where the wall clock says how much it waited."""
    ticks = _descendants(lambda fields, pid: sum(int(x) for x in fields[11:15]))  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


class Sampler(threading.Thread):
    """Peak resident bytes of the descendants, sampled twice a second."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak, self.stop = 0, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.5):
            self.peak = max(self.peak, descendants_rss())


def worker(path: str, master: str | None) -> dict:
    """In a fresh process: one check, timed, with peak memory."""
    from sleuth.spark.history_ops import cache_dir

    sampler = Sampler()
    sampler.start()

    shutil.rmtree(cache_dir(path), ignore_errors=True)
    t0 = time.perf_counter()
    if master is None:
        from sleuth.checker import WORKLOADS
        from sleuth.history.imports import load

        spec = WORKLOADS["list-append"]
        result = spec.checker()(load(path, events=False), model=spec.default_model)
        start = 0.0
        cpu = time.process_time()
    else:
        from sleuth.spark import history_check
        from sleuth.spark.session import spark_session, warm

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        spark = spark_session(master, "sleuth-bench-history")
        warm(spark, ["list-append"], history_check.WORKER_MODULES)  # as the check does first
        start = time.perf_counter() - t0
        cpu = descendants_cpu() + time.process_time()
        result = history_check.check(path, "list-append", {"model": "strict-serializable"}, master)
        cpu = descendants_cpu() + time.process_time() - cpu
        spark.stop()
    total = time.perf_counter() - t0
    return {"valid": result.valid, "types": result.anomaly_types, "start_s": round(start, 1),
            "check_s": round(total - start, 1), "cpu_s": round(cpu, 1),
            "driver_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB,
            "children_rss_gib": sampler.peak / GIB}


def measure(path: str, master: str | None, tree: str | None = None) -> dict:
    """One check in a fresh process; with `tree`, sleuth imported from that source tree."""
    argv = [sys.executable, __file__, "--worker", path, *(["--master", master] if master else [])]
    env = tree_env(tree) if tree else None
    # in `tree`: the Python workers put their working directory first on sys.path
    p = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tree)
    if p.returncode != 0:
        raise SystemExit(f"{master or 'single process'} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def tree_env(tree: str) -> dict:
    """The environment of a process that imports sleuth from source tree `tree`, and so do its
    executors' Python workers (pyspark builds their PYTHONPATH itself: a wrapper sets it)."""
    python = os.path.join(tree, "python")
    with open(python, "w") as fh:
        fh.write(f'#!/bin/sh\nPYTHONPATH="{tree}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" "$@"\n')
    os.chmod(python, 0o755)
    return {**os.environ, "PYTHONPATH": tree, "PYSPARK_PYTHON": python}


def source_tree(ref: str, out: str) -> str:
    """The sources of git revision `ref` of this repository, extracted under `out`."""
    import tarfile

    d = os.path.join(out, f"tree-{ref.replace('/', '_')}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    data = subprocess.run(["git", "-C", os.path.dirname(HERE), "archive", ref, "sleuth"], capture_output=True, check=True).stdout
    tar = os.path.join(d, "src.tar")
    with open(tar, "wb") as fh:
        fh.write(data)
    with tarfile.open(tar) as t:
        t.extractall(d, filter="data")
    os.remove(tar)
    return d


def history(out: str, db: str, txns: int) -> str:
    from sleuth.workloads.sim_list_append import write_sim

    path = os.path.join(out, f"sim-{db}-{txns}.jsonl")
    if not os.path.exists(path):
        print(f"writing {path} ...", flush=True)
        stats = write_sim(path + ".tmp", db, txns)
        os.replace(path + ".tmp", path)
        print(f"  {stats}", flush=True)
    return path


def ceiling(out: str, db: str) -> float:
    """The machine's own ceiling for two cores: one single-process check of a 100k-transaction
    history alone, over the slower of two run at once (2.0 on two free cores; less when the
    cores are shared or throttled)."""
    path = history(out, db, 100_000)
    argv = [sys.executable, "-m", "sleuth.cli", "check", path, "-w", "list-append", "--json"]

    def timed(n: int) -> float:
        t0 = time.perf_counter()
        ps = [subprocess.Popen(argv, stdout=subprocess.DEVNULL) for _ in range(n)]
        for p in ps:
            p.wait()
        return time.perf_counter() - t0

    return 2 * min(timed(1) for _ in range(2)) / min(timed(2) for _ in range(2))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000000", help="comma-separated transaction counts")
    ap.add_argument("--db", default="serializable")
    ap.add_argument("--out", default=os.path.join(HERE, "out", "spark-history"))
    ap.add_argument("--worker")
    ap.add_argument("--master")
    ap.add_argument("--today", default="main", help="git revision to compare with ('none': no comparison)")
    ap.add_argument("--repeat", type=int, default=1, help="rounds, old and new alternating; medians compared")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.master)))
        return
    os.makedirs(args.out, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"sleuth check --spark, list-append sim ({args.db}); load average {os.getloadavg()[0]:.1f}")
    print(f"{'txns':>10} {'checker':>16} {'start s':>8} {'check s':>8} {'cpu s':>7} {'s/M txns':>9} "
          f"{'driver GiB':>10} {'JVM+workers GiB':>15}  verdict")
    for i, n in enumerate(sizes):
        path = history(args.out, args.db, n)
        runs = [("local[1]", "local[1]", None), ("local[2]", "local[2]", None)]
        if args.today != "none":
            tree = source_tree(args.today, args.out)
            runs += [(f"{args.today} local[1]", "local[1]", tree), (f"{args.today} local[2]", "local[2]", tree)]
        if i == 0:
            runs.insert(0, ("single process", None, None))
        rounds: dict[str, list[dict]] = {name: [] for name, _, _ in runs}
        for k in range(args.repeat):  # old and new alternate, in a rotating order (a shared machine)
            for name, master, tree in runs[k % len(runs):] + runs[:k % len(runs)]:
                r = measure(path, master, tree)
                rounds[name].append(r)
                print(f"{n:>10} {name:>16} {r['start_s']:>8} {r['check_s']:>8} {r['cpu_s']:>7} {r['check_s'] / n * 1e6:>9.1f} "
                      f"{r['driver_rss_gib']:>10.2f} {r['children_rss_gib'] if master else 0:>15.2f}  "
                      f"{r['valid']} {','.join(r['types'])}  (round {k + 1}, load {os.getloadavg()[0]:.1f})",
                      flush=True)
        got = {name: {**rs[0], "check_s": statistics.median(r["check_s"] for r in rs),
                      "cpu_s": statistics.median(r["cpu_s"] for r in rs)} for name, rs in rounds.items()}
        if args.repeat > 1:
            print(f"{n:>10} medians of {args.repeat} rounds (check s): "
                  + ", ".join(f"{name} {r['check_s']:.1f}" for name, r in got.items()), flush=True)
        same = len({(r["valid"], tuple(r["types"])) for r in got.values()}) == 1
        speedup = got["local[1]"]["check_s"] / got["local[2]"]["check_s"]
        print(f"{n:>10} local[2] over local[1]: {speedup:.2f}x (goal >= 1.6x; the machine's ceiling, two "
              f"single-process checks at once: {ceiling(args.out, args.db):.2f}x); driver under 2 GiB: "
              f"{got['local[2]']['driver_rss_gib'] < 2}; verdicts equal: {same}; "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)
        if args.today != "none":
            before = got[f"{args.today} local[2]"]["check_s"]
            was = got[f"{args.today} local[1]"]["check_s"] / before
            print(f"{n:>10} {args.today}: local[2] over local[1] {was:.2f}x; now over {args.today} at local[2]: "
                  f"{got['local[2]']['check_s'] / before:.2f}x the time (goal <= 1.20x); CPU seconds now over "
                  f"{args.today}: local[1] {got['local[1]']['cpu_s'] / got[f'{args.today} local[1]']['cpu_s']:.2f}x, "
                  f"local[2] {got['local[2]']['cpu_s'] / got[f'{args.today} local[2]']['cpu_s']:.2f}x", flush=True)


if __name__ == "__main__":
    main()
