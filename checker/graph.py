"""Graph core for cycle analysis: typed edges, strongly connected components,
real-time order, and shortest-cycle search confined to one component.

Nodes are transactions 0..n-1. Edges are kept as numpy arrays per kind, so a
history of a million transactions costs a few arrays, and SCCs come from
scipy's Tarjan/Pearce implementation (`scipy.sparse.csgraph`), or for small
graphs from Tarjan's algorithm here. A guess at a topological order (from
invocation times) first sets aside, with numpy, the part of the graph that
cannot hold a cycle, so a mostly acyclic history's search is a small one.

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

import sys
import time
from collections.abc import Callable

import numpy as np

# Edge kinds, as small ints so edge arrays stay numeric.
WW, WR, RW, PROCESS, REALTIME = 0, 1, 2, 3, 4
KIND_NAMES = ("ww", "wr", "rw", "process", "realtime")
DATA = (WW, WR, RW)

INF_TIME = np.iinfo(np.int64).max


SMALL_GRAPH = 100_000  # nodes + edges up to which SCCs are found in Python (there as fast
# as importing scipy, 0.2 s here), without scipy, unless scipy is imported already


def scc_labels(n: int, src: np.ndarray, dst: np.ndarray,
               key: np.ndarray | Callable[[], np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Component label of each node and the size of each component.

    Only the part of the graph that may hold cycles is searched, by
    `_labels`; every other node is a component of its own. That part is
    what `trimmed` leaves, after, with `key` (a guess at a topological
    order: see `cyclic_edges`), what `cyclic_edges` leaves. Then the search
    of a large history whose dependencies are mostly acyclic is a search of
    a small graph, and needs no scipy; and a cycle type's graph, which keeps
    some of the on-cycle edges, is a search of the nodes still on one (at
    100,000 snapshot-isolation transactions, Tarjan in Python over the
    types' graphs took 0.05 s, and takes 0.03 s). Neither is done up to
    TRIM_MIN nodes and edges (Tarjan in Python is quicker than numpy's calls
    on a small graph: a call of `sleuth check` on 1,000 histories of 50
    transactions took 25% longer with the key), the key is not used up to
    KEY_MIN, and neither once scipy is imported, nor above KEY_LIMIT: scipy's
    traversal of the whole graph is then the quicker (at a million
    serializable transactions, 7.4M edges, 0.48 s with its import against
    0.8 s for `cyclic_edges`' passes, whose gathers miss the cache). `key`
    may be a function that computes it, called only when it is used.
    """
    if scipy_loaded() or not TRIM_MIN < n + len(src) <= KEY_LIMIT:
        labels = _labels(n, src, dst)
        return labels, np.bincount(labels)
    s, d = src, dst
    if key is not None and n + len(src) > KEY_MIN:
        s, d = cyclic_edges(key() if callable(key) else key, s, d)
    s, d = trimmed(n, s, d)
    kept = np.zeros(n, dtype=bool)
    kept[s] = True
    kept[d] = True
    nodes = np.flatnonzero(kept)
    local = np.cumsum(kept) - 1  # node -> its index in `nodes`
    alone = n - len(nodes)
    labels = np.empty(n, dtype=np.int64)
    labels[~kept] = np.arange(alone)
    labels[nodes] = alone + _labels(len(nodes), local[s], local[d])
    return labels, np.bincount(labels)


def scipy_loaded() -> bool:
    return "scipy.sparse.csgraph" in sys.modules


