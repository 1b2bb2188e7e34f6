"""A cluster of real nodes on this machine, and a database described in a TOML file.

Two layers, usable apart:

`LocalCluster` is the generic machinery: N processes, each on its own
loopback address (127.x.y.z), each in its own directory (`data/` and
`node.log`), each in its own session (signals reach exactly its process
group), each in its own cgroup-v2 group. Per node: `start`, `stop` (SIGTERM,
then SIGKILL after a grace), `kill` (SIGKILL, as a crash), `restart`,
`pause` (SIGSTOP), `resume` (SIGCONT); `cut(a, b)` / `heal_cuts()` drop the
traffic between two nodes with iptables; `set_clock(node, ms)` moves a node's
clock when it runs under libfaketime; `collect_logs(into)`; `down()` leaves
nothing behind (processes, rules, cgroups, directories).

Why cgroups: a process that connects to 127.0.10.2 gets the source address
127.0.0.1 unless it binds one itself (etcd does not), so a rule on source
addresses cannot tell one node's traffic from another's. Each node's
processes are in the cgroup `sleuth-<pid>-<tag>/<node>` of the unified
hierarchy, and a cut of (a, b) drops, in iptables' OUTPUT chain, what a's
processes send to b's address and what b's send to a's (`-m cgroup --path`),
plus, for servers that do bind their address, INPUT rules between the two
addresses. Every rule carries the comment `sleuth-<pid>-<tag>`, so the ones
left by a run killed outright can be found (`stale_rules`); the next cluster
started sweeps what a sleuth that died outright left (`sweep_orphans`: its
processes killed, its rules and cgroups removed). Without a writable cgroup2
hierarchy only the address rules are made.

`LocalCluster(nodes, argv, env=..., clock=..., base=...)`:
  nodes  list of `Node(name, addr)`;
  argv   function Node -> the command line that starts it (run in its dir);
  init   optional function Node -> list of command lines run once, in order,
         before its first start;
  env    extra environment for every node;
  clock  "none" or "faketime" (the command runs under Debian's libfaketime with
         FAKETIME_TIMESTAMP_FILE, re-read on every call, so `set_clock` acts at
         once without a restart).

`Description` is a database described in a TOML file (docs/targets.md), and
`DescribedTarget` the `Target` that runs it; a dialect (`DIALECTS`) is how
clients speak to its nodes (etcd's v3 JSON gateway, `sleuth.targets.etcd`).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sleuth.cluster import procs
from sleuth.targets import Target, Unsupported

CGROUP_ROOT = "/sys/fs/cgroup/unified" if os.path.isdir("/sys/fs/cgroup/unified") else "/sys/fs/cgroup"
LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
CLOCKS = ("none", "faketime")
LEADER_WAIT = 4.0  # seconds: how long "the primary" is looked for while the nodes elect one


@dataclass
class Node:
    """One node: its name and loopback address; the rest is filled in by the cluster."""
    name: str
    addr: str
    index: int = 0  # 1-based
    dir: str = ""
    proc: subprocess.Popen | None = None

    @property
    def data(self) -> str:
        return os.path.join(self.dir, "data")

    @property
    def log(self) -> str:
        return os.path.join(self.dir, "node.log")


def _cgroups_usable() -> bool:
    return os.access(CGROUP_ROOT, os.W_OK) and os.path.exists(os.path.join(CGROUP_ROOT, "cgroup.procs"))


def _iptables(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["iptables", "-w", *args], capture_output=True, text=True)


def stale_rules(prefix: str = "sleuth-") -> list[str]:
    """iptables rules (as `iptables -S` prints them) whose comment starts with `prefix`:
    what a run killed outright would leave."""
    out = _iptables("-S").stdout.splitlines()
    return [r for r in out if f'--comment "{prefix}' in r or f"--comment {prefix}" in r]


def _cgroup_pids(path: str) -> list[int]:
    out = []
    for dp, _, files in os.walk(path):
        if "cgroup.procs" in files:
            try:
                with open(os.path.join(dp, "cgroup.procs")) as f:
                    out += [int(x) for x in f.read().split()]
            except OSError:
                pass
    return out


def sweep_orphans() -> list[str]:
    """Clean what clusters of a sleuth that died outright (SIGKILL) left: every process still in
    a `sleuth-<pid>-*` cgroup whose sleuth is gone is killed, its iptables rules deleted, its
    cgroups removed. Returns the cluster ids swept. Every `LocalCluster` calls it first."""
    swept = []
    if not os.path.isdir(CGROUP_ROOT):
        return swept
    for entry in os.listdir(CGROUP_ROOT):
        parts = entry.split("-", 2)
        if len(parts) < 3 or parts[0] != "sleuth" or not parts[1].isdigit():
            continue
        if procs.running(int(parts[1])):
            continue
        path = os.path.join(CGROUP_ROOT, entry)
        pids = _cgroup_pids(path)
        procs.signal_tree(pids, signal.SIGCONT)
        procs.signal_tree(pids, signal.SIGKILL)
        procs.wait_gone(pids)
        for rule in stale_rules(entry):
            chain_rule = rule.split()
            if chain_rule[:1] == ["-A"]:
                _iptables("-D", *[a.strip('"') for a in chain_rule[1:]])
        for dp, _, _ in sorted(os.walk(path), key=lambda t: -len(t[0])):
            try:
                os.rmdir(dp)
            except OSError:
                pass
        swept.append(entry)
    return swept


class LocalCluster:
    def __init__(self, nodes: list[Node], argv: Callable[[Node], list[str]], *,
                 init: Callable[[Node], list[list[str]]] | None = None, env: dict[str, str] | None = None,
                 clock: str = "none", base: str | None = None, tag: str = "cluster"):
        if clock not in CLOCKS:
            raise Unsupported(f"clock {clock!r}: one of {', '.join(CLOCKS)}")
        self.nodes = {n.name: n for n in nodes}
        for i, n in enumerate(nodes, 1):
            n.index = n.index or i
        self.argv, self.init, self.env, self.clock = argv, init, dict(env or {}), clock
        sweep_orphans()
        self.base = base or tempfile.mkdtemp(prefix=f"sleuth-{tag}-")
        self.id = f"sleuth-{os.getpid()}-{tag}"
        self.cgroup = os.path.join(CGROUP_ROOT, self.id) if _cgroups_usable() else None
        self.rules: list[tuple[str, list[str]]] = []  # (chain, rule) this cluster added
        for n in nodes:
            n.dir = n.dir or os.path.join(self.base, n.name)

    # --- processes ---------------------------------------------------------------------
    def start_all(self) -> None:
        for n in self.nodes.values():
            self.start(n.name)

    def start(self, name: str) -> None:
        n = self.nodes[name]
        first = not os.path.isdir(n.data)
        os.makedirs(n.data, exist_ok=True)
        if self.cgroup:
            os.makedirs(os.path.join(self.cgroup, name), exist_ok=True)
        if first and self.init:
            for argv in self.init(n):
                with open(n.log, "ab") as log:
                    p = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, cwd=n.dir, env=self._env(n))
                if p.returncode != 0:
                    raise RuntimeError(f"{name}: {' '.join(argv)} exited {p.returncode} (log {n.log})")
        procs_file = os.path.join(self.cgroup, name, "cgroup.procs") if self.cgroup else None

        def enter() -> None:  # in the child, before exec: its own cgroup, so cuts reach it alone
            if procs_file:
                with open(procs_file, "w") as f:
                    f.write(str(os.getpid()))

        with open(n.log, "ab") as log:
            n.proc = subprocess.Popen(self.argv(n), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      start_new_session=True, cwd=n.dir, env=self._env(n), preexec_fn=enter)

    def _env(self, n: Node) -> dict[str, str]:
        return {**os.environ, **self.env, **self._clock_env(n)}

    def _clock_env(self, n: Node) -> dict[str, str]:
        """The variables that put a node under libfaketime, reading its offset from `<dir>/faketime`."""
        if self.clock != "faketime":
            return {}
        stamp = os.path.join(n.dir, "faketime")
        if not os.path.exists(stamp):
            os.makedirs(n.dir, exist_ok=True)
            with open(stamp, "w") as f:
                f.write("+0\n")
        return dict(LD_PRELOAD=LIBFAKETIME, FAKETIME_TIMESTAMP_FILE=stamp, FAKETIME_NO_CACHE="1",
                    FAKETIME_DONT_RESET="1")

    def pids(self, name: str) -> list[int]:
        n = self.nodes[name]
        if n.proc is None or n.proc.poll() is not None:
            return []
        return procs.descendants(n.proc.pid)

    def alive(self, name: str) -> bool:
        n = self.nodes[name]
        return n.proc is not None and n.proc.poll() is None

    def _signal(self, name: str, sig: int) -> list[int]:
        return procs.signal_tree(self.pids(name), sig)

    def kill(self, name: str) -> None:
        """SIGKILL to the node's whole process tree (a crash); returns once it is gone."""
        pids = self._signal(name, signal.SIGKILL)
        n = self.nodes[name]
        if n.proc is not None:
            try:
                n.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        procs.wait_gone(pids)

    def stop(self, name: str, grace: float = 10.0) -> None:
        """SIGCONT then SIGTERM; SIGKILL if still running after `grace` seconds."""
        n = self.nodes[name]
        if not self.alive(name):
            return
        self._signal(name, signal.SIGCONT)
        self._signal(name, signal.SIGTERM)
        try:
            n.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self.kill(name)

    def restart(self, name: str) -> None:
        if self.alive(name):
            self.kill(name)
        self.start(name)

    def pause(self, name: str) -> None:
        self._signal(name, signal.SIGSTOP)

    def resume(self, name: str) -> None:
        self._signal(name, signal.SIGCONT)

    # --- clock ---------------------------------------------------------------------------
    def set_clock(self, name: str, offset_ms: int) -> None:
        if self.clock != "faketime":
            raise Unsupported(f"{name}: its clock cannot be moved (clock = \"none\")")
        stamp = os.path.join(self.nodes[name].dir, "faketime")
        tmp = stamp + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{offset_ms / 1000:+.3f}\n")
        os.replace(tmp, stamp)

    # --- network -------------------------------------------------------------------------
    def _add(self, chain: str, rule: list[str]) -> None:
        full = [*rule, "-m", "comment", "--comment", self.id, "-j", "DROP"]
        p = _iptables("-I", chain, *full)
        if p.returncode != 0:
            raise RuntimeError(f"iptables -I {chain} {' '.join(full)}: {p.stderr.strip()}")
        self.rules.append((chain, full))

    def cut(self, a: str, b: str) -> None:
        """Drop all traffic between nodes a and b, both ways."""
        na, nb = self.nodes[a], self.nodes[b]
        for x, y in ((na, nb), (nb, na)):
            if self.cgroup:
                self._add("OUTPUT", ["-m", "cgroup", "--path", f"{self.id}/{x.name}", "-d", y.addr])
            self._add("INPUT", ["-s", x.addr, "-d", y.addr])

    def heal_cuts(self) -> None:
        for chain, rule in reversed(self.rules):
            _iptables("-D", chain, *rule)
        self.rules = []

    # --- the end -------------------------------------------------------------------------
    def collect_logs(self, into: str, extra: Callable[[Node], list[str]] | None = None) -> None:
        """Each node's log (and any `extra` files of it) into `into/<node>/`."""
        for n in self.nodes.values():
            d = os.path.join(into, n.name)
            os.makedirs(d, exist_ok=True)
            for path in [n.log, *(extra(n) if extra else [])]:
                if os.path.isfile(path):
                    shutil.copy(path, os.path.join(d, os.path.basename(path)))

    def down(self) -> None:
        """Heal, stop every node (SIGKILL after the grace), remove cgroups and directories."""
        self.heal_cuts()
        for name in self.nodes:
            try:
                self.stop(name, grace=5.0)
            except Exception:
                self.kill(name)
        if self.cgroup and os.path.isdir(self.cgroup):
            for name in self.nodes:
                try:
                    os.rmdir(os.path.join(self.cgroup, name))
                except OSError:
                    pass
            try:
                os.rmdir(self.cgroup)
            except OSError:
                pass
        shutil.rmtree(self.base, ignore_errors=True)


