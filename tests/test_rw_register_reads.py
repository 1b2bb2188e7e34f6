"""rw-register's read anomalies (G1a, G1b, garbage reads), on histories of a few lines.

A read is judged by what it saw, whichever read of the key it is in its
transaction: the second read of a fuzzy pair saw a version too, and if that
version is an intermediate or aborted write, the history shows G1b or G1a (Adya),
which read committed forbids. Before the fix of 2026-11-28 only a transaction's
first read of each key was looked at, and the second read's G1b or G1a was missed
(found by tests/test_judge_differential.py, random history 185).
"""

from test_cycles_bruteforce import to_history

from sleuth.checker import rw_register

INTERMEDIATE = (1, 0, 10, "ok", [["w", "x", 1], ["w", "x", 2]])  # x = 1 is intermediate
FAILED = (1, 0, 10, "fail", [["w", "x", 1]])


def check(*txns, model="read-committed"):
    return rw_register.check(to_history(list(txns)), model)


def test_a_read_of_an_intermediate_write_is_g1b():
    r = check(INTERMEDIATE, (0, 20, 30, "ok", [["r", "x", 1]]))
    assert r.valid is False and r.anomaly_types == ["G1b"], r.anomaly_types
    assert check(INTERMEDIATE, (0, 20, 30, "ok", [["r", "x", 1]]), model="read-uncommitted").valid is True


def test_a_second_read_of_an_intermediate_write_is_g1b():
    r = check(INTERMEDIATE, (0, 5, 30, "ok", [["r", "x", None], ["r", "x", 1]]))
    assert r.valid is False and "G1b" in r.anomaly_types, r.anomaly_types


def test_a_second_read_of_an_aborted_write_is_g1a():
    r = check(FAILED, (0, 5, 30, "ok", [["r", "x", None], ["r", "x", 1]]))
    assert r.valid is False and "G1a" in r.anomaly_types, r.anomaly_types


def test_a_second_read_of_a_value_nobody_wrote_is_garbage():
    r = check((0, 5, 30, "ok", [["r", "x", None], ["r", "x", 7]]), model="read-uncommitted")
    assert r.valid is False and "garbage-read" in r.anomaly_types, r.anomaly_types
