"""The compact reader's typed micro-ops (sleuth.history.jsonl `txn_lines`): `sleuth check`
reads a list-append or rw-register file with micro-ops as tuples, and the checkers
must judge exactly as they judge the same history held as lists.

Each random history (the brute-force suites' generators, so every anomaly those
find is here) is judged twice under every model of the lattice: in memory, as
lists, and from its file through the workload's reader, as tuples; the two JSON
results must be equal. Then the reader's own cases: nemesis events and odd
values between transactions, and bad micro-ops named by line as before.
"""

from __future__ import annotations

import json
import random

import pytest
from test_cycles_bruteforce import generate, to_history
from test_rw_register_options import random_history

from sleuth.checker import WORKLOADS, list_append, rw_register
from sleuth.checker.models import MODELS
from sleuth.history.jsonl import Event, History, HistoryError, read_jsonl, write_jsonl

CHECK = {"list-append": list_append.check, "rw-register": rw_register.check}


def judged(workload: str, h: History) -> list[str]:
    """Each model's whole JSON result, less the stats' timings."""
    out = []
    for model in MODELS:
        d = CHECK[workload](h, model).to_json()
        d["stats"] = {k: v for k, v in d.get("stats", {}).items() if not k.endswith("seconds")}
        out.append(json.dumps(d, sort_keys=True, default=repr))
    return out


def both_ways(tmp_path, workload: str, h: History) -> tuple[list[str], list[str]]:
    path = tmp_path / "h.jsonl"
    write_jsonl(h.events, path)
    typed = WORKLOADS[workload].load(str(path), events=False)
    mops = [m for op in typed.ops() for m in (op.value or ())]
    assert mops and all(type(m) is tuple for m in mops)  # the typed path was taken
    in_memory = History(h.events, str(path))  # the same source, so explanations name the same file
    return judged(workload, in_memory), judged(workload, typed)


@pytest.mark.parametrize("seed", range(60))
def test_list_append_judged_the_same_from_tuples(tmp_path, seed):
    txns = generate(random.Random(20_000 + seed), final_read=seed % 2 == 0)
    lists, tuples = both_ways(tmp_path, "list-append", to_history(txns))
    assert tuples == lists


@pytest.mark.parametrize("seed", range(60))
def test_rw_register_judged_the_same_from_tuples(tmp_path, seed):
    rnd = random.Random(30_000 + seed)
    lists, tuples = both_ways(tmp_path, "rw-register", to_history(random_history(rnd, rnd.randint(3, 8), 3)))
    assert tuples == lists


def test_the_random_histories_hold_anomalies():
    """The comparison above means something only if the histories are not all valid."""
    found = set()
    for seed in range(60):
        found.update(list_append.check(to_history(generate(random.Random(20_000 + seed))),
                                       "strict-serializable").anomaly_types)
        rnd = random.Random(30_000 + seed)
        found.update(rw_register.check(to_history(random_history(rnd, rnd.randint(3, 8), 3)),
                                       "strict-serializable").anomaly_types)
    assert {"G2-item", "G-single", "G1b", "G1c-realtime", "G-cursor", "lost-update", "future-read"} <= found, found


def ev(i: int, typ: str, p, f: str, value) -> Event:
    return Event(i, 10 * i, typ, p, f, value)


def test_nemesis_and_odd_values_between_txns(tmp_path):
    """Nemesis events (lists, maps, strings as values) and an info with a non-list value
    sit among txns: each line keeps its value as written, the txns theirs as tuples."""
    events = [
        ev(0, "info", "nemesis", "kill", ["n1", "n2"]),
        ev(1, "invoke", 0, "txn", [["append", "x", 1], ["r", "y", None]]),
        ev(2, "info", "nemesis", "partition", {"grudge": {"n1": ["n2"]}}),
        ev(3, "ok", 0, "txn", [["append", "x", 1], ["r", "y", [7]]]),
        ev(4, "invoke", 1, "txn", [["r", "x", None]]),
        ev(5, "info", "nemesis", "heal", "all"),
        ev(6, "info", 1, "txn", "timed out"),
    ]
    path = tmp_path / "h.jsonl"
    write_jsonl(events, path)
    h = read_jsonl(path, events=False, micro_ops=("append", "r"))
    assert [(e.f, e.value) for e in h.nemesis_events()] == [
        ("kill", ["n1", "n2"]), ("partition", {"grudge": {"n1": ["n2"]}}), ("heal", "all")]
    ok, crashed = h.ops()
    assert ok.value == [("append", "x", 1), ("r", "y", [7])]
    assert crashed.type == "info" and crashed.invoke_value == [("r", "x", None)]
    assert crashed.complete_pos == 6 and crashed.value == [("r", "x", None)]
    general = read_jsonl(path, events=False)
    assert [(o.type, o.invoke_pos, o.complete_pos) for o in general.ops()] == \
        [(o.type, o.invoke_pos, o.complete_pos) for o in h.ops()]


