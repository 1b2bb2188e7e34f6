"""Edge labels: which key, and which micro-ops, make each dependency edge.

Adya's labelled DSG names the object x of every edge (G-cursor(x) needs all
edges of a cycle on one x), and his unfolded serialization graph USG(Ti)
splits Ti into its operations (G-monotonic needs to know which read an
anti-dependency leaves and which operation a dependency enters). The
dependency graph keeps only (from, to, kind); these classes recover, for an
edge the graph holds, every reason it holds: a list of (key, position in the
source transaction, position in the target transaction), positions being
indices into the transaction's micro-ops.

Each reason restates, for one key, the rule the datatype module used to add
the edge (`list_append.Analysis._edges`, `rw_register.Analysis._edges`), so
a label is exactly as certain as the edge it labels. They are computed only
for the edges the searches of `checker.adya` ask about (edges inside
strongly connected components), and cached per transaction.
"""

from __future__ import annotations

from typing import Any

from sleuth.checker import graph as g
from sleuth.checker.adya import NEVER
from sleuth.checker.list_append import external_part
from sleuth.checker.txn import op_index

Fact = tuple[Any, int, int]  # (key, position in the source txn, position in the target txn)


class ListAppendLabels:
    """Labels of a `list_append.Analysis`'s edges (its module docstring has the rules)."""

    def __init__(self, an):
        self.an = an
        # node -> (appends by key as [(pos, value)], reads as (pos, key, external part),
        # (keys read, keys appended), bounds): one pass over its micro-ops, made once
        self._txn: dict[int, tuple[dict, list, tuple[set, set], tuple[int, int, int]]] = {}
        self._pos: dict[Any, dict[Any, int]] = {}

    def _ops(self, node: int) -> tuple:
        """(appends by key as [(pos, value)], reads as (pos, key, external part), `key_sets`,
        `bounds`), in one pass over the micro-ops. A read's external part is the list
        read minus the transaction's own appends to the key before it
        (`list_append.external_part`); a read that does not end with them (internal) is
        left out, as `external_reads` says."""
        got = self._txn.get(node)
        if got is None:
            op = self.an.graph.txns[node]
            ok = op.type == "ok"
            order = self.an.order
            appends: dict[Any, list] = {}
            reads = []
            first = NEVER
            for p, (f, k, v) in enumerate(op.value if ok else op.invoke_value):
                if f == "append":
                    mine = appends.get(k)
                    if mine is None:
                        appends[k] = [(p, v)]
                        if first == NEVER:
                            first = p
                    else:
                        mine.append((p, v))
                elif ok and k in order:
                    r = v or []
                    mine = appends.get(k)
                    if mine is not None:  # after its own appends: those end the read, or it is internal
                        r = external_part(r, [w for _, w in mine])
                        if r is None:
                            continue
                    reads.append((p, k, r))
            got = self._txn[node] = (appends, reads, ({k for _, k, _ in reads}, set(appends)),
                                     (first, reads[0][0] if reads else NEVER, reads[-1][0] if reads else -1))
        return got

    def key_sets(self, node: int) -> tuple[set, set]:
        """(keys of the reads an rw edge can leave, keys appended): every
        fact (key, ...) of an edge a -> b has its key among a's second set
        for ww, a's first for rw, and among b's second for ww and rw."""
        return self._ops(node)[2]

    def overwrites(self, node: int) -> bool:
        """Does the transaction read a key and append to it too (only such a
        transaction can leave a G-cursor cycle by its rw edge)?"""
        reads, appends = self._ops(node)[2]
        return not reads.isdisjoint(appends)

    def assumed(self, a: int, b: int, k) -> Fact:
        """The label of a ww edge a -> b on key k that no read gives, both transactions'
        appends to k unseen (`cycles.CycleSearch._either_order` tries both orders): from
        a's last append to k to b's first."""
        return k, self._ops(a)[0][k][-1][0], self._ops(b)[0][k][0][0]

    def bounds(self, node: int) -> tuple[int, int, int]:
        """(first append, first read, last read) position among the micro-ops
        `__call__` can name in the transaction (`NEVER` for first, -1 for last,
        when there is none): a ww edge enters it at an append, a wr edge at a
        read, an rw edge leaves it from a read."""
        return self._ops(node)[3]

    def _index(self, k, v) -> int | None:
        pos = self._pos.get(k)
        if pos is None:
            pos = self._pos[k] = {x: i for i, x in enumerate(self.an.order.get(k, ()))}
        return pos.get(v)

    def __call__(self, a: int, b: int, kind: int) -> list[Fact]:
        an = self.an
        out: list[Fact] = []
        ops_a, ops_b = self._ops(a), self._ops(b)
        if kind == g.WW:
            appends_b = ops_b[0]
            for k, mine in ops_a[0].items():
                theirs = appends_b.get(k)
                if not theirs:
                    continue
                n = len(an.order.get(k, ()))
                for pa, v in mine:
                    iv = self._index(k, v)
                    if iv is None:
                        continue
                    for pb, w in theirs:
                        iw = self._index(k, w)
                        if iw == iv + 1 or (iw is None and iv == n - 1 and w not in an.seen[k]):
                            out.append((k, pa, pb))
        elif kind == g.WR:
            wid = op_index(an.ops, an.graph.txns[a])  # writers are indexed by position in an.ops
            appends_a = ops_a[0]
            for pb, k, r in ops_b[1]:
                if r and an.writer.get(k, {}).get(r[-1]) == wid:
                    out.append((k, next(p for p, v in appends_a[k] if v == r[-1]), pb))
        elif kind == g.RW:
            appends_b = ops_b[0]
            for pa, k, r in ops_a[1]:
                theirs = appends_b.get(k)
                if not theirs:
                    continue
                order, m = an.order[k], len(r)
                for pb, w in theirs:
                    if (m < len(order) and order[m] == w) or (m == len(order) and w not in an.seen[k]):
                        out.append((k, pa, pb))
        return out


