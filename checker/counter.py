"""Counter invariant (Jepsen's counter checker): every read lies between what
must have been added and what might have been.

Adds of n and reads of the total, starting from 0. For a read r:

- definitely in it: every ok add that completed before r was invoked;
- possibly in it: every add (ok, or info: unknown) invoked before r completed.

So r's value must lie in [definite + negative possible, definite + positive
possible]. With sorted times and prefix sums each read costs O(log n).
"""

from __future__ import annotations

import numpy as np

from sleuth.checker import models
from sleuth.checker.result import UNKNOWN, Result, nothing_to_judge
from sleuth.history.jsonl import History

MAX_EXAMPLES = 20


def _number(history: History, op, v) -> int:
    if type(v) is not int and type(v) is not float:
        raise history.error(op.invoke_pos, f"a counter {op.f} value must be a number, got {v!r}")
    return v


def check_counter(history: History) -> Result:
    adds, reads = [], []
    for op in history.ops():
        if op.f == "add":
            if op.type != "fail":
                adds.append((op, _number(history, op, op.invoke_value)))
        elif op.f == "read":
            if op.type == "ok":
                reads.append((op, _number(history, op, op.value)))
        else:
            raise history.error(op.invoke_pos, f"counter ops are add and read, not {op.f!r}")
    amount = np.array([n for _, n in adds], dtype=float)
    pos, neg = np.maximum(amount, 0), np.minimum(amount, 0)
    by_invoke = np.argsort([op.invoke_pos for op, _ in adds], kind="stable")
    invoked = np.array([adds[i][0].invoke_pos for i in by_invoke], dtype=float)
    pos_inv = np.concatenate([[0], np.cumsum(pos[by_invoke])])
    neg_inv = np.concatenate([[0], np.cumsum(neg[by_invoke])])
    done = [i for i, (op, _) in enumerate(adds) if op.type == "ok"]
    done.sort(key=lambda i: adds[i][0].complete_pos)
    completed = np.array([adds[i][0].complete_pos for i in done], dtype=float)
    pos_def = np.concatenate([[0], np.cumsum(pos[done])]) if done else np.zeros(1)
    neg_def = np.concatenate([[0], np.cumsum(neg[done])]) if done else np.zeros(1)
    anomalies: dict[str, list[dict]] = {}
    counts: dict[str, int] = {}
    for op, v in reads:
        d = np.searchsorted(completed, op.invoke_pos, side="left")  # completed strictly before
        p = np.searchsorted(invoked, op.complete_pos, side="left")  # invoked strictly before
        lower = pos_def[d] + neg_inv[p]
        upper = pos_inv[p] + neg_def[d]
        if lower <= v <= upper:
            continue
        name = models.COUNTER_TOO_LOW if v < lower else models.COUNTER_TOO_HIGH
        counts[name] = counts.get(name, 0) + 1
        examples = anomalies.setdefault(name, [])
        if len(examples) < MAX_EXAMPLES:
            examples.append({
                "op": {"process": op.process, "line": history.line_of(op.invoke_pos), "value": v},
                "lower": _plain(lower), "upper": _plain(upper),
                "explanation": f"read by process {op.process} (line {history.line_of(op.invoke_pos)}) "
                               f"returned {v}, but it must lie in [{_plain(lower)}, {_plain(upper)}]: "
                               f"{int(d)} adds were acknowledged before it began and {int(p)} had "
                               "begun before it ended"})
    names = sorted(anomalies)
    valid: bool | str = not names
    notes = []
    if not reads:
        valid = UNKNOWN
        notes.append(nothing_to_judge("no read completed ok (the bounds are checked on reads)"))
    return Result(valid=valid, model="counter", anomaly_types=names, anomalies=anomalies,
                  stats={"adds": len(adds), "reads": len(reads), "anomaly-counts": counts}, notes=notes)


def _plain(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)
