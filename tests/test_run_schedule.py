"""`sleuth run` is deterministic in its schedule given --seed (without starting a target)."""

from __future__ import annotations

import random

from sleuth.nemesis.faults import Schedule
from sleuth.run.runner import Client, RunConfig
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
        return [s.next_kind() for _ in range(51)]
    assert choices(3) == choices(3) and choices(3) != choices(4)


def test_nemesis_reaches_every_kind_before_any_repeats():
    # a draw per fault (random.choice) gave seed 0's run of pause,clock two clocks and no pause
    for seed in range(20):
        s = Schedule(Inert(), ["kill", "pause", "clock", "partition"], 1.0, seed, record=lambda f, v: None)
        picks = [s.next_kind() for _ in range(12)]
        for r in range(3):
            assert sorted(picks[4 * r:4 * r + 4]) == ["clock", "kill", "partition", "pause"], (seed, picks)


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


class Pausable(Inert):
    def nodes(self, role):
        return [f"{role}1"]

    def pause(self, node):
        pass

    def resume(self, node):
        pass

    def kill(self, node):
        pass

    def restart(self, node):
        pass


def test_no_fault_starts_after_the_load_has_ended():
    # seed 0's 15 s run of pause,clock started a clock strobe as the clients stopped
    # (0 flips before its heal), and counted it among the faults that happened
    import time

    events = []
    end = time.monotonic() + 0.5
    s = Schedule(Pausable(), ["pause", "kill"], 0.1, 0, lambda f, v: events.append((f, time.monotonic())), end=end)
    s.start()
    time.sleep(0.9)
    s.finish(wait=5)
    starts = [t for f, t in events if f in ("pause", "kill")]
    assert starts and all(t < end for t in starts), (events, end)
    assert len([f for f, _ in events if f in ("resume", "restart")]) == len(starts)  # each healed
    if len(starts) == 1:
        assert len(s.missing()) == 1
    else:
        assert s.missing() == []


class Unpausable(Pausable):
    def pause(self, node):
        raise OSError(f"{node} unreachable")


def test_a_kind_tried_in_vain_is_a_nemesis_error_not_a_kind_without_room():
    import time

    s = Schedule(Unpausable(), ["pause", "kill"], 0.05, 0, lambda f, v: None, end=time.monotonic() + 0.4)
    s.start()
    time.sleep(0.6)
    s.finish(wait=5)
    assert s.tried.get("pause") and s.happened.get("pause") is None
    assert any(e.startswith("pause: ") for e in s.errors), s.errors
    assert "pause" not in s.missing() and s.missing() == []  # both had their turn in 0.4 s


def test_a_mix_names_each_kind_once_and_at_least_one():
    import pytest

    from sleuth.nemesis.faults import parse_mix
    from sleuth.targets import Unsupported

    assert parse_mix("kill, pause,kill", Inert()) == ["kill", "pause"]  # the run was named …-kill-pause-kill
    assert parse_mix("none", Inert()) == [] and parse_mix(None, Inert()) == []
    with pytest.raises(Unsupported, match="no fault named"):
        parse_mix(",", Inert())  # ran with no nemesis at all


def test_none_stands_alone_and_the_errors_say_so():
    """Issue 43: `--nemesis none` is accepted, `none,kill` was refused as "unknown fault 'none'"
    with a list that did not name none. The error now says that none stands alone, and every
    refusal of a kind names none among the choices, as `sleuth run --help` does."""
    import subprocess
    import sys

    import pytest

    from sleuth.nemesis.faults import parse_mix
    from sleuth.targets import Unsupported

    for mix in ("none,kill", "kill,none", "kill, pause,none"):
        with pytest.raises(Unsupported, match="none stands alone"):
            parse_mix(mix, Inert())
    assert parse_mix(" none ", Inert()) == parse_mix("none,none", Inert()) == []  # named twice counts once
    with pytest.raises(Unsupported, match=r"unknown fault .bogus.; one or more of kill, .*, or none \(alone"):
        parse_mix("bogus", Inert())
    p = subprocess.run([sys.executable, "-m", "sleuth.cli", "run", "--help"], capture_output=True, text=True,
                       timeout=60)
    assert "none (alone" in " ".join(p.stdout.split()), p.stdout
