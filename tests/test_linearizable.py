"""Linearizability of registers (checker/linearizable.py, checker/register_models.py).

1. Against a brute-force linearizer written here, independently: every subset
   of the crashed ops x every order of the chosen ops that respects real time,
   simulating the register. Hundreds of random small histories (2-4 processes,
   4-8 ops, values 0-2 so they repeat, crashed and failed ops, some reads
   corrupted so that both verdicts are common) must get the same verdict, for
   `register` (2 keys) and `cas-register`.
2. Classic cases with known answers, and explanations that name the right op.
3. The simulated register: linearizable runs pass; the stale-read bug, when
   it provably fired, is caught.
"""

from __future__ import annotations

import random

import orjson
import pytest

from sleuth.checker import linearizable, register_models
from sleuth.checker.linearizable import check_cas_register, check_register
from sleuth.history.jsonl import Event, History, HistoryError, read_jsonl
from sleuth.workloads.sim_register import simulate, write_sim


def H(*events, source="h.jsonl") -> History:
    """A history from (type, process, f, value) tuples, one per line, in order."""
    return History([Event(i, i, t, p, f, v) for i, (t, p, f, v) in enumerate(events)], source)


# ---------------------------------------------------------------------------
# Brute force


def brute_force(ops: list[dict], initial, failed_cas_observes: bool = False) -> bool:
    """ops: dicts with key, f, arg (write v | cas [old, new]), result (read),
    type ok/info/fail, inv and cmp (event positions; cmp None = never
    completed). Linearizable iff for every key some subset of the crashed
    writes/cas plus all ok ops has an order that respects real time
    (a before b whenever a completed before b was invoked) and that a
    register starting at `initial` accepts. With `failed_cas_observes`
    (etcd's reading, as Porcupine's etcd model has it), every failed cas is
    placed too, as an op legal only when the register does not hold its old
    value, changing nothing."""
    def counted(o):
        return o["type"] != "fail" or (failed_cas_observes and o["f"] == "cas")

    for key in {o["key"] for o in ops}:
        mine = [o for o in ops if o["key"] == key and counted(o)]
        ok = [o for o in mine if o["type"] != "info"]
        crashed = [o for o in mine if o["type"] == "info" and o["f"] != "read"]
        if not any(_orders(ok + [c for j, c in enumerate(crashed) if mask >> j & 1], initial)
                   for mask in range(1 << len(crashed))):
            return False
    return True


def _orders(chosen: list[dict], initial) -> bool:
    def before(a, b):  # a must precede b
        return a["cmp"] is not None and a["type"] != "info" and a["cmp"] < b["inv"]

    def extend(placed: list[dict], rest: list[dict], value) -> bool:
        if not rest:
            return True
        for o in rest:
            if any(before(x, o) for x in rest if x is not o):
                continue
            if o["f"] == "read":
                if o["result"] != value:
                    continue
                new = value
            elif o["f"] == "write":
                new = o["arg"]
            elif o["type"] == "fail":  # a failed cas: the comparison did not match
                if o["arg"][0] == value:
                    continue
                new = value
            else:
                if o["arg"][0] != value:
                    continue
                new = o["arg"][1]
            if extend(placed + [o], [x for x in rest if x is not o], new):
                return True
        return False

    return extend([], chosen, initial)


# ---------------------------------------------------------------------------
# Random small histories


MAX_OPS = 8  # ops per random history