def _labels(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Strongly connected component labels, by scipy or by `_tarjan`.

    Large graphs go to scipy's Tarjan/Pearce implementation; small ones to
    `_tarjan`, so a check of a small history never imports scipy (a fifth
    of a second on this machine, most of a small check's time). Once scipy
    is imported every graph goes to it: the per-spec SCCs of a large
    history's on-cycle part are often under SMALL_GRAPH, and each took
    15-20 ms in Python against 1-3 ms in scipy (0.17 s of 2.0 at 100,000
    read-committed transactions). Labels differ between the two; the
    components are the same (tests/test_graph.py), and no caller depends on
    the label values, only on which nodes share one.
    """
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if n + len(src) <= SMALL_GRAPH and not scipy_loaded():
        return np.asarray(_tarjan(n, src.tolist(), dst.tolist()), dtype=np.int64)
    return strong_labels(adjacency(n, src, dst)).astype(np.int64, copy=False)


TRIM_MIN = 2_000  # nodes + edges up to which scc_labels neither trims nor uses a key
TRIM_ROUNDS = 16  # at most this many rounds of `trimmed`
KEY_MIN = 20_000  # nodes + edges up to which scc_labels ignores a key
KEY_LIMIT = 3_000_000  # nodes + edges above which scc_labels ignores a key
KEY_ROUNDS = 64  # at most this many rounds of `cyclic_edges`' relaxation
KEY_ROOM = 64  # keys from positions are spaced this far apart, room for the relaxation


def cyclic_edges(key: np.ndarray, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The edges that may lie on a cycle: a subset of (src, dst) holding
    every cycle of the graph, found with numpy by a guess at a topological
    order, `key` (a number per node; any numbers are correct, good ones
    leave little).

    Proof. Call an edge u -> v *backward* when key[v] <= key[u], and give it
    the interval [key[v], key[u]]. Merge intervals that overlap or touch
    into groups. Every cycle lies inside one group, with all its edges: let
    its nodes' keys be k1 < ... < km. Going once round the cycle crosses
    each gap (k_j, k_j+1) downward at least once, and only a backward edge
    goes down, from a key >= k_j+1 to one <= k_j, so its interval covers
    the gap; the cycle's backward intervals cover [k1, km] without a hole,
    and so fall in one group (m = 1: all its edges are backward, with the
    same point as interval). So the edges with both ends in one group hold
    every cycle, and the graph they form is again a graph whose cycles are
    the original's: the step repeats on it, with any new keys.

    Keys start as `key` and are relaxed between steps: the head of each
    remaining backward edge is raised above its tail (`key[v] = key[u] + 1`),
    which on an acyclic part settles into a topological order and leaves no
    edge. It stops when no edge is left, after a round (not the first) that
    took away less than a tenth, or after KEY_ROUNDS rounds. On the sims'
    100,000-transaction histories (in invoke order, keys from positions) it
    leaves 0 of 737,000 edges when serializable, 18,000 under snapshot
    isolation.
    """
    # a copy, relaxed in place; int32 when it fits, for gathers that touch half the memory
    # (the relaxation raises the largest key by at most one a round)
    fits = len(key) and key.min() >= -2**31 and key.max() < 2**31 - KEY_ROUNDS
    k = key.astype(np.int32 if fits else np.int64)
    s, d = src, dst
    left = [len(s)]
    for _ in range(KEY_ROUNDS):
        ks, kd = k[s], k[d]
        back = np.flatnonzero(kd <= ks)
        if not len(back):
            return s[:0], d[:0]
        lo, hi = kd[back], ks[back]
        by = np.argsort(lo, kind="stable")
        lo, hi = lo[by], np.maximum.accumulate(hi[by])  # hi: the reach of intervals so far
        first = np.flatnonzero(np.concatenate([[True], lo[1:] > hi[:-1]]))
        group_lo, group_hi = lo[first], hi[np.append(first[1:], len(lo)) - 1]
        group = (np.searchsorted(group_lo, k, side="right") - 1).astype(np.int32)  # -1: before the first
        group[(group < 0) | (k > group_hi[group])] = -1
        gs = group[s]
        keep = (gs >= 0) & (gs == group[d])
        up = keep[back]
        np.maximum.at(k, d[back[up]], ks[back[up]] + 1)
        s, d = s[keep], d[keep]
        left.append(len(s))
        if len(left) > 2 and left[-1] > 0.9 * left[-2]:
            break
    return s, d


def trimmed(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The edges left once nodes with no in-edge or no out-edge are taken away,
    repeatedly: such a node lies on no cycle, and neither does an edge to or from
    it, so what is left holds every cycle. Stops when a round takes nothing
    away, after a round (not the first) that took away less than a tenth, or
    after TRIM_ROUNDS rounds; any stop is correct."""
    s, d = src, dst
    for i in range(TRIM_ROUNDS):
        has_out = np.zeros(n, dtype=bool)
        has_out[s] = True
        has_in = np.zeros(n, dtype=bool)
        has_in[d] = True
        both = has_out & has_in
        keep = both[s] & both[d]
        left = int(np.count_nonzero(keep))
        if left == len(s):
            break
        done = i and left > 0.9 * len(s)
        s, d = s[keep], d[keep]
        if done:
            break
    return s, d


def adjacency(n: int, src: np.ndarray, dst: np.ndarray):
    """The graph as a scipy CSR matrix of int8 ones (a byte an edge beside its int32 index)."""
    from scipy.sparse import csr_matrix

    return csr_matrix((np.ones(len(src), dtype=np.int8), (src, dst)), shape=(n, n))


def strong_labels(matrix) -> np.ndarray:
    """scipy's strongly connected component label of each node of an `adjacency` matrix.

    `connected_components` first converts the matrix's values to float64, a copy of 8 bytes
    an edge (the `--spark` driver's peak at 10M transactions), though the traversal reads
    only the structure. So the values become a read-only float64 view of a single 1.0 (no
    bytes per edge), which that conversion passes through without copying."""
    from scipy.sparse.csgraph import connected_components

    matrix.data = np.broadcast_to(np.float64(1.0), matrix.data.shape)
    return connected_components(matrix, directed=True, connection="strong")[1]


def _tarjan(n: int, src: list[int], dst: list[int]) -> list[int]:
    """Strongly connected components (Tarjan 1972), iteratively: a component
    label 0..c-1 for each node."""
    out: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(src, dst, strict=True):
        out[a].append(b)
    index = [-1] * n  # discovery order
    low = [0] * n
    label = [-1] * n
    stack: list[int] = []
    count = 0
    components = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        index[root] = low[root] = count
        count += 1
        stack.append(root)
        work = [(root, iter(out[root]))]
        while work:
            v, it = work[-1]
            for w in it:
                if index[w] < 0:
                    index[w] = low[w] = count
                    count += 1
                    stack.append(w)
                    work.append((w, iter(out[w])))
                    break
                if label[w] < 0 and index[w] < low[v]:  # w on the stack
                    low[v] = index[w]
            else:
                work.pop()
                if work and low[v] < low[work[-1][0]]:
                    low[work[-1][0]] = low[v]
                if low[v] == index[v]:
                    while True:
                        w = stack.pop()
                        label[w] = components
                        if w == v:
                            break
                    components += 1
    return label


def barrier_realtime(invoke: np.ndarray, complete: np.ndarray,
                     dtype: type = np.int64) -> tuple[np.ndarray, np.ndarray, int]:
    """Linear-size encoding of real-time order over n transactions.

    `complete[i]` is INF_TIME when i never completed (info): nothing follows it.
    Returns (src, dst, number of barrier nodes); barrier nodes are numbered
    n, n+1, ... after the transactions, as `dtype` (int32 halves the memory of
    a huge graph: sleuth/spark/history_check.py).
    """
    n = len(invoke)
    done = np.flatnonzero(complete != INF_TIME)
    order = done[np.argsort(complete[done], kind="stable")].astype(dtype)
    del done
    m = len(order)
    if m == 0:
        return np.zeros(0, dtype), np.zeros(0, dtype), 0
    # last barrier strictly before T's invoke -> T
    attach = (np.searchsorted(complete[order], invoke, side="left") - 1).astype(dtype)
    has = np.flatnonzero(attach >= 0).astype(dtype)
    chain = np.arange(n, n + m, dtype=dtype)
    # T -> its completion barrier; the barrier chain; the attachments
    src = np.concatenate([order, chain[:-1], n + attach[has]])
    del attach
    dst = np.concatenate([chain, chain[1:], has])
    return src, dst, m


def realtime_key(invoke: np.ndarray, complete: np.ndarray) -> np.ndarray:
    """A guess at a topological order of `barrier_realtime`'s graph, as
    `scc_labels`' key: a transaction at its invocation, a barrier at its
    completion, times KEY_ROOM to leave room between them for the relaxation
    of `cyclic_edges`. Every real-time and process edge goes forward in it (a
    barrier's completion is before what it precedes began), and so does a
    data edge to a transaction invoked later."""
    return np.concatenate([invoke, np.sort(complete[complete != INF_TIME])]) * KEY_ROOM


def realtime_reduction(group: np.ndarray, invoke: np.ndarray,
                       complete: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Explicit real-time edges within each group of transactions, transitively
    reduced: the edges of Elle's frontier walk, for every group at once.

    Transactions are given by position: their `group`, `invoke` and
    `complete` (INF_TIME: never). Returns (from, to) positions, every edge
    inside one group, in the order the walk meets them: by group, then by
    the invocation of `to`, then by `from` (the walk's own order among the
    members of its frontier was a set's).

    Elle walks invocations and completions in time order: a completed
    transaction joins the frontier and leaves it once something that began
    after it completes; each invocation gets an edge from every member. So a
    -> b is an edge iff a completed before b began and no c began after a
    completed and completed before b began: exactly the real-time pairs
    with nothing between them, the transitive reduction. With L(a) the
    earliest completion of a transaction invoked after a completed, b's
    invocation must lie in (complete[a], L(a)]: one range of the group's
    transactions sorted by invocation, found by binary search (an invocation
    at a completion's time sorts first, as in the walk: it does not see it).
    """
    n = len(group)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    # times as ranks (equal times, equal ranks: duplicates in `ranks` do no harm, and
    # np.unique costs more than the sort), and (group, rank) as one int64 with room for
    # "never" in each group
    done = complete != INF_TIME
    ranks = np.sort(np.concatenate([invoke, complete[done]]))
    width = len(ranks) + 1
    base = group.astype(np.int64) * width
    inv = base + np.searchsorted(ranks, invoke)
    cpl = base + np.where(done, np.searchsorted(ranks, complete), width - 1)
    order = np.argsort(inv, kind="stable")
    by_inv = inv[order]
    # the earliest completion among transactions invoked from each sorted position on
    # (values of later groups exceed every value of this one), and past the last, none
    later = np.append(np.minimum.accumulate(cpl[order][::-1])[::-1], INF_TIME)
    lo = np.searchsorted(by_inv, cpl, side="right")  # a "never" completion: past its group
    first = np.minimum(later[lo], base + width - 1)  # at most past every invocation of the group
    hi = np.searchsorted(by_inv, first, side="right")
    counts = np.maximum(hi - lo, 0)
    src = np.repeat(np.arange(n), counts)
    starts = np.repeat(lo - (np.cumsum(counts) - counts), counts)
    dst = order[np.arange(len(src)) + starts]
    walk = np.lexsort((src, dst, inv[dst]))  # inv: group first, then time
    return src[walk], dst[walk]


class Adjacency:
    """Out-edges of a small graph as Python lists, for breadth-first search:
    each node's (to, kind) pairs in the order the edges are given."""

    __slots__ = ("out",)

    def __init__(self, n: int, src, dst, kind):
        # grouped by source with numpy (a stable sort keeps each node's order), then one
        # slice per node: a million appends cost three times as much
        src = np.asarray(src, dtype=np.int64)
        by = np.argsort(src, kind="stable")
        pairs = list(zip(np.asarray(dst)[by].tolist(), np.asarray(kind)[by].tolist(), strict=True))
        bounds = np.searchsorted(src[by], np.arange(n + 1)).tolist()
        self.out: list[list[tuple[int, int]]] = [pairs[bounds[i]:bounds[i + 1]] for i in range(n)]


class SearchTimeout(Exception):
    """A cycle search ran past its deadline (Elle's `:cycle-search-timeout`)."""


CHECK_EVERY = 4096  # states popped between two looks at the clock


class Automaton:
    """A small deterministic automaton over edge kinds, compiled to a table.

    Elle states each cycle anomaly as a spec (which edge kinds a cycle may use,
    which must appear once, several times, never adjacent...) and checks a
    path's edges against it. Here a spec is a step function over a small
    state tuple, enumerated once into `table[state][kind]` (-1: the edge may
    not be taken from this state) and `accepting[state]`, so a breadth-first
    search over (node, state) pairs finds the shortest closed walk that
    satisfies the spec, in time linear in (nodes x states). State 0 is the
    start, before any edge.
    """

    __slots__ = ("table", "accepting", "states")

    def __init__(self, start: tuple, step, accept):
        index = {start: 0}
        states = [start]
        table: list[list[int]] = []
        i = 0
        while i < len(states):
            row = []
            for k in range(len(KIND_NAMES)):
                t = step(states[i], k)
                if t is None:
                    row.append(-1)
                    continue
                if t not in index:
                    index[t] = len(states)
                    states.append(t)
                row.append(index[t])
            table.append(row)
            i += 1
        self.table = table
        self.accepting = [bool(accept(s)) for s in states]
        self.states = len(states)


def any_cycle(kinds: frozenset[int]) -> Automaton:
    """The automaton that accepts every walk over `kinds`."""
    return Automaton((), lambda s, k: () if k in kinds else None, lambda s: True)


def bfs_cycle(adj: Adjacency, edge: tuple[int, int, int], auto: Automaton, label: list[int],
              deadline: float) -> list[tuple[int, int, int]] | None:
    """The shortest closed walk that begins with `edge` = (a, b, kind), stays
    among nodes whose `label` equals a's (one strongly connected component:
    a cycle cannot leave the component it started in, so nothing outside is
    worth a visit), and that `auto` accepts; as (u, v, kind) steps, or None.

    Raises SearchTimeout once time.perf_counter() passes `deadline`.
    """
    a, b, k0 = edge
    table, acc, n_states = auto.table, auto.accepting, auto.states
    s0 = table[0][k0]
    lab = label[a]
    if s0 < 0 or label[b] != lab:
        return None
    start = b * n_states + s0
    # state -> the state it was reached from and the edge kind, packed as
    # from * 8 + kind (kinds are below 8): no tuple per state
    prev: dict[int, int] = {start: -1}
    out = adj.out
    pops = 0
    level = [start]
    # level by level, each in the order it was reached: the order of a FIFO
    # queue, without a deque's per-state cost
    while level:
        following: list[int] = []
        for i in range(0, len(level), CHECK_EVERY):
            chunk = level[i:i + CHECK_EVERY] if len(level) > CHECK_EVERY else level
            if (pops + len(chunk)) // CHECK_EVERY > pops // CHECK_EVERY and time.perf_counter() > deadline:
                raise SearchTimeout  # a look at the clock each time CHECK_EVERY more states are popped
            pops += len(chunk)
            for x in chunk:
                u, s = divmod(x, n_states)
                row = table[s]
                for v, k in out[u]:
                    t = row[k]
                    if t < 0 or label[v] != lab:
                        continue
                    y = v * n_states + t
                    if y in prev:
                        continue
                    prev[y] = x * 8 + k
                    if v == a and acc[t]:
                        path = []
                        while y != start:
                            p, pk = divmod(prev[y], 8)
                            path.append((p // n_states, y // n_states, pk))
                            y = p
                        path.reverse()
                        return [(a, b, k0), *path]
                    following.append(y)
        level = following
    return None


def simple_cycle(walk: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """The simple cycle through walk[0] left when the closed walk's loops are
    erased (chronological loop erasure; it ends the first time the walk comes
    back to its first node). A breadth-first search over (node, state) pairs
    may return a walk that passes a node twice (e.g. around a G-single cycle
    twice, which has two non-adjacent rw edges); Adya's anomalies are simple
    cycles, so the walk is cut down to one and named by the edges it keeps."""
    start = walk[0][0]
    path: list[tuple[int, int, int]] = []
    at: dict[int, int] = {start: 0}  # node -> its position in the path
    for u, v, k in walk:
        path.append((u, v, k))
        if v == start:
            return path
        if v in at:
            del path[at[v]:]
            for x in list(at):
                if at[x] > len(path):
                    del at[x]
        at[v] = len(path)
    return path
