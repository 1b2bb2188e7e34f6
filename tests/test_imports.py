"""Imports (docs/history-format.md): Jepsen's EDN and text histories and elle-cli's JSON
arrays load into the same events as sleuth's JSON Lines; sparse files are
filled in; every kind of bad input is a HistoryError naming file and line."""

import os
import random
import shutil

import pytest

from sleuth.history import edn
from sleuth.history.imports import load
from sleuth.history.jsonl import Event, HistoryError

DATA = os.path.join(os.path.dirname(__file__), "data", "imports")


def data(name):
    return os.path.join(DATA, name)


def op_tuples(h):
    return [(o.process, o.f, o.type, o.invoke_value, o.value, o.error) for o in h.ops()]


def fields(h):
    return [(e.type, e.process, e.f, e.value, e.error) for e in h.events]


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# ---------------------------------------------------------------------------
# The same history in every format


SAME = ["same.jsonl", "same.edn", "same.txt", "same.json"]


@pytest.mark.parametrize("name", SAME[1:])
def test_every_format_loads_to_the_same_ops(name):
    expected = load(data("same.jsonl"))
    h = load(data(name))
    assert op_tuples(h) == op_tuples(expected)
    assert fields(h) == fields(expected)
    assert [(e.f, e.value) for e in h.nemesis_events()] == [
        ("start-partition", "majority"), ("stop-partition", None)]


def test_same_ops_are_what_the_file_says():
    ops = op_tuples(load(data("same.edn")))
    assert ops == [
        (0, "txn", "ok", [["append", 1, 1], ["r", 2, None]], [["append", 1, 1], ["r", 2, None]], None),
        (1, "txn", "ok", [["r", 1, None]], [["r", 1, [1]]], None),
        (2, "txn", "info", [["append", 2, 5]], [["append", 2, 5]], "timeout"),
        (0, "txn", "fail", [["append", 1, 2]], [["append", 1, 2]], ["crash", "conflict"]),
        (3, "txn", "ok", [["r", 1, None], ["r", 2, None]], [["r", 1, [1]], ["r", 2, [5]]], None),
    ]


@pytest.mark.parametrize("name", SAME)
def test_content_is_sniffed_whatever_the_extension(tmp_path, name):
    expected = op_tuples(load(data(name)))
    for ext in (".txt", ".log", ""):
        copy = tmp_path / ("history" + ext)
        shutil.copy(data(name), copy)
        assert op_tuples(load(copy)) == expected, ext


def test_edn_keeps_times_indices_and_source_lines():
    h = load(data("same.edn"))
    assert [e.time for e in h.events][:4] == [10, 20, 25, 30]
    assert [e.index for e in h.events] == list(range(12))
    # line 1 is a comment and line 6 blank: events sit on lines 2-5, 7-14
    assert h.lines == [2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14]


def test_text_history_times_are_file_order():
    h = load(data("same.txt"))
    assert [e.time for e in h.events] == list(range(12))
    assert h.lines == list(range(1, 13))


def test_json_array_lines_are_where_each_element_starts():
    h = load(data("same.json"))
    assert h.lines == [2, 3, 4, 5, 6, 7, 8, 10, 11, 13, 14, 15]


# ---------------------------------------------------------------------------
# EDN values and layouts


def test_edn_values_convert_exactly():
    h = load(data("values.edn"))
    assert h.events == [
        Event(0, 0, "invoke", 0, "transfer", {"from": 0, "to": 1, "amount": 5}, "n1"),
        Event(1, 1500, "ok", 0, "transfer", {"from": 0, "to": 1, "amount": 5}, "n1"),
        Event(2, 2000, "invoke", 1, "read", None),
        Event(3, 2500, "ok", 1, "read", {0: 10, 1: -20, 2: 3.5}),
        Event(4, 3000, "invoke", 2, "add", [1, 2, 3]),
        Event(5, 3100, "info", 2, "add", [1, 2, 3], error=["crash", 'said "no"\n\tbye']),
        Event(6, 3200, "info", "nemesis", "kill", {"n2": "killed", "n3": "killed"}),
        Event(7, 3300, "invoke", 3, "cas", [True, False, "a"]),
        Event(8, 3400, "fail", 3, "cas", [True, False, "a"], error="jepsen.client/timeout"),
    ]


def test_pretty_printed_vector_of_records():
    h = load(data("pretty.edn"))
    assert [(e.index, e.time, e.type, e.process, e.f, e.value) for e in h.events] == [
        (0, 0, "invoke", 0, "write", 3), (1, 5, "invoke", 1, "read", None),
        (2, 9, "ok", 0, "write", 3), (3, 12, "ok", 1, "read", 3)]
    assert h.lines == [2, 8, 9, 15]  # where each record starts


