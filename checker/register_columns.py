"""Large `register` JSON Lines histories as numpy columns (`register_load` reads them).

`sleuth check --workload register` on a history of 100,000 operations spent
most of its time turning every line into Python objects: a dict per line
(orjson), an `Op` per operation (pairing), then a `Call` per operation (the
checker). This reader goes from the file's bytes to numpy columns (one entry
per operation: key, f, outcome, values as small integer ids, invoke and
completion positions) and the checker (`linearizable.check_registers`) builds
Python objects only for the keys it searches.

It reads only what it can read exactly, and hands anything else to the
general reader (`sleuth.history.imports.load`), which then judges the file as
before, bad input included (one line naming file and line):

- Every digit run in the file is found at once; replacing each by `#` turns
  a line into its *skeleton*. The few distinct skeletons (sleuth's writer
  gives about fifteen) are each decoded once with orjson, a marker number
  standing for each run, to learn which run is the index, the time, the
  process, the key and the values, and to check the constant parts by the
  format's rules (`sleuth.history.jsonl.RULES`): a skeleton that is not a valid
  event (an unknown field, a float, a string value, a nested value, a
  backslash, ...) sends the file to the general reader.
- Digit runs with a leading zero or over 16 digits, an index that is not the
  line's position, a process breaking the pairing rules, an operation that is
  not read, write or cas, or whose completion names another key: the general
  reader again (it names the line).

So the fast path accepts a subset of what the general reader accepts, and on
that subset yields the same operations: `tests/test_register_load.py` checks
both readers against each other, verdicts and explanations, on random files.
`register_load.read_register` decides which files come here (numpy's import
would cost a small file more than it saves).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

if "numpy" not in sys.modules:
    # Only array scans and sorts here, no linear algebra: OpenBLAS's thread
    # pool, which numpy's import starts on every core, would cost more CPU
    # (0.04 s on this 2-core machine) than the whole check of a small file.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import orjson  # noqa: E402

from sleuth.checker import register_models as rm
from sleuth.history.jsonl import NEMESIS, TYPES, Event, History, Op, event_from_dict

MARK = 1 << 52  # a marker number standing for a digit run while a skeleton is decoded
MAX_DIGITS = 16  # `_numbers` reads at most two words of eight digits
TYPE_CODES = {"invoke": 0, "ok": 1, "fail": 2, "info": 3}
TYPE_NAMES = tuple(TYPE_CODES)
F_CODES = {"read": 0, "write": 1, "cas": 2}
FIELDS = ("index", "time", "process", "key", "p", "o", "n")  # p: a read/write value; o, n: cas
KNOWN = frozenset(("index", "time", "type", "process", "f", "value", "node", "error", "ts"))


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


class RegisterHistory(History):
    """A `History` whose register operations are held as `Columns`. `ops()`
    (which a checker of registers does not need) reads the file again with
    the general reader."""

    register_columns: Columns

    def ops(self) -> list[Op]:
        if self._ops is None:
            from sleuth.history.imports import load

            self._ops = load(self.source, events=False).ops()
        return self._ops


# ---------------------------------------------------------------------------
# Skeletons


@dataclass
class _Template:
    runs: int  # digit runs in a line of this shape
    type: int
    f: int  # F_CODES, or -1 for a nemesis event
    slot: dict[str, int]  # field -> which run of the line holds it (-1: a constant)
    sign: dict[str, int]
    const: dict[str, Any]  # field -> its constant value (frozen), when not a run


def _analyze(skeleton: bytes) -> _Template | None:
    """What a line of this skeleton says, or None if the fast path does not
    read such lines (the general reader decides them)."""
    try:
        text = skeleton.decode()
    except UnicodeDecodeError:
        return None
    if "\\" in text:
        return None
    out, inside, runs = [], False, 0
    for ch in text:
        if ch == '"':
            inside = not inside
        elif ch == "#":
            ch = "0" if inside else str(MARK + runs)  # digits inside strings matter to nobody here
            runs += 1
        out.append(ch)
    try:
        d = orjson.loads("".join(out))
    except orjson.JSONDecodeError:
        return None
    if type(d) is not dict or not d.keys() <= KNOWN:
        return None
    t = _Template(runs, 0, -1, {}, {}, {})

    def run(name: str, v: Any, signed: bool = False) -> bool:
        if type(v) is int and abs(v) >= MARK and (signed or v > 0):
            t.slot[name], t.sign[name] = abs(v) - MARK, 1 if v > 0 else -1
            return True
        return False

    def value(name: str, v: Any) -> bool:  # a run, or a constant with no run in it
        if run(name, v, signed=True):
            return True
        if _has_marker(v):
            return False
        t.slot[name], t.const[name] = -1, rm.freeze(v)
        return True

    typ, process, f = d.get("type"), d.get("process"), d.get("f")
    if not (run("index", d.get("index")) and run("time", d.get("time"))
            and type(typ) is str and typ in TYPES and type(f) is str):
        return None
    node, ts = d.get("node"), d.get("ts")
    if not (node is None or type(node) is str) or _has_marker(d.get("error")):
        return None
    if not (ts is None or run("ts", ts, signed=True)):
        return None
    t.type = TYPE_CODES[typ]
    if process == NEMESIS:
        return t
    if not run("process", process) or f not in F_CODES:
        return None
    t.f = F_CODES[f]
    v = d.get("value")
    if not (type(v) is list and len(v) == 2 and value("key", v[0])):
        return None
    payload = v[1]
    if t.f == 2:
        return t if (type(payload) is list and len(payload) == 2 and value("o", payload[0])
                     and value("n", payload[1])) else None
    if t.f == 0 and t.type == 0:
        return t  # a read's invoke: its value is not used
    return t if value("p", payload) else None


def _has_marker(v: Any) -> bool:
    t = type(v)
    if t is int:
        return abs(v) >= MARK
    if t is list:
        return any(map(_has_marker, v))
    if t is dict:
        return any(map(_has_marker, v.values()))
    return t is float


# ---------------------------------------------------------------------------
# The file, as columns


CHUNK = 1 << 18  # bytes of whole lines worked on at a time: the work arrays stay small


def chunks(fh) -> Any:
    """The file's bytes, CHUNK at a time, cut after a newline (one added at the end)."""
    carry = b""
    while True:
        data = fh.read(CHUNK)
        if not data:
            break
        data = carry + data
        cut = data.rfind(b"\n") + 1
        if cut:
            yield data[:cut]
        carry = data[cut:]
    if carry:
        yield carry + b"\n"


