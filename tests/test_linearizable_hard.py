"""Hard register histories (checker/scarcity.py, reduction 6 of the search).

1. Counting crashed producers, on hand-made histories with known answers: a
   value needed anew more often than crashed ops can supply it.
2. Against the brute-force linearizer of tests/test_linearizable.py, on many
   small random histories with many crashed ops and stale reads (reads that
   return an older value, as a stale replica does): verdicts must agree
   exactly, and the count must have decided some of them on its own.
3. The benchmark's hard 1,000-op cas-register histories (10 processes, stale
   reads) that the search used to give up on: decided, and invalid (the
   first was confirmed by an exhaustive search of 12 million configurations,
   before this reduction, in 290 s).
"""

from __future__ import annotations

import random

import pytest
from test_linearizable import H, brute_force

from sleuth.checker import linearizable, register_models
from sleuth.checker.linearizable import check_cas_register, check_register
from sleuth.history.jsonl import Event, History
from sleuth.workloads.sim_register import simulate

# ---------------------------------------------------------------------------
# Hand-made


def two_stale_reads(crashed_writes_of_1: int) -> History:
    """Process 0 writes 1, 2, reads 1, writes 2, reads 1, one after the other;
    `crashed_writes_of_1` crashed writes of 1 were invoked before it all. Each
    read of 1 after a write of 2 needs one crashed write of 1 in between."""
    events = []
    for p in range(crashed_writes_of_1):
        events += [("invoke", 10 + p, "write", 1), ("info", 10 + p, "write", 1)]
    for f, v in (("write", 1), ("write", 2), ("read", 1), ("write", 2), ("read", 1)):
        events += [("invoke", 0, f, None if f == "read" else v), ("ok", 0, f, v)]
    return H(*events)


def test_count_of_crashed_producers_decides():
    assert check_cas_register(two_stale_reads(2)).valid is True
    r = check_cas_register(two_stale_reads(1))
    assert r.valid is False
    ex = r.anomalies["nonlinearizable"][0]
    assert ex["op"]["f"] == "read" and ex["op"]["value"] == 1
    assert check_cas_register(two_stale_reads(0)).valid is False


def test_shortage_is_found_before_searching():
    h = two_stale_reads(1)
    calls = [linearizable.Call(op, op.f, *register_models.parse_op(h, op, False)[1:],
                               op.invoke_pos, op.complete_pos if op.type == "ok" else None)
             for op in h.ops()]
    out = linearizable.search(calls, linearizable.REGISTER, None)
    assert out.valid is False and out.shortage is not None
    assert out.shortage.value == 1 and len(out.shortage.demands) == 2
    assert len(out.shortage.tokens) == 1


def test_shortage_explanation_when_the_search_cannot_name_an_op(monkeypatch):
    monkeypatch.setattr(linearizable, "QUICK_CONFIGURATIONS", 0)
    monkeypatch.setattr(linearizable, "EXPLAIN_BUDGET", 0)
    r = check_cas_register(two_stale_reads(1))
    assert r.valid is False
    ex = r.anomalies["nonlinearizable"][0]
    assert ex["linearized"] is None and ex["op"]["line"] == 11  # the second stale read
    assert [w["line"] for w in ex["window"]] == [1]  # the one crashed write of 1
    assert "2 times the state had to become 1 again" in ex["explanation"]
    assert "only 1 that make 1 were invoked in time" in ex["explanation"]


# ---------------------------------------------------------------------------
# Random small histories with stale reads, against brute force


