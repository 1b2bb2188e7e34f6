"""One reader of histories and one pairer (issue 45).

1. The product's sources, searched for the shapes of a history decoder and of
   a pairer, hold one of each, in sleuth/history/jsonl.py. The shapes are what the
   copies this replaced looked like (a msgspec decoder of lines, a byte scan
   of a file, a line-block cutter, a reading of an event's fields by name; a
   pairer's messages, a table of open invokes per process, a comparison of a
   process's consecutive events in numpy, a window over processes): each of
   them matched a second module before (`SHAPES_FOUND_BEFORE` names them).
2. The columnar pairer (`pair_columns`) against the object one (`Pairer`),
   the owner of the rules and their messages, on random event sequences,
   valid and not: the same pairs, and a breach at the very event where
   `Pairer` raises. A hand-made case with its answer written out.
3. Spark's pairing in its tasks and on its driver (run here without Spark:
   the functions a task and the driver call), on histories cut into random
   blocks: the operations `Pairer` pairs, and on a history breaking a rule,
   the error `sleuth check` gives.
"""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
from live import require_module
from source_tree import sources

from sleuth.history.jsonl import (
    NEMESIS,
    TYPE_CODES,
    Event,
    History,
    HistoryError,
    Pairer,
    pair_columns,
    read_jsonl,
    write_jsonl,
)

CORE = "sleuth/history/jsonl.py"

# A decoder of history lines: what each copy looked like.
DECODER_SHAPES = {
    "a msgspec decoder of lines": re.compile(r"msgspec\.json\.Decoder\(|\.decode_lines\("),
    "a byte scan of a history's text": re.compile(r"np\.frombuffer\((data|buf|block)\b"),
    "many lines decoded in one orjson call": re.compile(r'b"\["\s*\+'),
    "a cut of bytes into whole lines": re.compile(r'rfind\(b"\\n"\)'),
}
# Reading an event's fields by name out of decoded JSON: the rules of an event
# (history.py), and the normaliser of foreign formats, which fills in what
# sparse files leave out before the same rules (imports.py).
FIELD_SHAPE = re.compile(r'\bd(\.get\("index"\)|\["index"\](?!\s*=[^=]))')
FIELD_READERS = {CORE, "sleuth/history/imports.py"}
FIELD_READERS_BEFORE = FIELD_READERS | {"checker/register_columns.py", "sleuth/spark/consolidate.py"}
# A pairer: each shape is a piece of the per-process rules.
PAIRER_SHAPES = {
    "the pairer's messages": re.compile(r"no invoke before it|is still in flight|used again after its info"),
    "a table of open invokes per process": re.compile(r"\b(in_flight|open)\[(p|process)\]\s*="),
    "a process's consecutive events compared": re.compile(
        r"\b(\w+)\[1:\]\s*[!=]=\s*\1\[:-1\]"),
    "a window over processes": re.compile(r'partitionBy\("process"\)'),
}
SHAPES_FOUND_BEFORE = {  # at 7e287ac, before this step: the copies these shapes find
    "a msgspec decoder of lines": {CORE},
    "a byte scan of a history's text": {"checker/register_columns.py"},
    "many lines decoded in one orjson call": {CORE},
    "a cut of bytes into whole lines": {CORE, "checker/register_columns.py", "sleuth/history/follow.py"},
    "the pairer's messages": {CORE, "sleuth/spark/history_ops.py", "sleuth/spark/history_pair.py",
                              "checker/register_columns.py"},
    "a table of open invokes per process": {CORE, "sleuth/spark/history_pair.py"},
    "a process's consecutive events compared": {"checker/register_columns.py", "sleuth/spark/consolidate.py",
                                                 "sleuth/spark/history_pair.py"},
    "a window over processes": {"sleuth/spark/history_ops.py"},
}


