"""Anomalies from the literature, each a hand-made history with the verdict
the definitions give at each isolation level: Adya's G0, G1a, G1b, G1c,
G-single and G2-item (Weak Consistency, 2000, section 4.4), G-cursor,
G-monotonic and G-update (sections 4.3-4.5), Fekete, O'Neil & O'Neil's
read-only transaction anomaly (SIGMOD Record 2004), the long fork (Cerone et
al. 2015), two cycles that appends no read saw close in either order, and Hermitage's PostgreSQL cases (lost update P4, read skew, write
skew) in list-append and rw-register form. Histories are written as
(process, start, end, type, ops)."""

import pytest
from test_cycles_bruteforce import to_history

from sleuth.checker import list_append, rw_register

RU, RC, SI, RR, SER, SSER = ("read-uncommitted", "read-committed", "snapshot-isolation",
                              "repeatable-read", "serializable", "strict-serializable")
CS, MV, CV, US, PSI = ("cursor-stability", "monotonic-view", "consistent-view", "update-serializable",
                       "parallel-snapshot-isolation")


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
    ], "G-single", {RC: True, MV: True, CS: True, CV: False, US: False, SI: False, RR: False,
                    SER: False}),
    # G2-item (write skew, Hermitage G2-item): each reads what the other writes
    "G2-item": (list_append, [
        (0, 0, 10, "ok", [r("x", []), a("y", 1)]),
        (1, 0, 10, "ok", [r("y", []), a("x", 1)]),
        (2, 20, 30, "ok", [r("x", [1]), r("y", [1])]),
    ], "G2-item", {RC: True, SI: True, RR: False, US: False, SER: False}),
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
    ], "G2-item", {RC: True, SI: True, US: False, SER: False}),
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
    # Adya's G-cursor(x) (PL-CS): T0 reads x, T1 appends to x, T0 appends to x after
    # T1: one rw, one ww, both on x. Not Elle's lost-update (T1 read nothing); not
    # G-monotonic (T0's read comes before the append the ww edge enters)
    "G-cursor": (list_append, [
        (0, 0, 10, "ok", [r("x", []), a("x", 2)]),
        (1, 2, 5, "ok", [a("x", 1)]),
        (2, 20, 30, "ok", [r("x", [1, 2])]),
    ], "G-cursor", {RC: True, MV: True, CS: False, CV: False, SI: False, SER: False}),
    # Adya's G-monotonic (PL-2L): T1 sees T0's y, then reads x without T0's append
    # (the reverse order, old x then new y, is the G-single case above, which PL-2L allows)
    "G-monotonic": (list_append, [
        (0, 0, 10, "ok", [a("x", 1), a("y", 1)]),
        (1, 0, 10, "ok", [r("y", [1]), r("x", [])]),
        (2, 20, 30, "ok", [r("x", [1]), r("y", [1])]),
    ], "G-monotonic", {RC: True, CS: True, MV: False, CV: False, SI: False, SER: False}),
    # the same through a third transaction: T2 sees T1's y, which T1 appended after
    # reading T0's x; then T2 reads x without T0's append
    "G-monotonic-3": (list_append, [
        (0, 0, 10, "ok", [a("x", 1)]),
        (1, 0, 10, "ok", [r("x", [1]), a("y", 1)]),
        (2, 0, 10, "ok", [r("y", [1]), r("x", [])]),
        (3, 20, 30, "ok", [r("x", [1]), r("y", [1])]),
    ], "G-monotonic", {RC: True, CS: True, MV: False, SER: False}),
    "rw-G-monotonic": (rw_register, [
        (0, 0, 10, "ok", [w("x", 1), w("y", 1)]),
        (1, 0, 10, "ok", [r("y", 1), r("x", None)]),
    ], "G-monotonic", {RC: True, CS: True, MV: False, SER: False}),
    # Fekete, O'Neil & O'Neil's read-only anomaly: T1 withdraws from x after reading x
    # and y, T2 deposits to y, T3 (read-only) sees T2's deposit but not T1's withdrawal.
    # One read-only transaction on the cycle: a G-update (PL-3U forbids it); snapshot
    # isolation allows it (the rw edges T3 -> T1 -> T2 are adjacent)
    "G-update": (list_append, [
        (0, 0, 10, "ok", [r("x", []), r("y", []), a("x", 1)]),
        (1, 0, 10, "ok", [r("y", []), a("y", 2)]),
        (2, 0, 10, "ok", [r("x", []), r("y", [2])]),
        (3, 20, 30, "ok", [r("x", [1]), r("y", [2])]),
    ], "G-update", {RC: True, SI: True, PSI: True, US: False, RR: False, SER: False}),
    # the long fork: two read-only transactions see two writes in opposite orders. Its
    # cycle holds two read-only transactions: update serializability allows it (Adya),
    # snapshot isolation does not (non-adjacent rw edges), parallel SI does
    "long-fork": (list_append, [
        (0, 0, 10, "ok", [a("x", 1)]),
        (1, 0, 10, "ok", [a("y", 1)]),
        (2, 0, 10, "ok", [r("x", [1]), r("y", [])]),
        (3, 0, 10, "ok", [r("x", []), r("y", [1])]),
        (4, 20, 30, "ok", [r("x", [1]), r("y", [1])]),
    ], "G-nonadjacent", {RC: True, US: True, PSI: True, SI: False, SER: False}),
    # Write skew on y and z by two transactions that also both append to x, which no
    # one reads: the graph has only the G2-item T0 -rw-> T1 -rw-> T0, but one append to
    # x came first, and either way a G-single closes (T0 -ww-> T1 -rw-> T0, or T1 -ww->
    # T0 -rw-> T1): snapshot isolation's first committer wins on x, so one of the two
    # saw the other's snapshot, and neither did
    "unseen-write-skew": (list_append, [
        (0, 0, 10, "ok", [r("y", []), a("z", 1), a("x", 1)]),
        (1, 0, 10, "ok", [r("z", []), a("y", 1), a("x", 2)]),
        (2, 20, 30, "ok", [r("y", [1]), r("z", [1])]),
    ], "G-single", {RC: True, CV: False, SI: False, SER: False}),
    # A long fork closed by two unseen appends to x: T3 reads x before either and sees
    # T0's y, which T1 and T2 both missed. Whichever append to x came first, its writer
    # precedes the other, which missed y before T3 saw it, and T3 missed x: a
    # G-nonadjacent (T1 -ww-> T2 -rw-> T0 -wr-> T3 -rw-> T1, or the mirror), which
    # consistent view allows and snapshot isolation forbids
    "unseen-long-fork": (list_append, [
        (0, 0, 10, "ok", [a("y", 1)]),
        (1, 0, 10, "ok", [a("x", 1), r("y", [])]),
        (2, 0, 10, "ok", [r("y", []), a("x", 2)]),
        (3, 0, 10, "ok", [r("x", []), r("y", [1])]),
    ], "G-nonadjacent", {RC: True, CV: True, SI: False, SER: False}),
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
    # both transactions write: a G-update too, so update serializability (PL-3U) goes
    assert res.not_ == [RR, US] and "G-update" in res.anomaly_types
    assert SI in res.possible and RC in res.possible and SER not in res.possible


