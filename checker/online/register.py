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

Memory: after each search that finds a key linearizable, the key is *cut*
at its latest solo operation (`_cut`: one that nothing overlaps, so the
state after it is known) and starts again from that state, keeping only the
crashed writes before it (they may still take effect). So a key keeps the
operations since its last quiet moment, plus its crashed writes: flat for a
key that has quiet moments, growing by its crashed writes (which a run with
crashes has, about one write in twenty in the simulations). A key that is
never quiet (always some operation in flight) keeps everything; so does
every key of an engine that is not searched (the dict of keys itself grows
with the keys named).

**Certified verdicts** (`finish`, `certified`). The cut argument above is
one way: it shows that a key invalid from its cut is invalid whole. The
converse, which a valid verdict without the offline pass needs, can fail
through the crashed writes kept across a cut: a crashed write of 5 may be
needed *before* the cut (an ok read of 5 there) and be used again after it
by the search from the cut (a later stale read of 5), though it took effect
at most once. So at each cut that carries crashed writes over, the part
before the cut is searched once more with every crashed operation left out
(`_clean`). If that part is linearizable without them, the key's
linearization is that one, then the solo operation, then one of the rest
from the solo operation's state, which uses each crashed operation at most
once (only in the last part): every operation before the cut completed
before the solo one began, every one after it began after the solo one
completed, so the concatenation keeps real-time order. If it is not, the
key is *tainted* and the verdict is left to the offline pass. (Once one key
is tainted, invalid or out of budget, no verdict can be certified, so no
later cut is searched so: `keys-tainted` counts the keys found tainted
until then.) When the
history ends, every key with new operations is searched; the engine
certifies when no key was found invalid, none ran out of its search budget,
none is tainted, and some operation was observed (offline's verdict is
unknown when nothing was). Then the offline check finds every key
linearizable: the same search, on the same operations, in parts that join.
(Offline might also give up on a key too large to search whole, where the
parts each fit the budget: the certified verdict is then the better one.)
"""

from __future__ import annotations

import time as _time
from typing import Any

from sleuth.checker import linearizable as lin
from sleuth.checker import models
from sleuth.checker import register_models as rm
from sleuth.checker.online import Found, lines_of, now
from sleuth.history.jsonl import History, Op

INTERVAL = 0.5  # seconds: the longest a dirty key waits for its next search
GROWTH = 1  # a key is searched again when its history grew by a 1/GROWTH part
MIN_NEW = 256  # ... and by at least this many completions (a key's search has a fixed cost)
_NEVER = (0, 0.0)  # `searched` of a key not searched yet


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
        self.cuts = 0
        self.last: dict[Any, tuple[int, int]] = {}  # key -> (position, time) of its last observation
        self.start: dict[Any, Any] = {}  # key -> its state at its cut (`_cut`), if it has one
        self.observed: set = set()  # keys with an observation (offline's judged keys)
        self.tainted: set = set()  # keys cut where crashed writes may be needed before the cut

    def invoked(self, op: Op, time: int) -> None:
        f = op.f
        common = _common(f, op.invoke_value) if self.keyed else None
        if common is not None:
            parsed = (common[0], None if f == "read" else common[1])
        else:
            key, iv, _ = rm.parse_op(self.history, op, self.keyed)  # validates the invoke's shape
            parsed = (key, iv)
        self.key_of[op.id] = parsed  # what `parse_op` makes of the op until it completes ok
        self.ops += 1
        self.by_key.setdefault(parsed[0], []).append(op)

    def completed(self, op: Op, time: int) -> None:
        key, iv = self.key_of.pop(op.id)
        v, f, typ = op.value, op.f, op.type
        if typ != "ok":
            okv = rm.UNKNOWN  # `parse_op` reads only the invoke of an op that did not complete ok
        else:
            common = _common(f, v) if self.keyed else None
            if common is not None and type(common[0]) is type(key) and common[0] == key:
                okv = common[1]  # what `parse_op` would return (the completion's value rules)
                iv = None if f == "read" else okv
            else:
                _, iv, okv = rm.parse_op(self.history, op, self.keyed)  # validates the completion
        if key in self.bad or key in self.unknown:
            if typ == "ok" or (self.failed_cas_observes and typ == "fail" and f == "cas"):
                self.observed.add(key)
            return
        # its call, as `_calls` would build it, from this one parse (it will not change)
        pos = op.complete_pos
        if typ == "ok":
            self.made[op.id] = lin.Call(op, f, iv, okv, op.invoke_pos, pos)
        elif typ == "fail":
            if not (self.failed_cas_observes and f == "cas"):
                return  # constrains nothing, observes nothing
            self.made[op.id] = lin.Call(op, rm.FAILED_CAS, iv, okv, op.invoke_pos, pos)
        else:
            if f != "read":  # a crashed read constrains nothing: no call
                self.made[op.id] = lin.Call(op, f, iv, okv, op.invoke_pos, None)
            return
        # an observation: ok, or a failed cas that observes
        self.observed.add(key)
        self.last[key] = (pos, time)
        n = self.dirty.get(key, 0) + 1
        self.dirty[key] = n
        if n >= MIN_NEW and n >= self.searched.get(key, _NEVER)[0] // GROWTH:
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
            pending = self.key_of.get(op.id)
            if pending is not None:  # in flight: its invoke as `invoked` parsed it (`parse_op`'s reading)
                iv, okv = pending[1], rm.UNKNOWN
            else:
                _, iv, okv = rm.parse_op(h, op, keyed)
            c = lin.Call(op, f, iv, okv, op.invoke_pos, None if op.type == "info" else op.complete_pos)
            calls.append(c)
            if op.id not in self.key_of:  # completed: its call will not change
                made[op.id] = c
        return calls

    def _search(self, key: Any) -> None:
        self.dirty.pop(key, None)
        self.searched[key] = (len(self.by_key[key]), _time.monotonic())
        initial = self.start.get(key, self.initial)
        kept, _ = rm.prune_crashed(self._calls(key), initial)
        self.searches += 1
        out = lin.search(kept, self.model, initial, lin.QUICK_CONFIGURATIONS, count_producers=False)
        if out.valid == lin.UNKNOWN:
            out = lin.search(kept, self.model, initial, lin.MAX_CONFIGURATIONS)
        if out.valid is True:
            self._cut(key)
        if out.valid == lin.UNKNOWN:
            self.unknown.add(key)  # left to the final pass
            return
        if out.valid is False:
            self.bad.add(key)
            example = lin.explain_failure(self.history, key, out, self.model, initial)
            ops = [c.op for c in out.calls if c.op is not None]
            self.counts[models.NONLINEARIZABLE] = self.counts.get(models.NONLINEARIZABLE, 0) + 1
            pos, time = self.last[key]
            line = self.history.line_of(pos)
            found = Found(models.NONLINEARIZABLE, line, time, now(), example["explanation"],
                          lines_of(self.history, [o for o in ops if _named(example, o, self.history)], line))
            self.found.append(found)
            self.report(found)

    def _cut(self, key: Any) -> None:
        """After a search found the key's operations so far linearizable: drop those before
        its latest *solo* operation, one that completed ok after every relevant operation
        invoked before it had completed, and before any later one was invoked, and start the
        key from the state it left. Crashed writes and cas invoked before it are kept (they
        may take effect later, or never); failed ops and crashed reads constrain nothing.

        Sound: in any linearization of the key's whole history, everything the cut drops
        comes before the solo operation, which comes before everything after it; so the
        state after it is the one it leaves (the value written or read, the cas's new
        value), and the rest of the linearization linearizes the kept operations from that
        state (a crashed op that took effect before the cut is kept as never taking effect).
        So a key found non-linearizable from the cut is non-linearizable whole."""
        ops = self.by_key[key]
        fco, pending = self.failed_cas_observes, self.key_of
        latest = -1  # the latest completion among the relevant ops before the candidate
        blocked = False  # some relevant op before the candidate is still pending
        cut = None
        for j, op in enumerate(ops):
            relevant = op.type == "ok" or (fco and op.type == "fail" and op.f == "cas") or op.id in pending
            if op.type == "ok" and not blocked and op.id not in pending and latest < op.invoke_pos \
                    and (j + 1 == len(ops) or ops[j + 1].invoke_pos > op.complete_pos):
                cut = j
            if relevant:
                if op.id in pending:
                    blocked = True
                else:
                    latest = max(latest, op.complete_pos)
        if cut is None:
            return
        op = ops[cut]
        _, iv, okv = rm.parse_op(self.history, op, self.keyed)
        state = okv if op.f == "read" else iv if op.f == "write" else iv[1]
        crashed = [o for o in ops[:cut] if o.type == "info" and o.f != "read" and o.id not in pending]
        # Checked only while a certified verdict is still possible: once a key is tainted,
        # invalid or unknown, the final pass judges the history whatever the others are
        if crashed and not (self.tainted or self.bad or self.unknown) and not self._clean(key, ops[:cut + 1]):
            self.tainted.add(key)
        carried = {o.id for o in crashed}  # their calls (made at their completion) stay as they are
        for o in ops[:cut + 1]:
            if o.id not in carried:
                self.made.pop(o.id, None)
        self.by_key[key] = crashed + ops[cut + 1:]
        self.start[key] = state
        self.cuts += 1
        self.searched[key] = (len(self.by_key[key]), self.searched[key][1])  # growth counts from here

    def _clean(self, key: Any, before: list[Op]) -> bool:
        """Are the operations up to a cut linearizable from the key's start with every crashed
        operation left out (see "Certified verdicts")?"""
        initial = self.start.get(key, self.initial)
        calls = [c for c in self._calls(key) if c.ret is not None and c.op.invoke_pos <= before[-1].invoke_pos]
        self.searches += 1
        out = lin.search(calls, self.model, initial, lin.QUICK_CONFIGURATIONS, count_producers=False)
        return out.valid is True

    def finish(self) -> None:
        """The history ended: search every key with operations not yet searched."""
        self.tick(force=True)

    def certified(self) -> bool:
        """After `finish`: is every key certainly linearizable, as offline would find it (see
        "Certified verdicts")? False means: ask the offline pass."""
        return not self.found and not self.bad and not self.unknown and not self.tainted \
            and bool(self.observed) and not self.dirty

    def result(self, model: str | None) -> Any:
        """The certified verdict as offline's Result (after `certified()`)."""
        from sleuth.checker.result import Result

        n_keys = len(self.by_key)
        note = lin.keys_note(n_keys, len(self.observed), self.ops)
        return Result(valid=True, model="linearizable", anomaly_types=[], anomalies={},
                      stats={"keys": n_keys, "ops": self.ops, "keys-judged": len(self.observed),
                             "nonlinearizable-keys": 0, "unknown-keys": 0, "anomaly-counts": {},
                             **({"anomaly-units": {models.NONLINEARIZABLE: "key"}} if self.keyed else {}),
                             "online": self.stats(),
                             "final-pass": "none: the online engine's verdict is complete"},
                      notes=[note] if note else [])

    def stats(self) -> dict[str, Any]:
        return {"ops": self.ops, "keys": len(self.by_key), "searches": self.searches, "cuts": self.cuts,
                "kept": sum(map(len, self.by_key.values())),
                "keys-left-to-final-pass": len(self.unknown), "keys-tainted": len(self.tainted)}


def _common(f: str, v: Any) -> tuple[Any, Any] | None:
    """(key, payload) of a keyed register value [key, payload] of the common shapes, as
    `register_models.parse_op` reads and freezes it (these freeze to themselves, a cas's
    [old, new] to a tuple); None for any other shape, which `parse_op` reads (or refuses)."""
    if type(v) is list and len(v) == 2 and (type(v[0]) is int or type(v[0]) is str):
        p = v[1]
        if f == "read" or f == "write":
            if _plain(p):
                return v[0], p
        elif f == "cas" and type(p) is list and len(p) == 2 and _plain(p[0]) and _plain(p[1]):
            return v[0], (p[0], p[1])
    return None


def _plain(v: Any) -> bool:
    """Is `v` a value `register_models.freeze` leaves as it is?"""
    return v is None or type(v) is int or type(v) is str


def _named(example: dict, op: Op, history: History) -> bool:
    """Is `op` the stuck op or in its window (the lines that prove the violation)?"""
    line = history.line_of(op.invoke_pos)
    named = [example.get("op") or {}, *example.get("window", [])]
    return any(d.get("line") == line for d in named)