def random_history(rnd: random.Random, keyed: bool, initial) -> tuple[list[Event], list[dict]]:
    """A random run against a correct register (random interleaving of invokes,
    effects and completions; crashes; fails), then maybe a corrupted read."""
    nproc = rnd.randint(2, 4)
    nops = rnd.randint(4, MAX_OPS)
    keys = [0, 1] if keyed else [None]
    reg = {k: initial for k in keys}
    events: list[Event] = []
    ops: list[dict] = []
    busy: dict[int, dict] = {}
    next_pid = nproc
    idle = list(range(nproc))
    crashed_pending: list[dict] = []

    def emit(typ, o, value):
        if keyed:
            value = [o["key"], value]
        events.append(Event(len(events), len(events) * 10, typ, o["process"], o["f"], value))

    def apply(o):
        k, f = o["key"], o["f"]
        if f == "read":
            o["result"] = reg[k]
        elif f == "write":
            reg[k] = o["arg"]
        elif reg[k] == o["arg"][0]:
            reg[k] = o["arg"][1]
        elif o["type"] == "ok":  # a crashed cas stays crashed: its client never heard
            o["type"] = "fail"
        o["applied"] = True

    started = 0
    while started < nops or busy:
        moves = []
        if started < nops and idle:
            moves.append("invoke")
        if busy:
            moves += ["step", "step"]
        if crashed_pending:
            moves.append("late")
        move = rnd.choice(moves)
        if move == "invoke":
            p = idle.pop(rnd.randrange(len(idle)))
            f = rnd.choice(["read", "write", "cas"])
            arg = None if f == "read" else rnd.randrange(3) if f == "write" else \
                [rnd.randrange(3), rnd.randrange(3)]
            o = {"key": rnd.choice(keys), "f": f, "arg": arg, "result": None, "type": "ok",
                 "process": p, "inv": len(events), "cmp": None, "applied": False}
            r = rnd.random()
            if r < 0.3:
                o["type"] = "info"
            elif r < 0.37:
                o["type"] = "fail"
                o["applied"] = True  # a definite failure: no effect
            emit("invoke", o, arg)
            ops.append(o)
            busy[p] = o
            started += 1
        elif move == "late":
            o = crashed_pending.pop(rnd.randrange(len(crashed_pending)))
            apply(o)
        else:
            p = rnd.choice(list(busy))
            o = busy[p]
            if not o["applied"] and o["type"] != "info":
                apply(o)
                continue
            del busy[p]
            if o["type"] == "info":
                if rnd.random() < 0.5:
                    if rnd.random() < 0.5:
                        apply(o)
                    else:
                        crashed_pending.append(o)  # takes effect after the client gave up
                emit("info", o, o["arg"])  # an info read carries its invoke value
                idle.append(next_pid)
                next_pid += 1
                continue
            o["cmp"] = len(events)
            emit(o["type"], o, o["result"] if o["f"] == "read" and o["type"] == "ok" else o["arg"])
            idle.append(p)
    # A buggy database: one ok read returns something else.
    reads = [o for o in ops if o["f"] == "read" and o["type"] == "ok"]
    if reads and rnd.random() < 0.6:
        o = rnd.choice(reads)
        o["result"] = rnd.choice([v for v in (None, 0, 1, 2) if v != o["result"]])
        value = [o["key"], o["result"]] if keyed else o["result"]
        e = events[o["cmp"]]
        events[o["cmp"]] = Event(e.index, e.time, e.type, e.process, e.f, value)
    return events, ops


@pytest.mark.parametrize("keyed", [False, True], ids=["cas-register", "register"])
def test_agrees_with_brute_force(keyed):
    rnd = random.Random(20261123 + keyed)
    check = check_register if keyed else check_cas_register
    verdicts = {True: 0, False: 0}
    for n in range(1500):
        initial = rnd.choice([None, 0])
        events, ops = random_history(rnd, keyed, initial)
        expected = brute_force(ops, initial)
        r = check(History(events, f"random-{n}"), initial_value=initial)
        # nothing completed ok: nothing to judge, unknown (never valid)
        verdict = expected if any(e.type == "ok" for e in events) else "unknown"
        assert r.valid == verdict, (n, initial, [e.to_dict() for e in events])
        assert (r.anomaly_types == ["nonlinearizable"]) is (not expected)
        verdicts[expected] += 1
    assert verdicts[True] > 400 and verdicts[False] > 400, verdicts


# ---------------------------------------------------------------------------
# Classic cases


def valid(*events, keyed=False, **kw):
    check = check_register if keyed else check_cas_register
    return check(H(*events), **kw).valid


def test_empty_history_is_unknown():
    assert valid() == "unknown"  # nothing to judge is not a pass (issue 10)


def test_stale_read_after_completed_write_is_named():
    r = check_cas_register(H(
        ("invoke", 0, "write", 1),
        ("ok", 0, "write", 1),
        ("invoke", 0, "write", 2),
        ("ok", 0, "write", 2),
        ("invoke", 1, "read", None),   # line 5
        ("ok", 1, "read", 1),          # stale: 2 was written and acknowledged
    ))
    assert r.valid is False and r.anomaly_types == ["nonlinearizable"]
    (ex,) = r.anomalies["nonlinearizable"]
    assert ex["key"] is None
    assert ex["op"]["process"] == 1 and ex["op"]["line"] == 5 and ex["op"]["f"] == "read"
    assert ex["state"] == 2 and ex["window"] == []
    text = ex["explanation"]
    assert "after linearizing 2 ops the register held 2" in text
    assert "process 0's write of 2, line 3" in text
    assert "read by process 1 (line 5) returned 1" in text
    assert "could have written 1 in time" in text


