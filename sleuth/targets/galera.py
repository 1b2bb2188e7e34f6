"""MariaDB Galera Cluster as a target: three `mariadbd` with the Galera 4 provider, local processes.

Why this target: Jepsen's MariaDB Galera 12.1.2 analysis (2026) found lost
updates and stale reads without any fault, and committed transactions lost
when every node crashed at once under the flush settings Galera's
documentation recommends (`innodb_flush_log_at_trx_commit` other than 1).
Galera replicates writesets synchronously but certifies them optimistically,
and a node answers reads from its own state (`wsrep_sync_wait=0` by
default), so a multi-master cluster is a different system from the one
InnoDB server the `mariadb` target tests.

Each node is Debian's `mariadbd` (package `mariadb-server`) with
`/usr/lib/galera/libgalera_smm.so` (package `galera-4`), started as the
`mysql` user with `--no-defaults` in a temp dir, on its own loopback address
127.0.20.x (a block of addresses is held by a lock file for the run, so two
runs on one machine never share one), with its own free ports for clients,
group communication (gcomm), incremental state transfer (IST) and rsync
state snapshot transfer (SST). The first node bootstraps the cluster
(`--wsrep-new-cluster`); the others join it in parallel once it is primary.

Faults reach nodes one by one (kill -9 and restart: the node rejoins by IST
or SST; SIGSTOP/SIGCONT) and all at once (the `kill-all` nemesis: every node killed,
then the cluster bootstrapped again from the node whose InnoDB recovered the
highest Galera seqno, found with `mariadbd --wsrep-recover`, as Galera's
documentation says to do after a crash of the whole cluster). Partitions drop
traffic between nodes' addresses with iptables on the loopback
(cluster/runtime_local.py's rules), which works because each node binds its
outgoing group-communication and transfer connections to its own address.
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import os
import pwd
import random
import re
import shutil
import subprocess
import tempfile
import time
from typing import Any

from sleuth.targets import Unsupported
from sleuth.targets.local_server import LocalServer
from sleuth.targets.mariadb import MYSQL_MODELS, MySQLTarget, parse_url
from sleuth.targets.postgres_server import _free_port

PROVIDER = "/usr/lib/galera/libgalera_smm.so"
BLOCK = "127.0.20"  # nodes' addresses: BLOCK.(first + i)
# Errors are MariaDB's (MySQLTarget.classify): Galera's certification failure is a deadlock
# (1213), definite. A node outside the primary component answers 1047 ("WSREP has not yet
# prepared node for application use"); on a write that is left `info`, since a node that
# lost the primary component during COMMIT cannot know whether its writeset was delivered.

LOCKS = "/tmp"  # not $TMPDIR: every run on the machine must see the same lock files
SPECS = {"galera": 1, "galera+relaxed-flush": 0}  # target -> innodb_flush_log_at_trx_commit


def _lock_block(n: int) -> tuple[int, Any, list[str]]:
    """A first address x such that BLOCK.x … BLOCK.(x+n-1) belong to this run only: a lock file
    per block, held (flock) for the run and released by the kernel if sleuth dies. Every block
    no live run holds is swept first (`sweep`), while its lock is held, so whatever a run killed
    outright left is removed by the next run. Returns x, the lock, and what was swept."""
    held = []
    for x in range(1, 250 - n, n):
        f = open(os.path.join(LOCKS, f"sleuth-galera-{BLOCK}.{x}.lock"), "w")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append((x, f))
        except OSError:
            f.close()
    if not held:
        raise RuntimeError(f"no free block of {n} addresses in {BLOCK}.0/24")
    try:
        left = sweep([f"{BLOCK}.{x + i}" for x, _ in held for i in range(n)])
    except BaseException:
        for _, f in held:
            f.close()
        raise
    x, keep = random.choice(held)
    for _, f in held:
        if f is not keep:
            f.close()
    return x, keep, left


def sweep(hosts: list[str]) -> list[str]:
    """What a run killed outright (SIGKILL of sleuth: no teardown) left on these addresses,
    removed before they are used again: its Galera nodes (any process started with
    `--bind-address=` one of them and a wsrep provider), their temp dir, and its iptables
    rules naming them.
    Holding the block's lock proves that run is gone. Returns what was removed, for the log."""
    import signal

    from sleuth.cluster import procs

    gone = []
    marks = {f"--bind-address={h}".encode() for h in hosts}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if marks & set(argv) and any(a.startswith(b"--wsrep-provider=") for a in argv):
            pids = procs.descendants(int(d))
            procs.signal_tree(pids, signal.SIGCONT)
            procs.signal_tree(pids, signal.SIGKILL)
            procs.wait_gone(pids)
            gone.append(f"process {d}")
            for a in argv:  # its run's temp dir: <base>/<node>/data
                base = os.path.dirname(os.path.dirname(a[len(b"--datadir="):].decode(errors="replace")))
                if a.startswith(b"--datadir=") and os.path.basename(base).startswith("sleuth-galera-"):
                    shutil.rmtree(base, ignore_errors=True)
    rules = subprocess.run(["iptables", "-S", "INPUT"], capture_output=True, text=True).stdout.splitlines()
    for rule in rules:
        words = rule.split()
        if words[:2] == ["-A", "INPUT"] and any(f"{h}/32" in words for h in hosts):
            subprocess.run(["iptables", "-D", *words[1:]], capture_output=True)
            gone.append(f"rule {rule}")
    return gone


