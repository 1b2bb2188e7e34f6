"""List-append, online: dependency cycles and read anomalies as the history grows.

The offline analysis (`checker.list_append`) takes each key's version order
from its longest read. Online, a key's *known order* is the longest read so
far: every read of a list is a prefix of the key's final list, so if the
reads are compatible at all, the known order is a prefix of the final one,
and everything derived from it below holds in every extension.

Edges, added when certain (both ends *settled*: completed ok, or completed
info and observed; an edge with a pending end waits for it to complete, and
is dropped if it fails, exactly as the offline graph has no node for a
failed transaction):

- ww: the writers of consecutive elements of a known order (the final order
  has the same two elements consecutive);
- wr: the writer of a read's last element precedes the reader;
- rw: a reader of m elements precedes the writer of element m+1, once the
  known order has m+1 elements (a reader of the whole known order waits at
  the key's *frontier* until it grows);
- process: the previous transaction of the same process precedes the next;
- real-time: T1 completed (ok) before T2 was invoked, encoded as the offline
  graph does (`checker.graph`) with a chain of barrier nodes, one per run of
  completions with no invoke between them, so it costs two edges per
  transaction, not one per pair.

Process and real-time edges are only added when the model forbids their
cycles (`-process`, `-realtime`); with real-time edges, process edges are
left out (each is also a real-time edge, so a cycle through one is found
through the other, and named `-realtime`). Each edge goes into `order.Order`; one
that would close a cycle is reported as that cycle (barrier runs read back
as real-time edges), named by `checker.txn.classify`, if the model forbids
its type, and not added.

Why a reported cycle is an anomaly of every extension (prefix soundness):
every edge above is an edge of the offline graph of the whole history, or a
chain of barrier edges that the offline graph reads as real-time order,
*provided* each key whose order gave an edge ends with compatible reads. If
one does not, the offline check reports incompatible-order (or, when the
longest read repeats an element, duplicate-elements) for that key. So the
whole history is invalid for the model either way: the offline search is
exact for the verdict (`checker.cycles`). Cycles are only reported for
models that forbid incompatible-order (read committed and stronger); under
weaker ones only non-cycle anomalies are reported online. The type named
online is that of the cycle found; the final pass may name the history's
cycles otherwise (it searches every type, and drops a key with incompatible
reads), and its names are the verdict's.

A lost or stale write is reported at the first read that misses it
(`_missing`, with real-time edges only): T appended v to a key and completed
ok before R began, and R's read of the key lacks v. Then T -rt-> R, and R
-rw-> T: R's read is a prefix of the key's final list and v is not in it, so
v comes after all of it (shown by a later read, or never: offline places an
append no read saw after every element seen). Offline, that cycle runs
through the key's version order from R's read to v; if that order holds an
element of a failed transaction, offline cuts it there and reports the
aborted read (G1a, dirty-update) instead, which the same models forbid.

Non-cycle anomalies reported as they appear, each true of every extension:
incompatible-order (two reads of a key, neither a prefix of the other),
G1a (a read shows an append of a transaction that failed), G1b (a read ends
at an append its writer, which did not fail, went on to append past),
internal (a read that does not end with its own transaction's earlier
appends). Left to the final pass: duplicate elements and garbage reads (a
read showing an element whose append is not yet known: the key gets no more
edges online), appends no read saw, future and fuzzy reads, lost updates,
dirty updates, Adya's label-based types.

Memory (the forgetting rule). A transaction is forgotten only when it is a
*source* of the online graph: every edge into it came from a transaction
already forgotten. Forgetting a source never hides a cycle, now or later,
as long as no edge into it arrives afterwards: a cycle through it would
need an edge into it. So an edge that arrives later is handled by its ends:

- into a forgotten transaction (from any node, kept or forgotten): it might
  close a cycle the engine can no longer see. It is not guessed at: the
  engine records a *gap*, and the final verdict then comes from the offline
  pass;
- from a forgotten node into a kept one: dropped. Proof that nothing is
  missed: take a cycle through some forgotten node, and S its node
  forgotten first. The edge into S on the cycle was added before S was
  forgotten (then its source was forgotten earlier: S was a source among
  the kept; contradiction) or arrived after (a gap). So without gaps no
  cycle passes through a forgotten node, and neither does the dropped edge.
  (An earlier draft dropped edges between two forgotten nodes silently: a
  cycle among forgotten nodes closed later would have been missed.)

Which sources are forgotten is a choice of memory, not of soundness: at each
sweep (`_sweep`, when what is kept has doubled since the last, at least
`sweep` transactions, or when the micro-ops and elements their reads
returned have, at least `WEIGHT` per transaction of `sweep`: a run of long
final reads), the transactions that completed before every pending
transaction was invoked and have no edge in from a kept node, taken in
topological order, so a source's forgetting makes its successors sources in
the same pass; the barriers older than the newest, by the same rule. (An
rw edge still to come from a reader waiting at a key's frontier is not yet
an edge: if it arrives while its reader is kept, it is a gap; by then the
reader is usually forgotten too, and the edge dropped.) Why a strict serializable database's history
stays flat under it: every edge into T arrives by the time everything
invoked before T completed has completed (wr edges at the reader's
completion, real-time and process edges at T's own, ww and rw edges when a
read orders T's append), except an edge from a transaction invoked after T
completed, which real-time order makes a cycle (T precedes it), and which
therefore never arrives in a valid history. Under models without real-time
order the same rule forgets, but a valid history may then read an old
version whose writer is forgotten (a stale read is allowed there): a gap,
and the final pass is offline's. A history that keeps a transaction pending
forever keeps everything invoked after it.

**Appends no read has shown yet** (a key's last appends are often shown only by
the final read, long after their writers were forgotten). A writer that completes
(ok, or info) with such an append on key k is *registered*, and edges are added into
it from k's last element's writer and from every reader of k's whole known order, at
once and as they come (`_register`, `_pre`; kinds marked `PRE`). Each holds in every
extension in which k's reads stay compatible and no append of a failing transaction
comes before it: the append comes after every element read so far (lists only grow),
and offline adds the same edges for an append no read ever shows. A cycle through
such an edge is therefore not reported at once but held (a gap), since offline may
name the aborted read instead; it is reported when reads have shown every such
writer's appends, each after appends of committed transactions only (then the edges
are offline's: `_confirm`), and otherwise left to the final pass. A registered writer forgotten is
*floating*: it keeps (`floating`) its batch (the sweep that forgot it), a bit, and
`anc`, the floating writers of its batch that reach it (`_batch`; read from the graph
before any of the batch leaves it). When a later read places the
append, the edges into it from the order's last writer and readers are already
known; the only new edges are ww between consecutive newly shown appends (and from
the new last one into appends still unseen), between two floating writers. Such a
late edge a -> b is added when a's batch is earlier than b's, or the same and b is not
in anc(a) (then anc is updated for every floating writer of the batch that b
reaches); otherwise it is a gap. Why this hides no cycle: order the forgotten
transactions by batch, and within a batch topologically by its edges and the late
edges added. Every edge known when its target was forgotten runs from an earlier
batch or within the batch; every added late edge agrees with this order, and anc
being exact for paths inside a batch (a path between two nodes of one batch never
leaves it: an edge only runs into a later batch or into kept nodes, and none runs
from a kept node into a forgotten one without a gap), no added late edge closes a
cycle. Why a strict serializable history gets no gap: a late ww edge a -> b means a's
append committed first, so a was invoked before b completed; the sweep forgets a
registered writer only in the batch of, or after, every registered writer of its keys
invoked before it completed (`_sweep`'s rivals), so a's batch is not later than b's,
and within one batch b cannot reach a without a cycle. This waits only on the few
registered writers of the same keys (a strict serializable database shows them to
the next read), never on everything after the writer. An info writer whose append
no read has shown is not in offline's graph unless a later read shows it: an edge
into it that cannot be added marks it *incomplete* instead of a gap, and a gap
follows only if a read then shows its append.

A key is forgotten when every transaction that named it is, at two sweeps
in a row with no transaction naming it between (`quiet`: a key still in use
may have no transaction kept for a moment, and an append to a forgotten key
is a gap, its order being gone; one sweep later costs only the memory of the
keys named in one sweep's span): its version order becomes a summary (`dead`: the order's length and hash, and the
appends no read had shown yet, with their writers' status), so a later read
of it (a final read) is checked: the same prefix, then only appends it
knew; anything else is a gap. Real-time edges are kept for every model that
gets cycles online (so that cycles a weaker model allows are seen, as
offline sees them: their edge then leaves a gap).

What stays, then, beyond the transactions not yet forgettable: each
forgotten key's summary (JSON, `_pack`, some 85 bytes) until the end, and each
floating writer's record (one packed 64-bit int, `_float`) until a read shows
its appends. Neither can go sooner without a gap: a final read of the key may
come at any time and must be checked against the order and the appends it
left unseen. Both are held in a `Spill` (`checker/online/spill.py`): a
private temporary SQLite database, whose page cache is bounded, so they grow a
file, not the process (`sleuth sim` retires 39 keys per 1,000 transactions,
whose last appends, 1.7 floating writers a key, only the final reads show: as
Python objects, some 15 MiB a million transactions). In memory stays a
batch's state while any of its writers floats (`_batch`: the ancestors inside
the batch, as their difference from real-time order, marshalled: a few ints
and some hundreds of bytes a batch).

**Certified verdicts.** When the history ends (`finish`), the edges offline
adds for appends no read saw are presented, and `certified()` is true when
the engine found nothing, named nothing it left unreported (a type the
model allows is a gap too: offline lists it), and has no gap. Then the
offline checker would find no anomaly of any type: every edge of the
offline graph was presented online (the derivations above are offline's,
edge by edge, including the real-time order), none closed a cycle, none was
lost to forgetting, and the non-cycle anomalies offline looks for are
either checked here or recorded as gaps when their conditions appear
(fuzzy and future reads, lost-update candidates, garbage and duplicate
elements, a read of a failed or intermediate append of a forgotten key,
two or more appends no read saw on one key, whose orders the offline search
tries both ways). `sleuth check --follow` then takes the verdict from the
engine and skips the offline pass; otherwise it runs it.
"""

