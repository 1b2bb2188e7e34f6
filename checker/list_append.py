"""List-append cycle analysis (Elle, Kingsbury & Alvaro, VLDB 2020, section 4).

Each key holds a list; transactions append unique values and read whole
lists. Because a read returns every element appended before it, in order,
reads reveal the version order of each key: every read must be a prefix of
the longest one (else *incompatible-order*), and the longest read is the
order. From it, for each key:

- ww: the writer of element i precedes the writer of element i+1;
- wr: the writer of a read's last element precedes the reader;
- rw: a reader of the first m elements precedes the writer of element m+1.

An append that committed but that no read ever saw still happened: it comes
after everything any read saw (lists only grow), so the writer of the last
observed element precedes it (ww) and every reader of the whole observed list
precedes it (rw). This is what lets a final read expose a lost write as a
cycle with real-time order.

Failed transactions never happened; `info` transactions happened iff some
read observed one of their appends (then all of them happened: transactions
are atomic), and they complete at an unknown time. Non-cycle anomalies found
here: G1a (read of a failed append), G1b (read ending at a value its writer
later appended past), dirty-update, duplicate-elements, incompatible-order,
garbage-read, internal, lost-update (transactions that read the same version of a
key, before or after their own appends to it, and appended past it: whichever came
later missed the other's append, a cycle even when no read orders the two appends),
future-read (a read showing the txn's own later append).
"""

from __future__ import annotations

import operator
from itertools import chain, compress, count, repeat
from typing import Any

import numpy as np

from sleuth.checker import graph as g
from sleuth.checker import models, txn
from sleuth.checker.result import Result
from sleuth.history.jsonl import History, Op, as_written, gc_paused, unfreed

Key = Any
_OK, _INFO = 0, 1
_TYPE_CODE = {"ok": _OK, "info": _INFO, "fail": 2}  # an op's type (a paired op is never "invoke")
_TYPE = operator.attrgetter("type")


def _appends_of(op: Op) -> list[tuple[Key, Any]]:
    value = op.value if op.type == "ok" else op.invoke_value
    return [(k, v) for f, k, v in value if f == "append"]


def external_reads(value: list) -> list[tuple[Key, list, str | None]]:
    """Each read of an ok txn, as (key, external part, problem).

    A transaction sees its own appends, so under read committed a read can be
    the committed list followed by the txn's own uncommitted appends. The
    external part (the read minus those trailing own appends) is what tells
    the key's version order. `problem` is "internal" when the read does not
    end with the txn's own appends, "fuzzy-read" when its external part
    differs from an earlier read of the key in the same txn (Berenson et al.'s
    P2, allowed under read committed), else None.
    """
    return [(k, r, problem) for k, _, _, r, problem in _reads_against_own(value)]


def _reads_against_own(value: list) -> list[tuple[Key, list, int, list, str | None]]:
    """`external_reads`, with two more columns per read: (key, the list read,
    how many of the txn's own appends to the key came before it, external
    part, problem). The external part of an internal read is the list read."""
    own: dict[Key, list] = {}
    last: dict[Key, list] = {}
    out = []
    for f, k, v in value:
        if f == "append":
            own.setdefault(k, []).append(v)
            continue
        r = read = v or []
        mine = own.get(k)
        n = len(mine) if mine else 0
        problem = None
        if n:
            outside = external_part(r, mine)
            if outside is None:
                problem = models.INTERNAL
            else:
                r = outside
        if problem is None and k in last and last[k] != r:
            problem = models.FUZZY_READ
        if problem != models.INTERNAL:
            last[k] = r
        out.append((k, read, n, r, problem))
    return out


def external_part(read: list, own: list) -> list | None:
    """What a read that follows the transaction's own appends `own` to its key shows
    of the others: the read minus them at its end, or None when it does not end with
    them (an internal read)."""
    n = len(own)
    if len(read) < n or read[len(read) - n:] != own:
        return None
    return read[: len(read) - n]


def _reads_of(op: Op) -> list[tuple[Key, list]]:
    if op.type != "ok":
        return []
    return [(k, r) for k, r, _ in external_reads(op.value)]


