"""Read-write register cycle analysis (Elle, Kingsbury & Alvaro, VLDB 2020, 4.3).

Each key holds one value; transactions write unique values and read them.
A read reveals only which write it saw, not the order of writes, so version
orders are inferred only where they are certain:

- the initial state (nil) precedes every written value;
- a committed transaction that read v from key k and then wrote w to k puts
  v before w (its write followed its read: Elle's `:wfr-keys?`, on by
  default here, as sleuth always inferred it; `wfr_keys=False` turns it off).

From these known pairs v < w of each key: ww writer(v) -> writer(w), rw
reader(v) -> writer(w), and wr writer(v) -> reader(v) for every read.
Readers of nil precede the writers of the values with no known predecessor;
the rest follow through ww. Edges are therefore a subset of the true
dependency graph: every cycle found is real (no false positives), though a
cycle whose version order cannot be inferred from reads goes unseen.

With `linearizable_keys=True` (Elle's `:linearizable-keys?`, for databases
where each key on its own is linearizable, e.g. a single PostgreSQL server at
any isolation level) real time orders versions too: when a committed
transaction T1 finished before a committed T2 began and both touched key k,
the version T1 left in k (its last write, else what it read) is at or before
the version T2 found there (what it read first, else its write). Distinct
values give a known pair v < w. Only the latest finishers per key are linked
(Elle's real-time frontier); earlier ones follow by transitivity. A
transaction that read nil after a committed one had left a value contradicts
the assumption: that is `cyclic-versions`.

With `sequential_keys=True` (Elle's `:sequential-keys?`, for databases
where each key on its own is sequentially consistent: every process sees
each key's versions in one order, never going back) the same inference runs
over each process's own sequence of committed transactions instead of real
time: a transaction that came after another on the same process found the
version the earlier one left, or a later one. Weaker than linearizable keys
(real time across processes says nothing), and implied by them.

Non-cycle anomalies: G1a, G1b, internal, fuzzy-read, lost-update, garbage-read,
future-read (a read of the transaction's own later write, Elle's),
cyclic-versions (only with linearizable_keys or sequential_keys).
"""

from __future__ import annotations

from typing import Any

from sleuth.checker import graph as g
from sleuth.checker import models, txn
from sleuth.checker.result import Result
from sleuth.history.jsonl import History, Op, as_written, gc_paused, unfreed

Key = Any


def parse_txn(history: History, op: Op) -> list[tuple[str, Key, Any]]:
    value = op.value if op.type == "ok" else op.invoke_value
    if not isinstance(value, list):
        raise history.error(op.invoke_pos, f"an rw-register txn value must be a list of micro-ops, got {value!r}")
    for mop in value:
        if (type(mop) is not tuple and type(mop) is not list) or len(mop) != 3 or mop[0] not in ("r", "w") \
                or type(mop[1]) is list:
            raise history.error(op.invoke_pos, f"bad micro-op {as_written(mop)!r}: expected [\"r\"|\"w\", key, value]")
    return value


class TxnReads:
    """What one committed transaction's micro-ops say by themselves (`txn_reads`)."""

    __slots__ = ("anomalies", "first_read", "last_write")

    def __init__(self) -> None:
        self.anomalies: list[tuple[str, Key, Any, Any]] = []  # (name, key, read, other value)
        self.first_read: dict[Key, Any] = {}  # key -> its external read (the first access a read)
        self.last_write: dict[Key, Any] = {}  # key -> the transaction's last write to it


