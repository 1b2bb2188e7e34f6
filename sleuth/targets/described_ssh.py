"""A described database's nodes on ssh hosts (`--runtime ssh --nodes FILE`).

The hosts come from a nodes file in Jepsen's format (`cluster/runtime_ssh.py`'s
`parse_nodes_file`), node i on the i-th host, and everything done on a host goes
through the reference cluster's ssh runtime (`SshRuntime`: its paramiko
connections, its `setsid nohup` start with a pid file, its kill/pause by that
pid, its iptables rules tagged with the cluster's name), so there is one ssh
client in sleuth, not two. What this module adds is what a description needs
beyond the reference cluster's nodes:

- **upload**: the files the description's `upload` names (e.g. `/usr/bin/etcd`,
  a static Go binary) are copied over SFTP, before the first start, into the
  cluster's `bin/` on each host, which comes first on every node's `PATH`; so
  `start = ["etcd", …]` means this machine's etcd locally and the uploaded copy
  on a host. Nothing is installed on the hosts otherwise.
- **init** commands run once per node on its host, in its directory.
- **logs**: `node.log` and the description's `logs` are read back over ssh
  into the run directory.
- **cleanup**: `down` stops every node (SIGTERM, SIGKILL after 5 s), deletes
  the cluster's iptables rules and its directory (data, logs, uploads) on every
  host. A sleuth killed outright cannot; its cluster's name is
  `d<pid>-<machine>-<name>`, and the next described cluster this machine
  starts on the same hosts sweeps the clusters of this machine whose sleuth
  (that pid) is gone: their processes killed, rules deleted, directories
  removed. Clusters another machine started are left alone. Any other process can heal a
  cluster's partitions by that tag too (`SshRuntime.heal_cuts`).

Why one node per host: a partition is iptables on the hosts, by address, so
two nodes on one host could not be cut apart, and their ports would collide.
A clock under libfaketime is not offered here (it would need the library and a
timestamp file written over ssh on every move): refused.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import tempfile
from collections.abc import Callable

from sleuth.cluster import procs
from sleuth.cluster.runtime_ssh import ROOT, Host, SshRuntime, hosts_as_dicts, parse_nodes_file
from sleuth.targets import Unsupported

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PREFIX = "d"  # a described cluster's name on the hosts: d<pid>-<machine>-<name>


def machine() -> str:
    """This machine's name as a cluster name carries it: letters and digits, at most 16."""
    return "".join(ch for ch in socket.gethostname() if ch.isalnum())[:16] or "host"


def read_hosts(nodes_file: str, count: int, what: str) -> list[Host]:
    """The first `count` hosts of a nodes file; too few (or a bad file) is `Unsupported`, one line."""
    try:
        hosts = parse_nodes_file(nodes_file)
    except ValueError as e:
        raise Unsupported(str(e)) from None
    if len(hosts) < count:
        raise Unsupported(f"--nodes {nodes_file}: names {len(hosts)} host{'s' * (len(hosts) != 1)}; {what} runs "
                          f"{count} nodes, one per host (iptables cannot cut two nodes of one host apart)")
    return hosts[:count]


