"""The JSON Lines reader: valid histories load and pair; each kind of bad line
is rejected with the file, the line and the problem."""

import json

import pytest

from sleuth.history.jsonl import (
    Event,
    History,
    HistoryError,
    parse_jsonl_slow,
    read_jsonl,
    write_jsonl,
)


def ev(i, t, typ, p, f="read", value=None, **kw):
    return {"index": i, "time": t, "type": typ, "process": p, "f": f, "value": value, **kw}


def write(tmp_path, rows, name="h.jsonl"):
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


GOOD = [
    ev(0, 0, "invoke", 0, "write", [1, 5]),
    ev(1, 5, "invoke", 1, "read", [1, None]),
    ev(2, 7, "ok", 0, "write", [1, 5], ts=12),
    ev(3, 8, "info", "nemesis", "start-partition", "majority"),
    ev(4, 9, "ok", 1, "read", [1, 5], node="n1"),
    ev(5, 10, "invoke", 2, "write", [1, 6]),
    ev(6, 20, "info", 2, "write", [1, 6], error="timeout"),
    ev(7, 21, "invoke", 3, "read", [1, None]),
]


def test_good_history_pairs_into_ops(tmp_path):
    h = read_jsonl(write(tmp_path, GOOD))
    ops = h.ops()
    assert [(o.process, o.f, o.type) for o in ops] == [
        (0, "write", "ok"), (1, "read", "ok"), (2, "write", "info"), (3, "read", "info")]
    assert ops[0].ts == 12 and ops[0].complete_time == 7
    assert ops[1].value == [1, 5] and ops[1].node == "n1"
    assert ops[2].complete_time is None and ops[2].error == "timeout"
    assert ops[3].complete_pos is None  # never completed: treated as info
    assert [e.f for e in h.nemesis_events()] == ["start-partition"]


def test_write_then_read_round_trips(tmp_path):
    h = read_jsonl(write(tmp_path, GOOD))
    out = tmp_path / "copy.jsonl"
    write_jsonl(h.events, out)
    assert read_jsonl(out).events == h.events


BAD = [
    ("not json", 3, "not valid JSON"),
    (json.dumps([1, 2]), 3, "expected a JSON object"),
    (json.dumps(ev(2, 7, "done", 0, "write", [1, 5])), 3, "type must be"),
    (json.dumps(ev(9, 7, "ok", 0, "write", [1, 5])), 3, "index is 9, expected 2"),
    (json.dumps(ev(2, 7, "ok", 0, "txn", [1, 5])), 3, "completes an invoke of f='write'"),
    (json.dumps(ev(2, 7, "ok", -1, "write", [1, 5])), 3, "process must be"),
    (json.dumps(ev(2, 7, "ok", 0, "read", [1, 5])), 3, "completes an invoke of f='write'"),
    (json.dumps(ev(2, 7, "ok", 7, "write", [1, 5])), 3, "no invoke before it"),
    (json.dumps(ev(2, 7, "invoke", 0, "write", [1, 5])), 3, "still in flight"),
    (json.dumps({k: v for k, v in ev(2, 7, "ok", 0).items() if k != "time"}), 3, "missing field 'time'"),
]


@pytest.mark.parametrize("line,lineno,problem", BAD)
def test_bad_line_is_named(tmp_path, line, lineno, problem):
    rows = [GOOD[0], GOOD[1], line]
    path = write(tmp_path, rows)
    with pytest.raises(HistoryError) as e:
        read_jsonl(path)
    assert str(e.value).startswith(f"{path}:{lineno}: ")
    assert problem in str(e.value)
    assert "\n" not in str(e.value)


def test_reusing_a_crashed_process_is_rejected(tmp_path):
    rows = [ev(0, 0, "invoke", 0, "write", 1), ev(1, 1, "info", 0, "write", 1),
            ev(2, 2, "invoke", 0, "read")]
    with pytest.raises(HistoryError, match=r":3: process 0 is used again after its info at line 2"):
        read_jsonl(write(tmp_path, rows))


def test_blank_lines_keep_line_numbers(tmp_path):
    rows = [GOOD[0], "", GOOD[1], json.dumps(ev(2, 1, "done", 0, "write", [1, 5]))]
    with pytest.raises(HistoryError, match=r"h.jsonl:4: type must be"):
        read_jsonl(write(tmp_path, rows))


