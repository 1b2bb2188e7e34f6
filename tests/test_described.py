"""The generic cluster machinery (sleuth/targets/described.py) on plain processes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from live import needs

from sleuth.targets import Unsupported, make_target
from sleuth.targets.described import LIBFAKETIME, LocalCluster, Node


@needs("faketime", lambda: os.path.exists(LIBFAKETIME), "needs Debian's faketime (libfaketime)")
def test_a_faketime_clock_moves_at_once_and_back():
    c = LocalCluster([Node("n1", "127.0.12.1")], clock="faketime", tag="fttest",
                     argv=lambda n: ["sh", "-c", "while :; do date +%s; sleep 0.05; done"])
    try:
        c.start_all()
        time.sleep(0.4)
        c.set_clock("n1", 3_600_000)  # an hour ahead, no restart
        time.sleep(0.4)
        c.set_clock("n1", 0)
        time.sleep(0.4)
        with open(c.nodes["n1"].log) as f:
            seen = [int(x) for x in f.read().split()]
    finally:
        c.down()
    jumps = [b - a for a, b in zip(seen, seen[1:], strict=False)]
    assert any(3590 <= j <= 3610 for j in jumps) and any(-3610 <= j <= -3590 for j in jumps), seen
    assert not os.path.exists(c.base)  # its directory removed


def test_a_cluster_without_faketime_refuses_to_move_a_clock():
    c = LocalCluster([Node("n1", "127.0.12.1")], argv=lambda n: ["true"], tag="noclock")
    try:
        with pytest.raises(Unsupported, match="cannot be moved"):
            c.set_clock("n1", 1000)
    finally:
        c.down()


def test_kill_pause_resume_restart_reach_the_whole_process_tree():
    c = LocalCluster([Node("n1", "127.0.12.1")], tag="tree",
                     argv=lambda n: ["sh", "-c", "sleep 60 & sleep 60 & wait"])
    try:
        c.start_all()
        deadline = time.monotonic() + 5
        while len(c.pids("n1")) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = c.pids("n1")
        assert len(pids) == 3
        c.pause("n1")
        assert _within(5, lambda: all(_state(p) == "T" for p in pids)), [_state(p) for p in pids]
        c.resume("n1")
        assert _within(5, lambda: all(_state(p) != "T" for p in pids)), [_state(p) for p in pids]
        c.kill("n1")
        assert not c.alive("n1") and all(_state(p) in (None, "Z") for p in pids)
        c.restart("n1")
        assert c.alive("n1")
    finally:
        c.down()
    assert not c.alive("n1")


def _within(seconds: float, ok) -> bool:
    """Does `ok()` hold within `seconds`? A signalled process changes state when it is next
    scheduled: on a loaded machine (`make test`'s workers and their clusters on two cores) that
    took longer than the 0.1 s this test once slept."""
    deadline = time.monotonic() + seconds
    while not ok():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARIADB_TOML = os.path.join(ROOT, "targets", "mariadb.toml")
needs_mariadb = needs("MariaDB and faketime",
                      lambda: shutil.which("mariadbd") is not None and os.path.exists(LIBFAKETIME),
                      "needs Debian's mariadb-server and faketime")


@needs_mariadb
def test_a_described_mariadb_reads_the_clock_sleuth_gives_it():
    target = make_target(MARIADB_TOML, None, ())
    try:
        target.up(progress=lambda m: None)
        dsn = target.dsns()[0][1]

        def skew() -> float:
            with target.connect(dsn, 5) as conn:
                return float(conn.execute("SELECT UNIX_TIMESTAMP(NOW(6))").fetchone()[0]) - time.time()

        assert abs(float(skew())) < 5
        target.set_clock("n1", 3_600_000)
        assert 3590 < float(skew()) < 3610
        target.set_clock("n1", -120_000)
        assert -130 < float(skew()) < -110
    finally:
        target.down()


@needs_mariadb
def test_a_described_mariadb_under_every_kind_it_supports(tmp_path):
    p = subprocess.run([sys.executable, "-m", "sleuth.cli", "run", "--json", "--target", MARIADB_TOML,
                        "-w", "list-append", "--isolation", "read-committed", "--nemesis", "kill,pause,clock,kill-all",
                        "--nemesis-interval", "1", "--time-limit", "10", "--concurrency", "4", "--rate", "100",
                        "--store", str(tmp_path), "--shrink-budget", "0"], capture_output=True, text=True,
                       timeout=180, cwd=ROOT)
    s = json.loads(p.stdout)
    assert s["valid"] is True, p.stderr
    assert {"kill", "pause", "kill-all"} <= set(s["faults"]) and {"clock-bump", "clock-strobe"} & set(s["faults"])
    with open(os.path.join(s["run_dir"], "test.json")) as f:
        assert json.load(f)["model"] == "read-committed"
    assert os.path.getsize(os.path.join(s["run_dir"], "nodes", "n1", "mariadb.err")) > 0


needs_docker = needs("Docker", lambda: __import__("sleuth.cluster.runtime_docker", fromlist=["x"])
                     .DockerRuntime.available(), "needs a Docker engine")


@pytest.mark.docker
@pytest.mark.slow
@needs_docker
def test_init_commands_and_a_faketime_clock_inside_containers():
    """A description with init commands and clock = "faketime" under --runtime docker: the init
    command runs inside a container (it sees the node's hostname, not this machine's), once; the
    node's clock moves an hour and back without a restart."""
    import docker

    from sleuth.targets.described import DockerCluster

    c = DockerCluster([Node("n1", "")], tag="ftdocker", clock="faketime",
                      init=lambda n: [["sh", "-c", f"hostname >> {n.dir}/init-ran"]],
                      argv=lambda n: ["sh", "-c", f"while :; do date +%s >> {n.dir}/seen; sleep 0.05; done"])
    n = c.nodes["n1"]
    try:
        c.start_all()
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(n.dir, "seen")) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.4)
        c.set_clock("n1", 3_600_000)
        time.sleep(0.4)
        c.set_clock("n1", 0)
        time.sleep(0.4)
        c.kill("n1")
        c.restart("n1")  # the same container again: init does not run twice
        time.sleep(0.4)
        with open(os.path.join(n.dir, "seen")) as f:
            seen = [int(x) for x in f.read().split()]
        with open(os.path.join(n.dir, "init-ran")) as f:
            ran = f.read().split()
    finally:
        c.down()
    assert ran == ["n1"] and os.uname().nodename != "n1"
    jumps = [b - a for a, b in zip(seen, seen[1:], strict=False)]
    assert any(3590 <= j <= 3610 for j in jumps) and any(-3610 <= j <= -3590 for j in jumps), seen
    left = docker.from_env().containers.list(all=True, filters={"label": f"sleuth.owner={os.getpid()}"})
    assert left == []


