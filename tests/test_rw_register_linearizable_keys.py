"""rw-register with linearizable keys (Elle's option): version orders from real time, checked
against hand-made anomalies and a brute-force oracle.

The oracle: is there a serial order of the committed transactions that
explains every read, and in which each key's versions respect real time (a
transaction that finished before another began left a version at or before
the one the other found)? That is serializability plus per-key
linearizability, what a single PostgreSQL server promises at SERIALIZABLE.
"""

from __future__ import annotations

import itertools
import random

import pytest
from test_cycles_bruteforce import to_history

from sleuth.checker import rw_register

SI, RR, SER, SSER = "snapshot-isolation", "repeatable-read", "serializable", "strict-serializable"


def r(k, v):
    return ["r", k, v]


def w(k, v):
    return ["w", k, v]


# PostgreSQL REPEATABLE READ write skew as rw-register sees it: T1 reads x and writes y, T2 reads y
# and writes x, both from the snapshot T0 left. No transaction reads a key and then writes it, so
# reads alone order nothing; only real time says 1 came before 2 in both keys.
WRITE_SKEW = [
    (0, 0, 5, "ok", [w("x", 1), w("y", 1)]),
    (1, 10, 20, "ok", [r("x", 1), w("y", 2)]),
    (2, 10, 20, "ok", [r("y", 1), w("x", 2)]),
    (3, 30, 40, "ok", [r("x", 2), r("y", 2)]),
]


def test_write_skew_is_g2_item_only_with_linearizable_keys():
    h = to_history(WRITE_SKEW)
    plain = rw_register.check(h, SER)
    assert plain.valid is True  # nothing to order the versions by
    res = rw_register.check(h, SER, linearizable_keys=True)
    assert res.valid is False and "G2-item" in res.anomaly_types
    assert rw_register.check(h, SI, linearizable_keys=True).valid is True  # SI allows write skew
    assert rw_register.check(h, RR, linearizable_keys=True).valid is False
    assert not serial_order_exists(WRITE_SKEW)
    text = res.anomalies["G2-item"][0]["explanation"]
    assert "'x'" in text and "'y'" in text
    # each order is told as it was learned: T0 finished before the other began, which then wrote
    # (not "found": neither read the key it wrote) its value over T0's
    assert "left 1 in 'x' and finished before T2 began, and T2 then wrote 2 there" in text, text
    assert "left 1 in 'y' and finished before T1 began, and T1 then wrote 2 there" in text, text


def test_an_order_learned_from_a_read_says_the_value_was_read():
    # x: 1 < 2 because the reader began after T0 (which left 1) finished, and read 2; the
    # writer of 2 also wrote the y that T0 read: a cycle through that ww edge
    txns = [(0, 0, 5, "ok", [w("x", 1), r("y", 1)]),
            (1, 1, 30, "ok", [w("y", 1), w("x", 2)]),
            (2, 10, 20, "ok", [r("x", 2)])]
    assert rw_register.check(to_history(txns), SER).valid is True  # nothing orders x's versions
    res = rw_register.check(to_history(txns), SER, linearizable_keys=True)
    assert res.valid is False and not serial_order_exists(txns)
    text = res.anomalies[res.anomaly_types[0]][0]["explanation"]
    assert "T0 left 1 in 'x' and finished before T2 began, and T2 then read 2 there" in text, text


def test_a_serial_pair_in_real_time_stays_valid():
    txns = [(0, 0, 5, "ok", [w("x", 1)]),
            (1, 10, 20, "ok", [r("x", 1), w("y", 1)]),
            (2, 30, 40, "ok", [r("y", 1), w("x", 2)]),
            (3, 50, 60, "ok", [r("x", 2), r("y", 1)])]
    assert serial_order_exists(txns)
    assert rw_register.check(to_history(txns), SSER, linearizable_keys=True).valid is True


def test_reading_nil_after_a_committed_write_is_cyclic_versions():
    txns = [(0, 0, 5, "ok", [w("x", 1)]),
            (1, 10, 20, "ok", [r("x", None)])]
    h = to_history(txns)
    assert rw_register.check(h, SER).valid is True  # serializable alone allows the stale read
    res = rw_register.check(h, SER, linearizable_keys=True)
    assert res.valid is False and res.anomaly_types == ["cyclic-versions"]
    assert not serial_order_exists(txns)


# -- brute force ---------------------------------------------------------------