def _show(xs: list, limit: int = 6) -> str:
    if len(xs) <= limit:
        return "[" + ", ".join(map(repr, xs)) + "]"
    return "[…, " + ", ".join(map(repr, xs[-limit:])) + "]"


class Analysis:
    """The version orders, graph and anomalies of one list-append history."""

    def __init__(self, history: History):
        self.history = history
        self.ops = history.ops()
        self.anomalies: dict[str, list[dict]] = {}
        self.writer: dict[Key, dict[Any, int]] = {}  # key -> value -> op index (values unique per key)
        self.reads_by_key: dict[Key, list[tuple[int, list]]] = {}  # ok reads
        self.intermediate: dict[Key, set] = {}  # values appended and then appended past, in one txn
        self.failed: set[int] = set()  # failed ops
        self._scan()
        try:
            self._version_orders()
        except TypeError:  # a read's element is a list or a map: bad input, not a crash
            self._unhashable_read()
            raise
        self._read_anomalies()
        self._dirty_updates()
        self._edges()

    def _unhashable_read(self) -> None:
        """Name the first ok read that returned an element no key or appended value can be."""
        for k, reads in self.reads_by_key.items():
            for i, r in reads:
                for v in r:
                    try:
                        hash(v)
                    except TypeError:
                        raise self.history.error(self.ops[i].complete_pos, f"read of key {k!r} returned "
                                                 f"{r!r}: list elements must be scalars") from None

    def _scan(self) -> None:
        """One pass over every micro-op: validate, index writers and reads, and
        check each ok transaction against itself (internal) and for reads
        followed by appends to the same key (lost-update candidates).

        The common transaction touches each key once: its micro-ops are
        handled in one loop, inline (a million transactions pass through
        here). One that touches a key twice also goes through `_repeats`."""
        history, ops = self.history, self.ops
        writer, reads_by_key, failed = self.writer, self.reads_by_key, self.failed
        # lost-update candidates: (key, length, last element) of a version read ->
        # [it, the transactions that read it and appended to the key, whether one read it
        # after its own append]
        lost: dict[tuple, list] = {}
        i = -1
        try:
            for i, op in enumerate(ops):
                typ = op.type
                ok = typ == "ok"
                if typ == "fail":
                    failed.add(i)
                value = op.value if ok else op.invoke_value
                if op.f != "txn":
                    raise history.error(op.invoke_pos, "list-append histories hold txn operations, "
                                                       f"not {op.f!r}")
                if type(value) is not list:
                    raise history.error(op.invoke_pos, "a list-append txn value must be a list of "
                                                       f"micro-ops, got {value!r}")
                keys = set()
                reads = None
                for mop in value:
                    if (type(mop) is not tuple and type(mop) is not list) or len(mop) != 3:
                        raise history.error(op.invoke_pos, f"bad micro-op {as_written(mop)!r}: "
                                                           "expected [f, key, value]")
                    f, k, v = mop
                    keys.add(k)
                    if f == "append":
                        wk = writer.get(k)
                        if wk is None:
                            writer[k] = {v: i}
                        elif v in wk:
                            self._duplicate_append(i, k, v)
                        else:
                            wk[v] = i
                    elif f == "r":
                        if ok:
                            if v is None:
                                v = []
                            elif type(v) is not list:
                                raise history.error(op.complete_pos, f"read of key {k!r} returned {v!r}, "
                                                                     "not a list")
                            if reads is None:
                                reads = [(k, v)]
                            else:
                                reads.append((k, v))
                    else:
                        raise history.error(op.invoke_pos, f"unknown micro-op {f!r} in {as_written(mop)!r} "
                                                           "(expected append or r)")
                if len(keys) < len(value):
                    self._repeats(i, ok, value, lost)
                elif reads is not None:  # every read is external: no self-interplay
                    for k, v in reads:
                        rk = reads_by_key.get(k)
                        if rk is None:
                            reads_by_key[k] = [(i, v)]
                        else:
                            rk.append((i, v))
        except TypeError:  # an unhashable key or value
            raise history.error(ops[i].invoke_pos, "keys and appended values must be scalars: "
                                                   f"{as_written(ops[i].invoke_value)!r}") from None
        for (k, _, _), (r, members, after) in lost.items():
            if len(members) > 1:
                self._lost_update(k, r, sorted(members), after)

    def _repeats(self, i: int, ok: bool, value: list, lost: dict) -> None:
        """A transaction that touches some key twice: intermediate appends, and
        (if it committed) its reads against its own appends, in one pass over
        them (`_reads_against_own`): future reads, internal and fuzzy reads,
        and a read of a key before its first append to it (a lost-update
        candidate)."""
        own: dict = {}  # key -> this txn's appends to it, in order
        for f, k, v in value:
            if f == "append":
                mine = own.get(k)
                if mine is None:
                    own[k] = [v]
                else:
                    self.intermediate.setdefault(k, set()).add(mine[-1])
                    mine.append(v)
        if not ok:
            return
        reads_by_key = self.reads_by_key
        first_read: dict = {}
        for k, read, n, r, problem in _reads_against_own(value):
            mine = own.get(k, ())
            if read and len(mine) > n:
                seen = [v for v in mine[n:] if v in read]
                if seen:
                    self._future_read(i, k, read, seen)
            if problem == models.INTERNAL:
                self._internal(i, k, r, f"a list ending with its own appends {_show(mine)}")
                continue
            if problem == models.FUZZY_READ:
                self._fuzzy(i, k, first_read.get(k), r)
            reads_by_key.setdefault(k, []).append((i, r))
            if k not in first_read:
                first_read[k] = r
            if mine:  # it read this version of k and appended past it, before or after the read
                group = lost.setdefault((k, len(r), r[-1] if r else None), [r, set(), False])
                group[1].add(i)
                group[2] |= n > 0

    def _future_read(self, i: int, k, r: list, seen: list) -> None:
        """A read that shows elements its own transaction appends only later
        (Elle's future-read: a trivial cycle T -wr-> T, so a G1c)."""
        self._add(models.FUTURE_READ, {
            "key": k, "op": self._op(i), "read": r, "values": seen,
            "explanation": f"{txn.txn_name(self.ops[i])} read key {k!r} = {_show(r)}, which "
                           f"holds {_show(seen)}, appended by the same transaction only after "
                           "that read (a read from its own future)"})

    def _fuzzy(self, i: int, k, before: list | None, after: list) -> None:
        self._add(models.FUZZY_READ, {
            "key": k, "op": self._op(i), "reads": [before, after],
            "explanation": f"{txn.txn_label(self.history, self.ops[i])} read key {k!r} twice and saw "
                           f"{_show(before or [])}, then {_show(after)} (besides its own appends): "
                           "a non-repeatable read"})

    def _duplicate_append(self, i: int, k, v) -> None:
        h, j = self.history, self.writer[k][v]
        raise h.error(self.ops[i].invoke_pos,
                      f"value {v!r} appended to key {k!r} twice (also at line "
                      f"{h.line_of(self.ops[j].invoke_pos)}); list-append needs unique values")

    def _version_orders(self) -> None:
        """Each key's version order is its longest read, if every read is a prefix
        of it. Records, per ordered key, the op that appended each element, and
        flat per-read arrays from which `_edges` derives every edge at once."""
        writer = self.writer
        self.order: dict[Key, list] = {}
        self.order_ops: dict[Key, list[int]] = {}  # per element: appending op, or -1
        self.seen: dict[Key, set] = {}  # values each ordered key's reads show
        observed: list[int] = []  # writers seen by reads of keys without an order (`flat` holds the rest)
        # Per ordered key: its order_ops, readers and read lengths, made machine-integer
        # columns once at the end (`_flat`): a million transactions' reads pass here
        orders: list[list[int]] = []
        readers_of: list[tuple[int, ...]] = []
        lens_of: list[list[int]] = []
        empty: dict = {}
        self._starts = starts = {}  # ordered key -> where its order starts in `flat`
        eq = operator.eq
        at = 0
        for k, reads in self.reads_by_key.items():
            # column by column at C speed
            readers, rs = zip(*reads)
            lens = list(map(len, rs))
            longest = rs[lens.index(max(lens))]  # the first longest, as max(key=len) gives
            values = set(longest)
            if len(values) != len(longest):
                self._duplicates(k, reads)
                continue
            wk = writer.get(k, empty)
            if not all(map(eq, map(longest.__getitem__, map(slice, lens)), rs)):
                bad = [(i, r) for i, r in reads if longest[: len(r)] != r]
                self._incompatible(k, reads, longest, bad)
                for _, r in reads:
                    observed += [wk[v] for v in r if v in wk]
                continue
            ws = list(map(wk.get, longest, repeat(-1)))
            self.order[k] = longest
            self.order_ops[k] = ws
            self.seen[k] = values
            starts[k] = at
            at += len(ws)
            orders.append(ws)
            readers_of.append(readers)
            lens_of.append(lens)
        n_reads = np.fromiter(map(len, readers_of), np.int64, len(orders))  # per ordered key
        total = int(n_reads.sum())
        flat = np.fromiter(chain.from_iterable(orders), np.int64, at)  # every ordered key's order_ops
        # per read of an ordered key: reader op, where its key's order starts in `flat`,
        # how many elements it saw, and how long its key's order is
        self._flat = (flat, np.fromiter(chain.from_iterable(readers_of), np.int64, total),
                      np.repeat(np.fromiter(starts.values(), np.int64, len(starts)), n_reads),
                      np.fromiter(chain.from_iterable(lens_of), np.int64, total),
                      np.repeat(np.fromiter(map(len, orders), np.int64, len(orders)), n_reads))
        # Nodes: ok transactions, and info ones that were observed (they wrote an
        # element of an ordered key's order, `flat`, or of a read of another key,
        # `observed`), marked and numbered with numpy: a million ops pass here
        n = len(self.ops)
        seen = np.zeros(n + 1, dtype=bool)  # the last slot takes flat's -1s (no writer)
        seen[flat] = True
        seen[observed] = True
        code = np.fromiter(map(_TYPE_CODE.__getitem__, map(_TYPE, self.ops)), np.int8, n)
        is_node = (code == _OK) | ((code == _INFO) & seen[:n])
        self.node_of = np.where(is_node, np.cumsum(is_node) - 1, -1)  # op index -> node, or -1
        self.graph = txn.Graph(list(compress(self.ops, is_node.tolist())))

    # -- non-cycle anomalies ------------------------------------------------

    def _add(self, name: str, example: dict) -> None:
        self.anomalies.setdefault(name, []).append(example)

    def _op(self, i: int) -> dict:
        return txn.describe_txn(self.history, self.ops[i])

    def _duplicates(self, k, reads) -> None:
        for i, r in reads:
            if len(set(r)) != len(r):
                dup = sorted({v for v in r if r.count(v) > 1}, key=repr)
                self._add(models.DUPLICATE_ELEMENTS, {
                    "key": k, "op": self._op(i), "duplicates": dup,
                    "explanation": f"{txn.txn_label(self.history, self.ops[i])} read key {k!r} = {_show(r)}, "
                                   f"which holds {dup!r} more than once; each value is appended once"})

    def _incompatible(self, k, reads, longest, bad) -> None:
        li = next(i for i, r in reads if r is longest)
        for i, r in bad[:10]:
            self._add(models.INCOMPATIBLE_ORDER, {
                "key": k, "ops": [self._op(i), self._op(li)], "values": [r, longest],
                "explanation": f"{txn.txn_label(self.history, self.ops[i])} read key {k!r} = {r!r} but "
                               f"{txn.txn_label(self.history, self.ops[li])} read {longest!r}: neither is a prefix "
                               "of the other, so the key's elements have no single order"})

    def _read_anomalies(self) -> None:
        """Garbage reads, G1a and G1b. Every read of an ordered key is a prefix
        of its order, so its elements are checked once, on the order itself."""
        ops, writer = self.ops, self.writer
        failed = self.failed
        bad_writer = failed | {-1}
        empty: dict = {}
        for k, reads in self.reads_by_key.items():
            ws = self.order_ops.get(k)
            if ws is not None:
                if bad_writer.isdisjoint(ws):
                    continue
                order = self.order[k]
                for idx, w in enumerate(ws):
                    if w in bad_writer:
                        first = next(i for i, r in reads if len(r) > idx)
                        self._bad_element(k, order[idx], None if w < 0 else w, first, order[: idx + 1])
            else:
                wk = writer.get(k, empty)
                for i, r in reads:
                    for v in r:
                        w = wk.get(v)
                        if w is None or w in failed:
                            self._bad_element(k, v, w, i, r)
        ends_marked = self._keys_read_ending_in_marked()
        for k, values in self.intermediate.items():
            if k in self._starts and k not in ends_marked:
                continue
            for i, r in self.reads_by_key.get(k, ()):
                if not r or r[-1] not in values:
                    continue
                v = r[-1]
                w = writer[k][v]
                if w == i or w in failed:
                    continue
                last = [x for kk, x in _appends_of(ops[w]) if kk == k][-1]
                self._add(models.G1B, {
                    "key": k, "value": v, "op": self._op(i), "writer": self._op(w),
                    "explanation": f"{txn.txn_label(self.history, ops[i])} read key {k!r} = {_show(r)}, "
                                   f"ending at {v!r}, an intermediate append of "
                                   f"{txn.txn_label(self.history, ops[w])}, which went on to append "
                                   f"{last!r} to {k!r} (intermediate read)"})

    def _keys_read_ending_in_marked(self) -> set:
        """The ordered keys some ok read of which ends in an intermediate value (a G1b
        candidate). Every read of an ordered key is a prefix of its order, so it ends
        at the element of its length: the intermediate elements are marked in the
        flat orders, and each read's last element looked up, all at once. Most keys
        have none, and are then passed over without a Python step per read."""
        flat, r_at, r_len = self._flat[0], self._flat[2], self._flat[3]
        starts, order = self._starts, self.order
        marked: list[int] = []
        for k, values in self.intermediate.items():
            at = starts.get(k)
            if at is not None:
                marked.extend(compress(count(at), map(values.__contains__, order[k])))
        if not marked:
            return set()
        is_marked = np.zeros(len(flat) + 1, dtype=bool)  # the last slot: "no element" (an empty read)
        is_marked[marked] = True
        last = np.where(r_len > 0, r_at + r_len - 1, len(flat))
        key_at = {at: k for k, at in starts.items()}
        return {key_at[a] for a in set(r_at[is_marked[last]].tolist())}  # np.unique imports numpy.ma

    def _bad_element(self, k, v, w: int | None, i: int, r: list) -> None:
        ops = self.ops
        if w is None:
            self._add(models.GARBAGE_READ, {
                "key": k, "value": v, "op": self._op(i),
                "explanation": f"{txn.txn_label(self.history, ops[i])} read key {k!r} = {_show(r)}, "
                               f"but no transaction ever appended {v!r} to {k!r}"})
        else:
            self._add(models.G1A, {
                "key": k, "value": v, "op": self._op(i), "writer": self._op(w),
                "explanation": f"{txn.txn_label(self.history, ops[i])} read key {k!r} = {_show(r)}, "
                               f"observing {v!r}, appended by {txn.txn_label(self.history, ops[w])}, "
                               "which failed (aborted read)"})

    def _dirty_updates(self) -> None:
        """A committed append ordered after a failed one: built on a write that never was."""
        ops, failed = self.ops, self.failed
        if not failed:
            return
        for k, ws in self.order_ops.items():
            if failed.isdisjoint(ws):
                continue
            first = next(idx for idx, w in enumerate(ws) if w in failed)
            later = next((idx for idx in range(first + 1, len(ws)) if ws[idx] >= 0
                          and ws[idx] not in failed), None)
            if later is None:
                continue
            fv, v, fw, w = self.order[k][first], self.order[k][later], ws[first], ws[later]
            state = "committed" if ops[w].type == "ok" else "may have committed"
            self._add(models.DIRTY_UPDATE, {
                "key": k, "values": [fv, v], "ops": [self._op(fw), self._op(w)],
                "explanation": f"key {k!r} holds {fv!r}, appended by {txn.txn_label(self.history, ops[fw])}, "
                               f"which failed, followed by {v!r}, appended by "
                               f"{txn.txn_label(self.history, ops[w])}, which {state}"})

    def _internal(self, i: int, k, r: list, expected: str) -> None:
        self._add(models.INTERNAL, {
            "key": k, "op": self._op(i), "read": r,
            "explanation": f"{txn.txn_label(self.history, self.ops[i])} read key {k!r} = {_show(r)}, but its own "
                           f"earlier micro-ops imply {expected}"})

    def _lost_update(self, k, r: list, members: list[int], after: bool) -> None:
        """`members` each read key k = r (the external part: `after` when some read
        it after appending to k themselves) and appended to k. Their appends all
        follow r, in some order: whichever came later was appended past the
        earlier one by a transaction that had read k without it. In a version order
        no read gives (appends no read saw) that is still a cycle, though no edge."""
        names = ", ".join(txn.txn_label(self.history, self.ops[i]) for i in members)
        self._add(models.LOST_UPDATE, {
            "key": k, "read": r, "ops": [self._op(i) for i in members],
            "explanation": f"{names} all read key {k!r} = {_show(r)}"
                           + (" (besides their own appends)" if after else "")
                           + " and appended to it; whichever committed later should have seen the "
                             "other's append"})

    # -- dependency edges ---------------------------------------------------

    def _edges(self) -> None:
        """ww, wr and rw edges of every ordered key at once, from flat arrays."""
        flat, r_op, r_at, r_len, r_of = self._flat
        del self._flat  # needed only here: 70 MB at a million transactions
        node_of = np.append(np.asarray(self.node_of, dtype=np.int64), -1)  # index -1 -> -1
        wn = node_of[flat]  # node of each element's writer
        gr = self.graph
        # ww: consecutive elements of the same key
        starts = np.zeros(len(wn), dtype=bool)
        at = r_at  # nondecreasing: each key's reads are together
        firsts = at[np.flatnonzero(np.diff(at, prepend=-1))]  # np.unique, without importing numpy.ma
        starts[firsts[firsts < len(wn)]] = True  # a key with an empty order starts nothing
        nxt = np.flatnonzero(~starts[1:]) if len(wn) > 1 else np.zeros(0, np.int64)
        gr.extend(wn[nxt], wn[nxt + 1], g.WW)
        rn = node_of[r_op]
        m, size = r_len, r_of
        # wr: the writer of a read's last element precedes the reader
        sel = np.flatnonzero(m > 0)
        gr.extend(wn[at[sel] + m[sel] - 1], rn[sel], g.WR)
        # rw: a reader of m elements precedes the writer of element m+1
        sel = np.flatnonzero(m < size)
        gr.extend(rn[sel], wn[at[sel] + m[sel]], g.RW)
        # Committed appends no read saw came after everything seen.
        self.unseen = self._unseen_by_key()
        for k, unseen in self.unseen.items():
            if k not in self.seen:  # no read: nothing they came after
                continue
            ws = self.order_ops[k]
            last = int(self.node_of[ws[-1]]) if ws and ws[-1] >= 0 else -1
            full_readers = [int(self.node_of[i]) for i, r in self.reads_by_key[k] if len(r) == len(ws)]
            for u in unseen:
                if last >= 0:
                    gr.add(last, u, g.WW)
                for r in full_readers:
                    gr.add(r, u, g.RW)

    def _unseen_by_key(self) -> dict[Key, list[int]]:
        """Per key, the transactions (nodes) whose appends to it no read saw, in no
        known order among themselves: on an ordered key, those past its longest
        read; on a key no read ever read, every appender (when there are two)."""
        out: dict[Key, list[int]] = {}
        node_of = self.node_of
        for k, seen in self.seen.items():
            wk = self.writer.get(k)
            if wk is None or len(wk) == len(seen):
                continue
            unseen = [int(node_of[w]) for v, w in wk.items() if v not in seen and node_of[w] >= 0]
            if unseen:
                out[k] = unseen
        for k, wk in self.writer.items():
            if k not in self.reads_by_key:
                nodes = [int(node_of[w]) for w in wk.values() if node_of[w] >= 0]
                if len(set(nodes)) > 1:
                    out[k] = nodes
        return out

    def _unordered(self, k, v) -> bool:
        """Is v an append to key k whose place no read gives (`self.unseen`)?"""
        return k in self.unseen and (k not in self.seen or v not in self.seen[k])

    # -- explanations -------------------------------------------------------

    def _index(self, k, v) -> int | None:
        """Position of v in key k's version order, if it has one."""
        seen = self.seen.get(k)
        return self.order[k].index(v) if seen is not None and v in seen else None

    def explain(self, a: int, b: int, kind: int) -> str:
        """Why edge a -> b holds, in words: the key and values that force it."""
        ta, tb = self.graph.txns[a], self.graph.txns[b]
        na, nb = txn.txn_name(ta), txn.txn_name(tb)
        if kind == g.WW:
            for k, v in _appends_of(ta):
                iv = self._index(k, v)
                if iv is None:
                    continue
                for k2, w in _appends_of(tb):
                    if k2 != k:
                        continue
                    iw = self._index(k, w)
                    if iw == iv + 1:
                        return f"{nb} appended {w!r} to key {k!r} right after {na}'s append of {v!r}"
                    if iw is None and iv == len(self.order[k]) - 1:
                        return (f"{na}'s append of {v!r} is the last element any read of key {k!r} "
                                f"shows, and {nb}'s committed append of {w!r}, never observed, came later")
            both = {}  # both unseen: an order they may have had, on each key both appended to
            for k, v in _appends_of(ta):
                if self._unordered(k, v) and k not in both:
                    w = next((w for k2, w in _appends_of(tb) if k2 == k and self._unordered(k, w)), None)
                    if w is not None:
                        both[k] = f"{na}'s append of {v!r} to key {k!r} came before {nb}'s append of {w!r}"
            if both:
                return (f"if {' and '.join(both.values())} (no read saw either, so either order is "
                        "possible)")
        if kind == g.WR:
            for k, r in _reads_of(tb):
                if r and self.writer.get(k, {}).get(r[-1]) == txn.op_index(self.ops, ta):
                    return f"{nb} observed {na}'s append of {r[-1]!r} to key {k!r} (read {_show(r)})"
        if kind == g.RW:
            for k, r in _reads_of(ta):
                order = self.order.get(k)
                if order is None:
                    continue
                m = len(r)
                for k2, w in _appends_of(tb):
                    if k2 != k:
                        continue
                    if m < len(order) and order[m] == w:
                        return (f"{na} read key {k!r} = {_show(r)}, missing {w!r}, which {nb} "
                                "appended next (so it was not yet there)")
                    if m == len(order) and w not in self.seen[k]:
                        return (f"{na} read key {k!r} = {_show(r)} without {w!r}, which {nb} "
                                "committed but no read ever saw (so it was appended later)")
        return f"{na} precedes {nb} ({g.KIND_NAMES[kind]})"


@gc_paused
def check(history: History, model: str = "strict-serializable",
          cycle_search_timeout: float | None = None) -> Result:
    """Judge a list-append history against `model`. `cycle_search_timeout`:
    seconds of cycle search per strongly connected component (see
    `checker.cycles`; None: its default)."""
    a = Analysis(history)
    stats = {"ops": len(a.ops), "keys": len(a.reads_by_key)}
    from sleuth.checker.labels import ListAppendLabels  # imports this module
    result = txn.analyze(history, a.graph, a.explain, a.anomalies, model, stats,
                         cycle_search_timeout=cycle_search_timeout, edge_labels=ListAppendLabels(a),
                         unseen=a.unseen)
    unfreed(a)  # when the program is about to leave: not freed for nothing
    return result
