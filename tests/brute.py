"""A brute-force oracle for transactional histories: is there a serial order?

Given txns (process, start, end, type, micro-ops), try every subset of the
info txns that append (info reads are unknown) and every order of the chosen
txns plus the ok ones that the model allows — any order for serializable,
process order for strong-session-serializable, real-time order for
strict-serializable — executing each txn on a list-append store and checking
that every ok read returns exactly the list at that point (own appends
included). Depth-first with pruning: a txn is placed only when its reads
check out. Fine up to ~8 txns.
"""

from __future__ import annotations

import itertools

INF = float("inf")


def serial_order_exists(txns, model: str, registers: bool = False) -> bool:
    """`registers`: the txns are rw-register's (micro-ops w and r; a read returns the one
    value the key holds, None before any write) instead of list-append's."""
    ok = [t for t in txns if t[3] == "ok"]
    write = "w" if registers else "append"
    maybe = [t for t in txns if t[3] == "info" and any(m[0] == write for m in t[4])]
    for n in range(len(maybe) + 1):
        for chosen in itertools.combinations(maybe, n):
            if _search(ok + list(chosen), model, _run_registers if registers else _run):
                return True
    return False


def _before(a, b, model) -> bool:
    """Must a come before b?"""
    a_end = INF if a[3] == "info" else a[2]
    if model == "strict-serializable":
        return a_end < b[1]
    if model == "strong-session-serializable":
        return a[0] == b[0] and a_end < b[1]
    return False


def _search(group, model, run) -> bool:
    n = len(group)
    preds = [[j for j in range(n) if j != i and _before(group[j], group[i], model)] for i in range(n)]

    def go(placed: frozenset, state: dict) -> bool:
        if len(placed) == n:
            return True
        for i in range(n):
            if i in placed or any(j not in placed for j in preds[i]):
                continue
            new = run(group[i], state)
            if new is not None and go(placed | {i}, new):
                return True
        return False

    return go(frozenset(), {})


def _run(txn, state):
    """The store after txn, or None if one of its (ok) reads cannot be."""
    state = dict(state)
    for f, k, v in txn[4]:
        if f == "append":
            state[k] = state.get(k, ()) + (v,)
        elif txn[3] == "ok" and tuple(v or ()) != state.get(k, ()):
            return None
    return state


def _run_registers(txn, state):
    """rw-register's `_run`: a write sets the key, a read must return what it holds."""
    state = dict(state)
    for f, k, v in txn[4]:
        if f == "w":
            state[k] = v
        elif txn[3] == "ok" and v != state.get(k):
            return None
    return state
