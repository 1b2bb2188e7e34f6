"""Exact linearizability checking for registers (Wing & Gong 1993, Lowe 2017).

A history is linearizable iff its operations can be put in one order that
respects real time (an op that returned before another was invoked comes
first) and in which every op is legal for the model (`register_models`).
`ok` ops must appear; `fail` ops are dropped; `info` ops may appear anywhere
after their invoke, or not at all.

The search is Lowe's refinement of Wing & Gong, as Porcupine implements it:
invocations and returns in one doubly-linked list in time order; take the
first invocation whose op can step the model, remove it and its return, and
go on; meeting a return means that op was never placed, so backtrack. Each
(set of placed ops, model state) is explored once (memoized), which is what
keeps the search from blowing up on histories with many crashed ops.

Before searching, each key is checked alone (a register's ops touch only its
key), info reads are dropped (they constrain nothing), and so are info
writes and cas of a value no read and no successful cas ever observed: such
a write never matters, since it can always be placed last (or nowhere).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sleuth.checker import register_models as model
from sleuth.checker.result import UNKNOWN, Result, merge_valid
from sleuth.history import History, Op

INF = float("inf")
MAX_CONFIGURATIONS = 5_000_000  # per key; past it the key is "unknown"
MAX_REPORTED = 10


@dataclass(slots=True)
class Call:
    """One register operation, as the search sees it."""

    op: Op
    f: str
    arg: Any
    result: Any
    call: int
    ret: float  # INF when the op's outcome is unknown

    def describe(self) -> str:
        return model.describe(self.f, self.arg, self.result)


def _calls(history: History, keyed: bool) -> dict[Any, list[Call]]:
    """Per key, the ops that constrain it (fail ops and info reads dropped)."""
    by_key: dict[Any, list[Call]] = {}
    for op in history.ops():
        if op.type == "fail" or (op.type == "info" and op.f == "read"):
            continue
        value = op.value
        if keyed:
            if not (isinstance(value, (list, tuple)) and len(value) == 2):
                raise history.error(op.invoke_pos, f"a register op's value must be [key, value], got {value!r}")
            key, value = value
            if isinstance(key, (list, dict)):
                raise history.error(op.invoke_pos, f"a register key must be a scalar, got {key!r}")
        else:
            key = None
        if op.f == "read":
            arg, result = None, model.freeze(value)
        elif op.f == "write":
            arg, result = model.freeze(value), None
        elif op.f == "cas":
            if not (isinstance(value, (list, tuple)) and len(value) == 2):
                raise history.error(op.invoke_pos, f"a cas value must be [old, new], got {value!r}")
            arg, result = (model.freeze(value[0]), model.freeze(value[1])), None
        else:
            raise history.error(op.invoke_pos, f"register ops are read, write and cas, not {op.f!r}")
        ret = INF if op.type == "info" else op.complete_time
        by_key.setdefault(key, []).append(Call(op, op.f, arg, result, op.invoke_time, ret))
    return by_key


def _drop_unobserved(calls: list[Call]) -> list[Call]:
    """Info writes/cas whose value nobody observed can always be placed last."""
    observed = {c.result for c in calls if c.f == "read"}
    observed |= {c.arg[0] for c in calls if c.f == "cas" and c.ret != INF}
    keep = []
    for c in calls:
        if c.ret == INF:
            written = c.arg if c.f == "write" else c.arg[1]
            if written not in observed:
                continue
        keep.append(c)
    return keep


@dataclass
class Outcome:
    valid: bool | str
    explored: int
    depth: int = 0  # most ops placed in any partial linearization
    stuck: Call | None = None  # the op whose return ended the deepest attempt
    state: Any = None  # the register then
    placed: list[Call] | None = None


def search(calls: list[Call], initial: Any, budget: int = MAX_CONFIGURATIONS) -> Outcome:
    """Is there a linearization of `calls` starting from `initial`?"""
    entries = sorted([(c.call, 0, i) for i, c in enumerate(calls)]
                     + [(c.ret, 1, i) for i, c in enumerate(calls)])
    m = len(entries)
    end = m + 1
    nxt = list(range(1, m + 2))
    prv = list(range(-1, m + 1))
    is_call = [False] + [e[1] == 0 for e in entries]
    owner = [-1] + [e[2] for e in entries]
    ret_node = [0] * len(calls)
    for node in range(1, m + 1):
        if not is_call[node]:
            ret_node[owner[node]] = node
    required = sum(1 for c in calls if c.ret != INF)
    state = model.init(initial)
    placed_bits = 0
    placed_required = 0
    stack: list[tuple[int, Any]] = []
    seen: set[tuple[int, Any]] = set()
    explored = 0
    best = Outcome(False, 0)
    node = nxt[0]
    step, illegal = model.step, model.ILLEGAL
    while placed_required < required:
        if node == end:  # only crashed ops remain unplaced
            break
        i = owner[node]
        c = calls[i]
        if is_call[node]:
            new = step(state, c.f, c.arg, c.result)
            if new is not illegal:
                bits = placed_bits | (1 << i)
                if (bits, new) not in seen:
                    seen.add((bits, new))
                    explored += 1
                    if explored > budget:
                        return Outcome(UNKNOWN, explored)
                    stack.append((node, state))
                    state, placed_bits = new, bits
                    if c.ret != INF:
                        placed_required += 1
                    r = ret_node[i]  # lift the call and its return out of the list
                    nxt[prv[node]], prv[nxt[node]] = nxt[node], prv[node]
                    nxt[prv[r]], prv[nxt[r]] = nxt[r], prv[r]
                    node = nxt[0]
                    continue
            node = nxt[node]
            continue
        # A return of an op never placed: this branch is dead.
        if len(stack) >= best.depth:
            best = Outcome(False, 0, len(stack), c, state,
                           [calls[owner[n]] for n, _ in stack])
        if not stack:
            best.explored = explored
            return best
        node, state = stack.pop()
        i = owner[node]
        placed_bits &= ~(1 << i)
        if calls[i].ret != INF:
            placed_required -= 1
        r = ret_node[i]  # put them back, return first
        nxt[prv[r]] = r
        prv[nxt[r]] = r
        nxt[prv[node]] = node
        prv[nxt[node]] = node
        node = nxt[node]
    return Outcome(True, explored)


def _where(history: History, c: Call) -> dict[str, Any]:
    op = c.op
    return {"process": op.process, "f": op.f, "op": c.describe(), "type": op.type,
            "line": history.line_of(op.invoke_pos), "invoke": op.invoke_time,
            "complete": op.complete_time}


def _explain(history: History, key: Any, out: Outcome, calls: list[Call]) -> dict[str, Any]:
    stuck = out.stuck
    window = [c for c in calls if c is not stuck and c.call < stuck.ret and stuck.call < c.ret]
    last = out.placed[-1] if out.placed else None
    held = model.show(out.state)
    where = f"key {key!r}: " if key is not None else ""
    after = (f"after linearizing {out.depth} ops (the last: process {last.op.process}'s "
             f"{last.describe()}, line {history.line_of(last.op.invoke_pos)}) the register held {held}"
             if last else f"from the start the register held {held}")
    others = "; ".join(f"process {c.op.process} {c.describe()} (line {history.line_of(c.op.invoke_pos)})"
                       for c in window[:8]) or "none"
    sentence = (f"{where}no linearization exists: {after}, and process {stuck.op.process}'s "
                f"{stuck.describe()} (line {history.line_of(stuck.op.invoke_pos)}) returned before "
                f"it could take effect; ops concurrent with it: {others}")
    return {"key": key, "op": _where(history, stuck), "window": [_where(history, c) for c in window],
            "state": out.state, "explanation": sentence}


def check(history: History, keyed: bool, initial_value: Any = None) -> Result:
    by_key = _calls(history, keyed)
    valid: bool | str = True
    examples, notes = [], []
    explored = dropped = 0
    for key, calls in by_key.items():
        kept = _drop_unobserved(calls)
        dropped += len(calls) - len(kept)
        out = search(kept, initial_value)
        explored += out.explored
        valid = merge_valid(valid, out.valid)
        if out.valid == UNKNOWN:
            notes.append(f"key {key!r}: search stopped after {MAX_CONFIGURATIONS} configurations")
        elif out.valid is False and len(examples) < MAX_REPORTED:
            examples.append(_explain(history, key, out, kept))
    stats = {"keys": len(by_key), "ops": sum(map(len, by_key.values())),
             "crashed-dropped": dropped, "configurations-explored": explored}
    return Result(valid=valid, model="linearizable",
                  anomaly_types=["nonlinearizable"] if valid is False else [],
                  anomalies={"nonlinearizable": examples} if examples else {},
                  stats=stats, notes=notes)


def check_register(history: History, initial_value: Any = None, **_: Any) -> Result:
    """Independent keys, values `[key, v]`; each key judged on its own."""
    return check(history, keyed=True, initial_value=initial_value)


def check_cas_register(history: History, initial_value: Any = None, **_: Any) -> Result:
    """One register, values bare."""
    return check(history, keyed=False, initial_value=initial_value)
