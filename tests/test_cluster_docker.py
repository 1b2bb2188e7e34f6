"""The same cluster in docker containers: one per node, on a private network, reached by address."""

from __future__ import annotations

import os
import subprocess
import uuid

import psycopg
import pytest
from live import missing
from test_cluster_local import _acked_inserts_survive_a_kill, _cut_oracle_then_heal, _increments

from sleuth.cluster.control import Cluster

pytestmark = pytest.mark.docker  # make test runs a file on one worker (--dist loadfile): one cluster per module


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from sleuth.cluster.runtime_docker import DockerRuntime
    if not DockerRuntime.available():
        missing("a Docker engine", "none answers")
    old = os.environ.get("SLEUTH_HOME")
    os.environ["SLEUTH_HOME"] = str(tmp_path_factory.mktemp("home"))
    c = Cluster(f"d{uuid.uuid4().hex[:6]}")
    try:
        c.up("docker", storage=2, progress=lambda m: None, timeout=120)
        yield c
    finally:
        if c.exists:
            c.down()
        if old is None:
            os.environ.pop("SLEUTH_HOME", None)
        else:
            os.environ["SLEUTH_HOME"] = old


def test_each_node_is_a_container_with_its_own_address(cluster):
    st = cluster.status()
    assert st["runtime"] == "docker" and all(n["state"] == "up" for n in st["nodes"])
    hosts = [n["host"] for n in st["nodes"]]
    assert len(set(hosts)) == len(hosts) and all(h.startswith("172.30.") for h in hosts)
    n = cluster.coordinators()[0]
    p = subprocess.run(["psql", "-h", n.host, "-p", str(n.port), "-U", "sleuth", "-d", "sleuth", "-At",
                        "-c", "SELECT 41 + 1"], capture_output=True, text=True, timeout=30,
                       env={**os.environ, "PGCONNECT_TIMEOUT": "5"})
    assert p.stdout.strip() == "42", p.stderr
    code, out = cluster.runtime.exec("storage1", ["ls", "/data"])
    assert code == 0 and "wal.jsonl" in out


def test_increments_and_kill_9_in_containers(cluster):
    ok, errors, total = _increments(cluster)
    assert errors == [] and total == ok == 200
    assert _acked_inserts_survive_a_kill(cluster, "storage2") >= 200


def test_a_new_coordinator_container_fences_the_old_one(cluster):
    first = cluster.coordinators()[0]
    with psycopg.connect(cluster.dsn(first), autocommit=True) as conn:  # whichever test ran before
        conn.execute("CREATE TABLE IF NOT EXISTS ctr (k bigint, x bigint)")
    cluster.add_coordinator()
    with psycopg.connect(cluster.dsn(first), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("INSERT INTO ctr VALUES (7, 7)")


def test_partition_cuts_the_oracle_from_a_coordinator_then_heals(cluster):
    _cut_oracle_then_heal(cluster)