from __future__ import annotations

import marshal
from typing import Any

import orjson

from sleuth.checker import graph as g
from sleuth.checker import models, txn
from sleuth.checker.list_append import _reads_against_own, _show
from sleuth.checker.online import Found, lines_of, now
from sleuth.checker.online.order import Order
from sleuth.checker.online.spill import Spill
from sleuth.history.jsonl import History, Op, as_written

MAX_REPORTS = 8  # cycles reported online per type; the rest are counted
SWEEP = 2_000  # transactions kept before the first sweep (see "Memory" above)
MAX_HELD = 1_000  # cycles held for reads to confirm (`_confirm`); beyond, the final pass finds them
WEIGHT = 50  # or micro-ops and elements read by them, per transaction of SWEEP (`_weight`)
MISSING = "acknowledged-append-missing"  # `Engine._missing`'s rule
PRE = 8  # added to an edge's kind: an edge into a registered writer, true before any read places it


# A floating writer's record, packed in one 64-bit int (held in a `Spill`, out of Python
# objects: a sim history has 68,000 floating writers per million transactions until its
# final reads): bit 0 incomplete, bit 1 info (the writer completed info), bits 2-25 its bit
# in its batch, bits 26-49 its batch, bits 50-62 how many of its registered appends no read
# has shown. A writer whose fields would not fit is not made floating (an edge into it is
# then a gap: sound, and never met below 16 million batches).
_INCOMPLETE, _INFO, _BIT, _NB, _LEFT = 1, 2, 2, 26, 50
_M24 = (1 << 24) - 1
_MAXLEFT = 1 << 13
_LEFT1 = 1 << _LEFT


def _float(batch: int, bit: int, left: int, info: bool) -> int:
    return left << _LEFT | batch << _NB | bit << _BIT | (_INFO if info else 0)


def _batch(ok: int, ancs: list[int]) -> list:
    """A batch's floating writers' ancestors in it, as kept: `ancs[bit]` is the set of bits
    of those that reach writer `bit` (bits in the batch's topological order, so all below
    `bit` at first); `ok` those of the writers that completed ok. Kept as [ok, live, d]:
    `live` the bits still floating, and `d`, for each writer whose set differs from its
    *reference* (every ok writer below it), the difference (xor). Real-time order makes
    every writer that completed before another began its ancestor, so a set mostly is its
    reference: in a sim history, half of them exactly, the rest by one to five bits of
    the writers concurrent with it, where the sets themselves hold some 70 bits in a batch
    of 140 writers (700 of 1,400 with sweeps from 20,000; held whole, they cost more than
    the rest of the engine's memory).
    And d is kept marshalled (one bytes object, a fifth of a dict's size; only a late
    edge into the batch reads it). A writer shown (`_revealed`) leaves `live`; its entry
    in d stays, read by nobody, until the batch goes."""
    d = {}
    for bit, a in enumerate(ancs):
        x = a ^ (ok & ((1 << bit) - 1))
        if x:
            d[bit] = x
    return [ok, (1 << len(ancs)) - 1, marshal.dumps(d) if d else b""]


def _anc(batch: list, bit: int) -> int:
    """The ancestors (bits) of writer `bit` of a batch kept by `_batch`."""
    ok, _, d = batch
    return (ok & ((1 << bit) - 1)) ^ (marshal.loads(d).get(bit, 0) if d else 0)


