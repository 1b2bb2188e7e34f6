"""Adya's anomalies that edge kinds alone cannot name: G-cursor, G-monotonic
and G-update (Adya, "Weak Consistency", MIT 1999, sections 4.3-4.5), found
black-box, per strongly connected component, under the component's time
budget (`checker.cycles` runs them after its edge-kind specs).

Each detector is a generator of (component, task) pairs; a task takes a
deadline and returns the cycles it found (as (from, to, kind) steps over
the local nodes of `cycles.OnCycles`), each with a sentence saying what
makes it one of its type, or raises `graph.SearchTimeout`.

- **G-cursor(x)** (PL-CS, cursor stability): a cycle with one
  anti-dependency and otherwise write-dependencies (ww), every edge
  labelled x. Searched: for each rw edge Ti -> Tj on x inside a strongly
  connected component of the ww+rw edges, a ww path from Tj back to Ti
  whose every edge is on x (`labels`). Exact for the inferred graph: every
  such cycle starts with an rw edge of that component, and the search from
  it visits every ww(x) path.
- **G-monotonic** (PL-2L, monotonic view): a cycle in the unfolded graph
  USG(H, Ti), where Ti is split into its operations joined in program
  order, with exactly one anti-dependency, which leaves a read ri of Ti,
  and otherwise dependency (ww/wr) and order edges. Searched: for each Ti
  with an rw edge inside a component of the data edges, a backward search
  from Ti over ww/wr edges, not through Ti, marks every transaction with
  the earliest operation of Ti its dependency paths can enter; an rw edge
  Ti -> Tk leaving a read at position p whose Tk is marked with q <= p
  closes a USG cycle (q, through order edges, up to p); a Ti that no
  dependency edge can enter at or before its last read (a ww edge enters at
  a write, a wr edge at a read: the labels' `bounds`), or that none of its
  rw successors reaches by dependency edges not through Ti (`_reaches`: at
  100,000 read-committed transactions, 3,820 of 4,378 tasks find nothing),
  is passed over before any of its edges' labels is computed. What is not
  searched is a path that passes through Ti's own operations on the way;
  such a cycle implies a G1c, which every model that forbids G-monotonic
  forbids and the G1c search finds: the path first enters Ti at e1 > p (or
  this search would have found it), then leaves Ti at some l >= e1 and so
  on, and as it must end at or before p < e1, some segment leaves Ti at l
  and comes back at e <= l: that segment and Ti's order edges from e to l
  are a cycle of dependency edges alone (the USG cycle has one
  anti-dependency, the first edge). So no model's verdict depends on it.
- **G-update** (PL-3U, update serializability): a cycle of the DSG with
  one or more anti-dependency edges whose transactions all write, except at
  most one read-only transaction. A read-only transaction is one with no
  write or append in its micro-ops (a node of the graph: it committed, or it
  is an info transaction some read observed). Searched: in each strongly
  connected component of the data edges among update transactions, the
  shortest cycle through one of its rw edges; and for each read-only
  transaction R in a data component, the shortest path among update
  transactions from one of R's rw successors to one of its wr predecessors
  (R's only in-edges are wr: nothing overwrites or reads-from a
  transaction that writes nothing). Exact for the inferred graph.

What is inferred and why it is sound: edges and their labels are those the
datatype module inferred (each a certain consequence of the history:
list-append's version order from the longest read, rw-register's known
version pairs); the micro-op order of a transaction is its program order,
as the history lists it. A cycle reported is therefore a cycle of Adya's
graph for any version order consistent with the history.

Adya's G-SIa, G-SIb (PL-SI) and G-MSR (PL-MSR) are not searched here: they
need start-dependencies (Ti committed before Tj started), and from outside
the database only real time proves one (Ti completed before Tj was
invoked). With those edges alone, G-SIa is a G0/G1c-realtime cycle of two
transactions and G-SIb a G-single-realtime one, which the real-time
searches already report; plain G-single implies G-SIb (every DSG edge is
an SSG edge). Judging plain snapshot isolation by real-time start order
would rule out serializable histories, which snapshot isolation is weaker
than (docs/models.md).
"""

