"""What shrinking needs to know about a workload's operations (sleuth.checker.shrink).

The parts an operation can lose (keys, micro-ops), by the value shapes of
docs/history-format.md; the operations an anomaly's explanation names; what a
transactional seed needs for the checker to infer its edges; and the register
rule that keeps a counterexample's reads explained by its writes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sleuth.checker.source import READS
from sleuth.history.jsonl import History, Op

TXN_WORKLOADS = ("list-append", "rw-register")  # values are lists of micro-ops [f, k, v]
KEYED_WORKLOADS = ("register",)  # values are [key, v]
REGISTER_WORKLOADS = ("register", "cas-register")  # judged by linearizability
LINE_FIELDS = ("line", "complete-line", "from-line", "to-line")  # how explanations name ops
LINE_LISTS = ("lines",)  # the same, several at once (the source workload's examples)


def micro_ops(op: Op) -> list:
    """A transaction's micro-ops (the completion's for an ok op, else the invoke's)."""
    v = op.value if op.type == "ok" else op.invoke_value
    if not isinstance(v, list):
        return []
    return [m for m in v if isinstance(m, list) and len(m) == 3]


def keys_of(workload: str, op: Op) -> list:
    """The keys an operation touches (none for workloads without keys)."""
    if workload in TXN_WORKLOADS:
        return [m[1] for m in micro_ops(op)]
    v = op.value if op.type == "ok" else op.invoke_value
    if workload in KEYED_WORKLOADS and isinstance(v, list) and v:
        return [v[0]]
    return []


def named_lines(example: Any) -> set[int]:
    """Every line an anomaly's explanation names (its transactions, stuck op, window)."""
    out: set[int] = set()
    stack = [example]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            for k, v in x.items():
                if k in LINE_FIELDS and type(v) is int:
                    out.add(v)
                elif k in LINE_LISTS and isinstance(v, list):
                    out.update(x for x in v if type(x) is int)
                elif isinstance(v, dict | list):
                    stack.append(v)
        elif isinstance(x, list):
            stack.extend(y for y in x if isinstance(y, dict | list))
    return out


class Support:
    """What a transactional seed needs for its edges to be inferred: the writers of the
    values its reads saw (else they are garbage reads), and for list-append the shortest
    read of each key that holds every element the seed touched (it reveals their order).
    Operations brought in only as support keep only the micro-ops they are needed for."""

    def __init__(self, ops: list[Op], workload: str):
        self.ops = ops
        self.append = workload == "list-append"
        self.writer: dict[tuple, tuple[int, int]] = {}  # (key, value) -> (op, micro-op)
        # key -> (op, micro-op, list), shortest first (then by op and micro-op)
        self.reads: dict[Any, list[tuple[int, int, list]]] = {}
        for op in ops:
            for j, (f, k, v) in enumerate(micro_ops(op)):
                try:
                    if f in ("append", "w"):
                        self.writer.setdefault((k, v), (op.id, j))
                    elif f == "r" and op.type == "ok" and self.append and isinstance(v, list):
                        self.reads.setdefault(k, []).append((op.id, j, v))
                except TypeError:  # an unhashable value: the checker names it
                    continue
        for reads in self.reads.values():
            reads.sort(key=lambda r: (len(r[2]), r[0], r[1]))

    def _values(self, i: int) -> Iterable[tuple[Any, Any]]:
        """(key, value) of everything op i read, and (list-append) appended."""
        op = self.ops[i]
        for f, k, v in micro_ops(op):
            if f == "r" and op.type == "ok":
                yield from ((k, x) for x in (v if isinstance(v, list) else [v]))
            elif f == "append":
                yield k, v

    def needs(self, full: set[int], covering: bool = True) -> dict[int, set[int]]:
        """The operations outside `full` that it needs, each with the positions of the
        micro-ops it is needed for. `covering=False` leaves out the reads that reveal the
        version orders (and their writers): what is left is a subset, and so its size a
        lower bound of the whole's, at the cost of a lookup per value."""
        need: dict[int, set[int]] = {}

        def add(w: tuple[int, int] | None) -> None:
            if w is not None and w[0] not in full:
                need.setdefault(w[0], set()).add(w[1])

        touched: dict[Any, set] = {}
        for i in full:
            for k, x in self._values(i):
                try:
                    add(self.writer.get((k, x)))
                    touched.setdefault(k, set()).add(x)
                except TypeError:
                    continue
        for k, elements in touched.items() if self.append and covering else ():
            # the shortest read that holds them all (reads are kept shortest first)
            for i, j, r in self.reads.get(k, ()):
                if len(r) >= len(elements) and elements.issubset(r):
                    add((i, j))
                    for x in r:
                        add(self.writer.get((k, x)))
                    break
        return need