class DockerCluster(LocalCluster):
    """The same nodes as containers (`--runtime docker`): one container per node on a private
    bridge network of its own (172.31.k.0/24, the first free k from 64), node i at .(10 + i).

    The image is made here, not pulled. For a plain description: the start command's binary
    and the shared libraries `ldd` names, nothing else (enough for a Go or plain C server such
    as etcd; made in a second). A description with `init` commands, a faketime clock or
    `packages` needs a shell, its tools and libfaketime: its image is the reference cluster's
    Debian base (`cluster/image.py`'s `ensure_base`, debootstrap from the machine's mirror)
    with `procps`, `faketime` (with that clock) and the description's `packages` added by apt
    from the same mirror (`ensure_layer`), cached by their hash (seconds to a minute the
    first time, once the base exists). Init commands run once per node, each in a
    container of its own from that image, on the node's directory, before its first start;
    with the faketime clock every container gets libfaketime's variables, and `set_clock`
    writes the offset file in the node's directory, which the container sees at once. Each
    node's directory is bind-mounted at the same path, so `{data}` and `{dir}` mean the same
    inside and out and the data survives kills.
    kill is `docker kill` (SIGKILL), restart `docker start` of the same container, pause and
    resume `docker pause`/`unpause` (the freezer), stop `docker stop`. A cut drops, in the
    host's DOCKER-USER chain, the bridged traffic between two containers' addresses. Containers
    and the network carry the label `sleuth.owner=<pid>`; those of a sleuth that died outright
    are removed when the next docker cluster starts."""

    def __init__(self, nodes: list[Node], argv: Callable[[Node], list[str]], *,
                 init: Callable[[Node], list[list[str]]] | None = None, env: dict[str, str] | None = None,
                 clock: str = "none", base: str | None = None, tag: str = "cluster",
                 packages: tuple[str, ...] = (), progress: Callable[[str], None] = lambda m: None):
        import docker

        self.progress = progress
        self.client = docker.from_env()
        self.owner = str(os.getpid())
        self._sweep()
        super().__init__(nodes, argv, init=init, env=env, clock=clock, base=base, tag=tag)
        # a Debian image (a shell, the tools, libfaketime) where the binary alone will not do
        self.packages = (("procps", *(["faketime"] if clock == "faketime" else []), *packages)
                         if init is not None or clock != "none" or packages else ())
        self.cgroup = None  # the containers are cut by address
        self.network = self._network()
        prefix = self.subnet.rsplit(".", 1)[0]
        for n in nodes:
            n.addr = f"{prefix}.{10 + n.index}"
        self.image = ""

    def _sweep(self) -> None:
        from docker.errors import APIError, NotFound

        for c in self.client.containers.list(all=True, filters={"label": "sleuth.owner"}):
            if not procs.running(int(c.labels.get("sleuth.owner", "0") or 0)):
                try:
                    c.remove(force=True)
                except (APIError, NotFound):
                    pass
        for net in self.client.networks.list(filters={"label": "sleuth.owner"}):
            if not procs.running(int(net.attrs.get("Labels", {}).get("sleuth.owner", "0") or 0)):
                try:
                    net.remove()
                except (APIError, NotFound):
                    pass
        for rule in stale_rules("sleuth-"):
            owner = rule.split("--comment ", 1)[1].split("-")[1] if "--comment " in rule else ""
            if owner.isdigit() and not procs.running(int(owner)) and rule.startswith("-A DOCKER-USER "):
                _iptables("-D", *[a.strip('"') for a in rule.split()[1:]])

    def _network(self) -> Any:
        from docker.errors import APIError
        from docker.types import IPAMConfig, IPAMPool

        for k in range(64, 128):
            subnet = f"172.31.{k}.0/24"
            try:
                net = self.client.networks.create(
                    f"{self.id}-net", driver="bridge", labels={"sleuth.owner": self.owner},
                    ipam=IPAMConfig(pool_configs=[IPAMPool(subnet=subnet, gateway=f"172.31.{k}.1")]))
            except APIError as e:
                if "overlap" in str(e).lower() or "already exists" in str(e).lower():
                    continue
                raise
            self.subnet = subnet
            return net
        raise RuntimeError("--runtime docker: no free 172.31.k.0/24 network for the nodes")

    def _make_image(self, binary: str) -> str:
        import hashlib
        import io
        import tarfile

        from docker.errors import ImageNotFound

        path = shutil.which(binary)
        if path is None:
            raise Unsupported(f"--runtime docker: {binary} is not installed on this machine")
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()[:12]
        name = f"sleuth-{os.path.basename(path)}:{digest}"
        try:
            self.client.images.get(name)
            return name
        except ImageNotFound:
            pass
        out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
        files = [path] + [w for line in out.splitlines() for w in line.split() if w.startswith("/")]
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for fpath in files:
                tar.add(os.path.realpath(fpath), arcname=fpath.lstrip("/"))
            tmp = tarfile.TarInfo("tmp")
            tmp.type, tmp.mode = tarfile.DIRTYPE, 0o1777
            tar.addfile(tmp)
        self.client.api.import_image_from_data(buf.getvalue(), repository=name.split(":")[0], tag=digest)
        return name

    def _container(self, name: str) -> Any:
        from docker.errors import NotFound

        try:
            return self.client.containers.get(f"{self.id}-{name}")
        except NotFound:
            return None

    def start(self, name: str) -> None:
        n = self.nodes[name]
        os.makedirs(n.data, exist_ok=True)
        c = self._container(name)
        if c is not None:
            c.start()
            return
        argv = self.argv(n)
        if not self.packages:
            argv[0] = shutil.which(argv[0]) or argv[0]
        if not self.image:
            self.image = self._debian_image() if self.packages else self._make_image(argv[0])
        api = self.client.api
        env = {**self.env, **self._clock_env(n)}
        host = api.create_host_config(binds={n.dir: {"bind": n.dir, "mode": "rw"}})
        for i, step in enumerate(self.init(n) if self.init else []):
            self._init_step(n, i, step, env)
        net = api.create_networking_config({self.network.name: api.create_endpoint_config(ipv4_address=n.addr)})
        cid = api.create_container(self.image, command=argv, name=f"{self.id}-{name}", hostname=name,
                                   environment=env, host_config=host, networking_config=net,
                                   labels={"sleuth.owner": self.owner}, working_dir=n.dir)
        api.start(cid)

    def _debian_image(self) -> str:
        from sleuth.cluster.image import ImageError, ensure_layer

        try:
            return ensure_layer(list(self.packages), "sleuth-described", progress=self.progress)
        except ImageError as e:
            raise RuntimeError(f"--runtime docker: the image of {', '.join(self.packages)}: {e}") from None

    def _init_step(self, n: Node, i: int, argv: list[str], env: dict[str, str]) -> None:
        """One init command, in a container of its own on the node's directory; its output to node.log."""
        api = self.client.api
        cid = api.create_container(self.image, command=argv, name=f"{self.id}-{n.name}-init{i}", hostname=n.name,
                                   environment=env, working_dir=n.dir, labels={"sleuth.owner": self.owner},
                                   host_config=api.create_host_config(binds={n.dir: {"bind": n.dir, "mode": "rw"}}))
        try:
            api.start(cid)
            code = api.wait(cid, timeout=300)["StatusCode"]
            with open(n.log, "ab") as log:
                log.write(api.logs(cid))
        finally:
            api.remove_container(cid, force=True)
        if code != 0:
            raise RuntimeError(f"{n.name}: {' '.join(argv)} exited {code} in its container (log {n.log})")

    def pids(self, name: str) -> list[int]:
        return []

    def alive(self, name: str) -> bool:
        c = self._container(name)
        return c is not None and c.status in ("running", "paused")

    def kill(self, name: str) -> None:
        c = self._container(name)
        if c is None or c.status not in ("running", "paused"):
            return
        if c.status == "paused":
            c.unpause()
        c.kill()
        c.wait(timeout=10)

    def stop(self, name: str, grace: float = 10.0) -> None:
        c = self._container(name)
        if c is not None and c.status in ("running", "paused"):
            if c.status == "paused":
                c.unpause()
            c.stop(timeout=int(grace))

    def pause(self, name: str) -> None:
        c = self._container(name)
        if c is not None and c.status == "running":
            c.pause()

    def resume(self, name: str) -> None:
        c = self._container(name)
        if c is not None and c.status == "paused":
            c.unpause()

    def cut(self, a: str, b: str) -> None:
        na, nb = self.nodes[a], self.nodes[b]
        for x, y in ((na, nb), (nb, na)):
            self._add("DOCKER-USER", ["-s", x.addr, "-d", y.addr])

    def collect_logs(self, into: str, extra: Callable[[Node], list[str]] | None = None) -> None:
        for n in self.nodes.values():
            c = self._container(n.name)
            if c is not None:
                with open(n.log, "wb") as f:
                    f.write(c.logs())
        super().collect_logs(into, extra)

    def down(self) -> None:
        self.heal_cuts()
        for name in self.nodes:
            c = self._container(name)
            if c is not None:
                try:
                    c.remove(force=True)
                except Exception:  # noqa: BLE001 - gone already
                    pass
        try:
            self.network.remove()
        except Exception:  # noqa: BLE001
            pass
        shutil.rmtree(self.base, ignore_errors=True)


