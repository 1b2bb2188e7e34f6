"""Minimal counterexamples: shrink an invalid history to one that still fails (issue 16).

Delta debugging (Zeller & Hildebrandt, "Simplifying and Isolating
Failure-Inducing Input", TSE 2002): remove parts of the history while a
test still holds, first in large chunks and then one by one, until no
single removal keeps it failing (1-minimal). Here the test is: the
workload's own checker judges the smaller history invalid, still names the
*target* anomaly type, and names no forbidden type the original did not
(so a G-single counterexample does not turn into one that is mostly
garbage reads); for registers, also every value read is one some operation
of it writes (`shrink_parts.unwritten`).

What is removed, always keeping the history well formed:

- operations: an invoke and its completion go together; nothing is
  renumbered, so each process keeps its number and its one-at-a-time order
  (removing operations never puts two in flight, nor reuses a crashed one);
- processes: all operations of one process at once (big cuts, early);
- keys: in transactional histories every micro-op on a key (an operation
  left with no micro-op goes); in register histories every operation on it;
- micro-ops: one micro-op of one transaction, invoke and completion alike.

Where it starts (so a history of 100k operations costs a few checks of small
histories, not ddmin over all of it): the operations an example names
(every `line` of its explanation: a cycle's transactions, the stuck
operation and its concurrent window for a register), plus what is
needed to infer its edges — for each read, the writers of the values it
read (else those reads become garbage reads), and for list-append the
shortest read of each key that holds every element the named operations
touched (it reveals their version order); for the source workload, the
appends of every row its reads show (`shrink_parts.SourceSupport`). The example is the one, of all
the forbidden types' examples (or of the type asked for), whose seed is
smallest (`choose_example`): a read of a long list needs the writer of each
element, so the fewest operations named is not the smallest start (in a
MariaDB run, a fuzzy read late on a busy key named one transaction and
needed 1,540 more; a G-cursor earlier on named two and needed 7). If that
is not enough, the same
seed widened to the neighbouring operations on its keys (4, 16, 64, …
either side), then every operation on those keys, then the whole history:
the first that fails is shrunk. What an operation holds, by workload, and
what a seed needs are `sleuth.checker.shrink_parts`.

Bounded: a `budget` in seconds. When it runs out, the smallest failing
history found so far is returned with `minimal=False` and the stage it
stopped in. The verdict itself is never touched: the original result is
what it is; shrinking only finds a smaller witness of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from sleuth.base.words import plural
from sleuth.checker.result import Result
from sleuth.checker.shrink_parts import (
    KEYED_WORKLOADS,
    TXN_WORKLOADS,
    hashable,
    keys_of,
    micro_ops,
    named_lines,
    support,
    unwritten,
)
from sleuth.history.jsonl import Event, History, Op

STAGES = ("seed", "processes", "operations", "keys", "micro-ops", "1-minimal")


class OutOfTime(Exception):
    """The budget ran out between two checks."""


class Stopped(OutOfTime):
    """The caller asked to stop (`Shrinker(stop=...)`: a run's second Ctrl-C) between two checks."""


@dataclass(frozen=True)
class Cut:
    """A candidate: the operations kept, and the keys and micro-ops removed from them."""

    ops: frozenset[int]  # Op.id of the original history
    keys: frozenset = frozenset()
    micro: frozenset[tuple[int, int]] = frozenset()  # (Op.id, micro-op position)


@dataclass
class Counterexample:
    """The outcome of shrinking: the smallest failing history found and how far it got."""

    target: str  # the anomaly type kept
    history: History  # the shrunk history; `lines` are the original file's lines
    result: Result  # the checker's verdict on it (invalid, with `target`)
    original_ops: int
    minimal: bool  # True: no single removal keeps it failing
    stage: str  # the last stage entered (STAGES)
    seconds: float
    checks: int  # checker runs
    seed_ops: int  # operations in the history shrinking started from
    source_lines: list[int] = field(default_factory=list)  # per event: the original line
    interrupted: bool = False  # stopped by Ctrl-C, SIGTERM or `stop` (`Shrinker.so_far`)

    @property
    def ops(self) -> int:
        return len(self.history.ops())

    def summary(self) -> str:
        stopped = "interrupted" if self.interrupted else "budget spent"
        if self.minimal:
            how = "1-minimal: no single removal keeps it failing"
        else:
            how = f"{stopped} during '{self.stage}': " + (
                "smaller than the original, perhaps not minimal" if self.ops < self.original_ops
                else "no smaller history found")
        return (f"{self.target}: {plural(self.original_ops, 'operation')} shrunk to {self.ops} "
                f"in {self.seconds:.1f} s ({self.checks} checks); {how}")

    def rows(self) -> list[dict[str, Any]]:
        """One row per operation, in invoke order: the op table (`name` is the one the
        checker's explanation of the counterexample uses)."""
        h = self.history
        order = {pos: i + 1 for i, pos in enumerate(
            sorted(p for o in h.ops() for p in (o.invoke_pos, o.complete_pos) if p is not None))}
        return [{"name": f"T{o.id}", "process": o.process, "invoke": order[o.invoke_pos],
                 "complete": None if o.complete_pos is None else order[o.complete_pos],
                 "type": o.type, "f": o.f, "value": o.value,
                 "line": h.line_of(o.invoke_pos)} for o in h.ops()]

    def events(self) -> list[dict[str, Any]]:
        """The shrunk history as JSON Lines objects: renumbered `index`, and `line`, the
        event's line in the original file."""
        return [{**replace(e, index=i).to_dict(), "line": line}
                for i, (e, line) in enumerate(zip(self.history.events, self.source_lines, strict=True))]

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "original-ops": self.original_ops, "ops": self.ops,
                "seed-ops": self.seed_ops, "minimal": self.minimal, "interrupted": self.interrupted,
                "stage": self.stage,
                "seconds": round(self.seconds, 3), "checks": self.checks,
                "anomaly-types": self.result.anomaly_types, "rows": self.rows(),
                "example": (self.result.anomalies.get(self.target) or [None])[0]}