def test_edn_reader_odds_and_ends():
    assert edn.loads('[1N 1.5M -2 +3 1/4 1e3 ##Inf \\space \\u0041 "\\u00e9" sym #inst "2020"]') \
        == [1, 1.5, -2, 3, 0.25, 1000.0, float("inf"), " ", "A", "é", "sym", "2020"]
    assert edn.loads("{[1 2] :a, nil #{[1] [0]}}") == {(1, 2): "a", None: [[0], [1]]}
    assert edn.loads("(1 (2) ; comment ]\n 3)") == [1, [2], 3]
    assert edn.loads("#{:b [1] :a}") == ["b", [1], "a"]  # unsortable: as written
    assert edn.read_prefix("[4 4]\t:timeout") == ([4, 4], "\t:timeout")


# ---------------------------------------------------------------------------
# Sparse files


def test_sparse_edn_is_one_sequential_client():
    h = load(data("sparse.edn"))
    assert [(e.index, e.time, e.process, e.f) for e in h.events] == [
        (0, 0, 0, "txn"), (1, 1, 0, "txn"), (2, 2, 0, "txn"), (3, 3, 0, "txn"),
        (4, 4, 1, "txn"), (5, 5, 1, "txn")]  # a fresh process after the info
    assert [(o.process, o.type, o.value) for o in h.ops()] == [
        (0, "ok", [["append", "x", 1], ["r", "y", None]]),
        (0, "info", [["append", "y", 2]]),
        (1, "ok", [["r", "x", [1]], ["r", "y", [2]]])]


def test_f_is_txn_only_for_micro_ops(tmp_path):
    path = write(tmp_path, "h.edn", '{:type :invoke, :value [[:w "k" 2] [:r "j" nil]]}\n'
                                    '{:type :ok, :value [[:w "k" 2] [:r "j" 1]]}\n')
    assert [e.f for e in load(path).events] == ["txn", "txn"]
    with pytest.raises(HistoryError, match=r"h\.edn:1: missing f"):
        load(write(tmp_path, "h.edn", "{:type :invoke, :value [[:inc 1]]}\n"))


def test_sparse_json_array_without_f_index_or_time():
    h = load(data("sparse.json"))
    assert [(e.index, e.time, e.process, e.f) for e in h.events] == [
        (0, 0, 0, "txn"), (1, 1, 1, "txn"), (2, 2, 0, "txn"), (3, 3, 1, "txn")]
    assert [o.value for o in h.ops()] == [[["append", "x", 1]], [["r", "x", [1]]]]


def test_sparse_json_lines_in_a_json_file(tmp_path):
    path = write(tmp_path, "h.json",
                 '{"type": ":invoke", "f": ":read", "value": null}\n\n'
                 '{"type": ":ok", "f": ":read", "value": 3, "time": 7}\n')
    h = load(path)
    assert [(e.time, e.type, e.process, e.f, e.value) for e in h.events] == [
        (0, "invoke", 0, "read", None), (7, "ok", 0, "read", 3)]
    assert h.lines == [1, 3]


def test_missing_times_follow_the_previous_time(tmp_path):
    path = write(tmp_path, "h.edn",
                 "{:type :invoke, :f :read, :process 0, :time 5}\n"
                 "{:type :invoke, :f :read, :process 1}\n"
                 "{:type :ok, :f :read, :process 0, :value 1, :time 9}\n")
    assert [e.time for e in load(path).events] == [5, 5, 9]


def test_jsonl_extension_is_the_strict_native_format(tmp_path):
    sparse = '{"type": "invoke", "f": "read", "process": 0, "value": null}\n'
    with pytest.raises(HistoryError, match=r"h\.jsonl:1: missing field 'index'"):
        load(write(tmp_path, "h.jsonl", sparse))
    assert len(load(write(tmp_path, "h.json", sparse)).events) == 1
    assert load(data("same.jsonl"), events=False).compact is not None


# ---------------------------------------------------------------------------
# Jepsen logs


def test_jepsen_log_skips_noise_lines():
    h = load(data("etcd.log"))
    assert h.lines == [2, 3, 7, 8, 10, 11, 12, 13, 14, 15]
    assert [(e.process, e.type, e.f, e.value, e.error) for e in h.events] == [
        (0, "invoke", "read", None, None),
        (3, "invoke", "cas", [4, 4], None),
        (0, "ok", "read", 3, None),
        (3, "fail", "cas", [4, 4], None),
        (1, "invoke", "write", 1, None),
        ("nemesis", "info", "start", None, None),
        (1, "info", "write", 1, "timeout"),
        (2, "invoke", "write", 0, None),
        (2, "info", "write", "timed-out", None),  # old Jepsen: the value is the error
        ("nemesis", "info", "stop", "fully connected", None),
    ]
    assert [(o.process, o.type) for o in h.ops()] == [
        (0, "ok"), (3, "fail"), (1, "info"), (2, "info")]


