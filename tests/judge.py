"""An independent judge of small transactional histories, from the definitions.

It imports nothing but itertools (not sleuth, not checker/): the tests compare
the checker's verdicts with it (tests/test_judge_differential.py). Histories are
lists of transactions (process, start, end, type, micro-ops), type "ok", "info"
(crashed: may or may not have committed) or "fail" (did not commit), micro-ops
[f, key, value] with f "append" and "r" (list-append: a read returns a list) or
"w" and "r" (rw-register: a read returns one value, None for the initial one).
Real-time order: T1 precedes T2 when T1's end is before T2's start (an info
transaction never ends); process order is real-time order within a process.

Two definitions, each searched exhaustively (fine up to some 7 or 8 transactions):

1. Adya's Direct Serialization Graph (Weak Consistency, MIT 1999) with the version
   order SEARCHED: every subset of the info transactions that commit, and every
   order per key of the committed writers' versions (a transaction installs one
   version per key it writes, its last write; a list-append version is the list of
   its predecessors' appends and its own, so a read must equal one exactly, less
   its reader's own appends). A read of a version whose writer did not commit is
   G1a, of a writer's non-final version G1b; ww, wr and rw edges join consecutive
   versions, readers and next versions (Adya 3.1). A model holds iff SOME such
   world is free of what it proscribes (`DSG_MODELS`): G0 (a ww cycle), G1c (ww/wr),
   G-single (exactly one rw, the rest ww/wr), G-nonadjacent (rw edges, never two in a
   row: Cerone & Gotsman, PODC 2016, show snapshot isolation is the absence of it),
   G2 (any cycle with rw; every edge here is an item edge, so G2 is G2-item),
   G-cursor(x) (one rw, the rest ww, all on x), G-monotonic (one rw leaving a read
   p of Ti, back into Ti at an operation no later than p: his unfolded graph),
   G-update (a cycle with rw over the update transactions and at most one read-only
   one), lost update (two committed transactions read the same version of a key and
   both wrote it). `-process` and `-realtime` variants (Elle) count process and
   real-time order as dependency edges.

2. Cerone, Bernardi & Gotsman's axioms (CONCUR 2015): some total commit order CO
   and visibility VIS ⊆ CO, each read returning what its transaction's visible
   set gives in CO order (EXT; the list of the visible appends, or the last
   visible write) and its own writes on top (INT). Read atomic: just that;
   causal: VIS transitive; prefix: each visible set a CO-prefix; NOCONFLICT (two
   writers of a key see one another in CO order) added gives update atomic
   (Cerone, Gotsman & Yang 2017, ROLA's), parallel SI and SI; serializable: VIS =
   CO. Session (SO ⊆ VIS) and real-time (RT ⊆ VIS) variants give strong session
   SI and strong SI; for serializability RT ⊆ CO gives strict. sleuth's models
   other than the strong ones take no session order (as Elle's), so SESSION is
   not required of read atomic and its relatives here. A list-append read shows
   a prefix of the key's one order of appends (the reading sleuth and Elle take
   of lists: the visible appends of a key are all its appends up to some point of
   CO). Per commit order the least visible set is the best (a larger one only
   adds constraints), so the search is over commit orders, depth first.
   `read-atomic-per-key` drops atomic visibility across keys (each key's reads
   from a visible set of their own): what sleuth's read-atomic decides.

Reads that no world can give (a value nobody wrote, a read that ignores its
transaction's own earlier write, an element twice) rule out every model. A read
of the transaction's own later write is a wr edge from it to itself: a G1c.
"""

from __future__ import annotations

import itertools

INF = float("inf")
INIT = None  # the initial version of every key

# -- the models, from the definitions ------------------------------------------------

