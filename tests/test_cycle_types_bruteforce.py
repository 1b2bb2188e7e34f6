"""The cycle search's verdict for every model, against every simple cycle.

For hundreds of random small list-append histories (tests/test_cycles_bruteforce.py
makes them: stale reads, failed and crashed transactions), this enumerates every
simple cycle of the dependency graph: the data edges the checker inferred, with
process and real-time order as whole relations (every pair, not only neighbours),
and every choice of edge kind between two transactions. Each cycle is named from
the definitions (Adya; Elle for `-process` and `-realtime`), and a model is
violated iff some cycle's type, or some non-cycle anomaly, is one the model forbids
(`models.forbids`, whose table tests/test_models.py checks by hand). The checker's
verdict must agree for every model it can judge without Adya's labelled anomalies,
except where it goes beyond the graph: two appends no read saw have no edge between
them, and where either order closes a cycle the model forbids, the checker says
invalid; the brute force over every order of the unseen appends must then agree
(tests/test_unread_appends_bruteforce.py).

A second test does the same for the search alone on random graphs (random
intervals on three processes, random data edges of every kind): at 400 of them it
fails on the search before the fixes of 2026-11-27, where the history test above
needs its two hand-made cases.

This is what the search promises (checker/cycles.py: one search per component of
each type's edges, from one start edge, exact for the verdict), and it is what the
brute force over serial orders (three models) cannot see: the snapshot-isolation
family's strong variants, whose cycles are not all the cycles of one edge set.
"""

import os
import random

import numpy as np
import pytest
from test_cycles_bruteforce import generate, to_history

from sleuth.checker import cycles, list_append, models, txn
from sleuth.checker import graph as g

N = int(os.environ.get("SLEUTH_BRUTE_N", "400"))


def _decided_by_plain_cycles(model: str) -> bool:
    """Adya's G-cursor and G-monotonic are G-single cycles, and a G-update a cycle with an
    rw edge: a model that forbids them but not those cycles needs their labels (checked
    in tests/test_adya_bruteforce.py)."""
    single = models.forbids(model, "G-single")
    any_rw = single and models.forbids(model, "G-nonadjacent") and models.forbids(model, "G2-item")
    return ((single or not models.forbids(model, "G-cursor"))
            and (single or not models.forbids(model, "G-monotonic"))
            and (any_rw or not models.forbids(model, "G-update")))


MODELS = [m for m in models.MODELS if _decided_by_plain_cycles(m)]


def name(kinds: list[int]) -> str:
    """A cycle's type from its edge kinds, by the definitions."""
    rw = kinds.count(g.RW)
    if rw == 0:
        base = "G1c" if g.WR in kinds else "G0"
    elif rw == 1:
        base = "G-single"
    else:
        adjacent = any(kinds[i] == g.RW == kinds[i - 1] for i in range(len(kinds)))  # i - 1 wraps
        base = "G2-item" if adjacent else "G-nonadjacent"
    if g.REALTIME in kinds:
        return base + "-realtime"
    return base + "-process" if g.PROCESS in kinds else base


def simple_cycle_types(n: int, kinds: dict[tuple[int, int], set[int]]) -> set[str]:
    """The type of every simple cycle of a graph of n nodes, with `kinds` the edge
    kinds from u to v, every choice of kind between two nodes counted."""
    out: set[str] = set()

    def extend(path: list[int], chosen: list[int]) -> None:
        u = path[-1]
        for v in range(path[0], n):
            ks = kinds.get((u, v), ())
            if v == path[0]:
                for k in ks:
                    out.add(name([*chosen, k]))
            elif v not in path:
                for k in ks:
                    extend([*path, v], [*chosen, k])

    for s in range(n):  # each simple cycle once, from its smallest node
        extend([s], [])
    return out


def add_order(kinds: dict, invoke: list[int], complete: list[int | None], process: list) -> None:
    """Real-time and process order as whole relations: u before v when u completed
    before v was invoked (an info transaction, None, precedes nothing)."""
    for u, cu in enumerate(complete):
        for v, iv in enumerate(invoke):
            if cu is not None and cu < iv:
                kinds.setdefault((u, v), set()).add(g.REALTIME)
                if process[u] == process[v]:
                    kinds.setdefault((u, v), set()).add(g.PROCESS)


def cycle_types(h) -> set[str]:
    a = list_append.Analysis(h)
    txns = a.graph.txns
    kinds: dict[tuple[int, int], set[int]] = {}
    src, dst, kind = a.graph.arrays()
    for u, v, k in zip(src.tolist(), dst.tolist(), kind.tolist(), strict=True):
        kinds.setdefault((u, v), set()).add(k)
    add_order(kinds, [t.invoke_pos for t in txns],
              [None if t.type == "info" else t.complete_pos for t in txns], [t.process for t in txns])
    return simple_cycle_types(len(txns), kinds) | {t for t, examples in a.anomalies.items() if examples}


@pytest.mark.parametrize("seed", range(N))
def test_every_models_verdict_matches_the_cycles_there_are(seed):
    rnd = random.Random(seed)
    h = to_history(generate(rnd, final_read=rnd.random() < 0.5, txns=(3, 6), stale=0.5))
    if not any(op.type == "ok" for op in h.ops()):
        return  # nothing to judge: unknown (tests/test_cli_check.py)
    found = cycle_types(h)
    for model in MODELS:
        want = not any(models.forbids(model, t) for t in found)
        got = list_append.check(h, model).valid
        if got is False and want:  # beyond the graph: every order of its unseen appends must break it
            assert _forced_by_every_order(h, model), (model, sorted(found))
            continue
        assert got is want, (model, sorted(found), list_append.check(h, model).anomaly_types)