def txn_reads(value: list) -> TxnReads:
    """One committed transaction, alone: its external reads (its first access to a key
    is a read, not of its own later write), its last write per key, and the anomalies its
    own micro-ops prove: `internal` (a read after its own write that does not show it;
    other: what it wrote), `fuzzy-read` (a key read twice, two values, no own write
    between; other: the first), `future-read` (a read of a value it writes itself only
    later). Offline (`Analysis._scan_reads`) and online (`checker.online.rw_register`)
    judge a transaction by this one function."""
    out = TxnReads()
    writes = {(k, v) for f, k, v in value if f == "w"}
    touched: set = set()
    state: dict[Key, Any] = {}
    own: set = set()  # keys whose state is this transaction's own write
    for f, k, v in value:
        if f == "r":
            if k in state:
                if v != state[k] and k in own:
                    out.anomalies.append((models.INTERNAL, k, v, state[k]))
                elif v != state[k]:  # another committed write in between: P2
                    out.anomalies.append((models.FUZZY_READ, k, v, state[k]))
            elif k not in touched:
                if v is not None and (k, v) in writes:  # its own later write
                    out.anomalies.append((models.FUTURE_READ, k, v, None))
                    touched.add(k)
                    state[k] = v
                    continue
                out.first_read[k] = v
            state[k] = v
        else:
            state[k] = v
            own.add(k)
            out.last_write[k] = v
        touched.add(k)
    return out


FACT_FIELD = {models.INTERNAL: "expected", models.FUZZY_READ: "earlier"}  # the other value's field in an example


def txn_anomaly_text(name: str, label: str, k: Key, v: Any, other: Any) -> str:
    """The sentence for one of `txn_reads`' anomalies of the transaction `label`."""
    if name == models.INTERNAL:
        return f"{label} read key {k!r} = {v!r}, but it had itself written {other!r} to it"
    if name == models.FUZZY_READ:
        return f"{label} read key {k!r} twice and saw {other!r}, then {v!r} (a non-repeatable read)"
    return f"{label} read key {k!r} = {v!r}, which it wrote itself only after that read (a read from its own future)"


