"""Workload capabilities (issue 45): the registry (sleuth.checker.WORKLOADS) declares what the
rest of sleuth relies on — the SQL tables a workload's clients create, whether Spark judges
its runs per key, whether `sleuth check --spark` takes it, how the durability audit reads its
writes back — and the Spark jobs and the clients read it there instead of keeping tables of
their own."""

from __future__ import annotations

from sleuth.checker import LIST_ROWS, REGISTER_ROWS, TABLE_PREFIX
from sleuth.checker import WORKLOADS as REGISTRY
from sleuth.spark import consolidate, history_keys, jobs, judge
from sleuth.targets import reference_audit as durability
from sleuth.workloads.clients import WORKLOADS as CLIENTS


def test_the_registry_declares_each_workloads_capabilities():
    assert {w for w, s in REGISTRY.items() if s.keyed} == {"register"}
    assert [w for w, s in REGISTRY.items() if s.large] == ["register", "cas-register", "list-append", "rw-register"]
    assert {w: s.audited for w, s in REGISTRY.items() if s.audited} == {
        "register": REGISTER_ROWS, "list-append": LIST_ROWS, "rw-register": REGISTER_ROWS}
    assert {w: s.tables for w, s in REGISTRY.items() if s.tables} == {
        "register": ("sleuth_registers",), "list-append": ("sleuth_lists",), "rw-register": ("sleuth_rw",),
        "bank": ("sleuth_accounts",), "counter": ("sleuth_counters",), "source": ("sleuth_src",)}
    assert all(t.startswith(TABLE_PREFIX) for s in REGISTRY.values() for t in s.tables)


def test_a_client_workload_is_named_after_the_registrys_and_creates_its_tables():
    import sleuth.workloads.source  # noqa: F401 (adds the source workload to CLIENTS)

    for name, cls in CLIENTS.items():
        assert cls.checker == name and cls.tables == list(REGISTRY[name].tables), name


def test_spark_keeps_no_workload_table_of_its_own():
    for module, names in ((judge, ("KEYED", "checker_name")), (jobs, ("LARGE_CHECKERS",)),
                          (durability, ("AUDITED", "LIST_TABLE_WORKLOADS", "REGISTER_TABLE_WORKLOADS")),
                          (history_keys, ("WORKLOADS",))):
        assert not [n for n in names if hasattr(module, n)], module.__name__
    assert consolidate.keyed_workloads() == ["register"]
    assert durability.audited() == ("register", "list-append", "rw-register")
    assert durability.audited(LIST_ROWS) == ("list-append",)
    assert durability.tables_of("list-append") == ("sleuth_lists", "lists")


def test_the_micro_ops_are_the_history_formats_words():
    """Issue 45: the importers took the micro-op names from the checker registry, so the history
    room imported the checkers above it. The format owns them (sleuth.history.jsonl.MICRO_OPS);
    the registry's transactional workloads use them all, and no other."""
    from sleuth.checker import WORKLOADS
    from sleuth.history.jsonl import MICRO_OPS

    used = {f for w in WORKLOADS.values() for f in w.micro_ops}
    assert used == MICRO_OPS
