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
