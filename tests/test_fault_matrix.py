"""The fault matrix: each bug switch is caught, and the same run without it is valid.

Each case is a pair of real `sleuth run`s, with the switch on and off, side by
side, each against a local reference cluster of its own (30 s of load,
default concurrency), through the CLI and its `--json` contract.
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


def start_run(d, workload, fault, nemesis, seed=0, extra=()) -> tuple[subprocess.Popen, object]:
    """A `sleuth run --json` in the background, its own store and SLEUTH_HOME under `d` (its
    cluster gets addresses of its own: runs name their clusters at random), stdout and
    stderr to files (a pipe nobody reads while the other run is awaited could fill and
    stall it)."""
    d.mkdir()
    args = [sys.executable, "-m", "sleuth.cli", "run", "--runtime", "local", "--workload", workload,
            "--time-limit", TIME_LIMIT, "--seed", str(seed), "--store", str(d / "store"), "--json"]
    if fault:
        args += ["--fault", fault]
    if nemesis:
        args += ["--nemesis", nemesis]
    args += list(extra)
    env = {**os.environ, "SLEUTH_HOME": str(d / "home")}
    out = open(d / "stdout", "w+")
    with open(d / "stderr", "w") as err:  # the progress lines, there to read when a case fails
        return subprocess.Popen(args, stdout=out, stderr=err, text=True, env=env), out


def sleuth_run(tmp_path, workload, fault, nemesis, seed=0, extra=()) -> tuple[int, dict]:
    """One `sleuth run --json`, waited for: its exit status and summary."""
    return finish(start_run(tmp_path / "run", workload, fault, nemesis, seed, extra))


def finish(run: tuple[subprocess.Popen, object]) -> tuple[int, dict]:
    p, out = run
    code = p.wait(timeout=600)
    out.seek(0)
    summary = json.loads(out.read().strip().splitlines()[-1])
    out.close()
    return code, summary


@pytest.mark.parametrize("fault, workload, nemesis", MATRIX, ids=[m[0] for m in MATRIX])
def test_fault_is_caught_and_the_same_run_without_it_is_valid(tmp_path, fault, workload, nemesis):
    """The run with the switch on and the same run without it, side by side (each mostly waits
    on its load: the two take about the time of one)."""
    extra = EXTRA.get(fault, ())
    runs = [start_run(tmp_path / "with", workload, fault, nemesis, extra=extra),
            start_run(tmp_path / "without", workload, None, nemesis, extra=extra)]
    try:
        (code, s), (clean_code, clean) = finish(runs[0]), finish(runs[1])
    finally:
        for p, _ in runs:
            if p.poll() is None:
                p.kill()
    assert code == 1 and s["valid"] is False, s
    assert s["anomaly-types"], s
    assert s["ok"] > 100  # the cluster kept serving: the bug, not an outage, is what was judged
    with open(os.path.join(s["run_dir"], "results.json")) as f:
        assert json.load(f)["valid"] is False
    assert clean_code == 0 and clean["valid"] is True and clean["anomaly-types"] == [], clean
    assert clean["ok"] > 100