# Jepsen reads its clock before it appends an event, so a history's times may
# go back a little; the file order is the real-time order (docs/history-format.md).
BACKWARDS = [
    ev(0, 100, "invoke", 0, "write", [1, 5]),
    ev(1, 90, "invoke", 1, "read", [1, None]),  # line 2 goes back
    ev(2, 120, "ok", 0, "write", [1, 5]),
    ev(3, 110, "ok", 1, "read", [1, 5]),  # line 4 goes back
    ev(4, 130, "invoke", 0, "read", [1, None]),
    ev(5, 140, "ok", 0, "read", [1, 5]),
]


@pytest.mark.parametrize("how", ["events", "compact", "slow"])
def test_time_going_backwards_is_accepted_and_noted(tmp_path, how):
    rows = BACKWARDS + ([""] if how == "slow" else [])  # a blank line: the line-by-line reader
    h = read_jsonl(write(tmp_path, rows), events=(how != "compact"))
    assert [(o.f, o.type, o.value) for o in h.ops()] == [
        ("write", "ok", [1, 5]), ("read", "ok", [1, 5]), ("read", "ok", [1, 5])]
    assert h.time_backwards == (2, 2)  # the first line that goes back, and how many do


def test_monotone_time_has_no_note(tmp_path):
    assert read_jsonl(write(tmp_path, GOOD)).time_backwards is None
    assert read_jsonl(write(tmp_path, GOOD), events=False).time_backwards is None


