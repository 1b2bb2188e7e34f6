"""Linearizability: the search against a brute-force linearizer on hundreds
of random small histories (every subset of crashed ops x every order that
respects real time), and classic cases with known answers. Values repeat
(drawn from 0-2), as in Jepsen's etcd tests."""

import itertools
import random

import pytest

from sleuth.checker.linearizable import check_cas_register, check_register
from sleuth.history import Event, History

INF = float("inf")


def history(ops, keyed=False):
    """ops: (process, f, arg, result, call, ret, type); ret None = never completed."""
    evs = []
    for p, f, arg, result, call, ret, typ in ops:
        inv = {"read": None, "write": arg, "cas": arg}[f]
        done = {"read": result, "write": arg, "cas": arg}[f]
        if keyed:
            inv, done = ["k", inv], ["k", done]
        evs.append((call, 0, "invoke", p, f, inv))
        if ret is not None:
            evs.append((ret, 1, typ, p, f, done if typ == "ok" else inv))
    evs.sort(key=lambda e: (e[0], e[1]))
    return History([Event(i, t, typ, p, f, v) for i, (t, _, typ, p, f, v) in enumerate(evs)], "h")


def brute(ops, initial=None):
    """Is there a subset of info ops and an order of it and the ok ops that
    respects real time and is a legal register history?"""
    ok = [o for o in ops if o[6] == "ok"]
    info = [o for o in ops if o[6] == "info" and o[1] != "read"]
    for n in range(len(info) + 1):
        for chosen in itertools.combinations(info, n):
            group = ok + list(chosen)
            for order in itertools.permutations(group):
                if legal(order, initial):
                    return True
    return False


def legal(order, state):
    for i, (_, f, arg, result, call, ret, typ) in enumerate(order):
        # real time: nothing later in the order may have returned before this was invoked
        for later in order[i + 1:]:
            if later[6] == "ok" and later[5] < call:
                return False
        if f == "read":
            if state != result:
                return False
        elif f == "write":
            state = arg
        else:
            if state != arg[0]:
                return False
            state = arg[1]
    return True


def random_history(rnd, buggy):
    """A register run by 2-4 processes: ops take effect at a random instant
    inside their interval (so the truth is linearizable), unless `buggy`
    makes some reads return a random value."""
    n = rnd.randint(3, 7)
    procs = rnd.randint(2, 4)
    free = [0] * procs
    ops, timeline = [], []
    for _ in range(n):
        p = rnd.randrange(procs)
        call = free[p] + rnd.randint(0, 4)
        ret = call + rnd.randint(1, 8)
        free[p] = ret + 1
        f = rnd.choice(["read", "write", "cas"])
        arg = rnd.randint(0, 2) if f == "write" else (rnd.randint(0, 2), rnd.randint(0, 2))
        timeline.append((rnd.uniform(call, ret), p, f, arg, call, ret))
    state = None
    timeline.sort()
    for at, p, f, arg, call, ret in timeline:
        crash = rnd.random() < 0.2
        if f == "read":
            result = state if not (buggy and rnd.random() < 0.7) else rnd.randint(0, 2)
            typ = "info" if crash else "ok"
        elif f == "write":
            result, typ = None, "ok"
            if not crash or rnd.random() < 0.5:
                state = arg
            typ = "info" if crash else "ok"
        else:
            result = None
            if state == arg[0]:
                if not crash or rnd.random() < 0.5:
                    state = arg[1]
                typ = "info" if crash else "ok"
            else:
                typ = "fail"
        ops.append((p, f, arg if f != "read" else None, result, call, ret, typ))
    # a crashed op's process is never reused: give later ops of it a fresh id
    seen_crash, out = {}, []
    for p, f, arg, result, call, ret, typ in sorted(ops, key=lambda o: o[4]):
        q = seen_crash.get(p, p)
        out.append((q, f, arg, result, call, None if typ == "info" and rnd.random() < 0.5 else ret, typ))
        if typ == "info":
            seen_crash[p] = q + 100
    return out


@pytest.mark.parametrize("seed", range(400))
def test_matches_brute_force(seed):
    rnd = random.Random(seed)
    ops = random_history(rnd, buggy=seed % 2 == 1)
    want = brute([(p, f, arg, r, c, INF if t == "info" else ret, t) for p, f, arg, r, c, ret, t in ops])
    h = history([(p, f, arg, r, c, ret, t) for p, f, arg, r, c, ret, t in ops])
    got = check_cas_register(h).valid
    assert got is want, ops
    assert check_register(history(ops, keyed=True)).valid is want


def test_both_answers_occur_often():
    answers = []
    for seed in range(400):
        ops = random_history(random.Random(seed), buggy=seed % 2 == 1)
        answers.append(brute([(p, f, a, r, c, INF if t == "info" else ret, t)
                              for p, f, a, r, c, ret, t in ops]))
    assert 80 < sum(answers) < 320  # neither answer is rare


def test_stale_read_after_completed_write_is_named():
    h = history([
        (0, "write", 1, None, 0, 10, "ok"),
        (1, "read", None, None, 20, 30, "ok"),  # reads nil after the write completed
    ])
    r = check_cas_register(h)
    assert r.valid is False and r.anomaly_types == ["nonlinearizable"]
    ex = r.anomalies["nonlinearizable"][0]
    assert ex["op"]["line"] == 3 and ex["op"]["process"] == 1
    assert "read nil" in ex["explanation"] and "held 1" in ex["explanation"]


def test_concurrent_read_may_see_either():
    for seen in (None, 1):
        h = history([(0, "write", 1, None, 0, 10, "ok"), (1, "read", None, seen, 5, 15, "ok")])
        assert check_cas_register(h).valid is True


def test_crashed_write_observed_later_took_effect():
    h = history([(0, "write", 3, None, 0, None, "info"), (1, "read", None, 3, 50, 60, "ok")])
    assert check_cas_register(h).valid is True


def test_crashed_write_cannot_take_effect_before_its_invoke():
    h = history([(1, "read", None, 3, 0, 10, "ok"), (0, "write", 3, None, 20, None, "info")])
    assert check_cas_register(h).valid is False


def test_read_of_value_never_written():
    h = history([(0, "write", 1, None, 0, 10, "ok"), (1, "read", None, 2, 20, 30, "ok")])
    assert check_cas_register(h).valid is False


def test_cas_chain_and_initial_value():
    ops = [(0, "cas", (0, 1), None, 0, 10, "ok"), (1, "cas", (1, 2), None, 20, 30, "ok"),
           (0, "read", None, 2, 40, 50, "ok")]
    assert check_cas_register(history(ops), initial_value=0).valid is True
    assert check_cas_register(history(ops)).valid is False  # from nil the first cas cannot succeed


def test_keys_are_independent():
    evs = [Event(0, 0, "invoke", 0, "write", ["a", 1]), Event(1, 1, "ok", 0, "write", ["a", 1]),
           Event(2, 2, "invoke", 1, "read", ["b", None]), Event(3, 3, "ok", 1, "read", ["b", None]),
           Event(4, 4, "invoke", 1, "read", ["a", None]), Event(5, 5, "ok", 1, "read", ["a", None])]
    r = check_register(History(evs, "h"))
    assert r.valid is False and r.anomalies["nonlinearizable"][0]["key"] == "a"
    assert r.stats["keys"] == 2


def test_malformed_value_names_its_line():
    evs = [Event(0, 0, "invoke", 0, "cas", ["k", 5]), Event(1, 1, "ok", 0, "cas", ["k", 5])]
    with pytest.raises(Exception, match=r"h:1: a cas value must be \[old, new\]"):
        check_register(History(evs, "h"))