from __future__ import annotations

import operator
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from sleuth.checker import graph as g
from sleuth.checker import models

Cycle = list[tuple[int, int, int]]
Task = Callable[[float], list[tuple[Cycle, str]]]

TYPES = (models.G_CURSOR, models.G_MONOTONIC, models.G_UPDATE)
SENTENCES = {
    models.G_CURSOR: "a cycle on a single key with one anti-dependency and otherwise write-write "
                "dependencies (a labelled single anti-dependency cycle, Adya's lost update)",
    models.G_MONOTONIC: "a cycle with one anti-dependency, leaving a read that came after an operation "
                   "the rest of the cycle enters (a non-monotonic view)",
    models.G_UPDATE: "a cycle with anti-dependencies among transactions that all write, but at most "
                "one read-only one",
}
# each type -> the plain edge-kind spec whose search, run to the end in a component
# without finding a cycle, proves the type absent there: G-cursor and G-monotonic
# cycles are G-single ones (a product-graph cycle through an rw edge, which the
# G-single spec finds if any exists), G-update cycles are data cycles through an rw
# edge (which the G2-item spec finds if any exists)
WITHIN = {models.G_CURSOR: models.G_SINGLE, models.G_MONOTONIC: models.G_SINGLE, models.G_UPDATE: models.G2_ITEM}
CHECK_EVERY = 1024
REUSE = 2  # found cycles tried per component before searching (trying all costs more than it saves)
NEVER = 1 << 62  # an entry position no read follows (an edge without a label)


@dataclass
class Context:
    """What a detector searches: the on-cycle graph, edge labels, the
    components of an edge-kind set ((labels, sizes, labels as a list),
    shared with the specs), and the graph's transactions."""

    oc: Any  # cycles.OnCycles
    facts: Callable
    sccs: Callable[[frozenset], tuple]
    txns: list
    _upd: list[bool] | None = None
    _facts: dict = field(default_factory=dict)
    _members: dict[int, list[int]] | None = None

    def update(self) -> list[bool]:
        """Per local node: does the transaction write? (A list: indexing a numpy array
        one item at a time is slow.)"""
        if self._upd is None:
            self._upd = [_writes(self.txns[i]) for i in self.oc.idl]
        return self._upd

    def members(self, c: int) -> list[int]:
        """The local nodes of top-level component c."""
        if self._members is None:
            self._members = {}
            for a, x in enumerate(self.oc.comp):
                self._members.setdefault(x, []).append(a)
        return self._members[c]

    @contextmanager
    def assuming(self, edge: tuple[int, int, int], facts: list):
        """While inside: `edge_facts(*edge)` also has `facts` (an edge the graph
        lacks, `through`)."""
        old = self.edge_facts(*edge)
        self._facts[edge] = [*old, *facts]
        try:
            yield
        finally:
            self._facts[edge] = old

    def edge_facts(self, a: int, b: int, kind: int) -> list:
        """The labels of local edge (a, b, kind), each computed once."""
        key = (a, b, kind)
        got = self._facts.get(key)
        if got is None:
            got = self._facts[key] = self.facts(self.oc.idl[a], self.oc.idl[b], kind)
        return got


def _clock(deadline: float) -> Callable[[], None]:
    n = [0]

    def tick() -> None:
        n[0] += 1
        if n[0] % CHECK_EVERY == 0 and time.perf_counter() > deadline:
            raise g.SearchTimeout

    return tick


def _name(ctx, node: int) -> str:
    return f"T{ctx.txns[ctx.oc.idl[node]].id}"


def _label_lists(m: int, src, dst, sel, key: np.ndarray) -> tuple[list[int], np.ndarray]:
    labels, sizes = g.scc_labels(m, src[sel], dst[sel], key)
    return labels.tolist(), (labels, sizes)


