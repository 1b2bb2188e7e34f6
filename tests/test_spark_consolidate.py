"""The consolidation's per-run pieces, without Spark: the vectorized pairing against sleuth's own
Pairer, fault windows on a history with known answers, runs dealt into groups.

tests/test_spark_jobs.py runs the same code inside Spark tasks on real runs; these check the
pairing on every operation of simulated histories (crashed and failed ones included) in
seconds.
"""

from __future__ import annotations

import os

import orjson
import pytest
from live import require_module

require_module("pandas")

from sleuth.history.jsonl import Event, History, read_jsonl  # noqa: E402
from sleuth.spark import consolidate  # noqa: E402


def expected_rows(h: History) -> list[tuple]:
    """What the dataset must hold for each operation, from sleuth's Pairer (History.ops)."""
    out = []
    for op in h.ops():
        inv = h.events[op.invoke_pos]
        comp = h.events[op.complete_pos] if op.complete_pos is not None else None
        out.append((op.process, op.f, inv.index, None if comp is None else comp.index, inv.time,
                    None if comp is None else comp.time, op.type, orjson.dumps(inv.value).decode(),
                    None if comp is None or comp.value is None else orjson.dumps(comp.value).decode(),
                    None if comp is None else comp.ts))
    return out


def rows(ops) -> list[tuple]:
    import pandas as pd

    def v(x):
        return None if pd.isna(x) else (int(x) if hasattr(x, "__int__") and not isinstance(x, str) else x)

    return [tuple(v(r[c]) for c in ("process", "f", "invoke_index", "complete_index", "invoke_time",
                                     "complete_time", "outcome", "invoke_value", "complete_value", "ts"))
            for r in ops.to_dict("records")]


@pytest.mark.parametrize("seed", [1, 2])
def test_pairing_equals_the_pairer_on_register_histories_with_crashes_and_fails(tmp_path, seed):
    from sleuth.workloads import sim_register

    path = str(tmp_path / "h.jsonl")
    stats = sim_register.write_sim(path, ops=600, processes=8, keys=3, crash_rate=0.1, fail_rate=0.1,
                                   seed=seed)
    assert stats["info"] > 0 and stats["fail"] > 0
    h = read_jsonl(path)
    ops, faults = consolidate.pair(h.events, keyed=True)
    assert rows(ops) == expected_rows(h) and faults == 0
    assert list(ops["key"]) == [str(h.events[op.invoke_pos].value[0]) for op in h.ops()]


def test_pairing_equals_the_pairer_on_a_list_append_history(tmp_path):
    from sleuth.workloads import sim_list_append

    path = str(tmp_path / "h.jsonl")
    sim_list_append.write_sim(path, "snapshot-isolation", 800, seed=4)
    h = read_jsonl(path)
    ops, _ = consolidate.pair(h.events, keyed=False)
    assert rows(ops) == expected_rows(h) and ops["key"].isna().all()


def test_fault_windows_unfinished_invokes_and_failed_starts():
    """A hand-made history: the answers are written out, not computed."""
    import pandas as pd

    def e(i, typ, p, f, value=None):
        return Event(i, 10 * i, typ, p, f, value)

    events = [
        e(0, "invoke", 0, "read", None),            # before any fault
        e(1, "info", "nemesis", "pause", ["n1"]),   # fault 1 starts
        e(2, "ok", 0, "read", 1),
        e(3, "invoke", 1, "write", 2),              # during fault 1
        e(4, "info", "nemesis", "start-partition", {"error": "no route"}),  # a failed start: no fault
        e(5, "info", "nemesis", "resume", ["n1"]),  # fault 1 heals
        e(6, "info", 1, "write", 2),                # crashed
        e(7, "invoke", 0, "read", None),            # no fault active
        e(8, "info", "nemesis", "kill", ["n2"]),    # fault 2
        e(9, "invoke", 2, "write", 3),              # during fault 2, never completed
        e(10, "fail", 0, "read", None),
    ]
    ops, faults = consolidate.pair(events, keyed=False)
    assert faults == 2
    assert list(ops["invoke_index"]) == [0, 3, 7, 9]
    assert list(ops["outcome"]) == ["ok", "info", "fail", "info"]
    assert list(ops["fault_active"]) == [False, True, False, True]
    assert [None if pd.isna(x) else int(x) for x in ops["complete_index"]] == [2, 6, 10, None]
    assert list(ops["complete_value"]) == ["1", "2", None, None]


def test_runs_are_dealt_into_groups_of_about_equal_bytes_each_run_once(tmp_path):
    """Largest first to the lightest group (LPT): sizes 9, 7, 6, 5, 4, 3 into 3 groups make
    9+3, 7+4, 6+5 (12, 11, 11), where dealing them in order would make 9+5, 7+4, 6+3."""
    runs = []
    for i, size in enumerate((5, 9, 3, 7, 4, 6)):
        d = tmp_path / f"r{i}"
        d.mkdir()
        (d / "history.jsonl").write_bytes(b"x" * size * 100)
        runs.append({"run": f"r{i}", "run_dir": str(d)})
    runs.append({"run": "gone", "run_dir": str(tmp_path / "missing")})  # no history: size 0, still dealt
    groups = consolidate.groups_of(runs, 3)
    assert sorted(r["run"] for g in groups for r in g) == sorted(r["run"] for r in runs)
    sizes = sorted(sum(os.path.getsize(os.path.join(r["run_dir"], "history.jsonl"))
                       for r in g if r["run"] != "gone") // 100 for g in groups)
    assert sizes == [11, 11, 12]
    assert len(consolidate.groups_of(runs[:2], 8)) == 2  # never an empty task
    assert consolidate.groups_of([], 8) == []
