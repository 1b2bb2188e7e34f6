"""Graph core: the linear-size real-time encodings must give exactly the
real-time order (a completed before b began), checked against the pairwise
definition on random interval sets; SCCs against a hand-made graph."""

import random

import numpy as np
import pytest

from sleuth.checker import graph as g


def brute_realtime(invoke, complete):
    n = len(invoke)
    return {(a, b) for a in range(n) for b in range(n)
            if a != b and complete[a] != g.INF_TIME and complete[a] < invoke[b]}


def reach(n, edges):
    adj = {}
    for a, b in edges:
        adj.setdefault(a, set()).add(b)
    out = set()
    for s in range(n):
        seen, todo = set(), [s]
        while todo:
            u = todo.pop()
            for v in adj.get(u, ()):
                if v not in seen:
                    seen.add(v)
                    todo.append(v)
        out |= {(s, v) for v in seen if v != s}
    return out


def random_intervals(rnd, n):
    invoke, complete = [], []
    for _ in range(n):
        a = rnd.randint(0, 20)
        invoke.append(a)
        complete.append(g.INF_TIME if rnd.random() < 0.15 else a + rnd.randint(0, 8))
    return invoke, complete


@pytest.mark.parametrize("seed", range(200))
def test_barrier_encoding_is_exactly_realtime(seed):
    rnd = random.Random(seed)
    n = rnd.randint(1, 10)
    invoke, complete = random_intervals(rnd, n)
    src, dst, m = g.barrier_realtime(np.array(invoke, dtype=np.int64), np.array(complete, dtype=np.int64))
    closure = reach(n + m, zip(src.tolist(), dst.tolist(), strict=True))
    real = {(a, b) for a, b in closure if a < n and b < n}
    assert real == brute_realtime(invoke, complete)


@pytest.mark.parametrize("seed", range(300))
def test_realtime_reduction_is_the_transitive_reduction_per_group(seed):
    # several groups of random intervals (ties, and transactions that never
    # completed, included), shuffled together: within each group the edges
    # must be exactly the real-time pairs with no third transaction between
    # them (what Elle's frontier walk yields), and none may cross groups
    rnd = random.Random(seed)
    groups, invoke, complete = [], [], []
    for grp in range(rnd.randint(1, 4)):
        n = rnd.randint(0, 9)
        inv, cpl = random_intervals(rnd, n)
        groups += [grp] * n
        invoke += inv
        complete += cpl
    at = list(range(len(groups)))
    rnd.shuffle(at)
    groups, invoke, complete = ([xs[i] for i in at] for xs in (groups, invoke, complete))
    src, dst = g.realtime_reduction(np.array(groups), np.array(invoke, dtype=np.int64),
                                    np.array(complete, dtype=np.int64))
    order = brute_realtime(invoke, complete)
    order = {(a, b) for a, b in order if groups[a] == groups[b]}
    want = {(a, b) for a, b in order if not any((a, c) in order and (c, b) in order for c in range(len(groups)))}
    got = list(zip(src.tolist(), dst.tolist(), strict=True))
    assert set(got) == want and len(got) == len(want)
    # in the order of the walk: by group, then by the target's invocation, then by the source
    assert got == sorted(got, key=lambda e: (groups[e[1]], invoke[e[1]], e[1], e[0]))


def test_scc_labels():
    # 0 -> 1 -> 2 -> 0 is a cycle; 3 -> 4 is not; 5 alone
    src = np.array([0, 1, 2, 3])
    dst = np.array([1, 2, 0, 4])
    labels, sizes = g.scc_labels(6, src, dst)
    assert labels[0] == labels[1] == labels[2]
    assert len({labels[3], labels[4], labels[5], labels[0]}) == 4
    assert list(sizes[labels] > 1) == [True, True, True, False, False, False]  # on a cycle


def partition(labels):
    """The components as a set of node sets: labels differ between implementations."""
    parts = {}
    for v, lab in enumerate(labels.tolist()):
        parts.setdefault(lab, set()).add(v)
    return {frozenset(p) for p in parts.values()}


@pytest.mark.parametrize("seed", range(150))
def test_small_graph_sccs_are_mutual_reachability(seed):
    # Tarjan in Python (graphs up to SMALL_GRAPH) against the definition:
    # u and v share a component iff each reaches the other.
    rnd = random.Random(seed)
    n = rnd.randint(1, 14)
    edges = [(rnd.randrange(n), rnd.randrange(n)) for _ in range(rnd.randint(0, 3 * n))]
    src = np.array([a for a, _ in edges], dtype=np.int64)
    dst = np.array([b for _, b in edges], dtype=np.int64)
    labels, sizes = g.scc_labels(n, src, dst)
    r = reach(n, edges)
    expected = {frozenset(v for v in range(n) if v == u or ((u, v) in r and (v, u) in r)) for u in range(n)}
    assert partition(labels) == expected
    assert sizes.tolist() == np.bincount(labels).tolist()


