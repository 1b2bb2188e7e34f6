"""Shrinking histories of the `source` workload (checker/source.py): each anomaly, planted in a
correct history of 300 operations, shrinks from the operations its example names (with the
appends of the rows their reads show, and a later read that shows every change they
appended) to a handful, which the checker still rejects for that reason; removing any one
operation of it, re-checked here, makes the checker pass it or name another anomaly."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_source_checker import ack, append, history, read

from sleuth.checker.shrink import shrink
from sleuth.checker.source import check_source
from sleuth.history.jsonl import History


def correct(n_ops: int = 300, procs: int = 5) -> list[tuple]:
    """One operation at a time on one clock, in a cycle of four: an append (the next n), a
    read of every change so far (every third one real-time recent), another append, an ack
    of every append so far."""
    ops, rows, lsn = [], [], 0
    for k in range(n_ops):
        p, start = k % procs, 2 * k
        if k % 4 in (0, 2):
            lsn += 100
            rows.append((len(rows) + 1, 1000 + k))
            ops.append(append(p, 1000 + k, len(rows), lsn, start, start + 1))
        elif k % 4 == 1:
            ops.append(read(p, list(rows), start, start + 1, rtr=(k // 4) % 3 == 0))
        else:
            ops.append(ack(p, lsn, start, start + 1))
    return ops


def _edit(ops: list[tuple], f: str, nth: int, change) -> list[tuple]:
    """ops with the rows of its nth read of kind f changed by `change`."""
    i = [i for i, o in enumerate(ops) if o[1] == f][nth]
    p, f, v, s, e, t, out = ops[i]
    return [*ops[:i], (p, f, v, s, e, t, change(out)), *ops[i + 1:]]


PLANTED = {
    # a real-time-recent read misses the last two changes, which completed before it began
    "stale-rtr-read": lambda ops: _edit(ops, "rtr-read", 2, lambda rows: rows[:-2]),
    # a plain read after an ack misses a change the ack covered
    "acknowledged-not-visible": lambda ops: _edit(ops, "read", 2, lambda rows: rows[:-2]),
    # a read shows n but not some m < n
    "skipped-change": lambda ops: _edit(ops, "read", 3, lambda rows: rows[:1] + rows[2:]),
    "duplicate-change": lambda ops: _edit(ops, "read", 3, lambda rows: rows + rows[-1:]),
    "invented-change": lambda ops: _edit(ops, "read", 3, lambda rows: [*rows, [len(rows) + 1, 7]]),
    # the final read shows only the first three changes
    "lost-change": lambda ops: [*ops, read(0, [[o[6]["n"], o[2]] for o in ops if o[1] == "append"][:3],
                                      10_000, 10_001, final=True)],
}


def without(h: History, op) -> History:
    """h without one operation (its invoke and completion), events renumbered."""
    drop = {op.invoke_pos, op.complete_pos}
    kept = [e for pos, e in enumerate(h.events) if pos not in drop]
    return History([replace(e, index=i) for i, e in enumerate(kept)], "h")


@pytest.mark.parametrize("kind", sorted(PLANTED))
def test_each_anomaly_shrinks_from_what_its_example_names_to_a_1_minimal_history(kind):
    h = history(PLANTED[kind](correct()))
    original = check_source(h)
    assert original.valid is False and kind in original.anomaly_types, original.anomaly_types
    ce = shrink(h, "source", check_source, original, target=kind, budget=60)
    assert ce.minimal, ce.summary()
    # started from the example's operations and their support (the early read's rows), not all 300
    assert ce.seed_ops <= 30 and ce.ops <= ce.seed_ops, ce.summary()
    r = check_source(ce.history)
    assert kind in r.anomaly_types and set(r.anomaly_types) <= set(original.anomaly_types)
    for op in ce.history.ops():  # 1-minimal, judged here, not taken from the shrinker
        smaller = check_source(without(ce.history, op))
        assert kind not in smaller.anomaly_types or not set(smaller.anomaly_types) <= set(original.anomaly_types)
