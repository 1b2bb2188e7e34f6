"""Benchmark: shrinking invalid list-append histories of 10k and 100k transactions.

For each size and simulated database (`stale-reads`: serializable, stale
read-only transactions, so only real-time cycles; `read-committed`: cycles and
lost updates everywhere), generate the history (`sleuth sim`, cached in
bench/out/), check it once — the floor: a `sleuth check` of the whole file —
then shrink it (`sleuth.checker.shrink`, budget 60 s) and report the seconds,
the ratio shrink / check, the checker runs it took, the operations before and
after, and whether the result is 1-minimal.

    .venv/bin/python bench/bench_shrink.py [--sizes 10000,100000] [--budget 60]
"""

from __future__ import annotations

import argparse
import os
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--dbs", default="stale-reads,read-committed")
    ap.add_argument("--budget", type=float, default=60.0)
    args = ap.parse_args()

    from sleuth.checker import checker_for
    from sleuth.checker.shrink import shrink
    from sleuth.history.jsonl import read_jsonl
    from sleuth.workloads.sim_list_append import write_sim

    os.makedirs(OUT, exist_ok=True)
    check = checker_for("list-append")
    print(f"{'db':<15}{'txns':>8}{'check s':>9}{'shrink s':>10}{'ratio':>8}{'checks':>8}"
          f"{'ops':>8}{'after':>7}  target, minimal")
    for size in map(int, args.sizes.split(",")):
        for db in args.dbs.split(","):
            path = os.path.join(OUT, f"shrink-{db}-{size}.jsonl")
            if not os.path.exists(path):
                write_sim(path, db, size, seed=1)
            h = read_jsonl(path)
            t = time.perf_counter()
            original = check(h)
            t_check = time.perf_counter() - t
            if original.valid is not False:
                print(f"{db:<15}{size:>8}  valid: nothing to shrink")
                continue
            ce = shrink(h, "list-append", check, original, budget=args.budget)
            print(f"{db:<15}{size:>8}{t_check:>9.2f}{ce.seconds:>10.2f}{ce.seconds / t_check:>8.1f}"
                  f"{ce.checks:>8}{ce.original_ops:>8}{ce.ops:>7}  {ce.target}, "
                  f"{'1-minimal' if ce.minimal else 'stopped in ' + ce.stage}", flush=True)


if __name__ == "__main__":
    main()
