"""The `ssh` runtime: nodes run as processes on remote hosts named in a nodes file (paramiko).

The nodes file is Jepsen's: one host per line, `[user@]address[:port]`,
optionally followed by `key=PATH` (an identity file); `#` starts a comment.
The user defaults to root, the port to 22; without a key paramiko tries the
ssh agent and `~/.ssh`. Host keys are accepted on first sight, as Jepsen
does: the hosts are test machines.

On `up`, sleuth builds a wheelhouse of itself and what a node needs on this
machine (cluster/image.py: not the checkers' and reports' dependencies), uploads it over SFTP to each host that does not already have that
exact wheelhouse installed, and installs it offline into
`~/.sleuth-node/venv` (the host needs `python3` with `venv`, the same Python
minor version and architecture as this machine, and `iptables` for
partitions). Each node lives in `~/.sleuth-node/<cluster>/<node>/` (its data,
`node.log`, and `pid`); it is started with `setsid nohup`, so kill -9 and
SIGSTOP reach exactly it. Partitions are iptables DROP rules on the hosts,
tagged with a comment naming the cluster so any later process can heal them.
Nodes sharing a host share its address: a cut between two hosts cuts every
node on them.

What the controller must remember (which node runs where, with which command
line) is in `<state>/ssh.json`, so `sleuth cluster down` from another
process finds everything.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

from sleuth.base.jsonfile import write_json
from sleuth.cluster.errors import ClusterFailed

ROOT = "{root}"  # stands for the host's ~/.sleuth-node in command lines; filled in per host


class SshError(ClusterFailed):
    """A host cannot be reached or a command on it failed (one line, names the host)."""


@dataclass
class Host:
    address: str
    user: str = "root"
    port: int = 22
    key: str | None = None

    def label(self) -> str:
        return f"{self.user}@{self.address}:{self.port}"


def parse_nodes_file(path: str) -> list[Host]:
    """Read a nodes file; a bad line raises ValueError naming the file and line."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ValueError(f"{path}: cannot read the nodes file: {e.strerror}") from None
    hosts: list[Host] = []
    for i, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        spec, opts = fields[0], fields[1:]
        user, _, hostport = spec.rpartition("@")
        address, port = hostport, 22
        if ":" in hostport:
            address, _, p = hostport.rpartition(":")
            if not p.isdigit() or not 0 < int(p) < 65536:
                raise ValueError(f"{path}:{i}: bad port {p!r} in {spec!r} (expected [user@]address[:port])")
            port = int(p)
        if not address or " " in address or (user == "" and "@" in spec):
            raise ValueError(f"{path}:{i}: bad host {spec!r} (expected [user@]address[:port])")
        key = None
        for o in opts:
            name, eq, value = o.partition("=")
            if name != "key" or not eq or not value:
                raise ValueError(f"{path}:{i}: unknown field {o!r} (only key=PATH may follow the host)")
            key = os.path.expanduser(value)
        try:
            address = socket.gethostbyname(address)
        except OSError:
            raise ValueError(f"{path}:{i}: cannot resolve host {address!r}") from None
        h = Host(address, user or "root", port, key)
        if any(o.address == h.address and o.port == h.port for o in hosts):
            raise ValueError(f"{path}:{i}: host {h.address}:{h.port} is listed twice")
        hosts.append(h)
    if not hosts:
        raise ValueError(f"{path}: the nodes file names no hosts")
    return hosts


class _Conn:
    """One ssh connection to a host; commands on it are serialized."""

    def __init__(self, host: Host, timeout: float = 15.0):
        import paramiko

        self.host = host
        self.lock = threading.Lock()
        self.client = paramiko.SSHClient()
        self.client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        try:
            self.client.connect(host.address, port=host.port, username=host.user, key_filename=host.key,
                                timeout=timeout, banner_timeout=timeout, auth_timeout=timeout)
        except (OSError, paramiko.SSHException) as e:
            raise SshError(f"ssh {host.label()}: {e}") from None
        self.home = self.run("printf %s \"$HOME\"", check=True)[1] or "/root"
        self.root = self.home.rstrip("/") + "/.sleuth-node"

    def run(self, command: str, check: bool = False, timeout: float = 120.0) -> tuple[int, str]:
        import paramiko

        with self.lock:
            try:
                chan = self.client.get_transport().open_session(timeout=15)
                chan.set_combine_stderr(True)
                chan.settimeout(timeout)
                chan.exec_command(command)
                with chan.makefile("rb") as out:
                    text = out.read().decode(errors="replace")
                code = chan.recv_exit_status()
                chan.close()
            except (OSError, paramiko.SSHException, AttributeError) as e:  # AttributeError: transport gone
                raise SshError(f"ssh {self.host.label()}: `{command[:80]}`: {e or type(e).__name__}") from None
        if check and code != 0:
            raise SshError(f"ssh {self.host.label()}: `{command[:80]}` exited {code}: {text.strip()[-500:]}")
        return code, text

    def put(self, local: str, remote: str) -> None:
        with self.lock:
            sftp = self.client.open_sftp()
            try:
                sftp.put(local, remote)
            finally:
                sftp.close()

    def close(self) -> None:
        self.client.close()


