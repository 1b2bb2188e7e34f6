"""`sleuth run` against a live local cluster: interrupts, crashes, the record it leaves, and
`sleuth check RUN_DIR` agreeing with it.

Every run is a real `sleuth run --runtime local` subprocess; the nodes are real processes whose
pids come from the cluster's node table ($SLEUTH_HOME/clusters/<name>/local.json), read while
the run is live. Every wait is bounded.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from sleuth.base import exits
from sleuth.checker.judge import op_counts
from sleuth.cluster import procs
from sleuth.history.jsonl import read_jsonl
from sleuth.records import store
from sleuth.records.run import Results, TestRecord

pytestmark = [pytest.mark.cluster]

CRASHING_WORKLOAD = """
import sys
from sleuth.workloads import clients
calls = [0]
real = clients.Register.METHOD
def broken(self, *args):
    calls[0] += 1
    if calls[0] > 150:
        raise RuntimeError("workload bug on purpose")
    return real(self, *args)
clients.Register.METHOD = broken
from sleuth.cli import main
sys.argv = ["sleuth"] + sys.argv[1:]
main()
"""


def _run_args(tmp_path, *extra):
    return ["run", "--runtime", "local", "--store", str(tmp_path / "store"), "--json", *extra]


def _env(tmp_path):
    return {**os.environ, "SLEUTH_HOME": str(tmp_path / "home")}


def _node_pids(tmp_path) -> list[int]:
    pids = []
    for table in glob.glob(str(tmp_path / "home" / "clusters" / "*" / "local.json")):
        try:
            with open(table) as f:
                pids += [p["pid"] for p in json.load(f).values() if p.get("pid")]
        except (OSError, ValueError):
            pass
    return pids


def _wait_for_load(tmp_path, proc, ops=100, timeout=90.0) -> list[int]:
    """Until the cluster is up (4 nodes in the table) and `ops` events are in the history."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        pids = _node_pids(tmp_path)
        hist = glob.glob(str(tmp_path / "store" / "*" / "*" / "history.jsonl"))
        if len(pids) >= 4 and hist and sum(1 for _ in open(hist[0], "rb")) >= ops:
            return pids
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"the run never got going: {proc.communicate()[1][-2000:]}")