class RwRegisterLabels:
    """Labels of an `rw_register.Analysis`'s edges (its module docstring has the rules)."""

    def __init__(self, an):
        self.an = an
        self._txn: dict[int, tuple[list, list]] = {}
        self._keys: dict[int, tuple[set, set]] = {}
        self._bounds: dict[int, tuple[int, int, int]] = {}
        self._has_pred: set | None = None

    def _ops(self, node: int) -> tuple[list, list]:
        """(writes as (pos, key, value), external reads as (pos, key, value)):
        a read is external when it is the transaction's first access to the
        key and not of its own later write (`rw_register.Analysis._scan_reads`)."""
        got = self._txn.get(node)
        if got is None:
            op = self.an.graph.txns[node]
            i = op_index(self.an.ops, op)  # its position in an.ops (a sub-history's ids are not)
            value = self.an.mops[i]
            writes = [(p, k, v) for p, (f, k, v) in enumerate(value) if f == "w"]
            reads, touched = [], set()
            for p, (f, k, v) in enumerate(value):
                if (op.type == "ok" and f == "r" and k not in touched
                        and (v is None or self.an.writer.get((k, v)) != i)):
                    reads.append((p, k, v))
                touched.add(k)
            got = self._txn[node] = (writes, reads)
        return got

    def key_sets(self, node: int) -> tuple[set, set]:
        """(keys of its external reads, keys written), as `ListAppendLabels.key_sets`."""
        got = self._keys.get(node)
        if got is None:
            writes, reads = self._ops(node)
            got = self._keys[node] = ({k for _, k, _ in reads}, {k for _, k, _ in writes})
        return got

    def overwrites(self, node: int) -> bool:
        """Does the transaction read a key and write it too?"""
        reads, writes = self.key_sets(node)
        return not reads.isdisjoint(writes)

    def bounds(self, node: int) -> tuple[int, int, int]:
        """(first write, first read, last read) position among the micro-ops
        `__call__` can name in the transaction (as `ListAppendLabels.bounds`)."""
        got = self._bounds.get(node)
        if got is None:
            writes, reads = self._ops(node)
            got = self._bounds[node] = (writes[0][0] if writes else NEVER, reads[0][0] if reads else NEVER,
                                        reads[-1][0] if reads else -1)
        return got

    def _first(self, k, w) -> bool:
        """Is w one of the values readers of nil precede (a final write with no known predecessor)?"""
        if self._has_pred is None:
            self._has_pred = {(kk, x) for (kk, v), after in self.an.succ.items() if v is not None
                              for x in after}
        return (k, w) in self.an.final and (k, w) not in self._has_pred

    def __call__(self, a: int, b: int, kind: int) -> list[Fact]:
        an = self.an
        succ = an.succ
        out: list[Fact] = []
        if kind == g.WR:
            wid = op_index(an.ops, an.graph.txns[a])
            for pb, k, v in self._ops(b)[1]:
                if v is not None and an.writer.get((k, v)) == wid:
                    pa = next(p for p, k2, x in self._ops(a)[0] if k2 == k and x == v)
                    out.append((k, pa, pb))
            return out
        writes_b = self._ops(b)[0]
        if kind == g.WW:
            for pa, k, v in self._ops(a)[0]:
                after = succ.get((k, v), ())
                out.extend((k, pa, pb) for pb, k2, w in writes_b if k2 == k and w in after)
        elif kind == g.RW:
            for pa, k, v in self._ops(a)[1]:
                after = succ.get((k, v), ())
                out.extend((k, pa, pb) for pb, k2, w in writes_b
                           if k2 == k and (w in after or (v is None and self._first(k, w))))
        return out
