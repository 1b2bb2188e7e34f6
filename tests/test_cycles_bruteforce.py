"""The list-append checker against brute force (tests/brute.py) on hundreds
of random small histories with a final read that pins every version order:
the verdicts must be equal for serializable, strong-session-serializable and
strict-serializable. Without the final read, only soundness: the checker
never calls a history invalid that brute force finds valid.

Histories come from a store executing txns in a random commit order, with
some reads served stale (an older prefix, plus the txn's own appends) and
some txns failing or crashing, so that both answers are common.
"""

import os
import random

import pytest
from brute import serial_order_exists

from sleuth.checker import list_append
from sleuth.history.jsonl import Event, History

N = int(os.environ.get("SLEUTH_BRUTE_N", "400"))
MODELS = ("serializable", "strong-session-serializable", "strict-serializable")


def transactions(rnd, keys, n, write="append"):
    """`n` (at least, at most) transactions on three processes, at random intervals, of one
    to three micro-ops on `keys`, half of them writes (`write`, of values unique per key):
    [process, start, end, type, micro-ops] lists, reads holding None. One in ten fails and
    one in ten crashes (info: its process is not used again)."""
    counters = dict.fromkeys(keys, 0)
    txns = []
    free, ids = [0, 0, 0], [0, 1, 2]
    for _ in range(rnd.randint(*n)):
        c = rnd.randrange(3)
        start = free[c] + rnd.randint(0, 5)
        end = start + rnd.randint(1, 10)
        free[c] = end + 1
        mops = []
        for _ in range(rnd.randint(1, 3)):
            k = rnd.choice(keys)
            if rnd.random() < 0.5:
                counters[k] += 1
                mops.append([write, k, counters[k]])
            else:
                mops.append(["r", k, None])
        typ = rnd.choices(["ok", "info", "fail"], [8, 1, 1])[0]
        txns.append([ids[c], start, end, typ, mops])
        if typ == "info":
            ids[c] += 3
    return txns


def generate(rnd, final_read=True, txns=(2, 5), stale=0.3, keys=None):
    """`txns`: how many, at least and at most; `stale`: how often a read is served stale;
    `keys`: how many keys (default: one to three, at random)."""
    keys = ["x", "y", "z"][: rnd.randint(1, 3) if keys is None else keys]
    store: dict = {k: [] for k in keys}
    txns = transactions(rnd, keys, txns)
    # execute in a random commit order; some reads stale
    for t in rnd.sample(txns, len(txns)):
        if t[3] == "fail" or (t[3] == "info" and rnd.random() < 0.5):
            continue
        own: dict = {}
        out = []
        for f, k, v in t[4]:
            if f == "append":
                own.setdefault(k, []).append(v)
                out.append([f, k, v])
            else:
                seen = store[k]
                if rnd.random() < stale:
                    seen = seen[: rnd.randint(0, len(seen))]
                out.append([f, k, list(seen) + own.get(k, [])])
        for k, vs in own.items():
            store[k].extend(vs)
        t[4] = out
    if final_read:
        t = max(t[2] for t in txns) + 1
        txns.append([9, t, t + 1, "ok", [["r", k, list(store[k])] for k in keys]])
    return [tuple(t) for t in txns]


def to_history(txns):
    evs = []
    for p, start, end, typ, mops in txns:
        invoke = [[f, k, None if f == "r" else v] for f, k, v in mops]
        evs.append((start, 0, "invoke", p, invoke))
        if typ != "info":
            evs.append((end, 1, typ, p, mops if typ == "ok" else invoke))
    evs.sort(key=lambda e: (e[0], e[1]))
    return History([Event(i, t, typ, p, "txn", v) for i, (t, _, typ, p, v) in enumerate(evs)], "h")


def brute_txns(txns):
    """Reads of non-ok txns are unknown to the oracle, as to the checker."""
    return [(p, s, e, typ, mops if typ == "ok" else [[f, k, None if f == "r" else v] for f, k, v in mops])
            for p, s, e, typ, mops in txns]


@pytest.mark.parametrize("seed", range(N))
def test_pinned_histories_match_brute_force_exactly(seed):
    txns = generate(random.Random(seed))
    h = to_history(txns)
    for model in MODELS:
        want = serial_order_exists(brute_txns(txns), model)
        got = list_append.check(h, model).valid
        assert got is want, (model, txns)


@pytest.mark.parametrize("seed", range(N // 2))
def test_unpinned_histories_never_false_positive(seed):
    txns = generate(random.Random(10_000 + seed), final_read=False)
    h = to_history(txns)
    for model in MODELS:
        if serial_order_exists(brute_txns(txns), model):
            # no transaction completed ok: nothing to judge, unknown (never valid)
            judged = any(e.type == "ok" for e in h.events)
            assert list_append.check(h, model).valid == (True if judged else "unknown"), (model, txns)


def test_both_answers_are_common():
    answers = [serial_order_exists(brute_txns(generate(random.Random(s))), "strict-serializable")
               for s in range(200)]
    assert 40 < sum(answers) < 160
