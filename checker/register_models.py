"""Register models for the linearizability search, as Porcupine has them: a
model is a few pure functions (Porcupine's `Model`: init, step, describe).

A read/write/compare-and-set register (Herlihy & Wing 1990's running example):

- `init(initial_value)`: the state before any operation (the value, frozen).
- `step(state, f, invoke_value, ok_value) -> (ok, new_state)`: apply one
  operation to the state. `read` returns `ok_value` (the value it read) and
  needs the state to equal it; `write` installs its value; `cas [old, new]`
  needs the state to equal `old` and installs `new`. A crashed (`info`)
  operation's `ok_value` is `UNKNOWN`: its invoke value alone decides it.
- `read_only(f, invoke_value, ok_value)`: the step never changes the state
  (a read; a cas from v to v). The search places such an op as soon as it
  is a candidate and legal, without trying alternatives.
- `blind(f, invoke_value, ok_value)`: the step is legal in every state and
  its new state ignores the old one (a write). The search never places a
  crashed op directly before one: the crashed op would be invisible.
- `effect(f, invoke_value, ok_value)`: ops with equal effects have the same
  step in every state; the search tries one op of each effect at a time.
- `needs(...)` / `installs(...)`: the one state in which the op is legal,
  and the state it leaves (UNKNOWN: no such thing). The search uses them to
  see early that an op can no longer be placed.
- `describe_state(state)` and `describe_op(f, invoke_value, ok_value)`: words
  for explanations.

A failed cas, by default, constrains nothing (docs/history-format.md: it did not take
effect, and says nothing of what the register held), as Knossos's cas-register
reads Jepsen histories. Some systems promise more: etcd's transaction
`If(value == old).Then(put)` fails exactly when the comparison did not match,
and Porcupine's etcd model reads a failed cas that way (legal iff the state is
not `old`). With `failed_cas_observes`, the checker turns each `fail` cas into
an op of its own, `FAILED_CAS` ("failed-cas", invoke value [old, new]): it must
take effect between its invoke and its completion like any completed op, is
legal in every state but `old`, and changes nothing. It is read-only (a read
of "anything but old"), so every reduction for reads applies to it.

Values are JSON. The search memoizes on states, so values are *frozen* into
hashable equivalents first (lists -> tuples, objects -> `FrozenObject`, and
booleans wrapped so that `true` never equals `1` as it would in Python);
`thaw` turns them back into JSON for reports.

This module also knows the shapes of register operations in a history
(docs/history-format.md: `register` values are `[key, v]`, `cas-register` values bare) and
which crashed operations a register history can do without (`prune_crashed`).
"""

from __future__ import annotations

from typing import Any

import orjson

from sleuth.base.words import plural

UNKNOWN = type("Unknown", (), {"__repr__": lambda self: "UNKNOWN"})()
"""The `ok_value` of an operation whose outcome is unknown (`info`)."""

FAILED_CAS = "failed-cas"
"""The search's name for a `fail` cas read as an observation (`failed_cas_observes`)."""


# ---------------------------------------------------------------------------
# Hashable JSON values


class FrozenBool:
    """`true` / `false`, distinct from 1 / 0 (Python says True == 1)."""

    __slots__ = ("b",)

    def __init__(self, b: bool):
        self.b = b

    def __eq__(self, other: object) -> bool:
        return type(other) is FrozenBool and other.b is self.b

    def __hash__(self) -> int:
        return hash(("bool", self.b))

    def __repr__(self) -> str:
        return "true" if self.b else "false"