G1 = ("G0", "G1a", "G1b", "G1c")
# model -> the phenomena it proscribes (Adya's PL-levels; Elle's strong variants)
DSG_MODELS: dict[str, tuple[str, ...]] = {
    "read-uncommitted": ("G0",),  # PL-1
    "strong-session-read-uncommitted": ("G0-process",),
    "strong-read-uncommitted": ("G0-realtime",),
    "read-committed": G1,  # PL-2
    "strong-session-read-committed": (*G1, "G1c-process"),
    "strong-read-committed": (*G1, "G1c-realtime"),
    "cursor-stability": (*G1, "G-cursor", "lost-update"),  # PL-CS
    "monotonic-view": (*G1, "G-monotonic"),  # PL-2L
    "consistent-view": (*G1, "G-single"),  # PL-2+
    "update-serializable": (*G1, "G-update"),  # PL-3U
    "repeatable-read": (*G1, "G2-item", "lost-update"),  # PL-2.99 (item cycles)
    "snapshot-isolation": (*G1, "G-nonadjacent"),  # Cerone & Gotsman
    "strong-session-snapshot-isolation": (*G1, "G1c-process", "G-nonadjacent-process"),
    "strong-snapshot-isolation": (*G1, "G1c-realtime", "G-nonadjacent-realtime"),
    "serializable": (*G1, "G2"),  # PL-3
    "strong-session-serializable": (*G1, "G1c-process", "G2-process"),
    "strict-serializable": (*G1, "G1c-realtime", "G2-realtime"),  # PL-SS
}

# model -> (transitive visibility, prefix, no conflict, session, real time, total)
AXIOMATIC_MODELS: dict[str, tuple[bool, bool, bool, bool, bool, bool]] = {
    "read-atomic": (False, False, False, False, False, False),
    "update-atomic": (False, False, True, False, False, False),
    "causal-cerone": (True, False, False, False, False, False),
    "parallel-snapshot-isolation": (True, False, True, False, False, False),
    "prefix": (True, True, False, False, False, False),
    "snapshot-isolation": (True, True, True, False, False, False),
    "strong-session-snapshot-isolation": (True, True, True, True, False, False),
    "strong-snapshot-isolation": (True, True, True, False, True, False),
    "serializable": (True, True, True, False, False, True),
    "strong-session-serializable": (True, True, True, True, False, True),
    "strict-serializable": (True, True, True, False, True, True),
}

# Read atomic without atomic visibility across keys: each key's reads of a transaction
# from a visible set of their own (one set per key: INT, no fuzzy reads). What sleuth's
# read-atomic decides (it does not look for fractured reads: tests/test_judge_differential.py)
PER_KEY = {"read-atomic-per-key": "read-atomic"}

# the models one of the definitions above decides; the judge's answer for a model in
# both is the DSG one (tests/test_judge_differential.py holds the two equal)
MODELS = tuple(dict.fromkeys([*DSG_MODELS, *AXIOMATIC_MODELS]))


# -- the history, read once -----------------------------------------------------------

class Txn:
    def __init__(self, i, process, start, end, typ, mops):
        self.i, self.process, self.start, self.typ = i, process, start, typ
        self.end = INF if typ == "info" else end
        self.mops = [tuple(m) for m in mops]
        self.writes: dict = {}  # key -> values written, in order
        self.first_write: dict = {}  # key -> position of its first write
        for p, (f, k, v) in enumerate(self.mops):
            if f != "r":
                self.writes.setdefault(k, []).append(v)
                self.first_write.setdefault(k, p)
        # ok only: external reads as (position, key, what was read of the others), and flags
        self.reads: list = []
        self.impossible = False  # a read no world gives
        self.future = False  # a read of its own later write


def parse(txns, datatype: str) -> tuple[list[Txn], dict]:
    ts = [Txn(i, *t) for i, t in enumerate(txns)]
    writer = {}  # (key, value) -> txn
    for t in ts:
        for k, vs in t.writes.items():
            for v in vs:
                writer[(k, v)] = t.i
    for t in ts:
        if t.typ != "ok":
            continue
        own: dict = {}
        for p, (f, k, v) in enumerate(t.mops):
            if f != "r":
                own.setdefault(k, []).append(v)
                continue
            mine = own.get(k, [])
            if datatype == "list-append":
                r = list(v or [])
                if len(set(r)) != len(r) or (mine and r[len(r) - len(mine):] != mine):
                    t.impossible = True
                    continue
                ext = r[: len(r) - len(mine)]
                if any((k, x) not in writer for x in ext):
                    t.impossible = True
                elif any(writer[(k, x)] == t.i for x in ext):
                    t.future = True
                else:
                    t.reads.append((p, k, tuple(ext)))
            else:
                if mine:
                    t.impossible |= v != mine[-1]
                elif v is not None and (k, v) not in writer:
                    t.impossible = True
                elif v is not None and writer[(k, v)] == t.i:
                    t.future = True
                else:
                    t.reads.append((p, k, v))
    return ts, writer