def _versions(order):
    """Run txns serially; None if some read disagrees, else each key's version sequence
    and, per txn and key, the index of the version it found and the one it left."""
    state, seq, found, left = {}, {}, {}, {}
    for t in order:
        mops, own = t[4], {}
        for f, k, v in mops:
            if f == "r":
                cur = own.get(k, state.get(k))
                if cur != v:
                    return None
            else:
                own[k] = v
            if (id(t), k) not in found:
                found[(id(t), k)] = len(seq.get(k, [])) if f == "r" else None  # None: its own write
        for k, v in own.items():
            seq.setdefault(k, []).append(v)
            state[k] = v
        for k in {k for _, k, _ in mops}:
            left[(id(t), k)] = len(seq.get(k, [])) if k in own else found[(id(t), k)]
            if found[(id(t), k)] is None:
                found[(id(t), k)] = left[(id(t), k)]
    return found, left


def serial_order_exists(txns) -> bool:
    """Serializable with every key linearizable: a serial order explaining the reads whose
    per-key versions respect real time (all txns committed)."""
    for order in itertools.permutations(txns):
        got = _versions(order)
        if got is None:
            continue
        found, left = got
        if all(left[(id(a), k)] <= found[(id(b), k)]
               for a in txns for b in txns if a[2] < b[1]
               for k in {k for _, k, _ in a[4]} & {k for _, k, _ in b[4]}):
            return True
    return False


def random_history(rnd: random.Random, n: int):
    """Random committed txns on keys x, y with unique writes; reads pick any written value or nil."""
    counter = itertools.count(1)
    shapes = []
    for p in range(n):
        start = rnd.randint(0, 40)
        mops = [[rnd.choice("rw"), rnd.choice("xy"), None] for _ in range(rnd.randint(1, 3))]
        for m in mops:
            if m[0] == "w":
                m[2] = next(counter)
        shapes.append((p, start, start + rnd.randint(1, 15), "ok", mops))
    return fill_reads(rnd, shapes)


def fill_reads(rnd: random.Random, shapes):
    """Each read sees its own txn's last write to the key, else nil or any value some txn wrote."""
    written = {k: [m[2] for t in shapes for m in t[4] if m[0] == "w" and m[1] == k] for k in "xy"}
    for t in shapes:
        own = {}
        for m in t[4]:
            if m[0] == "w":
                own[m[1]] = m[2]
            else:
                m[2] = own.get(m[1], rnd.choice([None, *written[m[1]]]))
    return shapes


def executed(rnd: random.Random, shapes):
    """The txns run one at a time at a random instant inside their windows (so in
    real time, hence in each process's order): their reads filled accordingly."""
    state = {}
    for t in sorted(shapes, key=lambda t: rnd.uniform(t[1], t[2])):
        own = {}
        for m in t[4]:
            if m[0] == "w":
                own[m[1]] = m[2]
            else:
                m[2] = own.get(m[1], state.get(m[1]))
        state.update(own)
    return shapes


def serial_history(rnd: random.Random, n: int):
    """Txns executed one at a time at a random instant inside their windows: strictly serializable."""
    return executed(rnd, random_history(rnd, n))


@pytest.mark.parametrize("seed", range(150))
def test_never_claims_what_brute_force_refutes(seed):
    """An invalid verdict with linearizable keys always means no serial order fits."""
    rnd = random.Random(seed)
    txns = random_history(rnd, rnd.randint(3, 6))
    res = rw_register.check(to_history(txns), SER, linearizable_keys=True)
    if res.valid is False:
        assert not serial_order_exists(txns), (res.anomaly_types, txns)


@pytest.mark.parametrize("seed", range(100))
def test_strictly_serializable_executions_are_valid(seed):
    rnd = random.Random(50_000 + seed)
    txns = serial_history(rnd, rnd.randint(3, 7))
    res = rw_register.check(to_history(txns), SSER, linearizable_keys=True)
    assert res.valid is True, (res.anomaly_types, txns)


def test_the_option_finds_what_plain_inference_misses():
    """Over random histories, linearizable keys catch strictly more non-serializable ones."""
    plain = keyed = refuted = 0
    for seed in range(300):
        rnd = random.Random(90_000 + seed)
        txns = random_history(rnd, rnd.randint(3, 5))
        h = to_history(txns)
        if serial_order_exists(txns):
            continue
        refuted += 1
        plain += rw_register.check(h, SER).valid is False
        keyed += rw_register.check(h, SER, linearizable_keys=True).valid is False
    assert refuted > 50 and keyed > plain, (refuted, plain, keyed)