def test_concurrent_write_and_read_either_order_is_valid():
    assert valid(("invoke", 0, "write", 1), ("invoke", 1, "read", None),
                 ("ok", 1, "read", 1), ("ok", 0, "write", 1)) is True
    assert valid(("invoke", 0, "write", 1), ("invoke", 1, "read", None),
                 ("ok", 1, "read", None), ("ok", 0, "write", 1)) is True


def test_read_of_a_value_never_written_is_invalid():
    r = check_cas_register(H(("invoke", 0, "write", 1), ("ok", 0, "write", 1),
                             ("invoke", 1, "read", None), ("ok", 1, "read", 3)))
    assert r.valid is False
    assert "returned 3, a value no operation ever wrote" in r.anomalies["nonlinearizable"][0][
        "explanation"]


def test_read_of_initial_value_and_initial_value_option():
    assert valid(("invoke", 1, "read", None), ("ok", 1, "read", None)) is True
    assert valid(("invoke", 1, "read", None), ("ok", 1, "read", 0)) is False
    assert valid(("invoke", 1, "read", None), ("ok", 1, "read", 0), initial_value=0) is True
    assert valid(("invoke", 1, "read", None), ("ok", 1, "read", None), initial_value=0) is False


def test_crashed_write_observed_later_is_valid():
    assert valid(("invoke", 0, "write", 3), ("info", 0, "write", 3),
                 ("invoke", 1, "read", None), ("ok", 1, "read", 3),
                 ("invoke", 2, "read", None), ("ok", 2, "read", 3)) is True


def test_crashed_write_can_take_effect_late_but_not_be_undone():
    # Read 3 (the crashed write happened), then null, then 3 again: the crashed
    # write can take effect only once, and nothing else writes null or 3.
    assert valid(("invoke", 0, "write", 3), ("info", 0, "write", 3),
                 ("invoke", 1, "read", None), ("ok", 1, "read", 3),
                 ("invoke", 1, "read", None), ("ok", 1, "read", None)) is False
    # ...but a second crashed write of the same value may explain a second flip.
    assert valid(("invoke", 0, "write", 3), ("info", 0, "write", 3),
                 ("invoke", 5, "write", None), ("info", 5, "write", None),
                 ("invoke", 1, "read", None), ("ok", 1, "read", 3),
                 ("invoke", 1, "read", None), ("ok", 1, "read", None),
                 ("invoke", 2, "write", 3), ("info", 2, "write", 3),
                 ("invoke", 1, "read", None), ("ok", 1, "read", 3)) is True


def test_a_crashed_write_never_observed_does_not_matter():
    r = check_cas_register(H(("invoke", 0, "write", 7), ("info", 0, "write", 7),
                             ("invoke", 1, "write", 1), ("ok", 1, "write", 1),
                             ("invoke", 1, "read", None), ("ok", 1, "read", 1)))
    assert r.valid is True and r.stats["crashed-dropped"] == 1


def test_crashed_writes_of_an_observed_value_are_kept():
    # Another op writes 1 too, but the read of 1 after the write of 2 needs
    # the crashed write of 1: it must not be pruned for the value's sake.
    r = check_cas_register(H(("invoke", 0, "write", 1), ("ok", 0, "write", 1),
                             ("invoke", 2, "write", 1), ("info", 2, "write", 1),
                             ("invoke", 0, "write", 2), ("ok", 0, "write", 2),
                             ("invoke", 1, "read", None), ("ok", 1, "read", 1)))
    assert r.valid is True and r.stats["crashed-dropped"] == 0


def test_info_read_constrains_nothing_and_fail_is_dropped():
    assert valid(("invoke", 0, "read", None), ("info", 0, "read", None),
                 ("invoke", 1, "write", 4), ("fail", 1, "write", 4),
                 ("invoke", 2, "read", None), ("ok", 2, "read", None)) is True
    # A failed write that the read would need does not count.
    assert valid(("invoke", 1, "write", 4), ("fail", 1, "write", 4),
                 ("invoke", 2, "read", None), ("ok", 2, "read", 4)) is False