def cursor(ctx) -> Iterator[tuple[int, Task]]:
    """G-cursor tasks: one per component of the ww+rw edges that holds an rw edge."""
    oc = ctx.oc
    src, dst, kind = oc.src, oc.dst, oc.kind
    label, (labels, sizes) = _label_lists(len(oc.ids), src, dst, np.isin(kind, (g.WW, g.RW)), oc.key)
    inside = (labels[src] == labels[dst]) & (sizes[labels[src]] > 1)
    # Ti must be entered by a ww edge of its component (it writes x after Tj)
    written = np.zeros(len(oc.ids), dtype=bool)
    written[dst[inside & (kind == g.WW)]] = True
    rw = np.flatnonzero(inside & (kind == g.RW))
    rw = rw[written[src[rw]]]
    if not len(rw):
        return
    ids, overwrites = oc.idl, ctx.facts.overwrites
    rw = [(e, a) for e, a in zip(rw.tolist(), src[rw].tolist(), strict=True)
          if overwrites(ids[a])]  # Ti reads and writes x
    ww_keys: dict[tuple[int, int], set] = {}

    def keys(u: int, v: int) -> set:
        got = ww_keys.get((u, v))
        if got is None:
            got = ww_keys[(u, v)] = {k for k, _, _ in ctx.edge_facts(u, v, g.WW)}
        return got

    by_comp: dict[int, list[int]] = {}
    for e, a in rw:
        by_comp.setdefault(label[a], []).append(e)
    for edges in by_comp.values():
        def task(deadline: float, edges=edges) -> list[tuple[Cycle, str]]:
            tick = _clock(deadline)
            for e in edges:
                a, b = int(src[e]), int(dst[e])
                for x in dict.fromkeys(k for k, _, _ in ctx.edge_facts(a, b, g.RW)):
                    path = _bfs(oc.adj, b, a, lambda u, v, k, x=x, c=label[a]: k == g.WW and label[v] == c
                                and x in keys(u, v), tick)
                    if path is not None:
                        return [([(a, b, g.RW), *path], f"Every edge is on key {x!r}.")]
            return []
        yield oc.comp[int(src[edges[0]])], task


def _bfs(adj: g.Adjacency, start: int, goal: int, ok: Callable, tick) -> Cycle | None:
    """Shortest path start -> goal over the edges `ok(u, v, kind)` accepts."""
    prev: dict[int, tuple[int, int]] = {start: (-1, -1)}
    q = deque([start])
    while q:
        u = q.popleft()
        tick()
        for v, k in adj.out[u]:
            if v in prev or not ok(u, v, k):
                continue
            prev[v] = (u, k)
            if v == goal:
                path = []
                while v != start:
                    p, pk = prev[v]
                    path.append((p, v, pk))
                    v = p
                return path[::-1]
            q.append(v)
    return None


def monotonic(ctx) -> Iterator[tuple[int, Task]]:
    """G-monotonic tasks: one per component of the data edges holding an rw edge."""
    oc, sccs = ctx.oc, ctx.sccs
    src, dst, kind = oc.src, oc.dst, oc.kind
    labels, sizes, label = sccs(frozenset(g.DATA))
    inside = (labels[src] == labels[dst]) & (sizes[labels[src]] > 1)
    rw = np.flatnonzero(inside & (kind == g.RW))
    if not len(rw):
        return
    dep = np.flatnonzero(inside & ((kind == g.WW) | (kind == g.WR)))
    into: dict[int, list[tuple[int, int]]] = {}  # node -> its dependency in-edges (from, kind)
    for s, d, k in zip(src[dep].tolist(), dst[dep].tolist(), kind[dep].tolist(), strict=True):
        into.setdefault(d, []).append((s, k))
    by_comp: dict[int, dict[int, list[int]]] = {}  # component -> Ti -> its rw out-neighbours
    for s, d in zip(src[rw].tolist(), dst[rw].tolist(), strict=True):
        by_comp.setdefault(label[s], {}).setdefault(s, []).append(d)

    for sources in by_comp.values():
        yield oc.comp[next(iter(sources))], partial(_monotonic_search, ctx, into, sources)


