"""A user's own database as a target (`--target postgresql://…`, `mysql://…`; issue 43, items 6
and 8): sleuth never drops or changes a table it did not create in this run, and a target that
cannot be reached is the user's target failing, not sleuth.

- sleuth's tables are named `sleuth_…`: a user's `registers` or `accounts` is never touched
  (sleuth ran `DROP TABLE IF EXISTS registers` on a MySQL URL, and a second run on a
  PostgreSQL URL crashed, 255, on `relation "accounts" already exists`);
- a `sleuth_…` table already there (an earlier run killed before it dropped its own) is
  refused, exit 254, naming the table and `--drop-tables`; with `--drop-tables` it is dropped
  first; a run drops the tables it created when it ends;
- a target that cannot be reached before the first operation: exit 254, one line naming the
  target (password masked) and the cause, and only the run's record (test.json) written.

Real servers: a PostgreSQL and a MariaDB that the tests start (`sleuth.targets`' own servers),
used here as a user's databases reached by URL."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from live import missing

from sleuth.workloads.clients import WORKLOADS

RUN = ["--time-limit", "1", "--rate", "50", "--concurrency", "2", "--keys", "2", "--shrink-budget", "0"]


def sleuth_run(tmp_path, target, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sleuth.cli", "run", "--target", target, "--store",
                           str(tmp_path / "store"), "--json", *extra], capture_output=True, text=True, timeout=180)


def run_dirs(tmp_path) -> list[str]:
    out = []
    for dp, _, fns in os.walk(tmp_path / "store"):
        if "test.json" in fns:
            out.append(dp)
    return sorted(out)


def error_lines(p) -> list[str]:
    return [x for x in p.stderr.splitlines() if x.startswith("sleuth: error:")]


def test_every_table_sleuth_creates_is_named_as_sleuths():
    for w in WORKLOADS.values():
        assert w.tables and all(t.startswith("sleuth_") for t in w.tables), (w.name, w.tables)


# ---- item 8: a target that cannot be reached ---------------------------------------------------

@pytest.mark.parametrize("url, shown", [
    ("postgresql://u:secret@127.0.0.1:1/db", "postgresql://u:***@127.0.0.1:1/db"),
    ("mysql://u:secret@127.0.0.1:1/db", "mysql://u:***@127.0.0.1:1/db"),
])
def test_an_unreachable_target_is_the_users_target_failing_not_sleuth(tmp_path, url, shown):
    p = sleuth_run(tmp_path, url, "-w", "register", *RUN)
    assert p.returncode == 254, p.stderr
    assert "secret" not in p.stderr + p.stdout and "Traceback" not in p.stderr
    line, = error_lines(p)
    assert shown in line and "could not be reached" in line and "refused" in line.lower(), line
    summary = json.loads(p.stdout)  # --json: stdout is the one object
    assert summary["exit"] == 254 and summary["valid"] == "unknown"
    run, = run_dirs(tmp_path)
    assert os.listdir(run) == ["test.json"]  # no crash.txt, no history, no report
    with open(os.path.join(run, "test.json")) as f:
        record = json.load(f)
    assert record["status"] == 254 and shown in record["reason"] and record["crash_file"] is None
    assert "secret" not in json.dumps(record)


# ---- item 6: the user's tables -----------------------------------------------------------------

@pytest.fixture(scope="module")
def pg():
    from sleuth.targets.postgres_server import PostgresServer

    if shutil.which("pg_ctl") is None and not any(os.path.isdir(f"/usr/lib/postgresql/{v}") for v in range(12, 20)):
        missing("PostgreSQL", "Debian's postgresql is not installed")
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="module")
def mariadb():
    from sleuth.targets.mariadb import MariaDBServer

    if shutil.which("mariadbd") is None:
        missing("MariaDB", "Debian's mariadb-server is not installed")
    server = MariaDBServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


class Db:
    """A user's database: plain SQL through the target's own driver."""

    def __init__(self, url: str):
        from sleuth.targets import make_target

        self.target = make_target(url, None, ())
        self.url = url

    def sql(self, *stmts: str) -> list:
        with self.target.connect(self.url, 10) as conn:
            rows = []
            for s in stmts:
                cur = conn.execute(s)
                try:
                    rows = cur.fetchall()
                except Exception:
                    rows = []
            return [tuple(r) for r in rows]


def _check_users_tables_untouched(tmp_path, db: Db, tables_sql: str):
    db.sql("CREATE TABLE registers (k bigint, v bigint)", "INSERT INTO registers VALUES (1, 42)",
           "CREATE TABLE accounts (id bigint, balance bigint)", "INSERT INTO accounts VALUES (7, 700)")
    for workload in ("register", "register", "bank"):  # a second run must not meet the first's tables
        p = sleuth_run(tmp_path, db.url, "-w", workload, *RUN)
        assert p.returncode == 0, p.stderr[-2000:]
    assert db.sql("SELECT k, v FROM registers") == [(1, 42)]
    assert db.sql("SELECT id, balance FROM accounts") == [(7, 700)]
    assert db.sql(tables_sql) == [], "a run leaves none of the tables it created"

    # an earlier run's table left behind (say the run was killed): refused, named, kept
    db.sql("CREATE TABLE sleuth_registers (k bigint, v bigint)", "INSERT INTO sleuth_registers VALUES (5, 5)")
    before = len(run_dirs(tmp_path))
    p = sleuth_run(tmp_path, db.url, "-w", "register", *RUN)
    assert p.returncode == 254, p.stderr[-2000:]
    line, = error_lines(p)
    assert "sleuth_registers" in line and "--drop-tables" in line, line
    assert db.sql("SELECT k, v FROM sleuth_registers") == [(5, 5)]
    run = run_dirs(tmp_path)[before]
    assert os.listdir(run) == ["test.json"]
    p = sleuth_run(tmp_path, db.url, "-w", "register", "--drop-tables", *RUN)
    assert p.returncode == 0, p.stderr[-2000:]
    assert db.sql(tables_sql) == []
    assert db.sql("SELECT k, v FROM registers") == [(1, 42)]


@pytest.mark.slow  # 5 short runs against a real server: about 30 s
def test_a_postgresql_url_keeps_the_users_tables(tmp_path, pg):
    _check_users_tables_untouched(tmp_path, Db(pg.url), "SELECT table_name FROM information_schema.tables "
                                  "WHERE table_schema = current_schema() AND table_name LIKE 'sleuth%'")


@pytest.mark.slow
def test_a_mysql_url_keeps_the_users_tables(tmp_path, mariadb):
    _check_users_tables_untouched(tmp_path, Db(mariadb.url), "SELECT table_name FROM information_schema.tables "
                                  "WHERE table_schema = DATABASE() AND table_name LIKE 'sleuth%'")