def stale_history(rnd: random.Random, keyed: bool) -> tuple[list[Event], list[dict]]:
    """Up to 4 processes, up to 8 ops, values 0-2, many crashed ops (taking
    effect at once, late, or never); reads sometimes return the value the
    register held one or two writes ago."""
    keys = [0, 1] if keyed else [None]
    reg = {k: None for k in keys}
    past = {k: [None] for k in keys}
    events: list[Event] = []
    ops: list[dict] = []
    busy: dict[int, dict] = {}
    idle = list(range(rnd.randint(2, 4)))
    next_pid = 100
    late: list[dict] = []
    nops = rnd.randint(4, 8)
    started = 0

    def emit(typ, o, value):
        value = [o["key"], value] if keyed else value
        events.append(Event(len(events), len(events), typ, o["process"], o["f"], value))

    def apply(o):
        k, f = o["key"], o["f"]
        if f == "read":
            o["result"] = reg[k]
            if rnd.random() < 0.5:
                o["result"] = past[k][max(0, len(past[k]) - 1 - rnd.randint(1, 2))]
        elif f == "write":
            reg[k] = o["arg"]
            past[k].append(o["arg"])
        elif reg[k] == o["arg"][0]:
            reg[k] = o["arg"][1]
            past[k].append(o["arg"][1])
        elif o["type"] == "ok":
            o["type"] = "fail"
        o["applied"] = True

    while started < nops or busy:
        moves = (["invoke"] if started < nops and idle else []) + (["step"] * 2 if busy else []) \
            + (["late"] if late else [])
        move = rnd.choice(moves)
        if move == "invoke":
            p = idle.pop(rnd.randrange(len(idle)))
            f = rnd.choice(["read", "read", "write", "cas"])
            arg = None if f == "read" else rnd.randrange(3) if f == "write" else \
                [rnd.randrange(3), rnd.randrange(3)]
            o = {"key": rnd.choice(keys), "f": f, "arg": arg, "result": None, "process": p,
                 "type": "info" if f != "read" and rnd.random() < 0.4 else "ok",
                 "inv": len(events), "cmp": None, "applied": False}
            emit("invoke", o, arg)
            ops.append(o)
            busy[p] = o
            started += 1
        elif move == "late":
            apply(late.pop(rnd.randrange(len(late))))
        else:
            p = rnd.choice(list(busy))
            o = busy[p]
            if not o["applied"] and o["type"] == "ok":
                apply(o)
                continue
            del busy[p]
            if o["type"] == "info":
                r = rnd.random()
                if r < 0.3:
                    apply(o)
                elif r < 0.6:
                    late.append(o)
                emit("info", o, o["arg"])
                idle.append(next_pid)
                next_pid += 1
                continue
            o["cmp"] = len(events)
            emit(o["type"], o, o["result"] if o["f"] == "read" and o["type"] == "ok" else o["arg"])
            idle.append(p)
    return events, ops


@pytest.mark.parametrize("keyed", [False, True], ids=["cas-register", "register"])
def test_stale_reads_and_crashes_agree_with_brute_force(keyed):
    rnd = random.Random(4242 + keyed)
    check = check_register if keyed else check_cas_register
    verdicts = {True: 0, False: 0}
    for n in range(1500):
        events, ops = stale_history(rnd, keyed)
        brute = brute_force(ops, None)
        # no ok op: nothing was observed, so nothing to judge (unknown, never valid)
        expected = brute if any(o["type"] == "ok" for o in ops) else "unknown"
        r = check(History(events, f"stale-{n}"))
        assert r.valid == expected, (n, [e.to_dict() for e in events])
        verdicts[brute] += 1
    assert verdicts[True] > 200 and verdicts[False] > 200, verdicts


def test_the_count_decides_some_random_histories_alone():
    """The reduction is exercised by the random histories above: on some of
    them the search never starts (the count proves them invalid)."""
    rnd = random.Random(4242)
    proven = 0
    for n in range(400):
        events, ops = stale_history(rnd, False)
        h = History(events, "s")
        calls = []
        for op in h.ops():
            _, iv, ov = register_models.parse_op(h, op, False)
            if op.type != "fail" and not (op.type == "info" and op.f == "read"):
                calls.append(linearizable.Call(op, op.f, iv, ov, op.invoke_pos,
                                               op.complete_pos if op.type == "ok" else None))
        out = linearizable.search(calls, linearizable.REGISTER, None)
        if out.shortage is not None:
            proven += 1
            assert out.valid is False and brute_force(ops, None) is False
    assert proven > 20, proven


# ---------------------------------------------------------------------------
# The benchmark's hard histories


@pytest.mark.parametrize("seed", [0, 7, 8])
def test_hard_benchmark_histories_are_decided(seed):
    events, stats = simulate(ops=1000, processes=10, values=5, crash_rate=0.05, seed=seed,
                             bug="stale-read", stale_rate=0.05)
    r = check_cas_register(History(events, "bench"))
    assert r.valid is False
    assert r.stats["configurations-explored"] < 100_000  # was > 5,000,000 (unknown)
