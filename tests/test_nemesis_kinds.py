"""Each nemesis kind declares what it needs of a target on the kind itself (`Fault.needs`), in
one table (`FAULT_CLASSES`); `parse_mix` asks the kind, never decides by its name."""

from __future__ import annotations

import os
import random
import re

import pytest

from sleuth.base import seams
from sleuth.nemesis import faults
from sleuth.targets import Target, refuse_upstream

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Bare(Target):
    """A target with nodes and nothing more (no second coordinator, no clock, no cuts)."""
    name = "bare"
    roles = ("n1",)


def test_every_kind_declares_its_need_and_the_table_is_the_one_list_of_kinds():
    assert faults.KINDS == ("kill", "pause", "dual-leader", "clock", "partition", "kill-all")
    for kind, cls in faults.FAULT_CLASSES.items():
        assert cls.kind == kind and cls.needs in {"nodes", "coordinators", "clock", "partition"}
    assert not hasattr(faults, "NEEDS")  # no second table keyed by a kind's name


def test_a_kind_is_refused_for_the_need_it_declares(monkeypatch):
    """A new kind is one class in the table: parse_mix refuses it on a target lacking its need,
    with the target's own refusal, and takes it on one that has it."""

    class Flood(faults.Fault):
        kind, needs = "flood", "coordinators"
        start_fs, stop_f = ("start-flood",), "stop-flood"

    monkeypatch.setitem(faults.FAULT_CLASSES, "flood", Flood)
    with pytest.raises(seams.Unsupported) as e:
        faults.parse_mix("kill,flood", Bare())
    assert str(e.value) == Bare().refusal("flood", "coordinators")
    assert str(e.value) == "--nemesis flood needs the reference cluster (--target reference)"

    class Leaders(Bare):
        abilities = frozenset({"nodes", "coordinators"})

    assert faults.parse_mix("kill,flood", Leaders()) == ["kill", "flood"]


@pytest.mark.parametrize("kind, line", [
    ("dual-leader", "--nemesis dual-leader needs the reference cluster (--target reference)"),
    ("clock", "--nemesis clock needs the reference cluster (--target reference)"),
    ("partition", "--nemesis partition: target bare cannot cut links between its nodes (it has one)"),
])
def test_refusals_are_worded_as_before(kind, line):
    assert faults.parse_mix("kill,pause,kill-all", Bare()) == ["kill", "pause", "kill-all"]
    with pytest.raises(seams.Unsupported, match=f"^{re.escape(line)}$"):
        faults.parse_mix(kind, Bare())


def test_the_targets_seam_declares_the_abilities_callers_use():
    """Nemeses and the runner call these on any target; the protocol names them, the base class
    refuses those a target lacks, and nothing asks `hasattr`/`getattr` for them."""
    optional = {"add_coordinator", "retire_coordinator", "set_clock", "socket_of", "use_upstream", "grudges"}
    assert optional <= set(vars(seams.Target))
    t = Bare()
    for call in (t.add_coordinator, lambda: t.retire_coordinator("n1"), lambda: t.set_clock("n1", 5)):
        with pytest.raises(seams.Unsupported):
            call()

    class Source:
        name, upstream_tables = "source", ("changes",)

    with pytest.raises(seams.Unsupported, match="needs the reference cluster's source node"):
        refuse_upstream(t, Source)
    names = "|".join(optional)
    asked = re.compile(rf"(getattr|hasattr)\([\w.]+, \"({names})\"")
    found = []
    for top in ("sleuth", "nemesis", "workloads", "checker", "reports"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith(".py"):
                    text = open(os.path.join(dirpath, f), encoding="utf-8").read()
                    found += [f"{f}: {m.group(0)}" for m in asked.finditer(text)]
    assert found == []


def test_a_partition_cuts_along_the_grudges_the_target_names():
    class Peers(Bare):
        roles = ("a", "b", "c")
        abilities = frozenset({"nodes", "partition"})

        def __init__(self):
            super().__init__()
            self.cuts = []

        def nodes(self, role):
            return [role]

        def cut(self, a, b):
            self.cuts.append((a, b))

    p = faults.Partition(Peers())
    assert [p.start(random.Random(0))["grudge"] for _ in range(4)] == [*faults.NODE_GRUDGES, "isolate-one"]


def test_the_reference_cluster_keeps_its_grudges_and_galera_its_own():
    from sleuth.targets.reference import ReferenceTarget

    reference = object.__new__(ReferenceTarget)  # its grudges need nothing started
    assert reference.grudges() == ("isolate-one", "oracle-from-coordinators", "halves", "majorities-ring")
    assert "partition" in reference.abilities and "upstream" in reference.abilities