def test_rw_register_non_repeatable_read_is_fuzzy_not_internal():
    """PostgreSQL's READ COMMITTED: a transaction reads x twice and sees a commit in between."""
    from sleuth.checker import rw_register
    from sleuth.history.jsonl import Event, History
    ev = [Event(0, 0, "invoke", 0, "txn", [["r", "x", None], ["r", "x", None]]),
          Event(1, 1, "invoke", 1, "txn", [["w", "x", 1]]),
          Event(2, 2, "ok", 1, "txn", [["w", "x", 1]]),
          Event(3, 3, "ok", 0, "txn", [["r", "x", None], ["r", "x", 1]])]
    h = History(ev, "h")
    rc = rw_register.check(h, model="read-committed")
    assert rc.valid is True and "fuzzy-read" in rc.also_found and "internal" not in rc.anomaly_types
    rr = rw_register.check(h, model="repeatable-read")
    assert rr.valid is False and "fuzzy-read" in rr.anomaly_types
    # Cerone et al.'s INT: read atomic and the models above it forbid it too (Elle: `internal`)
    from test_list_append_rules import FUZZY_ALLOWED

    from sleuth.checker.models import MODELS
    for model in MODELS:
        assert rw_register.check(h, model=model).valid is (model in FUZZY_ALLOWED), model
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


