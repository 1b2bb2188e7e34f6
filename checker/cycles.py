"""Cycle search: every cycle anomaly type, in every strongly connected
component, each component under its own time budget (Elle's `elle.txn`
cycle-anomaly specs and `cycle-search-timeout`; Adya 2000, section 4.4, for
the anomaly classes; Cerone & Gotsman, PODC 2016, for G-nonadjacent).

A cycle anomaly type is a spec, as in Elle: the edge kinds its cycles may
use, the kind of edge its search starts from, and an automaton over edge
kinds that says which closed walks are of the type (G-single: exactly one rw;
G-nonadjacent: two or more rw, never two in a row, also around the end;
G2-item: two or more rw, two of them adjacent; `-process`: at least one
process edge; `-realtime`: at least one real-time edge). The base specs are
crossed with the three variants (plain, `-process`, `-realtime`) exactly as
Elle crosses `base-cycle-anomaly-specs` with its variants.

The search gives each top-level component C of the whole graph (data,
process and real-time edges) `timeout` seconds in all, and, spec by spec:

  the components of C restricted to the spec's edge kinds
  (for G-single and G-nonadjacent, the components of Cerone & Gotsman's
  product graph, whose rw edges may only leave a node not entered by rw);
  in each one that holds a start edge, a breadth-first search from that edge
  back to its tail, confined to that component, for a walk the spec accepts,
  cut down to a simple cycle (`graph.simple_cycle`); until one is of the
  type sought, the fallbacks (for G-single and G-nonadjacent, any walk with
  no two rw in a row; last, any walk at all, which exists because both ends
  of the start edge lie in one component, and is a shortest, hence simple,
  cycle). Every cycle found is recorded under the name its edges give it.
  The last fallback runs only where the searches before it found no walk:
  it is there so that the sub-component reports some cycle of the spec's
  edge kinds, and a walk found before it is one already.

Why the verdict is exact when no search ran out of time: a model is violated
iff a cycle of a type it forbids exists, and each model's forbidden cycles
are exactly the cycles of one edge set (read-uncommitted: ww; read-committed:
ww+wr; snapshot isolation: a product-graph cycle through an rw edge;
serializable: any data cycle; strong-session: data+process; strict: data+
process+real-time). Every component of every such edge set that holds a
cycle holds a start edge of some spec, and the search from it returns a
cycle using only that set's edges: so some forbidden cycle is reported.
Consistent view (Adya's PL-2+) and forward consistent view are the exception:
they forbid the cycles with at most one rw edge, which are not all the cycles
of any edge set, so G-single's search tries a sub-component's start edges in
turn until one lies on a G-single (`CycleSearch._from_the_others`).
tests/test_cycle_types_bruteforce.py holds every model's verdict to every
simple cycle of random histories. Counts are lower bounds: one cycle per
(spec, component).

After the specs, Adya's G-cursor, G-monotonic and G-update (`checker.adya`:
they need edge labels, operation order, read-only transactions) are looked
for in the same components under the same budgets: first among the cycles
the specs found there, then by their own searches where none was of the
type. Each is exact for the inferred graph (its docstring says why).

When a component's deadline passes, its remaining specs are not searched:
their types are reported as `incomplete`, and the verdict becomes unknown if
the judged model forbids one of them (unless a forbidden anomaly was found).
An Adya type is not incomplete where the spec whose cycles include all of its
(`adya.WITHIN`) finished and found nothing.

Appends no read saw (list-append) have no known order among themselves, and
a model is violated only if every order they could have had violates it.
The graph orders them after everything seen but not among themselves, so a
cycle that needs their order is not in it: two unseen appenders of one key,
each of which precedes the other through other keys, are on a cycle whatever
their order, with an anti-dependency in it or not depending on which came
first. `CycleSearch._either_order` looks for those: for each such pair in one
component, the cycle types through a ww edge each way (`_through`: the specs'
searches from that edge, and Adya's three through it, `adya.through`), and
where both ways hold a cycle, the type that every model forbidding it also
forbids the other's (`_forced`), reported with both cycles.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from typing import Any

import numpy as np

from sleuth.checker import adya, models
from sleuth.checker import graph as g

DEFAULT_TIMEOUT = 10.0  # seconds per top-level component; see docs/cycle-search.md
MAX_EXAMPLES = 8  # cycles explained per anomaly type

BASES = (models.G0, models.G1C, models.G_SINGLE, models.G_NONADJACENT, models.G2_ITEM)  # simplest first
BASE_KINDS = {
    models.G0: frozenset({g.WW}),
    models.G1C: frozenset({g.WW, g.WR}),
    models.G_SINGLE: frozenset(g.DATA),
    models.G_NONADJACENT: frozenset(g.DATA),
    models.G2_ITEM: frozenset(g.DATA),
}
BASE_START = {models.G0: g.WW, models.G1C: g.WR, models.G_SINGLE: g.RW, models.G_NONADJACENT: g.RW, models.G2_ITEM: g.RW}
VARIANTS = (("", frozenset(), None), (models.PROCESS, frozenset({g.PROCESS}), g.PROCESS),
            (models.REALTIME, frozenset({g.PROCESS, g.REALTIME}), g.REALTIME))
SI_BASES = (models.G_SINGLE, models.G_NONADJACENT)  # the product graph finds their start edges
EITHER = -1  # in `CycleSearch.run`'s `cut`: cut short while trying the orders of unseen appends


def _automaton(base: str | None, kinds: frozenset[int], required: int | None) -> g.Automaton:
    """State: (started, rw count capped at 2, last edge rw, first edge rw,
    two rw adjacent, a wr seen, the required kind seen). `base` None: the
    snapshot-isolation condition (at least one rw, none adjacent)."""
    single = base == models.G_SINGLE
    nonadjacent = base in (models.G_NONADJACENT, None)

    def step(s: tuple, k: int) -> tuple | None:
        if k not in kinds:
            return None
        started, rw, last, first, adj, wr, req = s or (False, 0, False, False, False, False, False)
        if k == g.RW:
            if (single and rw >= 1) or (nonadjacent and last):
                return None
            adj, rw, last = adj or last, min(rw + 1, 2), True
            first = first if started else True
        else:
            last = False
        return (True, rw, last, first, adj, wr or k == g.WR, req or k == required)

    which = (models.G0, models.G1C, models.G_SINGLE, models.G_NONADJACENT, None, models.G2_ITEM).index(base)

    def accept(s: tuple) -> bool:
        if not s or (required is not None and not s[6]):
            return False
        _, rw, last, first, adj, wr, _ = s
        wraps = first and last  # the walk's last and first edges are both rw: adjacent
        # by `base`, in `which`'s order: G0, G1c, G-single, G-nonadjacent, SI's condition, G2-item
        return (True, wr, rw == 1, rw == 2 and not wraps, rw >= 1 and not wraps, rw == 2 and (adj or wraps))[which]

    return g.Automaton((), step, accept)


@dataclass(frozen=True)
class Spec:
    """One cycle anomaly type: what its cycles may use and must satisfy."""

    name: str
    base: str
    kinds: frozenset[int]  # edge kinds its cycles may use
    start: int  # the kind of edge each search begins with
    automaton: g.Automaton  # which walks are of this type
    fallbacks: tuple[g.Automaton, ...]  # tried in turn when none is; the last accepts any walk


def _specs() -> tuple[Spec, ...]:
    out = []
    for suffix, extra, required in VARIANTS:
        for base in BASES:
            kinds = BASE_KINDS[base] | extra
            falls = [g.any_cycle(kinds)]
            if base in SI_BASES:
                falls.insert(0, _automaton(None, kinds, required))
            out.append(Spec(base + suffix, base, kinds, BASE_START[base] if required is None else required,
                            _automaton(base, kinds, required), tuple(falls)))
    return tuple(out)


SPECS: tuple[Spec, ...] = _specs()
# the edge-kind specs, then Adya's anomalies that need more than edge kinds
# (`checker.adya`: edge labels, operation order, read-only transactions), searched last
TYPES: tuple[str, ...] = (*(s.name for s in SPECS), *adya.TYPES)


@dataclass
class OnCycles:
    """The transactions that lie on cycles, renumbered 0..m-1, with every
    edge between two of them in the same top-level component (components
    are disjoint, so one graph holds them all and one SCC computation per
    spec serves every component)."""

    ids: np.ndarray  # local node -> graph node
    idl: list[int]  # the same as a list (indexing a numpy array one item at a time is slow)
    comp: list[int]  # local node -> its top-level component
    sizes: list[int]  # component -> transactions
    src: np.ndarray
    dst: np.ndarray
    kind: np.ndarray
    adj: g.Adjacency
    key: np.ndarray  # local node -> its order guess for `g.scc_labels` (its invocation)


class CycleSearch:
    """Runs every spec in every component; collects examples, counts and
    the types whose search a component's time budget cut short."""

    def __init__(self, classify: Callable, explain: Callable, timeout: float = DEFAULT_TIMEOUT,
                 labels: Callable | None = None, txns: list | None = None):
        """`labels(a, b, kind)`: the (key, position, position) reasons for an
        edge (`checker.labels`), `txns`: the graph's transactions; without
        them G-cursor and G-monotonic (labels), G-update (txns) are not
        searched and reported incomplete where there are cycles."""
        self.classify, self.explain, self.timeout = classify, explain, timeout
        self.labels, self.txns = labels, txns
        self.found: dict[str, list[dict]] = {}
        self.counts: dict[str, int] = {}
        self.seen: set[tuple[str, frozenset[int]]] = set()
        self.incomplete: set[str] = set()
        self.hits: set[tuple[int, int]] = set()  # (component, spec index) whose search found a cycle
        self.plain: dict[int, list] = {}  # component -> the first data cycles the plain specs found there
        self.timeouts: list[dict] = []  # one per component cut short

    def run(self, oc: OnCycles, unseen: dict | None = None) -> None:
        """Specs in order, each over every component; a component's seconds
        are charged across specs, and once spent its remaining specs are skipped.
        `unseen`: per key, the graph nodes whose appends to it no read saw
        (their order is unknown; `_either_order`)."""
        left = [self.timeout] * len(oc.sizes)
        cut: dict[int, int] = {}  # component -> index of the spec it was cut short in, or EITHER
        sccs: dict = {}  # specs sharing edge kinds share their components
        for i, spec in enumerate(SPECS):
            self._spec(oc, i, spec, left, cut, sccs)
        # one context for the three: an edge's labels, computed for one type,
        # serve the others (G-cursor and G-monotonic look at the same cycles)
        ctx = adya.Context(oc, self.labels, lambda kinds: _components(oc, kinds, sccs), self.txns)
        for j, name in enumerate(adya.TYPES):
            self._adya(ctx, len(SPECS) + j, name, left, cut)
        if unseen:
            self._either_order(ctx, unseen, left, cut)
        for c, i in sorted(cut.items()):
            names = [t for t in (TYPES if i == EITHER else TYPES[i:]) if not self._absent(t, c, i)]
            if not names:  # every type left is proved absent by a search that finished
                continue
            self.incomplete.update(names)
            self.timeouts.append({"transactions": oc.sizes[c],
                                  "searching": "orders of unseen appends" if i == EITHER else names[0],
                                  "not-searched": names if i == EITHER else names[1:]})

    def _spec(self, oc: OnCycles, i: int, spec: Spec, left: list[float], cut: dict[int, int],
              sccs: dict) -> None:
        m, src, dst, kind = len(oc.ids), oc.src, oc.dst, oc.kind
        starts = np.flatnonzero(kind == spec.start)
        if not len(starts):
            return
        labels, sizes, label = _components(oc, spec.kinds, sccs)
        ls, ld = labels[src[starts]], labels[dst[starts]]
        inside = (ls == ld) & (sizes[ls] > 1)
        if spec.base in SI_BASES:
            key = ("si", spec.kinds)
            if key not in sccs:
                sccs[key] = _si_product(m, src, dst, kind, spec.kinds, oc.key)
            inside &= _in_si_product(sccs[key], src, dst, kind, starts)
        # one search per sub-component, from its first start edge (in edge order); for
        # G-single, from each of its start edges in turn until one is on a G-single
        sel = starts[inside]
        sub = labels[src[sel]]  # each start edge's sub-component
        by = by_label = None
        if spec.base == models.G_SINGLE:  # every start edge, by sub-component in edge order (a stable sort)
            order = np.argsort(sub, kind="stable")
            by, by_label = sel[order], sub[order]
        sel = sel[np.sort(np.unique(sub, return_index=True)[1])]
        hopeless = _no_adjacent_rw(oc, labels, sizes) if spec.base == models.G2_ITEM else None
        comp, start, perf = oc.comp, spec.start, time.perf_counter
        # `_charged`, inlined: a partial and a call less for each of the 30,000
        # sub-components searched at 100,000 read-committed transactions
        for a, b in zip(src[sel].tolist(), dst[sel].tolist(), strict=True):
            c = comp[a]
            if c in cut:
                continue
            if left[c] <= 0:
                cut[c] = i
                continue
            t = perf()
            try:
                self._from_edge(oc, i, spec, (a, b, start), by, by_label, label, t + left[c],
                                hopeless is not None and hopeless[label[a]])
            except g.SearchTimeout:
                cut[c] = i
            finally:
                left[c] -= perf() - t

    def _from_edge(self, oc: OnCycles, i: int, spec: Spec, edge: tuple[int, int, int], by, by_label,
                   label: list[int], deadline: float, hopeless: bool = False) -> None:
        """`spec`'s searches from one start edge of a sub-component (`_spec`): its
        automaton, then its fallbacks until a cycle of the type is found, each
        cycle found recorded. `hopeless`: the automaton accepts no walk in this
        sub-component (`_no_adjacent_rw`), so its search, which would find none, is
        not run: the fallbacks run as they would after it."""
        a = edge[0]
        c = oc.comp[a]
        found = False
        for auto in (spec.automaton, *spec.fallbacks):
            if found and auto is spec.fallbacks[-1]:
                break  # any walk at all: only to report some cycle here, and one is
            if hopeless and auto is spec.automaton:
                continue
            walk = g.bfs_cycle(oc.adj, edge, auto, label, deadline)
            if walk is None and by is not None and auto is spec.automaton:
                walk = self._from_the_others(oc, _group(by, by_label, label[a]), spec, label, deadline)
            if walk is not None:
                found = True
                self.hits.add((c, i))
                cycle = g.simple_cycle(walk)
                if spec.name in BASES:  # a data cycle: maybe also one of adya's types
                    kept = self.plain.setdefault(c, [])
                    if len(kept) < adya.REUSE:  # only the first few are tried (`_adya`)
                        kept.append(cycle)
                if self._record(cycle, oc.idl) == spec.name:
                    break

    @staticmethod
    def _charged(c: int, i: int, left: list[float], cut: dict[int, int], work: Callable[[float], Any]) -> Any:
        """`work(deadline)` on component c's budget (`left`), charged the time it
        takes; its result, or None when the budget was spent before (then nothing
        runs: a budget of 0 searches nothing) or ran out during it (a
        SearchTimeout), and c is then marked cut short at `i` (a spec's index, or
        EITHER)."""
        if left[c] <= 0:
            cut[c] = i
            return None
        t = time.perf_counter()
        try:
            return work(t + left[c])
        except g.SearchTimeout:
            cut[c] = i
            return None
        finally:
            left[c] -= time.perf_counter() - t

    @staticmethod
    def _from_the_others(oc: OnCycles, edges, spec: Spec, label: list[int], deadline: float):
        """A walk `spec` accepts from the sub-component's other start edges, tried in
        edge order; None if none is on one. For G-single: consistent view (Adya's PL-2+)
        forbids exactly the cycles with at most one rw edge, which are not all the
        cycles of one edge set, so a sub-component whose first rw edge lies only on
        cycles with more (a G-nonadjacent, say) may still hold a G-single through
        another. Every G-single cycle holds a start edge (its rw edge; for `-process`
        and `-realtime`, its process or real-time edge), and the search from one is a
        breadth-first search back to its tail with no other rw edge, whose shortest
        answer is a simple cycle: so one from every start edge misses none."""
        others = edges[1:]
        for a, b in zip(oc.src[others].tolist(), oc.dst[others].tolist(), strict=True):
            walk = g.bfs_cycle(oc.adj, (a, b, spec.start), spec.automaton, label, deadline)
            if walk is not None:
                return walk
        return None

    def _either_order(self, ctx: adya.Context, unseen: dict, left: list[float], cut: dict[int, int]) -> None:
        """Cycles every order of two unseen appends forces. Two transactions u and v
        appended to key k, and no read saw either append: one came first, so the
        history has u -ww-> v or v -ww-> u (directly or through other unseen
        appends: a chain of ww edges), and a model is violated whatever the order
        iff a cycle it forbids runs through u -ww-> v in the graph with that edge,
        and another through v -ww-> u in the graph with that one. Both need a path
        each way between u and v already, so u and v lie in one component, and
        only pairs there are tried, charged to its budget. A closed walk through a
        chain u -ww-> w -ww-> v instead of the edge falls apart, where w is on the
        rest of the walk, into simple cycles whose edges are the walk's with a ww
        edge inserted, which adds no rw edge and no adjacency of two: each is
        forbidden by every model that forbids the walk's type. So the verdict is
        sound; it is exact for two unseen appenders of a key (tests/
        test_unread_appends_bruteforce.py), and for three or more, whose orders
        are tried two at a time, held exact there by that test but not proved.
        Only what can change a verdict is looked for: a type every model
        forbidding which is already violated by a type found is not searched or
        kept (so such cycles are not counted here). Adya's G-cursor, G-monotonic and
        G-update are looked for through each order's edge too (`adya.through`), after
        their searches of the graph, so that those run only where no model forbidding
        them is violated yet, the premise of `adya.through`'s exactness. A pair that
        appended unseen to several keys is one edge labelled with each: an order with
        u first on one key and v first on another has a ww cycle (a G0, which every
        model forbids), so only the orders with one of them first on every key can
        keep a model; the edge kinds are the same for one key or several, but a
        G-monotonic may need one key's label and another key's rw edge."""
        oc = ctx.oc
        ids = oc.ids
        violated = frozenset().union(*map(_forbidding, self.found))
        # which unseen appenders lie on cycles, for every key at once (tens of thousands of
        # keys at a million transactions, few of them on cycles)
        keys = list(unseen)
        nodes = np.fromiter(itertools.chain.from_iterable(unseen.values()), np.int64)
        key_of = np.repeat(np.arange(len(keys)), [len(unseen[k]) for k in keys])
        at = np.minimum(np.searchsorted(ids, nodes), len(ids) - 1)
        on = np.flatnonzero(ids[at] == nodes)
        groups: dict[tuple[int, int], set[int]] = {}  # (key, component) -> its unseen appenders
        for i, u in zip(key_of[on].tolist(), at[on].tolist(), strict=True):
            groups.setdefault((i, oc.comp[u]), set()).add(u)
        # a pair unseen on several keys came in the same order on each, or its two ww
        # edges close a G0 (every model forbids one): one edge, with every key's label
        pairs: dict[tuple[int, int], list] = {}  # (u, v) -> the keys both appended to unseen
        for (i, _), members in groups.items():
            for u, v in itertools.combinations(sorted(members), 2):
                pairs.setdefault((u, v), []).append(keys[i])
        for (u, v), ks in pairs.items():
            c = oc.comp[u]
            if c in cut:
                continue
            both = self._charged(c, EITHER, left, cut, partial(self._both_ways, ctx, ks, u, v, violated))
            if both:
                self._forced(oc, ks, *both)
                violated = violated.union(*map(_forbidding, self.found))

    def _both_ways(self, ctx: adya.Context, ks: list, u: int, v: int, violated: frozenset[str],
                   deadline: float) -> tuple[dict, dict] | None:
        """`_through` u -> v, then v -> u; None unless both hold a cycle."""
        one = self._through(ctx, ks, u, v, violated, deadline)
        other = self._through(ctx, ks, v, u, violated, deadline) if one else {}
        return (one, other) if other else None

    def _through(self, ctx: adya.Context, ks: list, u: int, v: int, violated: frozenset[str],
                 deadline: float) -> dict[str, tuple[list, str | None]]:
        """The cycle types through a ww edge u -> v on keys `ks` that the graph lacks, each
        with a cycle and (Adya's types) its detail sentence: by each spec's searches from
        that edge (as `_spec`'s, whose argument says why a model's forbidden cycles are
        found: for each model, by a spec whose type it forbids), then by Adya's three
        (`adya.through`); {} when none is. Types forbidden only by models in `violated`
        are neither searched for nor returned."""
        oc = ctx.oc
        wanted = {name for name in (*(spec.name for spec in SPECS), *self._adya_types())
                  if not _forbidding(name) <= violated}
        edge = (u, v, g.WW)
        if not wanted or g.bfs_cycle(oc.adj, edge, _ANY, oc.comp, deadline) is None:
            return {}
        out: dict[str, tuple[list, str | None]] = {}
        for spec in SPECS:
            if spec.name not in wanted:
                continue
            for auto in (spec.automaton, *spec.fallbacks):
                walk = g.bfs_cycle(oc.adj, edge, auto, oc.comp, deadline)
                if walk is not None:
                    cycle = g.simple_cycle(walk)
                    name = self.classify(cycle)
                    if not _forbidding(name) <= violated:
                        out.setdefault(name, (cycle, None))
                    if name == spec.name:
                        break
        names = [name for name in adya.TYPES if name in wanted and name not in out]
        if names:
            facts = [self.labels.assumed(oc.idl[u], oc.idl[v], k) for k in ks]
            for name in names:
                found = adya.through(ctx, name, u, v, facts, deadline)
                if found is not None:
                    out[name] = found
        return out

    def _adya_types(self) -> list[str]:
        """Adya's types `adya.through` can look for: those needing edge labels only
        where the datatype can say what an assumed edge's label is."""
        return list(adya.TYPES) if hasattr(self.labels, "assumed") and self.txns is not None else []

    def _forced(self, oc: OnCycles, ks: list, one: dict[str, tuple], other: dict[str, tuple]) -> None:
        """Record what both orders of a pair of unseen appends to keys `ks` break (`one`,
        `other`: `_through`'s types, cycles and details for each order). For a type of each
        order's cycles, the models violated either way are those forbidding both: when
        every model forbidding one type forbids the other too, that type is reported;
        otherwise (a G-single one way, a G0-process the other) the type forbidden by
        exactly those models (`_JOIN`: G-single-process), its example showing each
        order's cycle under its own name."""
        # reported type -> (its own type, its (cycle, detail), the other's type, (cycle, detail))
        picks: dict[str, tuple] = {}
        for t1, c1 in one.items():
            for t2, c2 in other.items():
                f1, f2 = _forbidding(t1), _forbidding(t2)
                if f1 <= f2:
                    picks.setdefault(t1, (t1, c1, t2, c2))
                elif f2 <= f1:
                    picks.setdefault(t2, (t2, c2, t1, c1))
                elif f1 & f2 in _JOIN:
                    picks.setdefault(_JOIN[f1 & f2], (t1, c1, t2, c2))
        ids = oc.idl
        for name, (own, (cycle, detail), other_name, (other_cycle, other_detail)) in picks.items():
            extra = {"unseen-order": {"keys": ks, "other-type": other_name}}
            if len(self.found.get(name, ())) < MAX_EXAMPLES:
                there = self.explain(other_name, [(ids[x], ids[y], z) for x, y, z in other_cycle])
                extra["unseen-order"]["other-cycle"] = there["cycle"]
                detail = ((detail + "\n" if detail else "")
                          + f"The first step's order is not known ({_unseen(ks)}); "
                          f"the other order has a cycle too:\n{there['explanation']}"
                          + ("\n" + other_detail if other_detail else ""))
                if own != name:
                    detail += (f"\nWhichever order the appends had, every model that forbids a {name} is "
                               f"violated: it forbids both a {own} and a {other_name}.")
            kept = len(self.found.get(name, ()))
            self._record(cycle, ids, name, detail, extra, shown_as=own)
            if len(self.found[name]) > kept:  # explained: its first step is the order assumed
                self.found[name][-1]["steps"][0]["unseen-order"] = True

    def _absent(self, name: str, c: int, cut_at: int) -> bool:
        """Is `name` certainly absent from component c, because the plain
        spec whose cycles include all of its (`adya.WITHIN`) searched c to the
        end (it was not cut, at index `cut_at` or before) and found no cycle
        there? Each spec's search finds a cycle in every sub-component that
        holds one of its start edges on a cycle of its edge set (module
        docstring), so finding none means there is none."""
        within = adya.WITHIN.get(name)
        if within is None:
            return False
        s = TYPES.index(within)
        return s < cut_at and (c, s) not in self.hits

    def _adya(self, ctx: adya.Context, i: int, name: str, left: list[float], cut: dict[int, int]) -> None:
        """One of `checker.adya`'s detectors, task by task, each charged to its
        component's budget like a spec's searches."""
        oc = ctx.oc
        if self.txns is None or (self.labels is None and name != models.G_UPDATE):
            for c in range(len(oc.sizes)):  # cannot be searched: say so
                cut.setdefault(c, i)
            return
        done = set()  # components where a cycle the specs found already is one of this type
        for c, found in self.plain.items():
            for cycle in found[:adya.REUSE]:
                detail = c not in cut and adya.QUALIFIES[name](ctx, cycle)
                if detail:
                    self._record(cycle, oc.idl, name, detail)
                    done.add(c)
                    break
        for c, task in adya.DETECTORS[name](ctx):
            if c in cut or c in done or self._absent(name, c, len(TYPES)):
                continue
            for cycle, detail in self._charged(c, i, left, cut, task) or ():
                self._record(cycle, oc.idl, name, detail)

    def _record(self, cycle: list[tuple[int, int, int]], ids: list[int], name: str | None = None,
                detail: str | None = None, extra: dict | None = None, shown_as: str | None = None) -> str:
        """Name (from its edges, unless given), count and (the first few)
        explain a cycle of local nodes (`OnCycles`); returns its name. A name
        depends only on the edge kinds, and local nodes map one to one onto
        the graph's, so a cycle is told from those seen and named by its local
        nodes; it is turned into the graph's nodes only to be explained."""
        name = name or self.classify(cycle)
        key = (name, frozenset(a for a, _, _ in cycle))
        if key in self.seen:
            return name
        self.seen.add(key)
        self.counts[name] = self.counts.get(name, 0) + 1
        examples = self.found.setdefault(name, [])
        if len(examples) < MAX_EXAMPLES:
            example = self.explain(shown_as or name, [(ids[a], ids[b], k) for a, b, k in cycle])
            if detail:
                example["explanation"] += "\n" + detail
            examples.append({**example, **(extra or {})})
        return name


