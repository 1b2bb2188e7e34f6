"""A database described in a file, run on ssh hosts: targets/etcd.toml on three sshd containers.

The hosts are test_cluster_ssh's (containers of the base image running sshd on a
private docker network; nothing of etcd or sleuth installed). sleuth uploads
/usr/bin/etcd over SFTP, starts a member on each host over ssh, faults them
there (kill -9, SIGSTOP, iptables on the hosts) and the checker judges the
history. Afterwards no etcd process, no iptables rule and no directory of the
run is left on any host, after a run that ended and after one whose sleuth was
killed outright (the next cluster on those hosts sweeps it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from live import needs
from test_cluster_ssh import _remote, hosts  # noqa: F401 - the sshd containers (a fixture)

from sleuth.nemesis.faults import NODE_GRUDGES, PRIMARY_GRUDGE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOML = os.path.join(ROOT, "targets", "etcd.toml")
live = needs("etcd", lambda: os.path.isfile("/usr/bin/etcd"), "needs Debian's etcd-server (/usr/bin/etcd)")


def _left_on(hosts, i: int) -> list[str]:  # noqa: F811 - the fixture's value
    """What a run may leave on host i: etcd processes, tagged iptables rules, cluster directories."""
    ps = [line for line in _remote(hosts, i, "ps -eo stat=,args=").splitlines()
          if "etcd" in line and not line.strip().startswith("Z")]
    rules = [r for r in _remote(hosts, i, "iptables -S INPUT").splitlines() if "sleuth-d" in r]
    dirs = _remote(hosts, i, "ls -1 ~/.sleuth-node 2>/dev/null").split()
    return ps + rules + [f"dir {d}" for d in dirs if d.startswith("d")]


@pytest.mark.docker
@pytest.mark.slow
@live
def test_the_etcd_description_on_ssh_hosts_under_partitions_kills_and_pauses(hosts, tmp_path):  # noqa: F811
    nodes_file, addresses, _ = hosts
    p = subprocess.run([sys.executable, "-m", "sleuth.cli", "run", "--json", "--target", TOML, "--runtime", "ssh",
                        "--nodes", nodes_file, "-w", "register", "--nemesis", "partition,kill,pause,kill-all",
                        "--nemesis-interval", "1", "--time-limit", "16", "--concurrency", "5", "--rate", "100",
                        "--store", str(tmp_path), "--shrink-budget", "0"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.stdout.strip(), p.stderr[-3000:]
    s = json.loads(p.stdout)
    assert s["valid"] is True and p.returncode == 0, p.stderr[-3000:]
    assert {"start-partition", "kill", "pause", "kill-all"} <= set(s["faults"]), s
    assert s["ok"] > 100
    with open(os.path.join(s["run_dir"], "history.jsonl")) as f:
        nemesis = [json.loads(line) for line in f if '"nemesis"' in line]
    cuts = [e["value"] for e in nemesis if e["f"] == "start-partition"]
    assert {c["grudge"] for c in cuts} <= {*NODE_GRUDGES, PRIMARY_GRUDGE} and cuts
    with open(os.path.join(s["run_dir"], "test.json")) as f:
        assert not json.load(f).get("nemesis_errors")
    for n in ("n1", "n2", "n3"):  # each member's log fetched from its host
        with open(os.path.join(s["run_dir"], "nodes", n, "node.log")) as f:
            assert "etcdserver" in f.read()
    for i in range(3):
        assert _left_on(hosts, i) == [], i


@pytest.mark.docker
@pytest.mark.slow
@live
def test_a_killed_sleuths_cluster_is_swept_from_the_hosts_by_the_next(hosts, tmp_path):  # noqa: F811
    nodes_file, _, _ = hosts
    # the built-in etcd this time: the same machinery, its description made in code
    proc = subprocess.Popen([sys.executable, "-m", "sleuth.cli", "run", "--target", "etcd", "--runtime", "ssh",
                             "--nodes", nodes_file, "-w", "register", "--nemesis", "partition",
                             "--nemesis-interval", "0.5", "--time-limit", "60", "--store", str(tmp_path)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "TMPDIR": str(tmp_path)})  # its state dir, which it cannot remove
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not any("sleuth-d" in r for i in range(3)
                                                      for r in _remote(hosts, i, "iptables -S INPUT").splitlines()):
            time.sleep(0.5)  # the members up and a partition made
    finally:
        proc.send_signal(signal.SIGKILL)  # sleuth cannot clean up
        proc.wait()
    left = [x for i in range(3) for x in _left_on(hosts, i)]
    assert any("DROP" in x for x in left) and any("etcd" in x for x in left), left
    from sleuth.targets.described import Node
    from sleuth.targets.described_ssh import SshCluster, read_hosts

    nodes = [Node(f"n{i}", "", i) for i in (1, 2, 3)]
    c = SshCluster(nodes, lambda n: ["true"], hosts=read_hosts(nodes_file, 3, "test"), tag="sweeper")
    try:
        c.prepare(progress=lambda m: None)  # sweeps the clusters of sleuths no longer running
    finally:
        c.down()
    for i in range(3):
        assert _left_on(hosts, i) == [], i


def test_too_few_hosts_and_a_faketime_clock_are_refused(tmp_path):
    nodes = tmp_path / "nodes"
    nodes.write_text("root@127.0.0.1:22\n")
    p = subprocess.run([sys.executable, "-m", "sleuth.cli", "run", "--target", TOML, "--runtime", "ssh",
                        "--nodes", str(nodes), "-w", "register", "--store", str(tmp_path / "s")],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 254 and p.stderr.count("\n") == 1, p.stderr
    assert "names 1 host" in p.stderr and "3 nodes, one per host" in p.stderr
    p = subprocess.run([sys.executable, "-m", "sleuth.cli", "run", "--target", os.path.join(ROOT, "targets",
                                                                                      "mariadb.toml"),
                        "--runtime", "ssh", "--nodes", str(nodes), "-w", "register", "--store", str(tmp_path / "s")],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 254 and p.stderr.count("\n") == 1 and "faketime" in p.stderr, p.stderr
