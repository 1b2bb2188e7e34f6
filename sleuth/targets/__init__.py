"""What a run talks to: the adapters to systems under test.

`reference` (the bundled cluster), `postgres` (a local PostgreSQL server
sleuth starts), any PostgreSQL-wire URL, `mariadb` (a local MariaDB server
sleuth starts), any MySQL-protocol URL, `etcd` (a cluster of etcd members
sleuth starts) and any database described in a TOML file (`described`).

A target starts (or finds) the system, hands clients a connection string,
and exposes the handles the nemeses need: nodes by role, kill/restart,
pause/resume, extra coordinators, clock offsets. A target refuses a fault it
cannot reach with `Unsupported` (printed as a one-line usage error).

A target also owns its driver, so the runner's clients stay driver-blind:
`connect(dsn, timeout)` gives a connection whose `execute(sql)` returns a
cursor (`fetchone`, `fetchall`, `rowcount`: psycopg's shape, which the
workloads use), `socket_of(conn)` the descriptor the watchdog shuts when an
operation hangs, and `classify(exc, writes)` what an error means for the
history (Jepsen's rule: `fail` only when the database guarantees the
operation had no effect, `info` when it may have). The defaults here speak
the PostgreSQL wire protocol through psycopg.
"""

from __future__ import annotations

import os
import threading
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

# defined below the targets (sleuth.base.seams): a nemesis raises it too, and needs no target code
from sleuth.base.seams import Unsupported as Unsupported


def redact(spec: str) -> str:
    """A target as it may be printed, logged or stored: a URL's password becomes `***`
    (`postgresql://u:secret@host/db` -> `postgresql://u:***@host/db`), in the userinfo and in a
    `password=` query parameter alike. Anything that is not a URL is returned as it is."""
    if "://" not in spec:
        return spec
    try:
        u = urlsplit(spec)
    except ValueError:
        return spec.split("://", 1)[0] + "://***"
    netloc = u.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            netloc = f"{userinfo.split(':', 1)[0]}:***@{host}"
    query = u.query
    if "password" in query.lower():
        query = urlencode([(k, "***" if k.lower() == "password" else v)
                           for k, v in parse_qsl(query, keep_blank_values=True)], safe="*")
    return urlunsplit(u._replace(netloc=netloc, query=query))


# SQLSTATEs after which a write certainly had no effect: serialization failure,
# deadlock, fenced coordinator (25006), the reference cluster's refusals, cancel, aborted txn.
PG_WRITE_DEFINITE = frozenset({"40001", "40P01", "25006", "58000", "57014", "25P02", "25000", "25001"})


class TargetFailed(Exception):
    """The user's own database (a URL target) failed the run before its first operation: it
    could not be reached, or it already holds a table of the name sleuth would create. The
    user's target, not sleuth, is at fault: the run ends with one line saying so (the target
    redacted), exit 254, and its record; no traceback, no history, no report."""