class Analysis:
    """The version orders, graph and anomalies of one rw-register history.

    The constructor runs the steps in order; each says what it adds:
    `_index_writes` (who wrote each value), `_scan_reads` (external reads,
    in-transaction anomalies, writes-follow-reads pairs, lost updates),
    `_ordered_versions` (pairs from process or real-time order, when the
    caller vouches for it), `_read_anomalies` (garbage, G1a, G1b), then the
    nodes and the edges.
    """

    def __init__(self, history: History, linearizable_keys: bool = False, sequential_keys: bool = False,
                 wfr_keys: bool = True):
        self.history = history
        ops = history.ops()
        for op in ops:
            if op.f != "txn":
                raise history.error(op.invoke_pos, f"rw-register histories hold txn operations, not {op.f!r}")
        self.ops = ops
        self.anomalies: dict[str, list[dict]] = {}
        self.mops = [parse_txn(history, op) for op in ops]
        self.ext_reads: dict[tuple, list[int]] = {}  # (k, v) -> ok readers
        self.later_reads: dict[tuple, list[int]] = {}  # (k, v) -> ok readers that read k before (fuzzy)
        self.succ: dict[tuple, set] = {}  # (k, v) -> values known to follow v
        # (k, v, w) -> (txn that left v, txn that found w, "process" | "real time")
        self.order_pairs: dict[tuple, tuple[int, int, str]] = {}
        self._index_writes()
        self._scan_reads(wfr_keys)
        if sequential_keys:
            self._ordered_versions(self._by_process(), "process")
        if linearizable_keys:
            self._ordered_versions([[i for i, op in enumerate(ops) if op.type == "ok"]], "real time")
        observed = self._read_anomalies()
        self.node_of = [-1] * len(ops)
        txns: list[Op] = []
        for i, op in enumerate(ops):
            if op.type == "ok" or (op.type == "info" and i in observed):
                self.node_of[i] = len(txns)
                txns.append(op)
        self.graph = txn.Graph(txns)
        self._edges()

    def _index_writes(self) -> None:
        """writer: (k, v) -> the txn that wrote it (values are unique per key);
        final: the (k, v) that are their writer's last write to k."""
        history, ops = self.history, self.ops
        writer: dict[tuple, int] = {}
        final: set[tuple] = set()
        for i, value in enumerate(self.mops):
            last: dict[Key, Any] = {}
            for f, k, v in value:
                if f == "w":
                    if (k, v) in writer and writer[(k, v)] != i:
                        j = writer[(k, v)]
                        raise history.error(
                            ops[i].invoke_pos,
                            f"value {v!r} written to key {k!r} twice (also at line "
                            f"{history.line_of(ops[j].invoke_pos)}); rw-register needs unique values")
                    writer[(k, v)] = i
                    last[k] = v
            final.update(last.items())
        self.writer, self.final = writer, final

    def _scan_reads(self, wfr_keys: bool) -> None:
        """External reads (a txn's first access to a key is a read), internal
        and fuzzy reads, and, with `wfr_keys` (writes follow reads: Elle's
        `:wfr-keys?`), the pair v < w for a committed txn that read v from k
        and then wrote w to k. Sound whenever reads see committed data: v's
        writer committed before the read, w's at the txn's own commit, after.
        Lost updates: two committed txns that read the same v and wrote k."""
        ops = self.ops
        lost: dict[tuple, list[int]] = {}
        for i, (op, value) in enumerate(zip(ops, self.mops, strict=True)):
            if op.type != "ok":
                continue
            facts = txn_reads(value)
            for name, k, v, other in facts.anomalies:
                if name == models.FUZZY_READ:
                    # the read saw a version too: judged as one (G1a, G1b), though it gives
                    # no edge (the first read of a key is the external one)
                    self.later_reads.setdefault((k, v), []).append(i)
                example = {"key": k, "op": self._op(i), "read": v}
                if name in FACT_FIELD:
                    example[FACT_FIELD[name]] = other
                label = txn.txn_label(self.history, op)
                self._add(name, {**example, "explanation": txn_anomaly_text(name, label, k, v, other)})
            for k, v in facts.first_read.items():
                self.ext_reads.setdefault((k, v), []).append(i)
                w = facts.last_write.get(k, _NONE)
                if w is not _NONE:
                    if wfr_keys:
                        self.succ.setdefault((k, v), set()).add(w)
                    lost.setdefault((k, v), []).append(i)
        for (k, v), members in lost.items():
            if len(members) > 1:
                names = ", ".join(txn.txn_label(self.history, ops[i]) for i in members)
                self._add(models.LOST_UPDATE, {
                    "key": k, "read": v, "ops": [self._op(i) for i in members],
                    "explanation": f"{names} all read key {k!r} = {v!r} and then wrote it; "
                                   "whichever committed later should have seen the other's write"})

    def _by_process(self) -> list[list[int]]:
        """The committed txns of each process, in order (a process runs one at a time)."""
        groups: dict[Any, list[int]] = {}
        for i, op in enumerate(self.ops):
            if op.type == "ok":
                groups.setdefault(op.process, []).append(i)
        return list(groups.values())

    def _read_anomalies(self) -> set[int]:
        """Garbage reads, G1a, G1b; returns the txns some read observed."""
        ops, writer = self.ops, self.writer
        observed = set()
        reads = dict(self.ext_reads)
        for kv, readers in self.later_reads.items():
            reads[kv] = reads.get(kv, []) + readers
        for (k, v), readers in reads.items():
            if v is None:
                continue
            w = writer.get((k, v))
            r0 = readers[0]
            if w is None:
                self._add(models.GARBAGE_READ, {
                    "key": k, "value": v, "op": self._op(r0),
                    "explanation": f"{txn.txn_label(self.history, ops[r0])} read key {k!r} = {v!r}, "
                                   f"but no transaction ever wrote {v!r} to {k!r}"})
            elif ops[w].type == "fail":
                self._add(models.G1A, {
                    "key": k, "value": v, "op": self._op(r0), "writer": self._op(w),
                    "explanation": f"{txn.txn_label(self.history, ops[r0])} read key {k!r} = {v!r}, written by "
                                   f"{txn.txn_label(self.history, ops[w])}, which failed (aborted read)"})
            else:
                observed.add(w)
                if (k, v) not in self.final:
                    self._add(models.G1B, {
                        "key": k, "value": v, "op": self._op(r0), "writer": self._op(w),
                        "explanation": f"{txn.txn_label(self.history, ops[r0])} read key {k!r} = {v!r}, an "
                                       f"intermediate write of {txn.txn_label(self.history, ops[w])}, which wrote "
                                       f"{k!r} again later (intermediate read)"})
        return observed

    def _ordered_versions(self, groups: list[list[int]], source: str) -> None:
        """Known pairs v < w from an order of committed txns that each key's
        versions respect (module docstring): real time within each group (a
        process runs one txn at a time, so its real time is its own order).
        Per key, only the latest finishers (the frontier) are linked to a
        txn that begins; earlier ones follow by transitivity."""
        ops, mops = self.ops, self.mops
        for group in groups:
            first: dict[int, dict] = {}  # op -> key -> the version it found (read first, else its write)
            last: dict[int, dict] = {}  # op -> key -> the version it left (its last write, else its read)
            events = []
            for i in group:
                fi: dict = {}
                la: dict = {}
                for f, k, v in mops[i]:
                    if k not in fi:
                        fi[k] = (f, v)
                    if f == "w" or k not in la:
                        la[k] = v
                first[i] = {k: (la[k] if f == "w" else v) for k, (f, v) in fi.items()}
                last[i] = la
                events.append((ops[i].invoke_pos, 0, i))
                events.append((ops[i].complete_pos, 1, i))
            events.sort()
            frontier: dict[Key, set[int]] = {}  # key -> committed txns not yet followed by another on it
            before: dict[int, dict] = {}  # op -> key -> the frontier when it began
            for _, kind, i in events:
                if kind == 0:
                    seen = before[i] = {}
                    for k, w in first[i].items():
                        preds = seen[k] = tuple(frontier.get(k, ()))
                        for j in preds:
                            self._ordered_pair(j, i, k, last[j][k], w, source)
                else:
                    for k, preds in before.pop(i).items():
                        f = frontier.setdefault(k, set())
                        f.difference_update(preds)
                        f.add(i)

    def _ordered_pair(self, j: int, i: int, k: Key, v: Any, w: Any, source: str) -> None:
        """Txn j left v in k, and txn i, after it in `source` order, found w."""
        if v == w:
            return
        ops = self.ops
        if w is None:
            self._add(models.CYCLIC_VERSIONS, {
                "key": k, "value": v, "op": self._op(i), "earlier": self._op(j),
                "explanation": f"{txn.txn_label(self.history, ops[i])} read key {k!r} = nil, but "
                               f"{txn.txn_label(self.history, ops[j])} had left {v!r} in it before "
                               f"{txn.txn_label(self.history, ops[i])} began"
                               + (f" on the same process {ops[i].process}" if source == "process" else "")
                               + f" (key {k!r} is not {_ASSUMED[source]})"})
        else:
            self.succ.setdefault((k, v), set()).add(w)
            self.order_pairs.setdefault((k, v, w), (j, i, source))

    def _add(self, name: str, example: dict) -> None:
        self.anomalies.setdefault(name, []).append(example)

    def _op(self, i: int) -> dict:
        return txn.describe_txn(self.history, self.ops[i])

    def _node_writer(self, k, v) -> int:
        w = self.writer.get((k, v))
        return -1 if w is None else self.node_of[w]

    def _edges(self) -> None:
        add, node_of = self.graph.add, self.node_of
        for (k, v), readers in self.ext_reads.items():
            wv = self._node_writer(k, v) if v is not None else -1
            if wv >= 0:
                for r in readers:
                    add(wv, node_of[r], g.WR)
        has_pred: set[tuple] = set()
        for (k, v), after in self.succ.items():
            wv = self._node_writer(k, v) if v is not None else -1
            for w in after:
                if v is not None:
                    has_pred.add((k, w))
                ww = self._node_writer(k, w)
                if ww < 0:
                    continue
                if wv >= 0:
                    add(wv, ww, g.WW)
                for r in self.ext_reads.get((k, v), ()):
                    add(node_of[r], ww, g.RW)
        # Readers of nil precede the writers of every key's first known values.
        firsts: dict[Key, list[int]] = {}
        for (k, v), w in self.writer.items():
            n = node_of[w]
            if n >= 0 and (k, v) in self.final and (k, v) not in has_pred:
                firsts.setdefault(k, []).append(n)
        for (k, v), readers in self.ext_reads.items():
            if v is None:
                for n in firsts.get(k, ()):
                    for r in readers:
                        add(node_of[r], n, g.RW)

    def explain(self, a: int, b: int, kind: int) -> str:
        ta, tb = self.graph.txns[a], self.graph.txns[b]
        na, nb = txn.txn_name(ta), txn.txn_name(tb)
        ia = txn.op_index(self.ops, ta)
        ma, mb = self.mops[ia], self.mops[txn.op_index(self.ops, tb)]
        if kind == g.WR:
            for f, k, v in mb:
                if f == "r" and v is not None and self.writer.get((k, v)) == ia:
                    return f"{nb} read key {k!r} = {v!r}, written by {na}"
        writes_b = {k: w for f, k, w in mb if f == "w"}
        if kind == g.WW:
            for f, k, v in ma:
                if f == "w" and k in writes_b and writes_b[k] in self.succ.get((k, v), ()):
                    return f"{na} wrote key {k!r} = {v!r} before {nb} wrote {writes_b[k]!r}" + self._why(k, v, writes_b[k])
        if kind == g.RW:
            for f, k, v in ma:
                if f != "r" or k not in writes_b:
                    continue
                w = writes_b[k]
                if v is None:
                    return f"{na} read key {k!r} = nil (never written), so it came before {nb}'s write of {w!r}"
                if w in self.succ.get((k, v), ()):
                    return f"{na} read key {k!r} = {v!r}, which {nb} overwrote with {w!r}" + self._why(k, v, w)
        return f"{na} precedes {nb} ({g.KIND_NAMES[kind]})"

    def _why(self, k: Key, v: Any, w: Any) -> str:
        """How the checker knows v came before w in key k."""
        pair = self.order_pairs.get((k, v, w))
        if pair is None:
            return f" (a transaction read {v!r} from {k!r} and then wrote {w!r})"
        j, i = (txn.txn_name(self.ops[x]) for x in pair[:2])
        on = f" on the same process {self.ops[pair[0]].process}" if pair[2] == "process" else ""
        # the version i found is what it read first, else its write (`_ordered_versions`)
        first = next((f for f, key, _ in self.mops[pair[1]] if key == k), None)
        found = "read" if first == "r" else "wrote"
        return (f" ({j} left {v!r} in {k!r} and finished before {i} began{on}, and {i} then {found} "
                f"{w!r} there; each key is {_ASSUMED[pair[2]]})")


_NONE = object()
_ASSUMED = {"real time": "linearizable", "process": "sequentially consistent"}


@gc_paused
def check(history: History, model: str = "strict-serializable", linearizable_keys: bool = False,
          sequential_keys: bool = False, wfr_keys: bool = True,
          cycle_search_timeout: float | None = None) -> Result:
    """Judge an rw-register history against `model`. `linearizable_keys`,
    `sequential_keys`, `wfr_keys` are what the caller vouches for about the
    database, each widening version-order inference as Elle's options of the
    same names do (module docstring). `cycle_search_timeout`: seconds of
    cycle search per strongly connected component."""
    a = Analysis(history, linearizable_keys, sequential_keys, wfr_keys)
    stats = {"ops": len(a.ops)}
    from sleuth.checker.labels import RwRegisterLabels
    result = txn.analyze(history, a.graph, a.explain, a.anomalies, model, stats,
                         cycle_search_timeout=cycle_search_timeout, edge_labels=RwRegisterLabels(a))
    unfreed(a)  # when the program is about to leave: not freed for nothing
    return result
