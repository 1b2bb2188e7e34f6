"""Simulated registers for linearizability tests and benchmarks.

`processes` clients run read / write / cas against one register (or several
independent keys), values drawn from a small range so they repeat, as in
Jepsen's etcd tests. Each op takes effect at one instant inside its
interval, so the truth is linearizable; a crashed op (`info`) takes effect
at some instant after its invoke, or never, and its client's process is
replaced. With `stale_reads`, some reads return an old value instead: the
history is then (almost always) not linearizable, and `fired` says whether
the bug changed any read.
"""

from __future__ import annotations

import random

import orjson

from sleuth.history import Event


def simulate(ops: int = 100, processes: int = 5, crash_rate: float = 0.1, values: int = 5,
             keys: int | None = None, stale_reads: bool = False,
             seed: int = 0) -> tuple[list[Event], bool]:
    """Events of a register history, and whether the stale-read bug fired."""
    rnd = random.Random(seed)
    free = [0] * processes  # when each client is free again
    ids = list(range(processes))  # each client's current process id
    planned = []
    for _ in range(ops):
        c = rnd.randrange(processes)
        call = free[c] + rnd.randint(0, 50)
        ret = call + rnd.randint(5, 100)
        free[c] = ret + 1
        f = rnd.choice(("read", "write", "cas"))
        arg = rnd.randrange(values) if f == "write" else (rnd.randrange(values), rnd.randrange(values))
        crashed = rnd.random() < crash_rate
        at = rnd.uniform(call, ret) if not crashed else rnd.uniform(call, call + 500)
        planned.append([at, c, f, arg, call, ret, crashed, rnd.random() < 0.5,
                        None if keys is None else rnd.randrange(keys)])
    state: dict = {}
    history: dict = {}  # key -> [(instant, value)]
    fired = False
    results = {}
    for i, (at, c, f, arg, call, ret, crashed, effect, key) in sorted(
            enumerate(planned), key=lambda x: x[1][0]):
        cur = state.get(key)
        if crashed and not effect:
            results[i] = ("info", None)
            continue
        if f == "read":
            v = cur
            past = history.get(key, [])
            if stale_reads and past and rnd.random() < 0.3:
                v = rnd.choice(past)[1]
                fired = fired or v != cur
            results[i] = ("info" if crashed else "ok", v)
        elif f == "write":
            state[key] = arg
            history.setdefault(key, []).append((at, arg))
            results[i] = ("info" if crashed else "ok", None)
        elif cur == arg[0]:
            state[key] = arg[1]
            history.setdefault(key, []).append((at, arg[1]))
            results[i] = ("info" if crashed else "ok", None)
        else:
            results[i] = ("info" if crashed else "fail", None)
    rows = []
    for i, (at, c, f, arg, call, ret, crashed, effect, key) in enumerate(planned):
        p = ids[c]
        typ, v = results[i]
        inv = {"read": None, "write": arg, "cas": list(arg) if f == "cas" else None}[f]
        done = v if f == "read" else inv
        if keys is not None:
            inv, done = [key, inv], [key, done]
        rows.append((call, 0, "invoke", p, f, inv))
        if typ == "info":
            ids[c] += processes  # a crashed client comes back as a new process
            if rnd.random() < 0.5:
                rows.append((ret, 1, "info", p, f, inv))
        else:
            rows.append((ret, 1, typ, p, f, done if typ == "ok" else inv))
    rows.sort(key=lambda r: (r[0], r[1]))
    return [Event(j, t, typ, p, f, v) for j, (t, _, typ, p, f, v) in enumerate(rows)], fired


def write_history(path: str, **kw) -> bool:
    events, fired = simulate(**kw)
    with open(path, "wb") as fh:
        for e in events:
            fh.write(orjson.dumps(e.to_dict()) + b"\n")
    return fired
