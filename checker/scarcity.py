"""Scarce producers: how many crashed ops a value needs, counted before searching.

Reduction 6 of the linearizability search (`linearizable.search`), for models
that say which state each op `needs` and which it `installs` (registers).

Why it is needed. A crashed (`info`) write may take effect at any instant after
its invoke, however late, so every crashed write of v is a token "make v
current, once, any time from now on". A database that serves stale reads
leaves behind reads that only such tokens can explain. On an invalid history
the search must then show that *no* way of spending the tokens works, and the
ways of spending them multiply: the memo keys differ by which crashed ops were
used, and on the benchmark's 1,000-op cas-register histories the search ran
through millions of configurations (12 million, 290 s, for one) before giving up.
Counting settles most of them at once.

The argument (a necessary condition, so pruning on it is exact). Say an ok op
r needs the register to hold u (a read of u, a cas from u), and an ok op w
with a known outcome other than u (a read of x, a write or cas leaving x,
x != u) completed before r was invoked. Then w precedes r in every
linearization, and something placed between them made u current from
another value: an op that installs u and is not read-only. If no ok op that
installs u can sit between them (each either completed before w was invoked
or was invoked after r completed), it must be a crashed op that installs u,
invoked before r completed. Call (w, r) a *demand* for u, spanning real time
from w's invoke to r's completion. Two demands whose spans do not overlap
(r1 completes before w2 is invoked) need two different crashed ops, as each
op is placed at most once. For a chain of such disjoint demands sorted by
completion, the k-th needs a k-th distinct token invoked before its r
completed (Hall's condition, the sets being nested): if fewer than k crashed
ops install u invoked before then, no linearization exists.

Choosing w as the latest-invoked op that qualifies makes the span shortest,
so fewest ok producers fit in it (any other choice is weaker). Choosing the
chain greedily by earliest completion gives, for every k, the earliest
possible k-th completion (the exchange argument of interval scheduling), so
it finds a shortage whenever any chain would.

During the search the same count applies to the future: at a configuration
whose first pending return is at position t, every op invoked after t is
unplaced, so the demands with w invoked after t still need tokens of their own,
from the crashed ops not yet placed. With s tokens of u already spent, the
k-th demand of the chain (from t) needs T(k) - s >= k, where T(k) counts
crashed ops installing u invoked before its completion; so s may grow to
`allowance(u, t)` = min over the chain of T(k) - k, and no further. The
allowance never shrinks as t grows (fewer demands remain), so checking it
when a token is spent is enough.

Repeated values are fine: nothing here assumes one write per value.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Any

INF = float("inf")


@dataclass
class Shortage:
    """A value u needed more often than crashed ops can supply it: `demands`
    are (w, r) index pairs into the calls, pairwise disjoint in real time,
    in order; `tokens` the indices of the crashed ops that install u and
    were invoked before the last r completed."""

    value: Any
    demands: list[tuple[int, int]]
    tokens: list[int]


@dataclass
class Scarcity:
    kind: list[int]  # per call: the kind (value) a crashed op supplies, or -1
    starts: list[list[int]]  # per kind: demand starts (w's invoke), ascending
    slack: list[list[float]]  # per kind: slack[i] = allowance of demands[i:]
    shortage: Shortage | None = None

    def allowance(self, kind: int, threshold: int) -> float:
        """How many tokens of `kind` may be spent while the first pending
        return is at `threshold`."""
        return self.slack[kind][bisect_right(self.starts[kind], threshold)]


def scarcity(calls: list, ret: list, need: list, post: list, makes: list,
             nothing: Any) -> Scarcity | None:
    """The demands of every value, from the search's tables: `calls` sorted by
    invoke; `ret[i]` (inf if crashed); `need[i]` the state an ok op is legal
    in; `post[i]` the state an ok op leaves (or `nothing`); `makes[i]` the
    state an op installs from another one (or `nothing`). None if no value
    is in demand."""
    n = len(calls)
    ok = [i for i in range(n) if ret[i] != INF]
    # Setters by completion, with the prefix's latest-invoked setter (b1) and
    # latest-invoked setter leaving another state than b1 (b2).
    setters = sorted((i for i in ok if post[i] is not nothing), key=lambda i: ret[i])
    set_ret = [ret[i] for i in setters]
    tops: list[tuple[int, int]] = []
    b1 = b2 = -1
    for i in setters:
        if b1 < 0 or calls[i].call > calls[b1].call:
            if b1 >= 0 and post[b1] != post[i]:
                b2 = b1
            b1 = i
        elif post[i] != post[b1] and (b2 < 0 or calls[i].call > calls[b2].call):
            b2 = i
        tops.append((b1, b2))
    demanders: dict[Any, list[int]] = {}
    for i in ok:
        if need[i] is not nothing:
            demanders.setdefault(need[i], []).append(i)
    producers: dict[Any, list[int]] = {}
    tokens: dict[Any, list[int]] = {}
    for i in range(n):  # in invoke order
        if makes[i] is not nothing and makes[i] in demanders:
            (producers if ret[i] != INF else tokens).setdefault(makes[i], []).append(i)

    kinds: list[Any] = []
    starts: list[list[int]] = []
    slacks: list[list[float]] = []
    shortage = None
    for u, rs in demanders.items():
        prods = producers.get(u, [])
        p_call = [calls[p].call for p in prods]
        p_maxret: list[float] = []
        m = -1.0
        for p in prods:
            m = max(m, ret[p])
            p_maxret.append(m)
        toks = tokens.get(u, [])
        t_call = [calls[t].call for t in toks]
        demands = []  # (start, end, w, r)
        for r in rs:
            k = bisect_left(set_ret, calls[r].call)
            if k == 0:
                continue
            w1, w2 = tops[k - 1]
            w = w1 if post[w1] != u else w2
            if w < 0:
                continue
            j = bisect_left(p_call, ret[r])
            if j and p_maxret[j - 1] > calls[w].call:
                continue  # an ok producer of u fits between w and r
            demands.append((calls[w].call, ret[r], w, r))
        if not demands:
            continue
        demands.sort()
        slack, chain = _allowances(demands, t_call)
        if chain and shortage is None:
            shortage = Shortage(u, chain, toks[:bisect_left(t_call, ret[chain[-1][1]])])
        kinds.append(u)
        starts.append([d[0] for d in demands])
        slacks.append(slack)
    if not kinds:
        return None
    kind_of = {u: k for k, u in enumerate(kinds)}
    kind = [kind_of.get(makes[i], -1) if ret[i] == INF and makes[i] is not nothing else -1
            for i in range(n)]
    return Scarcity(kind, starts, slacks, shortage)


def _allowances(demands: list[tuple], t_call: list[int]) -> tuple[list[float], list]:
    """For demands (start, end, w, r) sorted by start, and the invoke positions
    of the tokens (ascending): slack[i], the allowance of the demands
    demands[i:] (min over their greedy chain of T(k) - k); and, if slack[0] <
    0, the chain up to the first demand that lacks a token, as (w, r) pairs."""
    nd = len(demands)
    d_start = [d[0] for d in demands]
    first = [-1] * (nd + 1)  # first[i]: the demand completing first among demands[i:]
    for i in range(nd - 1, -1, -1):
        f = first[i + 1]
        first[i] = i if f < 0 or demands[i][1] < demands[f][1] else f
    follower = [first[bisect_right(d_start, d[1])] for d in demands]  # next in a chain
    chain_slack = [INF] * nd  # the allowance of the greedy chain from demand a
    for a in sorted(range(nd), key=lambda a: -demands[a][1]):
        b = follower[a]
        rest = INF if b < 0 else chain_slack[b]
        chain_slack[a] = min(bisect_left(t_call, demands[a][1]) - 1, rest - 1)
    slack = [INF if first[i] < 0 else chain_slack[first[i]] for i in range(nd + 1)]
    chain: list[tuple[int, int]] = []
    if slack[0] < 0:
        a = first[0]
        while a >= 0:
            chain.append((demands[a][2], demands[a][3]))
            if bisect_left(t_call, demands[a][1]) < len(chain):
                break
            a = follower[a]
    return slack, chain


def refuted(group: Any, call: Any, ret: Any, need: Any, post: Any, makes: Any,
            n_groups: int) -> Any:
    """Which registers (groups) have an ok op that needs a value no op can
    supply in time: numpy columns, one entry per op of every group (`call`,
    `ret` event positions, ret of a crashed op above every position; `need`,
    `post`, `makes` value ids as in `scarcity`, -1 for none). A boolean per
    group; True proves the group has no linearization, with no search.

    This is the first demand of `scarcity` with no token at all, for every
    register at once. Say an ok op r needs u, and w, among the ok ops with a
    known outcome that completed before r was invoked, is the one invoked
    last; and w left another value than u. w precedes r in every
    linearization, so something placed between them turned the register
    into u: an op p that installs u from another value (a write of u, a cas
    to u from another value; never a read, which changes nothing), placed
    after w and before r, so invoked before r completed and, unless it
    crashed, completed after w was invoked. If no op at all (ok or crashed,
    kept or not by any other reduction) is like that, there is no
    linearization. (Taking w invoked last makes the span shortest; when the
    last one left u itself, this test says nothing and the search decides.)
    """
    import numpy as np

    big = int(max(ret.max(initial=0), call.max(initial=0))) + 2
    refute = np.zeros(n_groups, np.bool_)
    demand = np.flatnonzero(need >= 0)
    setter = np.flatnonzero(post >= 0)
    if not len(demand) or not len(setter):
        return refute
    # w for each demand: among setters sorted by (group, ret), the prefix
    # maximum of call, just before r's invoke.
    setter = setter[np.lexsort((ret[setter], group[setter]))]
    by_ret = group[setter] * big + ret[setter]
    latest = np.maximum.accumulate(group[setter] * big + call[setter])
    j = np.searchsorted(by_ret, group[demand] * big + call[demand]) - 1
    jj = np.maximum(j, 0)
    w_call = latest[jj] - group[demand] * big
    has_w = (j >= 0) & (w_call >= 0)
    by_call = np.full(big, -1, np.int64)
    by_call[call] = np.arange(len(call))
    w = by_call[np.where(has_w, w_call, 0)]
    u = need[demand]
    has_w &= post[w] != u
    # Producers of (group, value), sorted by call: the latest return among
    # those invoked before r returned; r is supplied if it is after w's invoke.
    producer = np.flatnonzero(makes >= 0)
    supplied = np.zeros(len(demand), np.bool_)
    if len(producer):
        n_values = int(max(makes.max(), need.max())) + 1
        pairs, pair = np.unique(group[producer] * n_values + makes[producer],
                                return_inverse=True)  # (group, value), dense
        order = np.lexsort((call[producer], pair))
        producer, pair = producer[order], pair[order]
        reach = np.maximum.accumulate(pair * big + ret[producer])
        wanted = group[demand] * n_values + u
        want = np.minimum(np.searchsorted(pairs, wanted), len(pairs) - 1)
        k = np.searchsorted(pair * big + call[producer], want * big + ret[demand]) - 1
        last_ret = np.where((k >= 0) & (pairs[want] == wanted),
                            reach[np.maximum(k, 0)] - want * big, -1)
        supplied = last_ret > call[w]
    bad = has_w & ~supplied
    refute[group[demand[bad]]] = True
    return refute
