"""Registers, online: linearizability per key, re-checked as the key's history grows.

Each key's operations so far are searched with the offline checker's own
search (`checker.linearizable.search`, after `register_models.prune_crashed`),
an operation still pending treated as `info` (it may take effect at any time
after its invoke, or never; a pending read constrains nothing).

Why a key found non-linearizable on a prefix is non-linearizable in every
extension: take a linearization of the whole history and keep, of the
prefix's operations, those it places before the prefix ends. Every operation
completed in the prefix is among them (its point lies before its
completion); an operation pending at the prefix's end is either among them
(it took effect inside the prefix) or not (the prefix may treat it as never
having happened: that is what `info` allows); operations invoked after the
prefix are all placed after it. So that initial segment of the linearization
is a linearization of the prefix with pending operations as info. None
exists, so no linearization of the whole history does either.

When: a key is searched again once its history has doubled since its last
search (so all its searches cost about twice one search of the whole key),
and, while the reader has caught up with the writer (`tick`), once it has
any new completed operation and `INTERVAL` seconds have passed since its
last search: an anomaly is then reported within about `INTERVAL` seconds of
the line that completes it. A key found invalid is reported once and not searched
again; a key whose search runs out of its budget is left to the final pass.

Memory (not done): every operation of every key is kept. A rule that would
bound it: once a key's operations so far have a linearization in which, at
some point p before every pending invoke, the register's value is the only
one any search reaches (every configuration explored at p has the same
state), the operations wholly before p can be replaced by that state as the
key's initial value.
"""

from __future__ import annotations

import time as _time
from typing import Any

from sleuth.checker import linearizable as lin
from sleuth.checker import register_models as rm
from sleuth.checker.online import Found, lines_of, now
from sleuth.history import History, Op

INTERVAL = 0.5  # seconds: the longest a dirty key waits for its next search
GROWTH = 1  # a key is searched again when its history grew by a 1/GROWTH part
MIN_NEW = 16  # ... and by at least this many completions


class Engine:
    def __init__(self, history: History, report, keyed: bool = True, initial_value: Any = None,
                 failed_cas_observes: bool = False):
        self.history = history
        self.report = report
        self.keyed = keyed
        self.failed_cas_observes = failed_cas_observes
        self.model = lin.REGISTER
        self.initial = self.model.init(initial_value)
        self.by_key: dict[Any, list[Op]] = {}
        self.key_of: dict[int, Any] = {}  # pending op id -> its key
        self.made: dict[int, lin.Call] = {}  # completed op id -> its call (built once)
        self.ops = 0
        self.dirty: dict[Any, int] = {}  # key -> completions since its last search
        self.searched: dict[Any, tuple[int, float]] = {}  # key -> (ops then, when)
        self.bad: set = set()
        self.unknown: set = set()
        self.found: list[Found] = []
        self.counts: dict[str, int] = {}
        self.searches = 0
        self.last: dict[Any, tuple[int, int]] = {}  # key -> (line, time) of its last observation

    def invoked(self, op: Op, time: int) -> None:
        key = rm.parse_op(self.history, op, self.keyed)[0]  # validates the invoke's shape
        self.key_of[op.id] = key
        self.ops += 1
        self.by_key.setdefault(key, []).append(op)

    def completed(self, op: Op, time: int) -> None:
        rm.parse_op(self.history, op, self.keyed)  # validates the completion
        key = self.key_of.pop(op.id)
        if op.type == "ok" or (self.failed_cas_observes and op.type == "fail" and op.f == "cas"):
            if key not in self.bad and key not in self.unknown:
                self.last[key] = (self.history.line_of(op.complete_pos), time)
                self.dirty[key] = self.dirty.get(key, 0) + 1
                n, when = self.searched.get(key, (0, 0.0))
                if self.dirty[key] >= max(MIN_NEW, n // GROWTH):
                    self._search(key)

    def tick(self, force: bool = False) -> None:
        """Search the keys that have waited INTERVAL seconds (every one, with `force`)."""
        t = _time.monotonic()
        for key in list(self.dirty):
            if force or t - self.searched.get(key, (0, 0.0))[1] >= INTERVAL:
                self._search(key)

    def _calls(self, key: Any) -> list[lin.Call]:
        calls = []
        h, keyed, fco = self.history, self.keyed, self.failed_cas_observes
        made = self.made
        for op in self.by_key[key]:
            c = made.get(op.id)
            if c is not None:
                calls.append(c)
                continue
            f = op.f
            if op.type == "fail":
                if not (fco and f == "cas"):
                    continue
                f = rm.FAILED_CAS
            elif op.type == "info" and f == "read":
                continue  # pending or crashed: constrains nothing (a completed one: no call)
            _, iv, okv = rm.parse_op(h, op, keyed)
            c = lin.Call(op, f, iv, okv, op.invoke_pos, None if op.type == "info" else op.complete_pos)
            calls.append(c)
            if op.id not in self.key_of:  # completed: its call will not change
                made[op.id] = c
        return calls

    def _search(self, key: Any) -> None:
        self.dirty.pop(key, None)
        self.searched[key] = (len(self.by_key[key]), _time.monotonic())
        kept, _ = rm.prune_crashed(self._calls(key), self.initial)
        self.searches += 1
        out = lin.search(kept, self.model, self.initial, lin.QUICK_CONFIGURATIONS, count_producers=False)
        if out.valid == lin.UNKNOWN:
            out = lin.search(kept, self.model, self.initial, lin.MAX_CONFIGURATIONS)
        if out.valid == lin.UNKNOWN:
            self.unknown.add(key)  # left to the final pass
            return
        if out.valid is False:
            self.bad.add(key)
            example = lin.explain_failure(self.history, key, out, self.model, self.initial)
            ops = [c.op for c in out.calls if c.op is not None]
            self.counts["nonlinearizable"] = self.counts.get("nonlinearizable", 0) + 1
            line, time = self.last[key]
            found = Found("nonlinearizable", line, time, now(), example["explanation"],
                          lines_of(self.history, [o for o in ops if _named(example, o, self.history)], line))
            self.found.append(found)
            self.report(found)

    def stats(self) -> dict[str, Any]:
        return {"ops": self.ops, "keys": len(self.by_key), "searches": self.searches,
                "keys-left-to-final-pass": len(self.unknown)}


def _named(example: dict, op: Op, history: History) -> bool:
    """Is `op` the stuck op or in its window (the lines that prove the violation)?"""
    line = history.line_of(op.invoke_pos)
    named = [example.get("op") or {}, *example.get("window", [])]
    return any(d.get("line") == line for d in named)
