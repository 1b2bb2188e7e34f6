"""Spark reads a table's whole history back from the storage nodes' Parquet files.

A local cluster takes a random mix of inserts, updates and deletes on three
tables (spread over two storage nodes), with a seal, a kill -9 and a restart
of a storage node in the middle. Every SELECT's answer and the timestamp it
ran at are recorded; afterwards Spark, reading only the sealed Parquet files,
must give exactly that answer as the table's contents at that timestamp.
"""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter

import psycopg
import pytest
from live import require_module

from sleuth.cluster.control import Cluster
from sleuth.cluster.rpc import call_sync
from sleuth.spark import session
from sleuth.targets import reference_audit

pytestmark = [pytest.mark.spark, pytest.mark.cluster]
require_module("pyspark", "Spark (pyspark)")

TABLES = ("accounts", "users", "items")  # crc32 places them on both storage nodes


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    monkeypatch.setenv("SLEUTH_HOME", str(tmp_path / "home"))
    c = Cluster(f"t{uuid.uuid4().hex[:8]}")
    c.up("local", storage=2, progress=lambda m: None)
    yield c
    c.down()


@pytest.fixture(scope="module")
def spark():
    s = session.spark_session(app="sleuth-test")
    yield s
    s.stop()


def seal_all(c):
    return sum(call_sync(n.host, n.port, "seal", timeout=30) for n in c.nodes if n.role == "storage")


def statement(conn, q, args=()):
    cur = conn.execute(q, args)
    rows = cur.fetchall() if cur.description else None
    (ts,) = conn.execute("SHOW sleuth_last_timestamp").fetchone()
    return rows, int(ts)


def mutate(conn, rng, table, next_k):
    op = rng.choice(("insert", "insert", "update", "delete", "copy"))
    k = rng.randrange(max(next_k, 1))
    if op == "insert":
        statement(conn, f"INSERT INTO {table} VALUES (%s, %s)", (next_k, rng.choice(["a", "b", None])))
        return next_k + 1
    if op == "update":
        statement(conn, f"UPDATE {table} SET v = v || 'x' WHERE k <= %s", (k,))
    elif op == "delete":
        statement(conn, f"DELETE FROM {table} WHERE k = %s", (k,))
    else:  # a duplicate row: the history must keep multiplicities
        statement(conn, f"INSERT INTO {table} SELECT k, v FROM {table} WHERE k = %s", (k,))
    return next_k


def test_spark_reads_every_table_state_back_from_parquet(cluster, spark):
    c, rng = cluster, random.Random(11)
    reads = []  # (table, ts, Counter of rows)
    next_k = dict.fromkeys(TABLES, 0)
    with psycopg.connect(c.dsn(), autocommit=True, connect_timeout=5) as conn:
        for t in TABLES:
            conn.execute(f"CREATE TABLE {t} (k bigint, v text)")

        def burst(n):
            for _ in range(n):
                t = rng.choice(TABLES)
                next_k[t] = mutate(conn, rng, t, next_k[t])
                if rng.random() < 0.4:
                    rows, ts = statement(conn, f"SELECT k, v FROM {t}")
                    reads.append((t, ts, Counter(map(tuple, rows))))

        burst(120)
        assert seal_all(c) > 0
        burst(120)  # these stay in the log of the node we kill …
        c.runtime.kill("storage1")
        c.runtime.restart("storage1")
        c.wait_ready(c.node("storage1"))
    # … so they must come back from the log and be sealed on the next seal
    with psycopg.connect(c.dsn(), autocommit=True, connect_timeout=5) as conn:
        for t in TABLES:
            rows, ts = statement(conn, f"SELECT k, v FROM {t}")
            reads.append((t, ts, Counter(map(tuple, rows))))
    seal_all(c)

    data_dirs = [c.runtime.data_path(n.name) for n in c.nodes if n.role == "storage"]
    files = reference_audit.parquet_files(data_dirs)
    assert {f.split("/shards/")[1].split("/")[0] for f in files} == set(TABLES)
    assert len({d for d in data_dirs if any(f.startswith(d) for f in files)}) == 2  # both nodes hold shards
    updates = reference_audit.shard_updates(spark, data_dirs).cache()
    assert updates.where("diff = 0").count() == 0
    assert len(reads) > 60 and any(r[2] for r in reads)
    for table, ts, expected in reads:
        got = {tuple(json.loads(r["row"])): r["count"]
               for r in reference_audit.contents_at(updates, table, ts).collect()}
        assert got == dict(expected), f"{table} at ts {ts}"