class Target:
    family = "general"
    name = ""
    grey_box = False  # does it report statement timestamps?
    isolations: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    # --isolation → the model its history is judged against, where this target's levels
    # mean something else than the runner's shared table says (e.g. MySQL's REPEATABLE READ).
    models: dict[str, str] = {}
    write_definite = PG_WRITE_DEFINITE
    # The user's own database (a URL): sleuth creates its tables there only where no table of
    # that name exists, and drops only those it created. The servers sleuth starts and the
    # reference cluster are its own, new for each run.
    users = False
    current_schema = "current_schema()"  # the schema an unqualified CREATE TABLE creates in
    runtime_name: str | None = None  # where its nodes run (local, docker, ssh); None: a server it was given

    def workload(self, name: str, keys: int) -> Any:
        """The client workload `name` on this target: the SQL one of its family (etcd, whose
        clients speak no SQL, brings its own)."""
        from sleuth.workloads.clients import WORKLOADS

        return WORKLOADS[name](keys, self.family)

    def existing_tables(self, conn: Any, names: list[str]) -> list[str]:
        """Which of `names` are tables in the schema sleuth would create them in."""
        listed = ", ".join(f"'{n}'" for n in names)  # sleuth's own names: letters and underscores
        rows = conn.execute(f"SELECT table_name FROM information_schema.tables WHERE table_schema = "
                            f"{self.current_schema} AND table_name IN ({listed})").fetchall()
        return sorted(str(r[0]) for r in rows)

    def connect(self, dsn: str, timeout: float) -> Any:
        import psycopg
        return psycopg.connect(dsn, autocommit=True, connect_timeout=max(2, int(timeout)))

    def socket_of(self, conn: Any) -> int:
        return conn.pgconn.socket

    def classify(self, exc: BaseException, writes: bool) -> tuple[str, str, bool] | None:
        """(outcome "fail"|"info", message, reconnect?) for a driver error; None for any other exception."""
        import psycopg
        if not isinstance(exc, psycopg.Error):
            return None
        code = getattr(exc, "sqlstate", None)
        definite = (not writes) or code in self.write_definite
        if isinstance(exc, psycopg.OperationalError) and code is None and writes:
            definite = False  # the connection went away mid-write
        msg = f"{code or type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        if definite:
            return "fail", msg, code is None
        return "info", msg, True

    def default_isolation(self) -> str | None:
        """The level a run or campaign cell without `--isolation` asks for: the target's strongest
        (the one judged against the strongest model), so an unqualified run tests the most the
        target promises. None for a target without levels."""
        if not self.isolations:
            return None
        from sleuth.checker.models import ISOLATION_MODELS, MODELS

        def rank(level: str) -> int:  # MODELS lists the strongest first
            model = self.models.get(level, ISOLATION_MODELS.get(level, ""))
            return MODELS.index(model) if model in MODELS else len(MODELS)

        return min(self.isolations, key=rank)

    @property
    def abilities(self) -> frozenset[str]:
        """What a nemesis or a workload may ask of this target (`sleuth.base.seams.Target` names them;
        each nemesis kind declares its need, `sleuth.nemesis.faults.Fault.needs`): here `nodes`
        where it has nodes sleuth started; the reference cluster has them all."""
        if self.family == "reference":
            return frozenset({"nodes", "coordinators", "clock", "partition", "upstream"})
        return frozenset({"nodes"}) if self.roles else frozenset()

    def refusal(self, kind: str, need: str) -> str:
        """The one-line refusal of `--nemesis kind`, whose `need` this target lacks."""
        if need == "nodes":
            return f"--nemesis {kind}: target {self.name} runs on nodes sleuth cannot reach"
        if need == "partition" and self.roles:
            return f"--nemesis {kind}: target {self.name} cannot cut links between its nodes (it has one)"
        return f"--nemesis {kind} needs the reference cluster (--target reference)"

    def clock_nodes(self) -> list[str]:
        """The nodes whose clock a clock fault may move (the reference cluster's: its oracle)."""
        return ["oracle"]

    def linearizable_keys(self, isolation: str | None) -> bool:
        """Is each key linearizable on its own at this level? (rw-register then infers versions from real time.)"""
        return False

    def __init__(self) -> None:
        self.generation = 0  # bumped when the set of coordinators changes (clients reconnect)
        self.lock = threading.Lock()

    def up(self, progress=print) -> None: ...
    def down(self) -> None: ...
    def dsns(self) -> list[tuple[str, str]]: raise NotImplementedError  # (node name, dsn)
    def session_sql(self, isolation: str) -> list[str]: return []
    def nodes(self, role: str) -> list[str]: raise Unsupported(f"{self.name} has no {role} nodes")
    def kill(self, node: str) -> None: raise Unsupported(f"{self.name}: cannot kill {node}")
    def restart(self, node: str) -> None: raise Unsupported(f"{self.name}: cannot restart {node}")
    def pause(self, node: str) -> None: raise Unsupported(f"{self.name}: cannot pause {node}")
    def resume(self, node: str) -> None: raise Unsupported(f"{self.name}: cannot resume {node}")
    def add_coordinator(self) -> str: raise Unsupported(f"{self.name} has one leader only")
    def retire_coordinator(self, node: str) -> None: raise Unsupported(f"{self.name} has one leader only")
    def set_clock(self, node: str, offset_ms: int) -> None: raise Unsupported(f"{self.name}: no clock control")

    def grudges(self) -> tuple[str, ...]:
        """The partitions that mean something on this target: those of any cluster of nodes."""
        from sleuth.nemesis.faults import NODE_GRUDGES

        return NODE_GRUDGES

    def use_upstream(self, workload: Any) -> None:
        raise Unsupported(f"--workload {workload.name} needs the reference cluster's source node "
                          "(--target reference)")
    def cut(self, a: str, b: str) -> None: raise Unsupported(f"{self.name}: cannot partition its nodes")
    def heal_cuts(self) -> None: ...
    def collect_logs(self, into: str) -> None: ...
    def wait_healthy(self, timeout: float = 30.0) -> None: ...


