"""Spark campaign jobs: seconds to consolidate and judge a campaign, local[1] vs local[2] vs a plain loop.

    python bench/bench_spark.py [--runs 50] [--ops 20000] [--repeat 3] [--today REF] [--no-loops]

A campaign of `runs` list-append histories of `ops` transactions each
(`sleuth sim --db serializable`, seeds 0..runs-1, in run-directory shape,
cached in bench/out/spark/) is handed to `judge_runs` in a fresh process per
master, so each pays its own start (shown apart: the JVM, and one Python
worker per core with the judging code imported, as a campaign's session
starts once). The baseline does the
same judging as a plain sequential loop in one Python process: read each
history (sleuth's reader pairs the operations) and judge it with the same
function the Spark tasks call.

Each round measures the three side by side, in a rotating order (the
machine is shared: a burst of other work should not always land on the same
one); the table shows each round, then the medians, with the load average
beside them. `speedup` is local[1]'s jobs time over local[2]'s (the goal:
>= 1.6 from the second core); `vs loop` is the loop's time over Spark's.
`cpu s` is the CPU time the jobs used (the JVM, its Python workers and the
driver, from /proc): on a machine other work shares, the work done, where
the wall clock also counts the waiting.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out", "spark")
STAGES = ("consolidate", "judge", "audit", "aggregate")
MASTERS = ("local[1]", "local[2]")


def make_campaign(runs: int, ops: int) -> list[str]:
    from sleuth.checker.checks import Checks
    from sleuth.records import store
    from sleuth.records.run import TestRecord
    from sleuth.workloads.sim_list_append import write_sim

    dirs = []
    for seed in range(runs):
        d = os.path.join(OUT, f"runs-{ops}", f"sim-{seed:03d}")
        if not os.path.exists(store.test_path(d)):
            os.makedirs(d, exist_ok=True)
            write_sim(os.path.join(d, "history.jsonl"), "serializable", ops, seed=seed)
            store.write_record(d, TestRecord(
                name="sim", workload="list-append", target="sim", isolation="serializable",
                model="strict-serializable", seed=seed,
                checks=Checks(checker="list-append", model="strict-serializable")))
        dirs.append(d)
    return dirs


def sequential(dirs: list[str]) -> dict:
    from sleuth.history.jsonl import read_jsonl
    from sleuth.records import store
    from sleuth.records.run import TestRecord
    from sleuth.spark.judge import judge_history

    t = time.perf_counter()
    for d in dirs:
        test = TestRecord.read(store.test_path(d))
        r = judge_history(read_jsonl(os.path.join(d, "history.jsonl")), test)
        assert r["valid"] is True, (d, r)
    return {"start": 0.0, "jobs": time.perf_counter() - t}


def two_loops(dirs: list[str]) -> dict:
    """The machine's own ceiling for this work on 2 cores: the plain loop split in two halves,
    each in its own process, at once (no Spark): what a perfect scheduler could get."""
    import multiprocessing

    t = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(2) as pool:
        pool.map(sequential, [dirs[0::2], dirs[1::2]])
    return {"start": 0.0, "jobs": time.perf_counter() - t}


def spark_child(master: str, dirs: list[str], out: str) -> None:
    """In a fresh process: start the session, then time the jobs alone."""
    from bench_spark_history import descendants_cpu

    from sleuth.spark.jobs import judge_runs, session

    t = time.perf_counter()
    spark, _ = session(master)
    spark.range(1).count()
    start = time.perf_counter() - t
    t = time.perf_counter()
    cpu = descendants_cpu() + time.process_time()
    table = judge_runs(dirs, out, campaign="bench", master=master, say=lambda m: None)
    cpu = descendants_cpu() + time.process_time() - cpu
    timings = table.attrs.get("timings", {})
    warm = timings.pop("warm", 0.0)  # starting the session's Python workers: start-up, once a campaign
    jobs = time.perf_counter() - t - warm
    assert (table["valid"] == "true").all(), table[["run", "valid"]]
    print(json.dumps({"start": start + warm, "jobs": jobs, "cpu": cpu, "ops": int(table["ops"].sum()), **timings}))


def spark(master: str, a, tree: str | None = None) -> dict:
    """The jobs in a fresh process; with `tree`, sleuth's code from that source tree (--today)."""
    from bench_spark_history import tree_env

    out = os.path.join(OUT, ("today-" if tree else "") + "out-" + master[len("local["):-1])
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--runs", str(a.runs), "--ops", str(a.ops),
                        "--child", master, out], capture_output=True, text=True, timeout=3600,
                       env=tree_env(tree) if tree else None, cwd=tree)
    if p.returncode:
        sys.exit(f"{master} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def row(name: str, r: dict, ops: int) -> str:
    stages = "".join(f"{r[s]:>14.1f}" if s in r else f"{'':>14}" for s in STAGES)
    start = f"{r['start']:>8.1f}" if r["start"] else f"{'—':>8}"
    cpu = f"{r['cpu']:>8.1f}" if r.get("cpu") else f"{'—':>8}"
    return f"{name:<16}{start}{r['jobs']:>8.1f}{cpu}{ops / r['jobs']:>10,.0f}{stages}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--ops", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3, help="rounds; the medians are reported")
    ap.add_argument("--child", nargs=2, metavar=("MASTER", "OUT"))
    ap.add_argument("--today", default="none", help="git revision whose Spark jobs run too, alternating "
                    "with these ('none': not)")
    ap.add_argument("--no-loops", action="store_true", help="leave out the plain loops (Spark only)")
    a = ap.parse_args()
    dirs = make_campaign(a.runs, a.ops)
    if a.child:
        spark_child(a.child[0], dirs, a.child[1])
        return
    print(f"Spark campaign jobs: {a.runs} runs x {a.ops:,} list-append txns (sleuth sim), "
          f"consolidate + judge + audit + aggregate; {a.repeat} rounds on {os.cpu_count()} cores", flush=True)
    head = (f"{'':<16}{'start s':>8}{'jobs s':>8}{'cpu s':>8}{'ops/s':>10}" + "".join(f"{s + ' s':>14}" for s in STAGES))
    names: tuple[str, ...] = (*(() if a.no_loops else ("plain loop", "2 loops at once")),
                              *(f"spark {m}" for m in MASTERS))
    tree = None
    if a.today != "none":
        from bench_spark_history import source_tree

        tree = source_tree(a.today, os.path.join(OUT, "today"))
        names += tuple(f"{a.today} {m}" for m in MASTERS)
    results: dict[str, list[dict]] = {n: [] for n in names}
    loads = []
    ops = 0
    for i in range(a.repeat):
        before = os.getloadavg()[0]
        order = [names[(i + j) % len(names)] for j in range(len(names))]
        for name in order:
            r = (sequential(dirs) if name == "plain loop" else two_loops(dirs) if name == "2 loops at once"
                 else spark(name.split()[1], a, None if name.startswith("spark ") else tree))
            ops = r.get("ops", ops)
            results[name].append(r)
        loads.append((before, os.getloadavg()[0]))
        print(f"round {i + 1} (load average {before:.1f} before, {loads[-1][1]:.1f} after):\n{head}")
        for name in names:
            print(row(name, results[name][-1], ops))
        sys.stdout.flush()
    med = {n: {k: statistics.median(r.get(k, 0.0) for r in rs) for k in rs[0] if k != "ops"} for n, rs in results.items()}
    ld = [x for pair in loads for x in pair]
    print(f"median of {a.repeat} rounds (load average {min(ld):.1f}–{max(ld):.1f}):\n{head}")
    for name in names:
        print(row(name, med[name], ops))
    one, two = med["spark local[1]"]["jobs"], med["spark local[2]"]["jobs"]
    speedups = sorted(results["spark local[1]"][i]["jobs"] / results["spark local[2]"][i]["jobs"]
                      for i in range(a.repeat))
    print(f"speedup local[2] over local[1]: {one / two:.2f}x of the medians (rounds: "
          f"{', '.join(f'{s:.2f}' for s in speedups)}; goal >= 1.6)")
    if not a.no_loops:
        loop, loops = med["plain loop"]["jobs"], med["2 loops at once"]["jobs"]
        print(f"plain loop over local[2]: {loop / two:.2f}x, over local[1]: {loop / one:.2f}x; the machine's own "
              f"ceiling (the loop in two processes at once over one): {loop / loops:.2f}x")
    if tree:
        t1, t2 = med[f"{a.today} local[1]"]["jobs"], med[f"{a.today} local[2]"]["jobs"]
        print(f"{a.today}: local[2] over local[1] {t1 / t2:.2f}x; now over {a.today}: local[1] {one / t1:.2f}x, "
              f"local[2] {two / t2:.2f}x the time")
        c1, c2 = med[f"{a.today} local[1]"]["cpu"], med[f"{a.today} local[2]"]["cpu"]
        print(f"CPU seconds of the jobs (JVM, Python workers, driver), now over {a.today}: local[1] "
              f"{med['spark local[1]']['cpu'] / c1:.2f}x, local[2] {med['spark local[2]']['cpu'] / c2:.2f}x")


if __name__ == "__main__":
    main()
