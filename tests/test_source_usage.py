"""The source workload needs the reference cluster's source node; anything else is bad usage (exit 254, one line), refused before anything starts."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("args, says", [
    (["--target", "postgres"], "needs the reference cluster's source node"),
])
def test_the_source_workload_elsewhere_is_refused_before_anything_starts(tmp_path, args, says):
    (tmp_path / "nodes.txt").write_text("root@127.0.0.1\n")
    args = [str(tmp_path / "nodes.txt") if a == "NODES" else a for a in args]
    p = subprocess.run([sys.executable, "-m", "sleuth.cli", "run", "--workload", "source", *args,
                        "--store", str(tmp_path / "store"), "--time-limit", "1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 254 and says in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert not (tmp_path / "store").exists()


def test_cluster_up_wants_both_source_options(tmp_path):
    p = subprocess.run([sys.executable, "-m", "sleuth.cli", "cluster", "up", "--runtime", "local",
                        "--source", "postgresql://x@127.0.0.1/db"], capture_output=True, text=True,
                       timeout=60, env={"SLEUTH_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 254 and "--source and --source-tables go together" in p.stderr
