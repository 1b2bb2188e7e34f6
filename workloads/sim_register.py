"""Simulated registers: synthetic histories for the linearizability checker.

An event-driven simulation of `processes` clients, each running one
operation at a time (read, write or cas) against an in-memory register, or
against several independent keys (the `register` workload; `keys=None` gives
the single `cas-register`). Values come from a small range (0..values-1), so
they repeat, as in Jepsen's etcd tests.

Every operation takes effect at one instant between its invoke and its
completion, so the truth is linearizable. A cas whose old value does not
match completes `fail`; a small share of operations fail outright (no
effect). A crashed operation (`info`) took effect at a random instant after
its invoke (possibly after the client gave up), or never, and its client
gets a fresh process id, as in Jepsen.

With `bug="stale-read"` some reads return a value the register held a few
writes ago instead. Whether that made the history non-linearizable depends
on what ran concurrently (a repeated value may excuse it), so the stats say
how many stale reads were served (`stale-reads`) and how many are provably
non-linearizable (`fired`): a read r of u such that some ok write of another
value completed before r was invoked, and no operation that writes u could
be placed between that write and r.

With `bug="stale-compare"` some cas compare their old value with a value the
register held a few writes ago, as a replica behind the leader would, and
fail when that stale value differs, though the current one matched
(`stale-compares` counts those). Reads stay correct, so the effects are
linearizable and a checker that drops failed cas finds nothing; one that reads
a failed cas as etcd does ("the comparison did not match",
`--failed-cas-observes`) can. Use `fail_rate=0` for such histories: an
outright failure of a cas would otherwise be a false observation.
"""

from __future__ import annotations

import bisect
import heapq
import random
from typing import Any

import orjson

from sleuth.history.jsonl import Event

BUGS = (None, "stale-read", "stale-compare")
MIX = (("read", 0.5), ("write", 0.25), ("cas", 0.25))
MAX_DURATION = 3000  # of an op, invoke to completion (time units)


