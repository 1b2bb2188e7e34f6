"""`sleuth run --online --fail-fast` against a live local reference cluster with a bug switch:
the first anomaly found online ends the run long before its time limit, with the anomaly,
a complete record and report, and no node left running."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from test_run_interrupt import _assert_nothing_running, _env, _node_pids, _run_args

from sleuth.base import exits
from sleuth.records import store
from sleuth.records.run import Results

pytestmark = [pytest.mark.cluster]


@pytest.mark.parametrize("workload, fault, anomaly", [
    # at strict serializability the reference cluster's runs apply the grey-box timestamp
    # rules too, online as offline: its stale reads show there first
    ("register", "stale-read", "read-ts-below-write"),
    ("list-append", "write-ts-not-strict", "write-ts-not-above-read"),
])
def test_fail_fast_stops_a_run_at_its_first_anomaly(tmp_path, workload, fault, anomaly):
    args = _run_args(tmp_path, "-w", workload, "--fault", fault, "--time-limit", "300",
                     "--fail-fast", "--shrink-budget", "0")
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "sleuth.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(tmp_path))
    pids: list[int] = []
    while proc.poll() is None and len(pids) < 4 and time.monotonic() - started < 90:
        pids = _node_pids(tmp_path) or pids
        time.sleep(0.2)
    try:
        out, err = proc.communicate(timeout=200)
    finally:
        if proc.poll() is None:
            proc.kill()
    took = time.monotonic() - started
    assert proc.returncode == exits.INVALID, err
    assert took < 150, took  # far from its 300 s of load
    summary = json.loads(out)
    assert summary["valid"] is False and anomaly in summary["anomaly-types"]
    assert summary["reason"].startswith(f"fail-fast: {anomaly} found online at line "), summary
    assert f"found {anomaly} online at line" in err and "--fail-fast: stopping the load" in err
    run_dir = summary["run_dir"]
    results = Results.read(store.results_path(run_dir)).to_json()
    found = results["online"]["found"]
    assert results["valid"] is False and found and found[0]["anomaly"] == anomaly
    assert found[0]["time"] > 0 and found[0]["found-at"] > 0 and found[0]["lines"]
    assert any(n.startswith(f"found online: {anomaly} at line ") for n in summary["notes"])
    assert f"found online: {anomaly}" in open(store.report_path(run_dir)).read()
    _assert_nothing_running(tmp_path, pids)