def test_time_backwards_across_chunks_is_counted(tmp_path, monkeypatch):
    """The fast reader decodes a chunk at a time; a step back at a chunk's edge counts."""
    import sleuth.history.jsonl as history

    monkeypatch.setattr(history, "CHUNK_BYTES", 64)  # a few lines per chunk
    rows = [ev(i, 1000 + i * 10 - (i % 2) * 15, "invoke" if i % 2 == 0 else "ok", 0, "write", i // 2)
            for i in range(40)]
    path = write(tmp_path, rows)
    assert read_jsonl(path).time_backwards == (2, 20)
    assert read_jsonl(path, events=False).time_backwards == (2, 20)


def test_compact_load_with_a_time_past_64_bits(tmp_path):
    rows = [ev(0, 2**70, "invoke", 0, "write", 1), ev(1, 2**70 + 1, "ok", 0, "write", 1)]
    assert [o.invoke_time for o in read_jsonl(write(tmp_path, rows), events=False).ops()] == [2**70]


TXN = [["append", "x", 1], ["r", "y", None]]
MISMATCHED = [
    ([["append", "x", 1], ["r", "z", [1]]], "micro-op 2 is ['r', 'z'], its invoke (line 1) has ['r', 'y']"),
    ([["append", "x", 1]], "has 1 micro-ops, its invoke (line 1) has 2"),
    ([["r", "y", []], ["append", "x", 1]], "micro-op 1 is ['r', 'y'], its invoke (line 1) has ['append', 'x']"),
]


@pytest.mark.parametrize("how", ["events", "compact", "slow"])
@pytest.mark.parametrize("completion,problem", MISMATCHED)
def test_txn_completion_must_match_its_invoke(tmp_path, how, completion, problem):
    rows = [ev(0, 0, "invoke", 0, "txn", TXN), ev(1, 5, "ok", 0, "txn", completion)]
    rows += [""] if how == "slow" else []
    path = write(tmp_path, rows)
    with pytest.raises(HistoryError) as e:
        read_jsonl(path, events=(how != "compact"))
    assert str(e.value).startswith(f"{path}:2: ok of a txn") and problem in str(e.value)


def test_txn_completion_with_reads_filled_in_pairs(tmp_path):
    rows = [ev(0, 0, "invoke", 0, "txn", TXN), ev(1, 5, "ok", 0, "txn", [["append", "x", 1], ["r", "y", [3]]]),
            ev(2, 6, "invoke", 0, "txn", TXN), ev(3, 7, "fail", 0, "txn", None)]
    (a, b) = read_jsonl(write(tmp_path, rows), events=False).ops()
    assert a.value == [["append", "x", 1], ["r", "y", [3]]] and b.type == "fail"


def test_missing_file_is_a_history_error(tmp_path):
    with pytest.raises(HistoryError, match="nope.jsonl"):
        read_jsonl(tmp_path / "nope.jsonl")


def test_events_built_in_code_pair_too():
    h = History([Event(0, 0, "invoke", 0, "add", 1), Event(1, 1, "fail", 0, "add", 1)])
    (op,) = h.ops()
    assert op.type == "fail" and op.value == 1


@pytest.mark.parametrize("line,lineno,problem", BAD)
def test_compact_load_names_bad_lines_too(tmp_path, line, lineno, problem):
    path = write(tmp_path, [GOOD[0], GOOD[1], line])
    with pytest.raises(HistoryError) as e:
        read_jsonl(path, events=False)
    assert str(e.value).startswith(f"{path}:{lineno}: ") and problem in str(e.value)


def test_compact_load_keeps_the_same_ops(tmp_path):
    path = write(tmp_path, GOOD)
    full, compact = read_jsonl(path), read_jsonl(path, events=False)
    fields = lambda o: (o.id, o.process, o.f, o.type, o.value, o.invoke_time,  # noqa: E731
                        o.complete_time, o.invoke_pos, o.complete_pos, o.node, o.error, o.ts)
    assert [fields(o) for o in compact.ops()] == [fields(o) for o in full.ops()]
    assert compact.nemesis_events() == full.nemesis_events()
    assert len(compact) == len(full) == len(GOOD)


def test_file_without_final_newline_and_with_crlf(tmp_path):
    path = tmp_path / "crlf.jsonl"
    path.write_bytes(b"\r\n".join(json.dumps(r).encode() for r in GOOD))
    assert len(read_jsonl(path, events=False).ops()) == len(read_jsonl(path).ops()) == 4


# One table of event rules (RULES) for every reader: the fast paths only
# pre-screen, so for any value each reader accepts or refuses alike, with the
# same words, and converts alike (issue 11: the readers disagreed on `node`).
ODD = [
    ("time", 5.0), ("time", -1), ("time", 1.5), ("time", "5"), ("time", True),
    ("type", "done"), ("type", 1), ("type", ["ok"]),
    ("process", -1), ("process", "1"), ("process", 1.0), ("process", True), ("process", [1]),
    ("f", 1), ("f", ["read"]), ("f", True),
    ("node", 3), ("node", "n1"), ("node", ["n1"]), ("node", True),
    ("ts", "5"), ("ts", 5.5), ("ts", True), ("ts", 7),
]


def outcome(read, path):
    try:
        h = read(path)
    except HistoryError as e:
        return "refused", e.problem
    return "accepted", [(o.f, o.type, o.node, o.ts, o.invoke_time) for o in h.ops()]


@pytest.mark.parametrize("field,value", ODD, ids=[f"{f}={v!r}" for f, v in ODD])
def test_every_reader_applies_the_same_event_rules(tmp_path, field, value):
    from sleuth.history.imports import load_json

    rows = [ev(0, 0, "invoke", 0, "read", [1, None]), {**ev(1, 5, "ok", 0, "read", [1, 5]), field: value}]
    jsonl = write(tmp_path, rows)
    array = tmp_path / "h.json"
    array.write_text(json.dumps(rows))
    results = {
        "fast events": outcome(read_jsonl, jsonl),
        "fast ops": outcome(lambda p: read_jsonl(p, events=False), jsonl),
        "slow": outcome(lambda p: parse_jsonl_slow(open(p, "rb"), str(p)), jsonl),
        "json array": outcome(lambda p: load_json(open(p).read(), str(p)), array),
    }
    assert len(set(map(repr, results.values()))) == 1, results
    if field == "node" and value == 3:
        assert results["slow"][1][0][2] == "3"  # a numbered node is shown as its text, everywhere


def test_unfreed_keeps_only_the_last_object_and_only_when_the_program_leaves(monkeypatch):
    import weakref

    import sleuth.history.jsonl as history

    class Box:
        pass

    monkeypatch.setattr(history, "_UNFREED", None)
    a = Box()
    ra = weakref.ref(a)
    history.unfreed(a)
    del a
    assert ra() is None  # in-process (tests, a library): freed as ever
    history.leave_unfreed()  # `sleuth check` as a program, which leaves without freeing
    b, c = Box(), Box()
    rb, rc = weakref.ref(b), weakref.ref(c)
    history.unfreed(b)
    del b
    assert rb() is not None
    history.unfreed(c)  # the next file's: the one before is let go
    del c
    assert rb() is None and rc() is not None
