"""The ssh runtime against real sshd hosts: containers from the base image, each running sshd.

The hosts start with no sleuth on them; `up` uploads the wheelhouse over SFTP,
installs it, and runs every node there as a process. The tests then drive the
cluster over pgwire from this machine, kill and pause its processes over ssh,
cut the network with iptables on the hosts, and check that `down` leaves
nothing running.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
import uuid

import psycopg
import pytest
from live import missing
from test_cluster_local import _acked_inserts_survive_a_kill, _cut_oracle_then_heal, _increments
from test_source_workload import cut_was_felt

from sleuth.cluster.control import Cluster

pytestmark = pytest.mark.docker  # one worker runs this whole file, in order (--dist loadfile)
N_HOSTS = 4


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    """Four sshd containers on their own network; yields (nodes file, their addresses, key path)."""
    from sleuth.cluster.runtime_docker import DockerRuntime
    if not DockerRuntime.available():
        missing("a Docker engine", "none answers")
    import docker
    import paramiko

    from sleuth.cluster.image import ensure_base

    base = ensure_base(progress=lambda m: None)
    tmp = tmp_path_factory.mktemp("ssh")
    key = paramiko.RSAKey.generate(2048)
    key_path = str(tmp / "id_rsa")
    key.write_private_key_file(key_path)
    pub = f"{key.get_name()} {key.get_base64()}"
    client = docker.from_env()
    tag = f"sleuth-sshtest-{uuid.uuid4().hex[:6]}"
    third = random.Random(tag).randint(1, 250)
    subnet = f"172.29.{third}"
    net = client.networks.create(tag, driver="bridge", labels={"sleuth.test": tag}, ipam=docker.types.IPAMConfig(
        pool_configs=[docker.types.IPAMPool(subnet=f"{subnet}.0/24", gateway=f"{subnet}.1")]))
    script = ("mkdir -p /run/sshd /root/.ssh && chmod 700 /root/.ssh && "
              f"echo '{pub}' > /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys && "
              "(ls /etc/ssh/ssh_host_*_key >/dev/null 2>&1 || ssh-keygen -A) && exec /usr/sbin/sshd -D -e")
    api, containers, addresses = client.api, [], []
    try:
        for i in range(N_HOSTS):
            ip = f"{subnet}.{10 + i}"
            c = api.create_container(
                base, command=["/bin/sh", "-c", script], name=f"{tag}-h{i}", hostname=f"h{i}",
                host_config=api.create_host_config(cap_add=["NET_ADMIN"], init=True),
                networking_config=api.create_networking_config({tag: api.create_endpoint_config(ipv4_address=ip)}),
                labels={"sleuth.test": tag})
            api.start(c["Id"])
            containers.append(c["Id"])
            addresses.append(ip)
        nodes_file = tmp / "nodes"
        nodes_file.write_text("# the test's sshd containers\n"
                              + "".join(f"root@{ip}:22 key={key_path}\n" for ip in addresses))
        _wait_for_sshd(addresses, key_path)
        yield str(nodes_file), addresses, key_path
    finally:
        for cid in containers:
            api.remove_container(cid, force=True)
        net.remove()


def _wait_for_sshd(addresses, key_path, timeout=60):
    import paramiko
    deadline = time.monotonic() + timeout
    for ip in addresses:
        while True:
            try:
                c = paramiko.SSHClient()
                c.set_missing_host_key_policy(paramiko.AutoAddPolicy())
                c.connect(ip, username="root", key_filename=key_path, timeout=3)
                c.close()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    old = os.environ.get("SLEUTH_HOME")
    os.environ["SLEUTH_HOME"] = str(tmp_path_factory.mktemp("home"))
    yield os.environ["SLEUTH_HOME"]
    if old is None:
        os.environ.pop("SLEUTH_HOME", None)
    else:
        os.environ["SLEUTH_HOME"] = old


@pytest.fixture(scope="module")
def cluster(hosts, home):
    nodes_file, _, _ = hosts
    c = Cluster(f"s{uuid.uuid4().hex[:6]}")
    try:
        c.up("ssh", storage=2, nodes_file=nodes_file, progress=lambda m: None, timeout=120)
        yield c
    finally:
        if c.exists:
            c.down()


def _remote(hosts, i, command):
    import paramiko
    _, addresses, key_path = hosts
    c = paramiko.SSHClient()
    c.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    c.connect(addresses[i], username="root", key_filename=key_path, timeout=5)
    try:
        _, out, _ = c.exec_command(command, timeout=30)
        return out.read().decode()
    finally:
        c.close()


def test_nodes_run_on_the_hosts_round_robin_and_answer_psql(cluster, hosts):
    _, addresses, _ = hosts
    st = cluster.status()
    assert st["runtime"] == "ssh" and [n["state"] for n in st["nodes"]] == ["up"] * 4
    assert [n["host"] for n in st["nodes"]] == addresses  # oracle, storage1, storage2, coord1
    for i, n in enumerate(st["nodes"]):  # each process runs on its host, not on this machine
        assert f"--name {n['name']}" in _remote(hosts, i, "ps -eo args"), n
    n = cluster.coordinators()[0]
    p = subprocess.run(["psql", "-h", n.host, "-p", str(n.port), "-U", "sleuth", "-d", "sleuth", "-At",
                        "-c", "SELECT 41 + 1"], capture_output=True, text=True, timeout=30,
                       env={**os.environ, "PGCONNECT_TIMEOUT": "5"})
    assert p.stdout.strip() == "42", p.stderr
    code, out = cluster.runtime.exec("storage1", ["ls", cluster.runtime.data_path("storage1")])
    assert code == 0 and "wal.jsonl" in out


def test_status_json_from_another_process(cluster):
    p = subprocess.run([sys.executable, "-m", "sleuth.cli", "cluster", "status", "--json", "--name", cluster.name],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    st = json.loads(p.stdout)
    assert st["runtime"] == "ssh" and {n["state"] for n in st["nodes"]} == {"up"}


def test_increments_and_kill_9_over_ssh(cluster):
    ok, errors, total = _increments(cluster)
    assert errors == [] and total == ok == 200
    assert _acked_inserts_survive_a_kill(cluster, "storage2") >= 200


def test_pause_and_resume_over_ssh(cluster):
    rt = cluster.runtime
    rt.pause("storage1")
    try:
        assert rt.state("storage1") == "paused"
    finally:
        rt.resume("storage1")
    assert rt.state("storage1") == "running"


def test_partition_with_iptables_on_the_hosts_then_heal(cluster, hosts):
    def rule_on_the_host():
        assert "sleuth-" + cluster.name in _remote(hosts, 0, "iptables -S INPUT")

    def rule_gone():
        assert "DROP" not in _remote(hosts, 0, "iptables -S INPUT")

    _cut_oracle_then_heal(cluster, check_cut=rule_on_the_host, check_healed=rule_gone)


def test_a_second_coordinator_on_a_shared_host_fences_the_first(cluster):
    from sleuth.cluster.runtime_ssh import SshError
    first = cluster.coordinators()[0]
    with psycopg.connect(cluster.dsn(first), autocommit=True) as conn:  # whichever test ran before
        conn.execute("CREATE TABLE IF NOT EXISTS ctr (k bigint, x bigint)")
    second = cluster.add_coordinator()
    oracle = cluster.node("oracle")
    assert second.host == oracle.host and second.port != first.port  # the fifth node wraps to the first host
    with psycopg.connect(cluster.dsn(first), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("INSERT INTO ctr VALUES (7, 7)")
    with pytest.raises(SshError, match="share host"):
        cluster.runtime.cut(second.name, second.host, "oracle", oracle.host)


def test_down_leaves_nothing_running_on_the_hosts(cluster, hosts):
    cluster.down()
    for i in range(N_HOSTS):
        assert "sleuth.cluster.node" not in _remote(hosts, i, "ps -eo args")
        assert cluster.name not in _remote(hosts, i, "ls ~/.sleuth-node")


def test_sleuth_run_over_ssh_with_kill_and_partition(hosts, home, tmp_path):
    """The whole loop on ssh hosts: a short run under kill and partition faults, judged valid."""
    nodes_file, _, _ = hosts
    p = subprocess.run([sys.executable, "-m", "sleuth.cli", "run", "--runtime", "ssh", "--nodes", nodes_file,
                        "-w", "register", "--nemesis", "kill,partition", "--nemesis-interval", "2",
                        "--time-limit", "10", "--concurrency", "4", "--seed", "3", "--store", str(tmp_path),
                        "--json"], capture_output=True, text=True, timeout=400)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    assert summary["valid"] is True and summary["ok"] > 20
    with open(os.path.join(summary["run_dir"], "history.jsonl")) as f:
        events = [json.loads(line) for line in f if '"nemesis"' in line]
    fs = {e["f"] for e in events}
    assert {"kill", "restart", "start-partition", "stop-partition"} <= fs, fs  # each kind in its round
    with open(os.path.join(summary["run_dir"], "test.json")) as f:
        assert not json.load(f).get("nemesis_errors")


def test_the_source_workload_over_ssh_under_partition(hosts, home, tmp_path):
    """The source node on an ssh host ingests the upstream PostgreSQL sleuth starts on this
    machine (listening where the hosts reach it); cutting the source from it loses nothing."""
    nodes_file, _, _ = hosts
    p = subprocess.run([sys.executable, "-m", "sleuth.cli", "run", "--runtime", "ssh", "--nodes", nodes_file,
                        "-w", "source", "--nemesis", "partition", "--nemesis-interval", "2",
                        "--time-limit", "10", "--store", str(tmp_path), "--json"],
                       capture_output=True, text=True, timeout=400)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    assert summary["valid"] is True, summary
    with open(os.path.join(summary["run_dir"], "history.jsonl")) as f:
        h = [json.loads(line) for line in f]
    assert any(e["process"] == "nemesis" and isinstance(e["value"], dict)
               and e["value"].get("grudge") == "source-from-upstream" for e in h)
    assert cut_was_felt(h)  # the cut was real: recent reads waited for the heal
    assert sum(e["type"] == "ok" and e["f"] == "append" for e in h) > 50
    assert any(e["type"] == "ok" and e["f"] == "rtr-read" for e in h)