def _join(batch: list, ab: int, bb: int) -> bool:
    """The late edge a -> b between two floating writers of one batch (their bits): False
    if b reaches a (the edge would close a cycle: not added); else True, and every writer
    that b reaches (b, and those with b among their ancestors) gets a and a's ancestors,
    so the sets stay exact for the paths the late edges make. Only these can change: the
    writers in d, b, and, when b completed ok (so in the reference of every writer above
    it), the writers above b below new's highest bit (above it, the reference holds new
    already), or all above b when new holds a writer that did not complete ok (in no
    reference). The others keep their sets."""
    ok, live, packed = batch
    d = marshal.loads(packed) if packed else {}
    anc_a = (ok & ((1 << ab) - 1)) ^ d.get(ab, 0)
    if anc_a >> bb & 1:
        return False
    new = anc_a | (1 << ab)
    ws = set(d)
    ws.add(bb)
    top = live.bit_length()
    if ok >> bb & 1:
        ws.update(range(bb + 1, top if new & ~ok else min(new.bit_length(), top)))
    for w in ws:
        if not live >> w & 1:
            continue
        ref = ok & ((1 << w) - 1)
        x = ref ^ d.get(w, 0)
        if (w == bb or x >> bb & 1) and new & ~x:
            y = (x | new) ^ ref
            if y:
                d[w] = y
            else:
                d.pop(w, None)
    batch[2] = marshal.dumps(d) if d else b""
    return True


def _weight(value: Any) -> int:
    """A completed transaction's micro-ops and the elements its reads returned: what keeping
    it costs (a final read of 64 keys of 32 elements weighs a hundred ordinary
    transactions: 6,000 of them kept until the next sweep by count held 140 MiB)."""
    if type(value) is not list:
        return 0
    return len(value) + sum(len(m[2]) for m in value  # (micro-ops are tuples as read by `follow`)
                            if type(m) in (list, tuple) and len(m) == 3 and m[0] == "r" and type(m[2]) is list)


def _pack(summary: list) -> bytes:
    """A forgotten key's summary as JSON, in a bytes object of its own size. orjson.dumps
    returns its working buffer (4 KiB, not shrunk: 39,000 summaries per million
    transactions of a sim history made 160 MiB), so it is copied once to its length."""
    return bytes(memoryview(orjson.dumps(summary)))


