"""rw-register, online: dependency cycles and read anomalies as the history grows.

The offline analysis (`checker.rw_register`) knows a key's versions only
where they are certain: values are unique per key, so a read names the one
write it saw (its *writer*), and a committed transaction that read v from k
and then wrote w to k puts v before w (writes follow reads, on by default;
`--no-wfr-keys` turns it off, here too). Every one of those facts is a fact
of one or two transactions, true in every history that extends the lines
that show them; so each edge below, once its ends have settled, is an edge
of the offline graph of every extension:

- wr: the writer of (k, v) precedes each committed transaction whose
  external read of k (its first access to k a read) returned v. The writer
  is known from its invoke, even one invoked after the read (then the edge
  comes with that invoke: a read of a future write);
- ww: with the pair v < w (a committed T read v from k, then wrote w), the
  writer of v precedes T, the writer of w;
- rw: with the same pair, every committed reader of (k, v) precedes T. A
  reader of nil precedes T when T read nil and wrote k.

An edge waits until both ends have settled and is dropped if one fails, as
the offline graph has no node for a failed transaction; an info transaction
has an edge out only if a read saw its write, which makes it a node offline
(an *observed* one). `deps.Deps` holds the graph, adds process and
real-time order for models that need them, and reports each cycle as its
last edge arrives, named as offline names it, if the model forbids it.

**The nil rule.** Offline, the readers of nil precede the writers of every
value with no known predecessor (a *first* value: its writer's last write
to the key, and no pair u < w known). With writes following reads, values
unique per key, and no `--linearizable-keys` or `--sequential-keys`, the
only pair that can put something before w is the one its own writer makes
by reading u (not nil) and then writing w; an info writer's reads are no
facts. So whether w is a first value is a fact of its writer alone, fixed
when it becomes a node of offline's graph (completes ok, or is info and a
committed read observes it), and the edge from each committed reader of nil
to it holds in every extension: `_first` adds them as either end arrives.
The orders `--linearizable-keys` and `--sequential-keys` add are ignored
online (fewer edges, still sound; those histories are never certified).

Non-cycle anomalies, each true of every extension:

- internal, fuzzy-read, future-read: one committed transaction's own
  micro-ops prove them, at its completion, judged by the very function the
  offline scan uses (`rw_register.txn_reads`);
- lost-update: a second committed transaction that read the same (k, v) and
  then wrote k;
- G1a: a committed read of a value whose writer failed (reported when both
  are known: the read, or the writer's failure, whichever comes last);
- G1b: a committed read of a value its writer, which did not fail, went on
  to overwrite within the same transaction.

Left to the final pass: garbage reads (a value no transaction has written
*yet*: a later invoke may write it, and then the read is a read of a future
write, which offline judges through the cycle it makes), the cycles above,
and Adya's label-based types (G-cursor, G-monotonic, G-update), which
offline finds by searching every component with edge labels.

**Certified verdicts** (`finish`, `certified`). When the history ends, the
engine certifies it valid, so that `sleuth check --follow` skips the offline
pass, when it found nothing and left nothing undecided (a *gap*, `Deps.gap`),
under a model that forbids real-time cycles (the engine then adds real-time
edges, and with them process order: offline's graph has both whatever the
model), with some transaction committed (offline's verdict is otherwise
unknown). Then offline finds no anomaly of any type: every edge of its graph
was presented here (wr, ww and rw from the facts above, the nil rule, real
time), none closed a cycle (a cycle of a type the model allows is a gap:
offline lists it), every non-cycle anomaly it looks for is judged here as it
appears (one the model allows is a gap), and what only the end can judge is
recorded as a gap by `finish`: a read of a value no transaction wrote
(garbage), edges or judgements still waiting for a transaction that never
completed (offline takes it as info, and an observed one as a node). Also
gaps: an ok transaction whose completion writes otherwise than its invoke
said (offline reads the completion), and values that are not hashable.
Models without real-time order (serializable and weaker) are not certified:
their final pass is offline's.

**Memory** (`_sweep`: when what is kept has doubled, from `SWEEP`
transactions). A transaction is forgotten only when it is a *source* of the
graph (every edge into it came from a node already forgotten), completed
before every pending transaction was invoked, and every value it read has
a settled writer (not pending, not yet to be invoked); barriers but the
newest by the same rule. Taken in the graph's order, so forgetting a source
makes its successors sources in the same sweep. The graph's side is the
list-append engine's argument (`deps`, "Forgetting"): an edge that arrives
later into a forgotten node is a gap, one from it is dropped, and without
gaps no cycle passes through a forgotten node. What else must be judged
after a writer is forgotten, and how, each without a guess:

- *a value written twice* (offline refuses the history at the second
  write's line): the values forgotten transactions wrote stay in an exact
  set (`written.Written`: 8 bytes an int), so the second write is refused
  at the same line, with the same error, however old the first;
- *a read of a forgotten write* v of key k: offline's edges from it are the
  wr edge from v's writer (from a forgotten node: dropped), rw edges to the
  writers of values known to follow v, and G1a or G1b if v's writer failed
  or overwrote v itself. Per key, `tops` keeps the forgotten values that
  answer all of these with "nothing more": each the last write to k of a
  committed transaction, and none that a forgotten transaction read and
  then overwrote (a pair v < w whose w's writer is forgotten: an rw edge
  from the reader into it). A read of one of them is judged (its rw edges
  to kept writers are added as before) with no gap; a read of any other
  forgotten value is a gap: among them a crashed (info) transaction's write,
  which may take effect after any later write, so no real-time rule bounds
  how many a key would have to keep. `tops` keeps only values not superseded in
  real time (a value whose writer completed before another committed
  forgotten writer of k began is dropped): the values left overlap in time
  pairwise, so they all overlap at one moment (intervals on a line), and a
  key keeps no more than the writes of k concurrent then;
- *a read of nil* of k after a writer of a first value of k was forgotten
  would precede it (the nil rule): a gap. Readers of nil forgotten are
  dropped from the rule's lists (their edges are from forgotten nodes);
- a value read whose writer has not been invoked (a future write) keeps its
  reader until the writer comes; lost updates are reported once and their
  pair kept; the other tables (readers, pairs, first values, what was
  judged) lose a forgotten transaction at its sweep.

Why a strict serializable history forgets everything old with no gap:
every edge into a transaction T arrives by the time everything invoked
before T completed has completed, except from a transaction invoked after
T completed, which real time puts after T: such an edge (a read of a value
T overwrote, a read of nil after T's first value) closes a cycle, and never
arrives in a valid history. A read in such a history of a committed
forgotten value not in `tops` is stale (a committed write of k that follows
it, in real time or by reading it and overwriting it, completed before the
read began), so invalid too, though with blind writes offline may not see
it: the gap then only costs the final pass. Reads of crashed writes whose
writer was forgotten are gaps in valid histories too: such a history is
judged by the final pass, as before. So the kept transactions, graph and tables stay bounded by the
transactions concurrent with the oldest pending one; what grows is the set
of forgotten values, 8 bytes each (`tests/test_online_engines.py`: 20,000
transactions swept from 1,000 keep no more at the end than early on, and
are certified as offline judges them). Under models without real-time order
the same rule forgets, but a valid history may read an old version: a gap,
and the final pass is offline's (it is anyway there). A transaction pending
forever keeps everything invoked after it.
"""