def choose_example(result: Result, target: str | None, bound: Callable[[dict], int | None],
                   size: Callable[[dict], int]) -> tuple[str, dict]:
    """The anomaly type to shrink and the example to start from: of every example of the
    forbidden types (or of `target`'s alone), the one whose seed is smallest, ties to the
    order the checker lists types and examples. `size(example)`: the operations its
    explanation names with what they need to be judged as in the original (the seed);
    `bound(example)`: a cheap lower bound of that, None for an example that names no
    operation. `size` is computed only for examples the bound says could still win.
    Where no example names an operation: the type (or the first forbidden one) and its
    first example, and shrinking starts from everything."""
    candidates = []
    for order, t in enumerate([target] if target else result.anomaly_types):
        for j, example in enumerate(result.anomalies.get(t) or ()):
            b = bound(example)
            if b is not None:
                candidates.append((b, order, j, t, example))
    if not candidates:
        t = target or result.anomaly_types[0]
        return t, (result.anomalies.get(t) or [{}])[0]
    candidates.sort(key=lambda c: c[:3])
    best: tuple[tuple[int, int, int], str, dict] | None = None
    for b, order, j, t, example in candidates:
        if best is not None and b > best[0][0]:
            break  # this bound and every later one exceed the smallest seed found
        key = (size(example), order, j)
        if best is None or key < best[0]:
            best = (key, t, example)
    assert best is not None
    return best[1], best[2]


