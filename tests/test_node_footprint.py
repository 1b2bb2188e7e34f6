"""A node of the reference cluster installs only what a node needs (cluster/image.py).

The docker image and the ssh runtime install nodes from the same wheelhouse with
the same command; here that wheelhouse is built for real, installed offline into
a fresh venv, and a local cluster runs on that venv's interpreter: no matplotlib,
scipy, paramiko, docker, jinja2 or tqdm, and every role still works (pgwire and
SQL, the oracle, storage sealing Parquet with pyarrow)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import psycopg
import pytest

from sleuth.cluster import image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOT_FOR_NODES = ("matplotlib", "scipy", "paramiko", "docker", "jinja2", "tqdm", "click", "psycopg")


def test_the_image_and_ssh_install_the_same_node_only_command():
    cmd = image.install_command("/opt/sleuth/bin/pip", "/wheels")
    assert "--no-index" in cmd and f"-r /wheels/{image.NODE_REQUIREMENTS}" in cmd
    assert cmd.endswith("--no-deps --find-links /wheels sleuth")  # sleuth alone, not its dependencies
    assert cmd in image.dockerfile("sleuth-base:x")
    import inspect

    from sleuth.cluster import runtime_ssh
    assert "install_command(" in inspect.getsource(runtime_ssh.SshRuntime.up_network)


@pytest.mark.slow
@pytest.mark.cluster
def test_a_node_only_venv_lacks_the_heavy_dependencies_and_its_cluster_works(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    image.wheelhouse(ROOT, str(wheels))
    names = sorted(p.name.split("-")[0].lower() for p in wheels.glob("*.whl"))
    assert {"sleuth", "orjson", "pyarrow", "sqlglot"} <= set(names)
    assert not set(names) & set(NOT_FOR_NODES), names
    assert [r.split(">")[0] for r in (wheels / image.NODE_REQUIREMENTS).read_text().split()] == \
        list(image.NODE_PACKAGES)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run(image.install_command(str(venv / "bin" / "pip"), str(wheels)), shell=True,
                   check=True, timeout=300)
    py = str(venv / "bin" / "python")
    for mod in NOT_FOR_NODES:
        p = subprocess.run([py, "-c", f"import {mod}"], capture_output=True, timeout=60, cwd=tmp_path)
        assert p.returncode != 0, f"{mod} is importable in the node venv"

    from sleuth.cluster.control import Cluster
    from sleuth.cluster.rpc import call_sync

    monkeypatch.setenv("SLEUTH_HOME", str(tmp_path / "home"))
    c = Cluster(f"t{uuid.uuid4().hex[:8]}")
    try:
        c.up("local", storage=1, progress=lambda m: None, python=py)
        assert all(p["argv"][0] == py for p in c.runtime.procs.values())
        with psycopg.connect(c.dsn(), autocommit=True, connect_timeout=5) as conn:
            conn.execute("CREATE TABLE t (k bigint, v text)")
            conn.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
            s = c.node("storage1")
            assert call_sync(s.host, s.port, "seal", timeout=30) == 2  # pyarrow writes Parquet
            assert conn.execute("SELECT sum(k) FROM t").fetchone() == (3,)
    finally:
        if c.exists:
            c.down()
