"""G-monotonic (Adya's PL-2L), G-cursor (PL-CS) and G-update (PL-3U) against brute
force, on random list-append and rw-register histories.

Adya: a cycle of the unfolded graph USG(H, Ti) with exactly one
anti-dependency, which leaves a read ri of Ti, the rest dependency (ww, wr)
and order edges. Over the inferred dependency graph that is a simple cycle
Ti -rw-> Tk -> ... -> Tu -> Ti of one rw edge and otherwise ww/wr edges,
whose last edge enters Ti at an operation q no later than the read p the rw
edge leaves (q <= p; the order edges of Ti lead from q to p). G-cursor(x):
a simple cycle of one rw edge and otherwise ww edges, every edge labelled x.
G-update: a simple cycle of dependency edges with an rw edge, whose
transactions all write except at most one (read-only: no write in its
micro-ops). Brute force enumerates every simple cycle of the graph and asks exactly that
of each, with the edge labels (`checker.labels`: the key and operations of
each edge); the checker's searches (`checker.adya.monotonic`: backward
marking from Ti's entries, label-free pruning first; `checker.adya.cursor`:
a ww(x) path back from each rw edge's target; `checker.adya.update`) must
report the type iff one exists.
"""

from __future__ import annotations

import random

import pytest
from test_cycles_bruteforce import generate, to_history
from test_rw_register_options import random_history

from sleuth.checker import graph as g
from sleuth.checker import list_append, rw_register
from sleuth.checker.adya import NEVER
from sleuth.checker.labels import ListAppendLabels, RwRegisterLabels

# name -> (module, labels, options of both its Analysis and its check)
DATATYPES = {"list-append": (list_append, ListAppendLabels, {}),
             "rw-register": (rw_register, RwRegisterLabels, {}),
             "rw-register, linearizable keys": (rw_register, RwRegisterLabels, {"linearizable_keys": True})}


def simple_cycles(n: int, edges: list[tuple[int, int, int]]):
    """Every simple cycle of a small multigraph, each once (from its smallest node),
    as (from, to, kind) steps."""
    out: dict[int, list[tuple[int, int]]] = {}
    for a, b, k in edges:
        out.setdefault(a, []).append((b, k))
    for s in range(n):
        path: list[tuple[int, int, int]] = []
        on = {s}

        def walk(u: int, s=s, path=path, on=on):
            for v, k in out.get(u, ()):
                if v == s:
                    yield [*path, (u, v, k)]
                elif v > s and v not in on:
                    on.add(v)
                    path.append((u, v, k))
                    yield from walk(v)
                    path.pop()
                    on.discard(v)
        yield from walk(s)


def one_rw_cycles(datatype: str, h):
    """Each simple cycle of the inferred graph with exactly one rw edge and
    otherwise ww/wr edges, rotated to begin with it, and the edge labels."""
    module, labels, options = DATATYPES[datatype]
    an = module.Analysis(h, **options)
    facts = labels(an)
    src, dst, kind = (x.tolist() for x in an.graph.arrays())
    edges = [(a, b, k) for a, b, k in zip(src, dst, kind, strict=True) if k in g.DATA]
    for cycle in simple_cycles(len(an.graph.txns), edges):
        rw = [i for i, (_, _, k) in enumerate(cycle) if k == g.RW]
        if len(rw) == 1:
            yield cycle[rw[0]:] + cycle[:rw[0]], facts


def monotonic_by_brute_force(datatype: str, h) -> bool:
    for cycle, facts in one_rw_cycles(datatype, h):
        (a, b, _), (u, _, k) = cycle[0], cycle[-1]
        p = max((pa for _, pa, _ in facts(a, b, g.RW)), default=-1)
        q = min((qa for _, _, qa in facts(u, a, k)), default=NEVER)
        if q <= p:
            return True
    return False


def cursor_by_brute_force(datatype: str, h) -> bool:
    for cycle, facts in one_rw_cycles(datatype, h):
        if all(k == g.WW for _, _, k in cycle[1:]) and set.intersection(
                *({x for x, _, _ in facts(a, b, k)} for a, b, k in cycle)):
            return True
    return False


