"""A source node in a docker container: it ingests a PostgreSQL on this machine, resumes after
its container's kill -9, and serves real-time-recent reads. The upstream listens on loopback;
containers reach it through a relay on the docker bridge's address (cluster/relay.py), and
this test-only server trusts every address."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import uuid

import psycopg
import pytest
from live import missing
from test_source_workload import cut_was_felt

from sleuth.cluster import relay
from sleuth.cluster.control import Cluster
from sleuth.targets.postgres_server import PostgresServer

pytestmark = pytest.mark.docker


def _bridge() -> str | None:
    p = subprocess.run(["ip", "-4", "-o", "addr", "show", "docker0"], capture_output=True, text=True)
    parts = p.stdout.split()
    return parts[parts.index("inet") + 1].split("/")[0] if "inet" in parts else None


def test_a_source_in_a_container_ingests_resumes_and_serves_recent_reads(tmp_path, monkeypatch):
    from sleuth.cluster.runtime_docker import DockerRuntime
    bridge = _bridge()
    if not DockerRuntime.available() or bridge is None:
        missing("a Docker engine with a docker0 bridge")
    monkeypatch.setenv("SLEUTH_HOME", str(tmp_path / "home"))
    pg = PostgresServer()
    pg.start()
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    c = Cluster(f"d{uuid.uuid4().hex[:6]}")
    try:
        with open(f"{pg.datadir}/pg_hba.conf", "a") as f:
            f.write("host all all 0.0.0.0/0 trust\nhost replication all 0.0.0.0/0 trust\n")
        with psycopg.connect(pg.url, autocommit=True) as up:
            up.execute("SELECT pg_reload_conf()")
            up.execute("CREATE TABLE src (n bigint PRIMARY KEY, v text)")
            up.execute("INSERT INTO src VALUES (1, 'pre')")
        url = asyncio.run_coroutine_threadsafe(relay.start(pg.url, bridge), loop).result(10)
        c.up("docker", storage=1, progress=lambda m: None, timeout=120,
             source={"upstream": url, "tables": ["src"]})
        with psycopg.connect(pg.url, autocommit=True) as up, \
                psycopg.connect(c.dsn(), autocommit=True, connect_timeout=5) as db:
            db.execute("SET real_time_recency = true")
            up.execute("INSERT INTO src VALUES (2, 'post')")
            assert db.execute("SELECT n, v FROM src ORDER BY n").fetchall() == [(1, "pre"), (2, "post")]
            c.runtime.kill("source1")
            c.runtime.restart("source1")
            c.wait_ready(c.node("source1"), 60)
            up.execute("INSERT INTO src VALUES (3, 'after kill')")
            assert [n for n, _ in db.execute("SELECT n, v FROM src ORDER BY n").fetchall()] == [1, 2, 3]
    finally:
        if c.exists:
            c.down()
        loop.call_soon_threadsafe(loop.stop)
        pg.stop()


def _docker_run(tmp_path, *args: str) -> tuple[int, dict, list[dict]]:
    import json
    import os
    import sys
    env = {**os.environ, "SLEUTH_HOME": str(tmp_path / "home")}
    p = subprocess.run([sys.executable, "-m", "sleuth.cli", "run", "--runtime", "docker", "-w", "source",
                        "--time-limit", "10", "--store", str(tmp_path / "store"), "--json", *args],
                       capture_output=True, text=True, env=env, timeout=900)
    s = json.loads(p.stdout)
    with open(os.path.join(s["run_dir"], "history.jsonl")) as f:
        return p.returncode, s, [json.loads(line) for line in f]


@pytest.mark.parametrize("nemesis", ["kill", "partition"])
def test_the_source_workload_on_docker_stays_valid_under_faults_of_its_source(tmp_path, nemesis):
    """`sleuth run --runtime docker -w source`: the upstream listens on the cluster network's
    gateway; killing the source's container, or cutting it from the upstream, loses nothing."""
    from sleuth.cluster.runtime_docker import DockerRuntime
    if not DockerRuntime.available():
        missing("a Docker engine")
    code, s, h = _docker_run(tmp_path, "--nemesis", nemesis, "--nemesis-interval", "2")
    assert code == 0 and s["valid"] is True, s
    faults = [e["value"] for e in h if e["process"] == "nemesis" and e["f"].startswith("start")
              or e["process"] == "nemesis" and e["f"] == "kill"]
    if nemesis == "kill":
        assert any("source1" in (v if isinstance(v, list) else [v]) for v in faults), faults
    else:
        assert any(isinstance(v, dict) and v.get("grudge") == "source-from-upstream" for v in faults), faults
        assert cut_was_felt(h)  # the cut was real: recent reads waited for the heal
    assert sum(e["type"] == "ok" and e["f"] == "append" for e in h) > 50


def test_ack_early_is_caught_on_docker(tmp_path):
    from sleuth.cluster.runtime_docker import DockerRuntime
    if not DockerRuntime.available():
        missing("a Docker engine")
    code, s, _ = _docker_run(tmp_path, "--fault", "ack-early")
    assert code == 1 and "acknowledged-not-visible" in s["anomaly-types"], s