def _monotonic_search(ctx, into: dict[int, list[tuple[int, int]]], sources: dict[int, list[int]],
                      deadline: float) -> list[tuple[Cycle, str]]:
    """The first G-monotonic cycle leaving one of `sources` (Ti -> its rw successors) by an rw
    edge, over the dependency edges `into` (node -> its in-edges (from, kind)); [] if none."""
    oc = ctx.oc
    tick = _clock(deadline)
    for a, outs in sources.items():
        ins = into.get(a, ())
        # no dependency edge can enter Ti at or before its last read: no cycle
        # here, known without the labels of its edges (`bounds`)
        bounds = ctx.facts.bounds(oc.idl[a])
        if min((_earliest_entry(bounds, k) for _, k in ins), default=NEVER) > bounds[2]:
            continue
        if not _reaches(into, a, outs, tick):
            continue
        reads = [(b, max((p for _, p, _ in ctx.edge_facts(a, b, g.RW)), default=-1)) for b in outs]
        # an entry after every read the rw edges leave closes no cycle, and nor do
        # the marks it spreads (each is compared with those reads): such in-edges are
        # left out, and those whose kind enters after the reads (`bounds`) are left
        # out before their labels are computed
        last = max(p for _, p in reads)
        entries = []
        for u, k in ins:
            if _earliest_entry(bounds, k) <= last:
                q = min((q for _, _, q in ctx.edge_facts(u, a, k)), default=NEVER)
                if q <= last:
                    entries.append((q, u, k))
        if not entries:
            continue
        entries.sort()
        mark: dict[int, tuple[int, int, int]] = {}  # node -> (entry position, next node, kind)
        for q, u, k in entries:  # earliest entries first: each node keeps its earliest
            if u in mark:
                continue
            mark[u] = (q, a, k)
            todo = deque([u])
            while todo:
                v = todo.popleft()
                tick()
                for w, kw in into.get(v, ()):
                    if w != a and w not in mark:
                        mark[w] = (q, v, kw)
                        todo.append(w)
        for b, p in reads:
            if b in mark and mark[b][0] <= p:
                cycle, v = [(a, b, g.RW)], b
                while v != a:
                    _, nxt, k = mark[v]
                    cycle.append((v, nxt, k))
                    v = nxt
                return [(cycle, _monotonic_detail(ctx, a, mark[b][0], p))]
    return []


def _reaches(into: dict[int, list[tuple[int, int]]], a: int, outs: list[int], tick) -> bool:
    """Does a dependency path lead from one of `outs` to `a`, not through `a`? Without
    one no G-monotonic cycle leaves `a` by these rw edges, whatever the positions: so
    this is asked before any label is computed."""
    goals = set(outs)
    seen = {a}
    todo = [a]
    while todo:
        v = todo.pop()
        tick()
        for w, _ in into.get(v, ()):
            if w in goals:
                return True
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return False


