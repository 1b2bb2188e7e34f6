"""Large `register` JSON Lines histories as numpy columns (`register_load` reads them).

`sleuth check --workload register` on a history of 100,000 operations spent
most of its time turning every line into Python objects: a dict per line
(orjson), an `Op` per operation (pairing), then a `Call` per operation (the
checker). This reader goes from the decoded lines to numpy columns (one entry
per operation: key, f, outcome, values as small integer ids, invoke and
completion positions) and the checker (`linearizable.check_registers`) builds
Python objects only for the keys it searches.

It reads only what it can read exactly, and hands anything else to the
general reader (`sleuth.history.imports.load`), which then judges the file as
before, bad input included (one line naming file and line). The lines are
decoded by sleuth's one decoder of history lines (`sleuth.history.jsonl`'s
`line_chunks`, typed for register lines), a block at a time; each block
becomes columns at once (`_Lines.add`; values as ids, `_Values`), and the
operations are paired by sleuth's columnar pairer
(`sleuth.history.jsonl.pair_columns`). A line the strict types refuse, a blank
line, an index that is not the line's position, a process breaking the
pairing rules, an operation that is not read, write or cas, a float value,
or a completion that names another key: the general reader (it names the
line).

So the fast path accepts a subset of what the general reader accepts, and on
that subset yields the same operations: `tests/test_register_load.py` checks
both readers against each other, verdicts and explanations, on random files.
`register_load.read_register` decides which files come here (numpy's import
would cost a small file more than it saves).
"""

from __future__ import annotations

import operator
import os
import sys
from dataclasses import dataclass
from typing import Any, Literal

if "numpy" not in sys.modules:
    # Only array scans and sorts here, no linear algebra: OpenBLAS's thread
    # pool, which numpy's import starts on every core, would cost more CPU
    # (0.04 s on this 2-core machine) than the whole check of a small file.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import msgspec  # noqa: E402
import numpy as np  # noqa: E402

from sleuth.checker import register_models as rm
from sleuth.checker.register_load import RegisterHistory
from sleuth.history.jsonl import (
    NEMESIS,
    TYPE_CODES,
    Event,
    History,
    Op,
    line_chunks,
    pair_columns,
    typed_lines,
)

TYPE_NAMES = tuple(TYPE_CODES)
F_CODES = {"read": 0, "write": 1, "cas": 2}
# (type, f) of a line as one code, type * 4 + f: one lookup a line, not two
TYPE_F_CODES = {(t, f): tc * 4 + fc for t, tc in TYPE_CODES.items() for f, fc in F_CODES.items()}


class Odd(Exception):
    """The file is not one the fast path reads exactly: use the general reader."""


@dataclass
class Columns:
    """A register history's operations, one entry per operation in invoke
    order: `key` (id into `keys`), `f` (F_CODES), `type` (TYPE_CODES of the
    outcome; info when never completed), `a` / `b` (value ids into `values`:
    a read's value or a write's, a cas's old and new; -1 when none), `call` /
    `ret` (event positions; ret -1 when never completed) and `process`.
    Values and keys are frozen (`register_models.freeze`); equal ids mean
    equal values."""

    key: Any
    f: Any
    type: Any
    a: Any
    b: Any
    call: Any
    ret: Any
    process: Any
    time: Any  # of every event
    keys: list[Any]
    values: list[Any]

    def op(self, i: int) -> Op:
        """Operation i as the general reader would give it (for explanations)."""
        f = ("read", "write", "cas")[self.f[i]]
        typ = TYPE_NAMES[self.type[i]]
        key = rm.thaw(self.keys[self.key[i]])
        values = self.values
        if f == "cas":
            payload = [rm.thaw(values[self.a[i]]), rm.thaw(values[self.b[i]])]
        elif self.a[i] >= 0:
            payload = rm.thaw(values[self.a[i]])
        else:
            payload = None
        call, ret = int(self.call[i]), int(self.ret[i])
        value = [key, payload]
        invoke_value = [key, None] if f == "read" else value
        complete = None if ret < 0 else ret
        return Op(i, int(self.process[i]), f, typ, invoke_value, value, call, complete,
                  int(self.time[call]), None if complete is None or typ == "info"
                  else int(self.time[ret]))


# ---------------------------------------------------------------------------
# The file, as columns


def _codes(table: dict, names: Any, dtype: Any) -> Any:
    return np.fromiter(map(table.__getitem__, names), dtype)


def _pick(xs: list, where: Any) -> list:
    """xs[i] for each i in `where`, at C speed (itemgetter)."""
    where = where.tolist()
    if len(where) < 2:
        return [xs[i] for i in where]
    return list(operator.itemgetter(*where)(xs))