@pytest.mark.docker
@pytest.mark.slow
@needs_docker
@needs("MariaDB", lambda: shutil.which("mariadbd") is not None, "needs Debian's mariadb-server")
def test_a_described_mariadb_in_a_container_reads_its_false_clock_and_survives_every_kind(tmp_path):
    """targets/mariadb.toml (init commands, clock = "faketime") under --runtime docker: its image is
    Debian's mariadb-server and faketime (made offline), mariadb-install-db runs in the container,
    the SQL clock follows a bump, and a run under kill, pause, clock and kill-all is judged valid."""
    import docker

    target = make_target(MARIADB_TOML, "docker", ())
    try:
        target.up(progress=lambda m: None)
        dsn = target.dsns()[0][1]
        assert not dsn.startswith("mysql://sleuth@127.")  # the container's own address

        def skew() -> float:
            with target.connect(dsn, 5) as conn:
                return float(conn.execute("SELECT UNIX_TIMESTAMP(NOW(6))").fetchone()[0]) - time.time()

        assert abs(skew()) < 5
        target.set_clock("n1", 3_600_000)
        assert 3590 < skew() < 3610
    finally:
        target.down()
    p = subprocess.run([sys.executable, "-m", "sleuth.cli", "run", "--json", "--target", MARIADB_TOML,
                        "--runtime", "docker", "-w", "list-append", "--isolation", "read-committed",
                        "--nemesis", "kill,pause,clock,kill-all", "--nemesis-interval", "1", "--time-limit", "10",
                        "--concurrency", "4", "--rate", "100", "--store", str(tmp_path), "--shrink-budget", "0"],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    s = json.loads(p.stdout)
    assert s["valid"] is True, p.stderr
    assert {"kill", "pause", "kill-all"} <= set(s["faults"]) and {"clock-bump", "clock-strobe"} & set(s["faults"])
    assert os.path.getsize(os.path.join(s["run_dir"], "nodes", "n1", "mariadb.err")) > 0
    left = [c.name for c in docker.from_env().containers.list(all=True) if "mariadb-described" in c.name]
    assert left == [], left


def test_the_primary_is_asked_for_again_while_the_nodes_elect(monkeypatch):
    """Just after a partition heals, no node may lead for a moment: "isolate the primary"
    asks again (for up to LEADER_WAIT seconds) instead of giving the fault up at once,
    which lost the etcd partition test's isolate-primary grudge on a loaded machine; a
    cluster that elects no one within the wait still refuses, naming itself."""
    from sleuth.targets import described

    answers = iter([None, None, None, "n2"])

    class Dialect:
        @staticmethod
        def leader():
            return next(answers, None)

    target = object.__new__(described.DescribedTarget)
    target.desc = type("Desc", (), {"leader": True, "leader_query": None})()
    target.dialect, target.roles, target.name = Dialect(), ("n1", "n2", "n3"), "etcd"
    assert target.nodes("primary") == ["n2"]
    monkeypatch.setattr(described, "LEADER_WAIT", 0.5)
    with pytest.raises(RuntimeError, match="etcd: no node says it leads"):
        target.nodes("primary")
