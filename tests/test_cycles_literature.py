"""Anomalies from the literature, each a hand-made history with the verdict
the definitions give at each isolation level: Adya's G0, G1a, G1b, G1c,
G-single and G2-item (Weak Consistency, 2000, section 4.4), and Hermitage's
PostgreSQL cases (lost update P4, read skew, write skew) in list-append and
rw-register form. Histories are written as (process, start, end, type, ops)."""

import pytest
from test_cycles_bruteforce import to_history

from sleuth.checker import list_append, rw_register

RU, RC, SI, RR, SER, SSER = ("read-uncommitted", "read-committed", "snapshot-isolation",
                              "repeatable-read", "serializable", "strict-serializable")


def a(k, v):
    return ["append", k, v]


def r(k, v):
    return ["r", k, v]


def w(k, v):
    return ["w", k, v]


CASES = {
    # Adya G0: T1 and T2 both write x and y, in opposite orders
    "G0": (list_append, [
        (0, 0, 10, "ok", [a("x", 1), a("y", 1)]),
        (1, 0, 10, "ok", [a("x", 2), a("y", 2)]),
        (2, 20, 30, "ok", [r("x", [1, 2]), r("y", [2, 1])]),
    ], "G0", {RU: False, RC: False, SER: False}),
    # G1a: a read of an aborted append
    "G1a": (list_append, [
        (0, 0, 10, "fail", [a("x", 1)]),
        (1, 20, 30, "ok", [r("x", [1])]),
    ], "G1a", {RU: True, RC: False, SER: False}),
    # G1b: a read of an intermediate append
    "G1b": (list_append, [
        (0, 0, 10, "ok", [a("x", 1), a("x", 2)]),
        (1, 5, 8, "ok", [r("x", [1])]),
        (2, 20, 30, "ok", [r("x", [1, 2])]),
    ], "G1b", {RU: True, RC: False, SER: False}),
    # G1c: T1 reads T2's write and T2 reads T1's write
    "G1c": (list_append, [
        (0, 0, 10, "ok", [a("x", 1), r("y", [1])]),
        (1, 0, 10, "ok", [a("y", 1), r("x", [1])]),
    ], "G1c", {RU: True, RC: False, SER: False}),
    # G-single (read skew, Hermitage G-single): T2 sees T1's y but not its x
    "G-single": (list_append, [
        (0, 0, 10, "ok", [a("x", 1), a("y", 1)]),
        (1, 0, 10, "ok", [r("x", []), r("y", [1])]),
        (2, 20, 30, "ok", [r("x", [1]), r("y", [1])]),
    ], "G-single", {RC: True, SI: False, RR: False, SER: False}),
    # G2-item (write skew, Hermitage G2-item): each reads what the other writes
    "G2-item": (list_append, [
        (0, 0, 10, "ok", [r("x", []), a("y", 1)]),
        (1, 0, 10, "ok", [r("y", []), a("x", 1)]),
        (2, 20, 30, "ok", [r("x", [1]), r("y", [1])]),
    ], "G2-item", {RC: True, SI: True, RR: False, SER: False}),
    # Hermitage P4 lost update, rw-register: both read x=1 then write it
    "lost-update": (rw_register, [
        (0, 0, 5, "ok", [w("x", 1)]),
        (1, 10, 20, "ok", [r("x", 1), w("x", 2)]),
        (2, 10, 20, "ok", [r("x", 1), w("x", 3)]),
    ], "lost-update", {RC: True, SI: False, SER: False}),
    # rw-register write skew (Hermitage G2-item)
    "rw-write-skew": (rw_register, [
        (0, 0, 10, "ok", [r("x", None), w("y", 1)]),
        (1, 0, 10, "ok", [r("y", None), w("x", 1)]),
    ], "G2-item", {RC: True, SI: True, SER: False}),
    # a stale read: fine for serializable, not strict
    "stale": (list_append, [
        (0, 0, 10, "ok", [a("x", 1)]),
        (1, 20, 30, "ok", [r("x", [])]),
    ], "G-single-realtime", {SER: True, SSER: False}),
    # session order: a process fails to see its own earlier append
    "session": (list_append, [
        (0, 0, 10, "ok", [a("x", 1)]),
        (0, 20, 30, "ok", [r("x", [])]),
        (1, 40, 50, "ok", [r("x", [1])]),
    ], "G-single-process", {SER: True, "strong-session-serializable": False}),
    # Elle's future read: T0 reads x and sees the element it appends only afterwards
    # (a trivial wr cycle T0 -> T0, so G1c: read uncommitted allows it, read committed
    # and read atomic forbid it)
    "future-read": (list_append, [
        (0, 0, 10, "ok", [r("x", [1]), a("x", 1)]),
        (1, 20, 30, "ok", [r("x", [1])]),
    ], "future-read", {RU: True, RC: False, "read-atomic": False, SER: False}),
    "rw-future-read": (rw_register, [
        (0, 0, 10, "ok", [r("x", 1), w("x", 1)]),
        (1, 20, 30, "ok", [r("x", 1)]),
    ], "future-read", {RU: True, RC: False, "read-atomic": False, SER: False}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_literature(name):
    checker, txns, anomaly, verdicts = CASES[name]
    h = to_history(txns)
    for model, valid in verdicts.items():
        res = checker.check(h, model)
        assert res.valid is valid, (model, res.anomaly_types, res.also_found)
    found = set(checker.check(h, SSER).anomaly_types)
    assert anomaly in found, found
    example = checker.check(h, SSER).anomalies[anomaly][0]["explanation"]
    assert "'x'" in example or "'y'" in example  # explained with the keys involved


def test_write_skew_lattice():
    res = list_append.check(to_history(CASES["G2-item"][1]), SER)
    assert res.not_ == [RR]
    assert SI in res.possible and RC in res.possible and SER not in res.possible


def test_rw_register_non_repeatable_read_is_fuzzy_not_internal():
    """PostgreSQL's READ COMMITTED: a transaction reads x twice and sees a commit in between."""
    from sleuth.checker import rw_register
    from sleuth.history import Event, History
    ev = [Event(0, 0, "invoke", 0, "txn", [["r", "x", None], ["r", "x", None]]),
          Event(1, 1, "invoke", 1, "txn", [["w", "x", 1]]),
          Event(2, 2, "ok", 1, "txn", [["w", "x", 1]]),
          Event(3, 3, "ok", 0, "txn", [["r", "x", None], ["r", "x", 1]])]
    h = History(ev, "h")
    rc = rw_register.check(h, model="read-committed")
    assert rc.valid is True and "fuzzy-read" in rc.also_found and "internal" not in rc.anomaly_types
    rr = rw_register.check(h, model="repeatable-read")
    assert rr.valid is False and "fuzzy-read" in rr.anomaly_types
    # reading back something other than its own write is still internal
    ev2 = [Event(0, 0, "invoke", 0, "txn", [["w", "x", 2], ["r", "x", None]]),
           Event(1, 1, "ok", 0, "txn", [["w", "x", 2], ["r", "x", 3]])]
    assert "internal" in rw_register.check(History(ev2, "h"), model="read-committed").anomaly_types


def test_future_read_is_not_mistaken_for_a_cycle():
    """Before: list-append saw nothing; rw-register took the read as an
    external one and its write-follows-read pair as x: 1 < 1, a G-single."""
    for name in ("future-read", "rw-future-read"):
        checker, txns, _, _ = CASES[name]
        res = checker.check(to_history(txns), SSER)
        assert res.anomaly_types == ["future-read"], (name, res.anomaly_types)
