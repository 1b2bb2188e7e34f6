"""What a run talks to: the reference cluster, a local PostgreSQL, or any pgwire URL.

A target starts (or finds) the system, hands clients a connection string,
and exposes the handles the nemeses need: nodes by role, kill/restart,
pause/resume, extra coordinators, clock offsets. A target refuses a fault it
cannot reach with `Unsupported` (printed as a one-line usage error).
"""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from typing import Any


class Unsupported(Exception):
    """This target cannot do what was asked (e.g. kill a remote database)."""


class Target:
    family = "general"
    name = ""
    grey_box = False  # does it report statement timestamps?
    isolations: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()

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
    def cut(self, a: str, b: str) -> None: raise Unsupported(f"{self.name}: cannot partition its nodes")
    def heal_cuts(self) -> None: ...
    def collect_logs(self, into: str) -> None: ...
    def wait_healthy(self, timeout: float = 30.0) -> None: ...


class ReferenceTarget(Target):
    family = "reference"
    name = "reference"
    grey_box = True
    isolations = ("strict-serializable", "serializable", "strong-session-serializable")
    roles = ("storage", "oracle", "coordinator")

    def __init__(self, runtime: str | None, faults: tuple[str, ...] = (), storage: int = 2,
                 coordinators: int = 1, nodes_file: str | None = None):
        super().__init__()
        from sleuth.cluster.control import Cluster, ClusterError, default_runtime, ssh_hosts

        self.runtime_name = runtime or default_runtime(nodes_file)
        self.nodes_file = nodes_file
        try:  # a bad nodes file is bad usage: say so before anything starts
            ssh_hosts(self.runtime_name, nodes_file)
        except ClusterError as e:
            raise Unsupported(str(e)) from None
        self.faults, self.n_storage, self.n_coord = tuple(faults), storage, coordinators
        self.cluster = Cluster(f"run-{uuid.uuid4().hex[:8]}")
        self.retired: set[str] = set()

    def up(self, progress=print) -> None:
        self.cluster.up(self.runtime_name, coordinators=self.n_coord, storage=self.n_storage,
                        faults=self.faults, progress=progress, nodes_file=self.nodes_file)

    def down(self) -> None:
        if self.cluster.exists:
            self.cluster.down()

    def dsns(self) -> list[tuple[str, str]]:
        return [(n.name, self.cluster.dsn(n) + " connect_timeout=3")
                for n in self.cluster.coordinators() if n.name not in self.retired]

    def session_sql(self, isolation: str) -> list[str]:
        return [f"SET transaction_isolation = '{isolation.replace('-', ' ')}'"]

    def linearizable_keys(self, isolation: str | None) -> bool:
        return isolation == "strict-serializable"  # which implies per-key linearizability

    def nodes(self, role: str) -> list[str]:
        return [n.name for n in self.cluster.nodes if n.role == role and n.name not in self.retired]

    def kill(self, node: str) -> None:
        self.cluster.runtime.kill(node)

    def restart(self, node: str) -> None:
        self.cluster.runtime.restart(node)
        self.cluster.wait_ready(self.cluster.node(node), timeout=60)

    def pause(self, node: str) -> None:
        self.cluster.runtime.pause(node)

    def resume(self, node: str) -> None:
        self.cluster.runtime.resume(node)

    def add_coordinator(self) -> str:
        n = self.cluster.add_coordinator()
        with self.lock:
            self.generation += 1
        return n.name

    def retire_coordinator(self, node: str) -> None:
        self.cluster.runtime.stop(node)
        with self.lock:
            self.retired.add(node)
            self.generation += 1

    def set_clock(self, node: str, offset_ms: int) -> None:
        from sleuth.cluster.rpc import call_sync
        n = self.cluster.node(node)
        call_sync(n.host, n.port, "set_clock_offset", ms=offset_ms, timeout=3)

    def cut(self, a: str, b: str) -> None:
        na, nb = self.cluster.node(a), self.cluster.node(b)
        self.cluster.runtime.cut(a, na.host, b, nb.host)

    def heal_cuts(self) -> None:
        self.cluster.runtime.heal_cuts()

    def collect_logs(self, into: str) -> None:
        for n in self.cluster.nodes:
            d = os.path.join(into, n.name)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "node.log"), "w") as f:
                f.write(self.cluster.runtime.logs(n.name))

    def wait_healthy(self, timeout: float = 30.0) -> None:
        for n in self.cluster.nodes:
            if n.name not in self.retired:
                self.cluster.wait_ready(n, timeout)


class PostgresTarget(Target):
    """A real PostgreSQL server sleuth starts from Debian's packages in a temp dir."""
    name = "postgres"
    isolations = ("read-committed", "repeatable-read", "serializable")
    roles = ("postgres",)

    def __init__(self) -> None:
        super().__init__()
        self.server: Any = None

    def linearizable_keys(self, isolation: str | None) -> bool:
        return True  # one server: each read and write takes effect at one instant inside its transaction

    def up(self, progress=print) -> None:
        from sleuth.cluster.postgres import PostgresServer
        self.server = PostgresServer()
        self.server.start()

    def down(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def dsns(self) -> list[tuple[str, str]]:
        return [("postgres", self.server.url + "?connect_timeout=3")]

    def session_sql(self, isolation: str) -> list[str]:
        return [f"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL {isolation.replace('-', ' ').upper()}"]

    def nodes(self, role: str) -> list[str]:
        return ["postgres"]

    def kill(self, node: str) -> None:
        self.server.kill()

    def restart(self, node: str) -> None:
        self.server.restart()

    def pause(self, node: str) -> None:
        self.server.pause()

    def resume(self, node: str) -> None:
        self.server.resume()

    def collect_logs(self, into: str) -> None:
        if self.server is not None and os.path.exists(self.server.log_path):
            os.makedirs(os.path.join(into, "postgres"), exist_ok=True)
            shutil.copy(self.server.log_path, os.path.join(into, "postgres", "postgres.log"))


class UrlTarget(Target):
    """Any PostgreSQL-wire database at a URL: sleuth cannot reach its nodes."""
    isolations = ("read-committed", "repeatable-read", "serializable")

    def __init__(self, url: str):
        super().__init__()
        self.url = url
        self.name = url.split("@")[-1]

    def dsns(self) -> list[tuple[str, str]]:
        return [(self.name, self.url)]

    def session_sql(self, isolation: str) -> list[str]:
        return [f"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL {isolation.replace('-', ' ').upper()}"]


def make_target(spec: str, runtime: str | None, faults: tuple[str, ...], nodes_file: str | None = None) -> Target:
    if spec == "reference":
        return ReferenceTarget(runtime, faults, nodes_file=nodes_file)
    if runtime or nodes_file:
        raise Unsupported("--runtime and --nodes place the reference cluster; they do not apply to --target "
                          f"{spec if '://' not in spec else 'URL'}")
    if faults:
        raise Unsupported("--fault switches exist only in the reference cluster (--target reference)")
    if spec == "postgres":
        return PostgresTarget()
    if spec.startswith(("postgres://", "postgresql://")):
        return UrlTarget(spec)
    raise Unsupported(f"--target {spec!r}: use reference, postgres, or a postgres:// URL")
