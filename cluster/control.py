"""Bringing a reference cluster up and down, and asking how it is (`sleuth cluster …`).

A cluster has a name and a state directory (`$SLEUTH_HOME/clusters/<name>`,
default `~/.sleuth`), holding `cluster.json`: the runtime, the fault
switches and every node (name, role, address, command line). Nodes:

- `oracle` (timestamp oracle and catalog), `storage1..N`, `coord1..M`, and with
  an upstream PostgreSQL `source1` (source.py), started before the coordinators.

Addresses: the local runtime gives each cluster its own 127.A.B.0/24 block,
the docker runtime its own 172.30.B.0/24 network, both derived from the
cluster name, so several clusters (parallel tests) never collide. Ports are
the same on every node: oracle 6000, storage 6100, pgwire 6875, coordinator
admin 6876, source 6200.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from dataclasses import asdict, dataclass

from sleuth.base.jsonfile import write_json
from sleuth.base.names import name_problem
from sleuth.cluster import RUNTIMES
from sleuth.cluster.errors import ClusterError, ClusterFailed
from sleuth.cluster.rpc import call_sync

ORACLE_PORT, STORAGE_PORT, PGWIRE_PORT, SOURCE_PORT = 6000, 6100, 6875, 6200  # a coordinator's admin port: pgwire + 1


__all__ = ["Cluster", "ClusterError", "ClusterFailed", "Node", "clusters", "default_runtime", "ssh_hosts"]


@dataclass
class Node:
    name: str
    role: str
    host: str
    port: int
    admin: int | None = None


def home() -> str:
    return os.environ.get("SLEUTH_HOME") or os.path.join(os.path.expanduser("~"), ".sleuth")


def state_dir(name: str) -> str:
    return os.path.join(home(), "clusters", name)


def block(name: str, runtime: str) -> str:
    """The first three octets of this cluster's addresses."""
    h = zlib.crc32(name.encode())
    if runtime == "docker":
        return f"172.30.{h % 250 + 1}"
    return f"127.{(h >> 8) % 250 + 1}.{h % 250 + 1}"


def make_runtime(runtime: str, name: str, image: str | None = None, hosts: list[dict] | None = None,
                 python: str | None = None):
    if runtime == "ssh":
        from sleuth.cluster.runtime_ssh import SshRuntime
        return SshRuntime(state_dir(name), name, hosts=hosts, project_root=_project_root())
    if runtime == "local":
        from sleuth.cluster.runtime_local import LocalRuntime
        return LocalRuntime(state_dir(name), python=python)
    if runtime == "docker":
        from sleuth.cluster.runtime_docker import DockerRuntime
        return DockerRuntime(cluster_name=f"sleuth-{name}", subnet=f"{block(name, 'docker')}.0/24",
                             project_root=_project_root(), image=image)
    raise ClusterError(f"--runtime: unknown runtime {runtime!r} ({', '.join(RUNTIMES)})")


def _project_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ssh_hosts(runtime: str, nodes_file: str | None) -> list[dict] | None:
    """The hosts of a nodes file for the ssh runtime; None for the others. A missing,
    unreadable or malformed file, or one given without ssh, is a ClusterError naming it."""
    if runtime != "ssh":
        if nodes_file:
            raise ClusterError("--nodes is only for --runtime ssh")
        return None
    from sleuth.cluster.runtime_ssh import hosts_as_dicts, parse_nodes_file
    if not nodes_file:
        raise ClusterError("--nodes FILE is required with --runtime ssh (one [user@]host[:port] per line)")
    try:
        return hosts_as_dicts(parse_nodes_file(nodes_file))
    except ValueError as e:
        raise ClusterError(str(e)) from None


def default_runtime(nodes_file: str | None = None) -> str:
    """ssh when a nodes file is given, else docker where an engine answers, else local."""
    if nodes_file:
        return "ssh"
    try:
        from sleuth.cluster.runtime_docker import DockerRuntime
        return "docker" if DockerRuntime.available() else "local"
    except Exception:
        return "local"