DEFAULTS = (-1, 0, -1, 0, 0, 0, 0)  # of each of FIELDS on a line without it


class _Lines:
    """Lines read so far: their skeletons' templates and their fields' numbers."""

    def __init__(self, source: str):
        self.source = source
        self.shapes: dict[bytes, int] = {}
        self.templates: list[_Template] = []
        self.tid: list[Any] = []
        self.fields: list[Any] = []  # per chunk: a line x FIELDS array
        self.nemesis: list[Event] = []
        self.n = 0

    def add(self, data: bytes) -> None:
        """One chunk of whole lines (ending with a newline)."""
        buf = np.frombuffer(data, np.uint8)
        digit = (buf - 48) < 10
        edge = np.zeros(len(buf) + 1, np.bool_)  # edge[i]: digit[i] != digit[i-1]
        edge[0] = digit[0]
        np.not_equal(digit[1:], digit[:-1], out=edge[1:-1])
        bounds = np.flatnonzero(edge)  # the last byte is a newline: every run ends
        starts, ends = bounds[0::2], bounds[1::2]
        lengths = ends - starts
        if len(starts) and (lengths.max() > MAX_DIGITS or bool(
                ((buf[starts] == 48) & (lengths > 1)).any())):
            raise Odd  # a run the general reader may read otherwise (or refuse)
        keep = ~digit
        keep[starts] = True
        skeleton = buf[keep]
        dropped = np.zeros(len(starts), np.int64)  # digits dropped before each run
        np.cumsum(lengths[:-1] - 1, out=dropped[1:])
        skeleton[starts - dropped] = 35  # '#'
        lines = skeleton.tobytes().split(b"\n")
        lines.pop()  # after the last newline
        shapes, templates = self.shapes, self.templates
        for s in set(lines).difference(shapes):
            t = _analyze(s)
            if t is None:
                raise Odd
            shapes[s] = len(templates)
            templates.append(t)
        tid = np.fromiter(map(shapes.__getitem__, lines), np.int32, len(lines))
        n = len(lines)
        runs = np.array([t.runs for t in templates], np.int64)[tid]
        first_run = np.zeros(n, np.int64)
        np.cumsum(runs[:-1], out=first_run[1:])
        if n and first_run[-1] + runs[-1] != len(starts):
            raise Odd
        # Every field of every line at once: which run holds it, and its number.
        slot = np.array([[t.slot.get(name, -1) for name in FIELDS] for t in templates],
                        np.int64)[tid]
        sign = np.array([[t.sign.get(name, 1) for name in FIELDS] for t in templates],
                        np.int64)[tid]
        has = slot >= 0
        out = np.empty((n, len(FIELDS)), np.int64)
        out[:] = DEFAULTS
        r = (first_run[:, None] + slot)[has]
        out[has] = _numbers(buf, ends[r], lengths[r]) * sign[has]
        if not np.array_equal(out[:, 0], np.arange(self.n, self.n + n)):
            raise Odd  # an index that is not the line's position
        self.fields.append(out)
        nemesis = np.flatnonzero(np.array([t.f < 0 for t in templates], np.bool_)[tid])
        for i, raw in zip(nemesis.tolist(), _lines_at(data, nemesis), strict=True):
            pos = self.n + i
            self.nemesis.append(event_from_dict(orjson.loads(raw), self.source, pos + 1, pos))
        self.tid.append(tid)
        self.n += n