@pytest.mark.parametrize("seed", range(5))
def test_small_and_large_graph_sccs_agree(seed, monkeypatch):
    # the same graph through Tarjan in Python and through scipy
    rnd = np.random.default_rng(seed)
    n = 3000
    src, dst = rnd.integers(0, n, 4000), rnd.integers(0, n, 4000)
    chain = np.arange(n - 1)  # a long path, closed into one big cycle below: deep for a DFS
    src, dst = np.concatenate([src, chain, [n - 1]]), np.concatenate([dst, chain + 1, [n // 2]])
    small = g.scc_labels(n, src, dst)[0]
    monkeypatch.setattr(g, "SMALL_GRAPH", 0)
    large = g.scc_labels(n, src, dst)[0]
    assert partition(small) == partition(large)
    assert max(map(len, partition(small))) > 1


def random_graph(rnd, n):
    edges = [(rnd.randrange(n), rnd.randrange(n)) for _ in range(rnd.randint(0, 3 * n))]
    return edges, np.array([a for a, _ in edges], dtype=np.int64), np.array([b for _, b in edges], dtype=np.int64)


def random_key(rnd, n):
    """Keys of every sort: distinct, with ties, all equal, far apart."""
    return np.array(rnd.choice([
        lambda: rnd.sample(range(n), n),
        lambda: [rnd.randrange(3) for _ in range(n)],
        lambda: [7] * n,
        lambda: [rnd.randrange(-10**12, 10**12) for _ in range(n)],
    ])(), dtype=np.int64)


@pytest.mark.parametrize("rounds", [1, 2, g.KEY_ROUNDS])
@pytest.mark.parametrize("seed", range(100))
def test_cyclic_edges_keep_every_edge_on_a_cycle(seed, rounds, monkeypatch):
    # An edge lies on a cycle iff its ends reach each other (brute force); every
    # such edge must survive whatever the keys and however many rounds of relaxation.
    monkeypatch.setattr(g, "KEY_ROUNDS", rounds)
    rnd = random.Random(seed)
    n = rnd.randint(1, 14)
    edges, src, dst = random_graph(rnd, n)
    r = reach(n, edges)
    on_cycle = {(a, b) for a, b in edges if a == b or (b, a) in r}
    s, d = g.cyclic_edges(random_key(rnd, n), src, dst)
    kept = list(zip(s.tolist(), d.tolist()))
    assert on_cycle <= set(kept)
    assert len(kept) <= len(edges) and set(kept) <= set(edges)


@pytest.mark.parametrize("seed", range(30))
def test_cyclic_edges_of_an_acyclic_graph_are_none(seed):
    # A DAG, with keys a topological order, or its reverse: the first leaves
    # nothing at once; the relaxation must settle the second (depth under KEY_ROUNDS).
    rnd = random.Random(seed)
    n = rnd.randint(2, 30)
    edges = [(a, b) for a, b in ((rnd.randrange(n), rnd.randrange(n)) for _ in range(3 * n)) if a < b]
    src = np.array([a for a, _ in edges], dtype=np.int64)
    dst = np.array([b for _, b in edges], dtype=np.int64)
    for key in (np.arange(n), np.zeros(n, dtype=np.int64)):
        assert len(g.cyclic_edges(key, src, dst)[0]) == 0


@pytest.mark.parametrize("rounds", [1, 2, g.TRIM_ROUNDS])
@pytest.mark.parametrize("seed", range(100))
def test_trimmed_keeps_every_edge_on_a_cycle(seed, rounds, monkeypatch):
    # Every edge whose ends reach each other (brute force) survives the trimming of
    # nodes without an in-edge or an out-edge, however many rounds run.
    monkeypatch.setattr(g, "TRIM_ROUNDS", rounds)
    rnd = random.Random(seed)
    n = rnd.randint(1, 14)
    edges, src, dst = random_graph(rnd, n)
    r = reach(n, edges)
    on_cycle = {(a, b) for a, b in edges if a == b or (b, a) in r}
    kept = list(zip(*(x.tolist() for x in g.trimmed(n, src, dst)), strict=True))
    assert on_cycle <= set(kept) and set(kept) <= set(edges)


def test_trimming_takes_away_a_dag_hanging_off_a_cycle():
    # 0 <-> 1, and a chain 1 -> 2 -> 3 -> 4 and 5 -> 6 -> 0: only the cycle is left
    src = np.array([0, 1, 1, 2, 3, 5, 6])
    dst = np.array([1, 0, 2, 3, 4, 6, 0])
    s, d = g.trimmed(7, src, dst)
    assert sorted(zip(s.tolist(), d.tolist(), strict=True)) == [(0, 1), (1, 0)]


@pytest.mark.parametrize("seed", range(150))
def test_sccs_by_key_are_mutual_reachability(seed, monkeypatch):
    # scc_labels searches only the part trimmed() leaves, with an order guess of
    # what cyclic_edges leaves; the rest are components of one node. Against the
    # definition, as without either.
    monkeypatch.setattr(g, "scipy_loaded", lambda: False)
    monkeypatch.setattr(g, "TRIM_MIN", 0)
    monkeypatch.setattr(g, "KEY_MIN", 0)
    rnd = random.Random(seed)
    n = rnd.randint(1, 14)
    edges, src, dst = random_graph(rnd, n)
    labels, sizes = g.scc_labels(n, src, dst, random_key(rnd, n) if seed % 3 else None)
    r = reach(n, edges)
    expected = {frozenset(v for v in range(n) if v == u or ((u, v) in r and (v, u) in r)) for u in range(n)}
    assert partition(labels) == expected
    assert sizes.tolist() == np.bincount(labels).tolist()


def _search(n, src, dst, kind, spec_name, label=None):
    from sleuth.checker import cycles
    spec = next(s for s in cycles.SPECS if s.name == spec_name)
    adj = g.Adjacency(n, src, dst, kind)
    edge = (src[0], dst[0], kind[0])
    return g.bfs_cycle(adj, edge, spec.automaton, label or [0] * n, float("inf"))


def test_nonadjacent_automaton_refuses_adjacent_rw():
    # a -rw-> b -rw-> a: two adjacent rw edges, not a G-nonadjacent cycle
    assert _search(2, [0, 1], [1, 0], [g.RW, g.RW], "G-nonadjacent") is None
    assert [k for _, _, k in _search(2, [0, 1], [1, 0], [g.RW, g.RW], "G2-item")] == [g.RW, g.RW]
    # a -rw-> b -wr-> c -rw-> d -ww-> a: rw edges separated: found
    cycle = _search(4, [0, 1, 2, 3], [1, 2, 3, 0], [g.RW, g.WR, g.RW, g.WW], "G-nonadjacent")
    assert [k for _, _, k in cycle] == [g.RW, g.WR, g.RW, g.WW]
    # ...and it is not a G2-item (no two rw adjacent, also around the end)
    assert _search(4, [0, 1, 2, 3], [1, 2, 3, 0], [g.RW, g.WR, g.RW, g.WW], "G2-item") is None
    # a -ww-> b -rw-> c -rw-> a: adjacent around the end? no: rw, rw in the middle
    assert _search(3, [0, 1, 2], [1, 2, 0], [g.WW, g.RW, g.RW], "G-nonadjacent") is None


def test_realtime_variant_needs_a_realtime_edge():
    # 0 -ww-> 1 -realtime-> 0 is G0-realtime; 0 -ww-> 1 -ww-> 0 is not
    assert _search(2, [0, 1], [1, 0], [g.WW, g.REALTIME], "G0-realtime") is not None
    assert _search(2, [0, 1], [1, 0], [g.WW, g.WW], "G0-realtime") is None
    assert _search(2, [0, 1], [1, 0], [g.WW, g.REALTIME], "G0") is None


def test_search_stays_in_its_component():
    # the cycle 0 -> 1 -> 0 exists, but 1 is labelled apart from 0
    assert _search(2, [0, 1], [1, 0], [g.WW, g.WW], "G0", label=[0, 1]) is None


def test_simple_cycle_erases_loops():
    # around 0 -> 1 -> 0 twice, as a walk: one loop is left
    walk = [(0, 1, g.WW), (1, 0, g.RW), (0, 1, g.WW), (1, 0, g.RW)]
    assert g.simple_cycle(walk) == walk[:2]
    # 0 -> 1 -> 2 -> 1 -> 3 -> 0: the 1 -> 2 -> 1 detour goes
    walk = [(0, 1, g.WW), (1, 2, g.WR), (2, 1, g.RW), (1, 3, g.WW), (3, 0, g.RW)]
    assert g.simple_cycle(walk) == [(0, 1, g.WW), (1, 3, g.WW), (3, 0, g.RW)]


def test_search_times_out():
    # a long ww ring: a deadline in the past stops the search at its first look at the clock
    n = 3 * g.CHECK_EVERY
    src = list(range(n))
    dst = [(i + 1) % n for i in range(n)]
    adj = g.Adjacency(n, src, dst, [g.WW] * n)
    with pytest.raises(g.SearchTimeout):
        g.bfs_cycle(adj, (0, 1, g.WW), g.any_cycle(frozenset({g.WW})), [0] * n, 0.0)
