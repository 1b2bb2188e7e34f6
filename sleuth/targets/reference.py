"""The bundled reference cluster as a target: nodes by role, kill, pause, partitions, clocks, a second leader.

With a workload that reads an upstream (`use_upstream`: the source workload) it also starts a
real PostgreSQL server (targets/postgres_server.py) on this machine: on the cluster's own
loopback block (local runtime), on the host's address on the cluster's network, its gateway
(docker), or on the address this machine reaches the first ssh host from (ssh), creates
the workload's upstream tables there, and brings the cluster up with a source node ingesting
them. Then `source` (the source node) and `upstream` (that PostgreSQL) are roles too, which the
kill and pause nemeses reach, and a partition can cut the source from its upstream.
"""

from __future__ import annotations

import os
import uuid

from sleuth.targets import Target, Unsupported

# The coordinator wrote nothing after these: serialization failure, fenced, its own refusal.
REFERENCE_WRITE_DEFINITE = frozenset({"40001", "25006", "58000"})


def _address_towards(host: str) -> str:
    """This machine's address on the route to `host` (no packet is sent)."""
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((host, 22))
        return s.getsockname()[0]


class ReferenceTarget(Target):
    family = "reference"
    name = "reference"
    grey_box = True
    isolations = ("strict-serializable", "serializable", "strong-session-serializable")
    roles = ("storage", "oracle", "coordinator")
    write_definite = REFERENCE_WRITE_DEFINITE

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
        self.upstream_workload = None
        self.upstream = None  # a PostgresServer, with use_upstream
        self.network = None  # the docker runtime whose network the upstream listens on

    def grudges(self) -> tuple[str, ...]:
        from sleuth.nemesis.faults import REFERENCE_GRUDGES

        return REFERENCE_GRUDGES

    def use_upstream(self, workload) -> None:
        self.upstream_workload = workload
        self.roles = ("source", "upstream", *type(self).roles)  # kill and pause reach these first

    def up(self, progress=print) -> None:
        source = None
        if self.upstream_workload is not None:
            import psycopg

            from sleuth.cluster.control import block
            from sleuth.targets.postgres_server import PostgresServer

            if self.runtime_name == "docker":  # on the network's gateway: the host, seen from the nodes
                from sleuth.cluster.control import make_runtime
                net = block(self.cluster.name, "docker")
                self.network = make_runtime("docker", self.cluster.name)
                self.network.up_network(progress)
                self.upstream = PostgresServer(host=f"{net}.1", trust=("samehost", f"{net}.0/24"))
            elif self.runtime_name == "ssh":  # where the hosts can reach this machine
                from sleuth.cluster.control import ssh_hosts
                hosts = [h["address"] for h in ssh_hosts("ssh", self.nodes_file)]
                self.upstream = PostgresServer(host=_address_towards(hosts[0]),
                                               trust=("samehost", *(f"{a}/32" for a in hosts)))
            else:
                self.upstream = PostgresServer(host=f"{block(self.cluster.name, 'local')}.40")
            progress(f"upstream PostgreSQL on {self.upstream.host}:{self.upstream.port} …")
            self.upstream.start()
            with psycopg.connect(self.upstream.url, autocommit=True) as conn:
                self.upstream_workload.upstream_setup(conn)
            self.upstream_workload.upstream_url = self.upstream.url
            source = {"upstream": self.upstream.url, "tables": list(self.upstream_workload.upstream_tables)}
        self.cluster.up(self.runtime_name, coordinators=self.n_coord, storage=self.n_storage,
                        faults=self.faults, progress=progress, nodes_file=self.nodes_file, source=source)

    def down(self) -> None:
        try:
            if self.cluster.exists:
                self.cluster.down()
        finally:
            if self.upstream is not None:
                self.upstream.stop()
                self.upstream = None
            if self.network is not None:  # made before the cluster: gone even if it never came up
                self.network.remove_all()
                self.network = None

    def dsns(self) -> list[tuple[str, str]]:
        return [(n.name, self.cluster.dsn(n) + " connect_timeout=3")
                for n in self.cluster.coordinators() if n.name not in self.retired]

    def session_sql(self, isolation: str) -> list[str]:
        return [f"SET transaction_isolation = '{isolation.replace('-', ' ')}'"]

    def linearizable_keys(self, isolation: str | None) -> bool:
        return isolation == "strict-serializable"  # which implies per-key linearizability

    def nodes(self, role: str) -> list[str]:
        if role == "upstream":
            return ["upstream"] if self.upstream is not None else []
        return [n.name for n in self.cluster.nodes if n.role == role and n.name not in self.retired]

    def kill(self, node: str) -> None:
        if node == "upstream":
            return self.upstream.kill()
        self.cluster.runtime.kill(node)

    def restart(self, node: str) -> None:
        if node == "upstream":
            return self.upstream.restart()
        self.cluster.runtime.restart(node)
        self.cluster.wait_ready(self.cluster.node(node), timeout=60)

    def pause(self, node: str) -> None:
        if node == "upstream":
            return self.upstream.pause()
        self.cluster.runtime.pause(node)

    def resume(self, node: str) -> None:
        if node == "upstream":
            return self.upstream.resume()
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

    def _host(self, node: str) -> str:
        return self.upstream.host if node == "upstream" else self.cluster.node(node).host

    def cut(self, a: str, b: str) -> None:
        if self.runtime_name == "ssh" and "upstream" in (a, b):  # the upstream shares this machine's
            node = b if a == "upstream" else a                  # address with sleuth's ssh sessions
            return self.cluster.runtime.cut_service(self._host(node), self.upstream.host, self.upstream.port)
        self.cluster.runtime.cut(a, self._host(a), b, self._host(b))

    def heal_cuts(self) -> None:
        self.cluster.runtime.heal_cuts()

    def collect_logs(self, into: str) -> None:
        """Each node's log, and each storage node's data (`<node>/data/`: sealed Parquet,
        `state.json`, `wal.jsonl`) for the post-run durability audit (sleuth.spark).

        Storage nodes are asked to seal first, so what they keep is in Parquet; a node
        that cannot seal (dead, partitioned) still leaves its wal, which the audit reads
        too. Data is copied from local and docker nodes; ssh nodes keep theirs remote."""
        if self.upstream is not None and os.path.exists(self.upstream.log_path):
            import shutil
            os.makedirs(os.path.join(into, "upstream"), exist_ok=True)
            shutil.copy(self.upstream.log_path, os.path.join(into, "upstream", "postgres.log"))
        for n in self.cluster.nodes:
            d = os.path.join(into, n.name)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "node.log"), "w") as f:
                f.write(self.cluster.runtime.logs(n.name))
        for n in self.cluster.nodes:
            if n.role == "storage" and n.name not in self.retired:
                try:
                    self._copy_data(n, os.path.join(into, n.name, "data"))
                except Exception as e:  # the logs matter more than one node's data
                    with open(os.path.join(into, n.name, "data-error.txt"), "w") as f:
                        f.write(f"{type(e).__name__}: {e}\n")

    def _copy_data(self, n, dest: str) -> None:
        import io
        import shutil
        import tarfile

        from sleuth.cluster.rpc import call_sync

        try:
            call_sync(n.host, n.port, "seal", timeout=30)
        except Exception:
            pass  # the wal holds what was not sealed
        rt = self.cluster.runtime
        if self.runtime_name == "local":
            shutil.copytree(rt.data_path(n.name), dest, dirs_exist_ok=True)
        elif self.runtime_name == "docker":
            stream, _ = rt._container(n.name).get_archive(rt.data_path(n.name))
            os.makedirs(dest, exist_ok=True)
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
                for m in tar.getmembers():  # the archive's root is the `data` folder itself
                    m.name = m.name.split("/", 1)[1] if "/" in m.name else ""
                    if m.name and (m.isfile() or m.isdir()):
                        tar.extract(m, dest, filter="data")

    def wait_healthy(self, timeout: float = 30.0) -> None:
        for n in self.cluster.nodes:
            if n.name not in self.retired:
                self.cluster.wait_ready(n, timeout)
