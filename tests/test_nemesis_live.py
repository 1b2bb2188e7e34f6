"""Nemeses against a correct reference cluster: every partition grudge and both clock modes
happen, are recorded in the history, and the run stays valid (no fault of the cluster's own)."""

from __future__ import annotations

import json
import os

import pytest
from test_fault_matrix import sleuth_run

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_every_grudge_and_clock_mode_leave_a_correct_cluster_valid(tmp_path):
    # seed 3 draws partition, clock, partition, partition, partition, clock first: every grudge and
    # both clock modes within the first six faults (a fault every 3 s)
    code, s = sleuth_run(tmp_path, "list-append", None, "partition,clock", seed=3,
                         extra=["--nemesis-interval", "1.5"])
    assert code == 0 and s["valid"] is True and s["ok"] > 100, s
    with open(os.path.join(s["run_dir"], "history.jsonl")) as f:
        events = [json.loads(line) for line in f if '"nemesis"' in line]
    grudges = {e["value"]["grudge"] for e in events if e["f"] == "start-partition"}
    assert grudges == {"isolate-one", "oracle-from-coordinators", "halves", "majorities-ring"}, grudges
    fs = {e["f"] for e in events}
    assert {"clock-bump", "clock-strobe", "clock-reset", "stop-partition"} <= fs, fs
    strobes = [e for e in events if e["f"] == "clock-reset" and "flips" in (e["value"] or {})]
    assert any(e["value"]["flips"] > 0 for e in strobes)  # one healed at the very end may not have flipped yet
    with open(os.path.join(s["run_dir"], "test.json")) as f:
        assert not json.load(f).get("nemesis_errors")