def _committed_sets(ts, writer=None):
    """Every set of transactions that may have committed: the ok ones and any of the
    crashed ones that write. With `writer`, a crashed one some read saw committed
    (the checker's reading, sound where reads see only committed writes)."""
    ok = [t.i for t in ts if t.typ == "ok"]
    maybe = [t.i for t in ts if t.typ == "info" and t.writes]
    seen = set()
    if writer is not None:
        for t in ts:
            if t.typ == "ok":
                for f, k, v in t.mops:
                    if f == "r":
                        for x in (v or []) if isinstance(v, list) else [v]:
                            seen.add(writer.get((k, x)))
    sure = [i for i in maybe if i in seen]
    maybe = [i for i in maybe if i not in seen]
    for n in range(len(maybe) + 1):
        for chosen in itertools.combinations(maybe, n):
            yield frozenset(ok) | frozenset(sure) | frozenset(chosen)


def _precedes(a: Txn, b: Txn) -> bool:
    return a.end < b.start


# -- 1. the DSG over every version order ----------------------------------------------

def _read_version(t, k, seen, order, ts, writer, datatype, committed):
    """What one external read shows in a world: (version's writer or INIT, flags), or
    None when no version of this world is what it read."""
    if datatype == "list-append":
        if not seen:
            return INIT, ()
        w = writer[(k, seen[-1])]
        flags = set()
        if w not in committed:
            return w, ("G1a",)
        if any(writer[(k, x)] not in committed for x in seen):
            flags.add("G1a")  # built on an append that never committed
        mine = ts[w].writes[k]
        j = mine.index(seen[-1])
        expect = [x for u in order[: order.index(w)] for x in ts[u].writes[k]] + mine[: j + 1]
        if [x for x in seen if writer[(k, x)] in committed] != expect:
            return None
        if j < len(mine) - 1:
            flags.add("G1b")
        return w, tuple(flags)
    if seen is None:
        return INIT, ()
    w = writer[(k, seen)]
    if w not in committed:
        return w, ("G1a",)
    return w, (("G1b",) if ts[w].writes[k][-1] != seen else ())


def _closure(n, edges):
    """reach[a]: the nodes reachable from a by one or more edges."""
    reach = [set() for _ in range(n)]
    for a, b in edges:
        reach[a].add(b)
    changed = True
    while changed:
        changed = False
        for a in range(n):
            new = set().union(*(reach[b] for b in reach[a])) - reach[a] if reach[a] else set()
            if new:
                reach[a] |= new
                changed = True
    return reach


def _cyclic(n, edges) -> bool:
    reach = _closure(n, edges)
    return any(a in reach[a] for a in range(n))


def _one_rw(n, rw, deps) -> bool:
    """A cycle of one rw edge and otherwise `deps` edges."""
    reach = _closure(n, deps)
    return any(a == b or a in reach[b] for a, b in rw)


def _nonadjacent(n, rw, deps) -> bool:
    """A cycle with rw edges, each followed by a `deps` edge: a cycle of rw;deps+."""
    reach = _closure(n, deps)
    return _cyclic(n, {(a, c) for a, b in rw for c in reach[b]})


def _any_rw(n, rw, deps) -> bool:
    reach = _closure(n, deps | rw)
    return any(a == b or a in reach[b] for a, b in rw)


