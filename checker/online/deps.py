"""A transaction dependency graph built online: edges when certain, cycles as they close.

What a datatype's engine (`rw_register`) hands here is the part of the
offline graph (`checker.txn`) that a prefix already proves: dependency
edges (ww, wr, rw) between transactions, by id. This module adds what is the
same for every datatype:

- an edge waits until both its ends have *settled* (completed ok or info): a
  pending transaction may still fail, and a failed one is no node of the
  offline graph. An edge waiting on a transaction that fails is dropped;
- process order (the previous transaction of a process precedes its next)
  and real-time order (T1 completed ok before T2 was invoked), added only
  when the model forbids their cycles (`-process`, `-realtime`), real time
  encoded as the offline graph encodes it (`checker.graph`): a chain of
  barrier nodes, one per run of completions with no invoke between them, so
  two edges per transaction, not one per pair. With real-time edges process
  edges are left out: each is a real-time edge too;
- each edge goes into `order.Order` (Pearce & Kelly): one that would close a
  cycle is reported as that cycle (a barrier run read back as one real-time
  edge), named by `checker.txn.classify`, if the model forbids its type, and
  is not added (so a cycle that needs it is left to the final pass).

Why a reported cycle is an anomaly of every extension: the caller promises
that each dependency edge it gives is an edge of the offline graph of every
history extending the prefix (its module argues it), and process and
real-time edges between settled transactions never change. A cycle of edges
of the final graph is a cycle the offline search finds in the same strongly
connected component (it may name that component's cycles otherwise: it
looks for one cycle of each type per component).

Forgetting (`forget`): the datatype's engine may drop a transaction (or a
barrier) that is a *source* of the graph, every edge into it from a node
already forgotten (the list-append engine's rule, "Memory" there; the
rw-register engine's sweep, "Memory" in `rw_register`). An edge that then
arrives *into* a forgotten node is not guessed at: it is a gap (it might close
a cycle no longer visible). One *from* a forgotten node into a kept one is
dropped: without gaps no cycle passes through a forgotten node (the first
node of the cycle forgotten had its edge in on the cycle before, from a node
forgotten earlier, a contradiction, or after, a gap). A transaction id not in
`ops` was forgotten (a failed one stays in `ops`, without a node, until it is
forgotten too; an edge into it is then a gap, conservatively).

This is the graph part of the list-append engine (`list_append`), written
once for the engines that came after it; the list-append engine keeps its
own copy for now.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sleuth.checker import graph as g
from sleuth.checker import models, txn
from sleuth.checker.online import Found, lines_of, now
from sleuth.checker.online.order import Order
from sleuth.history.jsonl import History, Op

MAX_REPORTS = 8  # cycles reported online per type; the rest are counted


class Deps:
    """`why(a, b, kind)`: the datatype's sentence for a dependency edge a -> b."""

    def __init__(self, history: History, model: str, report: Callable[[Found], None],
                 why: Callable[[int, int, int], str]):
        self.history = history
        self.model = model
        self.report = report
        self.why_data = why
        self.realtime = models.forbids(model, models.realtime(models.G0))
        self.process = models.forbids(model, models.process(models.G0)) and not self.realtime
        self.ops: dict[int, Op] = {}
        self.pending: set[int] = set()
        self.waiting: dict[int, list[tuple[int, int, int]]] = {}  # pending op -> edges waiting for it
        self.graph = Order()
        self.barrier = 0  # the newest barrier node (-1, -2, ...); 0: none yet
        self.barrier_used = False  # something was invoked since it was made
        self.before: dict[int, int] = {}  # op id -> the newest barrier when it was invoked
        self.last_of: dict[Any, int] = {}  # process -> its last transaction in the graph
        self.counts: dict[str, int] = {}
        self.found: list[Found] = []
        self.gaps: dict[str, int] = {}  # what this graph did not decide -> how often (see `gap`)
        self.data_edges = 0  # dependency edges added between two settled transactions
        self.line = 0  # the line of the event being judged
        self.time: int | None = None

    def invoked(self, op: Op) -> None:
        i = op.id
        self.ops[i] = op
        self.pending.add(i)
        self.graph.node(i)  # from its invoke: the order follows invocations
        if self.realtime and self.barrier:
            self.before[i] = self.barrier
            self.barrier_used = True

    def completed(self, op: Op, time: int | None) -> None:
        """After the datatype's own bookkeeping of `op`'s completion."""
        i = op.id
        self.pending.discard(i)
        self.line = self.history.line_of(op.complete_pos)
        self.time = time
        if op.type == "fail":
            self.before.pop(i, None)
            self.graph.forget(i)  # no edge has reached it: edges wait for their ends
            self.waiting.pop(i, None)
            return
        gr = self.graph
        b = self.before.pop(i, None)
        if b is not None and b in gr:  # a forgotten barrier: from a forgotten node, dropped
            self._add(b, i, g.REALTIME)
        if self.process:
            p = op.process
            prev = self.last_of.get(p)
            if prev is not None and prev in gr:
                self._add(prev, i, g.PROCESS)
            self.last_of[p] = i
        if op.type == "ok" and self.realtime:
            if not self.barrier or self.barrier_used:
                nb = self.barrier - 1
                gr.node(nb)
                if self.barrier:
                    gr.add(self.barrier, nb, g.REALTIME)
                self.barrier, self.barrier_used = nb, False
            self.edge(i, self.barrier, g.REALTIME)
        for a, b, kind in self.waiting.pop(i, ()):
            self.edge(a, b, kind)

    def edge(self, a: int, b: int, kind: int) -> None:
        """Add a -> b once both have settled (op ids, or barriers < 0)."""
        if a == b:
            return
        pending = self.pending
        if a in pending or b in pending:
            self.waiting.setdefault(a if a in pending else b, []).append((a, b, kind))
            return
        gr = self.graph
        order = gr.ord
        if b not in order:
            if b not in self.ops:  # forgotten (see "Forgetting"): it might close a hidden cycle
                self.gap("an edge into a forgotten transaction")
            return  # else failed: no node offline
        if a not in order:  # failed, or forgotten: dropped (see "Forgetting")
            if a >= 0 and a not in self.ops and kind != g.REALTIME and kind != g.PROCESS:
                self.data_edges += 1  # an edge of offline's graph all the same (its notes)
            return
        if kind != g.REALTIME and kind != g.PROCESS:
            self.data_edges += 1
        if order[a] < order[b]:  # agrees with the order: the common case, inline
            gr.out[a].append((b, kind))
            gr.into[b].append(a)
        else:
            self._add(a, b, kind)

    def forget(self, n: int) -> None:
        """Drop transaction or barrier `n`, a source of the graph, and what is kept of it."""
        if n in self.graph:
            self.graph.forget(n)
        self.ops.pop(n, None)
        self.before.pop(n, None)

    def _add(self, a: int, b: int, kind: int) -> None:
        cycle = self.graph.add(a, b, kind)
        if cycle is not None:
            self._cycle(cycle)

    def _cycle(self, path: list[tuple[int, int, int]]) -> None:
        # start at a transaction, then read each run through barriers as one real-time edge
        at = next(j for j, (a, _, _) in enumerate(path) if a >= 0)
        path = path[at:] + path[:at]
        cycle: list[tuple[int, int, int]] = []
        start = None
        for a, b, kind in path:
            if a >= 0 and b >= 0:
                cycle.append((a, b, kind))
            elif a >= 0:
                start = a
            elif b >= 0:
                cycle.append((start, b, g.REALTIME))
        name = txn.classify(cycle)
        if not models.forbids(self.model, name):
            self.gap(f"{name} (allowed by the model)")  # its edge is not added; offline lists it
            return
        self.counts[name] = self.counts.get(name, 0) + 1
        if self.counts[name] > MAX_REPORTS:
            return
        h, ops = self.history, self.ops
        steps = [f"{txn.txn_label(h, ops[a])} < {txn.txn_name(ops[b])} ({g.KIND_NAMES[k]}) because "
                 f"{self.why(a, b, k)}." for a, b, k in cycle]
        base = name.split(models.REALTIME)[0].split(models.PROCESS)[0]
        text = (f"{name}: {txn.BASE_SENTENCE[base]}; {len(cycle)} transactions.\n" + "\n".join(steps)
                + f"\nSo {txn.txn_name(ops[cycle[0][0]])} would have to come before itself: "
                  "no serial order exists.")
        self.emit(name, [ops[a] for a, _, _ in cycle], text, counted=True)

    def why(self, a: int, b: int, kind: int) -> str:
        ta, tb = self.ops[a], self.ops[b]
        na, nb = txn.txn_name(ta), txn.txn_name(tb)
        h = self.history
        if kind == g.REALTIME:
            return (f"{na} completed (line {h.line_of(ta.complete_pos)}) before {nb} began "
                    f"(line {h.line_of(tb.invoke_pos)})")
        if kind == g.PROCESS:
            return f"both ran on process {ta.process}, and {nb} began after {na} completed"
        return self.why_data(a, b, kind)

    def emit(self, name: str, ops: list[Op], explanation: str, counted: bool = False,
             rule: str | None = None) -> None:
        """Report `name` if the model forbids it (under MAX_REPORTS per type for cycles)."""
        if not models.forbids(self.model, name):
            self.gap(f"{name} (allowed by the model)")  # offline lists it
            return
        if not counted:
            self.counts[name] = self.counts.get(name, 0) + 1
        found = Found(name, self.line, self.time, now(), explanation, lines_of(self.history, ops, self.line),
                      rule)
        self.found.append(found)
        self.report(found)

    def gap(self, why: str) -> None:
        """Something left undecided: a certified verdict then needs the offline pass."""
        self.gaps[why] = self.gaps.get(why, 0) + 1

    def stats(self) -> dict[str, Any]:
        return {"nodes": len(self.graph), "edges": self.graph.edges(), "gaps": dict(self.gaps)}
