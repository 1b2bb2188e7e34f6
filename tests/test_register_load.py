"""The columnar reader of register histories (checker/register_load.py,
checker/register_columns.py) and the refutation without search it enables
(`scarcity.refuted`).

1. The same random histories as tests/test_linearizable.py, written to JSON
   Lines and read by the columnar path: the brute-force linearizer's verdict,
   and the very result (verdict, anomalies, explanations, notes) the general
   reader gives.
2. `refuted` is sound: every key it refutes is refuted by brute force too
   (and it fires often enough for that to mean something).
3. Files the columnar path does not read exactly (nemesis events, node names,
   floats, bad input) give what the general reader gives, errors included.
4. A simulated history with stale reads over many keys: keys refuted without
   search, and the result the general reader gives.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys

import orjson
import pytest
from test_linearizable import brute_force, random_history

from sleuth.checker import register_load
from sleuth.checker.linearizable import check_register
from sleuth.checker.register_columns import key_ops
from sleuth.checker.register_load import RegisterHistory, read_register
from sleuth.history.imports import load
from sleuth.history.jsonl import Event, HistoryError, write_jsonl
from sleuth.workloads.sim_register import simulate


@pytest.fixture
def always_columns(monkeypatch):
    """Small files too take the columnar path."""
    monkeypatch.setattr(register_load, "MIN_BYTES", 0)


def both(path, **kwargs):
    """(columnar result, general result, the columnar history), stats set aside."""
    h = read_register(path)
    a = check_register(h, **kwargs).to_json()
    b = check_register(load(path, events=False), **kwargs).to_json()
    a.pop("stats")
    b.pop("stats")
    return a, b, h


def test_random_histories_agree_with_brute_force_and_the_general_reader(tmp_path, always_columns):
    rnd = random.Random(13)
    seen = {True: 0, False: 0}
    refuted = 0
    for n in range(400):
        initial = rnd.choice([None, 0])
        events, ops = random_history(rnd, True, initial)
        path = str(tmp_path / f"h{n}.jsonl")
        write_jsonl(events, path)
        fco = rnd.random() < 0.3
        a, b, h = both(path, initial_value=initial, failed_cas_observes=fco)
        assert isinstance(h, RegisterHistory)
        assert a == b, n
        if any(e.type == "ok" for e in events):
            assert a["valid"] == brute_force(ops, initial, failed_cas_observes=fco), n
            seen[a["valid"]] += 1
        # Soundness of the refutation, key by key.
        found, _, _ = key_ops(h.columns, fco)
        for k in found:
            if k.refuted:
                refuted += 1
                mine = [o for o in ops if o["key"] == k.key]
                assert brute_force(mine, initial, failed_cas_observes=fco) is False, n
    assert min(seen.values()) > 50
    assert refuted > 20  # it fires, so its soundness was tested


def _lines(events):
    return b"".join(orjson.dumps(e) + b"\n" for e in events)


def _register_file(tmp_path, name, extra=None, n=40):
    """A small valid keyed history as dicts, with `extra` fields merged into some lines."""
    evs = []
    for i in range(n):
        k = i % 3
        evs.append({"index": 2 * i, "time": 10 * i, "type": "invoke", "process": 0, "f": "write",
                    "value": [k, i]})
        evs.append({"index": 2 * i + 1, "time": 10 * i + 5, "type": "ok", "process": 0,
                    "f": "write", "value": [k, i]})
    if extra:
        for i, fields in extra.items():
            evs[i].update(fields)
    path = tmp_path / name
    path.write_bytes(_lines(evs))
    return str(path), evs


@pytest.mark.parametrize("extra", [
    {3: {"node": "n1"}, 4: {"node": "n2"}},  # digits inside strings
    {5: {"time": 51.0}},  # a float time (the general reader takes 51.0 as 51)
    {6: {"error": "timeout 5"}},
    {7: {"ts": -3}},
], ids=["node", "float-time", "error-digits", "negative-ts"])
def test_odd_but_valid_files_give_the_general_result(tmp_path, always_columns, extra):
    path, _ = _register_file(tmp_path, "odd.jsonl", extra)
    a, b, _ = both(path)
    assert a == b and a["valid"] is True


def test_nemesis_events_and_strings_as_values(tmp_path, always_columns):
    evs = [
        {"index": 0, "time": 0, "type": "info", "process": "nemesis", "f": "start-partition",
         "value": ["n1", "n2"]},
        {"index": 1, "time": 1, "type": "invoke", "process": 3, "f": "write", "value": ["x", "a"]},
        {"index": 2, "time": 2, "type": "ok", "process": 3, "f": "write", "value": ["x", "a"]},
        {"index": 3, "time": 3, "type": "invoke", "process": 3, "f": "read", "value": ["x", None]},
        {"index": 4, "time": 4, "type": "ok", "process": 3, "f": "read", "value": ["x", True]},
        {"index": 5, "time": 5, "type": "info", "process": "nemesis", "f": "stop-partition",
         "value": None},
    ]
    path = tmp_path / "n.jsonl"
    path.write_bytes(_lines(evs))
    a, b, h = both(str(path))
    assert isinstance(h, RegisterHistory)
    assert a == b and a["valid"] is False  # true was never written (and is not "a")
    assert [e.f for e in h.nemesis_events()] == ["start-partition", "stop-partition"]


def _ev(i, typ, f, value, process=0):
    return {"index": i, "time": i, "type": typ, "process": process, "f": f, "value": value}


@pytest.mark.parametrize("evs", [
    [_ev(0, "info", "kill", None, "nemesis")],  # nothing to judge
    [_ev(0, "invoke", "write", [1, 2])],  # never completed: info
    [_ev(0, "invoke", "read", [1, None]), _ev(1, "fail", "read", [1, None])],
    [_ev(0, "invoke", "read", [1, None]), _ev(1, "ok", "read", [1, None])],
    [_ev(0, "invoke", "write", [-1, -2]), _ev(1, "ok", "write", [-1, -2]),
     _ev(2, "invoke", "read", [-1, None]), _ev(3, "ok", "read", [-1, -3])],  # negative numbers
    [_ev(0, "invoke", "cas", ["k", [None, 1]]), _ev(1, "ok", "cas", ["k", [None, 1]]),
     _ev(2, "invoke", "cas", ["k", [1, False]]), _ev(3, "ok", "cas", ["k", [1, False]]),
     _ev(4, "invoke", "read", ["k", None]), _ev(5, "ok", "read", ["k", 0])],  # false is not 0
], ids=["nemesis-only", "invoke-only", "failed-read", "read-null", "negative", "false-vs-0"])
def test_edge_histories_agree(tmp_path, always_columns, evs):
    path = tmp_path / "e.jsonl"
    path.write_bytes(_lines(evs))
    a, b, h = both(str(path))
    assert isinstance(h, RegisterHistory) and a == b
    # Anyone else asking for the operations gets the general reader's.
    assert [(o.process, o.f, o.type, o.value, o.invoke_pos, o.complete_pos) for o in h.ops()] \
        == [(o.process, o.f, o.type, o.value, o.invoke_pos, o.complete_pos)
            for o in load(str(path), events=False).ops()]


@pytest.mark.parametrize("extra", [
    {4: {"process": 1}},  # an invoke while one is in flight, then an ok with none
    {5: {"f": "read"}},  # a completion of another f
    {7: {"value": 5}},  # a write completes with no key
    {9: {"index": 3}},
    {2: {"f": "txn"}, 3: {"f": "txn"}},  # not a register op
], ids=["in-flight", "other-f", "no-key", "index", "txn"])
def test_bad_input_is_named_as_the_general_reader_names_it(tmp_path, always_columns, extra):
    path, _ = _register_file(tmp_path, "bad.jsonl", extra)
    with pytest.raises(HistoryError) as general:
        check_register(load(path, events=False))
    with pytest.raises(HistoryError) as columnar:
        check_register(read_register(path))
    assert str(columnar.value) == str(general.value)
    assert re.search(r"bad\.jsonl:\d+: ", str(general.value))


def test_stale_reads_over_many_keys_refuted_without_search(tmp_path):
    events, stats = simulate(ops=20_000, processes=10, keys=40, values=5, crash_rate=0.05,
                             seed=3, bug="stale-read", stale_rate=0.05)
    assert stats["fired"] > 20
    path = str(tmp_path / "stale.jsonl")
    write_jsonl(events, path)
    h = read_register(path)  # over MIN_BYTES: columnar
    assert isinstance(h, RegisterHistory)
    r = check_register(h)
    assert r.stats["keys-refuted-unsearched"] > 0
    a, b, _ = both(path)
    assert a == b and a["valid"] is False


def test_sleuth_check_reads_large_register_files_by_columns(tmp_path):
    """The command itself: a large file goes by columns (the stat says keys were
    refuted unsearched), with the verdict and exit status of the general path."""
    events, _ = simulate(ops=20_000, processes=10, keys=40, values=5, crash_rate=0.05, seed=3,
                         bug="stale-read", stale_rate=0.05)
    path = str(tmp_path / "stale.jsonl")
    write_jsonl(events, path)
    sleuth = os.path.join(os.path.dirname(sys.executable), "sleuth")
    done = subprocess.run([sleuth, "check", path, "-w", "register", "--json"], capture_output=True,
                          text=True, timeout=120)
    record = json.loads(done.stdout)
    assert done.returncode == 1 and record["valid"] is False
    assert record["stats"]["keys-refuted-unsearched"] > 0
    general = check_register(load(path, events=False)).to_json()
    assert record["anomalies"] == json.loads(json.dumps(general["anomalies"], default=repr))


def test_a_small_register_file_never_imports_numpy(tmp_path):
    """Start-up: a small file goes by the general reader, and numpy's import
    (tens of milliseconds) is not paid for it."""
    path, _ = _register_file(tmp_path, "small.jsonl")
    code = ("import sys; from sleuth.checker import WORKLOADS; from sleuth.checker.checks import Checks; "
            "from sleuth.cli.check import judge_file; "
            f"s = judge_file({path!r}, WORKLOADS['register'], Checks(checker='register'))[0]; "
            "print(s, 'numpy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.split() == ["0", "False"]


def test_small_files_use_the_general_reader(tmp_path):
    path, _ = _register_file(tmp_path, "small.jsonl")
    assert not isinstance(read_register(path), RegisterHistory)


def test_events_wanted_use_the_general_reader(tmp_path, always_columns):
    path, _ = _register_file(tmp_path, "r.jsonl")
    h = read_register(path, events=True)
    assert not isinstance(h, RegisterHistory) and len(h.events) == 80
    assert isinstance(read_register(path), RegisterHistory)
    assert [type(e) for e in h.events[:1]] == [Event]
