"""A real reference cluster (local runtime), driven over pgwire with psycopg and psql."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid

import psycopg
import pytest

from sleuth.cluster.control import Cluster

pytestmark = pytest.mark.cluster


@pytest.fixture
def make_cluster(tmp_path, monkeypatch):
    monkeypatch.setenv("SLEUTH_HOME", str(tmp_path / "home"))
    made = []

    def make(**kw):
        c = Cluster(f"t{uuid.uuid4().hex[:8]}")
        made.append(c)
        c.up("local", progress=lambda m: None, **kw)
        return c

    yield make
    for c in made:
        if c.exists:
            c.down()


def sql(c, node=None, autocommit=True):
    return psycopg.connect(c.dsn(node), autocommit=autocommit, connect_timeout=5)


def test_psql_connects_and_runs_the_sql_subset(make_cluster):
    c = make_cluster()
    n = c.coordinators()[0]
    env = {**os.environ, "PGCONNECT_TIMEOUT": "5"}

    def psql(*cmds):
        args = ["psql", "-h", n.host, "-p", str(n.port), "-U", "sleuth", "-d", "sleuth", "-At"]
        for q in cmds:
            args += ["-c", q]
        return subprocess.run(args, capture_output=True, text=True, env=env, timeout=30)

    p = psql("CREATE TABLE t (k bigint, v text)", "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, NULL)",
             "UPDATE t SET v = v || '!' WHERE k IN (1, 3)", "DELETE FROM t WHERE k = 2",
             "INSERT INTO t SELECT k + 10, v FROM t WHERE k = 1", "SELECT k, v FROM t ORDER BY k")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[-4:-1] == ["1|a!", "3|", "11|a!"]
    p = psql("SELECT * FROM missing")
    assert p.returncode != 0 and 'relation "missing" does not exist' in p.stderr


def test_transactions_are_read_only_or_write_only(make_cluster):
    c = make_cluster()
    with sql(c) as conn:
        conn.execute("CREATE TABLE t (k bigint, v bigint)")
        conn.execute("INSERT INTO t VALUES (%s, %s)", (1, 10))
    with sql(c, autocommit=False) as conn:
        assert conn.execute("SELECT v FROM t WHERE k = %s", (1,)).fetchone() == (10,)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("INSERT INTO t VALUES (2, 20)")
        conn.rollback()
        conn.execute("INSERT INTO t VALUES (2, 20)")
        with pytest.raises(psycopg.errors.InvalidTransactionState):
            conn.execute("SELECT v FROM t")
        conn.rollback()
        conn.execute("INSERT INTO t VALUES (3, 30)")
        conn.execute("INSERT INTO t VALUES (4, 40)")
        conn.commit()
        with pytest.raises(psycopg.errors.ActiveSqlTransaction):
            conn.execute("UPDATE t SET v = 0")
        conn.rollback()
    with sql(c) as conn:
        assert sorted(conn.execute("SELECT k FROM t").fetchall()) == [(1,), (3,), (4,)]
        for level in ("serializable", "strong session serializable", "strict serializable"):
            conn.execute(f"SET transaction_isolation = '{level}'")
            assert conn.execute("SHOW transaction_isolation").fetchone() == (level,)
            assert len(conn.execute("SELECT k FROM t").fetchall()) == 3
        ts1 = int(conn.execute("SHOW last_timestamp").fetchone()[0])
        conn.execute("INSERT INTO t VALUES (5, 50)")
        ts2 = int(conn.execute("SHOW last_timestamp").fetchone()[0])
        assert ts2 > ts1 > 0


def _increments(c, clients=8, each=25, node=None):
    with sql(c, node) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS ctr (k bigint, x bigint)")
        conn.execute("INSERT INTO ctr VALUES (1, 0)")
    ok, errors = [], []

    def worker():
        with sql(c, node) as conn:
            for _ in range(each):
                try:
                    conn.execute("UPDATE ctr SET x = x + 1 WHERE k = 1")
                    ok.append(1)
                except psycopg.Error as e:
                    errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    with sql(c, node) as conn:
        return len(ok), errors, conn.execute("SELECT x FROM ctr WHERE k = 1").fetchone()[0]


def test_concurrent_increments_lose_nothing(make_cluster):
    c = make_cluster(storage=3)
    ok, errors, total = _increments(c)
    assert errors == [] and ok == 200 and total == 200


def test_rtw_no_conflict_fault_loses_increments(make_cluster):
    """The fault switch is real: the same load loses updates."""
    c = make_cluster(faults=("rtw-no-conflict",))
    ok, errors, total = _increments(c)
    assert ok == 200 and total < 200


def test_second_coordinator_fences_the_first(make_cluster):
    c = make_cluster()
    first = c.coordinators()[0]
    with sql(c, first) as conn:
        conn.execute("CREATE TABLE t (k bigint)")
        conn.execute("INSERT INTO t VALUES (1)")
    second = c.add_coordinator()
    with sql(c, first) as conn:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction) as e:  # SQLSTATE 25006
            conn.execute("INSERT INTO t VALUES (2)")
        assert "fenced" in str(e.value)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("SELECT k FROM t")  # strict-serializable reads confirm leadership
    with sql(c, second) as conn:
        conn.execute("INSERT INTO t VALUES (3)")
        assert sorted(conn.execute("SELECT k FROM t").fetchall()) == [(1,), (3,)]
    st = c.status()
    coords = [n for n in st["nodes"] if n["role"] == "coordinator"]
    assert [n["name"] for n in coords] == ["coord1", "coord2"] and coords[0]["epoch"] < coords[1]["epoch"]


def _acked_inserts_survive_a_kill(c, victim):
    with sql(c) as conn:
        conn.execute("CREATE TABLE t (k bigint)")
    acked, stop = [], threading.Event()

    def writer(base):
        k = base
        while not stop.is_set() and k < base + 100_000:
            try:
                with sql(c) as conn:
                    while not stop.is_set():
                        conn.execute("INSERT INTO t VALUES (%s)", (k,))
                        acked.append(k)
                        k += 1
            except psycopg.Error:
                k += 1  # this value's fate is unknown: never reuse it

    threads = [threading.Thread(target=writer, args=(i * 1_000_000,)) for i in range(4)]
    for t in threads:
        t.start()
    def wait_for(n, timeout=60.0):
        deadline = time.monotonic() + timeout
        while len(acked) < n:
            assert time.monotonic() < deadline, f"only {len(acked)} of {n} inserts acknowledged in {timeout:.0f}s"
            time.sleep(0.05)

    try:
        wait_for(100)
        c.runtime.kill(victim)
        before = len(acked)
        c.runtime.restart(victim)
        c.wait_ready(c.node(victim))
        wait_for(before + 100)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    with sql(c) as conn:
        present = {k for (k,) in conn.execute("SELECT k FROM t").fetchall()}
    lost = set(acked) - present
    assert not lost, f"{len(lost)} acknowledged inserts lost after killing {victim}"
    return len(acked)


def _cut_oracle_then_heal(cluster, check_cut=lambda: None, check_healed=lambda: None):
    """Cut the newest coordinator from the oracle: its writes fail; heal: they work again."""
    n, o = cluster.coordinators()[-1], cluster.node("oracle")
    with psycopg.connect(cluster.dsn(n), autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS ctr (k bigint, x bigint)")
    cluster.runtime.cut(n.name, n.host, o.name, o.host)
    try:
        check_cut()
        with psycopg.connect(cluster.dsn(n), autocommit=True) as conn:
            with pytest.raises(psycopg.Error):
                conn.execute("INSERT INTO ctr VALUES (8, 8)")
    finally:
        cluster.runtime.heal_cuts()
    check_healed()
    with psycopg.connect(cluster.dsn(n), autocommit=True) as conn:
        for _ in range(20):  # the circuit breaker may still be open for half a second
            try:
                conn.execute("INSERT INTO ctr VALUES (9, 9)")
                break
            except psycopg.Error:
                time.sleep(0.2)
        assert conn.execute("SELECT count(*) FROM ctr WHERE k = 9").fetchone() == (1,)


def test_kill_9_of_a_storage_node_loses_no_acknowledged_write(make_cluster):
    c = make_cluster(storage=2)
    assert _acked_inserts_survive_a_kill(c, "storage1") >= 200


def test_kill_9_of_the_oracle_loses_no_acknowledged_write(make_cluster):
    c = make_cluster(storage=2)
    assert _acked_inserts_survive_a_kill(c, "oracle") >= 200


def cli(*args, timeout=90):
    return subprocess.run([sys.executable, "-m", "sleuth.cli", "cluster", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_cli_status_list_down_and_the_exit_table(make_cluster):
    c = make_cluster(coordinators=2)
    p = cli("status", "--json", "--name", c.name)
    st = json.loads(p.stdout)
    assert st["runtime"] == "local"
    roles = [n["role"] for n in st["nodes"]]
    assert roles.count("oracle") == 1 and roles.count("storage") == 2 and roles.count("coordinator") == 2
    assert all(n["state"] == "up" for n in st["nodes"])
    assert [n["epoch"] for n in st["nodes"] if n["role"] == "coordinator"] == [1, 2]

    p = cli("list", "--json")
    assert p.returncode == 0 and json.loads(p.stdout) == {"clusters": [
        {"name": c.name, "runtime": "local", "nodes": 5, "state": "up", "faults": []}]}
    c.runtime.kill("storage2")
    p = cli("list")
    assert p.returncode == 0 and c.name in p.stdout and "degraded" in p.stdout

    # bad options and unknown names: 254, one line, no traceback (sleuth/base/exits.py)
    for args, says in ((["up", "--fault", "nope", "--runtime", "local"], "--fault"),
                       (["up", "--storage", "0"], "--storage"), (["bogus"], "bogus"),
                       (["logs", "nosuch", "--name", c.name], "no node 'nosuch'"),
                       (["status", "--name", "nosuch"], "no cluster named 'nosuch'")):
        p = cli(*args)
        assert p.returncode == 254 and says in p.stderr and "Traceback" not in p.stderr, (args, p.stderr)

    p = cli("down", "--name", c.name)
    assert p.returncode == 0 and not Cluster(c.name).exists
    p = cli("down", "--name", c.name)  # already gone: nothing to do is not an error
    assert p.returncode == 0 and "no cluster named" in p.stderr and p.stdout == ""
    assert json.loads(cli("list", "--json").stdout) == {"clusters": []}


def test_cli_up_of_a_cluster_that_will_not_start_exits_255(tmp_path, monkeypatch):
    """The oracle cannot bind its address (something else listens there): it exits, `up`
    says so at once (not after its 60 s wait) and exits 255; the half-started cluster is
    listed as failed and `down` removes it."""
    import socket

    from sleuth.cluster.control import ORACLE_PORT, block

    monkeypatch.setenv("SLEUTH_HOME", str(tmp_path / "home"))
    name = f"t{uuid.uuid4().hex[:8]}"
    squatter = socket.socket()
    squatter.bind((f"{block(name, 'local')}.2", ORACLE_PORT))
    squatter.listen()
    try:
        t0 = time.monotonic()
        p = cli("up", "--runtime", "local", "--name", name)
        assert p.returncode == 255 and "node oracle exited while starting" in p.stderr
        assert "address already in use" in p.stderr.lower() and "Traceback" not in p.stderr
        assert time.monotonic() - t0 < 45
        assert json.loads(cli("list", "--json").stdout)["clusters"][0]["state"] == "failed"
    finally:
        squatter.close()
        assert cli("down", "--name", name).returncode == 0
    assert not Cluster(name).exists


def test_partition_by_address_on_the_loopback(make_cluster):
    c = make_cluster()
    n, o = c.coordinators()[0], c.node("oracle")
    with sql(c) as conn:
        conn.execute("CREATE TABLE t (k bigint)")
    c.runtime.cut(n.name, n.host, o.name, o.host)
    try:
        with sql(c) as conn:
            with pytest.raises(psycopg.Error):
                conn.execute("INSERT INTO t VALUES (1)")
    finally:
        c.runtime.heal_cuts()
    with sql(c) as conn:
        for _ in range(20):
            try:
                conn.execute("INSERT INTO t VALUES (2)")
                break
            except psycopg.Error:
                threading.Event().wait(0.2)
        assert conn.execute("SELECT k FROM t").fetchall() == [(2,)]


def test_drop_table_drops_everywhere_and_for_good(make_cluster):
    """A table created after DROP TABLE starts empty: at once, after the coordinator restarts,
    and after every storage node is killed and restarted (old rows sealed in Parquet and
    still in the log alike)."""
    from sleuth.cluster.rpc import call_sync

    c = make_cluster(storage=2)
    with sql(c) as conn:
        conn.execute("CREATE TABLE t (k bigint, v text)")
        conn.execute("INSERT INTO t VALUES (1, 'old'), (2, 'old')")
        for s in (n for n in c.nodes if n.role == "storage"):
            call_sync(s.host, s.port, "seal", timeout=10)  # the first rows into Parquet
        conn.execute("INSERT INTO t VALUES (3, 'old')")  # this one only in the log
        conn.execute("DROP TABLE t")
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT * FROM t")
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("DROP TABLE t")
        conn.execute("DROP TABLE IF EXISTS t")
        conn.execute("CREATE TABLE t (k bigint, v text)")
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
        conn.execute("INSERT INTO t VALUES (10, 'new')")
    for node in ("coord1", "storage1", "storage2"):
        c.runtime.kill(node)
        c.runtime.restart(node)
    for node in ("storage1", "storage2", "coord1"):
        c.wait_ready(c.node(node), 30)
    with sql(c) as conn:
        assert conn.execute("SELECT k, v FROM t").fetchall() == [(10, "new")]


def test_sql_is_correct_or_refuses_over_pgwire(make_cluster):
    c = make_cluster()
    with sql(c) as conn:
        assert conn.execute("SELECT 7/2, 7.0/2, -7/2, -7 % 2").fetchone() == (3, 3.5, -3, -1)
        with pytest.raises(psycopg.errors.DivisionByZero):
            conn.execute("SELECT 7/0")
        for ddl in ("CREATE TABLE p (k bigint PRIMARY KEY)", "CREATE TABLE p (k bigint UNIQUE)",
                    "CREATE TABLE p (k bigint, PRIMARY KEY (k))"):
            with pytest.raises(psycopg.errors.FeatureNotSupported):
                conn.execute(ddl)
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT * FROM p")  # refused means not created either
        conn.execute("CREATE TABLE nn (k bigint NOT NULL, v text)")
        conn.execute("INSERT INTO nn VALUES (1, NULL)")
        for bad in ("INSERT INTO nn VALUES (NULL, 'a')", "INSERT INTO nn (v) VALUES ('a')",
                    "UPDATE nn SET k = NULL", "INSERT INTO nn SELECT NULL, v FROM nn"):
            with pytest.raises(psycopg.errors.NotNullViolation):
                conn.execute(bad)
        assert conn.execute("SELECT k, v FROM nn").fetchall() == [(1, None)]
        with pytest.raises(psycopg.errors.SyntaxError) as e:
            conn.execute("SELECT 1 +")
        assert "sqlglot" not in str(e.value) and "<class" not in str(e.value)

        show = "SHOW transaction_isolation"
        assert conn.execute(show).fetchone() == ("strict serializable",)
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            conn.execute("SET transaction_isolation = 'snapshot isolation'")
        assert conn.execute(show).fetchone() == ("strict serializable",)
        conn.execute("SET transaction_isolation = 'strong session serializable'")
        assert conn.execute(show).fetchone() == ("strong session serializable",)
        with pytest.raises(psycopg.errors.SyntaxError):
            conn.execute("BEGIN ISOLATION LEVEL SNAPSHOT")
    with sql(c, autocommit=False) as conn:  # psycopg sends BEGIN ISOLATION LEVEL SERIALIZABLE
        conn.isolation_level = psycopg.IsolationLevel.SERIALIZABLE
        assert conn.execute("SHOW transaction_isolation").fetchone() == ("serializable",)
        conn.rollback()
        conn.isolation_level = None
        assert conn.execute("SHOW transaction_isolation").fetchone() == ("strict serializable",)


def test_a_coordinator_with_an_old_catalog_never_reads_a_dropped_table(make_cluster):
    """coord1 (fenced, but serializable reads need no epoch) read t before coord2 dropped and
    re-created it: it must not serve the old rows from its old catalog. Storage refuses the
    dropped shard (42P01 once), and coord1 then reads the new table."""
    c = make_cluster(coordinators=2)
    c1, c2 = c.coordinators()

    def until(f, want, seconds=10.0):  # serializable reads trail the latest writes by ~1 s
        deadline = time.monotonic() + seconds
        while (got := f()) != want and time.monotonic() < deadline:
            time.sleep(0.1)
        return got

    with sql(c, c2) as new, sql(c, c1) as old:
        new.execute("CREATE TABLE t (k bigint)")
        new.execute("INSERT INTO t VALUES (1), (2)")
        old.execute("SET transaction_isolation = 'serializable'")
        read = lambda: old.execute("SELECT k FROM t ORDER BY k").fetchall()  # noqa: E731
        assert until(read, [(1,), (2,)]) == [(1,), (2,)]
        new.execute("DROP TABLE t")
        new.execute("CREATE TABLE t (k bigint)")
        new.execute("INSERT INTO t VALUES (3)")
        seen = []
        deadline = time.monotonic() + 10
        while seen[-1:] != [[(3,)]] and time.monotonic() < deadline:
            try:
                seen.append(read())
            except psycopg.errors.UndefinedTable:
                seen.append("42P01")
            time.sleep(0.1)
        assert seen[-1] == [(3,)] and all(s in ("42P01", [], [(3,)]) for s in seen), seen