class OneServer:
    """A target that is one server sleuth started on this machine (`self.server`: PostgreSQL,
    MariaDB): its one node, named after its role, is what a nemesis kills, restarts, pauses
    and resumes; its log is kept in the run directory as `nodes/<role>/<log_name>`. Listed
    before `Target` among the bases, so these replace Target's refusals."""

    roles: tuple[str, ...] = ()
    log_name = ""
    server: Any = None

    def down(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def nodes(self, role: str) -> list[str]:
        return [self.roles[0]]

    def kill(self, node: str) -> None:
        self.server.kill()

    def restart(self, node: str) -> None:
        self.server.restart()

    def pause(self, node: str) -> None:
        self.server.pause()

    def resume(self, node: str) -> None:
        self.server.resume()

    def collect_logs(self, into: str) -> None:
        import shutil

        if self.server is not None and os.path.exists(self.server.log_path):
            os.makedirs(os.path.join(into, self.roles[0]), exist_ok=True)
            shutil.copy(self.server.log_path, os.path.join(into, self.roles[0], self.log_name))


def refuse_upstream(target: Target, workload: Any) -> None:
    """Raise `Unsupported` unless `target` can give `workload` (a class or an instance) the upstream
    PostgreSQL it reads, if it reads one (the source workload): only the reference cluster's source
    node ingests one, and sleuth starts it from Debian's postgresql."""
    if not getattr(workload, "upstream_tables", None):
        return
    if "upstream" not in target.abilities:
        target.use_upstream(workload)  # the refusal of a target without one
    from sleuth.targets.postgres_server import required_bin

    required_bin(f"--workload {workload.name}: its upstream PostgreSQL", Unsupported)


def label(spec: str) -> str:
    """A target as a run's name says it: `url` for a URL (never its password), a description
    file's name without its directory (`targets/etcd.toml` -> `etcd-toml`), else the spec itself."""
    if "://" in spec:
        return "url"
    return os.path.basename(spec).removesuffix(".toml") + "-toml" if spec.endswith(".toml") else spec


def make_target(spec: str, runtime: str | None, faults: tuple[str, ...], nodes_file: str | None = None,
                nodes_count: int | None = None) -> Target:
    if nodes_count is not None and not (spec.split("+")[0] == "etcd" or spec.endswith(".toml")):
        raise Unsupported(f"--nodes-count applies to a cluster sleuth starts (etcd, a .toml description), "
                          f"not to --target {redact(spec)}")
    if spec == "reference":
        from sleuth.targets.reference import ReferenceTarget

        return ReferenceTarget(runtime, faults, nodes_file=nodes_file)
    if spec.split("+")[0] == "etcd" or spec.endswith(".toml"):
        if runtime == "ssh" and not nodes_file:
            raise Unsupported(f"--runtime ssh: name the hosts of --target {spec} with --nodes FILE")
        if nodes_file and runtime not in (None, "ssh"):
            raise Unsupported(f"--nodes names ssh hosts: it goes with --runtime ssh, not --runtime {runtime}")
        if faults:
            raise Unsupported("--fault switches exist only in the reference cluster (--target reference)")
        if spec.endswith(".toml"):
            import dataclasses

            from sleuth.targets.described import DescribedTarget, load

            desc = load(spec)
            if nodes_count is not None:
                desc = dataclasses.replace(desc, nodes=nodes_count)
            return DescribedTarget(desc, runtime=runtime, nodes_file=nodes_file)
        from sleuth.targets.etcd import EtcdTarget

        return EtcdTarget(spec, nodes_count, runtime, nodes_file)
    if runtime or nodes_file:
        raise Unsupported("--runtime and --nodes place the reference cluster; they do not apply to --target "
                          f"{spec if '://' not in spec else 'URL'}")
    if faults:
        raise Unsupported("--fault switches exist only in the reference cluster (--target reference)")
    if spec == "galera" or spec.startswith("galera+"):
        from sleuth.targets.galera import GaleraTarget

        return GaleraTarget(spec)
    if spec in ("mariadb", "mariadb+snapshot-isolation") or spec.startswith("mysql://"):
        from sleuth.targets.mariadb import MariaDBTarget, MySQLUrlTarget

        return MySQLUrlTarget(spec) if spec.startswith("mysql://") else MariaDBTarget(spec)
    from sleuth.targets.postgres import PostgresTarget, UrlTarget

    if spec == "postgres":
        return PostgresTarget()
    if spec.startswith(("postgres://", "postgresql://")):
        return UrlTarget(spec)
    raise Unsupported(f"--target {redact(spec)!r}: use reference, postgres, a postgres:// URL, mariadb, "
                      "mariadb+snapshot-isolation, galera, galera+relaxed-flush, a mysql:// URL, etcd, "
                      "etcd+serializable-reads, or a database described in a FILE.toml")