class FrozenObject(tuple):
    """A JSON object, frozen: its sorted (key, value) pairs. A tuple subclass
    that never equals a plain tuple (a frozen list)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is FrozenObject and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(("object", tuple(self)))


TRUE, FALSE = FrozenBool(True), FrozenBool(False)


def freeze(v: Any) -> Any:
    """A hashable value equal to another frozen value iff the JSON values are equal."""
    t = type(v)
    if t is int or t is str or v is None:  # the common case, first
        return v
    if t is list or t is tuple:
        return tuple(freeze(x) for x in v)
    if t is bool:
        return TRUE if v else FALSE
    if t is dict:
        return FrozenObject(sorted((k, freeze(x)) for k, x in v.items()))
    return v


def thaw(v: Any) -> Any:
    """The JSON value of a frozen one."""
    t = type(v)
    if t is FrozenObject:
        return {k: thaw(x) for k, x in v}
    if t is tuple:
        return [thaw(x) for x in v]
    if t is FrozenBool:
        return v.b
    return v


def show(v: Any) -> str:
    """A frozen value in JSON, for sentences (null = never written)."""
    return orjson.dumps(thaw(v), default=repr).decode()


# ---------------------------------------------------------------------------
# The model: a few pure functions


def init(initial_value: Any) -> Any:
    return freeze(initial_value)


def step(state: Any, f: str, invoke_value: Any, ok_value: Any) -> tuple[bool, Any]:
    if f == "read":
        return ok_value == state, state
    if f == "write":
        return True, invoke_value
    old, new = invoke_value
    if f == FAILED_CAS:  # the comparison did not match: the register held something else
        return state != old, state
    if state == old:
        return True, new
    return False, state


def read_only(f: str, invoke_value: Any, ok_value: Any) -> bool:
    return f == "read" or f == FAILED_CAS or (f == "cas" and invoke_value[0] == invoke_value[1])


def blind(f: str, invoke_value: Any, ok_value: Any) -> bool:
    return f == "write"


def effect(f: str, invoke_value: Any, ok_value: Any) -> Any:
    """A write or cas is decided by its invoke value alone, crashed or not."""
    if f == "read":
        return f, ok_value
    return f, invoke_value


def needs(f: str, invoke_value: Any, ok_value: Any) -> Any:
    """The value the register must hold for the op to be legal (UNKNOWN: any,
    or, for a failed cas, any but one)."""
    if f == "read":
        return ok_value
    if f == "cas":
        return invoke_value[0]
    return UNKNOWN


def installs(f: str, invoke_value: Any, ok_value: Any) -> Any:
    """The value the register holds after the op (UNKNOWN for a read: unchanged)."""
    if f == "write":
        return invoke_value
    if f == "cas":
        return invoke_value[1]
    return UNKNOWN  # a read or a failed cas: unchanged


def describe_state(state: Any) -> str:
    return show(state)


def describe_op(f: str, invoke_value: Any, ok_value: Any) -> str:
    if f == "read":
        return "read" if ok_value is UNKNOWN else f"read {show(ok_value)}"
    if f == "write":
        return f"write {show(invoke_value)}"
    old, new = invoke_value
    if f == FAILED_CAS:
        return f"failed cas {show(old)}->{show(new)}"
    return f"cas {show(old)}->{show(new)}"


# ---------------------------------------------------------------------------
# Operations as a history records them (docs/history-format.md)

FS = ("read", "write", "cas")


def parse_op(history, op, keyed: bool) -> tuple[Any, Any, Any]:
    """(key, invoke_value, ok_value) of a register op, frozen and without the
    key; ok_value is UNKNOWN unless the op is ok. Raises `HistoryError` on a
    malformed value, naming the line."""
    if op.f not in FS:
        raise history.error(op.invoke_pos, f"a register operation must be read, write or cas, "
                                           f"not {op.f!r}")
    # An ok op's completion value is authoritative (a compact load keeps only
    # it); a write or cas completed with no value (some adapters) keeps its
    # invoke's. A read's completion always carries what it read.
    f, ok = op.f, op.type == "ok"
    value = op.value
    completed = ok and (value is not None or f == "read")
    done = value if completed else op.invoke_value
    key = None
    if keyed:
        if not (isinstance(done, (list, tuple)) and len(done) == 2):
            where = op.complete_pos if completed else op.invoke_pos
            raise history.error(where, f"a register {op.f} value must be [key, value], "
                                       f"got {_json(done)}")
        key, payload = freeze(done[0]), done[1]
        inv = op.invoke_value
        if inv is not done and isinstance(inv, (list, tuple)) and len(inv) == 2 \
                and not (type(inv[0]) is type(done[0]) and type(inv[0]) in (int, str)
                         and inv[0] == done[0]) \
                and freeze(inv[0]) != key:
            where = op.complete_pos if completed else op.invoke_pos
            raise history.error(where, f"{op.f} completes with key {_json(done[0])} but was "
                                       f"invoked on key {_json(inv[0])}")
    else:
        payload = done
    if f == "read":
        return key, None, (freeze(payload) if ok else UNKNOWN)
    if f == "cas" and not (isinstance(payload, (list, tuple)) and len(payload) == 2):
        where = op.complete_pos if completed else op.invoke_pos
        raise history.error(where, f"a cas value must be [old, new], got {_json(payload)}")
    frozen = freeze(payload)
    return key, frozen, (frozen if ok else UNKNOWN)


def _json(v: Any) -> str:
    return orjson.dumps(v, default=repr).decode()


def prune_crashed(calls: list, initial_state: Any) -> tuple[list, int]:
    """Drop crashed writes and cas whose written value nobody observes.

    `calls` are the search's `Call`s of one register (no fail ops, no crashed
    reads). Returns (the calls kept, how many were dropped).

    Why this is safe. A crashed op x may take effect at any point after its
    invoke, or never; the history is linearizable iff some choice of crashed
    ops and some order works. Say x installs v, and no ok read returns v, no
    ok cas has old = v, and no crashed cas kept has old = v. In any valid
    linearization that includes x, look at the operation right after x: the
    register holds v there, so it cannot be a read (none returns v) nor a
    successful cas (none expects v); it is a blind write, or nothing. Either
    way, removing x changes no state anyone observes: the write overwrites
    whatever was there. Removing a crashed op never breaks real-time order.
    So a linearization without x exists too, and x can go. This holds however
    many other ops write v: we ask whether *any* op observes v, never which
    write it saw, so repeated values are fine. It iterates: dropping a
    crashed cas [v, w] may leave v unobserved. The initial value needs no
    special case (the argument never uses it), but crashed writes of it are
    kept anyway, belt and braces.

    A failed cas read as an observation (`FAILED_CAS`, old u) is legal in
    every state but u, so it may be the op right after x whenever v != u, and
    then removing x would show it the state before x, perhaps u. So x is kept
    unless every such failed cas has old = v (then none can follow x).
    """
    failed_olds = {c.invoke_value[0] for c in calls if c.f == FAILED_CAS}
    crashed = [c for c in calls if c.ret is None]
    if not crashed:
        return calls, 0
    # what the ok ops need (`needs`, inline: a read its value, a cas its old one; a write or a
    # failed cas no one value)
    observed: set = {c.ok_value if c.f == "read" else c.invoke_value[0] for c in calls
                     if c.ret is not None and (c.f == "read" or c.f == "cas")}
    observed.add(initial_state)
    observed.discard(UNKNOWN)
    gone: set[int] = set()  # ids of the crashed ops dropped
    while True:
        seen = set(observed)
        for c in crashed:  # and the crashed cas kept so far
            if c.f == "cas" and id(c) not in gone:
                seen.add(c.invoke_value[0])
        drop = {id(c) for c in crashed if id(c) not in gone
                and installs(c.f, c.invoke_value, c.ok_value) not in seen
                and not failed_olds - {installs(c.f, c.invoke_value, c.ok_value)}}
        if not drop:
            break
        gone |= drop
    if not gone:
        return calls, 0
    return [c for c in calls if id(c) not in gone], len(gone)


# ---------------------------------------------------------------------------
# Explanations


def _who(c, line_of) -> str:
    """'process 4 write 2 (line 88)'; crashed ops say so."""
    crashed = "crashed " if c.ret is None else ""
    return (f"process {c.op.process} {crashed}{describe_op(c.f, c.invoke_value, c.ok_value)} "
            f"(line {line_of(c.op.invoke_pos)})")


def _last_write(last, line_of) -> str:
    if last is None:
        return "the initial value"
    p, line = last.op.process, line_of(last.op.invoke_pos)
    crashed = "crashed " if last.ret is None else ""
    if last.f == "write":
        return f"last write: process {p}'s {crashed}write of {show(last.invoke_value)}, line {line}"
    old, new = last.invoke_value
    return f"last write: process {p}'s {crashed}cas {show(old)}->{show(new)}, line {line}"


def explain(*, key, depth, state, last, stuck, window, calls, line_of, initial=UNKNOWN) -> str:
    """One sentence for a register with no linearization: what it held at the
    deepest partial linearization, the op that could not be placed, and why."""
    where = "" if key is None else f"key {show(key)}: "
    held = (f"{where}no linearization: after linearizing {plural(depth, 'op')} the register held "
            f"{show(state)} ({_last_write(last, line_of)})")
    p, line = stuck.op.process, line_of(stuck.op.invoke_pos)
    if window:
        lines = [line_of(c.op.invoke_pos) for c in window] + [line]
        listed = ", ".join(_who(c, line_of) for c in window[:8])
        more = f", and {len(window) - 8} more" if len(window) > 8 else ""
        span = f"lines {min(lines)}\u2013{max(lines)}: {listed}{more}"
    else:
        span = ""
    need = needs(stuck.f, stuck.invoke_value, stuck.ok_value)
    if stuck.f == "read":
        what = f"read by process {p} (line {line}) returned {show(need)}"
    elif stuck.f == "cas":
        old, new = stuck.invoke_value
        what = f"cas by process {p} (line {line}) from {show(old)} to {show(new)} succeeded"
    elif stuck.f == FAILED_CAS:
        old, new = stuck.invoke_value
        what = (f"cas by process {p} (line {line}) from {show(old)} to {show(new)} failed, "
                f"so the register held a value other than {show(old)} at some instant of it")
    else:
        what = f"write by process {p} (line {line}) of {show(stuck.invoke_value)}"
    if need is UNKNOWN or need == state:
        others = f" ({span})" if span else ""
        return (f"{held}; {what}, but no order of it and the operations concurrent with it"
                f"{others} agrees with what they all returned")
    producers = [c for c in window if installs(c.f, c.invoke_value, c.ok_value) == need]
    if not producers:
        if need != initial and not any(
                installs(c.f, c.invoke_value, c.ok_value) == need for c in calls):
            return f"{held}; {what}, a value no operation ever wrote"
        if not span:
            return (f"{held}; {what}, and no operation concurrent with it could have "
                    f"written {show(need)} in time")
        return (f"{held}; {what}, and no operation concurrent with it ({span}) could have "
                f"written {show(need)} in time")
    listed = ", ".join(_who(c, line_of) for c in producers[:8])
    listed += f", and {len(producers) - 8} more" if len(producers) > 8 else ""
    return (f"{held}; {what}, but the operations concurrent with it that write {show(need)} "
            f"({listed}) cannot be ordered so that it sees {show(need)} and every other "
            f"operation sees what it returned")
