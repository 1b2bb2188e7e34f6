"""Grey-box timestamp checks: the seeds' rules applied to the timestamps operations report.

The reference cluster tells each client the timestamp its statement ran at
(`ts` in the history). For a strict-serializable timeline (seed 004), if
operation a completed before operation b was invoked:

1. `ts-backwards`: b.ts >= a.ts (timestamps never go backwards in real time);
2. `write-ts-not-above-read`: if b writes and a only read, b.ts > a.ts (a
   write's timestamp is strictly above every read that completed before it);
3. `read-ts-below-write`: if b only reads and a wrote, b.ts >= a.ts (a read
   sees every write that completed before it began).

Rule 3 is rule 1 restricted to write-then-read; it is reported under its own
name because it is the stale read, the commonest way to break it. Only `ok`
operations with a `ts` take part. One sweep in invoke order over operations
sorted by completion keeps the largest timestamps completed so far: O(n log n).
"""

from __future__ import annotations

from typing import Any

from sleuth.checker import models
from sleuth.checker.result import Result
from sleuth.history.jsonl import History, Op, writes

MAX_EXAMPLES = 10


def is_write(workload: str, op: Op) -> bool:
    return writes(op.f, op.value)


def _describe(op: Op, history: History) -> dict[str, Any]:
    return {"process": op.process, "f": op.f, "value": op.value, "ts": op.ts,
            "line": history.line_of(op.complete_pos)}


def _done(history: History, op: Op) -> str:
    """Where an operation is in the file: a reader finds both lines of each example."""
    return f"(line {history.line_of(op.complete_pos)}, begun at line {history.line_of(op.invoke_pos)})"


def check(history: History, workload: str) -> Result:
    ops = [o for o in history.ops() if o.type == "ok" and o.ts is not None]
    by_completion = sorted(ops, key=lambda o: o.complete_pos)
    found: dict[str, list[dict]] = {}
    best_any: Op | None = None  # largest ts completed so far
    best_read: Op | None = None
    best_write: Op | None = None
    j = 0
    for b in sorted(ops, key=lambda o: o.invoke_pos):
        while j < len(by_completion) and by_completion[j].complete_pos < b.invoke_pos:
            a = by_completion[j]
            j += 1
            if best_any is None or a.ts > best_any.ts:
                best_any = a
            if is_write(workload, a):
                if best_write is None or a.ts > best_write.ts:
                    best_write = a
            elif best_read is None or a.ts > best_read.ts:
                best_read = a
        writes = is_write(workload, b)
        began = f"(line {history.line_of(b.invoke_pos)})"
        if writes and best_read is not None and b.ts <= best_read.ts:
            _add(found, models.WRITE_TS_NOT_ABOVE_READ, history, best_read, b,
                 f"process {b.process}'s {b.f} {began} wrote at ts {b.ts}, not above ts {best_read.ts} of "
                 f"process {best_read.process}'s read, which completed {_done(history, best_read)} before "
                 f"the write began")
        elif not writes and best_write is not None and b.ts < best_write.ts:
            _add(found, models.READ_TS_BELOW_WRITE, history, best_write, b,
                 f"process {b.process}'s read {began} ran at ts {b.ts}, below ts {best_write.ts} of process "
                 f"{best_write.process}'s {best_write.f}, which completed {_done(history, best_write)} before "
                 f"the read began (a stale read)")
        elif best_any is not None and b.ts < best_any.ts:
            _add(found, models.TS_BACKWARDS, history, best_any, b,
                 f"process {b.process}'s {b.f} {began} ran at ts {b.ts}, below ts {best_any.ts} of process "
                 f"{best_any.process}'s {best_any.f}, which completed {_done(history, best_any)} before it began")
    counts = {k: v[0]["count"] for k, v in found.items()}
    for v in found.values():
        v[0].pop("count")
    return Result(valid=not found, model="strict-serializable (timestamps)",
                  anomaly_types=sorted(found), anomalies=found,
                  stats={"ops-with-ts": len(ops), "violations": counts, "anomaly-counts": counts})


def _add(found: dict, name: str, history: History, a: Op, b: Op, text: str) -> None:
    examples = found.setdefault(name, [])
    if examples:
        examples[0]["count"] += 1
    if len(examples) < MAX_EXAMPLES:
        ex = {"explanation": text, "before": _describe(a, history), "after": _describe(b, history)}
        if not examples:
            ex["count"] = 1
        examples.append(ex)
