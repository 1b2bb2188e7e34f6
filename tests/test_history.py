"""The JSON Lines reader: valid histories load and pair; each kind of bad line
is rejected with the file, the line and the problem."""

import json

import pytest

from sleuth.history import Event, History, HistoryError, read_jsonl, write_jsonl


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
    (json.dumps(ev(2, 1, "ok", 0, "write", [1, 5])), 3, "goes backwards"),
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
    rows = [GOOD[0], "", GOOD[1], json.dumps(ev(2, 1, "ok", 0, "write", [1, 5]))]
    with pytest.raises(HistoryError, match=r"h.jsonl:4: time 1 goes backwards"):
        read_jsonl(write(tmp_path, rows))


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
