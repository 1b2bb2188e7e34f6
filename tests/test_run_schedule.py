"""`sleuth run` is deterministic in its schedule given --seed (without starting a target)."""

from __future__ import annotations

import random

from sleuth.nemesis.faults import Schedule
from sleuth.runner import Client, RunConfig
from sleuth.targets import Target
from sleuth.workloads.clients import WORKLOADS


class Inert(Target):
    roles = ("storage", "oracle", "coordinator")
    family = "reference"


def ops(seed, workload, family="reference", n=200):
    cfg = RunConfig(seed=seed, concurrency=3)
    wl = WORKLOADS[workload](8, family)
    clients = [Client(i, cfg, Inert(), wl, rec=None) for i in range(cfg.concurrency)]
    return [[c.wl.generate(c.rnd, c.slot) for _ in range(n)] for c in clients]


def test_operations_follow_from_the_seed():
    for w in WORKLOADS:
        for family in ("reference", "general"):
            assert ops(5, w, family) == ops(5, w, family)
    assert ops(5, "list-append") != ops(6, "list-append")


def test_reference_family_keeps_transactions_read_only_or_single_append():
    for client_ops in ops(1, "list-append"):
        for f, mops in client_ops:
            kinds = {m[0] for m in mops}
            assert kinds == {"r"} or (kinds == {"append"} and len(mops) == 1)


def test_values_written_are_unique_per_key():
    wl = WORKLOADS["register"](4, "reference")
    rnd = random.Random(0)
    written = [v for slot in range(5) for _ in range(200)
               for f, v in [wl.generate(rnd, slot)] if f == "write"]
    pairs = [(k, x) for k, x in written]
    assert len(pairs) == len(set(pairs))


def test_nemesis_choices_follow_from_the_seed():
    def choices(seed):
        s = Schedule(Inert(), ["kill", "pause", "clock"], 1.0, seed, record=lambda f, v: None)
        return [s.rnd.choice(s.kinds) for _ in range(50)]
    assert choices(3) == choices(3) and choices(3) != choices(4)


def test_majorities_ring_each_node_sees_a_distinct_majority():
    import itertools

    from sleuth.nemesis.faults import majorities_ring
    for n in range(4, 10):
        nodes = [f"n{i}" for i in range(n)]
        cut = {frozenset(p) for p in majorities_ring(nodes)}
        views = []
        for a in nodes:
            view = frozenset(b for b in nodes if b == a or frozenset((a, b)) not in cut)
            assert len(view) > n // 2, (n, a, view)  # a majority, counting itself
            views.append(view)
        assert len(set(views)) == n, n  # no two nodes share one
        for a, b in itertools.combinations(nodes, 2):  # links are cut both ways or not at all
            assert (frozenset((a, b)) in cut) == (frozenset((b, a)) in cut)
        assert cut  # something is cut


class Clocked(Inert):
    def __init__(self):
        super().__init__()
        self.calls = []

    def set_clock(self, node, offset_ms):
        self.calls.append((node, offset_ms))


def test_clock_alternates_bump_and_strobe_and_heals_to_true_time():
    import time

    from sleuth.nemesis.faults import Clock
    t = Clocked()
    clock = Clock(t)
    rnd = random.Random(1)
    bump = clock.start(rnd)
    assert clock.start_f == "clock-bump" and 1_000 <= abs(bump["offset-ms"]) <= 30_000
    assert t.calls == [("oracle", bump["offset-ms"])]
    clock.stop()
    assert t.calls[-1] == ("oracle", 0)
    t.calls.clear()
    strobe = clock.start(rnd)
    assert clock.start_f == "clock-strobe"
    time.sleep(strobe["period-ms"] / 1000 * 6 + 0.2)
    healed = clock.stop()
    offsets = [o for _, o in t.calls]
    assert healed["flips"] >= 4 and offsets[-1] == 0
    assert set(offsets[:-1]) == {0, strobe["delta-ms"]}  # it flipped between true time and the offset
    n = len(t.calls)
    time.sleep(strobe["period-ms"] / 1000 * 3)
    assert len(t.calls) == n  # and stopped flipping
