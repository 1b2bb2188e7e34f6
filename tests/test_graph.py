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


@pytest.mark.parametrize("seed", range(200))
def test_frontier_edges_are_a_reduction_of_realtime(seed):
    rnd = random.Random(seed)
    n = rnd.randint(1, 10)
    invoke, complete = random_intervals(rnd, n)
    ids = list(range(100, 100 + n))  # arbitrary node ids
    src, dst = g.realtime_pairs(ids, invoke, complete)
    closure = reach(200, zip(src, dst, strict=True))
    want = {(a + 100, b + 100) for a, b in brute_realtime(invoke, complete)}
    assert closure == want
    assert set(zip(src, dst, strict=True)) <= want  # every edge is itself real-time order


def test_scc_labels():
    # 0 -> 1 -> 2 -> 0 is a cycle; 3 -> 4 is not; 5 alone
    src = np.array([0, 1, 2, 3])
    dst = np.array([1, 2, 0, 4])
    labels, sizes = g.scc_labels(6, src, dst)
    assert labels[0] == labels[1] == labels[2]
    assert len({labels[3], labels[4], labels[5], labels[0]}) == 4
    assert list(g.in_cycles(6, src, dst)) == [True, True, True, False, False, False]


def test_bfs_nonadjacent_refuses_adjacent_rw():
    # a -rw-> b -rw-> a: two adjacent rw edges, not a G-nonadjacent cycle
    adj = g.Adjacency(2, [0, 1], [1, 0], [g.RW, g.RW])
    assert g.bfs_nonadjacent(adj, (0, 1), frozenset(g.DATA), [1000]) is None
    # a -rw-> b -wr-> c -rw-> d -ww-> a: rw edges separated: found
    adj = g.Adjacency(4, [0, 1, 2, 3], [1, 2, 3, 0], [g.RW, g.WR, g.RW, g.WW])
    cycle = g.bfs_nonadjacent(adj, (0, 1), frozenset(g.DATA), [1000])
    assert [k for _, _, k in cycle] == [g.RW, g.WR, g.RW, g.WW]