_ANY = g.any_cycle(frozenset(range(len(g.KIND_NAMES))))  # every walk: is there any cycle at all


def _unseen(ks: list) -> str:
    """Why the order of a pair's appends to keys `ks` is not known."""
    if len(ks) == 1:
        return f"no read saw either append to key {ks[0]!r}"
    keys = f"{', '.join(map(repr, ks[:-1]))} and {ks[-1]!r}"
    return f"no read saw either transaction's appends to keys {keys}, which came in the same order on each"


@cache
def _forbidding(anomaly: str) -> frozenset[str]:
    """The models that forbid `anomaly`."""
    return frozenset(m for m in models.MODELS if models.forbids(m, anomaly))


# forbidding models -> the first cycle type (simplest first) forbidden by exactly those: for
# two types neither of whose forbidding models include the other's, the type forbidden
# wherever both are (a base of one, the variant of the other: G-single and G0-process ->
# G-single-process); tests/test_unread_appends_bruteforce.py checks there is one for every such pair
_JOIN: dict[frozenset[str], str] = {_forbidding(s.name): s.name for s in reversed(SPECS)}


def _group(edges: np.ndarray, keys: np.ndarray, key: int) -> np.ndarray:
    """The run of `edges` (sorted by `keys`) whose key is `key`."""
    lo, hi = np.searchsorted(keys, (key, key + 1))
    return edges[lo:hi]


