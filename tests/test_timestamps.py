"""The grey-box timestamp rules (checker/timestamps.py) on hand-made histories."""

from __future__ import annotations

from sleuth.checker import timestamps
from sleuth.history.jsonl import Event, History


def H(*ops):
    """ops: (process, f, value, invoke time, complete time, ts) -> a history of ok operations."""
    evs = []
    for p, f, v, a, b, ts in ops:
        evs.append((a, "invoke", p, f, v, None))
        evs.append((b, "ok", p, f, v, ts))
    # The file order is the real-time order (docs/history-format.md): at equal times the
    # invokes are written first, so operations that touch in time overlap.
    evs.sort(key=lambda e: (e[0], e[1] != "invoke"))
    return History([Event(i, t, typ, p, f, v, ts=ts) for i, (t, typ, p, f, v, ts) in enumerate(evs)], "h")


def test_a_correct_history_passes():
    h = H((0, "write", [1, 1], 0, 10, 5), (1, "read", [1, 1], 20, 30, 5), (2, "write", [1, 2], 40, 50, 6),
          (0, "read", [1, 2], 60, 70, 6), (1, "read", [1, 1], 45, 48, 5))  # concurrent: may be older
    assert timestamps.check(h, "register").valid is True


def test_stale_read_is_named():
    h = H((0, "write", [1, 1], 0, 10, 7), (1, "read", [1, None], 20, 30, 6))
    r = timestamps.check(h, "register")
    assert r.valid is False and r.anomaly_types == ["read-ts-below-write"]
    assert r.anomalies["read-ts-below-write"][0]["before"]["ts"] == 7
    # each operation named by its lines, as a reader finds it in the file
    assert r.anomalies["read-ts-below-write"][0]["explanation"] == (
        "process 1's read (line 3) ran at ts 6, below ts 7 of process 0's write, which completed "
        "(line 2, begun at line 1) before the read began (a stale read)")


def test_a_merged_verdict_counts_the_timestamp_rules_findings_too():
    """with_timestamps (the run's and `check --timestamps`' verdict) merges the rules' counts
    into the workload checker's, which keeps its own where both name a type."""
    from sleuth.checker.judge import with_timestamps
    from sleuth.checker.linearizable import check_register

    h = H((0, "write", [1, 1], 0, 10, 7), (1, "read", [1, None], 20, 30, 6),
          (2, "read", [1, None], 40, 50, 5))
    merged, ts = with_timestamps(check_register(h), h, "register")
    assert ts.stats["anomaly-counts"] == {"read-ts-below-write": 2}
    assert merged.stats["anomaly-counts"] == {"read-ts-below-write": 2, "nonlinearizable": 1}


def test_write_not_above_an_earlier_read():
    h = H((0, "read", [1, None], 0, 10, 7), (1, "write", [1, 1], 20, 30, 7))
    assert timestamps.check(h, "register").anomaly_types == ["write-ts-not-above-read"]
    # the same timestamps, concurrent: no rule applies
    h = H((0, "read", [1, None], 0, 25, 7), (1, "write", [1, 1], 20, 30, 7))
    assert timestamps.check(h, "register").valid is True


def test_backwards_between_writes_and_transactions():
    h = H((0, "txn", [["append", 1, 1]], 0, 10, 9), (1, "txn", [["append", 1, 2]], 20, 30, 8))
    assert timestamps.check(h, "list-append").anomaly_types == ["ts-backwards"]
    h = H((0, "txn", [["append", 1, 1]], 0, 10, 9), (1, "txn", [["r", 1, [1]]], 20, 30, 8))
    assert timestamps.check(h, "list-append").anomaly_types == ["read-ts-below-write"]


def test_against_brute_force_on_random_histories():
    import random
    rnd = random.Random(3)
    for trial in range(300):
        ops = []
        for i in range(rnd.randint(2, 7)):
            a = rnd.randint(0, 50)
            ops.append((i, rnd.choice(["read", "write"]), [0, i], a, a + rnd.randint(1, 20), rnd.randint(0, 5)))
        want = set()
        for p, f, v, a, b, ts in ops:
            for q, g, w, c, d, ts2 in ops:
                if b < c:  # (p) completed before (q) began
                    if g == "write" and f == "read" and ts2 <= ts:
                        want.add("w")
                    if ts2 < ts:
                        want.add("b")
        r = timestamps.check(H(*ops), "register")
        assert (r.valid is True) == (not want), (trial, ops, r.anomaly_types)