# --- a database described in a file ---------------------------------------------------------

@dataclass(frozen=True)
class LeaderQuery:
    """How a description says which node leads (`[leader]`, docs/targets.md): asked of each
    node in turn, the first whose answer says "I lead" is the leader. One of:

    - `http` (a URL template; POSTs `body` as JSON, or GETs without one): the node leads when
      the answer's JSON field `leader` equals its field `self` (dotted paths), as etcd's
      `/v3/maintenance/status` answers `leader` and `header.member_id`;
    - `sql`: the first column of the first row is true on the node that leads;
    - `command` (an argv template, run where the node runs): exit status 0 on the node that leads.

    A node that does not answer is passed over (a partition or a kill may hold it)."""
    http: str = ""
    body: str = ""
    self_field: str = ""
    leader_field: str = ""
    sql: str = ""
    command: tuple[str, ...] = ()

    def templates(self) -> tuple[str, ...]:
        return (self.http, *self.command)


def json_path(doc: Any, path: str) -> Any:
    """`a.b.c` of a JSON document, None where a step is missing."""
    for step in path.split("."):
        doc = doc.get(step) if isinstance(doc, dict) else None
    return doc


@dataclass(frozen=True)
class Description:
    """A database as a TOML file says it is (docs/targets.md)."""
    name: str
    dialect: str
    nodes: int
    address: str  # template with {i}
    start: tuple[str, ...]  # argv template
    client: str  # template: a node's client address
    init: tuple[tuple[str, ...], ...] = ()
    peer: str = "{name}={addr}"
    env: dict = field(default_factory=dict)
    clock: str = "none"
    clock_note: str = ""
    leader: bool = False  # which node leads can be asked: of the dialect (`leader = true`) or by `leader_query`
    logs: tuple[str, ...] = ()
    ready_timeout: float = 30.0
    path: str = ""
    leader_query: LeaderQuery | None = None
    upload: tuple[str, ...] = ()  # files of this machine copied to each ssh host (--runtime ssh)
    packages: tuple[str, ...] = ()  # Debian packages of the node image (--runtime docker with init or faketime)

    def node_names(self) -> list[str]:
        return [f"n{i}" for i in range(1, self.nodes + 1)]