def _components(oc: OnCycles, kinds: frozenset[int], sccs: dict) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """The strongly connected components of oc's edges of `kinds`: (label
    of each node, size of each component, the labels as a list), computed
    once per set of kinds and kept in `sccs`."""
    if kinds not in sccs:
        sel = np.flatnonzero(np.isin(oc.kind, list(kinds)))
        labels, sizes = g.scc_labels(len(oc.ids), oc.src[sel], oc.dst[sel], oc.key)
        sccs[kinds] = labels, sizes, labels.tolist()
    return sccs[kinds]


def _no_adjacent_rw(oc: OnCycles, labels: np.ndarray, sizes: np.ndarray) -> list[bool]:
    """For each component of `labels` (a spec's sub-components), is there no
    transaction in it with both an rw edge in and an rw edge out inside it?

    Then G2-item's automaton (any variant) accepts no walk there, so its search
    would find none. Proof: the automaton accepts a closed walk only with two rw
    edges in a row (`adj`), or with both its first and last edges rw (`wraps`);
    either way some transaction on the walk is entered by an rw edge of the walk
    and left by the next (the two in a row meet at a transaction; a walk that
    wraps is entered at its start by its last edge and left by its first), and
    the search takes only edges inside the start edge's component (`graph.
    bfs_cycle`). A component with no such transaction holds no such walk. So
    skipping the search there changes nothing that is found or counted: the
    fallbacks run as they would have after a search that found nothing."""
    src, dst, kind = oc.src, oc.dst, oc.kind
    rw = np.flatnonzero(kind == g.RW)
    rw = rw[(labels[src[rw]] == labels[dst[rw]]) & (sizes[labels[src[rw]]] > 1)]
    into = np.zeros(len(oc.ids), dtype=bool)
    into[dst[rw]] = True
    both = src[rw][into[src[rw]]]  # a transaction left by an rw edge and entered by one, inside
    hopeless = np.ones(len(sizes), dtype=bool)
    hopeless[labels[both]] = False
    return hopeless.tolist()


