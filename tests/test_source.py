"""The source node, live: a real PostgreSQL upstream read by logical replication into a local
reference cluster (cluster/source.py). Bounded: a few seconds of writes per test."""

from __future__ import annotations

import threading
import time
import uuid

import psycopg
import pytest

from sleuth.cluster.control import Cluster
from sleuth.cluster.pgoutput import lsn_int
from sleuth.cluster.rpc import call_sync
from sleuth.targets.postgres_server import PostgresServer

pytestmark = pytest.mark.cluster


@pytest.fixture
def upstream():
    pg = PostgresServer()
    pg.start()
    with psycopg.connect(pg.url, autocommit=True) as c:
        c.execute("CREATE TABLE src (n bigint PRIMARY KEY, v text)")
    yield pg
    pg.stop()


@pytest.fixture
def cluster(upstream, tmp_path, monkeypatch):
    monkeypatch.setenv("SLEUTH_HOME", str(tmp_path / "home"))
    c = Cluster(f"s{uuid.uuid4().hex[:8]}")
    c.up("local", progress=lambda m: None, source={"upstream": upstream.url, "tables": ["src"]})
    yield c
    c.down()


def rows(conn, rtr=True):
    conn.execute(f"SET real_time_recency = {'true' if rtr else 'false'}")
    return conn.execute("SELECT n, v FROM src ORDER BY n").fetchall()


def errored(src) -> str:
    """The source's error, once its status shows one (within 10 s)."""
    deadline = time.monotonic() + 10
    while (error := call_sync(src.host, src.port, "status")["error"]) is None:
        assert time.monotonic() < deadline, "the source never said it is errored"
        time.sleep(0.1)
    return error


def test_changes_arrive_and_a_real_time_recent_read_sees_each_commit(upstream, cluster):
    with psycopg.connect(upstream.url, autocommit=True) as up, \
            psycopg.connect(cluster.dsn(), autocommit=True) as db:
        for i in range(1, 11):  # each read begins after the commit: it must see it
            up.execute("INSERT INTO src VALUES (%s, %s)", (i, f"v{i}"))
            assert rows(db)[-1] == (i, f"v{i}")
        up.execute("UPDATE src SET v = 'x' WHERE n <= 2")
        up.execute("DELETE FROM src WHERE n = 10")
        assert rows(db)[:3] == [(1, "x"), (2, "x"), (3, "v3")] and len(rows(db)) == 9
        assert db.execute("SHOW real_time_recency").fetchone() == ("on",)
        for stmt in ("INSERT INTO src VALUES (99, 'no')", "UPDATE src SET v = 'no'", "DROP TABLE src"):
            with pytest.raises(psycopg.errors.WrongObjectType):
                db.execute(stmt)
        assert len(rows(db)) == 9


def test_the_slot_is_acknowledged_only_below_what_every_read_sees(upstream, cluster):
    """Seed 002, property 1, from outside: once confirmed_flush_lsn reached A, a read that
    starts afterwards (strict serializable, no real-time recency) sees every commit at or
    below A. A commit is at or below A for sure when the WAL position read right after it
    is at most A."""
    done, commits, lock = threading.Event(), [], threading.Lock()

    def writer():
        with psycopg.connect(upstream.url, autocommit=True) as up:
            n = 0
            while not done.is_set() and n < 2000:
                n += 1
                up.execute("INSERT INTO src VALUES (%s, 'w')", (n,))
                after = lsn_int(up.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0])
                with lock:
                    commits.append((after, n))

    t = threading.Thread(target=writer)
    t.start()
    checked = 0
    try:
        with psycopg.connect(upstream.url, autocommit=True) as up, \
                psycopg.connect(cluster.dsn(), autocommit=True) as db:
            deadline = time.monotonic() + 4
            while time.monotonic() < deadline:
                acked = lsn_int(up.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots")
                                .fetchone()[0])
                seen = {n for n, _ in rows(db, rtr=False)}
                with lock:
                    must = {n for after, n in commits if after <= acked}
                assert must <= seen, f"acknowledged {acked} but the read misses {sorted(must - seen)[:5]}"
                checked += len(must)
    finally:
        done.set()
        t.join(10)
    assert checked > 0  # the slot did move: the rule was exercised


def test_kill_9_of_the_source_loses_and_duplicates_nothing(upstream, cluster):
    done = threading.Event()
    written = []

    def writer():
        with psycopg.connect(upstream.url, autocommit=True) as up:
            n = 0
            while not done.is_set() and n < 3000:
                n += 1
                up.execute("INSERT INTO src VALUES (%s, 'k')", (n,))
                written.append(n)
                time.sleep(0.002)

    t = threading.Thread(target=writer)
    t.start()
    try:
        for _ in range(3):
            time.sleep(0.7)
            cluster.runtime.kill("source1")
            cluster.runtime.restart("source1")
            cluster.wait_ready(cluster.node("source1"), timeout=30)
    finally:
        done.set()
        t.join(10)
    src = cluster.node("source1")
    with psycopg.connect(cluster.dsn(), autocommit=True) as db:
        db.execute("SET statement_timeout = '20s'")
        got = [n for n, _ in rows(db)]
    assert got == sorted(written) and len(written) > 100
    lsns = [lsn for lsn, _ in call_sync(src.host, src.port, "bindings")]
    assert lsns == sorted(set(lsns))


