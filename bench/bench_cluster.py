"""Write throughput and latency of the reference cluster at 1, 4 and 16 clients, beside PostgreSQL.

Each client inserts rows one statement at a time (autocommit) for a fixed
time. Group commit should let 16 clients reach at least 5x one client's
throughput. The same load runs against a local PostgreSQL (fsync on,
synchronous_commit on) and the ratio is printed.

    python bench/bench_cluster.py [--seconds 5] [--runtime local|docker]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
import uuid

import psycopg


def load(dsn: str, clients: int, seconds: float, table: str) -> tuple[float, float, float]:
    lat: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def worker(base: int) -> None:
        mine = []
        with psycopg.connect(dsn, autocommit=True) as c:
            k = base
            while time.monotonic() < stop:
                t0 = time.perf_counter()
                c.execute(f"INSERT INTO {table} VALUES ({k}, {k})")
                mine.append(time.perf_counter() - t0)
                k += 1
        with lock:
            lat.extend(mine)

    ts = [threading.Thread(target=worker, args=(i * 10_000_000,)) for i in range(clients)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    took = time.monotonic() - t0
    lat.sort()
    return len(lat) / took, statistics.median(lat) * 1000, lat[int(len(lat) * 0.99) - 1] * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--runtime", default="local")
    a = ap.parse_args()
    os.environ.setdefault("SLEUTH_HOME", tempfile.mkdtemp(prefix="sleuth-bench-"))
    from sleuth.cluster.control import Cluster
    from sleuth.targets.postgres_server import PostgresServer

    c = Cluster(f"bench{uuid.uuid4().hex[:6]}")
    c.up(a.runtime, storage=2, progress=lambda m: None)
    pg = PostgresServer()
    pg.start()
    try:
        rows = {}
        for name, dsn in (("reference", c.dsn()), ("postgres", pg.url)):
            with psycopg.connect(dsn, autocommit=True) as conn:
                for n in (1, 4, 16):
                    conn.execute(f"CREATE TABLE w{n} (k bigint, v bigint)")
            for n in (1, 4, 16):
                rows[(name, n)] = load(dsn, n, a.seconds, f"w{n}")
        print(f"\nwrites: one INSERT per statement, autocommit, {a.seconds:.0f} s per cell "
              f"(reference cluster: {a.runtime}, 2 storage nodes)")
        print(f"{'clients':>8} {'reference w/s':>14} {'p50 ms':>7} {'p99 ms':>7} {'postgres w/s':>13} "
              f"{'p50 ms':>7} {'p99 ms':>7} {'ref/pg':>7}")
        for n in (1, 4, 16):
            r, p = rows[("reference", n)], rows[("postgres", n)]
            print(f"{n:>8} {r[0]:>14.0f} {r[1]:>7.2f} {r[2]:>7.2f} {p[0]:>13.0f} {p[1]:>7.2f} {p[2]:>7.2f} "
                  f"{r[0] / p[0]:>7.2f}")
        print(f"group commit: 16 clients reach {rows[('reference', 16)][0] / rows[('reference', 1)][0]:.1f}x "
              f"one client's throughput (must be at least 5x)")
    finally:
        c.down()
        pg.stop()


if __name__ == "__main__":
    main()