def test_cas_chain_and_failed_cas():
    assert valid(("invoke", 0, "write", 0), ("ok", 0, "write", 0),
                 ("invoke", 0, "cas", [0, 1]), ("ok", 0, "cas", [0, 1]),
                 ("invoke", 1, "cas", [1, 2]), ("ok", 1, "cas", [1, 2]),
                 ("invoke", 2, "cas", [0, 3]), ("fail", 2, "cas", [0, 3]),
                 ("invoke", 2, "read", None), ("ok", 2, "read", 2)) is True
    # Two successful cas from the same old value, one after the other: impossible.
    r = check_cas_register(H(("invoke", 0, "write", 0), ("ok", 0, "write", 0),
                             ("invoke", 0, "cas", [0, 1]), ("ok", 0, "cas", [0, 1]),
                             ("invoke", 1, "cas", [0, 2]), ("ok", 1, "cas", [0, 2])))
    assert r.valid is False
    ex = r.anomalies["nonlinearizable"][0]
    assert ex["op"]["line"] == 5 and ex["op"]["f"] == "cas"
    assert "cas by process 1 (line 5) from 0 to 2 succeeded" in ex["explanation"]


def test_concurrent_cas_pair_may_go_either_way():
    assert valid(("invoke", 0, "write", 0), ("ok", 0, "write", 0),
                 ("invoke", 0, "cas", [1, 2]), ("invoke", 1, "cas", [0, 1]),
                 ("ok", 0, "cas", [1, 2]), ("ok", 1, "cas", [0, 1]),
                 ("invoke", 2, "read", None), ("ok", 2, "read", 2)) is True


def test_repeated_values():
    # 1, 2, 1 again: reads of 1 then 2 then 1 are fine...
    events = [("invoke", 0, "write", 1), ("invoke", 1, "write", 2), ("invoke", 2, "write", 1),
              ("invoke", 3, "read", None), ("ok", 3, "read", 1),
              ("invoke", 4, "read", None), ("ok", 4, "read", 2),
              ("invoke", 3, "read", None), ("ok", 3, "read", 1),
              ("ok", 0, "write", 1), ("ok", 1, "write", 2), ("ok", 2, "write", 1)]
    assert valid(*events) is True
    # ...but not 2, 1, 2: only one write of 2.
    events = [("invoke", 0, "write", 1), ("invoke", 1, "write", 2), ("invoke", 2, "write", 1),
              ("invoke", 3, "read", None), ("ok", 3, "read", 2),
              ("invoke", 4, "read", None), ("ok", 4, "read", 1),
              ("invoke", 3, "read", None), ("ok", 3, "read", 2),
              ("ok", 0, "write", 1), ("ok", 1, "write", 2), ("ok", 2, "write", 1)]
    assert valid(*events) is False


def test_never_completed_invoke_is_crashed():
    assert valid(("invoke", 1, "read", None), ("ok", 1, "read", None),
                 ("invoke", 0, "write", 5),
                 ("invoke", 1, "read", None), ("ok", 1, "read", 5)) is True


def test_register_keys_are_independent_and_each_reported():
    r = check_register(H(
        ("invoke", 0, "write", ["a", 1]), ("ok", 0, "write", ["a", 1]),
        ("invoke", 1, "read", ["b", None]), ("ok", 1, "read", ["b", 1]),   # b never written
        ("invoke", 1, "read", ["a", None]), ("ok", 1, "read", ["a", 1]),
        ("invoke", 2, "write", ["c", 2]), ("ok", 2, "write", ["c", 2]),
        ("invoke", 2, "read", ["c", None]), ("ok", 2, "read", ["c", None]),  # stale
    ))
    assert r.valid is False and r.stats["keys"] == 3
    examples = r.anomalies["nonlinearizable"]
    assert [ex["key"] for ex in examples] == ["b", "c"]
    assert examples[0]["op"]["line"] == 3 and examples[1]["op"]["line"] == 9
    assert examples[1]["explanation"].startswith('key "c": no linearization')