def update(ctx) -> Iterator[tuple[int, Task]]:
    """G-update tasks: one per component of the data edges among update
    transactions holding an rw edge, and one per component of the data edges
    holding a read-only transaction."""
    oc, sccs = ctx.oc, ctx.sccs
    src, dst, kind = oc.src, oc.dst, oc.kind
    m = len(oc.ids)
    uplist = ctx.update()
    upd = np.array(uplist, dtype=bool)
    data = np.isin(kind, g.DATA)
    both = data & upd[src] & upd[dst]
    ulabel, (ulabels, usizes) = _label_lists(m, src, dst, both, ctx.oc.key)
    rw = np.flatnonzero(both & (kind == g.RW) & (ulabels[src] == ulabels[dst]))
    rw = rw[usizes[ulabels[src[rw]]] > 1]
    anything = g.any_cycle(frozenset(g.DATA))
    seen: set[int] = set()
    for e in rw.tolist():
        a, b = int(src[e]), int(dst[e])
        if ulabel[a] in seen:
            continue
        seen.add(ulabel[a])

        def task(deadline: float, a=a, b=b) -> list[tuple[Cycle, str]]:
            walk = g.bfs_cycle(oc.adj, (a, b, g.RW), anything, ulabel, deadline)
            return [] if walk is None else [(g.simple_cycle(walk), "Every transaction on it writes.")]
        yield oc.comp[a], task
    labels, sizes, label = sccs(frozenset(g.DATA))
    ro = np.flatnonzero(~upd & (sizes[labels] > 1))
    if not len(ro):
        return
    pred: dict[int, list[int]] = {}
    sel = np.flatnonzero(data & (kind == g.WR) & ~upd[dst] & upd[src])
    for s, d in zip(src[sel].tolist(), dst[sel].tolist(), strict=True):
        pred.setdefault(d, []).append(s)
    by_comp: dict[int, list[int]] = {}
    for r in ro.tolist():
        by_comp.setdefault(label[r], []).append(r)

    def task(deadline: float, readers: list[int]) -> list[tuple[Cycle, str]]:
        tick = _clock(deadline)
        for r in readers:
            goals = set(pred.get(r, ()))
            starts = [v for v, k in oc.adj.out[r] if k == g.RW and uplist[v] and label[v] == label[r]]
            if not goals or not starts:
                continue
            prev = {s: (r, g.RW) for s in starts}
            q = deque(starts)
            while q:
                u = q.popleft()
                tick()
                if u in goals:
                    path = [(u, r, g.WR)]
                    while u != r:
                        p, k = prev[u]
                        path.append((p, u, k))
                        u = p
                    return [(path[::-1], f"{_name(ctx, r)} is its only read-only transaction; "
                                         "every other one writes.")]
                for v, k in oc.adj.out[u]:
                    if k in g.DATA and uplist[v] and v not in prev and label[v] == label[r]:
                        prev[v] = (u, k)
                        q.append(v)
        return []

    for readers in by_comp.values():
        yield oc.comp[readers[0]], lambda d, rs=readers: task(d, rs)


# A cycle the edge-kind specs found already may be of a type here: checked
# first, so the search runs only in components where none is. Each returns
# the detail sentence if the (local) cycle is of its type, else None.

def _is_update(ctx, cycle: Cycle) -> str | None:
    upd = ctx.update()
    ro = [a for a, _, _ in cycle if not upd[a]]
    if len(ro) > 1 or all(k != g.RW for _, _, k in cycle):
        return None
    return (f"{_name(ctx, ro[0])} is its only read-only transaction; every other one writes." if ro
            else "Every transaction on it writes.")


def _one_rw(cycle: Cycle) -> Cycle | None:
    """The cycle rotated to begin with its only rw edge, if it has exactly one."""
    at = [i for i, (_, _, k) in enumerate(cycle) if k == g.RW]
    return cycle[at[0]:] + cycle[:at[0]] if len(at) == 1 else None


def _is_cursor(ctx, cycle: Cycle) -> str | None:
    cycle = _one_rw(cycle)
    if cycle is None or any(k != g.WW for _, _, k in cycle[1:]):
        return None
    # a key every edge is on is read by the rw edge's source and written by every
    # transaction of the cycle (`key_sets`): where there is none, no label is computed
    ids, key_sets = ctx.oc.idl, ctx.facts.key_sets
    common = set(key_sets(ids[cycle[0][0]])[0])
    for _, b, _ in cycle:
        common &= key_sets(ids[b])[1]
        if not common:
            return None
    keys = None
    for a, b, k in cycle:
        ks = {x for x, _, _ in ctx.edge_facts(a, b, k)}
        keys = ks if keys is None else keys & ks
        if not keys:
            return None
    return f"Every edge is on key {next(iter(keys))!r}."