def world_phenomena(ts, writer, datatype, committed, order) -> set[str] | None:
    """The phenomena of one world (committed set, version order per key), or None if
    some read is no version of it."""
    nodes = sorted(committed)
    idx = {t: n for n, t in enumerate(nodes)}
    n = len(nodes)
    found: set[str] = set()
    ww, wr, rw = set(), set(), set()
    ww_k, rw_k = {}, {}
    # (a, b, position of the read a's rw leaves) and (u, b, position b is entered at)
    rw_at, dep_at = [], []
    for k, vs in order.items():
        for a, b in zip(vs, vs[1:]):
            ww.add((idx[a], idx[b]))
            ww_k.setdefault(k, set()).add((idx[a], idx[b]))
            dep_at.append((idx[a], idx[b], ts[b].first_write[k]))
    for i in nodes:
        t = ts[i]
        if t.typ != "ok":
            continue
        if t.future:
            found.add("G1c")
        for p, k, seen in t.reads:
            vs = order.get(k, [])
            got = _read_version(t, k, seen, vs, ts, writer, datatype, committed)
            if got is None:
                return None
            w, flags = got
            found.update(flags)
            if "G1a" in flags and w not in committed:
                continue
            if w is not INIT and w != i:
                wr.add((idx[w], idx[i]))
                dep_at.append((idx[w], idx[i], p))
            nxt = 0 if w is INIT else vs.index(w) + 1
            if nxt < len(vs) and vs[nxt] != i:
                e = (idx[i], idx[vs[nxt]])
                rw.add(e)
                rw_k.setdefault(k, set()).add(e)
                rw_at.append((*e, p))
    tx = [ts[i] for i in nodes]
    rt = {(a, b) for a in range(n) for b in range(n) if _precedes(tx[a], tx[b])}
    po = {(a, b) for a, b in rt if tx[a].process == tx[b].process}
    deps = ww | wr
    for suffix, order_edges in (("", set()), ("-process", po), ("-realtime", rt)):
        if _cyclic(n, ww | order_edges):
            found.add("G0" + suffix)
        if _cyclic(n, deps | order_edges):
            found.add("G1c" + suffix)
        if _one_rw(n, rw, deps | order_edges):
            found.add("G-single" + suffix)
        if _nonadjacent(n, rw, deps | order_edges):
            found.add("G-nonadjacent" + suffix)
        if _any_rw(n, rw, deps | order_edges):
            found.update(("G2" + suffix, "G2-item" + suffix))
    for k, es in rw_k.items():
        if _one_rw(n, es, ww_k.get(k, set())):
            found.add("G-cursor")
    reach = _closure(n, deps)
    if any(u == b or u in reach[b] for a, b, p in rw_at for u, v, q in dep_at if v == a and q <= p):
        found.add("G-monotonic")
    update = {idx[i] for i in nodes if ts[i].writes}
    for ro in [None, *(idx[i] for i in nodes if not ts[i].writes)]:
        keep = update | {ro}
        sub = lambda es, keep=keep: {(a, b) for a, b in es if a in keep and b in keep}  # noqa: E731
        if _any_rw(n, sub(rw), sub(deps)):
            found.add("G-update")
            break
    return found


def _orders(ts, writer, datatype, committed, keys):
    """Per key, every order of its committed writers that every read of it fits."""
    per_key = []
    for k in keys:
        ws = [i for i in sorted(committed) if k in ts[i].writes]
        fits = []
        for perm in itertools.permutations(ws):
            vs = list(perm)
            if all(_read_version(t, k, seen, vs, ts, writer, datatype, committed) is not None
                   for t in ts if t.i in committed and t.typ == "ok"
                   for _, kk, seen in t.reads if kk == k):
                fits.append(vs)
        per_key.append(fits)
    for combo in itertools.product(*per_key):
        yield dict(zip(keys, combo, strict=True))


def lost_updates(ts) -> bool:
    """Two committed transactions read the same version of a key and both wrote it."""
    seen: dict = {}
    for t in ts:
        if t.typ == "ok":
            for k, v in {(k, v) for _, k, v in t.reads if k in t.writes}:
                seen.setdefault((k, v), set()).add(t.i)
    return any(len(s) > 1 for s in seen.values())


def worlds(txns, datatype, observed_committed=False):
    key = (repr(txns), datatype, observed_committed)
    if key not in _WORLDS:
        _WORLDS[key] = _worlds(txns, datatype, observed_committed)
    return _WORLDS[key]


_WORLDS: dict = {}


def _worlds(txns, datatype, observed_committed=False):
    """Every world's phenomena (a list of sets); [] when no world gives the reads.
    `observed_committed`: only worlds where every crashed transaction a read saw
    committed."""
    ts, writer = parse(txns, datatype)
    if any(t.impossible for t in ts):
        return []
    keys = sorted({k for t in ts for _, k, _ in t.mops}, key=repr)
    lost = lost_updates(ts)
    out = []
    for committed in _committed_sets(ts, writer if observed_committed else None):
        for order in _orders(ts, writer, datatype, committed, keys):
            found = world_phenomena(ts, writer, datatype, committed, order)
            if found is not None:
                out.append(found | ({"lost-update"} if lost else set()))
    return out


def dsg_verdicts(txns, datatype, observed_committed=False) -> dict[str, bool]:
    ws = worlds(txns, datatype, observed_committed)
    return {m: any(not (w & set(bad)) for w in ws) for m, bad in DSG_MODELS.items()}


