"""Counter: the bounds checker against brute force. A read value is
achievable iff it is the sum of a set of adds holding every ok add that
completed before the read began and only adds (ok or info) begun before it
ended. With +1 adds the interval is exactly the achievable set; with other
amounts it must at least never reject an achievable value."""

import itertools
import random

import pytest

from sleuth.checker.counter import check_counter
from sleuth.history.jsonl import Event, History


def history(ops):
    """ops: (process, f, value, start, end, type); end None = never completed."""
    evs = []
    for p, f, v, start, end, typ in ops:
        evs.append((start, 0, "invoke", p, f, v if f == "add" else None))
        if end is not None:
            evs.append((end, 1, typ, p, f, v))
    evs.sort(key=lambda e: (e[0], e[1]))
    return History([Event(i, t, typ, p, f, v) for i, (t, _, typ, p, f, v) in enumerate(evs)], "h")


def achievable(ops, read):
    _, _, _, rs, re, _ = read
    must = [v for p, f, v, s, e, t in ops if f == "add" and t == "ok" and e < rs]
    # The file order is the real-time order: `history` writes invokes before
    # completions at equal times, so an add invoked at the read's end time
    # was invoked before the read completed.
    may = [v for p, f, v, s, e, t in ops if f == "add" and t != "fail" and s <= re
           and not (t == "ok" and e < rs)]
    return {sum(must) + sum(c) for n in range(len(may) + 1) for c in itertools.combinations(may, n)}


def random_ops(rnd, amounts):
    ops, free, ids = [], [0, 0, 0], [0, 1, 2]
    for _ in range(rnd.randint(2, 8)):
        c = rnd.randrange(3)
        p = ids[c]
        s = free[c] + rnd.randint(0, 3)
        e = s + rnd.randint(1, 6)
        free[c] = e + 1
        if rnd.random() < 0.6:
            t = rnd.choices(["ok", "info", "fail"], [6, 2, 1])[0]
            ops.append((p, "add", rnd.choice(amounts), s, None if t == "info" else e, t))
            if t == "info":
                ids[c] += 3  # a crashed process is never reused
        else:
            ops.append((p, "read", rnd.randint(-2, 8), s, e, "ok"))
    return ops


@pytest.mark.parametrize("seed", range(300))
def test_plus_one_adds_bounds_are_exact(seed):
    rnd = random.Random(seed)
    ops = random_ops(rnd, [1])
    reads = [o for o in ops if o[1] == "read"]
    want = all(o[2] in achievable(ops, o) for o in reads) if reads else "unknown"  # nothing to judge
    assert check_counter(history(ops)).valid == want


@pytest.mark.parametrize("seed", range(300))
def test_any_amounts_never_reject_an_achievable_read(seed):
    rnd = random.Random(seed)
    ops = random_ops(rnd, [-3, -1, 2, 5])
    reads = [o for o in ops if o[1] == "read"]
    if all(o[2] in achievable(ops, o) for o in reads):
        assert check_counter(history(ops)).valid == (True if reads else "unknown")  # nothing to judge


def test_read_below_acknowledged_adds():
    r = check_counter(history([(0, "add", 1, 0, 5, "ok"), (0, "add", 1, 6, 9, "ok"),
                               (1, "read", 1, 10, 12, "ok")]))
    assert r.valid is False and r.anomaly_types == ["counter-too-low"]
    ex = r.anomalies["counter-too-low"][0]
    assert (ex["lower"], ex["upper"]) == (2, 2) and "[2, 2]" in ex["explanation"]


def test_info_add_widens_only_the_upper_bound():
    ops = [(0, "add", 5, 0, None, "info"), (1, "read", 5, 10, 12, "ok"), (1, "read", 0, 13, 14, "ok")]
    assert check_counter(history(ops)).valid is True
    ops[2] = (1, "read", 6, 13, 14, "ok")
    assert check_counter(history(ops)).anomaly_types == ["counter-too-high"]


def test_every_read_out_of_bounds_is_counted_though_twenty_are_explained():
    ops = [(0, "add", 1, 0, 5, "ok")] + [(1, "read", 0, 10 + 2 * i, 11 + 2 * i, "ok") for i in range(25)]
    r = check_counter(history(ops + [(1, "read", 1, 100, 101, "ok")]))
    assert len(r.anomalies["counter-too-low"]) == 20
    assert r.stats["anomaly-counts"] == {"counter-too-low": 25}