def _is_monotonic(ctx, cycle: Cycle) -> str | None:
    cycle = _one_rw(cycle)
    if cycle is None or any(k not in (g.WW, g.WR) for _, _, k in cycle[1:]):
        return None
    a, b, _ = cycle[0]
    u, _, k = cycle[-1]
    bounds = ctx.facts.bounds(ctx.oc.idl[a])
    if _earliest_entry(bounds, k) > bounds[2]:  # q <= p cannot hold: q is at or after it, p at or before
        return None
    p = max((p for _, p, _ in ctx.edge_facts(a, b, g.RW)), default=-1)
    q = min((q for _, _, q in ctx.edge_facts(u, a, k)), default=NEVER)
    return _monotonic_detail(ctx, a, q, p) if q <= p else None


def _earliest_entry(bounds: tuple[int, int, int], kind: int) -> int:
    """The earliest micro-op at which a dependency edge of `kind` can enter the
    transaction whose labels' `bounds` these are: a ww edge at an append, a wr
    edge at a read (bounds[2], its last read, is the latest an rw edge leaves)."""
    return bounds[0] if kind == g.WW else bounds[1]


def _monotonic_detail(ctx, a: int, q: int, p: int) -> str:
    return (f"{_name(ctx, a)} performed micro-op {q + 1}, which the cycle enters, before its read "
            f"at micro-op {p + 1}, which the anti-dependency leaves.")


_FUNCTION = operator.itemgetter(0)  # a micro-op's function


def _writes(op) -> bool:
    """Does the transaction write (or append)? Its committed value if it
    committed, else what it was invoked with (an info txn observed: it wrote)."""
    value = op.value if op.type == "ok" else op.invoke_value
    return any(map("r".__ne__, map(_FUNCTION, value)))


DETECTORS: dict[str, Callable] = {models.G_CURSOR: cursor, models.G_MONOTONIC: monotonic, models.G_UPDATE: update}
QUALIFIES: dict[str, Callable] = {models.G_CURSOR: _is_cursor, models.G_MONOTONIC: _is_monotonic, models.G_UPDATE: _is_update}


# -- through a ww edge the graph lacks ---------------------------------------
# Two appends to a key that no read saw have no known order (`cycles.CycleSearch.
# _either_order`): each order adds a ww edge u -> v, labelled with the key and the
# micro-ops (u's last append to it, v's first), for each key both appended to unseen
# (in one order on all: edges each way would close a G0). `through` looks for a cycle
# of one of the three types that the edge closes, in u and v's top-level component.
# It runs only where some model forbidding the type is not violated yet, so the graph
# without the edge holds none of the type (its search of the graph is exact), nor a
# G0 or G1c (which every such model forbids); that is why each search below may take
# its first answer as one through the edge, and a simple cycle.

def through(ctx, name: str, u: int, v: int, facts: list, deadline: float) -> tuple[Cycle, str] | None:
    """A cycle of type `name` (one of `TYPES`) through the ww edge u -> v labelled
    `facts` (local nodes; the graph lacks the edge), beginning with that edge, and its
    detail sentence; None if there is none. Exact where the graph holds no cycle of
    the type and no G0 or G1c (the note above): a G-cursor or G-update search
    over (node, state) pairs, whose first walk back to u is then a simple cycle, and
    G-monotonic's own search (`monotonic`) over u and v's component with the edge
    added."""
    edge = (u, v, g.WW)
    with ctx.assuming(edge, facts):
        found = _THROUGH[name](ctx, u, v, facts, _clock(deadline), deadline)
    if found is None:
        return None
    cycle, detail = found
    nodes = [a for a, _, _ in cycle]
    if len(set(nodes)) != len(nodes) or edge not in cycle:
        return None  # not simple, or not through the edge: the note's premise failed
    at = cycle.index(edge)
    return cycle[at:] + cycle[:at], detail