def _si_product(m: int, src, dst, kind, kinds: frozenset[int],
                key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Components of Cerone & Gotsman's product graph over `kinds`: node 2v
    is "v, not entered by rw", 2v+1 "v, entered by rw"; non-rw edges leave
    either, rw edges only the first and enter the second. A closed walk with
    no two rw edges in a row (their condition: `(WW ∪ WR) ; RW?` acyclic) is
    a cycle there."""
    non = np.flatnonzero(np.isin(kind, list(kinds - {g.RW})))
    rw = np.flatnonzero(kind == g.RW) if g.RW in kinds else np.zeros(0, np.int64)
    ps = np.concatenate([2 * src[non], 2 * src[non] + 1, 2 * src[rw]])
    pd = np.concatenate([2 * dst[non], 2 * dst[non], 2 * dst[rw] + 1])
    return g.scc_labels(2 * m, ps, pd, np.repeat(key, 2))


def _in_si_product(product: tuple[np.ndarray, np.ndarray], src, dst, kind, starts: np.ndarray) -> np.ndarray:
    """Which start edges lie on a cycle of the product graph (`_si_product`): an edge
    does when one of its copies there has both ends in one component. A non-rw edge
    has two copies, from "not entered by rw" and from "entered by rw"; the second
    is the one on the cycle when the walk reaches the edge's tail by an rw edge (a
    process or real-time edge right after a read missed a write)."""
    labels, sizes = product
    s, d, k = src[starts], dst[starts], kind[starts]
    is_rw = k == g.RW
    # two different product nodes in one component: a cycle through the copy
    via_rw = (labels[2 * s] == labels[2 * d + 1]) & is_rw
    via_1 = (labels[2 * s + 1] == labels[2 * d]) & ~is_rw
    # the same product node when s == d: a cycle only if its component is more than it
    via_0 = (labels[2 * s] == labels[2 * d]) & ~is_rw & ((s != d) | (sizes[labels[2 * s]] > 1))
    return via_rw | via_0 | via_1


def on_cycles(n: int, labels: np.ndarray, src: np.ndarray, dst: np.ndarray, kind: np.ndarray,
              invoke: np.ndarray, complete: np.ndarray, process_src: np.ndarray,
              process_dst: np.ndarray) -> OnCycles | None:
    """The part of the graph on cycles, from the top-level component `labels`
    of its n transactions (computed with real-time order as barriers): data
    and process edges inside a component, and each component's explicit
    real-time edges (Elle's frontier reduction among its own transactions)."""
    lab = labels[:n]
    tsize = np.bincount(lab, minlength=1)
    nodes = np.flatnonzero(tsize[lab] > 1)
    if not len(nodes):
        return None
    m = len(nodes)
    local = np.full(n, -1, dtype=np.int64)
    local[nodes] = np.arange(m)
    # components numbered by their first transaction, not by the SCC labels' values, which
    # differ between scipy and Tarjan in Python: each component's real-time edges join the
    # edge list in this order, so the examples shown would otherwise depend on which ran
    _, first, comp = np.unique(lab[nodes], return_index=True, return_inverse=True)
    comp = np.argsort(np.argsort(first))[comp]
    s = np.concatenate([src, process_src])
    d = np.concatenate([dst, process_dst])
    k = np.concatenate([kind, np.full(len(process_src), g.PROCESS, dtype=np.int64)])
    same = (lab[s] == lab[d]) & (local[s] >= 0)
    rt_s, rt_d = g.realtime_reduction(comp, invoke[nodes], complete[nodes])
    src2 = np.concatenate([local[s[same]], rt_s])
    dst2 = np.concatenate([local[d[same]], rt_d])
    kind2 = np.concatenate([k[same], np.full(len(rt_s), g.REALTIME, dtype=np.int64)])
    return OnCycles(nodes, nodes.tolist(), comp.tolist(), np.bincount(comp).tolist(), src2, dst2, kind2,
                    g.Adjacency(m, src2, dst2, kind2), invoke[nodes] * g.KEY_ROOM)
