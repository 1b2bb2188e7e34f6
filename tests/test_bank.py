"""Bank: reads must conserve the total; negative balances only when asked."""

from sleuth.checker.bank import check_bank
from sleuth.history.jsonl import Event, History


def history(ops):
    """ops: (process, f, value, start, end)."""
    evs = []
    for p, f, v, s, e in ops:
        evs.append((s, 0, "invoke", p, f, v if f == "transfer" else None))
        evs.append((e, 1, "ok", p, f, v))
    evs.sort(key=lambda x: (x[0], x[1]))
    return History([Event(i, t, typ, p, f, v) for i, (t, _, typ, p, f, v) in enumerate(evs)], "h")


T = {"from": 0, "to": 1, "amount": 5}


def test_conserving_reads_are_valid_and_total_is_inferred():
    r = check_bank(history([(0, "read", {"0": 50, "1": 50}, 0, 1), (1, "transfer", T, 2, 3),
                            (0, "read", {"0": 45, "1": 55}, 4, 5)]))
    assert r.valid is True and r.stats["total"] == 100 and "first complete read" in r.notes[0]


def test_torn_read_names_the_missing_amount():
    r = check_bank(history([(0, "read", {0: 45, 1: 50}, 4, 5)]), total=100)
    assert r.valid is False and r.anomaly_types == ["wrong-total"]
    assert "sums to 95, expected 100 (missing 5)" in r.anomalies["wrong-total"][0]["explanation"]


def test_negative_balance_only_with_no_negative():
    h = history([(0, "read", {0: -5, 1: 105}, 0, 1)])
    assert check_bank(h, total=100).valid is True
    r = check_bank(h, total=100, no_negative=True)
    assert r.anomaly_types == ["negative-balance"]


def test_every_broken_read_is_counted_though_twenty_are_explained():
    r = check_bank(history([(0, "read", {0: 45, 1: 50}, 2 * i, 2 * i + 1) for i in range(25)]
                           + [(0, "read", {0: 50, 1: 50}, 100, 101)]), total=100)
    assert len(r.anomalies["wrong-total"]) == 20 and r.stats["anomaly-counts"] == {"wrong-total": 25}