def _fail(path: str, msg: str) -> Unsupported:
    return Unsupported(f"{path}: {msg}")


def load(path: str) -> Description:
    """Read and check a description; a bad file is `Unsupported` naming the file and key."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        raise Unsupported(f"--target {path}: no such file") from None
    except tomllib.TOMLDecodeError as e:
        raise _fail(path, f"not TOML: {e}") from None
    except OSError as e:
        raise _fail(path, str(e)) from None
    known = {"name", "dialect", "nodes", "address", "clock", "clock_note", "leader", "ready_timeout", "env",
             "commands", "client", "logs", "upload", "packages"}
    for k in doc:
        if k not in known:
            raise _fail(path, f"unknown key {k!r} (known: {', '.join(sorted(known))})")

    def need(table: dict, key: str, typ: type | tuple, where: str = "") -> Any:
        if key not in table:
            raise _fail(path, f"missing {where}{key}")
        v = table[key]
        if not isinstance(v, typ) or isinstance(v, bool) and typ is int:
            raise _fail(path, f"{where}{key} = {v!r}: expected {getattr(typ, '__name__', typ)}")
        return v

    cmds = need(doc, "commands", dict)
    start = need(cmds, "start", list, "commands.")
    init = cmds.get("init", [])
    if not start or not all(isinstance(a, str) for a in start):
        raise _fail(path, "commands.start must be a non-empty list of strings (argv)")
    if not isinstance(init, list) or not all(isinstance(c, list) and c and all(isinstance(a, str) for a in c)
                                             for c in init):
        raise _fail(path, "commands.init must be a list of argv lists")
    for k in cmds:
        if k not in ("start", "init", "peer"):
            raise _fail(path, f"unknown key commands.{k!r} (start, init, peer)")
    dialect = need(doc, "dialect", str)
    if dialect not in DIALECTS:
        raise _fail(path, f"dialect = {dialect!r}: one of {', '.join(DIALECTS)}")
    clock = doc.get("clock", "none")
    if clock not in CLOCKS:
        raise _fail(path, f"clock = {clock!r}: one of {', '.join(CLOCKS)}")
    nodes = doc.get("nodes", 3)
    if not isinstance(nodes, int) or isinstance(nodes, bool) or not 1 <= nodes <= 9:
        raise _fail(path, f"nodes = {nodes!r}: a count from 1 to 9")
    address = need(doc, "address", str)
    if "{i}" not in address or not address.format(i=1).startswith("127."):
        raise _fail(path, f"address = {address!r}: a loopback address template with {{i}}, e.g. 127.0.10.{{i}}")
    env = doc.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise _fail(path, "env must be a table of strings")
    logs = doc.get("logs", [])
    if not isinstance(logs, list) or not all(isinstance(x, str) for x in logs):
        raise _fail(path, "logs must be a list of path templates")
    for key in ("upload", "packages"):
        v = doc.get(key, [])
        if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
            raise _fail(path, f"{key} must be a list of strings")
    upload = tuple(os.path.join(os.path.dirname(os.path.abspath(path)), os.path.expanduser(u))
                   for u in doc.get("upload", []))
    leader, query = _leader(path, doc.get("leader", False), dialect)
    d = Description(
        name=doc.get("name", os.path.splitext(os.path.basename(path))[0]), dialect=dialect, nodes=nodes,
        address=address, start=tuple(start), client=need(doc, "client", str), init=tuple(tuple(c) for c in init),
        peer=cmds.get("peer", "{name}={addr}"), env=dict(env), clock=clock, clock_note=doc.get("clock_note", ""),
        leader=leader, logs=tuple(logs), ready_timeout=float(doc.get("ready_timeout", 30.0)), path=path,
        leader_query=query, upload=upload, packages=tuple(doc.get("packages", [])))
    try:  # every placeholder known: fail now, not when the first node starts
        n = Node("n1", d.address.format(i=1), 1, "/d")
        for t in (*d.start, d.client, *(a for c in d.init for a in c), *d.logs,
                  *(query.templates() if query else ())):
            _fill(t, n, d, "p", "t")
    except (KeyError, IndexError, ValueError) as e:
        raise _fail(path, f"unknown placeholder {e} (known: name, i, addr, dir, data, peers, token)") from None
    return d


def _leader(path: str, value: Any, dialect: str) -> tuple[bool, LeaderQuery | None]:
    """`leader = true` (the dialect knows), `leader = false`, or a `[leader]` query table."""
    if isinstance(value, bool):
        if value and not getattr(dialect_class(dialect), "knows_leader", False):
            raise _fail(path, f"leader = true: the {dialect} dialect cannot say which node leads; describe how to "
                        "ask with a [leader] table (http, sql or command; docs/targets.md)")
        return value, None
    if not isinstance(value, dict):
        raise _fail(path, f"leader = {value!r}: true, false or a [leader] table")
    ways = [k for k in ("http", "sql", "command") if k in value]
    if len(ways) != 1:
        raise _fail(path, "[leader] needs exactly one of http, sql, command")
    allowed = {"http": {"http", "body", "self", "leader"}, "sql": {"sql"}, "command": {"command"}}[ways[0]]
    for k in value:
        if k not in allowed:
            raise _fail(path, f"unknown key leader.{k} (with {ways[0]}: {', '.join(sorted(allowed))})")
    if ways[0] == "command":
        cmd = value["command"]
        if not isinstance(cmd, list) or not cmd or not all(isinstance(a, str) for a in cmd):
            raise _fail(path, "leader.command must be a non-empty list of strings (argv)")
        return True, LeaderQuery(command=tuple(cmd))
    if not all(isinstance(v, str) and (v or k == "body") for k, v in value.items()):
        raise _fail(path, f"[leader] values must be strings: {value!r}")
    if ways[0] == "sql":
        if dialect not in ("mysql", "postgres"):
            raise _fail(path, f"leader.sql: the {dialect} dialect does not speak SQL")
        return True, LeaderQuery(sql=value["sql"])
    if "self" not in value or "leader" not in value:
        raise _fail(path, "leader.http needs self and leader: the answer's fields naming the node and its leader")
    return True, LeaderQuery(http=value["http"], body=value.get("body", ""), self_field=value["self"],
                             leader_field=value["leader"])


def _fill(template: str, n: Node, d: Description, peers: str, token: str) -> str:
    return template.format(name=n.name, i=n.index, addr=n.addr, dir=n.dir, data=os.path.join(n.dir, "data"),
                           peers=peers, token=token)


class DescribedTarget(Target):
    """A `Description` run on this machine: its nodes a `LocalCluster`, its clients its dialect's.

    Each node is a role of its own, so `kill` and `pause` rotate over the nodes one at a time;
    `kill-all` is every node at once; partitions cut nodes' links by address."""

    grey_box = False

    def __init__(self, desc: Description, options: frozenset[str] = frozenset(), runtime: str | None = None,
                 nodes_file: str | None = None):
        super().__init__()
        self.desc = desc
        self.runtime_name = runtime or ("ssh" if nodes_file else "local")
        self.hosts: list = []
        if self.runtime_name == "ssh":
            from sleuth.targets.described_ssh import read_hosts

            if not nodes_file:
                raise Unsupported(f"--runtime ssh: name the hosts of {desc.name}'s nodes with --nodes FILE")
            if desc.clock != "none":
                raise Unsupported(f'--runtime ssh: {desc.path or desc.name} has clock = "faketime", which runs on '
                                  "the local runtime only (libfaketime is not placed on ssh hosts)")
            self.hosts = read_hosts(nodes_file, desc.nodes, desc.path or desc.name)
        elif nodes_file:
            raise Unsupported("--nodes names ssh hosts: it goes with --runtime ssh")
        self.dialect = dialect_class(desc.dialect)(self, options)
        self.name = desc.name
        self.family = getattr(self.dialect, "family", desc.dialect)
        self.roles = tuple(desc.node_names())
        self.cluster: LocalCluster | None = None
        self.isolations = getattr(self.dialect, "isolations", ())
        self.models = getattr(self.dialect, "models", {})

    # --- what the nemesis may do -----------------------------------------------------------
    @property
    def abilities(self) -> frozenset[str]:
        return frozenset({"nodes", "partition",
                          *(["clock"] if self.desc.clock == "faketime" and self.runtime_name != "ssh" else []),
                          *(["primary"] if self.desc.leader else [])})

    def refusal(self, kind: str, need: str) -> str:
        if need == "clock":
            where = self.desc.path or f"--target {self.name}"
            note = f" ({self.desc.clock_note})" if self.desc.clock_note else ""
            return (f"--nemesis {kind}: {where} says clock = \"none\"{note}; sleuth cannot give its nodes "
                    "a false clock")
        return f"--nemesis {kind}: {self.name} has no {need} (a cluster of peers: no second coordinator)"

    def grudges(self) -> tuple[str, ...]:
        from sleuth.nemesis.faults import NODE_GRUDGES, PRIMARY_GRUDGE

        return (*NODE_GRUDGES, *([PRIMARY_GRUDGE] if self.desc.leader else []))

    def clock_nodes(self) -> list[str]:
        return list(self.roles)

    # --- lifecycle ---------------------------------------------------------------------------
    def up(self, progress=print) -> None:
        d = self.desc
        nodes = [Node(name, d.address.format(i=i), i) for i, name in enumerate(d.node_names(), 1)]
        token = f"sleuth-{os.getpid()}-{int(time.time())}"
        argv = lambda n: self._argv(n, d.start, nodes, token)  # noqa: E731
        init = (lambda n: [self._argv(n, c, nodes, token) for c in d.init]) if d.init else None
        tag = d.name.replace("/", "-")
        if self.runtime_name == "ssh":
            from sleuth.targets.described_ssh import SshCluster

            self.cluster = SshCluster(nodes, argv, hosts=self.hosts, init=init, env=d.env, clock=d.clock,
                                      upload=d.upload, tag=tag)
            progress(f"preparing {len(self.hosts)} ssh hosts for {d.name} …")
            self.cluster.prepare(progress)
        elif self.runtime_name == "docker":
            self.cluster = DockerCluster(nodes, argv=argv, init=init, env=d.env, clock=d.clock, tag=tag,
                                         packages=d.packages, progress=progress)
        else:
            self.cluster = LocalCluster(nodes, argv=argv, init=init, env=d.env, clock=d.clock, tag=tag)
        for n in nodes if self.runtime_name == "local" else ():  # a server already there would answer instead
            host, port = self._client_endpoint(n.name)
            with socket.socket() as sock:
                sock.settimeout(0.5)
                if sock.connect_ex((host, port)) == 0:
                    raise RuntimeError(f"--target {d.path or d.name}: {host}:{port} is in use already (another "
                                      f"{d.name}, or another sleuth's); sleuth starts its own nodes there")
        progress(f"starting {len(nodes)} {d.name} nodes on {nodes[0].addr}…{nodes[-1].addr} ({self.runtime_name})")
        self.cluster.start_all()
        self.wait_healthy(d.ready_timeout)

    def _client_endpoint(self, node: str) -> tuple[str, int]:
        from urllib.parse import urlsplit

        url = self.client_of(node)
        u = urlsplit(url if "://" in url else f"tcp://{url}")
        return u.hostname or self.addr(node), u.port or 0

    def _argv(self, n: Node, template: tuple[str, ...], nodes: list[Node], token: str) -> list[str]:
        peers = ",".join(_fill(self.desc.peer, m, self.desc, "", token) for m in nodes)
        return [_fill(a, n, self.desc, peers, token) for a in template]

    def down(self) -> None:
        if self.cluster is not None:
            self.cluster.down()
            self.cluster = None

    def wait_healthy(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for name in self.roles:
                if not self.cluster.alive(name):
                    raise RuntimeError(f"{self.name} node {name} exited (log {self.cluster.nodes[name].log})")
            try:
                if self.dialect.healthy():
                    return
            except Exception as e:  # noqa: BLE001 - not up yet
                last = str(e)
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} did not become healthy within {timeout:g} s {last}".rstrip())

    def addr(self, node: str) -> str:
        i = self.roles.index(node)
        return self.hosts[i].address if self.hosts else self.desc.address.format(i=i + 1)

    def dsns(self) -> list[tuple[str, str]]:
        return [(n, self.client_of(n)) for n in self.roles]

    def client_of(self, node: str) -> str:
        n = self.cluster.nodes[node] if self.cluster else Node(node, self.addr(node), self.roles.index(node) + 1)
        return _fill(self.desc.client, n, self.desc, "", "")

    # --- the driver seam: the dialect's ------------------------------------------------------
    def connect(self, dsn: str, timeout: float) -> Any:
        return self.dialect.connect(dsn, timeout)

    def socket_of(self, conn: Any) -> int:
        return self.dialect.socket_of(conn)

    def classify(self, exc: BaseException, writes: bool) -> tuple[str, str, bool] | None:
        return self.dialect.classify(exc, writes)

    def workload(self, name: str, keys: int) -> Any:
        return self.dialect.workload(name, keys)

    def session_sql(self, isolation: str) -> list[str]:
        return self.dialect.session_sql(isolation) if hasattr(self.dialect, "session_sql") else []

    # --- faults --------------------------------------------------------------------------------
    def nodes(self, role: str) -> list[str]:
        if role in self.roles:
            return [role]
        if role == "all":
            return list(self.roles)
        if role == "primary":
            if not self.desc.leader:
                raise Unsupported(f"{self.name} cannot say which node leads")
            # Just after a partition heals or a node restarts, the nodes may be electing: no one
            # leads for a moment (an etcd election under load took over a second). So ask again
            # for up to LEADER_WAIT seconds before the fault is given up for this time.
            deadline = time.monotonic() + LEADER_WAIT
            while True:
                lead = self._ask_leader(self.desc.leader_query) if self.desc.leader_query else self.dialect.leader()
                if lead is not None:
                    return [lead]
                if time.monotonic() >= deadline:
                    raise RuntimeError(f"{self.name}: no node says it leads (asked for {LEADER_WAIT:g} s)")
                time.sleep(0.2)
        raise Unsupported(f"{self.name} has no {role} nodes")

    def _ask_leader(self, q: LeaderQuery) -> str | None:
        """The first node whose own answer to the description's `[leader]` query says it leads."""
        for name in self.roles:
            n = self.cluster.nodes[name]
            try:
                if self._leads(q, n):
                    return name
            except Exception:  # noqa: BLE001 - a node that does not answer (cut, paused, killed) is passed over
                continue
        return None

    def _leads(self, q: LeaderQuery, n: Node) -> bool:
        if q.http:
            import json
            import urllib.request

            data = q.body.encode() if q.body else None
            req = urllib.request.Request(_fill(q.http, n, self.desc, "", ""), data=data,
                                         headers={"Content-Type": "application/json"} if data else {})
            with urllib.request.urlopen(req, timeout=2) as resp:
                doc = json.loads(resp.read())
            me, lead = json_path(doc, q.self_field), json_path(doc, q.leader_field)
            return me is not None and me == lead
        if q.sql:
            with self.connect(self.client_of(n.name), 2) as conn:
                row = conn.execute(q.sql).fetchone()
            return bool(row and row[0] and str(row[0]).lower() not in ("0", "false", "off", "no"))
        argv = [_fill(a, n, self.desc, "", "") for a in q.command]
        if hasattr(self.cluster, "exec"):  # where the node runs: an ssh host
            return self.cluster.exec(n.name, argv)[0] == 0
        return subprocess.run(argv, capture_output=True, timeout=10).returncode == 0

    def kill(self, node: str) -> None:
        self.cluster.kill(node)

    def restart(self, node: str) -> None:
        self.cluster.restart(node)

    def pause(self, node: str) -> None:
        self.cluster.pause(node)

    def resume(self, node: str) -> None:
        self.cluster.resume(node)

    def cut(self, a: str, b: str) -> None:
        self.cluster.cut(a, b)

    def heal_cuts(self) -> None:
        if self.cluster is not None:
            self.cluster.heal_cuts()

    def set_clock(self, node: str, offset_ms: int) -> None:
        if self.desc.clock != "faketime":
            raise Unsupported(self.refusal("clock", "clock"))
        self.cluster.set_clock(node, offset_ms)

    def collect_logs(self, into: str) -> None:
        if self.cluster is None:
            return
        d = self.desc
        self.cluster.collect_logs(into, extra=lambda n: [_fill(t, n, d, "", "") for t in d.logs])