def test_window_lists_concurrent_ops():
    r = check_cas_register(H(
        ("invoke", 0, "write", 3), ("ok", 0, "write", 3),
        ("invoke", 0, "write", 1), ("ok", 0, "write", 1),
        ("invoke", 1, "read", None),                       # line 5
        ("invoke", 2, "write", 2),                         # line 6, concurrent
        ("ok", 2, "write", 2),
        ("ok", 1, "read", 3),
    ))
    ex = r.anomalies["nonlinearizable"][0]
    assert ex["op"]["line"] == 5 and ex["op"]["complete-line"] == 8
    assert [w["line"] for w in ex["window"]] == [6]
    assert ex["window"][0] == {"process": 2, "f": "write", "type": "ok", "value": 2,
                               "op": "write 2", "line": 6, "complete-line": 7}
    assert ("read by process 1 (line 5) returned 3, and no operation concurrent with it "
            "(lines 5\u20136: process 2 write 2 (line 6)) could have written 3 in time"
            ) in ex["explanation"]


def test_search_budget_gives_unknown():
    # Many concurrent crashed writes and reads: a budget of 1 stops the search.
    events = []
    for p in range(6):
        events.append(("invoke", p, "write", p % 3))
    for p in range(6):
        events.append(("info", p, "write", p % 3))
    for v in (0, 1, 2, 0, 1, 2):
        events += [("invoke", 10, "read", None), ("ok", 10, "read", v)]
    r = check_cas_register(H(*events), max_configurations=1)
    assert r.valid == "unknown" and r.anomaly_types == [] and r.notes
    assert check_cas_register(H(*events)).valid is True


@pytest.mark.parametrize("value, problem", [
    (5, r"must be \[key, value\], got 5"),
    ([1, 2, 3], r"must be \[key, value\], got \[1,2,3\]"),
])
def test_malformed_register_value_names_the_line(value, problem):
    with pytest.raises(HistoryError, match=problem) as e:
        check_register(H(("invoke", 0, "write", ["k", 1]), ("ok", 0, "write", ["k", 1]),
                         ("invoke", 1, "write", value), ("ok", 1, "write", value)))
    assert e.value.line in (3, 4) and e.value.source == "h.jsonl"


def test_malformed_cas_names_the_line():
    with pytest.raises(HistoryError, match=r"cas value must be \[old, new\]") as e:
        check_cas_register(H(("invoke", 0, "cas", 3), ("fail", 0, "cas", 3)))
    assert e.value.line == 1
    with pytest.raises(HistoryError, match="read, write or cas"):
        check_cas_register(H(("invoke", 0, "add", 3), ("ok", 0, "add", 3)))


def test_json_values_are_compared_as_json():
    # true is not 1, and lists/objects compare by value
    assert valid(("invoke", 0, "write", True), ("ok", 0, "write", True),
                 ("invoke", 1, "read", None), ("ok", 1, "read", 1)) is False
    assert valid(("invoke", 0, "write", {"a": [1, 2]}), ("ok", 0, "write", {"a": [1, 2]}),
                 ("invoke", 1, "cas", [{"a": [1, 2]}, [3]]), ("ok", 1, "cas", [{"a": [1, 2]}, [3]]),
                 ("invoke", 1, "read", None), ("ok", 1, "read", [3])) is True


# ---------------------------------------------------------------------------
# The simulated register


@pytest.mark.parametrize("seed", range(8))
def test_sim_linearizable_histories_are_valid(seed):
    events, stats = simulate(ops=400, processes=6, values=5, crash_rate=0.08, seed=seed)
    assert stats["info"] > 5 and stats["fail"] > 0
    r = check_cas_register(History(events, "sim"))
    assert r.valid is True, r.anomalies
    events, stats = simulate(ops=600, processes=10, keys=4, values=3, crash_rate=0.08, seed=seed)
    r = check_register(History(events, "sim"))
    assert r.valid is True and r.stats["keys"] == 4


@pytest.mark.parametrize("seed", range(8))
def test_sim_stale_reads_are_caught(seed):
    events, stats = simulate(ops=300, processes=5, values=5, crash_rate=0.05, seed=seed,
                             bug="stale-read")
    r = check_cas_register(History(events, "sim"))
    if stats["fired"]:
        assert r.valid is False
        ex = r.anomalies["nonlinearizable"][0]
        assert ex["op"]["f"] in ("read", "cas") and "no linearization" in ex["explanation"]
    events, stats = simulate(ops=600, processes=8, keys=3, values=5, crash_rate=0.05,
                             seed=seed, bug="stale-read")
    if stats["fired"]:
        assert check_register(History(events, "sim")).valid is False


