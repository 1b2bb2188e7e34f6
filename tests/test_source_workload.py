"""The source workload live (`sleuth run --workload source`, local runtime): a correct cluster
stays valid while the source node and the upstream PostgreSQL are killed, paused and cut
apart, and each of the source's fault switches is caught. Short runs (10 s of load, faults
every 2 s; the rotation of roles reaches the source node and the upstream first), through
the CLI and its `--json` contract."""

from __future__ import annotations

import json
import os

import pytest
from test_fault_matrix import sleuth_run

pytestmark = pytest.mark.cluster

SECONDS = ["--time-limit", "10"]


def cut_was_felt(h: list[dict]) -> bool:
    """Did cutting the source from its upstream hold real-time-recent reads up? A read invoked
    while the cut stood cannot learn the upstream's frontier: it fails (57014, past its timeout)
    or completes only after the heal. (A read takes well under 0.5 s when nothing is cut, so
    one invoked at least 0.5 s before the heal that ends after it was held up.)"""
    windows, start = [], None
    for e in h:
        if e["process"] == "nemesis" and e["f"] == "start-partition" and isinstance(e["value"], dict):
            start = e["index"] if e["value"].get("grudge") == "source-from-upstream" else None
        elif e["process"] == "nemesis" and e["f"] == "stop-partition" and start is not None:
            windows.append((start, e["index"], e["time"]))
            start = None
    pending: dict = {}
    for e in h:
        if e["process"] == "nemesis" or e["f"] != "rtr-read":
            continue
        if e["type"] == "invoke":
            pending[e["process"]] = (e["index"], e["time"])
            continue
        i, t = pending.pop(e["process"], (None, None))
        for a, b, healed in windows:
            if i is None or not a < i < b:
                continue
            if "57014" in (e.get("error") or "") or (e["index"] > b and t < healed - 500_000_000):
                return True
    return False


@pytest.mark.parametrize("nemesis, expected", [
    ("kill", {"source1", "upstream"}),
    ("pause", {"source1", "upstream"}),
    ("partition", {"source-from-upstream"}),
])
def test_a_correct_cluster_stays_valid_under_faults_of_its_source_and_upstream(tmp_path, nemesis, expected):
    code, s = sleuth_run(tmp_path, "source", None, nemesis, extra=[*SECONDS, "--nemesis-interval", "2"])
    assert code == 0 and s["valid"] is True, s
    with open(os.path.join(s["run_dir"], "history.jsonl")) as f:
        events = [json.loads(line) for line in f if '"nemesis"' in line]
    hit = set()
    for e in events:
        v = e["value"]
        hit |= set(v) if isinstance(v, list) else {v.get("grudge")} if isinstance(v, dict) else set()
    assert expected <= hit, events  # the faults really reached the source and its upstream
    with open(os.path.join(s["run_dir"], "results.json")) as f:
        stats = json.load(f)["stats"]
    assert stats["rtr-reads"] > 20 and stats["ok-appends"] > 50 and stats["acks"] > 5, stats


@pytest.mark.parametrize("fault, anomaly", [("ack-early", "acknowledged-not-visible"),
                                            ("rtr-skip", "stale-rtr-read")])
def test_each_source_switch_is_caught(tmp_path, fault, anomaly):
    code, s = sleuth_run(tmp_path, "source", fault, None, extra=SECONDS)
    assert code == 1 and s["valid"] is False and anomaly in s["anomaly-types"], s


def test_the_same_run_without_a_switch_is_valid(tmp_path):
    code, s = sleuth_run(tmp_path, "source", None, None, extra=SECONDS)
    assert code == 0 and s["valid"] is True and s["anomaly-types"] == [], s
    with open(os.path.join(s["run_dir"], "results.json")) as f:
        results = json.load(f)
    # the run marks its final read in the history, so the checker judged lost changes
    assert results["stats"]["final-reads"] >= 1 and results["notes"] == [], results["notes"]