def _assert_nothing_running(tmp_path, pids):
    assert pids
    deadline = time.monotonic() + 10
    while any(procs.running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if procs.running(p)], "a node outlived the run"
    assert not glob.glob(str(tmp_path / "home" / "clusters" / "*")), "the cluster's directory was left behind"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_heals_stops_the_nodes_and_judges_what_was_recorded(tmp_path, sig):
    args = _run_args(tmp_path, "-w", "register", "--time-limit", "120", "--nemesis", "pause",
                     "--nemesis-interval", "1")
    proc = subprocess.Popen([sys.executable, "-m", "sleuth.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(tmp_path))
    pids = _wait_for_load(tmp_path, proc)
    time.sleep(1.5)  # let the nemesis pause something
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == exits.UNKNOWN, err  # a correct cluster: nothing invalid recorded
    assert "Traceback" not in err and "closed file" not in err, err
    summary = json.loads(out)
    assert summary["reason"] == "interrupted" and summary["valid"] == "unknown"
    run_dir = summary["run_dir"]
    results = Results.read(store.results_path(run_dir)).to_json()
    assert results["reason"] == "interrupted" and results["valid"] == "unknown"
    assert os.path.exists(store.report_path(run_dir)) and "interrupted" in open(store.report_path(run_dir)).read()
    assert results["counts"]["ok"] > 0 and results["counts"] == op_counts(read_jsonl(store.history_path(run_dir)))
    _assert_nothing_running(tmp_path, pids)
    # the nemesis was healed before the nodes stopped: every pause has its resume
    fs = [e.f for e in read_jsonl(store.history_path(run_dir)).nemesis_events()]
    assert fs.count("pause") == fs.count("resume") and fs.count("pause") >= 1, fs
    # and the same verdict again from the run directory
    p = subprocess.run([sys.executable, "-m", "sleuth.cli", "check", run_dir, "--json"],
                       capture_output=True, text=True, timeout=120)
    again = json.loads(p.stdout)
    assert p.returncode == exits.UNKNOWN and again["valid"] == "unknown" and again["reason"] == "interrupted"


def test_a_second_signal_stops_at_once_and_still_leaves_no_node(tmp_path):
    args = _run_args(tmp_path, "-w", "register", "--time-limit", "120")
    proc = subprocess.Popen([sys.executable, "-m", "sleuth.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(tmp_path))
    pids = _wait_for_load(tmp_path, proc)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == exits.UNKNOWN, err
    assert "Traceback" not in err, err
    assert json.loads(out)["reason"].startswith("interrupted")
    _assert_nothing_running(tmp_path, pids)


@pytest.mark.parametrize("method", ["generate", "perform"])
def test_a_workload_that_raises_is_sleuths_crash(tmp_path, method):
    # perform: a bug while an operation is in flight is sleuth's, not an info op of the system
    proc = subprocess.Popen([sys.executable, "-c", CRASHING_WORKLOAD.replace("METHOD", method),
                             *_run_args(tmp_path, "-w", "register", "--time-limit", "60")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(tmp_path))
    pids = []
    deadline = time.monotonic() + 90
    while proc.poll() is None and time.monotonic() < deadline:
        pids = _node_pids(tmp_path) or pids
        time.sleep(0.1)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == exits.CRASHED, err
    assert "Traceback" not in err
    cause = [line for line in err.splitlines() if line.startswith("sleuth: error:")]
    assert len(cause) == 1 and "workload bug on purpose" in cause[0], err
    summary = json.loads(out)
    crash = store.crash_path(summary["run_dir"])
    assert summary["exit"] == exits.CRASHED and os.path.exists(crash)
    text = open(crash).read()
    assert "Traceback" in text and "RuntimeError: workload bug on purpose" in text
    assert TestRecord.read(store.test_path(summary["run_dir"])).to_json()["status"] == exits.CRASHED
    _assert_nothing_running(tmp_path, pids)


def test_one_run_through_store_report_and_check_is_one_consistent_record(tmp_path):
    """write-ts-not-strict: a grey-box timestamp anomaly only the timestamp rules see."""
    p = subprocess.run([sys.executable, "-m", "sleuth.cli",
                        *_run_args(tmp_path, "-w", "list-append", "--fault", "write-ts-not-strict",
                                   "--time-limit", "4", "--nemesis", "clock", "--nemesis-interval", "1")],
                       capture_output=True, text=True, timeout=300, env=_env(tmp_path))
    assert p.returncode == exits.INVALID, p.stderr
    summary = json.loads(p.stdout)  # stdout: one JSON object and nothing else
    run_dir = summary["run_dir"]
    assert {"history.jsonl", "test.json", "results.json", "index.html", "nodes"} <= set(os.listdir(run_dir))
    assert not [f for f in os.listdir(run_dir) if f.endswith(".tmp")] and not os.path.exists(store.crash_path(run_dir))
    test = TestRecord.read(store.test_path(run_dir)).to_json()
    results = Results.read(store.results_path(run_dir)).to_json()
    history = read_jsonl(store.history_path(run_dir))
    # written after the history was closed, from the same values
    assert os.path.getmtime(store.test_path(run_dir)) >= os.path.getmtime(store.history_path(run_dir))
    counts = op_counts(history)
    assert results["counts"] == counts == test["summary"] == {k: summary[k] for k in counts}
    assert test["status"] == summary["exit"] == exits.INVALID and results["valid"] is False
    assert "write-ts-not-above-read" in results["anomaly-types"] == summary["anomaly-types"]
    assert test["checks"]["timestamps"] is True
    nemesis = [e.f for e in history.nemesis_events()]
    assert test["faults_happened"] == {f: nemesis.count(f) for f in ("clock-bump", "clock-strobe") if f in nemesis}
    page = open(store.report_path(run_dir)).read()
    assert f"ok {counts['ok']}, fail {counts['fail']}, info {counts['info']}" in page
    for f, n in test["faults_happened"].items():
        assert f"{f} &times;{n}" in page
    # sleuth check RUN_DIR, and of its history.jsonl: the run's verdict and anomaly types
    for arg in (run_dir, store.history_path(run_dir)):
        c = subprocess.run([sys.executable, "-m", "sleuth.cli", "check", arg, "--json"],
                           capture_output=True, text=True, timeout=120)
        again = json.loads(c.stdout)
        assert c.returncode == exits.INVALID, c.stderr
        assert again["valid"] is False and again["anomaly-types"] == results["anomaly-types"]


def test_a_nemesis_that_injected_nothing_says_so(tmp_path):
    # the first fault would come after 5 s; the load stops after 2: nothing was injected
    p = subprocess.run([sys.executable, "-m", "sleuth.cli",
                        *_run_args(tmp_path, "-w", "register", "--time-limit", "2", "--nemesis", "kill,pause",
                                   "--nemesis-interval", "5")],
                       capture_output=True, text=True, timeout=300, env=_env(tmp_path))
    assert p.returncode == exits.VALID, p.stderr
    summary = json.loads(p.stdout)
    assert summary["faults"] == {} and "kill, pause (no fault was injected)" in p.stderr
    assert TestRecord.read(store.test_path(summary["run_dir"])).to_json()["faults_happened"] == {}
    # and which kinds, and why: in the summary, the JSON and the report
    note = ("--nemesis kill, pause never started: this run had room for 0 faults (one every 10 s, the fault "
            "then its heal, within --time-limit 2 s); raise --time-limit or lower --nemesis-interval")
    assert f"note: {note}" in p.stderr and summary["notes"] == [note]
    page = open(store.report_path(summary["run_dir"])).read()
    assert "no fault was injected" in page and f"<i>note: {note}</i>" in page


def test_an_anomaly_recorded_before_the_interrupt_is_real(tmp_path):
    args = _run_args(tmp_path, "-w", "list-append", "--fault", "write-ts-not-strict", "--time-limit", "120")
    proc = subprocess.Popen([sys.executable, "-m", "sleuth.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(tmp_path))
    pids = _wait_for_load(tmp_path, proc, ops=600)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    summary = json.loads(out)
    assert proc.returncode == exits.INVALID, err
    assert summary["valid"] is False and summary["reason"] == "interrupted"
    assert "write-ts-not-above-read" in summary["anomaly-types"]
    _assert_nothing_running(tmp_path, pids)