def forced(txns, datatype, observed_committed=False) -> set[str]:
    """The phenomena every world has (the anomalies the history surely shows);
    {"impossible"} when no world gives the reads."""
    ws = worlds(txns, datatype, observed_committed)
    return set.intersection(*ws) if ws else {"impossible"}


# -- 2. Cerone et al.'s axioms over every commit order ---------------------------------

def _visible_reads_fit(t, vis, co_pos, ts, writer, datatype) -> bool:
    """EXT: each external read of t is what its visible set gives, in CO order."""
    for _, k, seen in t.reads:
        ws = sorted((u for u in vis if k in ts[u].writes), key=co_pos.__getitem__)
        if datatype == "list-append":
            if list(seen) != [x for u in ws for x in ts[u].writes[k]]:
                return False
            # a key's appends have one order: a read shows a prefix of it (Elle's reading)
            if ws and any(k in ts[u].writes and u not in vis for u in co_pos if co_pos[u] < co_pos[ws[-1]]):
                return False
        elif seen != (ts[ws[-1]].writes[k][-1] if ws else None):
            return False
    return True


def axiomatic_verdict(txns, datatype, model: str) -> bool:
    transitive, prefix, noconflict, session, realtime, total = AXIOMATIC_MODELS[PER_KEY.get(model, model)]
    ts, writer = parse(txns, datatype)
    if any(t.impossible or t.future for t in ts):
        return False
    for committed in _committed_sets(ts):
        # a read of a version whose writer did not commit: no visible set gives it
        if any(writer[(k, x)] not in committed for t in ts if t.i in committed and t.typ == "ok"
               for _, k, seen in t.reads
               for x in (seen if datatype == "list-append" else ([] if seen is None else [seen]))):
            continue
        members = sorted(committed)
        must_see = {i: {j for j in members if j != i and _precedes(ts[j], ts[i])
                        and (realtime or (session and ts[j].process == ts[i].process))}
                    for i in members}
        if _co_search(ts, writer, datatype, members, must_see, transitive, prefix, noconflict, total,
                      model in PER_KEY):
            return True
    return False


def _co_search(ts, writer, datatype, members, must_see, transitive, prefix, noconflict, total,
               per_key) -> bool:
    def least_vis(i, placed, vis_of):
        """The least visible set of i over the txns placed before it, or None."""
        t = ts[i]
        need = set(must_see[i])
        if t.typ == "ok":
            for _, k, seen in t.reads:
                xs = seen if datatype == "list-append" else ([] if seen is None else [seen])
                need |= {writer[(k, x)] for x in xs}
        if noconflict:
            need |= {j for j in placed if set(ts[j].writes) & set(t.writes)}
        if total:
            need |= set(placed)
        changed = True
        while changed:
            changed = False
            if not need <= set(placed):
                return None
            if transitive:
                more = set().union(*(vis_of[j] for j in need)) - need if need else set()
                if more:
                    need |= more
                    changed = True
            if prefix and need:
                last = max(placed.index(j) for j in need)
                more = set(placed[: last + 1]) - need
                if more:
                    need |= more
                    changed = True
        co_pos = {j: p for p, j in enumerate(placed)}
        if t.typ == "ok" and per_key:  # each key's reads from a visible set of their own
            for k in {k for _, k, _ in t.reads}:
                xs = [x for _, kk, seen in t.reads if kk == k
                      for x in (seen if datatype == "list-append" else ([] if seen is None else [seen]))]
                alone = Txn(t.i, t.process, t.start, t.end, t.typ, [])
                alone.reads = [r for r in t.reads if r[1] == k]
                if not _visible_reads_fit(alone, {writer[(k, x)] for x in xs}, co_pos, ts, writer, datatype):
                    return None
        elif t.typ == "ok" and not _visible_reads_fit(t, need, co_pos, ts, writer, datatype):
            return None
        return need

    def go(placed, vis_of):
        if len(placed) == len(members):
            return True
        for i in members:
            if i in vis_of:
                continue
            vis = least_vis(i, placed, vis_of)
            if vis is not None and go([*placed, i], {**vis_of, i: vis}):
                return True
        return False

    return go([], {})


def verdicts(txns, datatype) -> dict[str, bool]:
    """Every model the judge decides -> does the history satisfy it."""
    out = {m: axiomatic_verdict(txns, datatype, m) for m in AXIOMATIC_MODELS}
    out.update(dsg_verdicts(txns, datatype))
    return out