def read(chunks: Any, source: str) -> History:
    """The history whose bytes `chunks` yields (see `chunks`); Odd if it cannot be read exactly here."""
    lines = _Lines(source)
    for data in chunks:
        lines.add(data)
    n, templates = lines.n, lines.templates
    if not n:
        raise Odd
    tid = np.concatenate(lines.tid)
    num = {name: np.concatenate([part[:, i] for part in lines.fields])
           for i, name in enumerate(FIELDS)}
    time = num["time"]
    types = np.array([t.type for t in templates], np.int8)[tid]
    fs = np.array([t.f for t in templates], np.int8)[tid]
    process = num["process"]
    process[fs < 0] = -1  # nemesis events
    ops = _pair(process, types, fs)
    # Values: runs are ints; constants (null, true, strings) are frozen values.
    const_ids: dict[Any, int] = {}
    tables: dict[str, Any] = {}
    for name in ("key", "p", "o", "n"):  # constant index; -1: a run; -2: no such field
        ix = np.array([const_ids.setdefault(t.const[name], len(const_ids)) if name in t.const
                       else -1 if name in t.slot else -2 for t in templates], np.int64)
        tables[name] = (num[name], ix[tid])
    inv, ret = ops
    typ = np.where(ret >= 0, types[np.maximum(ret, 0)], 3)
    ok = typ == 1
    line = np.where(ok, ret, inv)  # the line whose value counts (`register_models.parse_op`)
    f = fs[inv]

    def at(name: str, where: Any) -> tuple[Any, Any]:
        num, cix = tables[name]
        return num[where], cix[where]

    key_num, key_const = at("key", line)
    inv_num, inv_const = at("key", inv)
    if not (np.array_equal(key_num, inv_num) and np.array_equal(key_const, inv_const)):
        raise Odd  # a completion names another key: the general reader says where
    keys, key_id = _ids([(key_num, key_const)], const_ids)
    values, (p, o, nv) = _ids([at("p", line), at("o", line), at("n", line)], const_ids)
    read = f == 0
    a = np.where(f == 2, o, np.where(read & ~ok, -1, p))
    b = np.where(f == 2, nv, -1)
    if bool((a[~read | ok] < 0).any()):
        raise Odd
    h = RegisterHistory([], source)
    h.compact = (n, lines.nemesis)
    back = np.flatnonzero(time[1:] < time[:-1])
    if len(back):
        h.time_backwards = (int(back[0]) + 2, len(back))
    h.register_columns = Columns(key_id[0], f, typ.astype(np.int8), a, b, inv, ret, process[inv],
                                 time, keys, values)
    return h


