"""Transaction analysis shared by every datatype (Elle's `elle.txn`).

A datatype module (list_append, rw_register) turns a history into a
dependency graph — transactions as nodes, ww/wr/rw edges (Adya's write-,
read- and anti-dependencies) — plus its non-cycle anomalies, and hands them to
`analyze`, which adds process and real-time order, finds the cycles, names
them, explains them step by step, and judges the model lattice.

The cycle search itself (every anomaly type in every strongly connected
component, each component under a time limit, and why the verdict is exact
when no limit was hit) lives in `checker.cycles`. Each cycle is named here,
by `classify`, from the edges it actually uses, as Elle's cycle explainer
does.
"""

from __future__ import annotations

import bisect
import operator
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

import numpy as np

from sleuth.checker import cycles, models
from sleuth.checker import graph as g
from sleuth.checker.result import UNKNOWN, Result, nothing_to_judge
from sleuth.history.jsonl import History, Op


@dataclass
class Graph:
    """A datatype's dependency graph over its transactions."""

    txns: list[Op]  # node i is txns[i]
    # Edges as machine integers: millions of them cost 24 bytes each, not ~100.
    src: array = field(default_factory=lambda: array("q"))
    dst: array = field(default_factory=lambda: array("q"))
    kind: array = field(default_factory=lambda: array("q"))

    chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)

    def extend(self, src: np.ndarray, dst: np.ndarray, kind: int) -> None:
        """Add edges in bulk, dropping those with a missing end (-1) or a self-loop."""
        keep = (src >= 0) & (dst >= 0) & (src != dst)
        s, d = src[keep], dst[keep]
        self.chunks.append((s, d, np.full(len(s), kind, dtype=np.int64)))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every edge, as (src, dst, kind) arrays. The graph then holds just
        these (its parts are dropped: at a million transactions, a copy of
        every edge is 80 MB)."""
        parts = [(np.frombuffer(self.src, dtype=np.int64), np.frombuffer(self.dst, dtype=np.int64),
                  np.frombuffer(self.kind, dtype=np.int64)), *self.chunks]
        whole = tuple(np.concatenate([p[i] for p in parts]) for i in range(3))
        del parts
        self.src, self.dst, self.kind = array("q"), array("q"), array("q")
        self.chunks = [whole]  # type: ignore[list-item]
        return whole  # type: ignore[return-value]

    def edge_count(self) -> int:
        return len(self.src) + sum(len(c[0]) for c in self.chunks)

    def add(self, a: int, b: int, kind: int) -> None:
        if a != b:
            self.src.append(a)
            self.dst.append(b)
            self.kind.append(kind)


def txn_name(op: Op) -> str:
    return f"T{op.id}"


def op_index(ops: list[Op], op: Op) -> int:
    """Where `op` is in `ops` (ids increase along a history's ops). For a whole
    history that is `op.id`; for some of its ops with their own ids (Spark's
    sub-histories, sleuth/spark/history_check.py) it is not."""
    i = op.id
    if i < len(ops) and ops[i] is op:  # a whole history's: no search
        return i
    i = bisect.bisect_left(ops, op.id, key=lambda o: o.id)
    return i if i < len(ops) and ops[i] is op else op.id


def txn_label(history: History, op: Op) -> str:
    """`T12 (line 30)`, or `T12 (line 30, index 41)` when the file labels its
    events (Jepsen's `:index`): a name a reader can find in the file."""
    label = history.label_of(op.invoke_pos)
    return (f"{txn_name(op)} (line {history.line_of(op.invoke_pos)}"
            + ("" if label is None else f", index {label}") + ")")


def at(history: History, t: int) -> str:
    """A time as seconds from the run's first event (times are nanoseconds)."""
    return f"{(t - history.start_time) / 1e9:.3f} s"


def describe_txn(history: History, op: Op) -> dict[str, Any]:
    d = {
        "name": txn_name(op),
        "process": op.process,
        "type": op.type,
        "line": history.line_of(op.invoke_pos),
        "complete-line": None if op.complete_pos is None else history.line_of(op.complete_pos),
        "value": op.value,
    }
    label = history.label_of(op.invoke_pos)
    if label is not None:
        d["index"] = label
    return d


def classify(cycle: list[tuple[int, int, int]]) -> str:
    kinds = [k for _, _, k in cycle]
    rw = kinds.count(g.RW)
    if rw == 0:
        base = models.G0 if g.WR not in kinds else models.G1C
    elif rw == 1:
        base = models.G_SINGLE
    else:
        adjacent = any(kinds[i] == g.RW and kinds[(i + 1) % len(kinds)] == g.RW
                       for i in range(len(kinds)))
        base = models.G2_ITEM if adjacent else models.G_NONADJACENT
    if g.REALTIME in kinds:
        return models.realtime(base)
    if g.PROCESS in kinds:
        return models.process(base)
    return base


BASE_SENTENCE = {
    models.G0: "a write cycle: every edge is a write-write dependency",
    models.G1C: "circular information flow: write-write and write-read dependencies only",
    models.G_SINGLE: "a cycle with exactly one anti-dependency (read skew)",
    models.G_NONADJACENT: "a cycle whose anti-dependencies are never adjacent (impossible under snapshot isolation)",
    models.G2_ITEM: "a cycle with adjacent anti-dependencies (write skew)",
    **cycles.adya.SENTENCES,
}


class Explainer:
    """Turns cycles of node ids into sentences and JSON."""

    def __init__(self, history: History, gr: Graph, explain_data: Callable[[int, int, int], str]):
        self.history, self.gr, self.explain_data = history, gr, explain_data

    def edge(self, a: int, b: int, kind: int) -> str:
        ta, tb = self.gr.txns[a], self.gr.txns[b]
        if kind not in (g.PROCESS, g.REALTIME):
            return self.explain_data(a, b, kind)
        h = self.history
        # Real-time order is the file's order (docs/history-format.md): the lines prove
        # the edge; the times are for the reader.
        done = f"line {h.line_of(ta.complete_pos)}" if ta.complete_pos is not None else "never"
        if ta.complete_time is not None:
            done += f", at {at(h, ta.complete_time)}"
        began = f"line {h.line_of(tb.invoke_pos)}, at {at(h, tb.invoke_time)}"
        if kind == g.PROCESS:
            return (f"both ran on process {ta.process}, and {txn_name(tb)} began ({began}) after "
                    f"{txn_name(ta)} completed ({done})")
        return f"{txn_name(ta)} completed ({done}) before {txn_name(tb)} began ({began})"

    def cycle(self, name: str, cycle: list[tuple[int, int, int]]) -> dict[str, Any]:
        txns = self.gr.txns
        steps = []
        lines = []
        line_of = self.history.line_of
        for a, b, k in cycle:
            why = self.edge(a, b, k)
            steps.append({"from": txn_name(txns[a]), "to": txn_name(txns[b]),
                          "from-line": line_of(txns[a].invoke_pos), "to-line": line_of(txns[b].invoke_pos),
                          "kind": g.KIND_NAMES[k], "why": why})
            # each transaction of a cycle leaves it once: name its line there
            lines.append(f"{txn_label(self.history, txns[a])} < {txn_name(txns[b])} "
                         f"({g.KIND_NAMES[k]}) because {why}.")
        head = (f"{name}: {BASE_SENTENCE[models.base_of(name)]}"
                + (", closed by real-time order" if name.endswith(models.REALTIME) else "")
                + (", closed by process order" if name.endswith(models.PROCESS) else "")
                + f"; {len(cycle)} transactions.")
        first = txn_name(txns[cycle[0][0]])
        tail = f"So {first} would have to come before itself: no serial order exists."
        seen = dict.fromkeys(a for a, _, _ in cycle)  # in cycle order, once each (linear, not quadratic)
        return {
            "cycle": [txn_name(txns[a]) for a, _, _ in cycle],
            "steps": steps,
            "txns": [describe_txn(self.history, txns[a]) for a in seen],
            "explanation": "\n".join([head, *lines, tail]),
        }


_INVOKE_POS = operator.attrgetter("invoke_pos")
_COMPLETE_POS = operator.attrgetter("complete_pos")
_PROCESS = operator.attrgetter("process")
_TYPE = operator.attrgetter("type")


def order_arrays(txns: list[Op]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Invoke positions, completion positions (INF_TIME if never) and
    processes, column by column at C speed. Real-time order is the file's
    order (docs/history-format.md): a `time` field may go backwards (Jepsen
    reads its clock before appending the event), positions never do."""
    n = len(txns)
    inv = np.fromiter(map(_INVOKE_POS, txns), np.int64, n)
    proc = np.fromiter(map(_PROCESS, txns), np.int64, n)
    # info: may end any time. Only info ops lack a completion (None): the others'
    # are read alone, as ints (a list of ints and Nones read as floats cost 3x)
    info = np.fromiter(map("info".__eq__, map(_TYPE, txns)), bool, n)
    comp = np.full(n, g.INF_TIME, dtype=np.int64)
    done = ~info
    comp[done] = np.fromiter(map(_COMPLETE_POS, compress(txns, done.tolist())), np.int64,
                             n - int(info.sum()))
    return inv, comp, proc


def process_edges(process: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each transaction -> the next one of its process (txns are in invoke order)."""
    order = np.argsort(process, kind="stable")
    same = process[order[1:]] == process[order[:-1]]
    return order[:-1][same], order[1:][same]


EMPTY_GRAPH_NOTE = ("no dependency between transactions could be inferred (no read saw another "
                    "transaction's write, and no order of versions is known): valid, but the history "
                    "says nothing about isolation (Elle calls it unknown: empty-transaction-graph)")


def analyze(history: History, gr: Graph, explain_data: Callable[[int, int, int], str],
            non_cycle: dict[str, list[dict]], model: str, stats: dict[str, Any],
            cycle_search_timeout: float | None = None, edge_labels: Callable | None = None,
            unseen: dict | None = None) -> Result:
    """Find and name the cycles of `gr`, merge in `non_cycle`, judge `model`.

    `cycle_search_timeout`: seconds of search per strongly connected
    component (None: `cycles.DEFAULT_TIMEOUT`); see `checker.cycles`.
    `edge_labels`: the datatype's `checker.labels` (key and micro-ops of each edge).
    `unseen`: per key, the nodes whose writes to it have no known order among
    themselves (list-append's appends no read saw; `cycles.CycleSearch._either_order`).
    """
    t0 = time.perf_counter()
    model = models.canonical(model)
    timeout = cycles.DEFAULT_TIMEOUT if cycle_search_timeout is None else cycle_search_timeout
    txns = gr.txns
    n = len(txns)
    invoke, complete, process = order_arrays(txns)
    ps, pd = process_edges(process)
    bs, bd, nb = g.barrier_realtime(invoke, complete)
    gsrc, gdst, gkind = gr.arrays()
    ids = np.int32 if n + nb < 2**31 else np.int64  # half the memory, while ids fit
    labels, _ = g.scc_labels(n + nb, np.concatenate([gsrc, ps, bs], dtype=ids),
                             np.concatenate([gdst, pd, bd], dtype=ids),
                             lambda: g.realtime_key(invoke, complete))
    explainer = Explainer(history, gr, explain_data)
    search = cycles.CycleSearch(classify, explainer.cycle, timeout, labels=edge_labels, txns=txns)
    oc = cycles.on_cycles(n, labels, gsrc, gdst, gkind, invoke, complete, ps, pd)
    if oc is not None:
        search.run(oc, unseen)

    found = {**{k: v for k, v in non_cycle.items() if v}, **search.found}
    counts = {k: len(v) for k, v in non_cycle.items() if v} | search.counts
    names = sorted(found)
    forbidden = [a for a in names if models.forbids(model, a)]
    allowed = [a for a in names if a not in forbidden]
    not_, also_not, possible = models.judge(names)
    incomplete = [t for t in cycles.TYPES if t in search.incomplete]
    notes = []
    if incomplete:
        notes.append(f"cycle search cut short after {timeout:g} s in {len(search.timeouts)} "
                     f"component(s) (largest: {max(t['transactions'] for t in search.timeouts)} "
                     f"transactions); these types may be missing or undercounted: "
                     f"{', '.join(incomplete)} (raise --cycle-search-timeout)")
    if forbidden:
        valid: bool | str = False
    elif not any(op.type == "ok" for op in history.ops()):
        valid = UNKNOWN
        notes.append(nothing_to_judge("no transaction completed ok" if history.ops()
                                      else "the history has no transactions"))
    elif any(models.forbids(model, t) for t in incomplete):
        valid = UNKNOWN
    else:
        valid = True
        if gr.edge_count() == 0 and sum(op.type == "ok" for op in txns) > 1:
            notes.append(EMPTY_GRAPH_NOTE)
    stats = {**stats, "txns": n, "edges": gr.edge_count(), "on-cycles": 0 if oc is None else len(oc.ids),
             "components": 0 if oc is None else len(oc.sizes),
             "largest-component": max(oc.sizes) if oc is not None else 0,
             "anomaly-counts": counts,
             # one cycle per (type, component) is searched: a count says "at least"
             "cycle-counts-are": "lower-bounds",
             "cycle-search-timeout": timeout, "cycle-search-timeouts": search.timeouts,
             "cycle-seconds": round(time.perf_counter() - t0, 3)}
    return Result(valid=valid, model=model, anomaly_types=forbidden,
                  anomalies={k: found[k] for k in names}, not_=not_, also_not=also_not,
                  possible=possible, also_found=allowed, stats=stats, notes=notes,
                  incomplete=incomplete)