class Cluster:
    def __init__(self, name: str = "default"):
        problem = name_problem(name)  # one directory under home()/clusters, never a path out of it
        if problem is not None:
            raise ClusterError(f"cluster name {problem}")
        self.name = name
        self.dir = state_dir(name)
        self.file = os.path.join(self.dir, "cluster.json")
        self.meta: dict = {}
        if os.path.exists(self.file):
            with open(self.file) as f:
                self.meta = json.load(f)
        self._rt = None

    # -- facts ----------------------------------------------------------------

    @property
    def exists(self) -> bool:
        return bool(self.meta)

    @property
    def runtime(self):
        if self._rt is None:
            if not self.exists:
                raise ClusterError(f"no cluster named {self.name!r} (start one with `sleuth cluster up`)")
            self._rt = make_runtime(self.meta["runtime"], self.name, self.meta.get("image"),
                                    self.meta.get("ssh_hosts"), self.meta.get("python"))
        return self._rt

    @property
    def nodes(self) -> list[Node]:
        return [Node(**n) for n in self.meta.get("nodes", [])]

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise ClusterError(f"no node {name!r} in cluster {self.name!r}; nodes: "
                           f"{', '.join(n.name for n in self.nodes)}")

    def coordinators(self) -> list[Node]:
        return [n for n in self.nodes if n.role == "coordinator"]

    def dsn(self, node: Node | None = None) -> str:
        node = node or self.coordinators()[-1]
        return f"host={node.host} port={node.port} user=sleuth dbname=sleuth"

    def url(self, node: Node | None = None) -> str:
        node = node or self.coordinators()[-1]
        return f"postgresql://sleuth@{node.host}:{node.port}/sleuth"

    def _save(self) -> None:
        write_json(self.file, self.meta)

    # -- up / down ------------------------------------------------------------

    def up(self, runtime: str, coordinators: int = 1, storage: int = 2, faults: tuple = (),
           progress=print, timeout: float = 60.0, nodes_file: str | None = None,
           python: str | None = None, source: dict | None = None) -> None:
        """Start every node, each ready before the next starts. `python`: the interpreter
        the local runtime runs nodes with (default: this one), e.g. a node-only venv.
        `source`: {"upstream": URL, "tables": [...]} adds a source node ingesting them."""
        if self.exists:
            raise ClusterError(f"cluster {self.name!r} is already up ({self.meta['runtime']}); "
                               f"`sleuth cluster down` first")
        if storage < 1 or coordinators < 1:
            raise ClusterError("--storage and --coordinators must be at least 1")
        meta = {"name": self.name, "runtime": runtime, "faults": sorted(faults), "nodes": [],
                "started": time.time()}
        if source is not None:
            if not source.get("upstream") or not source.get("tables"):
                raise ClusterError("a source needs an upstream URL and at least one table")
            meta["source"] = {"upstream": source["upstream"], "tables": list(source["tables"])}
        if python is not None:
            if runtime != "local":
                raise ClusterError("a node interpreter can be chosen for the local runtime only")
            meta["python"] = python
        hosts = ssh_hosts(runtime, nodes_file)  # also refuses a nodes file without ssh
        if hosts is not None:
            meta["ssh_hosts"] = hosts
        self.meta = meta
        nodes = [self._place("oracle", 0)]
        for i in range(storage):
            nodes.append(self._place("storage", i))
        if source is not None:
            nodes.append(self._place("source", 0))
        for k in range(coordinators):
            nodes.append(self._place("coordinator", k))
        self._save()
        rt = self.runtime
        if runtime == "docker":
            from sleuth.cluster.image import ensure_image
            rt.image = self.meta["image"] = ensure_image(_project_root(), progress=progress)
            self._save()
        try:
            rt.up_network(progress)
            for n in nodes:  # in order: coordinators need the oracle and storage, and
                self.start_node(n)  # their epochs follow their start order
                self.wait_ready(n, timeout)
        except BaseException:
            self.meta["failed"] = True
            self._save()
            raise

    def _place(self, role: str, i: int) -> Node:
        """Name, address and ports of the i-th node of a role (0-based); recorded in cluster.json.

        local/docker: every node has its own address, so ports are the same on all.
        ssh: nodes go round-robin over the nodes file's hosts and may share one, so
        each node has its own ports."""
        k = len(self.meta["nodes"])
        if self.meta["runtime"] == "ssh":
            hosts = self.meta["ssh_hosts"]
            host = hosts[k % len(hosts)]["address"]
            port = {"oracle": ORACLE_PORT, "storage": STORAGE_PORT + i, "coordinator": PGWIRE_PORT + 2 * i,
                    "source": SOURCE_PORT + i}[role]
        else:
            prefix = block(self.name, self.meta["runtime"])
            last = {"oracle": 2, "storage": 10 + i, "coordinator": 20 + i, "source": 30 + i}[role]
            host = f"{prefix}.{last}"
            port = {"oracle": ORACLE_PORT, "storage": STORAGE_PORT, "coordinator": PGWIRE_PORT,
                    "source": SOURCE_PORT}[role]
        name = {"oracle": "oracle", "storage": f"storage{i + 1}", "coordinator": f"coord{i + 1}",
                "source": f"source{i + 1}"}[role]
        n = Node(name, role, host, port, port + 1 if role == "coordinator" else None)
        self.meta["nodes"].append(asdict(n))
        return n

    def argv(self, n: Node) -> list[str]:
        rt = self.runtime
        argv = [rt.python, "-m", "sleuth.cluster.node", n.role, "--name", n.name,
                "--listen", f"{n.host}:{n.port}"]
        if n.role in ("oracle", "storage"):
            argv += ["--data", rt.data_path(n.name)]
        elif n.role == "source":
            oracle, src = self.node("oracle"), self.meta["source"]
            argv += ["--oracle", f"{oracle.host}:{oracle.port}", "--upstream", src["upstream"],
                     "--tables", ",".join(src["tables"]),
                     "--storage", ",".join(f"{s.host}:{s.port}" for s in self.nodes if s.role == "storage")]
        else:
            oracle = self.node("oracle")
            argv += ["--admin", f"{n.host}:{n.admin}", "--oracle", f"{oracle.host}:{oracle.port}",
                     "--storage", ",".join(f"{s.host}:{s.port}" for s in self.nodes if s.role == "storage")]
        for f in self.meta.get("faults", []):
            argv += ["--fault", f]
        return argv

    def start_node(self, n: Node) -> None:
        self.runtime.start(n.name, self.argv(n), n.host)

    def add_coordinator(self, timeout: float = 30.0) -> Node:
        """Start one more coordinator: it takes over (fences every earlier one)."""
        n = self._place("coordinator", len(self.coordinators()))
        self._save()
        self.start_node(n)
        self.wait_ready(n, timeout)
        return n

    def wait_ready(self, n: Node, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                if n.role == "coordinator":
                    st = call_sync(n.host, n.admin, "status", timeout=2)
                    if st.get("epoch", 0) > 0 and self._sql_answers(n):
                        return
                else:
                    call_sync(n.host, n.port, "status", timeout=2)
                    return
            except Exception as e:
                last = e
            alive = getattr(self.runtime, "alive", None)
            if alive is not None and not alive(n.name):  # it exited: waiting will not help
                raise ClusterFailed(f"node {n.name} exited while starting ({last}); its log ends:\n"
                                    f"{self.runtime.logs(n.name)[-2000:]}")
            time.sleep(0.1)
        log = self.runtime.logs(n.name)[-2000:]
        raise ClusterFailed(f"node {n.name} did not answer within {timeout:.0f}s ({last}); "
                           f"its log ends:\n{log}")

    def _sql_answers(self, n: Node) -> bool:
        import psycopg
        with psycopg.connect(self.dsn(n), connect_timeout=3, autocommit=True) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)

    def down(self) -> None:
        if not self.exists:
            raise ClusterError(f"no cluster named {self.name!r}")
        try:
            self.runtime.remove_all()
        finally:
            import shutil
            shutil.rmtree(self.dir, ignore_errors=True)
            self.meta = {}

    # -- status ---------------------------------------------------------------

    def status(self) -> dict:
        states = {d["name"]: d["state"] for d in self.runtime.nodes()}
        out = []
        for n in self.nodes:
            entry = {"name": n.name, "role": n.role, "host": n.host, "port": n.port,
                     "state": states.get(n.name, "down")}
            if entry["state"] == "running":
                try:
                    st = call_sync(n.host, n.admin or n.port, "status", timeout=1.5)
                    entry["state"] = "up"
                    if n.role == "coordinator":
                        entry["epoch"] = st.get("epoch")
                    if st.get("error"):  # a source that met a change it cannot ingest
                        entry["state"], entry["error"] = "errored", st["error"]
                except Exception:
                    entry["state"] = "unresponsive"
            if n.role == "coordinator":
                entry.setdefault("epoch", None)
            out.append(entry)
        return {"runtime": self.meta["runtime"], "name": self.name, "faults": self.meta.get("faults", []),
                "nodes": out}


def clusters() -> list[dict]:
    """Every cluster recorded on this machine: name, runtime, nodes, state, faults.

    state: `up` (every node answers), `degraded` (some do), `down` (none does),
    `failed` (its `up` did not finish), `unknown` (its runtime cannot be asked,
    e.g. the Docker engine is gone)."""
    root = os.path.join(home(), "clusters")
    out = []
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        c = Cluster(name)
        if not c.exists:
            continue
        entry = {"name": name, "runtime": c.meta.get("runtime"), "nodes": len(c.nodes),
                 "state": "failed", "faults": c.meta.get("faults", [])}
        if not c.meta.get("failed"):
            try:
                states = [n["state"] for n in c.status()["nodes"]]
                up = states.count("up")
                entry["state"] = "up" if up == len(states) else ("down" if up == 0 else "degraded")
            except Exception:
                entry["state"] = "unknown"
        out.append(entry)
    return out
