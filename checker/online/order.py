"""Incremental cycle detection: a topological order kept as edges arrive.

Pearce & Kelly, "A dynamic topological sort algorithm for directed acyclic
graphs" (JEA 2006). Every node has a position `ord`; the invariant is that
every edge goes from a lower position to a higher one. An edge x -> y that
already agrees with the order (ord[x] < ord[y]) costs O(1): that is almost
every edge of a history whose database behaves, since nodes get their
position when they are added, in completion order, and dependencies mostly
point forward in time. An edge against the order searches only the
*affected region*, the nodes whose positions lie between ord[y] and ord[x]:

- forward from y, through nodes positioned at most ord[x]: reaching x means
  the edge closes a cycle, which the search's parent links spell out
  (y ~> x, then x -> y);
- otherwise backward from x, through nodes positioned at least ord[y], and
  the two sets found are given the same positions again, the backward set
  first, so the invariant holds with the new edge.

A cycle-closing edge is *not* added: the graph stays acyclic, so the
invariant holds and the next edge is judged against a true topological
order. Cycles that would need that edge are not found online; the final pass
(the offline checker on the whole history) finds them (see
`sleuth.checker.online`).

The cost of an edge against the order is the size of the affected region,
which for a history is roughly the transactions concurrent with the edge's
ends: small for a database that keeps up, and never the whole graph unless
an edge reaches far back in time.
"""

from __future__ import annotations

from typing import Any


class Order:
    """A DAG under edge insertion: `add` returns None, or the cycle the edge would close
    as [(a, b, kind), ...] (the path y ~> x found, then the edge x -> y itself)."""

    __slots__ = ("ord", "out", "into", "_next")

    def __init__(self) -> None:
        self.ord: dict[Any, int] = {}
        self.out: dict[Any, list] = {}  # node -> [(successor, kind), ...]
        self.into: dict[Any, list] = {}  # node -> [predecessor, ...]
        self._next = 0

    def node(self, n: Any) -> None:
        """Add `n` (if new) at the end of the order."""
        if n not in self.ord:
            self.ord[n] = self._next
            self._next += 1
            self.out[n] = []
            self.into[n] = []

    def __contains__(self, n: Any) -> bool:
        return n in self.ord

    def __len__(self) -> int:
        return len(self.ord)

    def edges(self) -> int:
        return sum(map(len, self.out.values()))

    def add(self, x: Any, y: Any, kind: int) -> list[tuple[Any, Any, int]] | None:
        """Add the edge x -> y (both nodes already added; a self-loop is ignored).
        None if the graph stays acyclic, else the cycle it would close (not added)."""
        if x == y:
            return None
        ord_ = self.ord
        ub, lb = ord_[x], ord_[y]
        if ub < lb:
            self.out[x].append((y, kind))
            self.into[y].append(x)
            return None
        out = self.out
        parent: dict[Any, tuple[Any, int] | None] = {y: None}
        stack = [y]
        forward = []
        while stack:
            n = stack.pop()
            forward.append(n)
            for m, k in out[n]:
                if m == x:
                    parent[x] = (n, k)
                    return _spell(parent, x, y, kind)
                if m not in parent and ord_[m] < ub:
                    parent[m] = (n, k)
                    stack.append(m)
        into = self.into
        seen = {x}
        stack = [x]
        backward = []
        while stack:
            n = stack.pop()
            backward.append(n)
            for m in into[n]:
                if m not in seen and ord_[m] > lb:
                    seen.add(m)
                    stack.append(m)
        backward.sort(key=ord_.__getitem__)
        forward.sort(key=ord_.__getitem__)
        moved = backward + forward
        slots = sorted(ord_[n] for n in moved)
        for n, s in zip(moved, slots, strict=True):
            ord_[n] = s
        out[x].append((y, kind))
        into[y].append(x)
        return None

    def forget(self, n: Any) -> None:
        """Drop node `n` and its edges (the caller's rule says no cycle can pass through it)."""
        del self.ord[n]
        for m, _ in self.out.pop(n):
            preds = self.into.get(m)
            if preds is not None:
                preds.remove(n)
        for m in self.into.pop(n):
            succs = self.out.get(m)
            if succs is not None:
                self.out[m] = [(s, k) for s, k in succs if s != n]


    def forget_all(self, nodes: list) -> None:
        """Drop every node of `nodes` and their edges, at once: each kept neighbour's lists
        are filtered once, not once per edge (the sweep of a batch)."""
        ord_, out, into = self.ord, self.out, self.into
        for n in nodes:
            del ord_[n]
        succ, pred = set(), set()
        for n in nodes:
            succ.update(m for m, _ in out.pop(n))
            pred.update(into.pop(n))
        for m in succ:
            if m in ord_:
                into[m] = [p for p in into[m] if p in ord_]
        for m in pred:
            if m in ord_:
                out[m] = [(s, k) for s, k in out[m] if s in ord_]


def _spell(parent: dict, x: Any, y: Any, kind: int) -> list[tuple[Any, Any, int]]:
    path = []
    n = x
    while n != y:
        p, k = parent[n]
        path.append((p, n, k))
        n = p
    path.reverse()
    path.append((x, y, kind))
    return path