class SshRuntime:
    name = "ssh"
    python = f"{ROOT}/venv/bin/python"

    def __init__(self, state_dir: str, cluster_name: str, hosts: list[dict] | None = None,
                 project_root: str = "."):
        self.dir, self.cluster, self.project_root = state_dir, cluster_name, project_root
        self.file = os.path.join(state_dir, "ssh.json")
        self.meta: dict = {"hosts": hosts or [], "procs": {}}
        if os.path.exists(self.file):
            with open(self.file) as f:
                self.meta = json.load(f)
        self.hosts = [Host(**h) for h in self.meta["hosts"]]
        self._conns: dict[str, _Conn] = {}
        self._lock = threading.Lock()
        self.tag = f"sleuth-{cluster_name}"  # iptables comment on this cluster's rules

    @staticmethod
    def available() -> bool:
        return True

    def _save(self) -> None:
        write_json(self.file, self.meta)

    def _conn(self, address: str) -> _Conn:
        with self._lock:
            c = self._conns.get(address)
            if c is None:
                host = next(h for h in self.hosts if h.address == address)
                c = self._conns[address] = _Conn(host)
            return c

    def _node_conn(self, name: str) -> _Conn:
        return self._conn(self.meta["procs"][name]["ip"])

    def node_dir(self, name: str) -> str:
        return f"{ROOT}/{self.cluster}/{name}"

    def data_path(self, name: str) -> str:
        return f"{self.node_dir(name)}/data"

    # -- installing ---------------------------------------------------------------

    def up_network(self, progress=print) -> None:
        """Connect to every host and install this sleuth there (skipped where it already is)."""
        from sleuth.cluster.image import install_command, wheelhouse

        self._save()
        with tempfile.TemporaryDirectory(prefix="sleuth-wheels-") as wheels:
            progress("building the wheelhouse to upload …")
            digest = wheelhouse(self.project_root, wheels)
            files = sorted(os.listdir(wheels))

            def install(h: Host) -> None:
                c = self._conn(h.address)
                marker = f"{c.root}/venv/.wheelhouse"
                code, have = c.run(f"cat {marker} 2>/dev/null")
                if code == 0 and have.strip() == digest:
                    return
                progress(f"installing sleuth on {h.label()} ({len(files)} wheels) …")
                c.run(f"rm -rf {c.root}/wheels && mkdir -p {c.root}/wheels", check=True)
                for name in files:
                    c.put(os.path.join(wheels, name), f"{c.root}/wheels/{name}")
                c.run(f"rm -rf {c.root}/venv && python3 -m venv {c.root}/venv && "
                      f"{install_command(c.root + '/venv/bin/pip', c.root + '/wheels')} && "
                      f"rm -rf {c.root}/wheels && echo {digest} > {marker}", check=True, timeout=600)

            with ThreadPoolExecutor(len(self.hosts) or 1) as pool:
                for f in [pool.submit(install, h) for h in self.hosts]:
                    f.result()

    # -- processes ----------------------------------------------------------------

    def start(self, name: str, argv: list[str], ip: str, env: dict | None = None) -> None:
        self.meta["procs"][name] = {"argv": argv, "ip": ip, "env": env or {}}
        self._save()
        self._spawn(name)

    def _fill(self, c: _Conn, text: str) -> str:
        return text.replace(ROOT, c.root)

    def _spawn(self, name: str) -> None:
        p, c = self.meta["procs"][name], self._node_conn(name)
        d = self._fill(c, self.node_dir(name))
        argv = " ".join(shlex.quote(self._fill(c, a)) for a in p["argv"])
        env = " ".join(f"{k}={shlex.quote(self._fill(c, v))}" for k, v in p["env"].items())
        c.run(f"mkdir -p {d}/data && cd {d} && "
              f"(env {env} setsid nohup {argv} >> {d}/node.log 2>&1 < /dev/null & echo $! > {d}/pid)",
              check=True)

    def _with_pid(self, c: _Conn, name: str, body: str) -> str:
        """A shell line that runs `body` with $p set to the node's pid, if it has one."""
        return f"p=$(cat {self._fill(c, self.node_dir(name))}/pid 2>/dev/null); if [ -n \"$p\" ]; then {body}; fi; true"

    def state(self, name: str) -> str:
        if name not in self.meta["procs"]:
            return "down"
        c = self._node_conn(name)
        _, out = c.run(self._with_pid(c, name, "ps -o stat= -p $p"))
        stat = out.strip()
        if not stat or stat.startswith("Z"):
            return "down"
        return "paused" if stat.startswith("T") else "running"

    def alive(self, name: str) -> bool:
        return self.state(name) != "down"

    def _signal(self, name: str, *sigs: str) -> None:
        c = self._node_conn(name)
        c.run(self._with_pid(c, name, "; ".join(f"kill -{s} $p 2>/dev/null" for s in sigs)))

    def _wait_dead(self, name: str, tenths: int = 100) -> None:
        c = self._node_conn(name)
        c.run(self._with_pid(c, name, f"i=0; while [ $i -lt {tenths} ] && ps -o stat= -p $p | grep -qv '^Z'; "
                                      f"do sleep 0.1; i=$((i+1)); done"))

    def kill(self, name: str) -> None:
        self._signal(name, "CONT", "KILL")
        self._wait_dead(name)

    def restart(self, name: str) -> None:
        if self.alive(name):
            self.kill(name)
        self._spawn(name)

    def stop(self, name: str) -> None:
        if name not in self.meta["procs"]:
            return
        self._signal(name, "CONT", "TERM")
        self._wait_dead(name, 50)
        if self.alive(name):
            self.kill(name)

    def pause(self, name: str) -> None:
        self._signal(name, "STOP")

    def resume(self, name: str) -> None:
        self._signal(name, "CONT")

    def logs(self, name: str) -> str:
        if name not in self.meta["procs"]:
            return ""
        c = self._node_conn(name)
        return c.run(f"cat {self._fill(c, self.node_dir(name))}/node.log 2>/dev/null")[1]

    def exec(self, name: str, argv: list[str]) -> tuple[int, str]:
        c = self._node_conn(name)
        return c.run(" ".join(shlex.quote(self._fill(c, a)) for a in argv))

    # -- partitions ---------------------------------------------------------------

    def cut(self, a: str, ip_a: str, b: str, ip_b: str) -> None:
        """Drop traffic between two nodes' hosts, both ways, with iptables on each host."""
        if ip_a == ip_b:
            raise SshError(f"{a} and {b} share host {ip_a}; iptables cannot cut them apart "
                           f"(list more hosts in the nodes file)")
        for ip, peer in ((ip_a, ip_b), (ip_b, ip_a)):
            self._conn(ip).run(f"iptables -I INPUT -s {peer} -m comment --comment {self.tag} -j DROP",
                               check=True)

    def cut_service(self, ip: str, peer: str, port: int) -> None:
        """Drop what a host receives from one service of another machine (`peer:port`, a source's
        upstream on the controlling machine): the host still hears the rest of that machine,
        sleuth's own ssh sessions among it."""
        self._conn(ip).run(f"iptables -I INPUT -s {peer} -p tcp --sport {port} -m comment --comment {self.tag} "
                           f"-j DROP", check=True)

    def heal_cuts(self) -> None:
        for h in self.hosts:
            c = self._conn(h.address)
            _, rules = c.run("iptables -S INPUT 2>/dev/null")
            for rule in rules.splitlines():
                if rule.startswith("-A INPUT") and self.tag in rule.split():
                    c.run("iptables -D " + rule[len("-A "):])

    # -- whole cluster ------------------------------------------------------------

    def nodes(self) -> list[dict]:
        return [{"name": n, "ip": p["ip"], "state": self.state(n)} for n, p in self.meta["procs"].items()]

    def remove_all(self) -> None:
        errors = []
        for h in self.hosts:
            try:
                c = self._conn(h.address)
            except SshError as e:
                errors.append(str(e))
                continue
            for name, p in self.meta["procs"].items():
                if p["ip"] == h.address:
                    self.stop(name)
            c.run(f"rm -rf {c.root}/{self.cluster}")
        try:
            self.heal_cuts()
        except SshError as e:
            errors.append(str(e))
        for c in self._conns.values():
            c.close()
        self._conns = {}
        if os.path.exists(self.file):
            os.remove(self.file)
        if errors:
            raise SshError("; ".join(errors))


def hosts_as_dicts(hosts: list[Host]) -> list[dict]:
    return [asdict(h) for h in hosts]
