"""Online checking: judging a history while it is being written.

An engine reads a history one event at a time (`Feed.event`) and reports an
anomaly (`Found`) as soon as the events so far *prove* it. The rule every
engine here keeps is **prefix soundness**: an anomaly reported on a prefix
of a history is an anomaly of every history that extends it, so it is never
taken back when more lines arrive. Three things make that so:

- an operation still pending (invoked, not completed) is treated as `info`:
  it may take effect at any time after its invoke, or never. Nothing is
  concluded from its effects until it completes; an edge that needs it to
  have happened waits (list-append) or the search may leave it out
  (registers);
- what a prefix says of the order of versions is only what it proves: a
  list-append read is a prefix of the key's final list, so the longest read
  so far is a prefix of the final version order, and edges come from it
  alone (appends no read has shown yet have no place online);
- real-time order between two operations is known once the first completes
  before the second is invoked, and never changes after.

Cycles are found as their edges arrive, by keeping a topological order
(`order.Order`, Pearce & Kelly); a cycle is named by the offline checker's
own classification (`checker.txn.classify`) and reported only if the model
judged forbids it.

**Final pass.** What an engine cannot decide on a prefix (appends no read
saw, cycles through an edge not added because it closed an earlier cycle,
duplicate and garbage reads, Adya's label-based types, lost updates) is left
to the offline checker, which `sleuth check --follow` runs on the whole
history when it ends, unless the engine *certified* its verdict (below). The
final verdict, anomaly types and exit status are therefore exactly the
offline ones; the report says which anomalies were found online and which
only at the end.

Engines: `list_append`, `rw_register` (on `deps`, the dependency graph
online), `register` (and cas-register), `invariants` (counter, bank),
`source`, and `timestamps` (the grey-box rules, around any of them). `when`
says, for each anomaly type of a verdict, when it happened and whether it was
found online or only in the final pass.

**Memory.** The list-append engine forgets the *sources* of its graph (every
edge into them came from transactions already forgotten) once they completed
before every pending transaction began, a batch at a time, and records a
*gap* for any edge that later arrives into a forgotten node; a writer whose
append no read has shown yet is forgotten *floating* (its batch and its place
in it, so the read that finally shows the append orders it without a gap).
With no gap and nothing found, its verdict is offline's and `sleuth check
--follow` skips the offline pass (`Engine.certified`). What it keeps is the
transactions not yet forgettable (flat under a database that keeps up); a
summary of each forgotten key (its order's length and hash, its unseen
appends) and a record of each floating writer go to a private temporary
SQLite database with a bounded page cache (`spill`), so a history whose keys
are retired with appends no read has shown until a final read grows a file
by some 60 bytes each, not the process (`list_append`, "Memory"). The register engine
cuts each key at its quiet moments (`register`, "Memory") and certifies too
when no cut may have used a crashed write twice ("Certified verdicts"
there). The rw-register engine forgets the sources of its graph as
list-append's does, keeping the values they wrote in an exact packed set
("Memory" there), and certifies under models with real-time order; source
keeps the log its reads show, and its final pass is always the offline
checker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sleuth.history.jsonl import History, Op, OpCount, Pairer


@dataclass
class Found:
    """One anomaly found online."""

    name: str  # the anomaly type, as the offline checker names it
    line: int  # the line whose event confirmed it
    time: int | None  # that event's time (ns since the run started): when it happened
    found_at: float  # wall-clock time it was found (seconds since the epoch)
    explanation: str
    lines: list[int] = field(default_factory=list)  # the lines that prove it
    rule: str | None = None  # the engine's rule that found it, when not a cycle of its graph

    def to_json(self) -> dict[str, Any]:
        out = {"anomaly": self.name, "line": self.line, "time": self.time,
               "found-at": round(self.found_at, 3), "lines": self.lines,
               "explanation": self.explanation}
        if self.rule:
            out["rule"] = self.rule
        return out


class Feed:
    """Pairs events into operations as they arrive (the offline `Pairer`: the same
    per-process rules, the same errors) and hands each invoke and completion to an
    engine. `history` is a History with no events whose `line_of` names lines."""

    def __init__(self, history: History, engine: Any):
        self.history = history
        self.pairer = Pairer(history)
        self.pairer.ops = OpCount()  # type: ignore[assignment] - the engine keeps what it needs
        self.engine = engine
        self.pos = 0
        # an engine that takes a whole block (the register engine's `block`: "Blocks" there)
        self.block = getattr(engine, "block", None)

    def event(self, typ: str, process: Any, f: str, value: Any, time_: int, node: Any = None,
              error: Any = None, ts: Any = None) -> None:
        pos = self.pos
        self.pos += 1
        if process == "nemesis":
            return
        pairer = self.pairer
        if typ == "invoke":
            pairer.feed(pos, typ, process, f, value, time_, node, error, ts)
            self.engine.invoked(pairer.ops.last, time_)
            return
        op = pairer.in_flight.get(process)
        pairer.feed(pos, typ, process, f, value, time_, node, error, ts)
        self.engine.completed(op, time_)

    def events(self, run: list) -> None:
        """`event` for each of `run` (objects with its arguments as fields), in one loop:
        the same calls, without one of its own an event (`sleuth.history.follow`'s fast reader
        hands whole blocks); or the whole block to an engine that takes one."""
        if self.block is not None and self.block(run, self.pos, self.pairer):
            self.pos += len(run)
            return
        pairer, engine = self.pairer, self.engine
        feed, in_flight, ops = pairer.feed, pairer.in_flight, pairer.ops
        invoked, completed = engine.invoked, engine.completed
        for e in run:
            pos = self.pos
            self.pos = pos + 1
            process = e.process
            if process == "nemesis":
                continue
            typ, time_ = e.type, e.time
            if typ == "invoke":
                feed(pos, typ, process, e.f, e.value, time_, e.node, e.error, e.ts)
                invoked(ops.last, time_)
            else:
                op = in_flight.get(process)
                feed(pos, typ, process, e.f, e.value, time_, e.node, e.error, e.ts)
                completed(op, time_)


def engine_for(workload: str, history: History, model: str | None, report: Callable[[Found], None],
               options: dict[str, Any], timestamps: bool = False) -> Any | None:
    """The online engine of `workload` (with `timestamps`, wrapped in the grey-box timestamp
    rules), or None when there is none (then only the final pass judges)."""
    engine = _engine(workload, history, model, report, options)
    if timestamps:
        from sleuth.checker.online.timestamps import Timestamps

        return Timestamps(history, workload, report, engine)
    return engine


def _engine(workload: str, history: History, model: str | None, report: Callable[[Found], None],
            options: dict[str, Any]) -> Any | None:
    if workload == "list-append":
        from sleuth.checker.online.list_append import Engine

        return Engine(history, model or "strict-serializable", report)
    if workload == "rw-register":
        from sleuth.checker.online.rw_register import Engine as RwRegisterEngine

        return RwRegisterEngine(history, model or "strict-serializable", report,
                                wfr_keys=options.get("wfr_keys", True) is not False,
                                vouched=bool(options.get("linearizable_keys") or options.get("sequential_keys")))
    if workload == "source":
        from sleuth.checker.online.source import Source

        return Source(history, report)
    if workload in ("register", "cas-register"):
        from sleuth.checker.online.register import Engine as RegisterEngine

        return RegisterEngine(history, report, keyed=workload == "register",
                              initial_value=options.get("initial_value"),
                              failed_cas_observes=bool(options.get("failed_cas_observes")))
    if workload == "counter":
        from sleuth.checker.online.invariants import Counter

        return Counter(history, report)
    if workload == "bank":
        from sleuth.checker.online.invariants import Bank

        return Bank(history, report, total=options.get("total"), no_negative=bool(options.get("no_negative")))
    return None


def now() -> float:
    return time.time()


def lines_of(history: History, ops: list[Op], line: int | None = None) -> list[int]:
    """The invoke and completion lines of `ops`, and `line` (the one that confirmed the
    anomaly), in order, once each."""
    out: dict[int, None] = {} if line is None else {line: None}
    for op in ops:
        out[history.line_of(op.invoke_pos)] = None
        if op.complete_pos is not None:
            out[history.line_of(op.complete_pos)] = None
    return sorted(out)