@pytest.mark.parametrize("block", [1 << 20, 97])  # one block; blocks cut between and inside the runs
def test_nemesis_lines_in_a_row(tmp_path, monkeypatch, block):
    """Consecutive nemesis lines, at the start, in the middle and at the end (no last
    newline): each line is read once, and the txns around them still as tuples."""
    import sleuth.history.jsonl as history

    monkeypatch.setattr(history, "CHUNK_BYTES", block)
    nemesis = [["n1"], {"grudge": {}}, "all"]
    events, i = [], 0
    for p in range(3):
        for v in nemesis[: p + 1]:
            events.append(ev(i, "info", "nemesis", "kill", v))
            i += 1
        events.append(ev(i, "invoke", p, "txn", [["append", "x", p]]))
        events.append(ev(i + 1, "ok", p, "txn", [["append", "x", p]]))
        i += 2
    events += [ev(i, "info", "nemesis", "heal", None), ev(i + 1, "info", "nemesis", "heal", "all")]
    path = tmp_path / "h.jsonl"
    path.write_bytes(b"".join(history.dumps_event(e) for e in events).rstrip(b"\n"))
    h = read_jsonl(path, events=False, micro_ops=("append", "r"))
    assert len(h) == len(events)
    assert [e.value for e in h.nemesis_events()] == [e.value for e in events if e.process == "nemesis"]
    assert [op.value for op in h.ops()] == [[("append", "x", p)] for p in range(3)]


@pytest.mark.parametrize("mop,problem", [
    (["append", "x"], "bad micro-op ['append', 'x']: expected [f, key, value]"),
    (["write", "x", 1], "unknown micro-op 'write'"),
    ("append", "bad micro-op 'append'"),
])
def test_bad_micro_op_is_named_by_line(tmp_path, mop, problem):
    events = [ev(0, "invoke", 0, "txn", [["append", "x", 1]]), ev(1, "ok", 0, "txn", [["append", "x", 1]]),
              ev(2, "invoke", 1, "txn", [mop]), ev(3, "ok", 1, "txn", [mop])]
    path = tmp_path / "h.jsonl"
    write_jsonl(events, path)
    with pytest.raises(HistoryError) as e:
        list_append.check(WORKLOADS["list-append"].load(str(path), events=False))
    assert str(e.value).startswith(f"{path}:3: ") and problem in str(e.value)


@pytest.mark.parametrize("workload,mop", [("list-append", ["append", ["x"], 1]), ("rw-register", ["w", ["x"], 1])])
def test_messages_show_micro_ops_as_written(tmp_path, workload, mop):
    """A list as a key is bad input; the message shows the micro-op as the file holds it
    (a list), the same words as from the general reader, not a Python tuple."""
    path = tmp_path / "h.jsonl"
    write_jsonl([ev(0, "invoke", 0, "txn", [mop]), ev(1, "ok", 0, "txn", [mop])], path)
    messages = []
    for h in (WORKLOADS[workload].load(str(path), events=False), read_jsonl(path)):
        with pytest.raises(HistoryError) as e:
            CHECK[workload](h)
        messages.append(str(e.value))
    assert messages[0] == messages[1] and str(mop) in messages[0], messages


def test_txn_f_is_one_shared_string_and_another_f_still_named(tmp_path):
    """Every txn line's f is the decoder's one literal "txn" (not a string kept per
    operation); a line of another f leaves the typed decoder for the general one, and
    the checker names it by line as before."""
    events = [ev(0, "invoke", 0, "txn", [["append", "x", 1]]), ev(1, "ok", 0, "txn", [["append", "x", 1]]),
              ev(2, "invoke", 1, "txn", [["r", "x", None]]), ev(3, "ok", 1, "txn", [["r", "x", [1]]])]
    path = tmp_path / "h.jsonl"
    write_jsonl(events, path)
    a, b = read_jsonl(path, events=False, micro_ops=("append", "r")).ops()
    assert a.f == "txn" and a.f is b.f
    write_jsonl([*events, ev(4, "invoke", 2, "read", [["r", "x", None]]),
                 ev(5, "ok", 2, "read", [["r", "x", [1]]])], path)
    with pytest.raises(HistoryError) as e:
        list_append.check(WORKLOADS["list-append"].load(str(path), events=False))
    assert str(e.value).startswith(f"{path}:5: ") and "not 'read'" in str(e.value)