class SshCluster:
    """`LocalCluster`'s interface (start, kill, restart, pause, resume, cut, heal_cuts,
    collect_logs, down) for nodes on ssh hosts."""

    def __init__(self, nodes: list, argv: Callable, *, hosts: list[Host], init: Callable | None = None,
                 env: dict[str, str] | None = None, clock: str = "none", upload: tuple[str, ...] = (),
                 tag: str = "cluster"):
        if clock != "none":
            raise Unsupported('--runtime ssh: clock = "faketime" runs on the local and docker runtimes only '
                              "(libfaketime and its timestamp file are not placed on ssh hosts)")
        for path in upload:
            if not os.path.isfile(path):
                raise Unsupported(f"upload: {path} is not a file on this machine")
        self.argv, self.init, self.upload = argv, init, upload
        self.id = f"{PREFIX}{os.getpid()}-{machine()}-{tag}"
        self.base = tempfile.mkdtemp(prefix=f"sleuth-{tag}-ssh-")  # the runtime's state file
        self.rt = SshRuntime(self.base, self.id, hosts_as_dicts(hosts))
        self.bin = f"{ROOT}/{self.id}/bin"
        self.env = {**(env or {}), "PATH": f"{self.bin}:{SYSTEM_PATH}"}
        for n, h in zip(nodes, hosts, strict=True):
            n.addr, n.dir = h.address, self.rt.node_dir(n.name)
        self.nodes = {n.name: n for n in nodes}
        self.started: set[str] = set()

    # --- hosts ---------------------------------------------------------------------------------
    def prepare(self, progress=print) -> None:
        """Sweep what dead sleuths left on the hosts, then upload the description's files."""
        for h in self.rt.hosts:
            c = self.rt._conn(h.address)
            self._sweep(c)
            c.run(f"mkdir -p {self.rt._fill(c, self.bin)}", check=True)
            for path in self.upload:
                progress(f"uploading {path} to {h.label()} …")
                remote = f"{self.rt._fill(c, self.bin)}/{os.path.basename(path)}"
                c.put(path, remote)
                c.run(f"chmod 755 {remote}", check=True)

    def _sweep(self, c) -> None:
        _, out = c.run(f"ls -1 {c.root} 2>/dev/null")
        for entry in out.split():
            pid, _, rest = entry[len(PREFIX):].partition("-")
            if (not entry.startswith(PREFIX) or not pid.isdigit() or not rest.startswith(machine() + "-")
                    or entry == self.id or procs.running(int(pid))):
                continue  # not a described cluster, another machine's, or its sleuth still runs
            c.run(f"for p in $(cat {c.root}/{entry}/*/pid 2>/dev/null); do kill -CONT $p; kill -KILL $p; done; "
                  f"rm -rf {c.root}/{entry}")
            _, rules = c.run("iptables -S INPUT 2>/dev/null")
            for rule in rules.splitlines():
                if rule.startswith("-A INPUT") and f"sleuth-{entry}" in rule.split():
                    c.run("iptables -D " + rule[len("-A "):])

    # --- processes -----------------------------------------------------------------------------
    def start_all(self) -> None:
        for name in self.nodes:
            self.start(name)

    def start(self, name: str) -> None:
        n = self.nodes[name]
        if name in self.started:
            self.rt.restart(name)
            return
        self.started.add(name)
        if self.init:
            c = self.rt._conn(n.addr)
            d = self.rt._fill(c, n.dir)
            env = " ".join(f"{k}={shlex.quote(self.rt._fill(c, v))}" for k, v in self.env.items())
            for argv in self.init(n):
                cmd = " ".join(shlex.quote(self.rt._fill(c, a)) for a in argv)
                c.run(f"mkdir -p {d}/data && cd {d} && env {env} {cmd} >> {d}/node.log 2>&1", check=True)
        self.rt.start(name, self.argv(n), n.addr, self.env)

    def alive(self, name: str) -> bool:
        return self.rt.alive(name)

    def kill(self, name: str) -> None:
        self.rt.kill(name)

    def stop(self, name: str, grace: float = 5.0) -> None:
        self.rt.stop(name)

    def restart(self, name: str) -> None:
        self.rt.restart(name)

    def pause(self, name: str) -> None:
        self.rt.pause(name)

    def resume(self, name: str) -> None:
        self.rt.resume(name)

    def exec(self, name: str, argv: list[str]) -> tuple[int, str]:
        """Run a command on the node's host (placeholders already filled)."""
        return self.rt.exec(name, argv)

    def set_clock(self, name: str, offset_ms: int) -> None:
        raise Unsupported(f"{name}: its clock cannot be moved on an ssh host")

    # --- network -------------------------------------------------------------------------------
    def cut(self, a: str, b: str) -> None:
        self.rt.cut(a, self.nodes[a].addr, b, self.nodes[b].addr)

    def heal_cuts(self) -> None:
        self.rt.heal_cuts()

    # --- the end -------------------------------------------------------------------------------
    def collect_logs(self, into: str, extra: Callable | None = None) -> None:
        for n in self.nodes.values():
            if n.name not in self.rt.meta["procs"]:
                continue
            d = os.path.join(into, n.name)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "node.log"), "w") as f:
                f.write(self.rt.logs(n.name))
            for path in extra(n) if extra else []:
                code, text = self.rt.exec(n.name, ["cat", path])
                if code == 0:
                    with open(os.path.join(d, os.path.basename(path)), "w") as f:
                        f.write(text)

    def down(self) -> None:
        """Every node stopped, the cluster's rules and directory removed on every host."""
        try:
            self.rt.remove_all()  # every host's directory of this cluster, started or not
        finally:
            shutil.rmtree(self.base, ignore_errors=True)