class Shrinker:
    """Runs the stages over one history; `fails` is the test of delta debugging."""

    def __init__(self, history: History, workload: str, check: Callable[[History], Result],
                 original: Result, target: str | None = None, budget: float = 60.0,
                 progress: Callable[[str, int], None] | None = None, initial_value: Any = None,
                 stop: Callable[[], bool] | None = None):
        if original.valid is not False:
            raise ValueError("only an invalid history has a counterexample")
        if target is not None and target not in original.anomaly_types:
            raise ValueError(f"{target!r} is not an anomaly the checker found "
                             f"(found: {', '.join(original.anomaly_types)})")
        self.history, self.workload, self.check = history, workload, check
        self.original = original
        self.allowed = frozenset(original.anomaly_types)
        self.start = time.perf_counter()
        self.deadline = self.start + budget
        self.ops: list[Op] = history.ops()
        self.by_line: dict[int, int] = {}  # a line of the file -> the op whose event it holds
        for op in self.ops:
            for pos in (op.invoke_pos, op.complete_pos):
                if pos is not None:
                    self.by_line[history.line_of(pos)] = op.id
        self.needed = support(self.ops, workload)
        self.target, self.example = choose_example(original, target, self._bound, self._seed_size)
        self.events = history.events or _events_of(self.ops)
        self.checks = 0
        self.cut = Cut(frozenset(range(len(self.ops))))
        self.verdicts: dict[Cut, Result | None] = {self.cut: original}
        self.stage = STAGES[0]
        self.seed_ops = len(self.ops)
        self.progress = progress
        self.initial_value = initial_value  # registers: the value before any write
        self.stop = stop  # asked before each check: True ends shrinking as an interrupt does

    # -- building and testing a candidate -----------------------------------

    def build(self, cut: Cut) -> tuple[History, list[int]]:
        """The candidate as a history (events in their original order, each keeping its
        original line), and the original line of each of its events."""
        trim = self.workload in TXN_WORKLOADS and (cut.keys or cut.micro)
        picked: list[tuple[int, Any]] = []
        for i in cut.ops:
            op = self.ops[i]
            if self.workload in KEYED_WORKLOADS and cut.keys and set(keys_of(self.workload, op)) & cut.keys:
                continue
            drop = None
            if trim:
                drop = {j for j, m in enumerate(micro_ops(op)) if m[1] in cut.keys or (i, j) in cut.micro}
                if drop and len(drop) == len(micro_ops(op)):
                    continue  # nothing left of it
            for pos in (op.invoke_pos, op.complete_pos):
                if pos is not None:
                    picked.append((pos, drop))
        picked.sort(key=lambda x: x[0])
        events = []
        for pos, drop in picked:
            e = self.events[pos]
            if drop and isinstance(e.value, list):
                e = replace(e, value=[m for j, m in enumerate(e.value) if j not in drop])
            events.append(e)
        lines = [self.history.line_of(pos) for pos, _ in picked]
        return History(events, self.history.source, lines), lines

    def normal(self, cut: Cut) -> Cut:
        """The same candidate without the operations that key and micro-op removal emptied
        (so no later step spends a check on removing them again)."""
        if not (cut.keys or cut.micro):
            return cut
        if self.workload in KEYED_WORKLOADS:
            empty = {i for i in cut.ops if set(keys_of(self.workload, self.ops[i])) & cut.keys}
        elif self.workload in TXN_WORKLOADS:
            empty = {i for i in cut.ops if all(m[1] in cut.keys or (i, j) in cut.micro
                                              for j, m in enumerate(micro_ops(self.ops[i])))}
        else:
            return cut
        if not empty:
            return cut
        return Cut(cut.ops - empty, cut.keys, frozenset(m for m in cut.micro if m[0] not in empty))

    def fails(self, cut: Cut) -> bool:
        """Does the candidate still show the target anomaly (and nothing forbidden that the
        original did not)? Raises OutOfTime once the budget is spent."""
        if cut in self.verdicts:
            return self.verdicts[cut] is not None
        if time.perf_counter() > self.deadline:
            raise OutOfTime
        if self.stop is not None and self.stop():
            raise Stopped
        h, _ = self.build(cut)
        self.checks += 1
        try:
            r = self.check(h)
        except Exception:  # noqa: BLE001 - a candidate the checker cannot judge does not fail
            r = None
        ok = (r is not None and r.valid is False and self.target in r.anomaly_types
              and set(r.anomaly_types) <= self.allowed and not unwritten(h, self.workload, self.initial_value))
        self.verdicts[cut] = r if ok else None
        return ok

    def accept(self, cut: Cut) -> bool:
        """Move to `cut` if it fails (removals only ever shrink, so the last accepted is
        the smallest found)."""
        cut = self.normal(cut)
        if cut != self.cut and self.fails(cut):
            self.cut = cut
            return True
        return False

    # -- seeds ----------------------------------------------------------------

    def _named(self, example: dict) -> set[int]:
        """The operations an example's explanation names."""
        return {self.by_line[n] for n in named_lines(example) if n in self.by_line}

    def _with_support(self, full: set[int]) -> Cut:
        """`full` whole, plus its support trimmed to the micro-ops it is needed for."""
        need = {} if self.needed is None else self.needed.needs(full)
        micro = {(i, j) for i, keep in need.items() for j in range(len(micro_ops(self.ops[i])))
                 if j not in keep}
        return Cut(frozenset(full | set(need)), micro=frozenset(micro))

    def _bound(self, example: dict) -> int | None:
        """A lower bound of the example's seed (`choose_example`), None if it names no operation."""
        named = self._named(example)
        if not named:
            return None
        return len(named) + (0 if self.needed is None else len(self.needed.needs(named, covering=False)))

    def _seed_size(self, example: dict) -> int:
        return len(self._with_support(self._named(example)).ops)

    def seeds(self) -> Iterable[Cut]:
        """Growing candidates to start from (the module docstring says which)."""
        example = self.example
        named = self._named(example)
        if not named:
            return
        yield Cut(frozenset(named))
        yield self._with_support(named)
        keys = {k for i in named for k in keys_of(self.workload, self.ops[i])}
        if isinstance(example.get("key"), str | int):
            keys.add(example["key"])
        on_keys = [op.id for op in self.ops if set(keys_of(self.workload, op)) & keys]
        where = {i: n for n, i in enumerate(on_keys)}
        at = sorted(where[i] for i in named if i in where)
        if at:
            width = 4
            while width < len(on_keys):
                yield self._with_support(named | set(on_keys[max(0, at[0] - width):at[-1] + width + 1]))
                width *= 4
            yield self._with_support(named | set(on_keys))

    # -- delta debugging -------------------------------------------------------

    def enter(self, stage: str) -> None:
        self.stage = stage
        if self.progress is not None:
            self.progress(stage, len(self.cut.ops))

    def ddmin(self, items: list, remove: Callable[[Cut, list], Cut]) -> None:
        """Zeller's ddmin, by complements: split the items into chunks and try removing each
        in turn, going on from where a removal succeeded (not from the start: that would
        cost a quadratic number of checks once chunks are single items); when a whole pass
        removes nothing, halve the chunks; done when a pass of single items removes nothing."""
        size = max(1, -(-len(items) // 2))
        while items:
            start, removed = 0, False
            while start < len(items):
                if self.accept(remove(self.cut, items[start:start + size])):
                    items = items[:start] + items[start + size:]
                    removed = True
                else:
                    start += size
            if not removed:
                if size == 1:
                    return
                size = max(1, size // 2)

    def run(self) -> Counterexample:
        """Shrink until 1-minimal, out of budget or stopped (`stop`). Ctrl-C (a
        KeyboardInterrupt) goes on up; the caller may then take `so_far()`."""
        minimal = interrupted = False
        try:
            for seed in self.seeds():
                if len(seed.ops) < len(self.cut.ops) and self.accept(seed):
                    break
            self.seed_ops = len(self.cut.ops)
            self._stages()
            self.enter(STAGES[-1])
            self._one_minimal()
            minimal = True
        except Stopped:
            interrupted = True
        except OutOfTime:
            pass
        return self.so_far(minimal, interrupted)

    def so_far(self, minimal: bool = False, interrupted: bool = True) -> Counterexample:
        """The smallest failing history found so far, whenever shrinking stopped, an
        interrupt included: a candidate becomes the current cut only once judged
        failing, so the cut is always whole and its verdict known."""
        h, lines = self.build(self.cut)
        return Counterexample(self.target, h, self.verdicts[self.cut], len(self.ops), minimal,
                              self.stage, time.perf_counter() - self.start, self.checks,
                              self.seed_ops, lines, interrupted)

    def _stages(self) -> None:
        self.enter("processes")
        procs: dict[int, list[int]] = {}
        for i in sorted(self.cut.ops):
            procs.setdefault(self.ops[i].process, []).append(i)
        if len(procs) > 1:
            self.ddmin(list(procs.values()), _remove_groups)
        self.enter("operations")
        self.ddmin(sorted(self.cut.ops), _remove_ops)
        self.enter("keys")
        self.ddmin(self._keys(), _remove_keys)
        if self.workload in TXN_WORKLOADS:
            self.enter("micro-ops")
            self.ddmin(self._micro(), _remove_micro)

    def _keys(self) -> list:
        seen: dict = {}
        for i in sorted(self.cut.ops):
            for k in keys_of(self.workload, self.ops[i]):
                if k not in self.cut.keys:
                    seen.setdefault(hashable(k), k)
        return list(seen.values())

    def _micro(self) -> list[tuple[int, int]]:
        cut = self.cut
        if self.workload not in TXN_WORKLOADS:
            return []
        return [(i, j) for i in sorted(cut.ops) for j, m in enumerate(micro_ops(self.ops[i]))
                if (i, j) not in cut.micro and m[1] not in cut.keys]

    def _one_minimal(self) -> None:
        """Try every single removal (operation, key, micro-op) until none keeps it failing."""
        while True:
            singles = ([(_remove_ops, [i]) for i in sorted(self.cut.ops)]
                       + [(_remove_keys, [k]) for k in self._keys()]
                       + [(_remove_micro, [m]) for m in self._micro()])
            if not any(self.accept(remove(self.cut, item)) for remove, item in singles):
                return


def _events_of(ops: list[Op]) -> list[Event]:
    """Events rebuilt from paired ops (a compact load keeps no events), by position."""
    n = max((p for o in ops for p in (o.invoke_pos, o.complete_pos) if p is not None), default=-1) + 1
    events: list[Any] = [None] * n
    for o in ops:
        events[o.invoke_pos] = Event(o.invoke_pos, o.invoke_time, "invoke", o.process, o.f, o.invoke_value)
        if o.complete_pos is not None:
            events[o.complete_pos] = Event(o.complete_pos, o.complete_time or o.invoke_time, o.type,
                                           o.process, o.f, o.value, o.node, o.error, o.ts)
    return events


def _remove_ops(cut: Cut, chunk: list[int]) -> Cut:
    return replace(cut, ops=cut.ops - set(chunk))


def _remove_groups(cut: Cut, chunk: list[list[int]]) -> Cut:
    return replace(cut, ops=cut.ops - {i for g in chunk for i in g})


def _remove_keys(cut: Cut, chunk: list) -> Cut:
    return replace(cut, keys=cut.keys | set(chunk))


def _remove_micro(cut: Cut, chunk: list[tuple[int, int]]) -> Cut:
    return replace(cut, micro=cut.micro | set(chunk))


def shrink(history: History, workload: str, check: Callable[[History], Result],
           original: Result | None = None, target: str | None = None,
           budget: float = 60.0, initial_value: Any = None,
           stop: Callable[[], bool] | None = None) -> Counterexample:
    """Shrink an invalid `history` (module docstring). `check` judges a history the way
    the original was judged; `original` is its verdict on `history` (computed if None);
    `stop`, asked before each check, ends shrinking early when it answers True."""
    if original is None:
        original = check(history)
    return Shrinker(history, workload, check, original, target, budget,
                    initial_value=initial_value, stop=stop).run()
