"""The history model (docs/history-format.md): events, operations, and the JSON Lines format.

A history is the clients' and the nemesis's record of a run. It is a list of
`Event`s (one line of `history.jsonl` each). Checkers work on `Op`s: an invoke
paired with its completion. Everything a checker needs is here; importers of
foreign formats (`sleuth.history.imports`) produce the same `Event`s.

Reading validates as it goes: a malformed history raises `HistoryError`, whose
message is one line naming the file, the line and the problem.

This module is the one reader of histories and the one pairer; every path
uses its pieces:

- the rules of an event, `RULES` (`event_from_dict`), and line by line,
  `events_by_rules`: the slow path that names the first bad line;
- the block decoder, `decode_block` (msgspec structs, `Line`: strict types, a
  subset of RULES; anything it refuses goes to the slow path), over blocks of
  whole lines (`blocks`, `whole_lines`, `line_chunks`), typed for a
  workload's known shapes (`typed_lines`, `txn_lines`: micro-ops as tuples)
  or keeping values as JSON text (`decode_raw_lines`, `RawLine`);
- the pairer, `Pairer` (object mode: events one at a time, the rules'
  messages) and `pair_columns` (columnar mode: the same rules over numpy
  columns, a breach found at the event where `Pairer` raises, whose message
  the caller then gets from `Pairer`).

Who reads how (the map):

- `sleuth check FILE`, `sleuth run`'s judging, reports (`Workload.load`):
  `.jsonl` by `read_jsonl` (events kept or, for checkers, `events=False`:
  ops and nemesis events only, micro-ops typed by the workload's `micro_ops`)
  = `line_chunks` + `Pairer`, else `parse_jsonl_slow` = `events_by_rules` +
  `Pairer`; other formats (Jepsen's EDN and text logs, elle's JSON arrays,
  sparse JSON Lines) by `sleuth.history.imports`, which turns them into events by the
  same RULES, filling in what sparse files leave out, then `Pairer`.
- registers, `.jsonl` of 1 MiB or more, events not wanted
  (`checker/register_load.py`): `line_chunks` typed for register lines, then
  columns and `pair_columns` (`checker/register_columns.py`); a file that
  is not read exactly so goes the general way, which names any bad line.
- `sleuth check --follow` (`sleuth.history.follow`): `whole_lines` +
  `decode_block` (`txn_lines`), `events_by_rules` where it refuses; the
  online engines pair by `Pairer` (`checker/online`).
- `sleuth check --spark`: the tasks decode byte ranges by `decode_raw_lines`
  (or `event_from_dict` line by line) and pair each block by `pair_columns`,
  the driver across blocks by `pair_columns` (`sleuth/spark/history_pair.py`);
  a bad line or a broken rule is named by `events_by_rules` and `Pairer`
  streamed over the files (`sleuth/spark/history_ops.py`); other formats are
  imported by `sleuth.history.imports` and written as JSON Lines first.
- the campaign's consolidation (`sleuth/spark/consolidate.py`): `read_jsonl`;
  of a file it refuses, the lines `event_from_dict` accepts; paired by
  `pair_columns`, breaches set aside (a damaged run is judged unknown).
"""

from __future__ import annotations

import functools
import gc
import operator
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from sys import intern
from typing import Annotated, Any, Literal, TypeVar

import msgspec
import orjson

from sleuth.base.jsonfile import written_whole

F = TypeVar("F", bound=Callable)
_MICRO_OP = operator.itemgetter(0, 1)  # a micro-op's function and key