class Engine:
    def __init__(self, history: History, model: str, report, sweep: int = SWEEP):
        self.history = history
        self.model = model = models.canonical(model)
        self.report = report
        self.cycles = models.forbids(model, models.INCOMPATIBLE_ORDER)
        # real-time edges for every model that gets cycles: offline's graph has them whatever
        # the model, so a cycle a weaker model allows is seen (a gap: offline lists it)
        self.realtime = self.cycles
        # process order is real-time order (a process runs one operation at a time): with
        # real-time edges, process edges would only repeat some of them
        self.process = False
        self.ops: dict[int, Op] = {}  # op id -> op, for the transactions kept
        self.n = 0  # transactions invoked
        self.sweep = sweep
        self.next_sweep = sweep  # sweep when this many transactions are kept
        self.weight = 0  # micro-ops and elements read of the ok transactions kept (`_weight`)
        self.next_weight = sweep * WEIGHT  # or when their weight reaches this
        self.forgotten = 0
        self.gaps: dict[str, int] = {}  # why the final verdict needs the offline pass -> how often
        self.dead = Spill()  # forgotten key -> its summary (`_forget_key`), out of Python objects
        self.unseen_status: dict[Any, dict] = {}  # key -> unseen value -> (status, id) of a forgotten writer
        self.observed: set[int] = set()  # info (or then pending) writers some read showed
        self.lost: dict[Any, dict] = {}  # key -> (length, last) of a version read and appended past -> txn
        self.ok = 0
        self.data_edges = 0
        self.touched: dict[Any, int] = {}  # key -> the last transaction that named it
        self.barriers: list[tuple[int, int]] = []  # (barrier, transactions invoked when it was made)
        self.writer: dict[Any, dict[Any, int]] = {}  # key -> value -> op id
        self.intermediate: dict[Any, set] = {}  # key -> values appended past in their own txn
        self.order: dict[Any, list] = {}  # key -> known order (the longest read so far)
        self.seen: dict[Any, set] = {}  # key -> its known order's elements
        self.frontier: dict[Any, list[int]] = {}  # key -> readers of its whole known order
        self.broken: set = set()  # keys left to the final pass
        self.pending: set[int] = set()
        self.waiting: dict[int, list[tuple]] = {}  # pending op id -> what waits for it to complete
        self.graph = Order()
        self.barrier = 0  # the newest barrier node (-1, -2, ...); 0: none yet
        self.barrier_used = False  # something was invoked since it was made
        self.before: dict[int, int] = {}  # op id -> the newest barrier when it was invoked
        self.last_of: dict[Any, int] = {}  # process -> its last transaction in the graph
        self.counts: dict[str, int] = {}
        self.found: list[Found] = []
        self.line = 0
        self.time: int | None = None
        self.reported_g1a: set = set()
        self.acked: dict[Any, list[tuple[int, Any, int]]] = {}  # key -> (completion, value, txn) of ok appends
        self.reported_missing: set = set()
        # appends no read has shown yet, of writers that completed (ok or info): key -> value -> txn
        # ("registered": the edges every extension orders before them are added, see "Memory")
        self.unseen_w: dict[Any, dict[Any, int]] = {}
        self.barrier_pos: dict[int, int] = {}  # barrier -> the position of the completion that made it
        # forgotten registered writer -> its record packed in one int (`_float`): batch, bit,
        # appends still unseen, info, incomplete (out of Python objects: `Spill`)
        self.floating = Spill()
        # batch -> [ok, live, d]: its floating writers' `anc`, by bit (`_batch`): ok the bits
        # of the writers that completed ok, live those still floating, d (marshalled) bit ->
        # anc ^ (ok below bit), where it is not 0
        self.batches: dict[int, list] = {}
        self.quiet: dict[Any, int] = {}  # key all of whose namers are forgotten -> its last namer
        self.nbatch = 0
        # cycles through edges into registered writers, held until reads confirm those edges
        self.held: list[tuple[list, set[int]]] = []
        self.held_by: dict[int, list] = {}  # registered writer -> the held cycles waiting on it
        self.confirmed: set[int] = set()  # writers whose incoming registered edges reads confirmed
        self.unclean: set[int] = set()  # registered writers shown after an append not committed
        self.first_dirty: dict[Any, int] = {}  # key -> where its order first shows such an append

    # -- events ---------------------------------------------------------------

    def invoked(self, op: Op, time: int) -> None:
        i = op.id
        self.ops[i] = op
        self.n += 1
        if len(self.ops) >= self.next_sweep or self.weight >= self.next_weight:
            self._sweep()
        h = self.history
        self.pending.add(i)
        if self.cycles:
            # a node from its invoke, so the order follows invocations: an edge to a
            # transaction observed late is then no edge against the order (no edge reaches it
            # before it completes; one that failed is dropped then)
            self.graph.node(i)
        if self.realtime and self.barrier:
            self.before[i] = self.barrier
            self.barrier_used = True
        if op.f != "txn":
            raise h.error(op.invoke_pos, f"list-append histories hold txn operations, not {op.f!r}")
        value = op.invoke_value
        if type(value) is not list:
            raise h.error(op.invoke_pos, f"a list-append txn value must be a list of micro-ops, got {value!r}")
        own: dict = {}
        writer, touched, broken = self.writer, self.touched, self.broken
        try:
            for mop in value:
                if (type(mop) is not tuple and type(mop) is not list) or len(mop) != 3:
                    raise h.error(op.invoke_pos, f"bad micro-op {as_written(mop)!r}: expected [f, key, value]")
                f, k, v = mop
                # (a live key is not forgotten: `touched` holds the live keys, and forgotten
                # ones only once left to the final pass; `dead` is asked of the others)
                dead = (k not in touched or k in broken) and k in self.dead
                if not dead:  # (a forgotten key's reads are checked against its summary)
                    touched[k] = i
                if f == "append":
                    if dead:  # a forgotten key appended to again: its order is gone
                        self._gap("append to a forgotten key")
                        self.broken.add(k)
                    wk = writer.get(k)
                    if wk is None:
                        writer[k] = {v: i}
                    elif v in wk:
                        other = self.ops.get(wk[v])
                        also = "earlier" if other is None else f"at line {h.line_of(other.invoke_pos)}"
                        raise h.error(op.invoke_pos, f"value {v!r} appended to key {k!r} twice (also "
                                                     f"{also}); list-append needs unique values")
                    else:
                        wk[v] = i
                    if k in own:
                        self.intermediate.setdefault(k, set()).add(own[k])
                    own[k] = v
                elif f != "r":
                    raise h.error(op.invoke_pos, f"unknown micro-op {f!r} in {as_written(mop)!r} "
                                                 "(expected append or r)")
                else:
                    hash(k)
        except TypeError:
            raise h.error(op.invoke_pos, "keys and appended values must be scalars: "
                                         f"{as_written(value)!r}") from None

    def completed(self, op: Op, time: int) -> None:
        i = op.id
        self.pending.discard(i)
        self.line = self.history.line_of(op.complete_pos)
        self.time = time
        typ = op.type
        if typ == "fail":
            self.before.pop(i, None)
            if i in self.graph:
                self.graph.forget(i)  # no edge has reached it: edges wait for their ends to complete
            for item in self.waiting.pop(i, ()):
                if item[0] == "seen":  # a read showed an append of this txn: G1a
                    self._g1a(*item[1:])
            return
        self._settled(i)
        if typ == "ok":
            self.ok += 1
            if self.realtime:
                if not self.barrier or self.barrier_used:
                    b = self.barrier - 1
                    self.graph.node(b)
                    if self.barrier:
                        self.graph.add(self.barrier, b, g.REALTIME)
                    self.barrier, self.barrier_used = b, False
                    self.barriers.append((b, self.n))
                    self.barrier_pos[b] = op.complete_pos
                self._edge(i, self.barrier, g.REALTIME)
        for item in self.waiting.pop(i, ()):
            if item[0] == "edge":
                self._edge(*item[1:])
            elif item[0] == "g1b":
                self._g1b(*item[1:])
        if self.cycles:
            self._register(op)
        if typ == "ok":
            if self.realtime:
                acked, pos = self.acked, op.complete_pos
                for f, k, v in op.value if type(op.value) is list else ():
                    if f == "append":
                        acked.setdefault(k, []).append((pos, v, i))
            self._reads(op)
            self.weight += _weight(op.value)

    # -- reads ----------------------------------------------------------------

    def _reads(self, op: Op) -> None:
        h, i = self.history, op.id
        value = op.value
        if type(value) is not list:
            return  # offline names the problem (a completion's value that is not micro-ops)
        keys = set()
        reads = []
        for mop in value:
            if (type(mop) is not tuple and type(mop) is not list) or len(mop) != 3:
                raise h.error(op.complete_pos, f"bad micro-op {as_written(mop)!r}: expected [f, key, value]")
            f, k, v = mop
            keys.add(k)
            if f == "r":
                if v is None:
                    v = []
                elif type(v) is not list:
                    raise h.error(op.complete_pos, f"read of key {k!r} returned {v!r}, not a list")
                reads.append((k, v))
        if len(keys) < len(value):
            reads = []
            own: dict = {}
            for f, k, v in value:
                if f == "append":
                    own.setdefault(k, []).append(v)
            for k, read, n, r, problem in _reads_against_own(value):
                mine = own.get(k, ())
                if read and len(mine) > n and any(v in read for v in mine[n:]):
                    self._gap(models.FUTURE_READ)  # offline names it (a read showing its own later append)
                if problem == models.FUZZY_READ:
                    self._gap(models.FUZZY_READ)
                if mine and problem != models.INTERNAL:  # read this version and appended past it
                    version = (len(r), r[-1] if r else None)
                    other = self.lost.setdefault(k, {}).setdefault(version, i)
                    if other != i:
                        self._gap(models.LOST_UPDATE)
                if problem == models.INTERNAL:
                    self._emit(models.INTERNAL, [op], f"{txn.txn_label(h, op)} read key {k!r} = {_show(read)}, "
                                                 "but its own earlier micro-ops imply a list ending with "
                                                 "its own appends")
                    continue
                reads.append((k, r))
        touched, broken = self.touched, self.broken
        for k, r in reads:
            try:
                if k not in touched and k not in broken and k in self.dead:
                    self._read_dead(i, k, r)
                    continue
                touched[k] = i
                self._read(i, k, r)
            except TypeError:  # an unhashable element: offline names it
                self._gap("unhashable element")
                self.broken.add(k)

    def _read(self, i: int, k: Any, r: list) -> None:
        if k in self.broken:
            self._gap("read of a key left to the final pass")
            return
        if self.realtime and k in self.acked:
            self._missing(i, k, r)
        o = self.order.get(k)
        if o is None:
            o = self.order[k] = []
            self.seen[k] = set()
            self.frontier[k] = []
        m, n = len(r), len(o)
        if m <= n:
            if o[:m] != r:
                return self._incompatible(i, k, r, o)
        else:
            if r[:n] != o:
                return self._incompatible(i, k, r, o)
            new = r[n:]
            seen, wk = self.seen[k], self.writer.get(k, {})
            if len(set(new)) != len(new) or not seen.isdisjoint(new) or not all(v in wk for v in new):
                self.broken.add(k)  # duplicates or an unknown append: the final pass judges
                self._gap("duplicate or unknown element")
                return
            uw = self.unseen_w.get(k)
            first = wk[new[0]]
            # a registered writer already has its edges from the order's last writer and its
            # readers (added as they came: see "Memory")
            known = uw is not None and uw.get(new[0]) == first and not self._incomplete(first)
            o.extend(new)
            seen.update(new)
            ws = [wk[v] for v in o[max(n - 1, 0):]]
            for a, b in zip(ws[1:] if known and n else ws, ws[2:] if known and n else ws[1:]):
                self._edge(a, b, g.WW)
            if not known:
                for reader in self.frontier[k]:
                    self._edge(reader, first, g.RW)
            self.frontier[k] = []
            if k not in self.first_dirty:
                for at, v in enumerate(new, n):
                    if not self._committed(k, v):
                        self.first_dirty[k] = at
                        break
            if uw:
                shown = []
                for at, v in enumerate(new, n):
                    w = uw.pop(v, None)
                    if w is not None:
                        shown.append(w)
                        if self.first_dirty.get(k, at + 1) <= at:
                            self.unclean.add(w)  # an append not (yet) committed up to it
                last = wk[o[-1]]
                for w in list(uw.values()):
                    self._pre(last, w, g.WW + PRE)
                for w in shown:
                    self._revealed(w)
                    if w in self.held_by:
                        self._confirm(w)
            ops = self.ops
            for v in new:
                w = wk[v]
                wo = ops.get(w)
                if wo is None:
                    st = self.unseen_status.get(k, {}).get(v, ("ok",))[0]
                    if st == "info":
                        self.observed.add(self.unseen_status[k][v][1])
                    elif st == "fail":
                        self._gap("G1a with a forgotten end")
                elif w in self.pending or wo.type == "info":
                    self.observed.add(w)
                if w in self.pending:
                    self.waiting.setdefault(w, []).append(("seen", k, v, i, r))
                else:
                    self._seen_settled(k, v, i, r)
        if m:
            last = self.writer[k][r[-1]]
            self._edge(last, i, g.WR)
            if r[-1] in self.intermediate.get(k, ()) and last != i:
                if last in self.pending:
                    self.waiting.setdefault(last, []).append(("g1b", k, r[-1], i, r))
                elif last in self.ops and self.ops[last].type != "fail":
                    self._g1b(k, r[-1], i, r)
        if m < len(o):
            self._edge(i, self.writer[k][o[m]], g.RW)
        else:
            self.frontier[k].append(i)
            for w in list(self.unseen_w.get(k, {}).values()):
                self._pre(i, w, g.RW + PRE)

    def _missing(self, i: int, k: Any, r: list) -> None:
        """A read without an append that was acknowledged before the reader began (a lost or
        stale write): T -rt-> R, and R -rw-> T because lists only grow (R's read is a prefix
        of the key's final list, without T's element, which comes after all of it, whether
        a later read shows it or none does). A cycle in every extension; the offline check
        finds it through the order of the key's versions (appends no read saw come after
        every one seen)."""
        began = self.ops[i].invoke_pos
        rset = None
        for done, v, t in self.acked[k]:
            if done > began:
                break
            if rset is None:
                rset = set(r)
            if v not in rset and (k, v) not in self.reported_missing:
                self.reported_missing.add((k, v))
                ta, tr = self.ops.get(t), self.ops[i]
                if ta is None:  # forgotten
                    continue
                name = self._admit([(t, i, g.REALTIME), (i, t, g.RW)])
                if name is None:
                    return
                h = self.history
                self._emit(name, [ta, tr],
                           f"{name}: {txn.BASE_SENTENCE[models.G_SINGLE]}, closed by real-time order; 2 transactions.\n"
                           f"{txn.txn_label(h, ta)} < {txn.txn_name(tr)} (realtime) because "
                           f"{self._why(t, i, g.REALTIME)}.\n"
                           f"{txn.txn_label(h, tr)} < {txn.txn_name(ta)} (rw) because {txn.txn_name(tr)} read key "
                           f"{k!r} = {_show(r)} without {v!r}, which {txn.txn_name(ta)} appended and committed "
                           "before it began (lists only grow: that append comes after everything the read saw; "
                           "a lost write if no read ever shows it, a stale read if one does).\n"
                           f"So {txn.txn_name(ta)} would have to come before itself: no serial order exists.",
                           counted=True, rule=MISSING)

    def _seen_settled(self, k: Any, v: Any, i: int, r: list) -> None:
        """A read (by op i, of key k, = r) showed v, whose writer has completed: G1a if it failed."""
        w = self.ops.get(self.writer.get(k, {}).get(v))
        if w is not None and w.type == "fail":
            self._g1a(k, v, i, r)

    def _g1a(self, k: Any, v: Any, i: int, r: list) -> None:
        if (k, v) in self.reported_g1a:
            return
        h, w = self.history, self.ops.get(self.writer.get(k, {}).get(v))
        if w is None or i not in self.ops:  # forgotten meanwhile: the final pass reports it
            self._gap("G1a with a forgotten end")
            return
        self.reported_g1a.add((k, v))
        self._emit(models.G1A, [self.ops[i], w],
                   f"{txn.txn_label(h, self.ops[i])} read key {k!r} = {_show(r)}, observing {v!r}, appended "
                   f"by {txn.txn_label(h, w)}, which failed (aborted read)")

    def _g1b(self, k: Any, v: Any, i: int, r: list) -> None:
        h, w = self.history, self.ops.get(self.writer.get(k, {}).get(v))
        if w is None or i not in self.ops:  # forgotten meanwhile: the final pass reports it
            self._gap("G1b with a forgotten end")
            return
        self._emit(models.G1B, [self.ops[i], w],
                   f"{txn.txn_label(h, self.ops[i])} read key {k!r} = {_show(r)}, ending at {v!r}, an "
                   f"intermediate append of {txn.txn_label(h, w)}, which went on to append past it "
                   "(intermediate read)")

    def _incompatible(self, i: int, k: Any, r: list, o: list) -> None:
        self.broken.add(k)
        h = self.history
        self._emit(models.INCOMPATIBLE_ORDER, [self.ops[i]],
                   f"{txn.txn_label(h, self.ops[i])} read key {k!r} = {_show(r)} but an earlier read "
                   f"showed {_show(o)}: neither is a prefix of the other, so the key's elements have no "
                   "single order")

    # -- the graph ----------------------------------------------------------

    def _settled(self, i: int) -> None:
        """Transaction i completed ok or info: its real-time and process predecessors."""
        gr = self.graph
        if i not in gr:
            return
        b = self.before.pop(i, None)
        if b is not None and b in gr:  # (a barrier forgotten meanwhile: the edge is dropped)
            self._add(b, i, g.REALTIME)
        if self.process:
            p = self.ops[i].process
            prev = self.last_of.get(p)
            if prev is not None and prev in gr:
                self._add(prev, i, g.PROCESS)
            self.last_of[p] = i

    def _edge(self, a: int, b: int, kind: int) -> None:
        """Add a -> b once both have happened (a, b: op ids, or barriers < 0)."""
        if a == b or not self.cycles:
            return
        pending = self.pending
        if a in pending or b in pending:
            self.waiting.setdefault(a if a in pending else b, []).append(("edge", a, b, kind))
            return
        gr = self.graph
        order = gr.ord
        if kind != g.REALTIME and kind != g.PROCESS:
            self.data_edges += 1
        if a not in order or b not in order:  # failed, or forgotten (a barrier too)
            if b < 0 or b not in self.ops:  # into a forgotten node (see "Memory")
                if not self._late(a, b):
                    self._gap("edge into a forgotten transaction")
            return
        if order[a] < order[b]:  # agrees with the order: the common case, inline
            gr.out[a].append((b, kind))
            gr.into[b].append(a)
        else:
            self._add(a, b, kind)

    def _add(self, a: int, b: int, kind: int) -> None:
        cycle = self.graph.add(a, b, kind)
        if cycle is not None:
            self._cycle(cycle)

    def _cycle(self, path: list[tuple[int, int, int]]) -> None:
        # start at a transaction, then read each run through barriers as one real-time edge
        at = next(j for j, (a, _, _) in enumerate(path) if a >= 0)
        path = path[at:] + path[:at]
        cycle: list[tuple[int, int, int]] = []
        start = None
        for a, b, kind in path:
            if a >= 0 and b >= 0:
                cycle.append((a, b, kind))
            elif a >= 0:
                start = a
            elif b >= 0:
                cycle.append((start, b, g.REALTIME))
        pre = {b for _, b, k in cycle if k >= PRE}
        if pre - self.confirmed:
            held = pre.isdisjoint(self.unclean) and len(self.held) < MAX_HELD
            # through an edge into a registered writer: true in every extension unless an
            # append of a transaction that fails comes first (offline then cuts the key's
            # order there and names the aborted read instead): held until reads show the
            # writers' appends after nothing but committed ones (`_confirm`); the final pass
            # judges it if they never do
            self._gap("a cycle through an append no read has shown")
            if held:
                held = (cycle, pre)
                self.held.append(held)
                for w in pre - self.confirmed:
                    self.held_by.setdefault(w, []).append(held)
            return
        self._report_cycle([(a, b, k - PRE if k >= PRE else k) for a, b, k in cycle])

    def _report_cycle(self, cycle: list[tuple[int, int, int]]) -> None:
        name = self._admit(cycle)
        if name is None:
            return
        h, ops = self.history, self.ops
        steps = [f"{txn.txn_label(h, ops[a])} < {txn.txn_name(ops[b])} ({g.KIND_NAMES[k]}) because "
                 f"{self._why(a, b, k)}." for a, b, k in cycle]
        text = (f"{name}: {txn.BASE_SENTENCE[name.split(models.REALTIME)[0].split(models.PROCESS)[0]]}; "
                f"{len(cycle)} transactions.\n" + "\n".join(steps)
                + f"\nSo {txn.txn_name(ops[cycle[0][0]])} would have to come before itself: "
                  "no serial order exists.")
        self._emit(name, [ops[a] for a, _, _ in cycle], text, counted=True)

    def _why(self, a: int, b: int, kind: int) -> str:
        ta, tb = self.ops[a], self.ops[b]
        na, nb = txn.txn_name(ta), txn.txn_name(tb)
        h = self.history
        if kind == g.REALTIME:
            return (f"{na} completed (line {h.line_of(ta.complete_pos)}) before {nb} began "
                    f"(line {h.line_of(tb.invoke_pos)})")
        if kind == g.PROCESS:
            return f"both ran on process {ta.process}, and {nb} began after {na} completed"
        appends_a = [(k, v) for f, k, v in ta.invoke_value if f == "append"]
        appends_b = [(k, v) for f, k, v in tb.invoke_value if f == "append"]
        if kind == g.WW:
            for k, v in appends_a:
                o = self.order.get(k, [])
                for k2, w in appends_b:
                    if k2 == k and v in self.seen.get(k, ()) and w in self.seen[k] \
                            and o.index(w) == o.index(v) + 1:
                        return f"{nb} appended {w!r} to key {k!r} right after {na}'s append of {v!r}"
        if kind == g.WR:
            for f, k, r in tb.value:
                if f == "r" and r and self.writer.get(k, {}).get(r[-1]) == a:
                    return f"{nb} observed {na}'s append of {r[-1]!r} to key {k!r} (read {_show(r)})"
        if kind == g.RW:
            for f, k, r in ta.value:
                o = self.order.get(k)
                if f != "r" or o is None:
                    continue
                for k2, w in appends_b:
                    if k2 == k and len(r or ()) < len(o) and o[len(r or ())] == w:
                        return (f"{na} read key {k!r} = {_show(r or [])}, missing {w!r}, which {nb} "
                                "appended next (so it was not yet there)")
        return f"{na} precedes {nb} ({g.KIND_NAMES[kind]})"

    def _admit(self, cycle: list) -> str | None:
        """The name of `cycle` if it is to be reported: the model forbids it and fewer than
        MAX_REPORTS of that name were reported (counted here); else None."""
        name = txn.classify(cycle)
        if not models.forbids(self.model, name):
            self._gap(f"{name} (allowed by the model)")  # its edge is not added; offline lists it
            return None
        self.counts[name] = self.counts.get(name, 0) + 1
        return name if self.counts[name] <= MAX_REPORTS else None

    def _emit(self, name: str, ops: list[Op], explanation: str, counted: bool = False,
              rule: str | None = None) -> None:
        if not models.forbids(self.model, name):
            self._gap(f"{name} (allowed by the model)")
            return
        if not counted:
            self.counts[name] = self.counts.get(name, 0) + 1
        found = Found(name, self.line, self.time, now(), explanation, lines_of(self.history, ops, self.line),
                      rule)
        self.found.append(found)
        self.report(found)

    # -- memory (see "Memory" above) -------------------------------------------

    def _gap(self, why: str) -> None:
        """Something the engine did not decide: the final verdict needs the offline pass."""
        self.gaps[why] = self.gaps.get(why, 0) + 1

    def _sweep(self) -> None:
        """Forget a *batch* (see "Memory"): the transactions that completed before every
        pending one was invoked, and the barriers but the newest, that have no kept
        predecessor outside the batch and before whose completion (a barrier: creation)
        every transaction invoked is in the batch or forgotten. Found as a greatest
        fixpoint (drop what breaks a rule until nothing does), forgotten in topological
        order; a registered writer among them becomes *floating*, with the batch's
        floating writers that reach it (`anc`). Then the keys every namer of which is
        forgotten. Next sweep when what is kept has doubled."""
        ops, gr, pending = self.ops, self.graph, self.pending
        oldest = min((ops[p].invoke_pos for p in pending), default=None)
        ord_, into = gr.ord, gr.into
        batch = {i for i, op in ops.items()
                 if i not in pending and op.complete_pos is not None
                 and (oldest is None or op.complete_pos < oldest)}
        batch.update(b for b, _ in self.barriers if b != self.barrier and b in ord_)
        cands = sorted(batch, key=lambda n: ord_.get(n, -1))  # failed transactions (no node) first
        # a registered writer waits for the registered writers of its keys invoked before it
        # completed (one of them may come right before it in the key's order: see "Memory")
        uw = self.unseen_w
        rivals = {}
        for k, vw in uw.items():
            if len(vw) > 1:
                for w in vw.values():
                    if w in batch:
                        rivals.setdefault(w, set()).update(x for x in vw.values() if x != w and x in ops)
        while True:
            before = len(batch)
            for n in cands:
                if n not in batch:
                    continue
                if not batch.issuperset(into.get(n, ())):
                    batch.discard(n)
                elif n in rivals:
                    done = ops[n].complete_pos
                    if any(x not in batch and ops[x].invoke_pos < done for x in rivals[n]):
                        batch.discard(n)
            cands = [n for n in cands if n in batch]
            if len(batch) == before:
                break
        if cands:
            self.nbatch += 1
            nb, anc, bits, ok = self.nbatch, {}, {}, 0
            floating = self.floating
            # each node's floating ancestors in the batch (as bits), from its edges in: read
            # before any node of the batch leaves the graph (forgetting a node drops its edges,
            # so a node forgotten first would no longer be among its successors' predecessors)
            for n in cands:
                a = 0
                for p in into.get(n, ()):
                    a |= anc.get(p, 0)
                    bp = bits.get(p)
                    if bp is not None:
                        a |= 1 << bp
                left = self._registered(n) if n >= 0 else 0
                if left and len(bits) <= _M24 and nb <= _M24 and left < _MAXLEFT:
                    info = ops[n].type == "info"
                    floating[n] = _float(nb, len(bits), left, info)
                    if not info:
                        ok |= 1 << len(bits)
                    bits[n] = len(bits)
                if a:
                    anc[n] = a
            if bits:
                self.batches[nb] = _batch(ok, [anc.get(n, 0) for n in bits])
            gr.forget_all([n for n in cands if n in ord_])
            for n in cands:
                if n >= 0:
                    self._forget_txn(n)
                else:
                    self.barrier_pos.pop(n, None)
        self.barriers = [(b, m) for b, m in self.barriers if b in ord_]
        quiet = {}
        for k in [k for k, t in self.touched.items() if t not in ops]:
            if k in self.broken:
                continue  # its reads are the final pass's: a later read of it is a gap
            wk = self.writer.get(k, {})
            if any(w in ops for w in wk.values()) or any(r in ops for r in self.frontier.get(k, ())):
                continue
            t = self.touched[k]
            if self.quiet.get(k) == t:  # no transaction named it since the last sweep either
                self._forget_key(k)
            else:
                quiet[k] = t
        self.quiet = quiet
        # held cycles through a forgotten transaction can no longer be reported online
        self.confirmed &= ops.keys()
        self.unclean &= ops.keys()
        self.held = [h for h in self.held if all(a in ops for a, _, _ in h[0])]
        self.held_by = {}
        for h in self.held:
            for w in h[1] - self.confirmed:
                self.held_by.setdefault(w, []).append(h)
        self.next_sweep = max(self.sweep, 2 * len(ops))
        self.weight = sum(_weight(op.value) for op in ops.values() if op.type == "ok")
        self.next_weight = max(self.sweep * WEIGHT, 2 * self.weight)

    def _registered(self, i: int) -> int:
        """How many appends of transaction i are registered (completed, no read shows them)."""
        op = self.ops[i]
        value = op.value if op.type == "ok" else op.invoke_value
        n = 0
        for mop in value if type(value) is list else ():
            if mop[0] == "append" and self.unseen_w.get(mop[1], {}).get(mop[2]) == i:
                n += 1
        return n

    def _register(self, op: Op) -> None:
        """Transaction `op` completed (ok or info): each of its appends no read has shown
        is registered, and ordered after the key's last element's writer and after every
        reader of the key's whole known order (true in every extension: see "Memory")."""
        i = op.id
        if i not in self.graph:
            return
        value = op.value if op.type == "ok" else op.invoke_value
        for mop in value if type(value) is list else ():
            if (type(mop) is not list and type(mop) is not tuple) or len(mop) != 3 or mop[0] != "append":
                continue
            _, k, v = mop
            try:
                if k in self.broken or (k not in self.touched and k in self.dead) or v in self.seen.get(k, ()) \
                        or self.writer.get(k, {}).get(v) != i:
                    continue
            except TypeError:
                continue
            self.unseen_w.setdefault(k, {})[v] = i
            o = self.order.get(k)
            if o:
                self._edge(self.writer[k][o[-1]], i, g.WW + PRE)
            for r in self.frontier.get(k, ()):
                self._edge(r, i, g.RW + PRE)

    def _pre(self, a: int, w: int, kind: int) -> None:
        """a precedes the registered writer w (a read of its key without w's append, or the
        key's new last element). Into a forgotten info writer from a kept node the edge is
        not added but w is marked *incomplete*: it holds only if a later read shows w's
        append (a crashed transaction may never have taken effect), and then it is a gap."""
        if w not in self.ops:
            fw = self.floating.get(w)
            if fw is not None and fw & _INFO and w not in self.observed:
                if a in self.graph or not self._late(a, w):
                    self.floating[w] = fw | _INCOMPLETE
                return
        self._edge(a, w, kind)

    def _incomplete(self, w: int) -> bool:
        if w in self.ops:  # kept: not floating
            return False
        fw = self.floating.get(w)
        return fw is not None and fw & _INCOMPLETE != 0

    def _late(self, a: int, b: int) -> bool:
        """May the edge a -> b, into the forgotten b, be added without a gap? Yes when both
        are floating and b does not reach a: an earlier batch's writer into a later one's,
        or within one batch when b is not among a's ancestors there (`anc`, kept up to date
        with the late edges added). See "Memory"."""
        if a in self.ops or b in self.ops:  # kept: not floating
            return False
        fa, fb = self.floating.get(a), self.floating.get(b)
        if fa is None or fb is None or fb & _INCOMPLETE:
            return False
        na, nb = fa >> _NB & _M24, fb >> _NB & _M24
        if na != nb:
            return na < nb
        return _join(self.batches[nb], fa >> _BIT & _M24, fb >> _BIT & _M24)

    def _revealed(self, w: int) -> None:
        """A read showed one of w's registered appends: forget w's floating record once
        none is left (nothing can then arrive into it but a gap)."""
        if w in self.ops:  # kept: not floating
            return
        fw = self.floating.get(w)
        if fw is None:
            return
        fw -= _LEFT1
        if fw >> _LEFT > 0:
            self.floating[w] = fw
            return
        del self.floating[w]
        nb, bit = fw >> _NB & _M24, fw >> _BIT & _M24
        batch = self.batches[nb]
        batch[1] &= ~(1 << bit)
        if not batch[1]:
            del self.batches[nb]

    def _committed(self, k: Any, v: Any) -> bool:
        """Did the writer of v (an element of key k) complete ok?"""
        x = self.writer[k][v]
        xo = self.ops.get(x)
        if xo is None:  # forgotten: its status then
            return self.unseen_status.get(k, {}).get(v, ("ok",))[0] == "ok"
        return xo.type == "ok" and x not in self.pending

    def _confirm(self, w: int) -> None:
        """A read showed an append of w, into which a held cycle's edge runs. Once every
        append of w is shown, each after appends of committed transactions only (`unclean`
        otherwise: no failed, crashed or pending writer up to it in its key's order, so no
        aborted append can cut the order ahead of it offline), the edges into w are offline's
        edges, and a held cycle whose every such writer is confirmed, its transactions all
        still kept, is reported now instead of only by the final pass."""
        if w in self.unclean:
            self.held_by.pop(w, None)  # left to the final pass
            return
        if w not in self.ops or self._registered(w):
            return
        self.confirmed.add(w)
        ops = self.ops
        for held in self.held_by.pop(w):
            cycle, pre = held
            if pre <= self.confirmed and all(a in ops for a, _, _ in cycle):
                self.held.remove(held)
                self._report_cycle([(a, b, kind - PRE if kind >= PRE else kind) for a, b, kind in cycle])

    def _forget_txn(self, i: int) -> None:
        op = self.ops.pop(i)
        self.before.pop(i, None)
        self.forgotten += 1
        if op.type == "ok":
            self.observed.discard(i)
        status = op.type
        for f, k, v in op.value if op.type == "ok" else op.invoke_value:
            if f == "append":
                if v not in self.seen.get(k, ()):  # no read showed it yet: its writer's status
                    self.unseen_status.setdefault(k, {})[v] = (status, i)

    def _forget_key(self, k: Any) -> None:
        """Replace key k's state by its summary: the known order's length and hash, and the
        appends no read has shown yet, each with its writer's status (ok, info, fail), id, and
        whether its writer appended past it (a read ending there is G1b)."""
        o = self.order.pop(k, [])
        seen = self.seen.pop(k, set())
        wk = self.writer.pop(k, {})
        status = self.unseen_status.pop(k, {})
        mid = self.intermediate.pop(k, set())
        self.first_dirty.pop(k, None)
        for d in (self.frontier, self.acked, self.lost, self.unseen_w):
            d.pop(k, None)
        del self.touched[k]
        rest = [[v, *status.get(v, ("ok", w)), v in mid] for v, w in wk.items() if v not in seen]
        try:
            self.dead[k] = _pack([len(o), hash(tuple(o)), False, rest])
        except TypeError:  # a value JSON cannot hold: the key is left to the final pass
            self._gap("a forgotten key's values")
            self.broken.add(k)

    def _read_dead(self, i: int, k: Any, r: list) -> None:
        """A read of a forgotten key: a prefix of the known order again (same length and
        hash), then appends no read had shown. Their writers are floating: the edges into
        the first from the order's last writer and readers were added when registered; the
        ww edges between them (and from the last into those still unseen) are late edges
        (`_late`); the wr edge into the reader runs from a forgotten writer (dropped: see
        "Memory"). Anything else is a gap."""
        n, h, since, rest = orjson.loads(self.dead[k])
        if len(r) < n or hash(tuple(r[:n])) != h:
            self._gap("an older or different version of a forgotten key read")
            return
        new = r[n:]
        if r:
            self.data_edges += 1  # wr from its last element's (forgotten) writer
        left = {v: (st, w, mid) for v, st, w, mid in rest}
        if new and (len(set(new)) != len(new) or not all(v in left for v in new)):
            self._gap("a forgotten key shows an unknown element")
            return
        ws = []
        for v in new:
            st, w, _ = left.pop(v)
            if st == "fail":
                self._gap("G1a on a forgotten key")
            elif st == "info":
                self.observed.add(w)
            if w in self.ops:
                self._gap("a forgotten key's writer still kept")
            ws.append(w)
        if ws:
            if ws[0] not in self.floating or self._incomplete(ws[0]):
                self._gap("edge into a forgotten transaction")
            for a, b in zip(ws, ws[1:]):
                if a != b and not self._late(a, b):
                    self._gap("edge into a forgotten transaction")
        live = [w for _, (st, w, _) in left.items() if st != "fail"]
        for w in live:  # after the new last element (ww), and after this reader (rw)
            if ws and ws[-1] != w:
                self._pre(ws[-1], w, g.WW + PRE)
            self._pre(i, w, g.RW + PRE)
        if new and next(m for v, _, _, m in rest if v == new[-1]):
            self._gap("G1b candidate on a forgotten key")
        for w in ws:
            self._revealed(w)
        self.dead[k] = _pack([len(r), hash(tuple(r)), since or bool(live),
                                     [[v, st, w, m] for v, (st, w, m) in left.items()]])

    def _node(self, k: Any, v: Any, w: int) -> bool:
        """Is the writer w (of v on key k) a node of offline's graph: ok, or info and observed?"""
        op = self.ops.get(w)
        st = op.type if op is not None else self.unseen_status.get(k, {}).get(v, ("ok",))[0]
        return st == "ok" or (st == "info" and w in self.observed)

    def finish(self) -> None:
        """The history ended: present the edges offline adds for appends no read saw (the
        writer of the last element seen, and every reader of the whole order, precede such
        an append), and record as gaps what offline may still judge that this engine cannot:
        two such appends on one key (offline tries both orders), edges still waiting for a
        transaction that never completed, a forgotten key read whole whose unseen append
        belongs to an offline node."""
        if any(p in self.waiting for p in self.pending):
            self._gap("edges waiting for a transaction that never completed")
        for k, wk in list(self.writer.items()):
            if k in self.broken:
                continue
            seen = self.seen.get(k)
            nodes = {w for v, w in wk.items() if (seen is None or v not in seen) and self._node(k, v, w)}
            if len(nodes) > 1:
                self._gap("two appends no read saw on one key")
            elif nodes and k in self.order:
                u = nodes.pop()
                if u in self.unseen_w.get(k, {}).values() and not self._incomplete(u):
                    continue  # registered: these edges were added as they came
                o = self.order[k]
                if o:
                    self._edge(wk[o[-1]], u, g.WW)
                for reader in self.frontier[k]:
                    self._edge(reader, u, g.RW)
        for k, s in self.dead.items():
            n, h, since, rest = orjson.loads(s)
            live = [w for _, st, w, _ in rest if st == "ok" or (st == "info" and w in self.observed)]
            if len(live) > 1 or (since and live) or any(self._incomplete(w) for w in live):
                self._gap("an append no read saw on a forgotten key")

    def certified(self) -> bool:
        """After `finish`: is the history certainly valid offline, with no anomaly of any type
        (see "Certified verdicts")? False means: ask the offline pass."""
        return self.cycles and not self.found and not self.counts and not self.gaps and not self.broken \
            and self.ok > 0

    def tick(self, force: bool = False) -> None:
        """Nothing to do between events: everything is judged as it arrives."""

    def stats(self) -> dict[str, Any]:
        return {"txns": self.n, "kept": len(self.ops), "forgotten": self.forgotten, "nodes": len(self.graph),
                "edges": self.graph.edges(), "keys": len(self.touched), "forgotten-keys": len(self.dead),
                "keys-left-to-final-pass": len(self.broken), "gaps": dict(self.gaps)}
