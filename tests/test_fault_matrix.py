"""The fault matrix: each bug switch is caught, and the same run without it is valid.

Each case is a real `sleuth run` against a local reference cluster (30 s of
load, default concurrency), through the CLI and its `--json` contract.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

MATRIX = [
    # (fault, workload, nemesis)
    ("stale-read", "register", None),
    ("oracle-amnesia", "list-append", "kill"),  # the oracle killed twice: see EXTRA
    ("no-fencing", "register", "dual-leader"),
    ("rtw-no-conflict", "counter", None),
    ("ack-before-durable", "register", "kill"),
    ("write-ts-not-strict", "list-append", None),
    ("ack-early", "source", None),
    ("rtr-skip", "source", None),
]
TIME_LIMIT = os.environ.get("SLEUTH_MATRIX_SECONDS", "30")
# The amnesiac oracle is caught only when a read lands between its restart and the
# next write above its forgotten bound; at the default 5 s interval the kills rotate
# storage, oracle, coordinator and reach the oracle once in 30 s, and that one chance
# was missed now and then. At 2.5 s it is killed twice.
EXTRA = {"oracle-amnesia": ("--nemesis-interval", "2.5")}


def sleuth_run(tmp_path, workload, fault, nemesis, seed=0, extra=()):
    args = [sys.executable, "-m", "sleuth.cli", "run", "--runtime", "local", "--workload", workload,
            "--time-limit", TIME_LIMIT, "--seed", str(seed), "--store", str(tmp_path / "store"), "--json"]
    if fault:
        args += ["--fault", fault]
    if nemesis:
        args += ["--nemesis", nemesis]
    args += list(extra)
    env = {**os.environ, "SLEUTH_HOME": str(tmp_path / "home")}
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    return p.returncode, summary


@pytest.mark.parametrize("fault, workload, nemesis", MATRIX, ids=[m[0] for m in MATRIX])
def test_fault_is_caught(tmp_path, fault, workload, nemesis):
    code, s = sleuth_run(tmp_path, workload, fault, nemesis, extra=EXTRA.get(fault, ()))
    assert code == 1 and s["valid"] is False, s
    assert s["anomaly-types"], s
    assert s["ok"] > 100  # the cluster kept serving: the bug, not an outage, is what was judged
    with open(os.path.join(s["run_dir"], "results.json")) as f:
        assert json.load(f)["valid"] is False


@pytest.mark.parametrize("fault, workload, nemesis", MATRIX, ids=[m[0] for m in MATRIX])
def test_same_run_without_the_fault_is_valid(tmp_path, fault, workload, nemesis):
    code, s = sleuth_run(tmp_path, workload, None, nemesis, extra=EXTRA.get(fault, ()))
    assert code == 0 and s["valid"] is True and s["anomaly-types"] == [], s
    assert s["ok"] > 100