def gc_paused(fn: F) -> F:
    """Run `fn` with the cyclic garbage collector paused.

    Loading and analysing a history allocates millions of small containers
    that all live until the end; the collector would rescan them again and
    again (it made loading 3x slower). Nothing here builds reference cycles
    that need collecting early.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()

    return wrapper  # type: ignore[return-value]


_UNFREED: list | None = None  # set by `leave_unfreed`


def leave_unfreed() -> None:
    """The program will leave without tearing down its heap (`sleuth.cli.entry` after
    `sleuth check`): from now on `unfreed` keeps the last object it is given alive."""
    global _UNFREED
    _UNFREED = []


def unfreed(obj: Any) -> None:
    """Keep `obj` (a checker's working state, about to be dropped) alive until the program
    leaves, when it leaves without freeing (`leave_unfreed`): freeing it is work for
    nothing then (0.28 s at a million list-append transactions, 45 ms at 100k). Only the
    last one is kept, so a check of many files holds no more than one at a time. Called
    in-process (tests, a library user), this does nothing."""
    if _UNFREED is not None:
        _UNFREED[:] = [obj]


TYPES = frozenset(("invoke", "ok", "fail", "info"))
NEMESIS = "nemesis"


WRITE_FS = frozenset(("write", "cas", "add", "transfer", "append"))  # append: the source workload's
# A transaction's micro-op functions ([f, k, v]; docs/history-format.md): words of the format,
# which the checker registry's transactional workloads each use some of (`Workload.micro_ops`).
MICRO_OPS = frozenset(("append", "r", "w"))


def writes(f: str, value: Any) -> bool:
    """Can this operation change the database? A transaction with any micro-op but a read
    (`append`, `w`), or a write, cas, add or transfer (docs/history-format.md's shapes). The runner asks
    it to tell a lost write (info) from a lost read (fail); the timestamp rules to tell a
    write's timestamp from a read's. One answer for both, with the format it reads (here, below the
    clients and the checkers)."""
    if f == "txn":
        return any(m[0] != "r" for m in value or ())
    return f in WRITE_FS


class HistoryError(ValueError):
    """A history that breaks docs/history-format.md. `str()` is one line: file:line: problem."""

    def __init__(self, source: str, line: int | None, problem: str):
        self.source, self.line, self.problem = source, line, problem
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {problem}")


@dataclass(slots=True)
class Event:
    """One line of a history."""

    index: int
    time: int
    type: str
    process: int | str
    f: str
    value: Any = None
    node: str | None = None
    error: Any = None
    ts: int | None = None

    def to_dict(self) -> dict:
        d = {
            "index": self.index,
            "time": self.time,
            "type": self.type,
            "process": self.process,
            "f": self.f,
            "value": self.value,
        }
        if self.node is not None:
            d["node"] = self.node
        if self.error is not None:
            d["error"] = self.error
        if self.ts is not None:
            d["ts"] = self.ts
        return d


@dataclass(slots=True)
class Op:
    """A client operation: an invoke and its completion.

    `type` is the completion's type; an invoke never completed is `info`.
    `value` is the completion's value for `ok`, else the invoke's value.
    `complete_time` is None when the operation's end is unknown (`info`): it
    may have taken effect at any time after `invoke_time`. A compact load
    (`read_jsonl(..., events=False)`) keeps one value per ok op: there
    `invoke_value` is the completion value too.
    """

    id: int
    process: int
    f: str
    type: str
    invoke_value: Any
    value: Any
    invoke_pos: int
    complete_pos: int | None
    invoke_time: int
    complete_time: int | None
    node: str | None = None
    error: Any = None
    ts: int | None = None

    @property
    def ok(self) -> bool:
        return self.type == "ok"


@dataclass
class History:
    """Events in order, where they came from, and their pairing into ops."""

    events: list[Event]
    source: str = "<history>"
    lines: list[int] | None = None  # source line of each event; None = pos + 1
    _ops: list[Op] | None = field(default=None, repr=False)
    # A compact load keeps ops, not events: (number of events, nemesis events).
    compact: tuple[int, list[Event]] | None = field(default=None, repr=False)
    # (line of the first event whose time is below its predecessor's, how many
    # are), or None. Allowed (docs/history-format.md: the file order is the real-time
    # order; Jepsen reads its clock before appending an event), and said once.
    time_backwards: tuple[int, int] | None = None
    # The file's own label of each event where it differs from the position
    # (Jepsen's `:index` in an imported file), for explanations; None = none.
    labels: list[int | None] | None = field(default=None, repr=False)

    def line_of(self, pos: int) -> int:
        return self.lines[pos] if self.lines is not None else pos + 1

    def label_of(self, pos: int) -> int | None:
        return None if self.labels is None else self.labels[pos]

    @property
    def start_time(self) -> int:
        """The time of the first event: explanations show times from it."""
        if self.events:
            return self.events[0].time
        firsts = [e.time for e in self.nemesis_events()[:1]] + [o.invoke_time for o in self.ops()[:1]]
        return min(firsts, default=0)

    def where(self, pos: int) -> str:
        return f"{self.source}:{self.line_of(pos)}"

    def error(self, pos: int | None, problem: str) -> HistoryError:
        return HistoryError(self.source, None if pos is None else self.line_of(pos), problem)

    def ops(self) -> list[Op]:
        """Client operations in invoke order (nemesis events excluded)."""
        if self._ops is None:
            self._ops = pair(self)
        return self._ops

    def nemesis_events(self) -> list[Event]:
        if self.compact is not None:
            return self.compact[1]
        return [e for e in self.events if e.process == NEMESIS]

    def __len__(self) -> int:
        return self.compact[0] if self.compact is not None else len(self.events)


class Pairer:
    """Pairs invokes with completions as events arrive, enforcing the
    per-process rules: a process has at most one operation in flight, and
    after an `info` it is never used again (docs/history-format.md). Checked here, once,
    so checkers can trust the pairing."""

    def __init__(self, history: History, keep_invoke_values: bool = True):
        self.history = history
        self.keep = keep_invoke_values
        self.ops: list[Op] = []
        self.in_flight: dict[int, Op] = {}
        self.retired: dict[int, int] = {}  # process -> pos of the info that retired it

    def feed(self, pos: int, typ: str, p: int, f: str, value: Any, time: int,
             node: str | None, error: Any, ts: int | None) -> None:
        history = self.history
        if typ == "invoke":
            if p in self.in_flight:
                other = self.in_flight[p].invoke_pos
                raise history.error(pos, f"process {p} invokes while its operation from line "
                                         f"{history.line_of(other)} is still in flight")
            if p in self.retired:
                raise history.error(pos, f"process {p} is used again after its info at line "
                                         f"{history.line_of(self.retired[p])} (a crashed process "
                                         "must not be reused)")
            op = Op(len(self.ops), p, f, "info", value, value, pos, None, time, None, node)
            self.ops.append(op)
            self.in_flight[p] = op
            return
        op = self.in_flight.pop(p, None)
        if op is None:
            raise history.error(pos, f"{typ} for process {p} with no invoke before it")
        if f != op.f:
            raise history.error(pos, f"{typ} of f={f!r} completes an invoke of f={op.f!r} "
                                     f"(line {history.line_of(op.invoke_pos)})")
        if f == "txn" and type(value) is list and not _same_micro_ops(op.invoke_value, value):
            self._micro_ops_differ(pos, typ, op, value)
        op.type = typ
        op.complete_pos = pos
        if typ == "ok":
            op.value = value
            if not self.keep and not _names_another_key(f, op.invoke_value, value):
                op.invoke_value = value  # a compact load keeps one value, unless the checker must
                #                          see the invoke's to say the two disagree
            op.complete_time = time
        elif typ == "fail":
            op.complete_time = time
        else:
            self.retired[p] = pos
        if node is not None:
            op.node = node
        op.error = error
        op.ts = ts


    def pair_run(self, pos0: int, run: list, process: Any, types: Any, fs: Any) -> RunPairs | None:
        """Pair a block of events in columnar form (`pair_columns`), continuing this pairer:
        `run` the decoded events at positions pos0, pos0 + 1, ...; `process`, `types`, `fs`
        their numpy columns as `pair_columns` takes them (process -1 for the nemesis). The
        operations in flight when the block begins are this pairer's: a process's first
        event here must be an invoke of a process neither in flight nor retired, or the
        completion of its operation in flight, of the same f. Nothing changes here
        (`take_run` commits); None when some event breaks a rule: then `feed` the events one
        by one, and it raises at the first, naming its line."""
        import numpy as np

        paired = pair_columns(process, types, fs, open_ends=True)
        if paired.bad >= 0:
            return None
        in_flight, retired = self.in_flight, self.retired
        for i in np.unique(process, return_index=True)[1].tolist():
            e = run[i]
            p = e.process
            if p == NEMESIS:
                continue
            if e.type == "invoke":
                if p in in_flight or p in retired:
                    return None
            elif p not in in_flight or in_flight[p].f != e.f:
                return None
        return RunPairs(pos0, run, paired.invoke, paired.complete, paired.heads.tolist(), types)

    def take_run(self, pairs: RunPairs) -> tuple[list[tuple[int, Op]], list[tuple[int, Op]]]:
        """Commit a block `pair_run` paired, as `feed` would have taken its events: the
        operations in flight before it that complete in it are completed (`feed`), a process
        whose operation crashed in it is retired, and those invoked in it and still in
        flight at its end become `Op`s in flight (numbered as `feed` numbers them: an op's
        id is its rank in invoke order). Returns (the ops from before completed here, with
        the position of their completion in the block; the ops left in flight, with their
        rank among the block's invokes). The ops invoked and completed in the block are the
        caller's (`pairs.invoke`, `pairs.complete`): this pairer counts them (its `ops` must
        be an `OpCount`) and makes no `Op` of them."""
        import numpy as np

        run, pos0 = pairs.run, pairs.pos0
        done = []
        for i in pairs.heads:
            e = run[i]
            done.append((i, self.in_flight[e.process]))
            self.feed(pos0 + i, e.type, e.process, e.f, e.value, e.time, e.node, e.error, e.ts)
        inv, ret = pairs.invoke, pairs.complete
        base = len(self.ops)
        ended = ret[ret >= 0]
        for r in ended[pairs.types[ended] == TYPE_CODES["info"]].tolist():  # crashed: retired
            self.retired[run[r].process] = pos0 + r
        opened = []
        for j in np.flatnonzero(ret < 0).tolist():
            e = run[inv[j]]
            op = Op(base + j, e.process, e.f, "info", e.value, e.value, pos0 + int(inv[j]), None, e.time, None, e.node)
            self.in_flight[e.process] = op
            opened.append((j, op))
        self.ops.n = base + len(inv)  # type: ignore[union-attr] - an OpCount (see above)
        return done, opened

    def _micro_ops_differ(self, pos: int, typ: str, op: Op, value: list) -> None:
        a, b = list(map(_MICRO_OP, op.invoke_value)), list(map(_MICRO_OP, value))
        where = f"its invoke (line {self.history.line_of(op.invoke_pos)})"
        if len(a) != len(b):
            raise self.history.error(pos, f"{typ} of a txn has {len(b)} micro-ops, {where} has {len(a)}")
        i = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
        raise self.history.error(pos, f"{typ} of a txn: micro-op {i + 1} is {list(b[i])!r}, "
                                      f"{where} has {list(a[i])!r} (function and key must match)")


def _same_micro_ops(invoked: Any, completed: list) -> bool:
    """Does a transaction's completion name the micro-op functions and keys
    of its invoke, in order? (Elle pairs them by position; anything else is a
    different transaction, so the file is bad input.) Malformed micro-ops
    pass here: the datatype's checker names them. A plain loop: the fastest
    way in CPython for the few micro-ops of a transaction."""
    if type(invoked) is not list:
        return True
    if len(invoked) != len(completed):
        return False
    try:
        for x, y in zip(invoked, completed):  # noqa: B905 - equal lengths, checked; strict costs a third
            if x[0] != y[0] or x[1] != y[1]:
                return False
    except (TypeError, IndexError, KeyError):
        return True
    return True


def as_written(value: Any) -> Any:
    """A micro-op, or a txn value, for a message: micro-ops that the typed reader made
    tuples (`txn_lines`) shown as the lists the file holds."""
    if type(value) is tuple:
        return list(value)
    if type(value) is list:
        return [list(m) if type(m) is tuple else m for m in value]
    return value


def _names_another_key(f: str, invoked: Any, completed: Any) -> bool:
    """Is this a [key, value] operation whose completion names another key than its invoke?
    (The register checker says so, naming the line; it needs the invoke's value for that.)"""
    return (f != "txn" and type(invoked) is list and type(completed) is list
            and len(invoked) == 2 == len(completed) and invoked[0] != completed[0])


class OpCount:
    """A `Pairer`'s list of operations, counted and not kept (its length numbers them; the
    last is kept): for who pairs as events arrive and keeps what it needs itself."""

    __slots__ = ("n", "last")

    def __init__(self) -> None:
        self.n = 0
        self.last: Op | None = None

    def __len__(self) -> int:
        return self.n

    def append(self, op: Op) -> None:
        self.n += 1
        self.last = op


def pair(history: History) -> list[Op]:
    """Client operations of `history`, in invoke order."""
    pairer = Pairer(history)
    feed = pairer.feed
    for pos, e in enumerate(history.events):
        if e.process != NEMESIS:
            feed(pos, e.type, e.process, e.f, e.value, e.time, e.node, e.error, e.ts)
    return pairer.ops


TYPE_CODES = {"invoke": 0, "ok": 1, "fail": 2, "info": 3}  # an event's type in a numeric column


@dataclass
class RunPairs:
    """A block of events `Pairer.pair_run` paired: its events (`run`, from position `pos0`),
    `invoke` (positions in the block of the invokes, in order), `complete` (each one's
    completion in the block, -1 for none yet), `heads` (completions in the block of
    operations invoked before it) and `types` (its events' TYPE_CODES)."""

    pos0: int
    run: list
    invoke: Any
    complete: Any
    heads: list[int]
    types: Any


@dataclass
class Paired:
    """What `pair_columns` finds: `invoke` (event positions, in invoke order), `complete`
    (the position of each one's completion, -1 for none), `bad` (the first position that
    breaks a per-process rule, -1 for none) and, with `open_ends`, `heads`: positions of
    completions that are their process's first event in the columns (their invokes are
    before them, outside)."""

    invoke: Any
    complete: Any
    bad: int
    heads: Any = None


def pair_columns(process: Any, types: Any, fs: Any, open_ends: bool = False) -> Paired:
    """`Pairer`'s rules in columnar form (numpy arrays, one entry per event in file order):
    `process` (>= 0 for a client, < 0 for the nemesis), `types` (TYPE_CODES), `fs` (any
    comparable codes for f). For the readers that build columns (registers, Spark).

    The rules are about consecutive events of one process: a completion must follow its
    process's invoke of the same f; an invoke must not follow an invoke (still in flight)
    or an info (a retired process). So ordering client events by (process, position) and
    comparing each with the one before it finds every breach at once, and `bad` is the
    least position of one: the very event at which `Pairer` raises (it raises at the first
    event whose predecessor breaks a rule, each check looking only at that predecessor);
    the message is `Pairer`'s, the caller feeding it to name the line. An invoke pairs
    with its process's next event when that is a completion, which on a valid history is
    `Pairer`'s pairing, and on an invalid one pairs what can be (the campaign's
    consolidation keeps a damaged history's operations so). Micro-ops are not checked here
    (values are the caller's). With `open_ends` (a part of a history), a completion with
    no event of its process before it is not a breach but a head (its invoke is earlier);
    an invoke never completed is so either way (-1): info, or open at the part's end.
    """
    import numpy as np

    client = np.flatnonzero(process >= 0)
    who = process[client]
    if len(who) and 0 <= who.min() and who.max() < 1 << 15:
        who = who.astype(np.int16)  # numpy sorts 16-bit numbers stably by radix
    order = client[np.argsort(who, kind="stable")]
    p, t, f = process[order], types[order], fs[order]
    m = len(order)
    first = np.ones(m, np.bool_)  # its process's first event
    first[1:] = p[1:] != p[:-1]
    invoke = t == 0
    prev_t = np.empty(m, t.dtype)
    prev_t[1:] = t[:-1]
    prev_invoke = ~first & (prev_t == 0)
    same_f = np.ones(m, np.bool_)
    same_f[1:] = f[1:] == f[:-1]
    completes = ~invoke & prev_invoke  # the event before it is its invoke
    breach = (invoke & ~first & ((prev_t == 0) | (prev_t == 3))) | (completes & ~same_f)
    orphan = ~invoke & ~prev_invoke
    breach |= orphan & ~first if open_ends else orphan
    bad = int(order[breach].min()) if breach.any() else -1
    done = np.zeros(m, np.bool_)
    done[:-1] = completes[1:]
    inv = order[invoke]
    ret = np.where(done, np.roll(order, -1), -1)[invoke]
    by_position = np.argsort(inv, kind="stable")
    heads = order[orphan & first] if open_ends else None
    return Paired(inv[by_position], ret[by_position], bad, heads)


# ---------------------------------------------------------------------------
# JSON Lines


# docs/history-format.md's event rules, one table for every reader: the JSON Lines
# reader line by line and a chunk at a time, and the importers of Jepsen's
# formats (sleuth.history.imports), which first turn keywords into strings and fill in
# what sparse files leave out. `index` is not here: its rule is the position.


def _time_ok(v: Any) -> bool:
    return type(v) is int and v >= 0


def _type_ok(v: Any) -> bool:
    return type(v) is str and v in TYPES


def _process_ok(v: Any) -> bool:
    return (type(v) is int and v >= 0) or v == NEMESIS


def _f_ok(v: Any) -> bool:
    return type(v) is str


def _node_ok(v: Any) -> bool:
    return v is None or type(v) is str


def _ts_ok(v: Any) -> bool:
    return v is None or type(v) is int


def _integral(v: Any) -> Any:
    """A time written as a float with nothing after the point (5.0) is that integer."""
    return int(v) if type(v) is float and v.is_integer() else v


def _node_text(v: Any) -> Any:
    """A node named by a number (some harnesses do) is shown as its text."""
    return str(v) if type(v) in (int, float) else v


@dataclass(frozen=True, slots=True)
class Rule:
    """One field of an event: whether it must be there, what it must be, and
    the one conversion every reader applies before checking (if any)."""

    name: str
    required: bool
    ok: Callable[[Any], bool]
    must: str
    convert: Callable[[Any], Any] | None = None

    def problem(self, value: Any) -> str | None:
        """None if `value` (already converted) obeys the rule, else the message."""
        if self.ok(value):
            return None
        shown = repr(value)
        return f"{self.name} must be {self.must}, got {shown if len(shown) <= 60 else shown[:57] + '...'}"


RULES: dict[str, Rule] = {r.name: r for r in (
    Rule("time", True, _time_ok, "a non-negative integer", _integral),
    Rule("type", True, _type_ok, "invoke, ok, fail or info"),
    Rule("process", True, _process_ok, 'a non-negative integer or "nemesis"'),
    Rule("f", True, _f_ok, "a string"),
    Rule("node", False, _node_ok, "a string", _node_text),
    Rule("ts", False, _ts_ok, "an integer"),
)}


def event_from_dict(d: Any, source: str, line: int, expect_index: int | None) -> Event:
    """Validate one decoded JSON object as an event (RULES)."""
    if not isinstance(d, dict):
        raise HistoryError(source, line, f"expected a JSON object, got {type(d).__name__}")
    if "index" not in d:
        raise HistoryError(source, line, "missing field 'index'")
    index = d["index"]
    if type(index) is not int or (expect_index is not None and index != expect_index):
        raise HistoryError(source, line, f"index is {index!r}, expected {expect_index}")
    values = {}
    for name, rule in RULES.items():
        if name not in d and rule.required:
            raise HistoryError(source, line, f"missing field {name!r}")
        v = d.get(name)
        if rule.convert is not None:
            v = rule.convert(v)
        problem = rule.problem(v)
        if problem is not None:
            raise HistoryError(source, line, problem)
        values[name] = v
    return Event(index, values["time"], values["type"], values["process"], values["f"], d.get("value"),
                 values["node"], d.get("error"), values["ts"])


def events_by_rules(lines: Iterable[bytes | str], source: str, line: int = 0,
                    index: int = 0) -> Iterator[tuple[int, Event]]:
    """(line number, Event) for each event of `lines` (the first is line `line` + 1 and
    must have index `index`), validated line by line by RULES: the slow path of every
    reader of JSON Lines, which names the first bad line (HistoryError). Blank lines are
    skipped, their numbers kept."""
    loads = orjson.loads
    for lineno, raw in enumerate(lines, line + 1):
        if not raw.strip():
            continue
        try:
            d = loads(raw)
        except orjson.JSONDecodeError as e:
            raise HistoryError(source, lineno, f"not valid JSON ({e})") from None
        yield lineno, event_from_dict(d, source, lineno, index)
        index += 1


def parse_jsonl_slow(lines: Iterable[bytes | str], source: str) -> History:
    """Line by line, validating each event: slow, but names the first bad line."""
    events: list[Event] = []
    line_numbers: list[int] = []
    last_time = 0
    backwards: list[int] = []  # lines
    for lineno, ev in events_by_rules(lines, source):
        if ev.time < last_time:
            backwards.append(lineno)
        last_time = ev.time
        events.append(ev)
        line_numbers.append(lineno)
    dense = line_numbers == list(range(1, len(line_numbers) + 1))
    h = History(events, source, None if dense else line_numbers)
    if backwards:
        h.time_backwards = (backwards[0], len(backwards))
    h.ops()  # pairing validates the per-process rules now, while we know the file
    return h


CHUNK_BYTES = 8 << 20


def blocks(fh, size: int | None = None) -> Iterator[tuple[bytes, bool]]:
    """The file read `size` (CHUNK_BYTES) bytes at a time, cut after its last newline: (block, False) for
    each run of whole lines (with their newlines), then (the rest, True) if it holds
    anything but whitespace (a last line with no newline)."""
    carry = b""
    while True:
        data = fh.read(size or CHUNK_BYTES)
        if not data:
            break
        block, carry = whole_lines(carry + data)
        if block:
            yield block, False
    if carry.strip():
        yield carry, True


def whole_lines(data: bytes) -> tuple[bytes, bytes]:
    """(the whole lines of `data`, with their newlines; the rest, a line not yet ended)."""
    cut = data.rfind(b"\n") + 1
    return data[:cut], data[cut:]


class Line(msgspec.Struct, gc=False):
    """One line of the file as the block decoder decodes it: RULES, as types.

    Strict types accept a subset of what RULES accept (a time written 5.0
    or a numeric node, which RULES convert, are refused here): anything
    this refuses goes to the slow path (`events_by_rules`), where RULES decide and
    name the line (tests/test_history.py checks the paths agree). `gc=False`: these
    never take part in a reference cycle, and millions of them would make
    the collector's work grow.
    """

    index: int
    time: Annotated[int, msgspec.Meta(ge=0)]
    type: Literal["invoke", "ok", "fail", "info"]
    process: Annotated[int, msgspec.Meta(ge=0)] | Literal["nemesis"]
    f: str
    value: Any = None
    node: str | None = None
    error: Any = None
    ts: int | None = None


_LINES = msgspec.json.Decoder(Line)
_NULL = msgspec.Raw(b"null")


class RawLine(Line, gc=False):
    """A line as `Line` decodes it, with `value` and `error` kept as their JSON text
    (`msgspec.Raw`): for readers that store them as text (`check --spark`), which would
    otherwise decode each value only to encode it again. A missing field is `null`."""

    value: msgspec.Raw = _NULL
    error: msgspec.Raw = _NULL


_RAW_LINES = msgspec.json.Decoder(RawLine)


def decode_raw_lines(block: bytes) -> list[RawLine]:
    """The events of `block` (whole JSON Lines; blank lines skipped) as RawLines, by the block
    decoder's strict types: msgspec.MsgspecError when some line breaks them, and then the
    caller's slow path (RULES, `events_by_rules`) decides about each line."""
    return _RAW_LINES.decode_lines(block)


@functools.lru_cache
def typed_lines(f: Any, value: Any) -> msgspec.json.Decoder:
    """A decoder of the lines whose f is one of the literal type `f` and whose value is of
    type `value` (msgspec's typing), for a workload whose lines have a known shape: values
    decoded typed are read faster and kept smaller (literal strings are the one interned
    copy, tuples one allocation, not two). Anything else (another f, a nemesis event's
    value, a malformed value) fails this decoder, and `decode_block` hands those lines to
    the general one."""
    typed = msgspec.defstruct("TypedLine", [("f", f), ("value", value, None)], bases=(Line,), gc=False)
    return msgspec.json.Decoder(typed)


def txn_lines(micro_ops: tuple[str, ...]) -> msgspec.json.Decoder:
    """`typed_lines` for a transactional workload (`Workload.micro_ops`): f "txn", a value
    that is null or a list of micro-ops [f, key, value] with f one of `micro_ops`, decoded
    as tuples, which its checker reads as it reads lists. Two thirds the time of the
    general decoder on a list-append file, and the line's one shared "txn" saves 52 bytes
    kept per operation (5% of a check's memory)."""
    return typed_lines(Literal["txn"], list[tuple[Literal[micro_ops], Any, Any]] | None)


def decode_block(block: bytes, typed: msgspec.json.Decoder | None = None) -> list[Line]:
    """The lines of `block` (whole JSON Lines; blank lines skipped), by `typed` (see
    `typed_lines`) where it can decode them, else by the general decoder: a line that names
    the nemesis alone, and a run of lines between them whole (a run that `typed` refuses
    somewhere is decoded again by the general one). msgspec.MsgspecError when some line
    breaks the strict types: then the caller's slow path (`events_by_rules`) names it.

    The one decoder of history lines: `read_jsonl`, `check --follow`, the registers'
    columns and Spark's tasks (`decode_raw_lines`, its variant keeping values as text)."""
    if typed is None:
        return _LINES.decode_lines(block)
    out: list[Line] = []
    start = 0
    while (i := block.find(b'"nemesis"', start)) >= 0:
        first = block.rfind(b"\n", start, i) + 1 or start
        end = block.find(b"\n", i) + 1 or len(block)
        if first > start:
            out += _decode_run(block[start:first], typed)
        out += _LINES.decode_lines(block[first:end])
        start = end
    out += _decode_run(block[start:] if start else block, typed)
    return out


def _decode_run(run: bytes, typed: msgspec.json.Decoder) -> list[Line]:
    try:
        return typed.decode_lines(run)
    except msgspec.ValidationError:
        return _LINES.decode_lines(run)


def line_chunks(fh, typed: msgspec.json.Decoder | None = None, size: int | None = None) -> Iterator[list[Line]]:
    """Decoded lines, a block of whole lines at a time, one msgspec call each (about
    three times orjson's speed into dicts, at less memory); by `typed` where it can.

    Raises msgspec.MsgspecError for anything that is not one event per line,
    and ValueError for a blank line (msgspec skips them; the slow path keeps
    their line numbers).
    """
    for block, last in blocks(fh, size):
        lines = decode_block(block, typed)
        if not last and len(lines) != block.count(b"\n"):
            raise ValueError("a blank line")
        yield lines


def _read_fast(fh, source: str, events: bool, typed: msgspec.json.Decoder | None) -> History | None:
    """Decode a JSON Lines file a block at a time (`line_chunks`) and pair as it goes. With
    `events`, every event is kept; without, only the ops and the nemesis events (a third of
    the memory, for checking). None if a line breaks a rule (then the slow path names it)."""
    h = History([], source)
    pairer = Pairer(h, keep_invoke_values=events)
    feed = pairer.feed
    kept: list[Event] = []
    pos = 0
    last_time = 0
    backwards: list[int] = []  # positions
    chunks = line_chunks(fh, typed)
    while True:
        try:
            lines = next(chunks, None)
        except (msgspec.MsgspecError, ValueError):
            return None
        if lines is None:
            break
        for e in lines:
            if e.index != pos:
                return None
            t = e.time
            if t < last_time:
                backwards.append(pos)
            last_time = t
            p = e.process
            if p == NEMESIS:
                kept.append(Event(pos, t, e.type, p, e.f, e.value, e.node, e.error, e.ts))
            else:
                if events:  # type and f repeat on every line; interning keeps one copy of each
                    kept.append(Event(pos, t, intern(e.type), p, intern(e.f), e.value, e.node, e.error, e.ts))
                feed(pos, e.type, p, e.f, e.value, t, e.node, e.error, e.ts)
            pos += 1
    h._ops = pairer.ops
    if events:
        h.events = kept
    else:
        h.compact = (pos, kept)
    if backwards:
        h.time_backwards = (backwards[0] + 1, len(backwards))
    return h


@gc_paused
def read_jsonl(path: str | os.PathLike, events: bool = True, micro_ops: tuple[str, ...] = ()) -> History:
    """Read and validate a JSON Lines history (docs/history-format.md).

    With `events=False` only the paired ops (and nemesis events) are kept:
    enough for every checker, at a third of the memory. With it, a
    transactional workload's `micro_ops` (its functions, as in
    `Workload.micro_ops`) have micro-ops read as tuples, which its checker
    takes as it takes lists: faster to read and smaller to keep.
    """
    source = os.fspath(path)
    typed = txn_lines(micro_ops) if micro_ops and not events else None
    try:
        with open(source, "rb") as fh:
            h = _read_fast(fh, source, events, typed)
            if h is None:
                fh.seek(0)
                return parse_jsonl_slow(fh, source)
    except OSError as e:
        raise HistoryError(source, None, e.strerror or str(e)) from None
    return h


def dumps_event(e: Event) -> bytes:
    return orjson.dumps(e.to_dict()) + b"\n"


def write_jsonl(events: Iterable[Event], path: str | os.PathLike) -> None:
    """Write a whole history, fsynced, via a temp file so nothing half-written remains."""
    with written_whole(path) as tmp, open(tmp, "wb") as fh:
        for e in events:
            fh.write(dumps_event(e))
        fh.flush()
        os.fsync(fh.fileno())


class JsonlWriter:
    """Appends events to a JSON Lines history as they happen (`write_jsonl` writes a whole one).

    The one writer of the format for live runs: the runner's recorder hands it
    each event's fields, it numbers them (`index`) and serializes them exactly
    as `Event.to_dict` says. Not thread-safe on its own: the caller orders the
    events (the recorder holds a lock, so the line order is the real-time order).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._fh = open(self.path, "wb")
        self.index = 0

    def append(self, time: int, type: str, process: int | str, f: str, value: Any,
               node: str | None = None, error: Any = None, ts: int | None = None) -> Event:
        e = Event(self.index, time, type, process, f, value, node, error, ts)
        self._fh.write(dumps_event(e))
        self.index += 1
        return e

    @property
    def closed(self) -> bool:
        return self._fh.closed

    def close(self) -> None:
        """Flush what was recorded to disk and close; a second close does nothing."""
        if self._fh.closed:
            return
        try:
            self._fh.flush()
            os.fsync(self._fh.fileno())
        finally:
            self._fh.close()
