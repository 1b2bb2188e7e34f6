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

**Blocks** (`block`). `sleuth check --follow` reads a history a block of
lines at a time; a block of the common shapes (every value `[key, payload]`
with an int or string key and a payload of null, a number, a string, or a
cas's pair of them: `_common`'s shapes) is taken whole: its events are
paired by the columnar pairer (`sleuth.history.jsonl.pair_columns`, the
`Pairer`'s rules; the operations in flight when the block starts are the
`Pairer`'s own, and those still in flight when it ends go back to it), and
each completed operation becomes the search's `Call` at once, without an
`Op` (its process and times ride along for an explanation, `_attach`). Any
other block (another shape, a breach of a pairing rule) goes event by event
through the `Pairer` and `invoked`/`completed`, which give the same calls
and say what is wrong, naming the line. The keys due a search are searched
when the block is in: a prefix ending at the block's end, its pending
operations as info, as the per-event path's searches are prefixes ending
at an event.
"""

from __future__ import annotations

import operator
import time as _time
from typing import Any

from sleuth.checker import linearizable as lin
from sleuth.checker import models
from sleuth.checker import register_models as rm
from sleuth.checker.online import Found, lines_of, now
from sleuth.history.jsonl import TYPE_CODES, History, Op, Pairer

INTERVAL = 0.5  # seconds: the longest a dirty key waits for its next search
GROWTH = 1  # a key is searched again when its history grew by a 1/GROWTH part
MIN_NEW = 256  # ... and by at least this many completions (a key's search has a fixed cost)
_NEVER = (0, 0.0)  # `searched` of a key not searched yet
_F = ("read", "write", "cas")
_F_CODES = {f: i for i, f in enumerate(_F)}
_OK, _INFO = TYPE_CODES["ok"], TYPE_CODES["info"]
_PLAIN = frozenset((int, str, type(None)))  # what `register_models.freeze` leaves as it is


class Engine:
    def __init__(self, history: History, report, keyed: bool = True, initial_value: Any = None,
                 failed_cas_observes: bool = False):
        self.history = history
        self.report = report
        self.keyed = keyed
        self.failed_cas_observes = failed_cas_observes
        self.model = lin.REGISTER
        self.initial = self.model.init(initial_value)
        # key -> the calls of its operations completed since its cut (ok ones, failed cas
        # read as observations, crashed writes and cas: `_complete`), in completion order;
        # a key named by an invoke has an entry, maybe empty
        self.by_key: dict[Any, list[lin.Call]] = {}
        self.key_of: dict[int, tuple[Any, Any, Op]] = {}  # op id in flight -> (key, invoke value, op)
        self.ops = 0
        self.dirty: dict[Any, int] = {}  # key -> completions since its last search
        self.searched: dict[Any, tuple[int, float]] = {}  # key -> (calls then, when)
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

    # -- event by event (`Feed.event`; and a block `block` does not take)

    def invoked(self, op: Op, time: int) -> None:
        f = op.f
        common = _common(f, op.invoke_value) if self.keyed else None
        if common is not None:
            key, iv = common[0], None if f == "read" else common[1]
        else:
            key, iv, _ = rm.parse_op(self.history, op, self.keyed)  # validates the invoke's shape
        self.key_of[op.id] = (key, iv, op)  # what `parse_op` makes of the op until it completes ok
        self.ops += 1
        if key not in self.by_key:
            self.by_key[key] = []

    def completed(self, op: Op, time: int) -> None:
        key, iv, _ = self.key_of.pop(op.id)
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
        if self._complete(key, op, f, typ, iv, okv, op.invoke_pos, op.complete_pos, time):
            n = self.dirty[key]
            if n >= MIN_NEW and n >= self.searched.get(key, _NEVER)[0] // GROWTH:
                self._search(key)

    def _complete(self, key: Any, op: Any, f: str, typ: str, iv: Any, okv: Any, call: int, pos: int,
                  time: int) -> bool:
        """Keep the call of an operation that completed at `pos` (`op`: its Op, or its
        (process, invoke time, completion time, completion position) for `_attach`); True if it
        observed the key."""
        if key in self.bad or key in self.unknown:
            if typ == "ok" or (self.failed_cas_observes and typ == "fail" and f == "cas"):
                self.observed.add(key)
            return False
        if typ == "ok":
            c = lin.Call(op, f, iv, okv, call, pos)
        elif typ == "fail":
            if not (self.failed_cas_observes and f == "cas"):
                return False  # constrains nothing, observes nothing
            c = lin.Call(op, rm.FAILED_CAS, iv, okv, call, pos)
        else:
            if f != "read":  # a crashed read constrains nothing: no call
                self.by_key[key].append(lin.Call(op, f, iv, okv, call, None))
            return False
        self.by_key[key].append(c)
        self.observed.add(key)
        if key not in self.last or self.last[key][0] < pos:  # (a block's ops from before it come last)
            self.last[key] = (pos, time)
        self.dirty[key] = self.dirty.get(key, 0) + 1
        return True

    # -- a block at a time (`Feed.events`)

    def block(self, run: list, pos0: int, pairer: Pairer) -> bool:
        """Take the events of `run` (decoded lines, at positions pos0, pos0 + 1, ...) whole,
        as `Feed.event` would take them one by one (see "Blocks"), then search the keys due
        one; False, having changed nothing, when the block is not of the common shapes or
        breaks a pairing rule (the caller then feeds it event by event)."""
        cols = _block_columns(run) if self.keyed else None
        if cols is None:
            return False
        procs, types, fs, keys, payloads, times, process, type_codes, f_codes = cols
        import numpy as np

        pairs = pairer.pair_run(pos0, run, process, type_codes, f_codes)
        if pairs is None:
            return False
        heads = pairs.heads
        inv, ret = pairs.invoke, pairs.complete  # numpy, in invoke order
        done = np.flatnonzero(ret >= 0)
        ok = done[type_codes[ret[done]] == _OK]
        ok = ok[np.argsort(ret[ok], kind="stable")]  # in completion order: each key's last is its latest
        ok_inv, ok_ret = inv[ok].tolist(), ret[ok].tolist()
        # what `_common` reads: the invoke's key and payload, and an ok completion's, which must
        # name the same key (a key of another type or value: `parse_op` says what it makes of it)
        ok_keys = _pick(keys, ok_inv) if ok_inv else ()
        if ok_inv and ok_keys != _pick(keys, ok_ret):  # ints and strings: equal values, equal types
            return False
        in_flight = pairer.in_flight
        for i in heads:  # an ok completion of an op from an earlier block
            if types[i] == "ok":
                key = self.key_of[in_flight[procs[i]].id][0]
                if type(keys[i]) is not type(key) or keys[i] != key:
                    return False
        # -- taken: nothing below refuses the block
        done_before, opened = pairer.take_run(pairs)
        by_key, key_of = self.by_key, self.key_of
        inv_l = inv.tolist()
        if inv_l:
            for k in set(_pick(keys, inv_l)):  # every key named
                if k not in by_key:
                    by_key[k] = []
        due: list[Any] = []
        # ok ops: their calls made in one pass, then kept a key at a time
        if ok_inv:
            okv = _pick(payloads, ok_ret)
            fo = _pick(fs, ok_inv)
            if "cas" in fo:
                okv = [(v[0], v[1]) if f == "cas" else v for f, v in zip(fo, okv, strict=True)]
            iv = [None if f == "read" else v for f, v in zip(fo, okv, strict=True)]
            at = [pos0 + r for r in ok_ret]
            ends = _pick(times, ok_ret)
            meta = zip(_pick(procs, ok_inv), _pick(times, ok_inv), ends, at)
            calls = list(map(lin.Call, meta, fo, iv, okv, [pos0 + i for i in ok_inv], at))
            distinct = list(dict.fromkeys(ok_keys))
            ids = {k: g for g, k in enumerate(distinct)}
            kid = np.fromiter(map(ids.__getitem__, ok_keys), np.int64, len(ok_keys))
            order = np.argsort(kid, kind="stable")  # by key, in completion order within each
            cuts = (np.flatnonzero(np.diff(kid[order])) + 1).tolist()
            order = order.tolist()
            calls, at, ends = _pick(calls, order), _pick(at, order), _pick(ends, order)
            skip = self.bad or self.unknown
            observed, last, dirty = self.observed, self.last, self.dirty
            for lo, hi in zip([0, *cuts], [*cuts, len(order)], strict=True):
                key = ok_keys[order[lo]]
                observed.add(key)
                if skip and (key in self.bad or key in self.unknown):
                    continue  # as `_complete`: observed, not kept
                by_key[key] += calls[lo:hi]
                last[key] = (at[hi - 1], ends[hi - 1])
                n = dirty[key] = dirty.get(key, 0) + hi - lo
                if n >= MIN_NEW:
                    due.append(key)
        for j, op in opened:  # still in flight at the block's end: the Pairer's Ops
            i = inv_l[j]
            key_of[op.id] = (keys[i], None if op.f == "read" else _payload(op.f, payloads[i]), op)
        # failed and crashed ones
        fco = self.failed_cas_observes
        rest = np.flatnonzero((ret >= 0) & (type_codes[np.maximum(ret, 0)] != _OK)).tolist()
        for j in rest:
            i, r = inv_l[j], int(ret[j])
            f = fs[i]
            t = type_codes[r]
            if t != _INFO and not (fco and f == "cas"):
                continue
            iv = None if f == "read" else _payload(f, payloads[i])
            if self._complete(keys[i], (procs[i], times[i], None if t == _INFO else times[r], pos0 + r), f,
                              "info" if t == _INFO else "fail", iv, rm.UNKNOWN, pos0 + i, pos0 + r, times[r]):
                due.append(keys[i])
        # the ops in flight when the block began, completed in it (paired above)
        for i, op in done_before:
            key, iv, _ = self.key_of.pop(op.id)
            typ = op.type
            okv = rm.UNKNOWN
            if typ == "ok":
                okv = _payload(op.f, payloads[i])
                iv = None if op.f == "read" else okv
            if self._complete(key, op, op.f, typ, iv, okv, op.invoke_pos, op.complete_pos, times[i]):
                due.append(key)
        self.ops += len(inv_l)
        dirty = self.dirty
        searched = self.searched
        for key in dict.fromkeys(due):
            n = dirty.get(key, 0)
            if n >= MIN_NEW and n >= searched.get(key, _NEVER)[0] // GROWTH:
                self._search(key)
        return True

    def tick(self, force: bool = False) -> None:
        """Search the keys that have waited INTERVAL seconds (every one, with `force`)."""
        t = _time.monotonic()
        for key in list(self.dirty):
            if force or t - self.searched.get(key, (0, 0.0))[1] >= INTERVAL:
                self._search(key)

    def _pending(self, key: Any) -> list[Op]:
        """The key's operations in flight."""
        return [op for k, _, op in self.key_of.values() if k == key]

    def _calls(self, key: Any) -> list[lin.Call]:
        """The search's calls of the key: those kept, and one for each write or cas in flight
        (as crashed: it may take effect any time after its invoke, or never; a read in flight
        constrains nothing)."""
        calls = self.by_key[key]
        pending = [(iv, op) for k, iv, op in self.key_of.values() if k == key and op.f != "read"]
        if not pending:
            return calls
        return calls + [lin.Call(op, op.f, iv, rm.UNKNOWN, op.invoke_pos, None) for iv, op in pending]

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
            _attach(key, out.calls, self.keyed)
            example = lin.explain_failure(self.history, key, out, self.model, initial)
            ops = [c.op for c in out.calls]
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
        key from the state it left. The relevant operations are those a linearization holds
        or may hold: the ok ones, failed cas read as observations, crashed writes and cas (they
        may take effect, or not) and every operation in flight (it may yet complete ok); a
        failed operation or a crashed read is in none, and is not kept. Crashed writes and cas
        invoked before the solo operation are kept (they may take effect later, or never).

        Sound: in any linearization of the key's whole history, everything the cut drops
        comes before the solo operation, which comes before everything after it; so the
        state after it is the one it leaves (the value written or read, the cas's new
        value), and the rest of the linearization linearizes the kept operations from that
        state (a crashed op that took effect before the cut is kept as never taking effect).
        So a key found non-linearizable from the cut is non-linearizable whole."""
        pending = self._pending(key)
        # (invoke position, completion position or None, the call or None for an op in flight)
        items = sorted([(c.call, c.ret, c) for c in self.by_key[key]]
                       + [(op.invoke_pos, None, None) for op in pending], key=operator.itemgetter(0))
        latest = -1  # the latest completion among the relevant ops before the candidate
        blocked = False  # some op before the candidate has not completed yet
        cut = None
        n = len(items)
        for j, (call, ret, c) in enumerate(items):
            if c is None:
                blocked = True
                continue
            if ret is None:
                continue  # crashed: it may take effect any time after its invoke, or never
            if not blocked and latest < call and c.f != rm.FAILED_CAS and (j + 1 == n or items[j + 1][0] > ret):
                cut = j
            if ret > latest:
                latest = ret
        if cut is None:
            return
        c = items[cut][2]
        state = c.ok_value if c.f == "read" else c.invoke_value if c.f == "write" else c.invoke_value[1]
        crashed = [x for _, ret, x in items[:cut] if ret is None]  # (none in flight: blocked)
        # Checked only while a certified verdict is still possible: once a key is tainted,
        # invalid or unknown, the final pass judges the history whatever the others are
        if crashed and not (self.tainted or self.bad or self.unknown) and not self._clean(key, c.call):
            self.tainted.add(key)
        self.by_key[key] = crashed + [x for _, _, x in items[cut + 1:] if x is not None]
        self.start[key] = state
        self.cuts += 1
        self.searched[key] = (len(self.by_key[key]), self.searched[key][1])  # growth counts from here

    def _clean(self, key: Any, upto: int) -> bool:
        """Are the operations up to a cut (invoked at or before `upto`) linearizable from the
        key's start with every crashed operation left out (see "Certified verdicts")?"""
        initial = self.start.get(key, self.initial)
        calls = [c for c in self.by_key[key] if c.ret is not None and c.call <= upto]
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


def _block_columns(run: list) -> tuple | None:
    """The fields of a block's events as `Engine.block` takes them: sequences (process, type,
    f, key, payload, time; a cas's payload the list [old, new]) and numpy codes
    (process, -1 for the nemesis; type; f); None unless every event is a read, write or cas
    of `_common`'s shapes, or the nemesis's."""
    import numpy as np

    n = len(run)
    if not n:
        return None
    procs = [e.process for e in run]  # (attribute loads of a Struct: faster than attrgetter)
    types = [e.type for e in run]
    fs = [e.f for e in run]
    values = [e.value for e in run]
    times = [e.time for e in run]
    try:
        process = np.fromiter(procs, np.int64, n)
    except (TypeError, ValueError):  # the nemesis's events: -1, their f and value left out
        nemesis = [i for i, p in enumerate(procs) if p == "nemesis"]
        process = np.array([-1 if p == "nemesis" else p for p in procs], np.int64)
        for i in nemesis:
            fs[i], values[i] = "read", [0, None]
    try:
        f_codes = np.fromiter(map(_F_CODES.__getitem__, fs), np.int8, n)
    except KeyError:
        return None  # not a read, write or cas
    type_codes = np.fromiter(map(TYPE_CODES.__getitem__, types), np.int8, n)
    if set(map(type, values)) != {list}:
        return None
    try:
        keys, payloads = zip(*values, strict=True)
    except ValueError:
        return None  # a value that is not [key, payload]
    if not set(map(type, keys)) <= _KEYS:
        return None
    cas = np.flatnonzero(f_codes == 2).tolist()
    if cas:  # [old, new] each (the block's loop reads them as the tuple `_common` makes)
        rest = np.flatnonzero(f_codes != 2).tolist()
        if rest and not set(map(type, _pick(payloads, rest))) <= _PLAIN:
            return None
        pairs = _pick(payloads, cas)
        if set(map(type, pairs)) != {list}:
            return None
        try:
            olds, news = zip(*pairs, strict=True)
        except ValueError:
            return None
        if not set(map(type, olds)) | set(map(type, news)) <= _PLAIN:
            return None
    elif not set(map(type, payloads)) <= _PLAIN:
        return None
    return procs, types, fs, keys, payloads, times, process, type_codes, f_codes


_KEYS = frozenset((int, str))


def _payload(f: str, p: Any) -> Any:
    """A payload as `_common` reads it: a cas's [old, new] as a tuple."""
    return (p[0], p[1]) if f == "cas" else p


def _pick(xs: tuple, where: list[int]) -> tuple:
    """xs[i] for each i in `where` (at least one), at C speed."""
    got = operator.itemgetter(*where)(xs)
    return got if len(where) > 1 else (got,)


def _attach(key: Any, calls: list[lin.Call], keyed: bool) -> None:
    """Give the calls a block made (`Engine.block`: their op is (process, invoke time,
    completion time, completion position)) the `Op` the `Pairer` would have made, for an
    explanation."""
    for c in calls:
        if type(c.op) is not tuple:
            continue
        process, invoked, done, at = c.op
        f, typ = ("cas", "fail") if c.f == rm.FAILED_CAS else (c.f, "info" if c.ret is None else "ok")
        payload = list(c.invoke_value) if f == "cas" else c.invoke_value
        invoke_value = [key, payload] if keyed else payload
        if typ == "ok":
            got = c.ok_value if f == "read" else payload
            value = [key, got] if keyed else got
        else:
            value = invoke_value
        c.op = Op(-1, process, f, typ, invoke_value, value, c.call, at, invoked, done)


def _plain(v: Any) -> bool:
    """Is `v` a value `register_models.freeze` leaves as it is (`_PLAIN`)?"""
    return type(v) in _PLAIN


def _named(example: dict, op: Op, history: History) -> bool:
    """Is `op` the stuck op or in its window (the lines that prove the violation)?"""
    line = history.line_of(op.invoke_pos)
    named = [example.get("op") or {}, *example.get("window", [])]
    return any(d.get("line") == line for d in named)
