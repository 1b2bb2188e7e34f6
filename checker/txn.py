"""Transaction analysis shared by every datatype (Elle's `elle.txn`).

A datatype module (list_append, rw_register) turns a history into a
dependency graph — transactions as nodes, ww/wr/rw edges (Adya's write-,
read- and anti-dependencies) — plus its non-cycle anomalies, and hands them to
`analyze`, which adds process and real-time order, finds the cycles, names
them, explains them step by step, and judges the model lattice.

Cycles are searched in three passes, each allowing more edge kinds:
data edges only (plain names), then with same-process order (`-process`),
then with real-time order (`-realtime`). In each pass, for each class:

- G0: a strongly connected component of ww edges; any cycle in it.
- G1c: an SCC of ww+wr edges holding a wr edge; the cycle through it.
- G-single / G-nonadjacent: Cerone & Gotsman's snapshot-isolation condition.
  A product graph with states (node, arrived by rw?) whose rw edges may only
  leave state 0 has a cycle iff the history has a closed walk with no two rw
  edges in a row. For each rw edge inside such a component, the cycle through
  it with one rw edge (G-single) or several non-adjacent ones.
- G2-item: an SCC of all data edges holding an rw edge; the cycle through it.

Every search starts from an edge known to lie inside a component that
contains the cycle class sought, so a breadth-first search always finds one:
no class present in the history is missed (the search is bounded only by a
visit budget, and running out of it makes the verdict "unknown", never
"valid"). Each cycle is then classified from the edges it actually uses.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sleuth.checker import graph as g
from sleuth.checker import models
from sleuth.checker.result import UNKNOWN, Result, nothing_to_judge
from sleuth.history import History, Op

MAX_EXAMPLES = 8  # cycles shown per anomaly type
SEARCH_BUDGET = 20_000_000  # node visits across all cycle searches

PASSES: tuple[tuple[str, frozenset[int]], ...] = (
    ("", frozenset()),
    ("-process", frozenset({g.PROCESS})),
    ("-realtime", frozenset({g.PROCESS, g.REALTIME})),
)


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
        parts = [(np.frombuffer(self.src, dtype=np.int64), np.frombuffer(self.dst, dtype=np.int64),
                  np.frombuffer(self.kind, dtype=np.int64)), *self.chunks]
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))  # type: ignore[return-value]

    def edge_count(self) -> int:
        return len(self.src) + sum(len(c[0]) for c in self.chunks)

    def add(self, a: int, b: int, kind: int) -> None:
        if a != b:
            self.src.append(a)
            self.dst.append(b)
            self.kind.append(kind)


def txn_name(op: Op) -> str:
    return f"T{op.id}"


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
        base = "G0" if g.WR not in kinds else "G1c"
    elif rw == 1:
        base = "G-single"
    else:
        adjacent = any(kinds[i] == g.RW and kinds[(i + 1) % len(kinds)] == g.RW
                       for i in range(len(kinds)))
        base = "G2-item" if adjacent else "G-nonadjacent"
    if g.REALTIME in kinds:
        return base + "-realtime"
    if g.PROCESS in kinds:
        return base + "-process"
    return base


BASE_SENTENCE = {
    "G0": "a write cycle: every edge is a write-write dependency",
    "G1c": "circular information flow: write-write and write-read dependencies only",
    "G-single": "a cycle with exactly one anti-dependency (read skew)",
    "G-nonadjacent": "a cycle whose anti-dependencies are never adjacent (impossible under snapshot isolation)",
    "G2-item": "a cycle with adjacent anti-dependencies (write skew)",
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
        base = name.split("-realtime")[0].split("-process")[0]
        head = (f"{name}: {BASE_SENTENCE[base]}"
                + (", closed by real-time order" if name.endswith("-realtime") else "")
                + (", closed by process order" if name.endswith("-process") else "")
                + f"; {len(cycle)} transactions.")
        first = txn_name(txns[cycle[0][0]])
        tail = f"So {first} would have to come before itself: no serial order exists."
        seen = []
        for a, _, _ in cycle:
            if a not in seen:
                seen.append(a)
        return {
            "cycle": [txn_name(txns[a]) for a, _, _ in cycle],
            "steps": steps,
            "txns": [describe_txn(self.history, txns[a]) for a in seen],
            "explanation": "\n".join([head, *lines, tail]),
        }


def _components_with(labels: np.ndarray, sizes: np.ndarray, src: np.ndarray, dst: np.ndarray,
                     idx: np.ndarray) -> dict[int, int]:
    """For edges idx (indices into src/dst) whose ends share a nontrivial
    component: component label -> the first such edge index."""
    ls, ld = labels[src[idx]], labels[dst[idx]]
    ok = (ls == ld) & (sizes[ls] > 1)
    out: dict[int, int] = {}
    for e, lab in zip(idx[ok].tolist(), ls[ok].tolist(), strict=True):
        out.setdefault(lab, e)
    return out


class CycleSearch:
    """The three passes over the part of the graph that lies on cycles."""

    def __init__(self, gr: Graph, explainer: Explainer):
        self.gr = gr
        self.explainer = explainer
        self.found: dict[str, list[dict]] = {}
        self.counts: dict[str, int] = {}
        self.seen: set[tuple[str, frozenset[int]]] = set()
        self.budget = [SEARCH_BUDGET]
        self.exhausted = False

    def record(self, cycle: list[tuple[int, int, int]] | None, local_ids: np.ndarray) -> None:
        if cycle is None:
            self.exhausted = self.exhausted or self.budget[0] < 0
            return
        glob = [(int(local_ids[a]), int(local_ids[b]), k) for a, b, k in cycle]
        name = classify(glob)
        key = (name, frozenset(a for a, _, _ in glob))
        if key in self.seen:
            return
        self.seen.add(key)
        self.counts[name] = self.counts.get(name, 0) + 1
        examples = self.found.setdefault(name, [])
        if len(examples) < MAX_EXAMPLES:
            examples.append(self.explainer.cycle(name, glob))

    def run(self, nodes: np.ndarray, invoke: np.ndarray, complete: np.ndarray,
            process_src: np.ndarray, process_dst: np.ndarray) -> None:
        gr = self.gr
        n = len(gr.txns)
        m = len(nodes)
        local = np.full(n, -1, dtype=np.int64)
        local[nodes] = np.arange(m)
        src, dst, kind = gr.arrays()
        keep = (local[src] >= 0) & (local[dst] >= 0)
        src, dst, kind = local[src[keep]], local[dst[keep]], kind[keep]
        pk = (local[process_src] >= 0) & (local[process_dst] >= 0)
        ps, pd = local[process_src[pk]], local[process_dst[pk]]
        rs, rd = g.realtime_pairs(nodes.tolist(), invoke[nodes].tolist(), complete[nodes].tolist())
        rs, rd = local[np.asarray(rs, dtype=np.int64)], local[np.asarray(rd, dtype=np.int64)]
        src = np.concatenate([src, ps, rs])
        dst = np.concatenate([dst, pd, rd])
        kind = np.concatenate([kind, np.full(len(ps), g.PROCESS), np.full(len(rs), g.REALTIME)])
        adj = g.Adjacency(m, src.tolist(), dst.tolist(), kind.tolist())
        for _suffix, extra in PASSES:
            self.run_pass(m, adj, src, dst, kind, extra, nodes)

    def run_pass(self, m, adj, src, dst, kind, extra, ids) -> None:
        def sub(kinds: frozenset[int]):
            sel = np.flatnonzero(np.isin(kind, list(kinds)))
            labels, sizes = g.scc_labels(m, src[sel], dst[sel])
            return labels, sizes

        # G0: any cycle of ww (+ extra) edges; extra edges alone are acyclic.
        allowed = frozenset({g.WW}) | extra
        labels, sizes = sub(allowed)
        for e in self._first(labels, sizes, src, dst, kind, g.WW).values():
            self._through(adj, e, src, dst, g.WW, allowed, ids)
        # G1c: a cycle through a wr edge, without rw edges.
        allowed = frozenset({g.WW, g.WR}) | extra
        labels, sizes = sub(allowed)
        for e in self._first(labels, sizes, src, dst, kind, g.WR).values():
            self._through(adj, e, src, dst, g.WR, allowed, ids)
        # G-single / G-nonadjacent: the product graph of Cerone & Gotsman.
        non_rw = frozenset({g.WW, g.WR}) | extra
        sel = np.flatnonzero(np.isin(kind, list(non_rw)))
        rw = np.flatnonzero(kind == g.RW)
        ps = np.concatenate([2 * src[sel], 2 * src[sel] + 1, 2 * src[rw]])
        pd = np.concatenate([2 * dst[sel], 2 * dst[sel], 2 * dst[rw] + 1])
        plabels, psizes = g.scc_labels(2 * m, ps, pd)
        ls, ld = plabels[2 * src[rw]], plabels[2 * dst[rw] + 1]
        hit = rw[(ls == ld) & (psizes[ls] > 1)]
        done: set[int] = set()
        for e, lab in zip(hit.tolist(), plabels[2 * src[hit]].tolist(), strict=True):
            if lab in done:
                continue
            done.add(lab)
            a, b = int(src[e]), int(dst[e])
            path = g.bfs_path(adj, b, a, non_rw, self.budget)
            if path is not None:
                self.record([(a, b, g.RW)] + path, ids)
            else:
                self.record(g.bfs_nonadjacent(adj, (a, b), non_rw | {g.RW}, self.budget), ids)
        # G2-item: a cycle through an rw edge, anything goes.
        allowed = frozenset(g.DATA) | extra
        labels, sizes = sub(allowed)
        for e in self._first(labels, sizes, src, dst, kind, g.RW).values():
            self._through(adj, e, src, dst, g.RW, allowed, ids)

    @staticmethod
    def _first(labels, sizes, src, dst, kind, k) -> dict[int, int]:
        return _components_with(labels, sizes, src, dst, np.flatnonzero(kind == k))

    def _through(self, adj, e, src, dst, k, allowed, ids) -> None:
        a, b = int(src[e]), int(dst[e])
        path = g.bfs_path(adj, b, a, allowed, self.budget)
        self.record(None if path is None else [(a, b, k)] + path, ids)


def order_arrays(txns: list[Op]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Invoke positions, completion positions (INF_TIME if never) and
    processes, in one pass. Real-time order is the file's order (docs/history-format.md):
    a `time` field may go backwards (Jepsen reads its clock before appending
    the event), positions never do."""
    n = len(txns)
    inv, comp, proc = [0] * n, [0] * n, [0] * n
    inf = g.INF_TIME
    for i, op in enumerate(txns):
        inv[i] = op.invoke_pos
        c = None if op.type == "info" else op.complete_pos  # info: may end any time
        comp[i] = inf if c is None else c
        proc[i] = op.process
    return (np.asarray(inv, dtype=np.int64), np.asarray(comp, dtype=np.int64),
            np.asarray(proc, dtype=np.int64))