def test_timestamped_log_prefixes_are_ignored():
    h = load(data("timestamps.log"))
    assert [(e.process, e.type, e.f, e.value, e.error) for e in h.events] == [
        (3, "invoke", "cas", [1, 4], None),
        (0, "invoke", "read", None, None),
        (3, "ok", "cas", [1, 4], None),
        (0, "info", "read", None, "indeterminate: Connection refused"),
        ("nemesis", "info", "start-partition", ["isolated", {"n1": ["n2", "n3"]}], None),
    ]


# ---------------------------------------------------------------------------
# Bad input: one HistoryError naming the file and the line

OK_READ = "{:type :ok, :f :read, :value 1, :process 0}\n"
INVOKE_READ = "{:type :invoke, :f :read, :value nil, :process 0}\n"

BAD = [
    # (file name, content, line, words in the message)
    ("garbage.edn", INVOKE_READ + "this is not a history\n", 2, "expected an operation map"),
    ("type.edn", INVOKE_READ + "{:type :done, :f :read, :process 0}\n", 2, "type must be"),
    ("no-type.edn", INVOKE_READ + "{:f :read, :process 0}\n", 2, "missing type"),
    ("bracket.edn", INVOKE_READ + "{:type :ok, :f :read, :value [1 2, :process 0}\n", 2,
     "'}' closes '['"),
    ("unclosed.edn", INVOKE_READ + "{:type :ok, :f :read, :value [1 2], :process 0\n" + INVOKE_READ,
     2, "never closed"),
    ("unclosed-vector.edn", "[\n" + INVOKE_READ + "{:type :ok, :f :read, :value [1 2, :process 0\n",
     3, "never closed"),
    ("extra-close.edn", INVOKE_READ + "{:type :ok, :f :read, :process 0}}\n", 2, "nothing is open"),
    ("string.edn", INVOKE_READ + '{:type :ok, :f :read, :value "abc, :process 0}\n', 2,
     "unterminated string"),
    ("odd-map.edn", INVOKE_READ + "{:type :ok, :f :read, :process}\n", 2, "odd number"),
    ("orphan.edn", INVOKE_READ + OK_READ + OK_READ, 3, "no invoke before it"),
    ("wrong-f.edn", INVOKE_READ + "{:type :ok, :f :write, :process 0}\n", 2, "completes an invoke"),
    ("alternate.edn", "{:type :invoke, :f :read}\n{:type :ok, :f :read, :value 1}\n"
     "{:type :invoke, :f :read}\n{:type :invoke, :f :read}\n", 4, "still in flight"),
    ("no-f.edn", "{:type :invoke, :value 3, :process 0}\n", 1, "missing f"),
    ("mixed-process.edn", INVOKE_READ + "{:type :ok, :f :read}\n", 2, "missing process"),
    ("process.edn", "{:type :invoke, :f :read, :process -1}\n", 1, "process must be"),
    ("time.edn", "{:type :invoke, :f :read, :process 0, :time -9}\n", 1, "non-negative"),
    ("index.edn", "{:type :invoke, :f :read, :process 0, :index 4}\n"
     "{:type :ok, :f :read, :process 0, :index 4}\n", 2, "not in index order"),
    ("discard.edn", "#_{:a 1}\n", 1, "not supported"),
    ("vector.edn", "[\n" + INVOKE_READ + OK_READ + "[:not :a :map]\n]\n", 4, "got a list"),
    ("garbage.json", '[{"type": "invoke", "f": "read", "process": 0},\n {"type": ok}]\n', 2,
     "not valid JSON"),
    ("type.json", '[{"type": "invoke", "f": "read", "process": 0},\n\n'
     ' {"type": ["ok"], "f": "read", "process": 0}]\n', 3, "type must be"),
    ("element.json", '[{"type": "invoke", "f": "read", "process": 0},\n 7]\n', 2,
     "expected an operation map"),
    ("separator.json", '[{"type": "invoke", "f": "read", "process": 0}\n'
     ' {"type": "ok", "f": "read", "process": 0}]\n', 2, "expected ',' or ']'"),
    ("unclosed.json", '[{"type": "invoke", "f": "read", "process": 0},\n', 2, "not valid JSON"),
    ("lines.json", '{"type": "invoke", "f": "read", "process": 0}\n{oops\n', 2, "not valid JSON"),
    ("garbage.txt", "0\t:invoke\t:read\tnil\nsome garbage\n0\t:ok\t:read\t1\n", 2,
     "not a history line"),
    ("value.txt", "0\t:invoke\t:read\tnil\n0\t:ok\t:read\t[1 2\n", 2, "never closed"),
    ("orphan.log", "noise\n0\t:invoke\t:read\tnil\nmore noise\n1\t:ok\t:read\t1\n", 4,
     "no invoke before it"),
    ("orphan.txt", "0\t:invoke\t:read\tnil\n:nemesis\t:info\t:kill\tnil\n1\t:ok\t:read\t1\n", 3,
     "no invoke before it"),
]


