"""A real PostgreSQL server from Debian's packages, in a temp dir: the first external target.

`PostgresServer` runs `initdb` (trust authentication, user and database
`sleuth`) and `postgres` as the `postgres` system user (PostgreSQL refuses
to run as root), on 127.0.0.1 and a free port, with fsync on. It can be
killed (SIGKILL to the postmaster and every backend: each backend calls
setsid(), so signals go to the process tree, not a process group), restarted on the same
data (crash recovery), paused and resumed (SIGSTOP/SIGCONT to every process
of the server), and stopped. Its `wal_level` is `logical`, so a source node of
the reference cluster (cluster/source.py) can ingest its tables.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from sleuth.cluster import procs
from sleuth.targets.local_server import LocalServer

MISSING = ("needs Debian's postgresql (initdb, postgres under /usr/lib/postgresql/*/bin); apt-get install "
           "postgresql (make system installs every package sleuth's live parts use)")


def installed_bin() -> str | None:
    """The bin dir holding initdb and postgres (the newest version), or None.
    sleuth installs nothing itself: `make system` does, as for MariaDB."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),  # .../postgresql/15/bin/initdb
                   key=lambda p: int(v) if (v := p.split("/")[-3]).isdigit() else -1)
    return os.path.dirname(found[-1]) if found else None


def required_bin(who: str, error: type[Exception] = RuntimeError) -> str:
    """`installed_bin()`, or `error` saying that `who` needs Debian's postgresql (`MISSING`)."""
    found = installed_bin()
    if found is None:
        raise error(f"{who} {MISSING}")
    return found


def _cont(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class PostgresServer(LocalServer):
    def __init__(self, datadir: str | None = None, port: int = 0, host: str = "127.0.0.1",
                 trust: tuple[str, ...] = ()):
        """`trust`: pg_hba addresses beyond loopback whose clients it trusts, replication too
        (a docker cluster's network, whose source node connects from its container, and
        `samehost`: this machine, which reaches a non-loopback address from any of its own)."""
        self.bin = required_bin("PostgreSQL")
        self.trust = ("127.0.0.0/8", *trust)
        self.own_dir = datadir is None
        self.base = datadir or tempfile.mkdtemp(prefix="sleuth-pg-")
        self.datadir = os.path.join(self.base, "data")
        self.sockdir = os.path.join(self.base, "sock")
        self.host = host
        self.port = port or _free_port(host)
        self.proc: subprocess.Popen | None = None
        self.user = pwd.getpwnam("postgres") if os.geteuid() == 0 else None

    @property
    def url(self) -> str:
        return f"postgresql://sleuth@{self.host}:{self.port}/sleuth"

    @property
    def log_path(self) -> str:
        return os.path.join(self.base, "postgres.log")

    def _as_postgres(self) -> dict:
        if self.user is None:
            return {}
        uid, gid = self.user.pw_uid, self.user.pw_gid

        def demote() -> None:
            os.setgid(gid)
            os.setuid(uid)
        return {"preexec_fn": demote}

    def _chown(self, path: str) -> None:
        if self.user is not None:
            for dp, dns, fns in os.walk(path):
                for n in [dp] + [os.path.join(dp, x) for x in dns + fns]:
                    os.chown(n, self.user.pw_uid, self.user.pw_gid)

    def start(self, timeout: float = 30) -> None:
        os.makedirs(self.sockdir, exist_ok=True)
        self._chown(self.base)
        if not os.path.exists(os.path.join(self.datadir, "PG_VERSION")):
            p = subprocess.run([os.path.join(self.bin, "initdb"), "-D", self.datadir, "-U", "sleuth",
                                "--auth=trust", "-E", "UTF8", "--no-instructions"],
                               capture_output=True, text=True, **self._as_postgres())
            if p.returncode != 0:
                raise RuntimeError(f"initdb failed: {p.stderr.strip()[-500:]}")
            # trust the whole loopback block, replication too: a cluster's source node connects
            # from its own 127.x.y.z address (cluster/relay.py)
            with open(os.path.join(self.datadir, "pg_hba.conf"), "a") as f:
                for cidr in self.trust:
                    f.write(f"host all all {cidr} trust\nhost replication all {cidr} trust\n")
            fresh = True
        else:
            fresh = False
        self._launch(timeout)
        if fresh:
            import psycopg
            with psycopg.connect(f"host={self.host} port={self.port} user=sleuth dbname=postgres",
                                 autocommit=True) as c:
                c.execute("CREATE DATABASE sleuth")

    def _launch(self, timeout: float) -> None:
        log = open(self.log_path, "ab")
        if self.user is not None:
            os.chown(self.log_path, self.user.pw_uid, self.user.pw_gid)
        self.proc = subprocess.Popen(
            [os.path.join(self.bin, "postgres"), "-D", self.datadir, "-k", self.sockdir,
             "-c", f"listen_addresses={self.host}", "-c", f"port={self.port}", "-c", "fsync=on",
             "-c", "max_connections=200", "-c", "synchronous_commit=on",
             "-c", "deadlock_timeout=100ms",  # workloads deadlock often: find it in 0.1 s, not 1 s
             # the reference cluster's source node reads it by logical replication
             "-c", "wal_level=logical", "-c", "max_replication_slots=10", "-c", "max_wal_senders=10"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **self._as_postgres())
        log.close()
        deadline = time.monotonic() + timeout
        import psycopg
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited; log: {self.log_path}")
            try:
                with psycopg.connect(f"host={self.host} port={self.port} user=sleuth dbname=postgres",
                                     connect_timeout=2) as c:
                    c.execute("SELECT 1")
                return
            except psycopg.Error:
                time.sleep(0.1)
        raise RuntimeError(f"postgres did not answer within {timeout}s; log: {self.log_path}")

    def _signal_all(self, sig: int) -> list[int]:
        """Stop the postmaster first (it forks no more), then signal the whole tree."""
        if self.proc is None:
            return []
        try:
            os.kill(self.proc.pid, signal.SIGSTOP)
        except ProcessLookupError:
            return []
        return procs.signal_tree(self.processes(), sig)

    def restart(self, timeout: float = 30) -> None:
        self.kill()
        pid_file = os.path.join(self.datadir, "postmaster.pid")
        if os.path.exists(pid_file):
            os.remove(pid_file)
        self._launch(timeout)

    def resume(self) -> None:
        pids = self.processes()
        for pid in pids:  # the postmaster last: it finds its children running again
            if pid != self.proc.pid:
                _cont(pid)
        if pids:
            _cont(self.proc.pid)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.resume()
        self.proc.send_signal(signal.SIGINT)  # fast shutdown
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.kill()
        self.proc = None
        if self.own_dir:
            shutil.rmtree(self.base, ignore_errors=True)