def test_cut_from_its_upstream_a_real_time_recent_read_fails_with_materializes_error(upstream, cluster):
    src = cluster.node("source1")
    with psycopg.connect(upstream.url, autocommit=True) as up, \
            psycopg.connect(cluster.dsn(), autocommit=True) as db:
        up.execute("INSERT INTO src VALUES (1, 'before')")
        assert rows(db) == [(1, "before")]
        db.execute("SET real_time_recency_timeout = '2s'")
        cluster.runtime.cut("source1", src.host, "upstream", upstream.host)
        try:
            up.execute("INSERT INTO src VALUES (2, 'during')")
            with pytest.raises(psycopg.errors.QueryCanceled) as e:
                rows(db)
            assert "timed out before ingesting the source's visible frontier" in str(e.value)
            assert rows(db, rtr=False) == [(1, "before")]  # without recency: served, stale
        finally:
            cluster.runtime.heal_cuts()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                got = rows(db)
                break
            except psycopg.errors.QueryCanceled:
                continue
        assert got == [(1, "before"), (2, "during")]


def test_an_upstream_truncate_errors_the_source_and_a_recent_read_says_so_at_once(upstream, cluster):
    """A TRUNCATE cannot be ingested (a source sees no rows deleted): the source stops for good
    before it, says why in its status, and its tables become inaccessible, as in Materialize: a
    real-time-recent read fails with that error at once, instead of timing out while the source
    reconnects every 0.3 s to meet the same TRUNCATE (the bug); a read without recency too, once
    the coordinator has seen the source's status."""
    src = cluster.node("source1")
    with psycopg.connect(upstream.url, autocommit=True) as up, \
            psycopg.connect(cluster.dsn(), autocommit=True) as db:
        up.execute("INSERT INTO src VALUES (1, 'before')")
        assert rows(db) == [(1, "before")]
        up.execute("TRUNCATE src")
        up.execute("INSERT INTO src VALUES (2, 'after')")
        assert "TRUNCATE of src" in errored(src)
        deadline = time.monotonic() + 5  # the coordinator looks at its sources each second
        while True:
            try:
                rows(db, rtr=False)
            except psycopg.errors.InternalError_ as e:
                assert "source source1 is errored" in str(e) and "TRUNCATE of src" in str(e)
                break
            assert time.monotonic() < deadline, "a read of an errored source's table still succeeds"
            time.sleep(0.2)
        started = time.monotonic()
        with pytest.raises(psycopg.errors.InternalError_) as e:
            rows(db)
        assert "source source1 is errored" in str(e.value)
        assert time.monotonic() - started < 3  # not after real_time_recency_timeout (10 s)
        db.execute("CREATE TABLE copy (n bigint, v text)")
        with pytest.raises(psycopg.errors.InternalError_):  # nor through INSERT … SELECT
            db.execute("INSERT INTO copy SELECT n, v FROM src")
        time.sleep(1)  # a reconnecting stream would be connected again by now
        assert not call_sync(src.host, src.port, "status")["connected"]
        node = next(n for n in cluster.status()["nodes"] if n["role"] == "source")
        assert node["state"] == "errored" and "TRUNCATE of src" in node["error"]
    log = cluster.runtime.logs("source1")
    assert log.count("replication stopped") == 1 and "reconnecting" not in log


def test_an_update_without_the_whole_old_row_errors_the_source_too(upstream, cluster):
    """Without REPLICA IDENTITY FULL an update carries only the old key, not the old row whose
    retraction the source must write: the other change it cannot ingest, errored the same way."""
    src = cluster.node("source1")
    with psycopg.connect(upstream.url, autocommit=True) as up, \
            psycopg.connect(cluster.dsn(), autocommit=True) as db:
        up.execute("INSERT INTO src VALUES (1, 'a')")
        assert rows(db) == [(1, "a")]
        up.execute("ALTER TABLE src REPLICA IDENTITY DEFAULT")
        up.execute("UPDATE src SET n = 2 WHERE n = 1")  # a key change: the old key is sent
        assert "without REPLICA IDENTITY FULL" in errored(src)
        with pytest.raises(psycopg.errors.InternalError_):
            rows(db)


def test_rows_already_upstream_come_in_the_initial_snapshot_then_the_stream(upstream, tmp_path, monkeypatch):
    with psycopg.connect(upstream.url, autocommit=True) as up:
        up.execute("INSERT INTO src SELECT g, 'pre' FROM generate_series(1, 50) g")
    monkeypatch.setenv("SLEUTH_HOME", str(tmp_path / "home"))
    c = Cluster(f"s{uuid.uuid4().hex[:8]}")
    try:
        c.up("local", progress=lambda m: None, source={"upstream": upstream.url, "tables": ["src"]})
        with psycopg.connect(upstream.url, autocommit=True) as up, \
                psycopg.connect(c.dsn(), autocommit=True) as db:
            up.execute("INSERT INTO src VALUES (51, 'post')")
            up.execute("UPDATE src SET v = 'changed' WHERE n = 1")
            got = rows(db)
            assert len(got) == 51 and got[0] == (1, "changed") and got[-1] == (51, "post")
            c.runtime.kill("source1")  # resumes from its bindings: no second snapshot
            c.runtime.restart("source1")
            c.wait_ready(c.node("source1"), timeout=30)
            up.execute("INSERT INTO src VALUES (52, 'again')")
            assert rows(db) == got + [(52, "again")]
    finally:
        if c.exists:
            c.down()