def test_new_anomalies_only_where_their_definitions_hold():
    """Each detector stays silent on its near miss: read skew in the monotonic
    order is not G-monotonic, the long fork (two read-only transactions) is
    not G-update, a G-cursor whose reader does not write is no lost update,
    and a cycle over two keys is not G-cursor."""
    def found(name):
        checker, txns, _, _ = CASES[name]
        return set(checker.check(to_history(txns), SSER).anomalies)
    assert "G-monotonic" not in found("G-single") and "G-cursor" not in found("G-single")
    assert "G-update" not in found("long-fork") and "G-monotonic" not in found("long-fork")
    assert "lost-update" not in found("G-cursor") and "G-monotonic" not in found("G-cursor")
    assert "G-cursor" not in found("G2-item") and "G-cursor" not in found("G-monotonic")
    assert {"G-cursor", "G-single", "G-update"} <= found("G-cursor")
    assert {"G-monotonic", "G-single", "G-update"} <= found("G-monotonic")


def test_new_anomalies_are_explained():
    """The explanation says what makes the cycle one of its type: the key,
    the micro-op order, the read-only transaction."""
    want = {"G-cursor": "Every edge is on key 'x'.", "G-monotonic": "micro-op 1, which the cycle enters, "
            "before its read at micro-op 2", "G-update": "only read-only transaction"}
    for name, text in want.items():
        checker, txns, _, _ = CASES[name]
        ex = checker.check(to_history(txns), SSER).anomalies[name][0]
        assert text in ex["explanation"], ex["explanation"]
        assert ex["explanation"].startswith(name + ": ")
        assert len(ex["steps"]) >= 2


def test_no_budget_leaves_the_new_types_incomplete_never_valid():
    """A budget of 0 searches nothing: the new types are incomplete and the
    models that forbid them come back unknown, not valid."""
    checker, txns, _, _ = CASES["G-cursor"]
    res = checker.check(to_history(txns), CS, cycle_search_timeout=0)
    assert {"G-cursor", "G-monotonic", "G-update"} <= set(res.incomplete)
    assert res.valid == "unknown"


# -- update serializability against brute force -------------------------------

def _update_serializable(txns) -> bool:
    """Adya's PL-3U by brute force: with every read-only transaction but at
    most one left out, a serial order exists (tests/brute.py). The last
    transaction, a final read of every key, stays: it pins the version
    orders (it reads everything, so no edge leaves it and it closes no cycle)."""
    from brute import serial_order_exists
    from test_cycles_bruteforce import brute_txns
    txns = brute_txns(txns)
    *rest, final = txns
    ro = [t for t in rest if t[3] == "ok" and all(m[0] == "r" for m in t[4])]
    upd = [t for t in rest if t not in ro]
    return all(serial_order_exists(upd + extra + [final], "serializable") for extra in [[], *([t] for t in ro)])


def _read_heavy(rnd):
    """Writers that append (some after reading their key) and read-only
    transactions that read every key, each read of an independently chosen
    prefix (a replica per read), all concurrent; then a final read. Unlike
    test_cycles_bruteforce's generator, cycles through several read-only
    transactions (long forks) are common here."""
    keys = ["x", "y"]
    store: dict = {k: [] for k in keys}
    txns = []
    for i in range(rnd.randint(2, 3)):
        k = rnd.choice(keys)
        txns.append([i, 0, 10, "ok", ([["r", k, None]] if rnd.random() < 0.2 else []) + [["append", k, i]]])
    for i in range(rnd.randint(2, 3)):
        txns.append([10 + i, 0, 10, "ok", [["r", k, None] for k in rnd.sample(keys, 2)]])
    for t in rnd.sample(txns, len(txns)):
        out = []
        for f, k, v in t[4]:
            if f == "r":
                v = store[k][: rnd.choice((0, rnd.randint(0, len(store[k])), len(store[k])))]
            out.append([f, k, v])
        for f, k, v in out:
            if f == "append":
                store[k].append(v)
        t[4] = out
    txns.append([99, 20, 30, "ok", [["r", k, list(store[k])] for k in keys]])
    return [tuple(t) for t in txns]