class GaleraNode(LocalServer):
    """One mariadbd of the cluster: its address, ports, data dir and log."""

    def __init__(self, name: str, host: str, base: str, flush: int, user: Any):
        self.name, self.host, self.flush, self.user = name, host, flush, user
        self.base = os.path.join(base, name)
        self.datadir = os.path.join(self.base, "data")
        self.port = _free_port(host)
        self.gcomm_port, self.ist_port, self.sst_port = (_free_port(host) for _ in range(3))
        self.proc: subprocess.Popen | None = None
        self.peers: list[GaleraNode] = []
        self.cluster_name = ""

    @property
    def url(self) -> str:
        return f"mysql://sleuth@{self.host}:{self.port}/sleuth"

    @property
    def log_path(self) -> str:
        return os.path.join(self.base, "mariadb.err")

    @property
    def gcomm(self) -> str:
        return f"{self.host}:{self.gcomm_port}"

    def _own(self) -> None:
        if self.user is not None:
            for dp, dns, fns in os.walk(self.base):
                for n in [dp] + [os.path.join(dp, x) for x in dns + fns]:
                    os.chown(n, self.user.pw_uid, self.user.pw_gid)

    def _common(self) -> list[str]:
        return ["--no-defaults", *(["--user=mysql"] if self.user is not None else []),
                f"--datadir={self.datadir}", f"--tmpdir={os.path.join(self.base, 'tmp')}"]

    def install(self) -> None:
        os.makedirs(os.path.join(self.base, "tmp"), exist_ok=True)
        self._own()
        p = subprocess.run(["mariadb-install-db", *self._common(), "--auth-root-authentication-method=normal",
                            "--skip-test-db"], capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"mariadb-install-db ({self.name}) failed: {(p.stderr or p.stdout).strip()[-500:]}")

    def args(self, bootstrap: bool) -> list[str]:
        provider = ";".join([f"gmcast.listen_addr=tcp://{self.gcomm}", f"ist.recv_addr={self.host}:{self.ist_port}",
                             f"base_host={self.host}", f"base_port={self.gcomm_port}",
                             "gcache.size=64M", "evs.suspect_timeout=PT3S", "evs.inactive_timeout=PT6S",
                             "evs.install_timeout=PT6S", "pc.wait_prim_timeout=PT10S"])
        init = os.path.join(self.base, "init.sql")
        out = ["mariadbd", *self._common(), f"--socket={os.path.join(self.base, 'mariadbd.sock')}",
               f"--port={self.port}", f"--bind-address={self.host}",
               f"--pid-file={os.path.join(self.base, 'mariadbd.pid')}", f"--log-error={self.log_path}",
               "--skip-name-resolve", "--max-connections=300", "--innodb-lock-wait-timeout=2",
               "--innodb-buffer-pool-size=32M", "--innodb-log-file-size=48M",
               f"--innodb-flush-log-at-trx-commit={self.flush}",
               "--binlog-format=ROW", "--default-storage-engine=InnoDB", "--innodb-autoinc-lock-mode=2",
               "--wsrep-on=ON", f"--wsrep-provider={PROVIDER}", f"--wsrep-cluster-name={self.cluster_name}",
               f"--wsrep-cluster-address=gcomm://{','.join(p.gcomm for p in self.peers)}",
               f"--wsrep-node-name={self.name}", f"--wsrep-node-address={self.gcomm}",
               f"--wsrep-node-incoming-address={self.host}:{self.port}",
               f"--wsrep-provider-options={provider}", "--wsrep-sst-method=rsync",
               f"--wsrep-sst-receive-address={self.host}:{self.sst_port}", "--wsrep-slave-threads=2"]
        if bootstrap:
            out += ["--wsrep-new-cluster", f"--init-file={init}"]
        return out

    def launch(self, bootstrap: bool) -> None:
        self._own()
        with open(self.log_path, "a") as f:
            f.write(f"--- sleuth: starting {self.name}{' (bootstrap)' if bootstrap else ''} at {time.ctime()}\n")
        self.proc = subprocess.Popen(self.args(bootstrap), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True, env={**os.environ, "PATH": _path()})

    def status(self, timeout: float = 2) -> dict[str, str]:
        """wsrep_% status variables, or {} when the node does not answer."""
        import pymysql
        try:
            conn = pymysql.connect(**parse_url(self.url), connect_timeout=timeout, read_timeout=timeout)
        except pymysql.err.MySQLError:
            return {}
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW STATUS LIKE 'wsrep_%'")
                return {k: str(v) for k, v in cur.fetchall()}
        except pymysql.err.MySQLError:
            return {}
        finally:
            conn.close()

    def synced(self, size: int) -> bool:
        s = self.status()
        return (s.get("wsrep_ready") == "ON" and s.get("wsrep_local_state_comment") == "Synced"
                and s.get("wsrep_cluster_status") == "Primary" and s.get("wsrep_cluster_size") == str(size))

    def wait(self, size: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"galera node {self.name} exited ({self.proc.returncode if self.proc else '-'})"
                                   f"{self.last_error()}")
            if self.synced(size):
                return
            time.sleep(0.2)
        raise RuntimeError(f"galera node {self.name} not synced in a cluster of {size} within {timeout:g}s; "
                           f"log: {self.log_path}")

    def last_error(self) -> str:
        """The last [ERROR] line of the node's log, as `: <line>`, for a message."""
        try:
            with open(self.log_path, errors="replace") as f:
                errors = [line.strip() for line in f if "[ERROR]" in line]
        except OSError:
            errors = []
        return f": {errors[-1][:300]}" if errors else ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def recovered_seqno(self) -> int:
        """After a crash: the Galera position InnoDB recovered (`mariadbd --wsrep-recover`), else
        the seqno in grastate.dat; -1 if neither says. grastate.dat is not trusted first after a
        crash (measured once: seqno 1 there, on a node whose InnoDB recovered 1456)."""
        log = os.path.join(self.base, "recover.err")
        self._own()
        # the node's own command line (a later option wins), so the provider sees the same cluster
        subprocess.run([*self.args(False), "--wsrep-recover", f"--log-error={log}", "--skip-networking"],
                       capture_output=True, timeout=120, env={**os.environ, "PATH": _path()})
        text = open(log, errors="replace").read() if os.path.exists(log) else ""
        with open(self.log_path, "a") as f:  # the recovery's log is part of the node's
            f.write(text)
        found = re.findall(r"Recovered position:\s*[0-9a-f-]+:(-?\d+)", text)
        if found and int(found[-1]) >= 0:
            return int(found[-1])
        seqno = _grastate(self.datadir).get("seqno", "-1")
        return int(seqno) if seqno.lstrip("-").isdigit() else -1

    def mark_safe_to_bootstrap(self) -> None:
        path = os.path.join(self.datadir, "grastate.dat")
        if os.path.exists(path):
            text = open(path).read()
            with open(path, "w") as f:
                f.write(re.sub(r"safe_to_bootstrap:\s*\d", "safe_to_bootstrap: 1", text))

    def stop(self) -> None:
        if self.proc is not None:
            self.resume()
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
            self.kill()