def _forced_by_every_order(h, model: str) -> bool:
    """Is `model` violated under every order the history's unseen appends could have had
    (tests/test_unread_appends_bruteforce.py, which imports this module)?"""
    from test_unread_appends_bruteforce import _forced, orders_and_types

    per_order, fixed = orders_and_types(h)
    return _forced(model, per_order, fixed)


def test_the_histories_hold_the_cycles_that_tell_the_strong_models_apart():
    """The test above means something: among its histories are ones where a
    session's or real time's G-single decides strong snapshot isolation."""
    seen = set()
    for seed in range(N):
        rnd = random.Random(seed)
        seen |= cycle_types(to_history(generate(rnd, final_read=rnd.random() < 0.5, txns=(3, 6), stale=0.5)))
    assert {"G-single-process", "G-single-realtime", "G-nonadjacent-realtime", "G2-item-process",
            "G1c-realtime", "G-single", "G2-item"} <= seen, sorted(seen)


def test_a_session_that_misses_its_own_append_breaks_strong_session_si():
    """Process 0 appends 1 to x, then reads x empty: a G-single-process, which strong
    session snapshot isolation forbids. The process edge leaves a transaction that the
    cycle enters by an rw edge; before the fix, the search's filter looked only at the
    copy of that transaction not entered by rw, found it on no cycle, and the verdict
    was valid, with only the G2-item-process through the same edges reported."""
    h = to_history([
        (0, 0, 10, "ok", [["append", "x", 1]]),
        (1, 1, 40, "ok", [["r", "x", []], ["append", "y", 1]]),
        (0, 20, 30, "ok", [["r", "x", []], ["r", "y", []]]),
    ])
    r = list_append.check(h, "strong-session-snapshot-isolation")
    assert r.valid is False and "G-single-process" in r.anomaly_types, (r.anomaly_types, r.also_found)
    assert list_append.check(h, "snapshot-isolation").valid is True  # no session: allowed


def test_a_g_single_behind_a_g_nonadjacent_breaks_consistent_view():
    """A sub-component whose first rw edge lies only on a G-nonadjacent cycle holds a
    G-single through another rw edge (T3 -rw-> T4 -ww-> T5 -wr-> T3 below; a random
    history of the test above, seed 2710): consistent view forbids it. Before the
    fix, G-single was searched from the first rw edge only, and the verdict was valid."""
    h = to_history([
        (2, 2, 7, "ok", [["r", "y", []], ["r", "y", []], ["r", "z", [2]]]),
        (1, 1, 5, "fail", [["r", "x", None], ["append", "y", 1]]),
        (0, 2, 5, "ok", [["r", "z", [2, 1]]]),
        (0, 9, 14, "ok", [["r", "y", []], ["r", "z", []], ["r", "x", [1]]]),
        (0, 20, 28, "ok", [["append", "x", 1], ["append", "z", 1]]),
        (1, 10, 19, "ok", [["r", "z", []], ["append", "z", 2]]),
    ])
    assert "G-single" in cycle_types(h)
    for model in ("consistent-view", "forward-consistent-view"):
        r = list_append.check(h, model)
        assert r.valid is False and "G-single" in r.anomaly_types, (model, r.anomaly_types, r.also_found)


@pytest.mark.parametrize("seed", range(N))
def test_the_search_on_random_graphs_decides_every_model_as_the_cycles_do(seed):
    """The search alone (`cycles.on_cycles`, `CycleSearch`) on random graphs, denser and
    stranger than histories give: up to 7 transactions on 3 processes with random
    intervals, and random data edges of every kind, in random order."""
    rnd = random.Random(seed)
    n = rnd.randint(3, 7)
    free: dict[int, int] = {}
    invoke, complete, process = [], [], []
    t = 0
    for _ in range(n):  # in invoke order; a process runs one transaction at a time
        p = rnd.randrange(3)
        t = max(t + rnd.randint(0, 3), free.get(p, 0))
        invoke.append(t)
        complete.append(t + rnd.randint(1, 8))
        process.append(p)
        free[p] = complete[-1] + 1
    data = sorted({(u, v, rnd.choice((g.WW, g.WR, g.RW, g.RW)))
                   for u, v in ((rnd.randrange(n), rnd.randrange(n)) for _ in range(rnd.randint(2, 12))) if u != v},
                  key=lambda e: rnd.random())
    kinds: dict[tuple[int, int], set[int]] = {}
    for u, v, k in data:
        kinds.setdefault((u, v), set()).add(k)
    add_order(kinds, invoke, complete, process)
    want = simple_cycle_types(n, kinds)

    src, dst, kind = (np.array([e[i] for e in data], dtype=np.int64) for i in range(3))
    inv, comp, proc = (np.array(x, dtype=np.int64) for x in (invoke, complete, process))
    ps, pd = txn.process_edges(proc)
    bs, bd, nb = g.barrier_realtime(inv, comp)
    labels, _ = g.scc_labels(n + nb, np.concatenate([src, ps, bs]), np.concatenate([dst, pd, bd]),
                             lambda: g.realtime_key(inv, comp))
    oc = cycles.on_cycles(n, labels, src, dst, kind, inv, comp, ps, pd)
    got: set[str] = set()
    if oc is not None:
        search = cycles.CycleSearch(txn.classify, lambda name, cycle: {"explanation": ""})
        search.run(oc)
        got = set(search.found)
    for model in MODELS:
        assert any(models.forbids(model, t) for t in got) == any(models.forbids(model, t) for t in want), \
            (model, sorted(want), sorted(got))
