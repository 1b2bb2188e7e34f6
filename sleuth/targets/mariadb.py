"""MariaDB (and any MySQL-protocol server) as a target: a private server sleuth starts, or a URL.

Why this target: the most instructive anomalies of recent years were found in
InnoDB. Jepsen's MySQL 8.0.34 analysis (2023) shows REPEATABLE READ allowing
lost updates, read skew (G-single) and write skew (G2-item), short even of
monotonic atomic view, because reads use the snapshot taken at the first read
while UPDATE/INSERT act on the latest committed row; Hermitage's MySQL tables
say the same for lost update. MariaDB shares InnoDB and that behaviour, and
since 10.6.18/10.11.8 offers `innodb_snapshot_isolation=ON`, under which
REPEATABLE READ refuses a write to a row changed since its snapshot
(error 1020, "Record has changed since last read").

`MariaDBServer` runs Debian's `mariadb-install-db` and `mariadbd` in a temp
dir as the `mysql` system user (mariadbd refuses root), on 127.0.0.1 and a
free port, with `--no-defaults` (the system's /etc/mysql is never read) and
an init file that creates user `sleuth` (no password) and database `sleuth`.
It installs nothing: without Debian's `mariadb-server` it says so. mariadbd is
one process (threads, no forks), but kill and pause still reach its whole
process tree, as for PostgreSQL.

The driver is PyMySQL (pure Python, so no C headers or libmariadb to
install). Its connection is wrapped so `execute(sql)` returns the cursor, the
one call shape the workloads use with psycopg too.
"""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from typing import Any
from urllib.parse import unquote, urlsplit

from sleuth.targets import OneServer, Target, Unsupported
from sleuth.targets.local_server import LocalServer
from sleuth.targets.postgres_server import _free_port

# MySQL error codes after which a write certainly had no effect: the transaction (or the
# statement, which the workload then rolls back with its transaction) was rolled back.
DEADLOCK, LOCK_WAIT_TIMEOUT, RECORD_CHANGED = 1213, 1205, 1020
WRITE_DEFINITE = frozenset({DEADLOCK, LOCK_WAIT_TIMEOUT, RECORD_CHANGED})
# The connection itself is gone (client-side codes; 0 is PyMySQL's for a closed socket).
CONNECTION_LOST = frozenset({0, 2006, 2013, 2003, 2055})

# What each level claims, so what it is judged against. MySQL documents its levels by the
# ANSI names, and Adya (2000) formalizes those: READ UNCOMMITTED forbids G0 (PL-1), READ
# COMMITTED also G1 (PL-2), REPEATABLE READ also G2-item (PL-2.99), SERIALIZABLE all of G2
# (PL-3). Unlike PostgreSQL's, which documents its REPEATABLE READ as snapshot isolation,
# InnoDB's REPEATABLE READ is judged as repeatable read, as Jepsen's MySQL analysis does.
MYSQL_MODELS = {"read-uncommitted": "read-uncommitted", "read-committed": "read-committed",
                "repeatable-read": "repeatable-read", "serializable": "serializable"}
# With innodb_snapshot_isolation=ON, MariaDB's REPEATABLE READ is snapshot isolation: reads
# from one snapshot, first committer wins on write conflicts (MariaDB's documentation).
SNAPSHOT_MODELS = {**MYSQL_MODELS, "repeatable-read": "snapshot-isolation"}


@functools.cache
def offers_snapshot_isolation() -> bool:
    """Does this machine's mariadbd know innodb_snapshot_isolation (MariaDB ≥ 10.6.18/10.11.8)?"""
    p = subprocess.run(["mariadbd", "--no-defaults", "--verbose", "--help"], capture_output=True, text=True)
    return "innodb-snapshot-isolation" in p.stdout


class _Conn:
    """A PyMySQL connection with psycopg's `execute(sql) -> cursor`, which the workloads call."""

    def __init__(self, raw: Any):
        self.raw = raw

    def execute(self, sql: str) -> Any:
        cur = self.raw.cursor()
        cur.execute(sql)
        return cur

    def close(self) -> None:
        self.raw.close()

    def __enter__(self) -> _Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def parse_url(url: str) -> dict:
    """mysql://user[:password]@host[:port]/database → PyMySQL's connect arguments."""
    u = urlsplit(url)
    try:
        port = u.port or 3306
    except ValueError:
        port = None
    db = u.path.lstrip("/")
    if u.scheme != "mysql" or not u.hostname or not u.username or not db or "/" in db or port is None:
        raise Unsupported(f"--target {url!r}: expected mysql://user[:password]@host[:port]/database")
    return {"host": u.hostname, "port": port, "user": unquote(u.username),
            "password": unquote(u.password or ""), "database": db}


