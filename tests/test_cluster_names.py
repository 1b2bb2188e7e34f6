"""Cluster names (issue 43, item 7): a name is one directory under $SLEUTH_HOME/clusters, by the
rule campaign names follow (sleuth.base.names), so `cluster up --name ../../x` cannot write its
state outside $SLEUTH_HOME, `cluster down` cannot delete a directory sleuth did not make, and
no cluster is left that `cluster list` cannot see (`--name bad/name`). Every command refuses
such a name with one line and exit 254 before it touches anything; no cluster starts here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sleuth.base.names import RULE

BAD = ["../../x", "bad/name", "..", ".", "", "a b", "x/../y"]


def cli(home, *args):
    return subprocess.run([sys.executable, "-m", "sleuth.cli", "cluster", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "SLEUTH_HOME": str(home)})


@pytest.mark.parametrize("name", BAD)
@pytest.mark.parametrize("command", [["up", "--runtime", "local"], ["status"], ["down"], ["logs", "oracle"]])
def test_every_cluster_command_refuses_a_name_that_is_not_one_directory(tmp_path, command, name):
    home = tmp_path / "a" / "home"
    p = cli(home, *command, "--name", name)
    assert p.returncode == 254, p.stderr
    assert p.stderr.count("\n") == 1 and RULE in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert os.listdir(tmp_path) == []  # refused before anything was written, in $SLEUTH_HOME or out of it


def test_down_never_removes_a_directory_sleuth_did_not_make(tmp_path):
    """What an earlier `up --name ../../victim` would have left (its state outside
    $SLEUTH_HOME), or any directory holding a cluster.json: `down` refuses, and keeps it."""
    home = tmp_path / "home"
    (home / "clusters").mkdir(parents=True)  # there once any cluster was up
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "cluster.json").write_text(json.dumps({"runtime": "local", "nodes": []}))
    (victim / "precious.txt").write_text("the user's")
    p = cli(home, "down", "--name", "../../victim")
    assert p.returncode == 254 and RULE in p.stderr, p.stderr
    assert (victim / "precious.txt").read_text() == "the user's"


def test_the_rule_is_the_campaign_names_rule():
    from sleuth.base.names import name_problem
    from sleuth.cluster.control import Cluster
    from sleuth.cluster.errors import ClusterError

    for name in BAD:
        assert name_problem(name) is not None
        with pytest.raises(ClusterError, match="names a directory"):
            Cluster(name)  # any caller, not only the CLI
    for name in ("default", "run-1a2b", "t_9", "nightly-2026"):
        assert name_problem(name) is None