def _numbers(buf: Any, ends: Any, lengths: Any) -> Any:
    """The integers written by the digit runs ending at `ends` (each
    `lengths` long, at most 16), eight digits at a time: the eight bytes
    ending at a run's end, read as one little-endian word whose bytes before
    the run are cleared, give its value in three multiply-and-mask steps
    (the classic SWAR parse)."""
    out = np.zeros(len(ends), np.int64)
    if not len(ends):
        return out
    words = np.lib.stride_tricks.as_strided(buf, (max(len(buf) - 7, 0), 8), (1, 1))
    scale = 1
    lengths = lengths.astype(np.uint64)
    for _ in range(2):  # the last eight digits, then the eight before them
        first = ends - 8
        if bool(((first < 0) & (lengths > 0)).any()):  # a run at the start of the file
            raise Odd
        x = np.ascontiguousarray(words[np.maximum(first, 0)]).view("<u8").ravel()
        cut = np.uint64(8) * (np.uint64(8) - np.minimum(lengths, np.uint64(8)))
        x = np.where(lengths > 0, (x >> cut) << cut, np.uint64(0))  # only the run's bytes
        x &= np.uint64(0x0F0F0F0F0F0F0F0F)
        x = (x * np.uint64(10) + (x >> np.uint64(8))) & np.uint64(0x00FF00FF00FF00FF)
        x = (x * np.uint64(100) + (x >> np.uint64(16))) & np.uint64(0x0000FFFF0000FFFF)
        x = (x * np.uint64(10000) + (x >> np.uint64(32))) & np.uint64(0xFFFFFFFF)
        out += x.astype(np.int64) * scale
        if not bool((lengths > 8).any()):
            break
        ends = ends - 8
        lengths = np.where(lengths > 8, lengths - np.uint64(8), np.uint64(0))
        scale = 10 ** 8
    return out


def _pair(process: Any, types: Any, fs: Any) -> tuple[Any, Any]:
    """(invoke positions, completion positions or -1), in invoke order, as
    `sleuth.history.jsonl.Pairer` pairs them; Odd where it would refuse the file."""
    client = np.flatnonzero(process >= 0)
    who = process[client]
    if len(who) and who.max() < 1 << 15:
        who = who.astype(np.int16)  # numpy sorts 16-bit numbers stably by radix
    order = client[np.argsort(who, kind="stable")]
    p = process[order]
    m = len(order)
    new = np.ones(m, np.bool_)
    new[1:] = p[1:] != p[:-1]
    group_start = np.maximum.accumulate(np.where(new, np.arange(m), 0))
    even = (np.arange(m) - group_start) % 2 == 0
    t = types[order]
    if bool(((t == 0) != even).any()):
        raise Odd  # an invoke in flight, or a completion with no invoke
    last = np.ones(m, np.bool_)
    last[:-1] = new[1:]
    if bool(((t == 3) & ~last).any()):
        raise Odd  # a process used again after its info
    inv = order[even]
    has = np.zeros(len(inv), np.bool_)
    has[:] = ~last[even]
    ret = np.full(len(inv), -1, np.int64)
    ret[has] = order[np.flatnonzero(even)[has] + 1]
    if bool((fs[inv][has] != fs[ret[has]]).any()):
        raise Odd  # a completion of another f
    by_invoke = np.argsort(inv)
    return inv[by_invoke], ret[by_invoke]


def _ids(columns: list[tuple[Any, Any]], const_ids: dict[Any, int]) -> tuple[list, list]:
    """Dense ids over several (number, constant index) columns at once, the
    constant index being -1 where the number counts and -2 where there is no
    value: (the frozen value of each id, each column as ids, -1 for none)."""
    nums = np.concatenate([num[const == -1] for num, const in columns])
    if len(nums) and 0 <= nums.min() and nums.max() < 4 * len(nums):
        present = np.zeros(int(nums.max()) + 1, np.bool_)  # small numbers: a table, no sort
        present[nums] = True
        ints = np.flatnonzero(present)
        rank = np.cumsum(present) - 1
        find = rank.__getitem__
    else:
        ints = np.unique(nums)
        find = ints.searchsorted
    values = ints.tolist() + list(const_ids)
    out = []
    for num, const in columns:
        ids = find(np.where(const == -1, num, ints[0] if len(ints) else 0))
        out.append(np.where(const >= 0, len(ints) + const, np.where(const == -1, ids, -1)))
    return values, out


def _lines_at(data: bytes, positions: Any) -> list[bytes]:
    """The raw lines at these positions (few: the nemesis events)."""
    if not len(positions):
        return []
    ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
    begins = np.concatenate([[0], ends[:-1] + 1])
    return [data[b:e] for b, e in zip(begins[positions].tolist(), ends[positions].tolist(),
                                      strict=True)]


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