class SourceSupport:
    """What a seed of the `source` workload needs (`checker.source`): every read shows whole
    rows [n, v], so it keeps the append of each value it shows (else the row is an
    invented change). Nothing else: only a final read (`final-read`) can prove a change
    lost, so a read of the seed that misses an append is no other anomaly for being the
    last read kept."""

    def __init__(self, ops: list[Op]):
        self.ops = ops
        self.append_of: dict[Any, int] = {}  # value -> its ok append
        self.read_ids: set[int] = set()
        for op in ops:
            if op.f == "append" and op.type == "ok" and isinstance(op.value, dict):
                self.append_of.setdefault(hashable(op.value.get("v")), op.id)
            elif op.f in READS and op.type == "ok" and isinstance(op.value, list):
                self.read_ids.add(op.id)

    def _rows(self, r: Op) -> list[tuple[Any, Any]]:
        return [(row[0], row[1]) for row in r.value if isinstance(row, list) and len(row) == 2]

    def _writers(self, r: Op) -> set[int]:
        return {w for _, v in self._rows(r) if (w := self.append_of.get(hashable(v))) is not None}

    def needs(self, full: set[int], covering: bool = True) -> dict[int, set[int]]:
        """The operations outside `full` that it needs (no micro-ops to trim: {op: set()});
        `covering` is Support's (this needs no read to reveal an order)."""
        kept = set(full)
        for i in full:
            if i in self.read_ids:
                kept |= self._writers(self.ops[i])
        return {i: set() for i in kept - set(full)}


def hashable(x: Any) -> Any:
    """A value as a dict key: a list (JSON has no tuples) as a tuple."""
    return tuple(x) if isinstance(x, list) else x


def support(ops: list[Op], workload: str) -> Support | SourceSupport | None:
    """What a seed of `workload` needs beside the operations an example names, if anything."""
    if workload in TXN_WORKLOADS:
        return Support(ops, workload)
    if workload == "source":
        return SourceSupport(ops)
    return None


def unwritten(h: History, workload: str, initial_value: Any) -> bool:
    """Registers: does an ok read (or an ok cas's old value) see a value that no operation
    of `h` writes and that is not the initial value? Such a read is not linearizable on its
    own: it would make a counterexample that has lost its story (the register analogue of a
    garbage read, which the transactional checkers name)."""
    if workload not in REGISTER_WORKLOADS:
        return False
    from sleuth.checker import register_models as rm

    keyed = workload in KEYED_WORKLOADS
    initial = rm.freeze(initial_value)
    written: set = set()
    seen: list = []
    for op in h.ops():
        key, inv, ok = rm.parse_op(h, op, keyed)
        written.add((key, initial))
        if op.f == "write" and op.type != "fail":
            written.add((key, inv))
        elif op.f == "cas" and op.type != "fail":
            written.add((key, inv[1]))
            if op.type == "ok":
                seen.append((key, inv[0]))
        elif op.f == "read" and op.type == "ok":
            seen.append((key, ok))
    return any(s not in written for s in seen)
