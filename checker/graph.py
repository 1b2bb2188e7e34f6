"""Graph core for cycle analysis: typed edges, strongly connected components,
real-time order, and shortest-cycle search.

Nodes are transactions 0..n-1. Edges are kept as numpy arrays per kind, so a
history of a million transactions costs a few arrays, and SCCs come from
scipy's Tarjan/Pearce implementation (`scipy.sparse.csgraph`).

Real-time order (T1 completed before T2 was invoked) has O(n^2) pairs. For
finding SCCs it is encoded in linear size with a chain of *barrier* nodes,
one per completion in time order: T -> barrier(T's completion), barrier_i ->
barrier_i+1, and barrier(last completion strictly before T's invoke) -> T.
Then T1 reaches T2 through barriers iff T1 completed before T2 began, so the
SCCs over transactions are exactly those of the explicit relation. Inside an
SCC, where cycles are searched and explained, explicit edges are built with
Elle's frontier algorithm (the transitive reduction of real-time order).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

# Edge kinds, as small ints so edge arrays stay numeric.
WW, WR, RW, PROCESS, REALTIME = 0, 1, 2, 3, 4
KIND_NAMES = ("ww", "wr", "rw", "process", "realtime")
DATA = (WW, WR, RW)

INF_TIME = np.iinfo(np.int64).max


def as_array(xs: Iterable[int] | np.ndarray) -> np.ndarray:
    return np.asarray(xs if isinstance(xs, np.ndarray) else list(xs), dtype=np.int64)


def scc_labels(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Component label of each node and the size of each component."""
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    g = csr_matrix((np.ones(len(src), dtype=np.int8), (src, dst)), shape=(n, n))
    _, labels = connected_components(g, directed=True, connection="strong")
    sizes = np.bincount(labels)
    return labels, sizes


def in_cycles(n: int, src: np.ndarray, dst: np.ndarray, real: int | None = None) -> np.ndarray:
    """Boolean mask of the first `real` nodes (default all) that lie on some cycle."""
    labels, sizes = scc_labels(n, src, dst)
    real = n if real is None else real
    return sizes[labels[:real]] > 1


def barrier_realtime(invoke: np.ndarray, complete: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Linear-size encoding of real-time order over n transactions.

    `complete[i]` is INF_TIME when i never completed (info): nothing follows it.
    Returns (src, dst, number of barrier nodes); barrier nodes are numbered
    n, n+1, ... after the transactions.
    """
    n = len(invoke)
    done = np.flatnonzero(complete != INF_TIME)
    order = done[np.argsort(complete[done], kind="stable")]
    m = len(order)
    if m == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    times = complete[order]
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(m)
    # T -> its completion barrier
    s1, d1 = order, n + np.arange(m)
    # barrier chain
    s2, d2 = n + np.arange(m - 1), n + np.arange(1, m)
    # last barrier strictly before T's invoke -> T
    attach = np.searchsorted(times, invoke, side="left") - 1
    has = np.flatnonzero(attach >= 0)
    s3, d3 = n + attach[has], has
    return np.concatenate([s1, s2, s3]), np.concatenate([d1, d2, d3]), m


def realtime_pairs(ids: list[int], invoke: list[int], complete: list[int]) -> tuple[list[int], list[int]]:
    """Explicit real-time edges among `ids`, transitively reduced (Elle's frontier).

    Walk invocations and completions in time order; a completed transaction
    joins the frontier, and leaves it once something that began after it
    completes. Each invocation gets an edge from every frontier member.
    `invoke`/`complete` are indexed by position in `ids`; INF_TIME = never.
    """
    events = []
    for i in range(len(ids)):
        events.append((invoke[i], 0, i))  # at equal times invokes sort first: no order
        if complete[i] != INF_TIME:
            events.append((complete[i], 1, i))
    events.sort()
    frontier: set[int] = set()
    preds: dict[int, frozenset[int]] = {}
    src: list[int] = []
    dst: list[int] = []
    for _, kind, i in events:
        if kind == 0:
            preds[i] = frozenset(frontier)
            for a in frontier:
                src.append(ids[a])
                dst.append(ids[i])
        else:
            frontier -= preds.pop(i)
            frontier.add(i)
    return src, dst


class Adjacency:
    """Out-edges of a small graph as Python lists, for breadth-first search."""

    __slots__ = ("out",)

    def __init__(self, n: int, src, dst, kind):
        self.out: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        for s, d, k in zip(src, dst, kind, strict=True):
            self.out[s].append((d, k))


def bfs_path(adj: Adjacency, start: int, goal: int, allowed: frozenset[int],
             budget: list[int]) -> list[tuple[int, int, int]] | None:
    """Shortest path start -> goal over edges of allowed kinds, as (u, v, kind).

    `budget` is a one-element list of node visits left, shared across calls so
    a whole search stays bounded; returns None when exhausted or unreachable.
    """
    if start == goal:
        return []
    prev: dict[int, tuple[int, int]] = {start: (-1, -1)}
    q = deque([start])
    out = adj.out
    while q:
        u = q.popleft()
        budget[0] -= 1
        if budget[0] < 0:
            return None
        for v, k in out[u]:
            if k in allowed and v not in prev:
                prev[v] = (u, k)
                if v == goal:
                    path = []
                    while v != start:
                        p, pk = prev[v]
                        path.append((p, v, pk))
                        v = p
                    path.reverse()
                    return path
                q.append(v)
    return None


def bfs_nonadjacent(adj: Adjacency, start_edge: tuple[int, int], allowed: frozenset[int],
                    budget: list[int]) -> list[tuple[int, int, int]] | None:
    """A closed walk through the rw edge start_edge = (a, b) with no two rw
    edges in a row and at least one more rw edge (Cerone & Gotsman's SI
    condition): BFS over states (node, last edge was rw, saw another rw)."""
    a, b = start_edge
    start = (b, True, False)
    goal = (a, False, True)
    prev: dict[tuple, tuple] = {start: None}
    q = deque([start])
    out = adj.out
    while q:
        st = q.popleft()
        budget[0] -= 1
        if budget[0] < 0:
            return None
        u, last_rw, seen = st
        for v, k in out[u]:
            if k not in allowed:
                continue
            if k == RW:
                if last_rw:
                    continue
                nxt = (v, True, True)
            else:
                nxt = (v, False, seen)
            if nxt in prev:
                continue
            prev[nxt] = (st, k)
            if nxt == goal:
                path = []
                s = nxt
                while s != start:
                    p, pk = prev[s]
                    path.append((p[0], s[0], pk))
                    s = p
                path.reverse()
                return [(a, b, RW)] + path
            q.append(nxt)
    return None