def _walk_back(ctx, u: int, v: int, step: Callable, tick) -> Cycle | None:
    """The shortest walk from v back to u, over edges of u's component, that `step`
    allows: `step(state, from, to, kind)` is the next state or None, starting from
    state 0 at v, and a walk ends when it reaches u in a state `step` marks accepted
    (it returns (state, True)); with the edge u -> v in front, as a cycle."""
    oc = ctx.oc
    comp, c = oc.comp, oc.comp[u]
    start = (v, 0)
    prev: dict[tuple[int, int], tuple[tuple[int, int], int] | None] = {start: None}
    q = deque([start])
    while q:
        x = q.popleft()
        tick()
        w, state = x
        for y, k in oc.adj.out[w]:
            if comp[y] != c:
                continue
            got = step(state, w, y, k)
            if got is None or (y == u and not got[1]):
                continue  # a walk back to u ends there
            t = (y, got[0])
            if t in prev:
                continue
            prev[t] = (x, k)
            if y == u and got[1]:
                path = []
                while prev[t] is not None:
                    p, pk = prev[t]
                    path.append((p[0], t[0], pk))
                    t = p
                return [(u, v, g.WW), *path[::-1]]
            q.append(t)
    return None


def _cursor_through(ctx, u: int, v: int, facts: list, tick, deadline: float) -> tuple[Cycle, str] | None:
    """G-cursor(x), x one of the edge's keys: back from v to u over ww(x) edges and
    exactly one rw(x) edge (state: the rw edge taken)."""
    for x in dict.fromkeys(key for key, _, _ in facts):
        def step(used: int, a: int, b: int, k: int, x=x):
            if k == g.RW and not used:
                nxt = 1
            elif k == g.WW:
                nxt = used
            else:
                return None
            if not any(key == x for key, _, _ in ctx.edge_facts(a, b, k)):
                return None
            return nxt, b == u and nxt == 1

        cycle = _walk_back(ctx, u, v, step, tick)
        if cycle is not None:
            return cycle, f"Every edge is on key {x!r}."
    return None


def _update_through(ctx, u: int, v: int, facts: list, tick, deadline: float) -> tuple[Cycle, str] | None:
    """G-update: back from v to u over data edges with at least one rw, through at most
    one read-only transaction (u and v append, so they write). State: bit 1, an rw
    edge taken; bit 2, the read-only transaction passed."""
    upd = ctx.update()

    def step(state: int, a: int, b: int, k: int):
        if k not in g.DATA:
            return None
        if not upd[b]:
            if state & 2:
                return None
            state |= 2
        if k == g.RW:
            state |= 1
        return state, bool(state & 1)

    cycle = _walk_back(ctx, u, v, step, tick)
    return None if cycle is None else (cycle, _is_update(ctx, cycle))


def _monotonic_through(ctx, u: int, v: int, facts: list, tick, deadline: float) -> tuple[Cycle, str] | None:
    """G-monotonic: `monotonic`'s search over u and v's top-level component, the edge
    among its dependency edges."""
    oc = ctx.oc
    comp, c = oc.comp, oc.comp[u]
    into: dict[int, list[tuple[int, int]]] = {v: [(u, g.WW)]}
    sources: dict[int, list[int]] = {}
    for a in ctx.members(c):
        for b, k in oc.adj.out[a]:
            if comp[b] != c:
                continue
            if k == g.RW:
                sources.setdefault(a, []).append(b)
            elif k in (g.WW, g.WR):
                into.setdefault(b, []).append((a, k))
    found = _monotonic_search(ctx, into, sources, deadline)
    return found[0] if found else None


_THROUGH: dict[str, Callable] = {models.G_CURSOR: _cursor_through, models.G_MONOTONIC: _monotonic_through,
                                 models.G_UPDATE: _update_through}