def _histories(n):
    import random

    from test_cycles_bruteforce import generate
    return [generate(random.Random(50_000 + s)) for s in range(n)] + \
        [_read_heavy(random.Random(60_000 + s)) for s in range(n)]


HISTORIES = _histories(150)


@pytest.mark.parametrize("i", range(len(HISTORIES)))
def test_update_serializable_matches_brute_force(i):
    txns = HISTORIES[i]
    got = list_append.check(to_history(txns), US)
    assert got.valid is _update_serializable(txns), (txns, got.anomaly_types)


def test_update_serializable_brute_force_sees_both_answers_and_the_gap_to_serializable():
    """The histories hold update-serializable ones that are not serializable
    (cycles through two read-only transactions), so the test above exercises
    the read-only rule, not only serializability."""
    from brute import serial_order_exists
    from test_cycles_bruteforce import brute_txns
    us = [_update_serializable(t) for t in HISTORIES]
    ser = [serial_order_exists(brute_txns(t), "serializable") for t in HISTORIES]
    assert 30 < sum(us) < len(us) - 30
    assert sum(u and not s for u, s in zip(us, ser, strict=True)) >= 5


def test_rw_register_g_cursor_with_linearizable_keys():
    """Adya's lost update H_lu in registers: T1 reads x = 0 and later writes
    1; meanwhile T2 wrote 2, which T3 (after T2 finished) already found
    replaced by 1. Only real time on the key (`linearizable_keys`) orders 2
    before 1; with it, T1 -rw-> T2 -ww-> T1, both on x: G-cursor."""
    h = to_history([
        (0, 0, 1, "ok", [w("x", 0)]),
        (1, 2, 10, "ok", [r("x", 0), w("x", 1)]),
        (2, 3, 5, "ok", [w("x", 2)]),
        (3, 6, 7, "ok", [r("x", 1)]),
    ])
    res = rw_register.check(h, CS, linearizable_keys=True)
    assert res.valid is False and "G-cursor" in res.anomaly_types, res.anomaly_types
    assert "Every edge is on key 'x'." in res.anomalies["G-cursor"][0]["explanation"]
    assert rw_register.check(h, RC, linearizable_keys=True).valid is True
    assert rw_register.check(h, CS).valid is True  # without it, 2 and 1 are unordered


def test_a_cut_search_leaves_adya_types_ruled_out_where_their_spec_finished():
    """Around a write-skew ring cut short at G2-item, the G-single search had
    finished (every rw edge is followed by another: no snapshot-isolation
    cycle), so G-cursor and G-monotonic, whose cycles are G-single ones, are
    known absent and not incomplete; G-update, a G2-item kind, is incomplete."""
    from test_cycle_search import ring
    res = list_append.check(ring(10_000), SI, cycle_search_timeout=1e-6)
    assert res.stats["cycle-search-timeouts"][0]["searching"] == "G2-item"
    assert "G-update" in res.incomplete
    assert "G-cursor" not in res.incomplete and "G-monotonic" not in res.incomplete
    assert res.valid is True
    assert list_append.check(ring(10_000), MV, cycle_search_timeout=1e-6).valid is True
    assert list_append.check(ring(10_000), US, cycle_search_timeout=1e-6).valid == "unknown"


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_searches_alone_find_what_reusing_found_cycles_finds(name, monkeypatch):
    """The new types are first looked for among the cycles the edge-kind
    specs found; with that turned off, each detector's own search must reach
    the same types."""
    from sleuth.checker import adya
    checker, txns, _, _ = CASES[name]
    h = to_history(txns)
    want = set(checker.check(h, SSER).anomalies)
    monkeypatch.setattr(adya, "REUSE", 0)
    assert set(checker.check(h, SSER).anomalies) == want