from __future__ import annotations

from typing import Any

from sleuth.checker import graph as g
from sleuth.checker import models, txn
from sleuth.checker.online import Found
from sleuth.checker.online.deps import Deps
from sleuth.checker.online.written import Written
from sleuth.checker.rw_register import parse_txn, txn_anomaly_text, txn_reads
from sleuth.history.jsonl import History, HistoryError, Op

_NONE = object()
SWEEP = 20_000  # transactions kept before the first sweep (see "Memory")


class Engine:
    def __init__(self, history: History, model: str, report, wfr_keys: bool = True, vouched: bool = False,
                 sweep: int = SWEEP):
        self.history = history
        self.model = models.canonical(model)
        self.wfr = wfr_keys
        self.deps = Deps(history, self.model, report, self._why)
        self.ops = self.deps.ops
        self.found: list[Found] = self.deps.found
        self.n = 0
        self.writer: dict[tuple, int] = {}  # (k, v) -> the txn that writes it
        self.final: set[tuple] = set()  # (k, v) that are their writer's last write to k
        self.readers: dict[tuple, list[int]] = {}  # (k, v) -> committed external readers
        self.succ: dict[tuple, set] = {}  # (k, v) -> values known to follow v
        self.writing: dict[tuple, list[int]] = {}  # (k, v) -> committed txns that read v, then wrote k
        self.unwritten: dict[tuple, list[int]] = {}  # (k, v) -> readers of a value no invoke has written yet
        self.watch: dict[int, list[tuple]] = {}  # pending writer -> reads of its values, judged at its end
        self.judged: set[tuple] = set()  # (k, v) judged for G1a / G1b (once each, as offline)
        self.bad: dict[int, HistoryError] = {}  # txn -> its invoke value's error (raised unless ok fixes it)
        self.vouched = vouched  # --linearizable-keys or --sequential-keys: orders not added online
        self.firsts: dict[Any, dict[int, None]] = {}  # key -> writers of its values with no known predecessor
        self.seen_w: set[int] = set()  # writers some committed read observed
        self.ok = 0
        # forgetting (see "Memory")
        self.sweep = sweep
        self.next_sweep = sweep  # sweep when this many transactions are kept
        self.forgotten = 0
        self.gone = Written()  # (k, v) that forgotten transactions wrote
        self.tops: dict[Any, dict[Any, tuple[int, int]]] = {}  # key -> forgotten values a read may show
        self.nil_gone: set = set()  # keys a forgotten transaction wrote a first value of
        self.nil_read_gone: set = set()  # keys a forgotten committed transaction read nil from

    # -- events ---------------------------------------------------------------

    def invoked(self, op: Op, time: int) -> None:
        self.n += 1
        if len(self.ops) >= self.next_sweep:
            self._sweep()
        h = self.history
        if op.f != "txn":
            raise h.error(op.invoke_pos, f"rw-register histories hold txn operations, not {op.f!r}")
        self.deps.invoked(op)
        try:
            value = parse_txn(h, op)  # pending: its invoke value, as offline reads a pending txn
        except HistoryError as e:
            self.bad[op.id] = e  # offline reads an ok txn's completion value instead
            return
        self._index(op, value)

    def completed(self, op: Op, time: int) -> None:
        i = op.id
        err = self.bad.pop(i, None)
        if err is not None:
            if op.type != "ok":
                raise err
            self._index(op, parse_txn(self.history, op))
        self.deps.completed(op, time)
        watched = self.watch.pop(i, ())
        for k, v, r in watched:
            self._judge(k, v, i, r)
        if op.type == "ok":
            self.ok += 1
            try:
                if [m for m in op.value if m[0] == "w"] != [m for m in op.invoke_value if m[0] == "w"]:
                    self.deps.gap("a transaction whose completion writes otherwise than its invoke")
                self._reads(op)
                self._first(op)
            except (TypeError, IndexError):  # an unhashable value: offline names it
                self.deps.gap("an unhashable value")
        elif op.type == "info" and i in self.seen_w:
            self._first(op)

    # -- writes and reads -------------------------------------------------------

    def _index(self, op: Op, value: list) -> None:
        """Who writes what (values are unique per key: offline's error, at the same line)."""
        h, i, writer = self.history, op.id, self.writer
        last: dict = {}
        try:
            for f, k, v in value:
                if f != "w":
                    continue
                j = writer.get((k, v))
                if j is None and (k, v) in self.gone:
                    j = -1  # written by a transaction since forgotten: offline's error all the same
                if j is not None and j != i:
                    also = self.ops.get(j)
                    where = "earlier" if also is None else f"at line {h.line_of(also.invoke_pos)}"
                    raise h.error(op.invoke_pos, f"value {v!r} written to key {k!r} twice (also {where}); "
                                                 "rw-register needs unique values")
                if j is None:
                    writer[(k, v)] = i
                    for r in self.unwritten.pop((k, v), ()):  # reads of it came first
                        self.deps.edge(i, r, g.WR)
                        self._observed(k, v, i, r)
                    for w in self.succ.get((k, v), ()):
                        self._ww(k, v, w)
                last[k] = v
        except TypeError:
            self.deps.gap("an unhashable value")
            return  # an unhashable key or value: offline names it
        self.final.update(last.items())

    def _reads(self, op: Op) -> None:
        i, deps = op.id, self.deps
        facts = txn_reads(op.value)
        for name, k, v, other in facts.anomalies:
            deps.emit(name, [op], txn_anomaly_text(name, txn.txn_label(self.history, op), k, v, other))
            if name == models.FUZZY_READ and v is not None:  # a version seen too (G1a, G1b)
                w = self.writer.get((k, v))
                if w is not None:
                    self._observed(k, v, w, i)
        for k, v in facts.first_read.items():
            kv = (k, v)
            self.readers.setdefault(kv, []).append(i)
            if v is not None:
                w = self.writer.get(kv)
                if w is None and kv in self.gone:  # its writer was forgotten (see "Memory")
                    if v not in self.tops.get(k, ()):
                        deps.gap("a read of a forgotten write not known to be its key's latest")
                    deps.data_edges += 1  # its wr edge, dropped: offline's all the same
                elif w is None:
                    self.unwritten.setdefault(kv, []).append(i)
                else:
                    deps.edge(w, i, g.WR)
                    self._observed(k, v, w, i)
            for after in self.succ.get(kv, ()):
                t = self.writer.get((k, after))
                if t is not None:
                    deps.edge(i, t, g.RW)
            if v is None:  # a reader of nil precedes the writers of first values (`_first`)
                if k in self.nil_gone:
                    deps.gap("a read of nil after a first value's writer was forgotten")
                for t in self.firsts.get(k, ()):
                    deps.edge(i, t, g.RW)
            last = facts.last_write.get(k, _NONE)
            if last is _NONE:
                continue
            writing = self.writing.setdefault(kv, [])
            writing.append(i)
            if len(writing) == 2:  # once per (k, v), as offline's one example
                names = ", ".join(txn.txn_label(self.history, self.ops[t]) for t in writing)
                deps.emit(models.LOST_UPDATE, [self.ops[t] for t in writing],
                          f"{names} all read key {k!r} = {v!r} and then wrote it; whichever committed "
                          "later should have seen the other's write")
            if self.wfr and last not in self.succ.setdefault(kv, set()):
                self.succ[kv].add(last)
                self._ww(k, v, last)
                t = self.writer.get((k, last))
                if t is not None:
                    for r in self.readers[kv]:
                        deps.edge(r, t, g.RW)

    def _first(self, op: Op) -> None:
        """`op` became a node of offline's graph (completed ok, or info and observed): its last
        write to each key with no known predecessor is a *first* value, and every committed
        reader of nil on that key precedes it (offline's rule). Whether it has a predecessor
        is `op`'s own fact: with writes following reads, the pair u < w of key k comes only
        from the transaction that wrote w having read u (values are unique per key), and an
        info transaction's reads are no facts (see "The nil rule")."""
        i = op.id
        if op.type == "ok":
            facts = txn_reads(op.value)
            last, read = facts.last_write, facts.first_read
        else:
            last, read = {k: v for f, k, v in op.invoke_value if f == "w"}, {}
        for k in last:
            if self.wfr and read.get(k) is not None:
                continue  # it read u and then wrote: u < its value, a known predecessor
            self.firsts.setdefault(k, {})[i] = None
            if k in self.nil_read_gone:  # an edge from a forgotten reader of nil, dropped
                self.deps.data_edges += 1
            for r in self.readers.get((k, None), ()):
                self.deps.edge(r, i, g.RW)

    def _ww(self, k: Any, v: Any, w: Any) -> None:
        """The pair v < w of key k: the writer of v precedes the writer of w."""
        if v is None:
            return
        a, b = self.writer.get((k, v)), self.writer.get((k, w))
        if a is not None and b is not None:
            self.deps.edge(a, b, g.WW)

    def _observed(self, k: Any, v: Any, w: int, r: int) -> None:
        """Committed txn r read (k, v), written by w: G1a or G1b once w's outcome is known."""
        if w not in self.seen_w:
            self.seen_w.add(w)
            wo = self.ops[w]
            if wo.type == "info" and w not in self.deps.pending:  # a node of offline's graph now
                self._first(wo)
        if (k, v) in self.judged:
            return
        if w in self.deps.pending:
            self.watch.setdefault(w, []).append((k, v, r))
        else:
            self._judge(k, v, w, r)

    def _judge(self, k: Any, v: Any, w: int, r: int) -> None:
        if (k, v) in self.judged:
            return
        self.judged.add((k, v))
        h, tw, tr = self.history, self.ops[w], self.ops[r]
        if tw.type == "fail":
            self.deps.emit(models.G1A, [tr, tw], f"{txn.txn_label(h, tr)} read key {k!r} = {v!r}, written by "
                                            f"{txn.txn_label(h, tw)}, which failed (aborted read)")
        elif (k, v) not in self.final:
            self.deps.emit(models.G1B, [tr, tw], f"{txn.txn_label(h, tr)} read key {k!r} = {v!r}, an intermediate "
                                            f"write of {txn.txn_label(h, tw)}, which wrote {k!r} again later "
                                            "(intermediate read)")

    # -- forgetting (see "Memory") ------------------------------------------------

    def _sweep(self) -> None:
        """Forget the transactions that completed before every pending one was invoked,
        whose reads all have a settled writer (or none that could come: a forgotten one),
        and that are sources once those before them in the graph's order are forgotten; and
        the barriers but the newest, by the same rule. Next sweep when what is kept has
        doubled."""
        deps = self.deps
        ops, gr, pending = deps.ops, deps.graph, deps.pending
        oldest = min((ops[p].invoke_pos for p in pending), default=None)
        ord_, into = gr.ord, gr.into
        cands = [i for i, op in ops.items() if i not in pending and op.complete_pos is not None
                 and (oldest is None or op.complete_pos < oldest) and self._settled(op)]
        cands += [b for b in ord_ if b < 0 and b != deps.barrier]
        cands.sort(key=lambda n: ord_.get(n, -1))  # failed transactions (no node) first
        batch: set[int] = set()
        for n in cands:  # in topological order: a node's predecessors are decided before it
            if all(p in batch for p in into.get(n, ())):
                batch.add(n)
        gone: dict[Any, list] = {}
        affected: set[tuple] = set()
        for n in cands:
            if n not in batch:
                continue
            if n >= 0:
                self._forget_txn(ops[n], gone, affected)
                self.forgotten += 1
            deps.forget(n)
        for k, values in gone.items():
            self.gone.add(k, values)
        writer = self.writer
        for kv in affected:
            k = kv[0]
            rs = self.readers.get(kv)
            if rs is not None:
                rs[:] = [t for t in rs if t in ops]
                if not rs:
                    del self.readers[kv]
            ws = self.writing.get(kv)
            if ws is not None and len(ws) < 2 and ws[0] not in ops:  # two: a lost update, reported
                del self.writing[kv]
            su = self.succ.get(kv)
            if su:
                su.intersection_update([w for w in su if writer.get((k, w)) is not None])
                if not su:
                    del self.succ[kv]
        self.next_sweep = max(self.sweep, 2 * len(ops))

    def _settled(self, op: Op) -> bool:
        """Are the writers of every value `op` read known and settled? (Else an edge into it,
        or a judgement of it, is still to come.)"""
        if op.type != "ok":
            return True
        try:
            for f, k, v in op.value:  # every read: a fuzzy one's writer is judged too (`_observed`)
                if f != "r" or v is None:
                    continue
                w = self.writer.get((k, v))
                if w in self.deps.pending or (w is None and (k, v) in self.unwritten):
                    return False
        except TypeError:  # unhashable: a gap already
            return False
        return True

    def _forget_txn(self, op: Op, gone: dict[Any, list], affected: set[tuple]) -> None:
        """Drop what is kept of `op` (a source of the graph, completed): its values go to
        `gone` (the exact set of forgotten writes), its last write per key, if it committed,
        to `tops` (a later read of it is judged without its writer), its pairs v < w evict v
        from `tops` (a read of v then has an rw edge into `op`: a gap)."""
        i = op.id
        value = op.value if op.type == "ok" else op.invoke_value
        writer, tops = self.writer, self.tops
        try:
            keys = set()
            for f, k, v in value:
                if f == "w" and writer.get((k, v)) == i:
                    del writer[(k, v)]
                    self.final.discard((k, v))
                    self.judged.discard((k, v))
                    gone.setdefault(k, []).append(v)
                    affected.add((k, v))
                    keys.add(k)
            if op.type == "ok":
                facts = txn_reads(op.value)
                for k, v in facts.last_write.items():
                    if k in keys and not any(writer.get((k, w)) is None for w in self.succ.get((k, v), ())):
                        self._top(k, v, op)
                for k, v in facts.first_read.items():
                    affected.add((k, v))
                    if v is None:
                        self.nil_read_gone.add(k)
                    if k in facts.last_write and k in tops:
                        tops[k].pop(v, None)
            for k in keys:
                fk = self.firsts.get(k)
                if fk is not None and fk.pop(i, _NONE) is not _NONE:
                    self.nil_gone.add(k)  # a later reader of nil would precede it: a gap then
                    if not fk:
                        del self.firsts[k]
        except TypeError:  # an unhashable value: a gap already
            pass
        self.seen_w.discard(i)

    def _top(self, k: Any, v: Any, op: Op) -> None:
        """Committed `op`'s last write of k, v, becomes one of k's forgotten values a read may
        still show: unless a committed write of k, forgotten too, began after `op` completed
        (then v came before it, in a strict model: a read of v now is stale, and a gap).
        Those `op` itself follows so are dropped: what stays overlaps pairwise in time, so a
        key keeps no more values than writes were concurrent at one moment."""
        tops = self.tops.setdefault(k, {})
        s, e = op.invoke_pos, op.complete_pos
        if any(s2 > e for s2, _ in tops.values()):
            return
        for u in [u for u, (_, e2) in tops.items() if e2 < s]:
            del tops[u]
        tops[v] = (s, e)

    # -- explanations ------------------------------------------------------------

    def _why(self, a: int, b: int, kind: int) -> str:
        ta, tb = self.ops[a], self.ops[b]
        na, nb = txn.txn_name(ta), txn.txn_name(tb)
        writes_b = {k: w for f, k, w in _mops(tb) if f == "w"}
        if kind == g.WR:
            for f, k, v in _mops(tb):
                if f == "r" and v is not None and self.writer.get((k, v)) == a:
                    return f"{nb} read key {k!r} = {v!r}, written by {na}"
        if kind == g.WW:
            for f, k, v in _mops(ta):
                if f == "w" and k in writes_b and writes_b[k] in self.succ.get((k, v), ()):
                    return (f"{na} wrote key {k!r} = {v!r} before {nb} wrote {writes_b[k]!r} ({nb} read {v!r} "
                            f"from {k!r} and then wrote {writes_b[k]!r})")
        if kind == g.RW:
            for k, v in txn_reads(_mops(ta)).first_read.items():
                w = writes_b.get(k, _NONE)
                if w is not _NONE and w in self.succ.get((k, v), ()):
                    seen = "nil (never written)" if v is None else repr(v)
                    return (f"{na} read key {k!r} = {seen}, which {nb} overwrote with {w!r} ({nb} read {seen} "
                            f"from {k!r} and then wrote {w!r})")
            for k, v in txn_reads(_mops(ta)).first_read.items():
                if v is None and k in writes_b and b in self.firsts.get(k, ()):
                    return (f"{na} read key {k!r} = nil (never written), so it came before {nb}'s write of "
                            f"{writes_b[k]!r}, a value no known version precedes")
        return f"{na} precedes {nb} ({g.KIND_NAMES[kind]})"

    def finish(self) -> None:
        """The history ended: record as gaps what offline may still judge that this engine has
        not: reads of values no transaction wrote (garbage, unless a write is still to come:
        there is none), and anything still waiting for a transaction that never completed
        (offline takes it as info: an observed one is a node whose edges were never added)."""
        deps = self.deps
        if self.unwritten:
            deps.gap(models.GARBAGE_READ)
        if any(p in deps.waiting for p in deps.pending) or any(p in self.watch for p in deps.pending) \
                or self.bad:
            deps.gap("edges waiting for a transaction that never completed")

    def certified(self) -> bool:
        """After `finish`: is the history certainly valid offline, with no anomaly of any type
        (see "Certified verdicts")? False means: ask the offline pass."""
        d = self.deps
        return d.realtime and not self.vouched and not self.found and not d.counts and not d.gaps \
            and self.ok > 0

    def result(self, model: str | None) -> Any:
        """The certified verdict as offline's Result (after `certified()`)."""
        from sleuth.checker.result import Result

        not_, also_not, possible = models.judge([])
        stats = {**self.stats(), "final-pass": "none: the online engine's verdict is complete"}
        notes = [txn.EMPTY_GRAPH_NOTE] if self.deps.data_edges == 0 and self.ok > 1 else []
        return Result(valid=True, model=self.model, not_=not_, also_not=also_not, possible=possible,
                      stats=stats, notes=notes)

    def tick(self, force: bool = False) -> None:
        """Nothing to do between events: everything is judged as it arrives."""

    def stats(self) -> dict[str, Any]:
        return {"txns": self.n, **self.deps.stats(), "reads-of-unwritten-values": len(self.unwritten),
                "forgotten": self.forgotten}


def _mops(op: Op) -> list:
    return op.value if op.type == "ok" else op.invoke_value
