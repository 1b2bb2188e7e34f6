"""Spark campaign jobs: seconds to consolidate and judge a campaign, local[1] vs local[2] vs a plain loop.

    python bench/bench_spark.py [--runs 50] [--ops 20000]

A campaign of `runs` list-append histories of `ops` transactions each
(`sleuth sim --db serializable`, seeds 0..runs-1, in run-directory shape,
cached in bench/out/spark/) is handed to `judge_runs` in a fresh process per
master, so each pays its own JVM start (shown apart). The baseline does the
same judging as a plain sequential loop in one Python process: read each
history (sleuth's reader pairs the operations) and judge it with the same
function the Spark tasks call. Printed side by side; `speedup` is local[1]'s
jobs time over local[2]'s (the goal: >= 1.6 from the second core).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out", "spark")


def make_campaign(runs: int, ops: int) -> list[str]:
    from sleuth.workloads.sim_list_append import write_sim

    dirs = []
    for seed in range(runs):
        d = os.path.join(OUT, f"runs-{ops}", f"sim-{seed:03d}")
        if not os.path.exists(os.path.join(d, "test.json")):
            os.makedirs(d, exist_ok=True)
            write_sim(os.path.join(d, "history.jsonl"), "serializable", ops, seed=seed)
            with open(os.path.join(d, "test.json"), "w") as f:
                json.dump({"workload": "list-append", "target": "sim", "nemesis": [], "fault": [],
                           "isolation": "serializable", "model": "strict-serializable", "seed": seed}, f)
        dirs.append(d)
    return dirs


def sequential(dirs: list[str]) -> float:
    from sleuth.checker.spark.judge import judge_history
    from sleuth.history import read_jsonl

    t = time.perf_counter()
    for d in dirs:
        with open(os.path.join(d, "test.json")) as f:
            test = json.load(f)
        r = judge_history(read_jsonl(os.path.join(d, "history.jsonl")), test)
        assert r["valid"] is True, (d, r)
    return time.perf_counter() - t


def spark_child(master: str, dirs: list[str], out: str) -> None:
    """In a fresh process: start the session, then time the jobs alone."""
    from sleuth.checker.spark.jobs import judge_runs, session

    t = time.perf_counter()
    spark, _ = session(master)
    spark.range(1).count()
    start = time.perf_counter() - t
    t = time.perf_counter()
    table = judge_runs(dirs, out, campaign="bench", master=master, say=lambda m: None)
    jobs = time.perf_counter() - t
    assert (table["valid"] == "true").all(), table[["run", "valid"]]
    print(json.dumps({"start": start, "jobs": jobs, "ops": int(table["ops"].sum())}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--ops", type=int, default=20_000)
    ap.add_argument("--child", nargs=2, metavar=("MASTER", "OUT"))
    a = ap.parse_args()
    dirs = make_campaign(a.runs, a.ops)
    if a.child:
        spark_child(a.child[0], dirs, a.child[1])
        return
    print(f"Spark campaign jobs: {a.runs} runs x {a.ops:,} list-append txns (sleuth sim), "
          f"consolidate + judge + audit + aggregate", flush=True)
    rows = [("plain loop, 1 process", 0.0, sequential(dirs), None)]
    for master in ("local[1]", "local[2]"):
        out = os.path.join(OUT, "out-" + master[len("local["):-1])
        p = subprocess.run([sys.executable, __file__, "--runs", str(a.runs), "--ops", str(a.ops),
                            "--child", master, out], capture_output=True, text=True, timeout=3600)
        if p.returncode:
            sys.exit(f"{master} failed:\n{p.stderr[-3000:]}")
        r = json.loads(p.stdout.strip().splitlines()[-1])
        rows.append((f"spark {master}", r["start"], r["jobs"], r["ops"]))
    print(f"{'':<24}{'session start s':>16}{'jobs s':>10}{'ops/s':>12}")
    total_ops = rows[-1][3]
    for name, start, jobs, _ in rows:
        print(f"{name:<24}{start:>16.1f}{jobs:>10.1f}{total_ops / jobs:>12,.0f}")
    print(f"speedup local[2] over local[1]: {rows[1][2] / rows[2][2]:.2f}x (goal >= 1.6); "
          f"local[2] vs plain loop: {rows[0][2] / rows[2][2]:.2f}x")


if __name__ == "__main__":
    main()
