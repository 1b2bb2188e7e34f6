"""The fault matrix: each bug switch is caught, and the same run without it is valid.

Each case is a pair of real `sleuth run`s, with the switch on and off, side by
side, each against a local reference cluster of its own (30 s of load,
default concurrency), through the CLI and its `--json` contract. Both runs'
histories are then judged online (`sleuth check --follow`, under the checks
the run recorded): the same verdict and anomaly types as offline (issue 47).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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


def start(d, *args: str, env: dict | None = None) -> subprocess.Popen:
    """`sleuth ARGS` in the background, stdout and stderr to files under `d` (a pipe nobody
    reads while another run is awaited could fill and stall it; stderr's progress lines are
    there to read when a case fails)."""
    d.mkdir()
    with open(d / "stdout", "w") as out, open(d / "stderr", "w") as err:
        return subprocess.Popen([sys.executable, "-m", "sleuth.cli", *args], stdout=out, stderr=err,
                                text=True, env=env)


def side_by_side(runs: dict) -> dict:
    """Wait for runs started with `start` ({name: (process, its directory)}): per name, the exit
    status and the JSON of its last stdout line. Any still running when one fails is killed."""
    try:
        return {name: (p.wait(timeout=600), json.loads((d / "stdout").read_text().strip().splitlines()[-1]))
                for name, (p, d) in runs.items()}
    finally:
        for p, _ in runs.values():
            if p.poll() is None:
                p.kill()


def start_run(d, workload, fault, nemesis, seed=0, extra=()) -> tuple[subprocess.Popen, Path]:
    """A `sleuth run --json` on the local runtime, its own store and SLEUTH_HOME under `d`
    (its cluster gets addresses of its own: runs name their clusters at random)."""
    args = ["run", "--runtime", "local", "--workload", workload, "--time-limit", TIME_LIMIT,
            "--seed", str(seed), "--store", str(d / "store"), "--json"]
    if fault:
        args += ["--fault", fault]
    if nemesis:
        args += ["--nemesis", nemesis]
    args += list(extra)
    return start(d, *args, env={**os.environ, "SLEUTH_HOME": str(d / "home")}), d


def sleuth_run(tmp_path, workload, fault, nemesis, seed=0, extra=()) -> tuple[int, dict]:
    """One `sleuth run --json`, waited for: its exit status and summary."""
    return side_by_side({"run": start_run(tmp_path / "run", workload, fault, nemesis, seed, extra)})["run"]


@pytest.mark.parametrize("fault, workload, nemesis", MATRIX, ids=[m[0] for m in MATRIX])
def test_fault_is_caught_and_the_same_run_without_it_is_valid(tmp_path, fault, workload, nemesis):
    """The run with the switch on and the same run without it, side by side (each mostly waits
    on its load: the two take about the time of one)."""
    extra = EXTRA.get(fault, ())
    done = side_by_side({"with": start_run(tmp_path / "with", workload, fault, nemesis, extra=extra),
                         "without": start_run(tmp_path / "without", workload, None, nemesis, extra=extra)})
    (code, s), (clean_code, clean) = done["with"], done["without"]
    assert code == 1 and s["valid"] is False, s
    assert s["anomaly-types"], s
    assert s["ok"] > 100  # the cluster kept serving: the bug, not an outage, is what was judged
    with open(os.path.join(s["run_dir"], "results.json")) as f:
        assert json.load(f)["valid"] is False
    assert clean_code == 0 and clean["valid"] is True and clean["anomaly-types"] == [], clean
    assert clean["ok"] > 100
    for summary in (s, clean):
        online_agrees_with_offline(summary["run_dir"])


# `sleuth check --follow` of a run's history under the checks the run recorded (test.json), as
# the run would judge it online; --idle-timeout ends it (a finished run's history has no end marker)
FOLLOW = """
import sys
from sleuth.checker import WORKLOADS
from sleuth.cli.follow import follow_check
from sleuth.records.run import TestRecord
from sleuth.records.store import history_path, test_path

checks = TestRecord.read(test_path(sys.argv[1])).checks
sys.exit(follow_check(history_path(sys.argv[1]), WORKLOADS[checks.checker], checks, 1.0, True, False))
"""


def online_agrees_with_offline(run_dir: str) -> None:
    """Issue 47's soundness on a fault matrix run: judged online, the run's history gets the
    verdict and anomaly types of the offline check of the run (`sleuth check RUN_DIR`), and
    every type reported online is among them."""
    offline = subprocess.run([sys.executable, "-m", "sleuth.cli", "check", run_dir, "--json"],
                             capture_output=True, text=True, timeout=300)
    online = subprocess.run([sys.executable, "-c", FOLLOW, run_dir], capture_output=True, text=True,
                            timeout=300)
    assert online.returncode == offline.returncode, (online.stderr[-2000:], offline.stderr[-2000:])
    want = json.loads(offline.stdout.strip().splitlines()[-1])
    got = json.loads(online.stdout.strip().splitlines()[-1])
    assert (got["valid"], got["anomaly-types"]) == (want["valid"], want["anomaly-types"]), run_dir
    found = {f["anomaly"] for f in got["online"]["found"]}
    assert found <= set(want["anomaly-types"]), (found, want["anomaly-types"])
