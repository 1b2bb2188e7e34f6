"""The grey-box timestamp rules (`checker.timestamps`), online.

Each rule compares an operation b with the operations that completed ok
(with a `ts`) before b was invoked: the largest timestamp among them, among
the reads, among the writes. Those are known when b is invoked, and b's own
timestamp when it completes ok; so each b is judged at its completion
against the largest timestamps as they stood at its invoke, exactly as the
offline sweep judges it (the same rules, in the same order of precedence,
one finding per operation at most). Nothing later can change that finding:
prefix-sound. Memory: three operations, and a snapshot of them per operation
in flight.

`Timestamps` wraps a workload's engine (or none): every event goes to both.
"""

from __future__ import annotations

from typing import Any

from sleuth.checker import models
from sleuth.checker.online import Found, lines_of, now
from sleuth.checker.timestamps import _done, is_write
from sleuth.history.jsonl import History, Op

RULES = (models.WRITE_TS_NOT_ABOVE_READ, models.READ_TS_BELOW_WRITE, models.TS_BACKWARDS)


class Timestamps:
    def __init__(self, history: History, workload: str, report, inner: Any | None = None):
        self.history, self.workload, self.report, self.inner = history, workload, report, inner
        self.best_any: Op | None = None
        self.best_read: Op | None = None
        self.best_write: Op | None = None
        self.at_invoke: dict[int, tuple] = {}
        self.found: list[Found] = []

    def invoked(self, op: Op, time: int) -> None:
        if self.inner is not None:
            self.inner.invoked(op, time)
        self.at_invoke[op.id] = (self.best_any, self.best_read, self.best_write)

    def completed(self, op: Op, time: int) -> None:
        if self.inner is not None:
            self.inner.completed(op, time)
        best_any, best_read, best_write = self.at_invoke.pop(op.id)
        if op.type != "ok" or op.ts is None:
            return
        h, b = self.history, op
        writes = is_write(self.workload, b)
        began = f"(line {h.line_of(b.invoke_pos)})"
        if writes and best_read is not None and b.ts <= best_read.ts:
            self._emit(models.WRITE_TS_NOT_ABOVE_READ, best_read, b, time,
                       f"process {b.process}'s {b.f} {began} wrote at ts {b.ts}, not above ts {best_read.ts} of "
                       f"process {best_read.process}'s read, which completed {_done(h, best_read)} before "
                       f"the write began")
        elif not writes and best_write is not None and b.ts < best_write.ts:
            self._emit(models.READ_TS_BELOW_WRITE, best_write, b, time,
                       f"process {b.process}'s read {began} ran at ts {b.ts}, below ts {best_write.ts} of process "
                       f"{best_write.process}'s {best_write.f}, which completed {_done(h, best_write)} before "
                       f"the read began (a stale read)")
        elif best_any is not None and b.ts < best_any.ts:
            self._emit(models.TS_BACKWARDS, best_any, b, time,
                       f"process {b.process}'s {b.f} {began} ran at ts {b.ts}, below ts {best_any.ts} of process "
                       f"{best_any.process}'s {best_any.f}, which completed {_done(h, best_any)} before it began")
        if self.best_any is None or b.ts > self.best_any.ts:
            self.best_any = b
        if writes:
            if self.best_write is None or b.ts > self.best_write.ts:
                self.best_write = b
        elif self.best_read is None or b.ts > self.best_read.ts:
            self.best_read = b

    def _emit(self, name: str, a: Op, b: Op, time: int, text: str) -> None:
        line = self.history.line_of(b.complete_pos)
        f = Found(name, line, time, now(), text, lines_of(self.history, [a, b], line))
        self.found.append(f)
        self.report(f)

    def tick(self, force: bool = False) -> None:
        if self.inner is not None:
            self.inner.tick(force)

    def stats(self) -> dict[str, Any]:
        return self.inner.stats() if self.inner is not None else {}