# dialect -> the class that speaks it ("module:Class", imported when a target is made)
DIALECTS: dict[str, str] = {"etcd": "sleuth.targets.etcd:EtcdDialect",
                            "postgres": "sleuth.targets.described:PostgresDialect",
                            "mysql": "sleuth.targets.described:MySQLDialect"}


class SqlDialect:
    """A SQL cluster's nodes spoken to as sleuth speaks to one server of the family: the same
    driver, error classification, isolation levels and SQL workloads (`client` is each node's
    URL). Per-key linearizability is not assumed of a cluster. No leader is known."""

    family = ""

    def __init__(self, target: DescribedTarget, options: frozenset[str]):
        self.target = target
        self.driver = self._driver()
        self.isolations, self.models = self.driver.isolations, self.driver.models

    def _driver(self) -> Target: ...

    def connect(self, dsn: str, timeout: float) -> Any:
        return self.driver.connect(dsn, timeout)

    def socket_of(self, conn: Any) -> int:
        return self.driver.socket_of(conn)

    def classify(self, exc: BaseException, writes: bool) -> tuple[str, str, bool] | None:
        return self.driver.classify(exc, writes)

    def session_sql(self, isolation: str) -> list[str]:
        return self.driver.session_sql(isolation)

    def workload(self, name: str, keys: int) -> Any:
        from sleuth.workloads.clients import WORKLOADS

        return WORKLOADS[name](keys, self.family)

    def healthy(self) -> bool:
        for _, dsn in self.target.dsns():
            with self.connect(dsn, 2) as conn:
                conn.execute("SELECT 1")
        return True

    def leader(self) -> str | None:
        return None


class PostgresDialect(SqlDialect):
    family = "general"

    def _driver(self) -> Target:
        from sleuth.targets.postgres import UrlTarget

        return UrlTarget("postgresql://described@127.0.0.1/described")


class MySQLDialect(SqlDialect):
    family = "mysql"

    def _driver(self) -> Target:
        from sleuth.targets.mariadb import MySQLUrlTarget

        return MySQLUrlTarget("mysql://described@127.0.0.1/described")


def dialect_class(name: str) -> Any:
    import importlib

    module, cls = DIALECTS[name].split(":")
    return getattr(importlib.import_module(module), cls)