def test_sim_stale_read_bug_fires_on_most_seeds():
    fired = sum(bool(simulate(ops=300, seed=s, bug="stale-read")[1]["fired"]) for s in range(10))
    assert fired >= 7


def test_reductions_do_not_change_verdicts():
    """The search with every reduction (and crashed-write pruning) against the
    same search with none (a model of only init and step), on mid-sized
    simulated histories, half of them from a stale-reading database."""
    plain = linearizable.Model("plain", register_models.init, register_models.step,
                               register_models.describe_state, register_models.describe_op)
    verdicts = {True: 0, False: 0}
    for seed in range(150):
        rnd = random.Random(seed)
        events, _ = simulate(ops=rnd.randint(20, 60), processes=rnd.choice([3, 5, 8]),
                             values=rnd.choice([2, 3, 5]), crash_rate=rnd.choice([0.05, 0.3]),
                             bug=rnd.choice([None, "stale-read"]), stale_rate=0.4, seed=seed)
        h = History(events, "sim")
        calls = []
        for op in h.ops():
            _, invoke_value, ok_value = register_models.parse_op(h, op, keyed=False)
            if op.type != "fail" and not (op.type == "info" and op.f == "read"):
                calls.append(linearizable.Call(op, op.f, invoke_value, ok_value, op.invoke_pos,
                                               op.complete_pos if op.type == "ok" else None))
        expected = linearizable.search(calls, plain, None).valid
        assert check_cas_register(h).valid is expected, seed
        verdicts[expected] += 1
    assert verdicts[True] > 30 and verdicts[False] > 30, verdicts


def test_compact_load_gives_the_same_verdict(tmp_path):
    # `sleuth check` loads ops only (an ok op keeps its completion value).
    for seed, bug in ((0, None), (1, "stale-read")):
        path = tmp_path / f"h{seed}.jsonl"
        stats = write_sim(str(path), ops=300, processes=5, keys=2, bug=bug, seed=seed)
        full, compact = read_jsonl(path), read_jsonl(path, events=False)
        r1, r2 = check_register(full), check_register(compact)
        assert r1.to_json() == r2.to_json()
        if bug is None:
            assert r1.valid is True
        elif stats["fired"]:
            assert r1.valid is False


def test_crashed_cas_old_value_counts_as_an_observation():
    """A crashed write of 1, then a crashed cas 1->2, then a read of 2: linearizable
    (write 1, cas 1->2, read 2). An earlier version dropped the crashed write as
    'never observed' because it did not count the cas's expected old value."""
    h = H(("invoke", 0, "write", 1), ("info", 0, "write", 1),
          ("invoke", 1, "cas", [1, 2]), ("info", 1, "cas", [1, 2]),
          ("invoke", 2, "read", None), ("ok", 2, "read", 2))
    assert check_cas_register(h).valid is True
    # and without the crashed write, nothing could have made 1 current: invalid
    h2 = H(("invoke", 1, "cas", [1, 2]), ("info", 1, "cas", [1, 2]),
           ("invoke", 2, "read", None), ("ok", 2, "read", 2))
    assert check_cas_register(h2).valid is False


# ---------------------------------------------------------------------------
# --failed-cas-observes: a failed cas as etcd means it (the comparison did not match)


def etcd_stale_compare() -> History:
    """write 1 completes; then a cas 1->2 fails (the database compared against
    a stale value: the register held 1 the whole time); then a read returns 1."""
    return H(("invoke", 0, "write", 1), ("ok", 0, "write", 1),
             ("invoke", 1, "cas", [1, 2]), ("fail", 1, "cas", [1, 2]),   # lines 3-4
             ("invoke", 2, "read", None), ("ok", 2, "read", 1))