class MySQLTarget(Target):
    """What every MySQL-protocol target shares: the driver, its errors, the levels and their models."""
    family = "mysql"
    # MySQL's own default level first; without --isolation a run asks for the strongest
    # (Target.default_isolation), as it does of every target.
    isolations = ("repeatable-read", "read-uncommitted", "read-committed", "serializable")
    models = MYSQL_MODELS
    current_schema = "DATABASE()"

    def connect(self, dsn: str, timeout: float) -> Any:
        import pymysql
        from pymysql.constants import CLIENT

        # FOUND_ROWS: rowcount counts matched rows, as PostgreSQL's does (a cas that matched
        # but wrote the same value is still a success). PyMySQL's connect_timeout bounds only the
        # TCP connect; a paused server accepts that and never sends its greeting, so every read
        # is bounded too (2013 "Lost connection" after `timeout`, as the runner's watchdog would).
        t = max(2, int(timeout))
        return _Conn(pymysql.connect(**parse_url(dsn), autocommit=True, connect_timeout=t, read_timeout=t,
                                     client_flag=CLIENT.FOUND_ROWS, charset="utf8mb4"))

    def socket_of(self, conn: Any) -> int:
        return conn.raw._sock.fileno()  # PyMySQL keeps its socket there; the watchdog shuts it

    def classify(self, exc: BaseException, writes: bool) -> tuple[str, str, bool] | None:
        """Jepsen's rule in MySQL's codes: deadlock (1213), lock wait timeout (1205) and a snapshot
        conflict (1020) roll back, so a write failed; a lost connection (2006/2013) mid-write may
        have committed: info. A failed read changed nothing, whatever the error."""
        import pymysql
        if not isinstance(exc, pymysql.err.MySQLError):
            return None
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        text = str(exc.args[1] if len(exc.args) > 1 else exc).strip().splitlines()
        msg = f"{code if code is not None else type(exc).__name__}: {text[0] if text else ''}"
        gone = code is None or code in CONNECTION_LOST or isinstance(exc, pymysql.err.InterfaceError)
        if not writes or code in WRITE_DEFINITE:
            return "fail", msg, gone
        return "info", msg, True

    def linearizable_keys(self, isolation: str | None) -> bool:
        # One server: each read and committed write of a row takes effect at one instant inside
        # its transaction. Not under READ UNCOMMITTED, where a read may see a version that is
        # never committed.
        return isolation != "read-uncommitted"

    def session_sql(self, isolation: str) -> list[str]:
        return [f"SET SESSION TRANSACTION ISOLATION LEVEL {isolation.replace('-', ' ').upper()}"]


class MariaDBTarget(OneServer, MySQLTarget):
    """A real MariaDB server sleuth starts in a temp dir: `mariadb`, or `mariadb+snapshot-isolation`."""
    name = "mariadb"
    roles = ("mariadb",)
    log_name = "mariadb.err"

    def __init__(self, spec: str = "mariadb"):
        super().__init__()
        self.snapshot_isolation = spec == "mariadb+snapshot-isolation"
        if shutil.which("mariadbd") is None or shutil.which("mariadb-install-db") is None:
            raise Unsupported("--target mariadb needs Debian's mariadb-server (mariadbd, mariadb-install-db); "
                              "apt-get install mariadb-server (make system installs every package sleuth's live parts use)")
        if self.snapshot_isolation and not offers_snapshot_isolation():
            raise Unsupported("--target mariadb+snapshot-isolation: this mariadbd has no innodb_snapshot_isolation "
                              "(MariaDB 10.6.18, 10.11.8 or later)")
        self.models = SNAPSHOT_MODELS if self.snapshot_isolation else MYSQL_MODELS
        self.server: MariaDBServer | None = None

    def up(self, progress=print) -> None:
        # Explicit either way: MariaDB 11.6+ turns it on by default.
        setting = "ON" if self.snapshot_isolation else ("OFF" if offers_snapshot_isolation() else None)
        self.server = MariaDBServer(snapshot_isolation=setting)
        self.server.start()

    def dsns(self) -> list[tuple[str, str]]:
        return [("mariadb", self.server.url)]