def _grastate(datadir: str) -> dict[str, str]:
    """grastate.dat's fields (uuid, seqno, safe_to_bootstrap), {} if there is none."""
    try:
        with open(os.path.join(datadir, "grastate.dat")) as f:
            pairs = [line.split(":", 1) for line in f if ":" in line and not line.startswith("#")]
    except OSError:
        return {}
    return {k.strip(): v.strip() for k, v in pairs}


def _path() -> str:
    """mariadbd runs wsrep_sst_rsync (in /usr/bin) and rsync by name."""
    return os.environ.get("PATH", "") + ":/usr/sbin:/usr/bin:/sbin:/bin"


class GaleraTarget(MySQLTarget):
    """`galera` and `galera+relaxed-flush`: a 3-node MariaDB Galera cluster sleuth starts."""
    name = "galera"
    log_name = "mariadb.err"

    def __init__(self, spec: str = "galera", count: int = 3):
        super().__init__()
        if spec not in SPECS:
            raise Unsupported(f"--target {spec!r}: galera or galera+relaxed-flush")
        missing = [w for w in ("mariadbd", "mariadb-install-db", "rsync", "wsrep_sst_rsync") if shutil.which(w, path=_path()) is None]
        if missing or not os.path.exists(PROVIDER):
            raise Unsupported(f"--target {spec} needs Debian's mariadb-server, galera-4 and rsync "
                              f"(missing: {', '.join(missing + ([PROVIDER] if not os.path.exists(PROVIDER) else []))}); "
                              "apt-get install mariadb-server galera-4 rsync (or make system)")
        self.spec, self.flush, self.count = spec, SPECS[spec], count
        self.models = MYSQL_MODELS
        self.node_names = [f"n{i + 1}" for i in range(count)]
        self.roles = tuple(self.node_names)
        self.nodes_by_name: dict[str, GaleraNode] = {}
        self.base: str | None = None
        self.lock_file = None
        self.net = None  # cluster.runtime_local.LocalRuntime: its iptables rules
        self.user = pwd.getpwnam("mysql") if os.geteuid() == 0 else None

    # What the nemeses may ask of it (the shape of the generic node targets: each node a role,
    # so kill and pause rotate over the nodes one at a time).
    abilities = frozenset({"nodes", "partition"})

    def grudges(self) -> tuple[str, ...]:
        """One node isolated, random halves; a majorities ring only from 4 nodes up (with 3,
        every node already sees a majority, so the ring would cut nothing). No oracle here."""
        from sleuth.nemesis.faults import HALVES, ISOLATE_ONE, MAJORITIES_RING

        return (ISOLATE_ONE, HALVES) + ((MAJORITIES_RING,) if self.count >= 4 else ())

    def linearizable_keys(self, isolation: str | None) -> bool:
        return False  # a node answers reads from its own state: stale reads are possible

    # --- the cluster ---------------------------------------------------------------------

    def up(self, progress=print) -> None:
        from sleuth.cluster.runtime_local import LocalRuntime

        first, self.lock_file, left = _lock_block(self.count)
        if left:
            progress(f"galera: removed what a run killed outright left on these addresses: {'; '.join(left)}")
        self.base = tempfile.mkdtemp(prefix="sleuth-galera-")
        os.chmod(self.base, 0o755)
        self.net = LocalRuntime(os.path.join(self.base, "net"))
        name = f"sleuth-{os.path.basename(self.base)}"
        nodes = [GaleraNode(n, f"{BLOCK}.{first + i}", self.base, self.flush, self.user)
                 for i, n in enumerate(self.node_names)]
        for n in nodes:
            n.peers, n.cluster_name = nodes, name
        self.nodes_by_name = {n.name: n for n in nodes}
        t0 = time.monotonic()
        progress(f"galera: {self.count} nodes on {nodes[0].host}–{nodes[-1].host} "
                 f"(innodb_flush_log_at_trx_commit={self.flush}) …")
        head = nodes[0]
        head.install()
        for n in nodes:  # any node may be the one to bootstrap the cluster again (kill-all)
            os.makedirs(n.base, exist_ok=True)
            with open(os.path.join(n.base, "init.sql"), "w") as f:
                f.write("DELETE FROM mysql.global_priv WHERE User = '';\n"
                        "CREATE USER IF NOT EXISTS 'sleuth'@'%';\n"
                        "GRANT ALL PRIVILEGES ON *.* TO 'sleuth'@'%';\n"
                        "CREATE DATABASE IF NOT EXISTS sleuth;\n"
                        "FLUSH PRIVILEGES;\n")
        for n in nodes[1:]:
            os.makedirs(os.path.join(n.datadir), exist_ok=True)
            os.makedirs(os.path.join(n.base, "tmp"), exist_ok=True)
        head.launch(bootstrap=True)
        head.wait(1, 60)
        for n in nodes[1:]:
            n.launch(bootstrap=False)
        for n in nodes[1:]:
            self._join(n, progress)
        self.formed_in = time.monotonic() - t0
        progress(f"galera: cluster of {self.count} synced in {self.formed_in:.1f}s")

    def _join(self, n: GaleraNode, progress, tries: int = 3) -> None:
        """Wait until `n` is synced in the new cluster. A joiner whose state transfer fails aborts
        (SIGABRT: two joiners taking their first state from one donor at once, on a loaded
        machine, now and then): it holds nothing yet, so it starts again from an empty data
        dir, at most `tries` times in all; a node still running but not synced in time is not
        retried."""
        for attempt in range(1, tries + 1):
            try:
                n.wait(self.count, 120)
                return
            except RuntimeError:
                if attempt == tries or n.proc is None or n.proc.poll() is None:
                    raise
                progress(f"galera: {n.name} exited while joining ({n.proc.returncode}); starting it again")
                shutil.rmtree(n.datadir, ignore_errors=True)
                os.makedirs(n.datadir)
                n.launch(bootstrap=False)

    def down(self) -> None:
        try:
            if self.net is not None:
                self.net.heal_cuts()
        finally:
            for n in self.nodes_by_name.values():
                try:
                    n.stop()
                except Exception:
                    n.kill()
            if self.base is not None:
                shutil.rmtree(self.base, ignore_errors=True)
                self.base = None
            if self.lock_file is not None:
                self.lock_file.close()
                self.lock_file = None

    def dsns(self) -> list[tuple[str, str]]:
        return [(n.name, n.url) for n in self.nodes_by_name.values()]

    def nodes(self, role: str) -> list[str]:
        if role == "all":
            return list(self.node_names)
        return [role] if role in self.nodes_by_name else []

    def node(self, name: str) -> GaleraNode:
        if name not in self.nodes_by_name:
            raise Unsupported(f"galera has no node {name!r} ({', '.join(self.node_names)})")
        return self.nodes_by_name[name]

    def kill(self, node: str) -> None:
        n = self.node(node)
        n.resume()
        n.kill()

    def restart(self, node: str) -> None:
        """Start a killed node again. If no node of the cluster is running (every node was killed,
        or this is the first of them to come back), the cluster is bootstrapped again first, from
        the node with the highest recovered seqno; a node already running is left alone."""
        n = self.node(node)
        if n.alive():
            return
        with self.lock:
            running = [m for m in self.nodes_by_name.values() if m.alive()]
            if not running:
                self._bootstrap_after_crash()
                if n.alive():
                    return
            n.launch(bootstrap=False)
        n.wait(len([m for m in self.nodes_by_name.values() if m.alive()]), 120)

    def _bootstrap_after_crash(self) -> None:
        nodes = list(self.nodes_by_name.values())
        with concurrent.futures.ThreadPoolExecutor(len(nodes)) as ex:
            seqnos = dict(zip([n.name for n in nodes], ex.map(GaleraNode.recovered_seqno, nodes)))
        head = max(nodes, key=lambda n: seqnos[n.name])
        self.recoveries = getattr(self, "recoveries", []) + [seqnos]
        with open(head.log_path, "a") as f:
            f.write(f"--- sleuth: every node down; recovered seqnos {seqnos}; bootstrapping from {head.name}\n")
        head.mark_safe_to_bootstrap()
        head.launch(bootstrap=True)
        head.wait(1, 120)

    def pause(self, node: str) -> None:
        self.node(node).pause()

    def resume(self, node: str) -> None:
        self.node(node).resume()

    def cut(self, a: str, b: str) -> None:
        self.net.cut(a, self.node(a).host, b, self.node(b).host)

    def heal_cuts(self) -> None:
        if self.net is not None:
            self.net.heal_cuts()

    def wait_healthy(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        for n in self.nodes_by_name.values():
            n.wait(self.count, max(1.0, deadline - time.monotonic()))

    def collect_logs(self, into: str) -> None:
        for n in self.nodes_by_name.values():
            if os.path.exists(n.log_path):
                os.makedirs(os.path.join(into, n.name), exist_ok=True)
                shutil.copy(n.log_path, os.path.join(into, n.name, self.log_name))
