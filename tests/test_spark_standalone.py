"""Two standalone Spark clusters on one machine at once (`make spark-up` by two users, or two
test files under xdist): each comes up on its own ports and answers as itself.

A master opened a REST submission server on a fixed port (6066); with ports that may not move
(`spark.port.maxRetries=0`, so a taken UI port is noticed instead of silently moved) the second
master died at start and `spark-up` waited 90 s for it (it failed `make test` once). sleuth submits
through spark://, so the REST server is off."""

from __future__ import annotations

import json
import os

import pytest
from live import require_module

pytestmark = pytest.mark.spark


def test_two_standalone_clusters_come_up_side_by_side(tmp_path):
    require_module("pyspark")
    from sleuth.spark.standalone import down, free_port, up

    states = [str(tmp_path / "a"), str(tmp_path / "b")]
    try:
        masters = [up(s, port=free_port(), cores=1, say=lambda m: None) for s in states]
        assert masters[0] != masters[1]
        for state, master in zip(states, masters):
            with open(os.path.join(state, "cluster.json")) as f:
                assert json.load(f)["master"] == master
            with open(os.path.join(state, "master.log"), errors="replace") as f:
                log = f.read()
            assert "BindException" not in log and "ALIVE" in log
    finally:
        for s in states:
            down(s, say=lambda m: None)