def _code(text: str) -> str:
    """The text without comment lines (a comment may name a shape it does not have)."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def _found(shapes: dict) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {name: set() for name in shapes}
    for path, text in sources():
        code = _code(text)
        for name, shape in shapes.items():
            if shape.search(code):
                found[name].add(path.replace("\\", "/"))
    return found


def test_one_module_decodes_history_lines():
    found = _found(DECODER_SHAPES)
    assert found == {
        "a msgspec decoder of lines": {CORE},
        "a byte scan of a history's text": set(),
        "many lines decoded in one orjson call": set(),
        "a cut of bytes into whole lines": {CORE},
    }


def test_only_the_rules_and_the_importer_read_an_events_fields_by_name():
    found = {path for path, text in sources() if FIELD_SHAPE.search(_code(text))}
    assert found == FIELD_READERS


def test_one_module_pairs():
    found = _found(PAIRER_SHAPES)
    assert set().union(*found.values()) == {CORE}, found


def test_the_shapes_found_the_copies_this_replaced():
    """Each shape matched a copy before (kept by hand above, from 7e287ac), so the tests above
    are not vacuous; and some shape matched a module other than the core."""
    assert set(SHAPES_FOUND_BEFORE) == set(DECODER_SHAPES) | set(PAIRER_SHAPES)
    assert FIELD_READERS_BEFORE > FIELD_READERS
    assert all(SHAPES_FOUND_BEFORE.values())
    assert set().union(*SHAPES_FOUND_BEFORE.values()) - {CORE}


# ---------------------------------------------------------------------------
# The columnar pairer against the object one


def _random_events(rnd: random.Random, n: int, breaking: bool) -> list[tuple[str, int | str, str]]:
    """(type, process, f) of a random history: valid, unless `breaking`, when any event may
    break a rule (an invoke in flight, a completion of nothing or of another f, a process
    used after its info)."""
    out: list[tuple[str, int | str, str]] = []
    open_f: dict[int, str] = {}
    retired: set[int] = set()
    for _ in range(n):
        if rnd.random() < 0.1:
            out.append(("info", NEMESIS, "kill"))
            continue
        if breaking and rnd.random() < 0.05:
            out.append((rnd.choice(["invoke", "ok", "fail", "info"]), rnd.randrange(4), rnd.choice("rw")))
            continue
        free = [p for p in range(4) if p not in retired]
        if not free:
            break
        p = rnd.choice(free)
        if p in open_f:
            t = rnd.choice(["ok", "ok", "fail", "info"])
            out.append((t, p, open_f.pop(p)))
            if t == "info":
                retired.add(p)
        else:
            f = rnd.choice("rw")
            open_f[p] = f
            out.append(("invoke", p, f))
    return out


def _object_pairing(evs) -> tuple[list[tuple[int, int]], int]:
    """([(invoke, completion or -1)], the position where Pairer raises or -1)."""
    h = History([Event(i, i, t, p, f) for i, (t, p, f) in enumerate(evs)], "h.jsonl")
    pairer = Pairer(h)
    for i, (t, p, f) in enumerate(evs):
        if p == NEMESIS:
            continue
        try:
            pairer.feed(i, t, p, f, None, i, None, None, None)
        except HistoryError:
            return [], i
    return [(o.invoke_pos, -1 if o.complete_pos is None else o.complete_pos) for o in pairer.ops], -1


def _columns(evs):
    process = np.array([-1 if p == NEMESIS else p for _, p, _ in evs], np.int64)
    types = np.array([TYPE_CODES[t] for t, _, _ in evs], np.int8)
    fs = np.array([ord(f[0]) for _, _, f in evs], np.int64)
    return process, types, fs


@pytest.mark.parametrize("breaking", [False, True], ids=["valid", "breaking"])
def test_the_columnar_pairer_pairs_and_refuses_as_the_pairer_does(breaking):
    rnd = random.Random(45 + breaking)
    refused = 0
    for _ in range(600):
        evs = _random_events(rnd, rnd.randrange(1, 40), breaking)
        want, where = _object_pairing(evs)
        got = pair_columns(*_columns(evs))
        assert got.bad == where, evs
        if where < 0:
            assert list(zip(got.invoke.tolist(), got.complete.tolist(), strict=True)) == want, evs
        refused += where >= 0
    assert (refused > 100) if breaking else (refused == 0)


@pytest.mark.parametrize("breaking", [False, True], ids=["valid", "breaking"])
def test_a_pairer_taking_blocks_pairs_and_refuses_as_event_by_event(breaking):
    """`Pairer.pair_run` / `take_run` (a block at a time, continuing the pairer: the online
    register engine's blocks) leave the pairer as `feed` event by event does (operations in
    flight, retired processes, the count), and a block breaking a rule is refused, so that
    fed event by event it raises where the events alone raise."""
    from sleuth.history.jsonl import Line, OpCount

    rnd = random.Random(4545 + breaking)
    taken = refused = 0
    for _ in range(600):
        evs = _random_events(rnd, rnd.randrange(1, 40), breaking)
        want, where = _object_pairing(evs)
        h = History([], "h.jsonl")
        pairer = Pairer(h)
        pairer.ops = OpCount()
        lines = [Line(index=i, time=i, type=t, process=p, f=f) for i, (t, p, f) in enumerate(evs)]
        process, types, fs = _columns(evs)
        pos, raised, completed = 0, -1, {}
        while pos < len(evs) and raised < 0:
            end = min(len(evs), pos + rnd.randint(1, 8))
            pairs = pairer.pair_run(pos, lines[pos:end], process[pos:end], types[pos:end], fs[pos:end])
            if pairs is not None:
                taken += 1
                done, opened = pairer.take_run(pairs)
                for i, op in done:
                    completed[op.invoke_pos] = pos + i
                for j, r in zip(pairs.invoke.tolist(), pairs.complete.tolist(), strict=True):
                    if r >= 0:
                        completed[pos + j] = pos + r
                assert [op.invoke_pos for _, op in opened] == [pos + j for j, r in zip(
                    pairs.invoke.tolist(), pairs.complete.tolist(), strict=True) if r < 0]
            else:
                refused += 1
                for i in range(pos, end):
                    t, p, f = evs[i]
                    if p == NEMESIS:
                        continue
                    try:
                        op = pairer.in_flight.get(p)
                        pairer.feed(i, t, p, f, None, i, None, None, None)
                        if t != "invoke":
                            completed[op.invoke_pos] = i
                    except HistoryError:
                        raised = i
                        break
            pos = end
        assert raised == where, evs
        if where < 0:
            assert len(pairer.ops) == len(want)
            assert sorted((i, completed.get(i, -1)) for i, _ in want) == want, evs
            assert {p: op.invoke_pos for p, op in pairer.in_flight.items()} == \
                {evs[i][1]: i for i, r in want if r < 0 and evs[i][1] not in pairer.retired}
    assert taken > 1000 and refused > (100 if breaking else -1), (taken, refused)


def test_a_hand_made_history_paired_in_columns():
    evs = [("invoke", 0, "r"), ("info", NEMESIS, "kill"), ("invoke", 1, "w"), ("ok", 0, "r"),
           ("info", 1, "w"), ("invoke", 0, "w"), ("fail", 0, "w"), ("invoke", 2, "r")]
    got = pair_columns(*_columns(evs))
    assert (got.invoke.tolist(), got.complete.tolist(), got.bad) == ([0, 2, 5, 7], [3, 4, 6, -1], -1)
    # open at both ends: a completion first is a head, not a breach; then one that is
    part = pair_columns(*_columns([("ok", 3, "r"), ("invoke", 3, "w")]), open_ends=True)
    assert (part.heads.tolist(), part.bad, part.invoke.tolist()) == ([0], -1, [1])
    closed = pair_columns(*_columns([("ok", 3, "r"), ("invoke", 3, "w")]))
    assert closed.bad == 0
    other_f = pair_columns(*_columns([("invoke", 3, "w"), ("ok", 3, "r")]))
    assert other_f.bad == 1


# ---------------------------------------------------------------------------
# Spark's pairing, without Spark


def _spark_pairing(path: str, block_lines: list[int]):
    """What `sleuth check --spark` pairs from `path`: the task's pairing of each block (cut
    after the given numbers of lines) and the driver's pairing across them (`_crossing`).
    [(invoke_pos, complete_pos, type, f, process)] in invoke order, or None when a rule is
    broken (a seg row with a problem, or `_crossing` refusing)."""
    pa = require_module("pyarrow")
    from sleuth.spark import history_pair as hp
    from sleuth.spark.history_ops import arrow_schema, decode_block

    with open(path, "rb") as fh:
        lines = fh.read().splitlines(keepends=True)
    rows = hp._Rows()
    at = 0
    for k in block_lines + [len(lines)]:
        block = b"".join(lines[at:at + k])
        at += k
        if block:
            hp._pair_block(decode_block([path], 0, block), rows)
    c = rows.cols
    if any(p is not None for k, p in zip(c["kind"], c["problem"], strict=True) if k == "seg"):
        return None
    ends = [i for i, k in enumerate(c["kind"]) if k in ("head", "tail")]
    table = pa.Table.from_pydict({n: [c[n][i] for i in ends] for n in c}, schema=arrow_schema(hp.ROWS_SCHEMA))
    crossing = hp._crossing(table)
    if crossing is None:
        return None
    o = rows.ops  # the op rows, which a task writes to its own data file
    got = list(zip(o["invoke_pos"], o["complete_pos"], o["type"], o["f"], o["process"], strict=True))
    got += list(zip(crossing["invoke_pos"], crossing["complete_pos"], crossing["type"], crossing["f"],
                    crossing["process"], strict=True))
    return sorted(got)


def _write(tmp_path, evs, name="h.jsonl") -> str:
    path = str(tmp_path / name)
    write_jsonl([Event(i, i, t, p, f, [1, 2]) for i, (t, p, f) in enumerate(evs)], path)
    return path


def test_sparks_pairing_in_blocks_is_the_pairers(tmp_path):
    rnd = random.Random(7)
    for n in range(60):
        evs = _random_events(rnd, rnd.randrange(1, 60), breaking=n % 3 == 0)
        path = _write(tmp_path, evs)
        cuts = [rnd.randrange(1, 8) for _ in range(rnd.randrange(0, 10))]
        got = _spark_pairing(path, cuts)
        try:
            h = read_jsonl(path)
        except HistoryError:
            assert got is None, evs
            continue
        assert got == [(o.invoke_pos, o.complete_pos, o.type, o.f, o.process) for o in h.ops()], evs


def test_sparks_driver_names_a_broken_rule_as_sleuth_check_does(tmp_path):
    from sleuth.spark.history_ops import pairing_error

    evs = [("invoke", 0, "r"), ("ok", 0, "r"), ("invoke", 1, "w"), ("invoke", 0, "w"), ("invoke", 1, "r")]
    first = _write(tmp_path, evs[:3], "a.jsonl")
    with open(first, "ab") as fh:
        fh.write(b"\n")  # a blank line: lines are counted as sleuth check counts them
    second = str(tmp_path / "b.jsonl")
    write_jsonl([Event(i + 3, i, t, p, f, [1, 2]) for i, (t, p, f) in enumerate(evs[3:])], second)
    err = pairing_error([first, second])
    assert str(err) == f"{second}:2: process 1 invokes while its operation from line 3 is still in flight"
    whole = _write(tmp_path, evs, "whole.jsonl")
    with pytest.raises(HistoryError) as check:
        read_jsonl(whole)
    assert check.value.problem == err.problem