def test_failed_cas_observes_catches_a_stale_comparison():
    h = etcd_stale_compare()
    assert check_cas_register(h).valid is True  # a failed cas constrains nothing by default
    r = check_cas_register(h, failed_cas_observes=True)
    assert r.valid is False
    (ex,) = r.anomalies["nonlinearizable"]
    assert ex["op"]["line"] == 3 and ex["op"]["type"] == "fail" and ex["state"] == 1
    assert "from 1 to 2 failed, so the register held a value other than 1" in ex["explanation"]
    # the keyed workload reads it the same way
    keyed = H(("invoke", 0, "write", ["k", 1]), ("ok", 0, "write", ["k", 1]),
              ("invoke", 1, "cas", ["k", [1, 2]]), ("fail", 1, "cas", ["k", [1, 2]]),
              ("invoke", 2, "read", ["k", None]), ("ok", 2, "read", ["k", 1]))
    assert check_register(keyed).valid is True
    assert check_register(keyed, failed_cas_observes=True).valid is False


def test_failed_cas_observes_allows_a_concurrent_other_value():
    # The cas overlaps a write of 3: at some instant the register held 3 != 1.
    h = H(("invoke", 0, "write", 1), ("ok", 0, "write", 1),
          ("invoke", 1, "cas", [1, 2]), ("invoke", 3, "write", 3), ("ok", 3, "write", 3),
          ("fail", 1, "cas", [1, 2]),
          ("invoke", 2, "read", None), ("ok", 2, "read", 3))
    assert check_cas_register(h, failed_cas_observes=True).valid is True
    # A crashed write of 3 that is never read is not pruned: the failed cas may have seen it.
    h = H(("invoke", 0, "write", 1), ("ok", 0, "write", 1),
          ("invoke", 3, "write", 3), ("info", 3, "write", 3),
          ("invoke", 1, "cas", [1, 2]), ("fail", 1, "cas", [1, 2]),
          ("invoke", 0, "write", 1), ("ok", 0, "write", 1),
          ("invoke", 2, "read", None), ("ok", 2, "read", 1))
    assert check_cas_register(h, failed_cas_observes=True).valid is True
    assert check_cas_register(h, failed_cas_observes=True).stats["crashed-dropped"] == 0


@pytest.mark.parametrize("keyed", [False, True], ids=["cas-register", "register"])
def test_failed_cas_observes_agrees_with_brute_force(keyed):
    """With the flag, against a brute force with the same semantics; and the
    flag changes nothing on histories without a failed cas."""
    rnd = random.Random(77 + keyed)
    check = check_register if keyed else check_cas_register
    verdicts = {True: 0, False: 0}
    differs = 0
    for n in range(1200):
        initial = rnd.choice([None, 0])
        events, ops = random_history(rnd, keyed, initial)
        brute = brute_force(ops, initial, failed_cas_observes=True)
        # nothing observed (no ok op, no failed cas): nothing to judge, so unknown
        observed = any(o["type"] == "ok" or (o["type"] == "fail" and o["f"] == "cas") for o in ops)
        expected = brute if observed else "unknown"
        h = History(events, f"random-{n}")
        r = check(h, initial_value=initial, failed_cas_observes=True)
        assert r.valid == expected, (n, initial, [e.to_dict() for e in events])
        verdicts[brute] += 1
        plain = brute_force(ops, initial)
        differs += plain is not brute
        if not any(o["type"] == "fail" and o["f"] == "cas" for o in ops):
            assert plain is brute
    assert verdicts[True] > 300 and verdicts[False] > 300, verdicts
    assert differs > 5  # the flag does decide some histories differently