class _Values:
    """Dense ids of JSON values, equal ids iff equal values: values are frozen
    (`register_models.freeze`: true is not 1, a list is a tuple); a float, which Python
    takes as equal to an int, sends the file to the general reader (Odd)."""

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}

    def of(self, values: list) -> Any:
        """The ids of `values`, as an int64 array."""
        kinds = set(map(type, values))
        if float in kinds:
            raise Odd
        if not kinds <= {int, str, type(None)}:
            values = list(map(rm.freeze, values))
        ids = self.ids
        for v in dict.fromkeys(values):  # the distinct values, in order: few
            if v not in ids:
                ids[v] = len(ids)
        return np.fromiter(map(ids.__getitem__, values), np.int64, len(values))


class _Lines:
    """Lines read so far, as per-event columns of numbers (values as ids, `_Values`)."""

    def __init__(self, source: str):
        self.source = source
        self.values = _Values()
        self.cols: dict[str, list[Any]] = {c: [] for c in ("time", "type", "f", "process", "key", "p", "o", "n")}
        self.nemesis: list[Event] = []
        self.n = 0

    def add(self, lines: list) -> None:
        """One block of decoded lines (`sleuth.history.jsonl.decode_block`); Odd if some line is
        not one the columns hold exactly."""
        n = len(lines)
        if not n:
            return
        # The fields, in one pass over the lines rather than one pass each (7% fewer
        # instructions for the whole read, by cachegrind)
        index, time, procs, types, fs, values = zip(*[(e.index, e.time, e.process, e.type, e.f, e.value)
                                                      for e in lines], strict=True)
        if index[0] != self.n or not np.array_equal(np.fromiter(index, np.int64, n),
                                                    np.arange(self.n, self.n + n)):
            raise Odd  # an index that is not the line's position
        try:  # a client's process is a number: the nemesis's, the one string the strict types allow
            process = np.fromiter(procs, np.int64, n)
            nemesis = np.zeros(n, np.bool_)
        except ValueError:
            nemesis = np.array(procs, dtype=object) == NEMESIS
            procs, fs, values = list(procs), list(fs), list(values)
            for i in np.flatnonzero(nemesis).tolist():
                e = lines[i]
                self.nemesis.append(Event(self.n + i, e.time, e.type, NEMESIS, e.f, e.value, e.node,
                                          e.error, e.ts))
                procs[i], fs[i], values[i] = -1, "read", (None, None)
            process = np.array(procs, np.int64)
        try:
            tf = _codes(TYPE_F_CODES, zip(types, fs), np.int8)
        except KeyError:
            raise Odd from None  # an operation that is not read, write or cas
        f = tf % 4
        f[nemesis] = -1
        if not set(map(type, values)) <= _SEQUENCES:
            raise Odd
        try:  # [key, payload] each (zip's strictness checks the lengths)
            keys, payload = zip(*values, strict=True)
        except ValueError:
            raise Odd from None
        cas = np.flatnonzero(f == 2)
        pairs = _pick(payload, cas)
        o, nv = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
        if pairs:
            if set(map(type, pairs)) - _SEQUENCES:
                raise Odd  # a cas whose value is not [old, new]
            try:
                olds, news = zip(*pairs, strict=True)
            except ValueError:
                raise Odd from None
            o[cas] = self.values.of(olds)
            nv[cas] = self.values.of(news)
        p = np.full(n, -1, np.int64)
        plain = np.flatnonzero(f != 2)
        p[plain] = self.values.of(_pick(payload, plain))
        c = self.cols
        c["key"].append(self.values.of(keys))
        c["p"].append(p)
        c["o"].append(o)
        c["n"].append(nv)
        c["f"].append(f)
        c["process"].append(process)
        c["time"].append(np.fromiter(time, np.int64, n))
        c["type"].append(tf // 4)
        self.n += n


# A block's decoded lines are held until its columns are made, and made while they are
# still in the CPU's cache: 128 KiB blocks (1,500 lines) read a 100k-op history in about
# 10% less CPU than 1 MiB ones, and 4 MiB ones in more; below 64 KiB the per-block numpy
# calls start to count. Smaller blocks also hold less (61 vs 67 MiB at 100k ops).
BLOCK_BYTES = 1 << 17
_SEQUENCES = frozenset((list, tuple))  # a value as the file has it, or as the typed decoder gives it
# Register lines as they mostly are, typed: values of whole numbers decoded as tuples of
# them, at less time and memory than as lists of anything (others: `decode_block` decodes
# them generally).
_TYPED = typed_lines(Literal["read", "write", "cas"], tuple[int, int | None | tuple[int | None, int | None]])


def read(fh, source: str) -> History:
    """The history in file `fh` (JSON Lines, decoded by sleuth's one decoder of history
    lines, `sleuth.history.jsonl.line_chunks`, and paired by its columnar pairer,
    `sleuth.history.jsonl.pair_columns`); Odd if it cannot be read exactly here."""
    lines = _Lines(source)
    try:
        for block in line_chunks(fh, _TYPED, BLOCK_BYTES):
            lines.add(block)
    except (msgspec.MsgspecError, ValueError):
        raise Odd from None  # a line breaking the strict types, or a blank one
    n = lines.n
    if not n:
        raise Odd
    col = {name: np.concatenate(parts) for name, parts in lines.cols.items()}
    time, types, fs, process = col["time"], col["type"], col["f"], col["process"]
    paired = pair_columns(process, types, fs)
    if paired.bad >= 0:
        raise Odd  # the general reader names the line (`Pairer`'s message)
    inv, ret = paired.invoke, paired.complete
    typ = np.where(ret >= 0, types[np.maximum(ret, 0)], 3)
    ok = typ == 1
    line = np.where(ok, ret, inv)  # the line whose value counts (`register_models.parse_op`)
    f = fs[inv]
    key = col["key"][inv]
    if not np.array_equal(col["key"][line], key):
        raise Odd  # a completion names another key: the general reader says where
    read = f == 0
    a = np.where(f == 2, col["o"][line], np.where(read & ~ok, -1, col["p"][line]))
    b = np.where(f == 2, col["n"][line], -1)
    h = RegisterHistory([], source)
    h.compact = (n, lines.nemesis)
    back = np.flatnonzero(time[1:] < time[:-1])
    if len(back):
        h.time_backwards = (int(back[0]) + 2, len(back))
    values = list(lines.values.ids)
    h.columns = Columns(key, f, typ.astype(np.int8), a, b, inv, ret, process[inv], time, values, values)
    return h


# ---------------------------------------------------------------------------
# What the checker takes: one key at a time


@dataclass
class KeyOps:
    """One key's operations for `linearizable.check_registers`: `calls()`
    builds the search's `Call`s (without their `Op`s; `attach` adds them for
    an explanation), and `refuted` says that `scarcity.refuted` proved the
    key has no linearization."""

    key: Any
    calls: Any
    refuted: bool


def key_ops(cols: Columns, failed_cas_observes: bool) -> tuple[list[KeyOps], int, int]:
    """The keys to search, in the order the general path meets them (by
    their first operation kept), with (keys named, keys with something
    observed). Dropped as there: `fail` ops (but a failed cas with
    `failed_cas_observes`, an observation) and crashed reads."""
    from sleuth.checker.scarcity import refuted

    f, typ = cols.f, cols.type
    fail, info, ok = typ == 2, typ == 3, typ == 1
    observes = (f == 2) & fail if failed_cas_observes else np.zeros(len(f), np.bool_)
    kept = np.flatnonzero(~(fail & ~observes) & ~(info & (f == 0)))
    named = len(np.unique(cols.key))
    judged = len(np.unique(cols.key[ok | observes]))
    k = cols.key[kept]
    uniq, first = np.unique(k, return_index=True)
    rank = np.zeros(len(cols.keys), np.int64)
    rank[uniq[np.argsort(first)]] = np.arange(len(uniq))
    group = rank[k]
    by_group = kept[np.argsort(group, kind="stable")]
    bounds = np.searchsorted(np.sort(group), np.arange(len(uniq) + 1))
    ff, a, b, okk = f[kept], cols.a[kept], cols.b[kept], ok[kept]
    need = np.where(okk & (ff != 1), a, -1)
    post = np.where(okk, np.where(ff == 2, b, a), -1)
    effective = ~fail[kept]
    makes = np.where(effective & (ff == 1), a,
                     np.where(effective & (ff == 2) & (a != b), b, -1))
    ret = np.where(info[kept], len(cols.time) + 1, cols.ret[kept])
    refute = refuted(group, cols.call[kept], ret, need, post, makes, len(uniq)).tolist()
    keys = [cols.keys[i] for i in uniq[np.argsort(first)].tolist()]
    return [KeyOps(keys[g], _Calls(cols, by_group[bounds[g]:bounds[g + 1]]), refute[g])
            for g in range(len(uniq))], named, judged


class _Calls:
    """A key's `Call`s, built when asked for."""

    def __init__(self, cols: Columns, ops: Any):
        self.cols, self.ops = cols, ops

    def __call__(self) -> list:
        from sleuth.checker.linearizable import Call

        c, ops, values, unknown = self.cols, self.ops, self.cols.values, rm.UNKNOWN
        out = []
        for f, t, a, b, call, ret in zip(c.f[ops].tolist(), c.type[ops].tolist(),
                                         c.a[ops].tolist(), c.b[ops].tolist(),
                                         c.call[ops].tolist(), c.ret[ops].tolist(), strict=True):
            if f == 0:
                name, inv, got = "read", None, values[a] if t == 1 else unknown
            elif f == 1:
                name, inv = "write", values[a]
                got = inv if t == 1 else unknown
            else:
                name, inv = ("cas" if t != 2 else rm.FAILED_CAS), (values[a], values[b])
                got = inv if t == 1 else unknown
            out.append(Call(None, name, inv, got, call, None if t == 3 else ret))
        return out

    def attach(self, calls: list) -> None:
        """Give these calls their `Op`s (for an explanation)."""
        calls = [c for c in calls if c.op is None]
        where = np.searchsorted(self.cols.call, [c.call for c in calls]).tolist()
        for c, i in zip(calls, where, strict=True):
            c.op = self.cols.op(i)
