"""A live campaign of three short runs on the reference cluster: SIGINT (or SIGTERM) in the middle, then --resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SLEUTH = os.path.join(os.path.dirname(sys.executable), "sleuth")
CAMPAIGN = """
[campaign]
name = "short"
runtime = "local"
time-limit = 3
concurrency = 4
rate = 100

[[matrix]]
workload = "register"
seed = [0, 1, 2]
"""


def _record(cdir):
    try:
        with open(os.path.join(cdir, "campaign.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_campaign_keeps_finished_runs_and_resume_runs_only_the_rest(tmp_path, sig):
    path = tmp_path / "short.toml"
    path.write_text(CAMPAIGN)
    store = tmp_path / "store"
    args = [SLEUTH, "campaign", str(path), "--store", str(store), "--no-spark", "--json"]
    env = {**os.environ, "SLEUTH_HOME": str(tmp_path / ".home")}
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 180  # bounded: a wedged run fails the test, not CI
        record = None
        while time.monotonic() < deadline and p.poll() is None:
            dirs = list((store / "campaigns" / "short").glob("*")) if (store / "campaigns").exists() else []
            record = _record(dirs[0]) if dirs else None
            if record and record["runs"][0]["status"] == "done" and record["runs"][1]["status"] == "running":
                break
            time.sleep(0.2)
        assert record and record["runs"][1]["status"] == "running", (record, p.poll())
        time.sleep(2)  # into the second run's load
        p.send_signal(sig)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 2, err[-2000:]  # interrupted: unknown
    summary = json.loads(out)  # stdout is JSON only, even when interrupted
    assert [r["outcome"] for r in summary["runs"]] == ["pass", "pending", "pending"]
    (cdir,) = (store / "campaigns" / "short").iterdir()
    record = _record(cdir)
    first = record["runs"][0]
    assert [r["status"] for r in record["runs"]] == ["done", "interrupted", "pending"]
    assert record["interrupted"] is True
    assert os.path.exists(os.path.join(first["run_dir"], "results.json")) and first["valid"] is True
    assert (cdir / "junit.xml").exists() and (cdir / "index.html").exists()

    r = subprocess.run([*args, "--resume"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "2 of 3 runs to go" in r.stderr
    assert [x["outcome"] for x in json.loads(r.stdout)["runs"]] == ["pass", "pass", "pass"]
    assert list((store / "campaigns" / "short").iterdir()) == [cdir]  # the same campaign, continued
    record = _record(cdir)
    assert record["runs"][0] == first  # the finished run was not run again
    assert len(os.listdir(cdir / "runs" / first["run"]["id"])) == 1
    assert [r["status"] for r in record["runs"]] == ["done"] * 3 and record["interrupted"] is False


def test_a_second_signal_stops_the_campaign_at_once_and_leaves_no_node(tmp_path):
    """As for `sleuth run`, a first signal winds the current run down and a second one stops it
    at once, unjudged; the campaign still ends interrupted (exit 2), with its record and its
    JSON, and none of the run's nodes is left running."""
    import glob

    from test_run_interrupt import _assert_nothing_running, _node_pids

    path = tmp_path / "long.toml"
    path.write_text(CAMPAIGN.replace('name = "short"', 'name = "long"').replace("time-limit = 3", "time-limit = 60"))
    store = tmp_path / "store"
    args = [SLEUTH, "campaign", str(path), "--store", str(store), "--no-spark", "--json"]
    env = {**os.environ, "SLEUTH_HOME": str(tmp_path / "home")}
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    histories = str(store / "campaigns" / "long" / "*" / "runs" / "*" / "*" / "history.jsonl")
    try:
        deadline = time.monotonic() + 120  # bounded: a wedged run fails the test, not CI
        pids: list[int] = []
        while time.monotonic() < deadline and p.poll() is None:
            pids = _node_pids(tmp_path)
            hist = glob.glob(histories)
            if len(pids) >= 4 and hist and sum(1 for _ in open(hist[0], "rb")) >= 100:
                break
            time.sleep(0.2)
        assert len(pids) >= 4, p.poll()
        p.send_signal(signal.SIGTERM)
        time.sleep(0.05)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 2, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    assert [r["outcome"] for r in json.loads(out)["runs"]] == ["pending"] * 3
    (cdir,) = (store / "campaigns" / "long").iterdir()
    record = _record(cdir)
    assert [r["status"] for r in record["runs"]] == ["interrupted", "pending", "pending"]
    assert record["interrupted"] is True
    (hist,) = glob.glob(histories)
    with open(os.path.join(os.path.dirname(hist), "results.json")) as f:
        assert "stopped at once by a second signal" in json.load(f)["reason"]
    _assert_nothing_running(tmp_path, pids)