def test_cli_failed_cas_observes(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "etcd.jsonl"
    with open(path, "w") as fh:
        for e in etcd_stale_compare().events:
            fh.write(orjson.dumps(e.to_dict()).decode() + "\n")
    cmd = [sys.executable, "-m", "sleuth.cli", "check", str(path), "-w", "cas-register"]
    assert subprocess.run(cmd, capture_output=True).returncode == 0
    out = subprocess.run(cmd + ["--failed-cas-observes", "--json"], capture_output=True)
    assert out.returncode == 1
    assert orjson.loads(out.stdout)["valid"] is False


def test_sim_stale_compare_caught_only_with_failed_cas_observes():
    """A database whose cas compares against a stale value: its effects are
    linearizable, so the default reading finds nothing; reading failed cas as
    etcd does catches it on most seeds. Correct databases (same sims without
    the bug, whose failed cas are genuine mismatches) stay valid with the flag."""
    caught = 0
    for seed in range(10):
        events, stats = simulate(ops=300, processes=5, values=5, crash_rate=0.05, fail_rate=0,
                                 seed=seed, bug="stale-compare", stale_rate=0.3)
        h = History(events, "sim")
        assert check_cas_register(h).valid is True
        caught += check_cas_register(h, failed_cas_observes=True).valid is False
        clean, _ = simulate(ops=300, processes=5, values=5, crash_rate=0.05, fail_rate=0,
                            seed=seed)
        assert check_cas_register(History(clean, "sim"), failed_cas_observes=True).valid is True
        keyed, _ = simulate(ops=600, processes=8, keys=3, values=5, crash_rate=0.05,
                            fail_rate=0, seed=seed)
        assert check_register(History(keyed, "sim"), failed_cas_observes=True).valid is True
    assert caught >= 4


def test_every_nonlinearizable_key_is_counted_though_ten_are_explained():
    events = []
    for k in range(13):  # each key: 1 written and acknowledged, then a read of the initial nil
        events += [("invoke", 0, "write", [k, 1]), ("ok", 0, "write", [k, 1]),
                   ("invoke", 1, "read", [k, None]), ("ok", 1, "read", [k, None])]
    events += [("invoke", 0, "write", [99, 1]), ("ok", 0, "write", [99, 1])]
    r = check_register(H(*events))
    assert r.valid is False and len(r.anomalies["nonlinearizable"]) == 10
    assert r.stats["anomaly-counts"] == {"nonlinearizable": 13} and r.stats["nonlinearizable-keys"] == 13
    from sleuth.checker.result import found_counts
    assert found_counts(r.to_json()) == {"nonlinearizable": "13 keys"}  # keys, not operations
    assert check_register(H(*events[-2:])).stats["anomaly-counts"] == {}


def test_one_linearized_op_is_said_in_the_singular():
    # issue 43: "after linearizing 1 ops"
    r = check_cas_register(H(
        ("invoke", 0, "write", 1),
        ("ok", 0, "write", 1),
        ("invoke", 0, "write", 2),
        ("ok", 0, "write", 2),
        ("invoke", 1, "read", None),
        ("ok", 1, "read", 1),
    ))
    assert "after linearizing 2 ops the register held 2" in r.anomalies["nonlinearizable"][0]["explanation"]
    r = check_cas_register(H(
        ("invoke", 0, "write", 1),
        ("ok", 0, "write", 1),
        ("invoke", 1, "read", None),
        ("ok", 1, "read", 3),  # never written
    ))
    assert "after linearizing 1 op the register held 1" in r.anomalies["nonlinearizable"][0]["explanation"]


def test_the_descent_changes_no_outcome(monkeypatch):
    """`_descend` walks `search`'s way down without its memo or stack. With it
    answering "a dead end here" at once, `search` does every step itself (as
    before `_descend` was written): verdict, configurations explored, deepest
    configuration and culprit must be the same, on valid, invalid and
    cut-short searches, with and without reduction 6."""
    cases = []
    for seed in range(40):
        rnd = random.Random(seed)
        keyed = seed % 3 == 0
        events, _ = simulate(ops=rnd.choice([40, 120, 300]), processes=rnd.choice([3, 5, 10]),
                             keys=3 if keyed else None, values=rnd.choice([2, 3, 5]),
                             crash_rate=rnd.choice([0.05, 0.3, 0.5]),
                             bug=rnd.choice([None, "stale-read", "stale-compare"]), stale_rate=0.3,
                             seed=seed)
        groups, _, _ = linearizable._key_ops(History(events, "sim"), keyed, seed % 2 == 0)
        initial = register_models.init(None)
        for _, calls, _ in groups:
            for kept in (calls, register_models.prune_crashed(calls, initial)[0]):
                for budget, producers in ((10, False), (2_000, False), (100_000, True)):
                    cases.append((kept, initial, budget, producers))

    def outcomes():
        return [linearizable.search(kept, linearizable.REGISTER, initial, budget,
                                    count_producers=producers)
                for kept, initial, budget, producers in cases]

    fast = outcomes()
    monkeypatch.setattr(linearizable, "_descend", lambda *args: ([], []))
    full = outcomes()
    verdicts = {True: 0, False: 0, "unknown": 0}
    for a, b in zip(fast, full):
        assert (a.valid, a.explored, a.deepest, a.culprit) == (b.valid, b.explored, b.deepest, b.culprit)
        assert [id(c) for c in a.calls] == [id(c) for c in b.calls]
        verdicts[a.valid] += 1
    assert min(verdicts.values()) > 10, verdicts