def update_by_brute_force(datatype: str, h) -> bool:
    """G-update: a simple cycle of the inferred graph's dependency edges with an rw
    edge, whose transactions all write but at most one."""
    module, _, options = DATATYPES[datatype]
    an = module.Analysis(h, **options)
    src, dst, kind = (x.tolist() for x in an.graph.arrays())
    edges = [(a, b, k) for a, b, k in zip(src, dst, kind, strict=True) if k in g.DATA]
    writes = [any(f != "r" for f, _, _ in (t.value if t.type == "ok" else t.invoke_value))
              for t in an.graph.txns]
    return any(any(k == g.RW for _, _, k in cycle) and sum(not writes[a] for a, _, _ in cycle) <= 1
               for cycle in simple_cycles(len(an.graph.txns), edges))


BRUTE = {"G-monotonic": monotonic_by_brute_force, "G-cursor": cursor_by_brute_force,
         "G-update": update_by_brute_force}


SEEDS = range(1500)


def history(datatype: str, seed: int):
    if datatype == "list-append":
        return to_history(generate(random.Random(70_000 + seed)))
    rnd = random.Random(80_000 + seed)  # the same histories with and without linearizable keys
    return to_history(random_history(rnd, rnd.randint(3, 7), 3))


@pytest.mark.parametrize("datatype", DATATYPES)
@pytest.mark.parametrize("seed", SEEDS)
def test_adyas_three_match_brute_force(datatype, seed):
    h = history(datatype, seed)
    module, _, options = DATATYPES[datatype]
    found = module.check(h, "read-committed", **options).anomalies
    for name, brute in BRUTE.items():
        assert (name in found) == brute(datatype, h), name


# the plain rw-register histories infer no ww edge a G-cursor cycle needs: there
# the comparison above sees only "absent", and the answers are not both common
@pytest.mark.parametrize("datatype,name", [(d, n) for d in DATATYPES for n in BRUTE
                                           if (d, n) != ("rw-register", "G-cursor")])
def test_both_answers_are_common(datatype, name):
    answers = [BRUTE[name](datatype, history(datatype, s)) for s in SEEDS]
    assert 10 <= sum(answers) <= len(answers) - 10, sum(answers)


def with_internal_reads(seed: int):
    """A list-append history whose reads after the transaction's own appends to the key
    drop the last of them, half the time: internal reads, which the graph ignores."""
    rnd = random.Random(90_000 + seed)
    txns = []
    for p, start, end, typ, mops in generate(rnd):
        own: dict = {}
        out = []
        for f, k, v in mops:
            if f == "append":
                own.setdefault(k, []).append(v)
            elif typ == "ok" and own.get(k) and rnd.random() < 0.5:
                v = v[:-1]
            out.append([f, k, v])
        txns.append((p, start, end, typ, out))
    return to_history(txns)


@pytest.mark.parametrize("datatype", DATATYPES)
def test_every_edge_has_a_label_and_only_edges_do(datatype):
    """The labels restate, per key, the rules the datatype's `_edges` used (computed
    apart: columns there, one transaction at a time here), so an edge of the graph
    without a reason, or a reason for a pair the graph does not link, is a label
    that is wrong. The brute force above takes the labels as given; this holds them
    to the graph. The histories include reads after the transaction's own appends
    (whose external part the labels must cut off) and internal reads."""
    module, labels, options = DATATYPES[datatype]
    own_then_read = 0
    for seed in SEEDS[:400]:
        h = history(datatype, seed) if datatype != "list-append" or seed % 2 else with_internal_reads(seed)
        an = module.Analysis(h, **options)
        facts = labels(an)
        src, dst, kind = (x.tolist() for x in an.graph.arrays())
        edges = {(a, b, k) for a, b, k in zip(src, dst, kind, strict=True) if k in g.DATA and a != b}
        n = len(an.graph.txns)
        for a in range(n):
            for b in range(n):
                for k in g.DATA:
                    if a != b:
                        assert bool(facts(a, b, k)) == ((a, b, k) in edges), (seed, a, b, g.KIND_NAMES[k])
        for op in an.graph.txns:
            appended = set()
            for f, key, _ in op.value:
                own_then_read += f == "r" and key in appended
                if f in ("append", "w"):
                    appended.add(key)
    assert own_then_read > 50  # the case the labels' external parts are for is exercised
    if datatype == "list-append":
        internal = sum(bool(list_append.Analysis(with_internal_reads(s)).anomalies.get("internal"))
                       for s in SEEDS[:400:2])
        assert internal > 20