class MySQLUrlTarget(MySQLTarget):
    """Any MySQL-protocol database at a URL: sleuth cannot reach its nodes, nor change its settings."""
    users = True

    def __init__(self, url: str):
        super().__init__()
        parse_url(url)  # bad input is refused now, before anything starts
        self.url = url
        self.name = url.split("@")[-1]

    def dsns(self) -> list[tuple[str, str]]:
        return [(self.name, self.url)]


class MariaDBServer(LocalServer):
    """mariadbd on 127.0.0.1 and a free port, data in a temp dir; kill -9, restart, pause, stop."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", snapshot_isolation: str | None = None):
        self.base = tempfile.mkdtemp(prefix="sleuth-mariadb-")
        self.datadir = os.path.join(self.base, "data")
        self.host = host
        self.port = port or _free_port(host)
        self.snapshot_isolation = snapshot_isolation
        self.proc: subprocess.Popen | None = None
        self.user = pwd.getpwnam("mysql") if os.geteuid() == 0 else None

    @property
    def url(self) -> str:
        return f"mysql://sleuth@{self.host}:{self.port}/sleuth"

    @property
    def log_path(self) -> str:
        return os.path.join(self.base, "mariadb.err")

    def _user_args(self) -> list[str]:
        return ["--user=mysql"] if self.user is not None else []

    def _tmp_args(self) -> list[str]:
        """The server's own temp dir, in its base: $TMPDIR may not be writable by the mysql user."""
        return [f"--tmpdir={os.path.join(self.base, 'tmp')}"]

    def start(self, timeout: float = 60) -> None:
        os.makedirs(os.path.join(self.base, "tmp"), exist_ok=True)
        init = os.path.join(self.base, "init.sql")
        with open(init, "w") as f:  # run at every start; one statement per line, as mariadbd reads it
            f.write("CREATE USER IF NOT EXISTS 'sleuth'@'%';\n"
                    "GRANT ALL PRIVILEGES ON *.* TO 'sleuth'@'%';\n"
                    "CREATE DATABASE IF NOT EXISTS sleuth;\n")
        if self.user is not None:
            for dp, dns, fns in os.walk(self.base):
                for n in [dp] + [os.path.join(dp, x) for x in dns + fns]:
                    os.chown(n, self.user.pw_uid, self.user.pw_gid)
        p = subprocess.run(["mariadb-install-db", "--no-defaults", *self._user_args(), f"--datadir={self.datadir}",
                            *self._tmp_args(), "--auth-root-authentication-method=normal", "--skip-test-db"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed: {(p.stderr or p.stdout).strip()[-500:]}")
        self._launch(timeout)

    def _launch(self, timeout: float) -> None:
        args = ["mariadbd", "--no-defaults", *self._user_args(), f"--datadir={self.datadir}", *self._tmp_args(),
                f"--socket={os.path.join(self.base, 'mariadbd.sock')}", f"--port={self.port}",
                f"--bind-address={self.host}", f"--pid-file={os.path.join(self.base, 'mariadbd.pid')}",
                f"--log-error={self.log_path}", f"--init-file={os.path.join(self.base, 'init.sql')}",
                "--skip-name-resolve", "--max-connections=300",
                # a lock wait ends in a definite 1205 before the runner's 5 s watchdog cuts it (info)
                "--innodb-lock-wait-timeout=2"]
        if self.snapshot_isolation:
            args.append(f"--innodb-snapshot-isolation={self.snapshot_isolation}")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        import pymysql
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mariadbd exited ({self.proc.returncode}); log: {self.log_path}")
            try:
                pymysql.connect(**parse_url(self.url), connect_timeout=2, read_timeout=2).close()
                return
            except pymysql.err.MySQLError:
                time.sleep(0.1)
        raise RuntimeError(f"mariadbd did not answer within {timeout}s; log: {self.log_path}")

    def restart(self, timeout: float = 60) -> None:
        """After a kill: the same data, InnoDB's crash recovery."""
        self.kill()
        self._launch(timeout)

    def stop(self) -> None:
        if self.proc is not None:
            self.resume()
            self.proc.terminate()  # SIGTERM: a clean shutdown
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
            self.kill()  # anything left of the tree
            self.proc = None
        shutil.rmtree(self.base, ignore_errors=True)