@pytest.mark.parametrize("name,content,line,words", BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_file_and_line(tmp_path, name, content, line, words):
    path = write(tmp_path, name, content)
    with pytest.raises(HistoryError) as err:
        load(path)
    e = err.value
    assert (e.source, e.line) == (path, line)
    assert str(e).startswith(f"{path}:{line}: ") and words in str(e)
    assert "\n" not in str(e)


def test_log_with_no_history_lines(tmp_path):
    path = write(tmp_path, "jepsen.log", "INFO jepsen.core - starting\nnothing here\n")
    with pytest.raises(HistoryError, match="no history lines found") as err:
        load(path)
    assert err.value.source == path and err.value.line is None


@pytest.mark.parametrize("name", ["missing.edn", "missing.jsonl", "missing.log", "missing"])
def test_missing_file(tmp_path, name):
    path = str(tmp_path / name)
    with pytest.raises(HistoryError) as err:
        load(path)
    assert err.value.source == path and err.value.line is None
    assert "No such file" in str(err.value)


def test_not_utf8(tmp_path):
    path = tmp_path / "h.edn"
    path.write_bytes(INVOKE_READ.encode() + b'{:type :ok, :f :read, :value "\xff"}\n')
    with pytest.raises(HistoryError, match=r"h\.edn:2: not UTF-8") as err:
        load(path)
    assert err.value.line == 2


# ---------------------------------------------------------------------------
# Speed


@pytest.mark.slow
def test_100k_line_edn_history_loads_whole(tmp_path):
    """A Jepsen-sized EDN file loads every event (its speed is measured in make bench, not here)."""
    rng = random.Random(7)
    path = tmp_path / "history.edn"
    with open(path, "w") as fh:
        for i in range(0, 100_000, 2):
            txn = " ".join(f"[:append {rng.randrange(20)} {i}]" if rng.random() < 0.5
                           else f"[:r {rng.randrange(20)} nil]" for _ in range(4))
            done = txn.replace("nil", "[1 2 3 4 5]")
            fh.write(f"{{:type :invoke, :f :txn, :value [{txn}], :process {i % 10}, "
                     f":time {i * 100}, :index {i}}}\n")
            fh.write(f"{{:type :ok, :f :txn, :value [{done}], :process {i % 10}, "
                     f":time {i * 100 + 50}, :index {i + 1}}}\n")
    h = load(path)
    assert len(h.events) == 100_000 and len(h.ops()) == 50_000


# ---------------------------------------------------------------------------
# Time that goes back: accepted, noted once; the file order is real time.

BACKWARDS = [  # (format, content): the same three events, time going back at line 2
    ("b.edn", "{:type :invoke, :f :read, :process 0, :time 9}\n"
              "{:type :invoke, :f :read, :process 1, :time 8}\n"
              "{:type :ok, :f :read, :process 0, :value 1, :time 10}\n"),
    ("b.json", '[{"type": "invoke", "f": "read", "process": 0, "time": 9},\n'
               ' {"type": "invoke", "f": "read", "process": 1, "time": 8},\n'
               ' {"type": "ok", "f": "read", "process": 0, "value": 1, "time": 10}]\n'),
    ("b.json", '{"type": "invoke", "f": "read", "process": 0, "time": 9}\n'
               '{"type": "invoke", "f": "read", "process": 1, "time": 8}\n'
               '{"type": "ok", "f": "read", "process": 0, "value": 1, "time": 10}\n'),
]


@pytest.mark.parametrize("name,content", BACKWARDS, ids=["edn", "json-array", "json-lines"])
def test_time_going_back_is_accepted_and_noted(tmp_path, name, content):
    h = load(write(tmp_path, name, content))
    assert [e.time for e in h.events] == [9, 8, 10]  # kept for display, not reordered
    assert [(o.process, o.type, o.value) for o in h.ops()] == [(0, "ok", 1), (1, "info", None)]
    assert h.time_backwards == (2, 1)


def test_real_shaped_jepsen_history_with_time_going_back():
    h = load(data("backwards.edn"))
    assert h.time_backwards == (8, 1)
    assert [o.invoke_pos < h.ops()[0].complete_pos for o in h.ops()[:2]] == [True, True]