def process_edges(process: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each transaction -> the next one of its process (txns are in invoke order)."""
    order = np.argsort(process, kind="stable")
    same = process[order[1:]] == process[order[:-1]]
    return order[:-1][same], order[1:][same]


def analyze(history: History, gr: Graph, explain_data: Callable[[int, int, int], str],
            non_cycle: dict[str, list[dict]], model: str, stats: dict[str, Any]) -> Result:
    """Find and name the cycles of `gr`, merge in `non_cycle`, judge `model`."""
    t0 = time.perf_counter()
    models.check_model(model)
    txns = gr.txns
    n = len(txns)
    invoke, complete, process = order_arrays(txns)
    ps, pd = process_edges(process)
    bs, bd, nb = g.barrier_realtime(invoke, complete)
    gsrc, gdst, _ = gr.arrays()
    src = np.concatenate([gsrc, ps, bs])
    dst = np.concatenate([gdst, pd, bd])
    on_cycle = g.in_cycles(n + nb, src, dst, real=n)
    nodes = np.flatnonzero(on_cycle)
    search = CycleSearch(gr, Explainer(history, gr, explain_data))
    if len(nodes):
        search.run(nodes, invoke, complete, ps, pd)

    found = {**{k: v for k, v in non_cycle.items() if v}, **search.found}
    counts = {k: len(v) for k, v in non_cycle.items() if v} | search.counts
    names = sorted(found)
    forbidden = [a for a in names if models.forbids(model, a)]
    allowed = [a for a in names if a not in forbidden]
    not_, also_not, possible = models.judge(names)
    notes = []
    if forbidden:
        valid: bool | str = False
    elif not any(op.type == "ok" for op in history.ops()):
        valid = UNKNOWN
        notes.append(nothing_to_judge("no transaction completed ok" if history.ops()
                                      else "the history has no transactions"))
    elif search.exhausted:
        valid = UNKNOWN
        notes.append(f"cycle search stopped after {SEARCH_BUDGET} node visits; "
                     "some cycles may be unclassified")
    else:
        valid = True
    stats = {**stats, "txns": n, "edges": gr.edge_count(), "on-cycles": int(len(nodes)),
             "anomaly-counts": counts, "cycle-seconds": round(time.perf_counter() - t0, 3)}
    return Result(valid=valid, model=model, anomaly_types=forbidden,
                  anomalies={k: found[k] for k in names}, not_=not_, also_not=also_not,
                  possible=possible, also_found=allowed, stats=stats, notes=notes)