class RegisterSim:
    def __init__(self, ops: int, processes: int, keys: int | None, values: int,
                 crash_rate: float, fail_rate: float, bug: str | None, stale_rate: float,
                 seed: int, initial_value: Any = None) -> None:
        if bug not in BUGS:
            raise ValueError(f"unknown bug {bug!r}; one of {BUGS}")
        self.n, self.processes, self.keys, self.values = ops, processes, keys, values
        self.crash_rate, self.fail_rate = crash_rate, fail_rate
        self.bug, self.stale_rate = bug, stale_rate
        self.rnd = random.Random(seed)
        self.initial = initial_value
        self.current: dict[Any, Any] = {}  # key -> value now
        self.past: dict[Any, list] = {}  # key -> values installed, oldest first
        self.heap: list[tuple] = []
        self.seq = 0
        self.events: list[Event] = []
        self.ops: list[dict] = []
        self.stats = {"ops": 0, "ok": 0, "fail": 0, "info": 0, "stale-reads": 0, "fired": 0,
                      "stale-compares": 0}

    def schedule(self, t: int, action: str, op: dict) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, action, op))

    def emit(self, t: int, typ: str, op: dict, value: Any) -> None:
        if self.keys is not None:
            value = [op["key"], value]
        self.events.append(Event(len(self.events), t, typ, op["process"], op["f"], value))

    def start(self, process: int, t: int) -> None:
        rnd = self.rnd
        r, f = rnd.random(), "cas"
        for name, share in MIX:
            if r < share:
                f = name
                break
            r -= share
        key = rnd.randrange(self.keys) if self.keys is not None else None
        if f == "read":
            arg = None
        elif f == "write":
            arg = rnd.randrange(self.values)
        else:
            arg = [rnd.randrange(self.values), rnd.randrange(self.values)]
        t0 = t + rnd.randint(0, 500)
        dur = rnd.randint(100, MAX_DURATION)
        op = {"process": process, "f": f, "key": key, "arg": arg, "t0": t0, "t1": t0 + dur,
              "fate": "ok", "result": None, "invoke": None, "complete": None}
        r = rnd.random()
        if r < self.crash_rate:
            op["fate"] = "info"
            if rnd.random() < 0.5:  # took effect at some instant after its invoke, maybe late
                self.schedule(t0 + rnd.randint(1, 2 * dur), "effect", op)
        elif r < self.crash_rate + self.fail_rate:
            op["fate"] = "fail"
        else:
            self.schedule(t0 + rnd.randint(1, dur - 1), "effect", op)
        self.schedule(t0, "invoke", op)
        self.ops.append(op)
        self.stats["ops"] += 1

    def effect(self, op: dict) -> None:
        k = op["key"]
        cur = self.current.get(k, self.initial)
        past = self.past.setdefault(k, [self.initial])
        f = op["f"]
        if f == "read":
            result = cur
            if self.bug == "stale-read" and op["fate"] == "ok" and self.rnd.random() < self.stale_rate:
                result = past[max(0, len(past) - 1 - self.rnd.randint(1, 3))]
                if result != cur:
                    self.stats["stale-reads"] += 1
                    op["stale"] = True
            op["result"] = result
        elif f == "write":
            self.current[k] = op["arg"]
            past.append(op["arg"])
        else:
            old, new = op["arg"]
            if self.bug == "stale-compare" and op["fate"] == "ok" and cur == old \
                    and self.rnd.random() < self.stale_rate:
                seen = past[max(0, len(past) - 1 - self.rnd.randint(1, 3))]
                if seen != old:  # compared with a stale value: fails, no effect
                    self.stats["stale-compares"] += 1
                    op["fate"] = "fail"
                    return
            if cur == old:
                self.current[k] = new
                past.append(new)
            elif op["fate"] == "ok":
                op["fate"] = "fail"

    def run(self) -> list[Event]:
        for p in range(self.processes):
            self.start(p, 0)
        started = self.processes
        while self.heap:
            t, _, action, op = heapq.heappop(self.heap)
            if action == "invoke":
                op["invoke"] = len(self.events)
                self.emit(t, "invoke", op, op["arg"])
                self.schedule(op["t1"], "complete", op)
            elif action == "effect":
                self.effect(op)
            else:
                fate = op["fate"]
                op["complete"] = len(self.events)
                value = op["result"] if op["f"] == "read" and fate == "ok" else op["arg"]
                self.emit(t, fate, op, value)
                self.stats[fate] += 1
                p = op["process"]
                if fate == "info":  # a crashed client's process is never reused
                    p += self.processes
                if started < self.n:
                    self.start(p, t)
                    started += 1
        self.stats["fired"] = self.count_fired()
        return self.events

    def count_fired(self) -> int:
        """How many stale reads are provably not linearizable. A read r of u is,
        if an ok op w installed x != u and completed before r was invoked (so
        w precedes r in any linearization), and no op that may install u (not
        failed) can come between w and r: none invoked before r completed
        that had not completed before w was invoked. A sufficient condition
        only: with values repeating, stale reads it misses may be caught too."""
        by_key: dict[Any, list[dict]] = {}
        for op in self.ops:
            if op["invoke"] is not None:
                by_key.setdefault(op["key"], []).append(op)
        fired = 0
        for ops in by_key.values():
            ops.sort(key=lambda op: op["invoke"])
            # crashed ops that install v may take effect any time after invoke
            crashed_from: dict[Any, int] = {}
            for op in ops:
                if op["fate"] == "info" and op["f"] != "read":
                    v = _installs(op)
                    crashed_from[v] = min(crashed_from.get(v, op["invoke"]), op["invoke"])
            starts = [op["t0"] for op in ops]
            for at, r in enumerate(ops):
                if r.get("stale") and self.provably_stale(ops, starts, at, crashed_from):
                    fired += 1
        return fired

    def provably_stale(self, ops: list[dict], starts: list[int], at: int,
                       crashed_from: dict) -> bool:
        r = ops[at]
        u = r["result"]
        if crashed_from.get(u, r["complete"]) < r["complete"]:
            return False
        w = None  # the latest invoked ok op installing x != u, complete before r's invoke
        for op in reversed(ops[:at]):
            if (op["fate"] == "ok" and op["f"] != "read" and op["complete"] < r["invoke"]
                    and _installs(op) != u):
                w = op
                break
        if w is None:
            return False
        # An ok producer of u that completed after w's invoke started at most
        # MAX_DURATION before w did: scan from there to r's completion.
        for op in ops[bisect.bisect_left(starts, w["t0"] - MAX_DURATION - 1):]:
            if op["invoke"] > r["complete"]:
                break
            if (op["fate"] == "ok" and op["f"] != "read" and _installs(op) == u
                    and op["complete"] > w["invoke"]):
                return False
        return True


def _installs(op: dict) -> Any:
    return op["arg"] if op["f"] == "write" else op["arg"][1]


def simulate(ops: int = 200, processes: int = 5, keys: int | None = None, values: int = 5,
             crash_rate: float = 0.05, fail_rate: float = 0.01, bug: str | None = None,
             stale_rate: float = 0.2, seed: int = 0,
             initial_value: Any = None) -> tuple[list[Event], dict]:
    """Events of a simulated register history, and counts (ops, ok, fail,
    info, stale-reads, fired). `keys=None`: one cas-register (bare values);
    else the `register` workload over `keys` keys (values `[key, v]`)."""
    sim = RegisterSim(ops, processes, keys, values, crash_rate, fail_rate, bug, stale_rate,
                      seed, initial_value)
    events = sim.run()
    return events, sim.stats


def write_sim(path: str, **kwargs: Any) -> dict:
    """Write a simulated register history (JSON Lines) to `path`; returns the counts."""
    events, stats = simulate(**kwargs)
    with open(path, "wb") as fh:
        for e in events:
            fh.write(orjson.dumps(e.to_dict()) + b"\n")
    return stats


def write_history(path: str, stale_reads: bool = False, **kwargs: Any) -> bool:
    """`write_sim` with the stale-read bug as a flag (as demos/demo.py calls
    it); True if the bug provably fired."""
    return write_sim(path, bug="stale-read" if stale_reads else None, **kwargs)["fired"] > 0
