"""Exact linearizability checking: the Wing & Gong / Lowe search, as Porcupine does it.

A history is linearizable (Herlihy & Wing 1990) iff its operations can be put
in one sequential order that respects real time (an op that completed before
another was invoked comes first) and that the model accepts step by step.
`ok` ops must all appear, each between its invoke and its completion; `fail`
ops are dropped; `info` ops (crashed, or never completed) may appear anywhere
after their invoke, or not at all.

The search (`search`) is model-agnostic. It is Wing & Gong's (1993) algorithm
with Lowe's (2017) memoization, in the shape Porcupine (Athalye) gives it:

- Invocations and returns sit in one doubly-linked list in history order; a
  crashed op's return is at +infinity (after all others), so crashed ops
  are kept beside the list, in invoke order (`_window`).
- The candidates are the invocations before the first return in the list.
  Place a candidate the model accepts, unlink its invocation and its return,
  and go on. Meeting a return means that op can no longer be placed before
  it completed: undo the last choice and try the next one.
- Every configuration (set of ops placed, model state) is explored at most
  once (Lowe's cache): reaching one again means it already failed.
- Success as soon as every `ok` op is placed: the crashed ops left over are
  the ones that never took effect.

Reductions on top, each keeping the search exact (the argument for each is
where it is applied):

1. Read-only ops first: a candidate that never changes the state (a read)
   and is legal now is placed at once, with no alternatives tried.
2. One op per effect: of candidates with the same step everywhere (same f and
   values), only the ok one returning first, else the crashed one invoked
   first, is tried.
3. A crashed op is never placed directly before a blind op (one legal in any
   state, whose result ignores the state, like a write).
4. Crashed read-only ops are dropped: they change nothing and owe nothing.
5. Dead ends seen early (models that say which state an op `needs` and which
   it `installs`): an ok op in the window that needs a state nothing can
   still produce before it returns makes the configuration dead at once.
6. Scarce producers (same models; `scarcity`, where the count is proven):
   a crashed op is a token "make v current once, any time from now"; count
   the times v must become current again with no completed op able to do it,
   against the crashed ops that make v. Too few proves the history invalid
   before any search (the search then only names an op, within a small
   budget); otherwise no more tokens of v are spent than the demands still
   ahead leave to spare. Without it the search had to try every way of
   spending the tokens, and gave up on 3 of 10 benchmark histories.
7. A crashed op that leaves the state as it was is never placed.
8. Dominance: a configuration is skipped if an earlier one had the same ok
   ops placed and the same state, with a subset of its crashed ops placed.

Candidates are tried earliest return first (crashed ops, which never return,
last, latest invoked first): the order changes no verdict, only how soon a
linearization is found.
Each key is searched once without reduction 6 (its tables cost more than
most searches), and only if that stops at `QUICK_CONFIGURATIONS` again with it.

The search reads as: `_tables` (what is known of each op before starting),
`_Transitions` (model steps, cached), `_event_list` (the linked list),
`_window` (the choices at a configuration: reductions 1, 2, 5, 6), `search`
itself (place, memoize, undo: reductions 3 and 7), and `_descend`, which
walks the same way down without memo, stack or linked list wherever nothing
in the memo can be met again (from the root, and below the most ok ops ever
placed) and hands back to `search` at a dead end: most searches never
backtrack, and pay only for `_tables` and `_descend`.

The bitset of placed ops is kept as a frontier (the first `lo` ok ops, in
invoke order, are all placed) plus the few bits above it, and the crashed ops
placed as a separate small bitset, so memo keys stay small on long histories.

Register workloads (`check_register`, `check_cas_register`) split the
history by key first: linearizability is local (Herlihy & Wing's
P-compositionality), so each key is checked on its own. Their model, and the
register-only pruning of crashed writes nobody observed, live in
`register_models`.

On failure the report names the op the search could not get past: at the
deepest partial linearization reached (most `ok` ops placed, as Knossos and
Porcupine report), the unplaced op that completes first, with the state then
and the ops concurrent with it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from sleuth.base.words import noun, plural
from sleuth.checker import models
from sleuth.checker import register_models as rm
from sleuth.checker.register_load import RegisterHistory
from sleuth.checker.result import UNKNOWN, Result, merge_valid, nothing_to_judge
from sleuth.checker.scarcity import Scarcity, Shortage, scarcity
from sleuth.history.jsonl import History, Op

MAX_CONFIGURATIONS = 5_000_000  # per key; past it the key's verdict is "unknown"
MAX_EXAMPLES = 10  # keys reported in full
QUICK_CONFIGURATIONS = 2_000  # a first search without reduction 6, per key
EXPLAIN_BUDGET = 5_000  # configurations searched, once a key is proven invalid, to name an op
STATE_BITS = 24  # memo keys hold 2 * state id + flag in this many bits
NOTHING = rm.UNKNOWN  # "no such value": an unknown result, no needed state, ...


def _no(f: str, invoke_value: Any, ok_value: Any) -> bool:
    return False


def _nothing(f: str, invoke_value: Any, ok_value: Any) -> Any:
    return NOTHING


def _same_op(f: str, invoke_value: Any, ok_value: Any) -> Any:
    return f, invoke_value, ok_value


@dataclass(frozen=True)
class Model:
    """A sequential specification, as Porcupine's `Model`: a few pure functions.

    Required: `init(initial_value) -> state`; `step(state, f, invoke_value,
    ok_value) -> (legal?, new state)`, where ok_value is `NOTHING` for a
    crashed op (its result is unknown); states must be hashable; and
    `describe_state` / `describe_op` for reports. Optional, each taking
    (f, invoke_value, ok_value), each making the search faster when given:
    `read_only` (the step never changes the state), `blind` (the step is legal
    in every state and its result ignores it), `effect` (a key: ops with equal
    keys step alike in every state), `needs` / `installs` (the one state in
    which the op is legal / the state it always leaves, or NOTHING), and
    `explain(...)` for failure sentences.
    """

    name: str
    init: Callable[[Any], Any]
    step: Callable[[Any, str, Any, Any], tuple[bool, Any]]
    describe_state: Callable[[Any], str]
    describe_op: Callable[[str, Any, Any], str]
    read_only: Callable[[str, Any, Any], bool] = _no
    blind: Callable[[str, Any, Any], bool] = _no
    effect: Callable[[str, Any, Any], Any] = _same_op
    needs: Callable[[str, Any, Any], Any] = _nothing
    installs: Callable[[str, Any, Any], Any] | None = None
    explain: Callable[..., str] | None = None
    thaw: Callable[[Any], Any] = lambda v: v


REGISTER = Model("register", rm.init, rm.step, rm.describe_state, rm.describe_op,
                 read_only=rm.read_only, blind=rm.blind, effect=rm.effect, needs=rm.needs,
                 installs=rm.installs, explain=rm.explain, thaw=rm.thaw)


@dataclass(slots=True)
class Call:
    """One operation as the search sees it. `call` and `ret` are positions in
    the history (event indices); `ret` is None for a crashed op (it may take
    effect any time after `call`, or never), whose `ok_value` is NOTHING.
    Values are frozen (hashable)."""

    op: Op
    f: str
    invoke_value: Any
    ok_value: Any
    call: int
    ret: int | None


@dataclass
class Outcome:
    """What `search` found. On failure, `deepest` is the deepest configuration
    reached: (ok ops placed, indices into `calls` placed, state, index of the
    last state-changing op placed or -1), and `culprit` the index of an op
    seen there never to be placeable (reduction 5), or -1. `shortage` is the
    count that proved it (reduction 6), if one did; `deepest` is then None
    when the search was cut short before it could name an op."""

    valid: bool | str
    explored: int
    deepest: tuple[int, set[int], Any, int] | None = None
    culprit: int = -1
    calls: list[Call] = field(default_factory=list)
    shortage: Shortage | None = None
    # Gives calls their `Op`s, for calls built without (`register_columns`): an
    # explanation asks only for those it names.
    attach: Callable[[list[Call]], None] | None = None


@dataclass
class _Tables:
    """What `search` knows of each call before it starts, indexed like the
    calls (sorted by invoke, crashed read-only ones dropped)."""

    calls: list[Call]
    ret: list[float]  # return position, inf if crashed
    ro: list[bool]  # read-only (reduction 1)
    bl: list[bool]  # blind (reduction 3)
    cls: list[int]  # effect class (reduction 2)
    okix: list[int]  # ok ops: rank in invoke order (frontier bits); crashed: -1
    ibit: list[int]  # crashed ops: their bit in the crashed set; ok: 0
    n_ok: int
    n_info: int
    lookahead: bool  # the model says what each op needs and installs (reduction 5)
    need: list[Any]  # ok ops: the one state they are legal in, or NOTHING
    makes: list[Any]  # the state an op installs from another one, or NOTHING
    producer_calls: dict[Any, list[int]]  # state -> invoke positions of its makers
    sc: Scarcity | None  # reduction 6
    crashed: list[int]  # crashed calls, in invoke order (kept out of the event list)
    crashed_calls: list[int]  # their invoke positions


def _tables(calls: list[Call], model: Model, count_producers: bool) -> _Tables:
    read_only, installs, needs = model.read_only, model.installs, model.needs
    blind, effect = model.blind, model.effect
    asks = installs is not None  # the model says what ops need and install
    lookahead = asks  # ...and every op kept installs one known state
    facts: dict[tuple, tuple] = {}  # op (f, values) -> what the model says of it
    # Effect classes are numbered as facts are first asked for: a class is
    # only ever compared with another (reduction 2), never ordered.
    class_ids: dict[Any, int] = {}

    def fact(a: tuple) -> tuple:
        r = read_only(*a)
        made = NOTHING if r or not asks else installs(*a)
        return (r, blind(*a), class_ids.setdefault(effect(*a), len(class_ids)),
                needs(*a) if asks else NOTHING, made)

    m = len(calls)
    inf = float("inf")
    kept: list[Call] = []
    ret: list[float] = []
    ro, bl, cls = [False] * m, [False] * m, [0] * m
    okix, ibit = [-1] * m, [0] * m
    need: list[Any] = [NOTHING] * m
    makes: list[Any] = [NOTHING] * m
    post: list[Any] = [NOTHING] * m  # ok ops: the state they leave
    producer_calls: dict[Any, list[int]] = {}
    crashed: list[int] = []  # crashed calls, in invoke order
    n_ok = n_info = 0
    for c in sorted(calls, key=attrgetter("call")):
        a = (c.f, c.invoke_value, c.ok_value)
        try:
            fa = facts[a]
        except KeyError:
            fa = facts[a] = fact(a)
        except TypeError:  # a value that cannot be a dict key: ask each time
            fa = fact(a)
        r, bl_i, cls_i, needed, made = fa
        done = c.ret
        if done is None and r:
            continue  # reduction 4: a crashed read-only op changes nothing, owes nothing
        i = len(kept)
        kept.append(c)
        ro[i], bl[i], cls[i] = r, bl_i, cls_i
        if done is None:  # crashed ops get bits of their own
            ret.append(inf)
            ibit[i] = 1 << n_info
            n_info += 1
            crashed.append(i)
        else:  # ok ops are numbered 0.. in invoke order (the frontier's bit space)
            ret.append(done)
            okix[i] = n_ok
            n_ok += 1
        if not lookahead:
            continue
        if r:
            if done is not None:
                need[i] = post[i] = needed
            continue
        if made is NOTHING:  # could make anything: no lookahead
            lookahead = False
            continue
        if done is not None:
            need[i], post[i] = needed, made
        if made != needed:
            makes[i] = made
            producer_calls.setdefault(made, []).append(c.call)
    n = len(kept)
    if n < m:
        for column in (ro, bl, cls, okix, ibit, need, makes, post):
            del column[n:]
    calls = kept
    sc = None
    if lookahead and count_producers and n_ok:
        sc = scarcity(calls, ret, need, post, makes, NOTHING)
    return _Tables(calls, ret, ro, bl, cls, okix, ibit, n_ok, n_info, lookahead, need, makes,
                   producer_calls, sc, crashed, [calls[i].call for i in crashed])


class _Transitions:
    """Model steps computed once per (op, state): states are numbered (ids),
    and `trans[i][sid]` is the id after op i from state sid, or -1."""

    def __init__(self, t: _Tables, model: Model, initial_state: Any):
        self.calls, self.model = t.calls, model
        self.trans: list[dict[int, int]] = [{} for _ in t.calls]
        self.state_of = [initial_state]
        self.sid_of = {initial_state: 0}

    def __call__(self, i: int, sid: int) -> int:
        ns = self.trans[i].get(sid)
        if ns is not None:
            return ns
        c = self.calls[i]
        ok, new = self.model.step(self.state_of[sid], c.f, c.invoke_value, c.ok_value)
        if ok:
            ns = self.sid_of.get(new)
            if ns is None:
                ns = self.sid_of[new] = len(self.state_of)
                if ns >> (STATE_BITS - 1):
                    raise ValueError(f"model {self.model.name} reached over {ns} states")
                self.state_of.append(new)
        else:
            ns = -1
        self.trans[i][sid] = ns
        return ns


def _event_list(t: _Tables) -> tuple[list[int], list[int], int]:
    """The invocation of ok call i is entry 2i, its return 2i+1 (odd =
    return), in one doubly-linked list in history order: (next, previous,
    head). Crashed calls are not in it: they never return, so they never end
    a window, and `_window` reads the ones in a window off `t.crashed`."""
    n, calls = len(t.calls), t.calls
    head, tail = 2 * n, 2 * n + 1
    where: dict[int, int] = {}  # entry -> position (distinct event indices)
    for i, c in enumerate(calls):
        if c.ret is not None:
            where[2 * i] = c.call
            where[2 * i + 1] = c.ret
    order = sorted(where, key=where.__getitem__)
    nxt = [0] * (2 * n + 2)
    prv = [0] * (2 * n + 2)
    prev = head
    for e in order:
        nxt[prev], prv[e] = e, prev
        prev = e
    nxt[prev], prv[tail] = tail, prev
    return nxt, prv, head


def _crashed_window(t: _Tables, k: int, ib: int) -> tuple[list[tuple[int, int]], set[Any]]:
    """The crashed ops in a window: the first k crashed ops (in invoke order)
    but those placed (ib). For each effect, the first invoked (reduction 2),
    latest invoked first (the order they are tried in); and what they make."""
    first: dict[int, int] = {}
    made: set[Any] = set()
    cls, ibit, makes = t.cls, t.ibit, t.makes
    for y in t.crashed[:k]:
        if ib & ibit[y]:
            continue
        if t.lookahead and makes[y] is not NOTHING:
            made.add(makes[y])
        if cls[y] not in first:
            first[cls[y]] = y
    return sorted(first.items(), key=lambda cy: -cy[1]), made


def _window(t: _Tables, tr: _Transitions, nxt: list[int], head: int, sid: int,
            spent: list[int], ib: int, crashed_memo: dict) -> tuple[int, list[int], int]:
    """The choices at a configuration first reached: (a read-only op to place
    at once, or -1; else the candidates to try, in order; and an op seen
    never to be placeable, or -1, when that makes the configuration dead).

    The window is the invocations before the first return in the list: the
    ok ones in the list, and the crashed ones (never read-only: reduction 4)
    invoked before that return and not placed, the same for many
    configurations in a row, so worked out once for each (how many crashed
    ops were invoked, which are placed) in `crashed_memo`."""
    ro, ret, cls, need, makes = t.ro, t.ret, t.cls, t.need, t.makes
    trans = tr.trans
    lookahead = t.lookahead
    chosen: dict[int, int] = {}
    needy: list[int] = []
    made: set[Any] = set()
    now = tr.state_of[sid]
    x = nxt[head]
    while not x & 1:
        y = x >> 1
        x = nxt[x]
        if ro[y]:
            u = need[y]
            if u is not NOTHING:  # the one state it is legal in, and it changes none
                ns = sid if u == now else -1
            else:
                ns = trans[y].get(sid)  # the cache, inline: this is the hot loop
                if ns is None:
                    ns = tr(y, sid)
            if ns == sid:
                # Reduction 1. A read-only op r, a candidate and legal now, can
                # go first: take any linearization from here; r is in it (ok
                # ops all are); moving r to the front keeps real-time order
                # (every op that completed before r was invoked is placed
                # already, or r would not be a candidate) and every later
                # state (r changes none).
                return y, [], -1
            needy.append(y)  # not legal now: it waits for its state
            continue
        if lookahead:
            if makes[y] is not NOTHING:
                made.add(makes[y])
            if need[y] is not NOTHING:
                needy.append(y)
        c = cls[y]
        z = chosen.get(c)
        # Reduction 2. Ops a and b of one effect (same step in every state),
        # both candidates now. If a is ok and returns before b (or b is
        # crashed), a linearization placing b here and a later can swap them:
        # a is a candidate now; b lands where a was, before a's return, so
        # before its own (a crashed op has none); whatever had to follow a
        # (invoked after a returned) was invoked after b returned too; and the
        # states are the same. Two crashed ops of an effect: the first invoked
        # can take the other's place. So one op per effect is tried: the ok
        # one returning first, else the crashed one invoked first.
        if z is None or ret[y] < ret[z]:
            chosen[c] = y
    # The order candidates are tried in changes no verdict (every one is
    # tried before a configuration is given up), only how soon a
    # linearization is found: earliest return first, and crashed ops (which
    # never return) last, latest invoked first; on the benchmark's hardest
    # rows this order explored the fewest configurations of those tried.
    first_ret = ret[x >> 1]  # x is the first return in the list
    cands = sorted(chosen.values(), key=ret.__getitem__)  # ok ops (their returns differ)
    k = bisect_left(t.crashed_calls, first_ret)
    if k:
        key = (k, ib)
        crashed = crashed_memo.get(key)
        if crashed is None:
            crashed = crashed_memo[key] = _crashed_window(t, k, ib)
        cands += [y for c, y in crashed[0] if c not in chosen]  # an ok op of the effect goes first
        made |= crashed[1]
    sc = t.sc
    if sc is not None:
        # Reduction 6: spend no more crashed ops of a value than the demands
        # still ahead leave to spare (`scarcity`, where the count is proven).
        kind = sc.kind
        cands = [y for y in cands if kind[y] < 0 or spent[kind[y]] < sc.allowance(kind[y], first_ret)]
    if lookahead and needy:
        # Reduction 5. Every op invoked before the first return x is in the
        # window, placed, or crashed and dropped. An ok op y that needs state
        # u (not the state now) must come right after some op that makes u,
        # placed from here on: one in the window, or one invoked after x and
        # before y returns. If there is none, y can never be placed, and this
        # configuration is dead.
        for y in needy:
            u = need[y]
            if u is NOTHING or u == now or u in made:
                continue
            pc = t.producer_calls.get(u)
            if pc:
                k = bisect_right(pc, first_ret)
                if k < len(pc) and pc[k] < ret[y]:
                    continue
            return -1, [], y
    return -1, cands, -1


def _orders(t: _Tables) -> tuple[list[int], list[int], list[float]]:
    """For `_descend`: the ok ops in invoke order, and in return order (each
    ended by a sentinel, len(t.calls)); every call's invoke position, and the
    sentinel's (inf)."""
    n, okix = len(t.calls), t.okix
    oks = [i for i in range(n) if okix[i] >= 0]
    by_ret = sorted(oks, key=t.ret.__getitem__)
    oks.append(n)
    by_ret.append(n)
    call_at = [c.call for c in t.calls]
    call_at.append(float("inf"))
    return oks, by_ret, call_at


def _descend(t: _Tables, tr: _Transitions, crashed_memo: dict, budget: int, orders: tuple,
             placed: list[bool], win: list[int], rp: int, nx: int, sid: int, ib: int, flag: int,
             explored: int, remaining: int, run: dict[int, int]) -> Outcome | tuple:
    """`search`'s way down from a configuration, without its bookkeeping: the
    Outcome `search` returns if it goes down from there without backtracking;
    else, where it met a dead end, what `search` needs to go on from there as
    if it had come itself: the path (per op placed: op, sid, ib, flag, its ok
    candidates or None if placed at once, its crashed window, j, sid after,
    as `search` stacks them) and the candidates reduction 8 skipped (ops
    placed then, op, sid after).

    `search` calls it at the root, and again whenever it places more ok ops
    than it ever had (then no configuration in its memo, nor any entry of
    reduction 8's, has as many ok ops placed, so none can be met again: every
    configuration below has a superset of these ok ops placed). The
    configuration is given as `search` has it (`orders` from `_orders`;
    `placed[i]` for ok ops; the window's ok ops in invoke order, the rank
    in `by_ret` of the first return not placed, the count of ok ops invoked
    before it; `run`: reduction 8's entries for these ok ops placed).
    `tr` and `crashed_memo` are `search`'s and go on being filled here.

    Most searches are easy: the first candidate tried at each configuration
    leads on, and the memo, the stack, the linked list and the deepest
    configuration are kept for nothing. This walks the same path. At each
    configuration it works out what `_window` does, from the same tables and
    in the same order: the window's ok ops are a list in invoke order (the
    order the linked list has them), extended as the first return not placed
    moves on; its crashed ops come from `_crashed_window`. It tries the
    candidates as `search` does (reductions 3 and 7, then 8) and places the
    first that passes. Why the result is `search`'s:

    - The memo never answers "seen" on the way down: each configuration
      places one op more than the one before it, so its placed set is new;
      and a key reduction 8 marks seen (P plus a crashed op c, at a
      configuration with P placed) is never reached later on the path,
      whose placed sets all hold P plus the op placed there instead of c.
    - Reduction 8 compares with the first configuration reached with the same
      ok ops placed and the same state. On one path, the configurations with
      one set of ok ops placed come in one run (an ok op placed changes the
      set for good), so `run` holds exactly the entries of `search`'s
      `first` that can match: those made since the last ok op was placed
      (the root makes none; where `search` calls this again, it has just
      made the one it passes).
    - Success (every ok op placed) and the budget are tested after each
      placement in `search`'s order, so the verdict and `explored` are its.
    - Where `search` would backtrack (no candidate passes, or reduction 5
      finds the configuration dead), this stops, and `search` adds the path
      to its memo, stack, linked list and deepest configuration (no dead
      end was met on it, so no culprit was named) and goes on with the dead
      configuration's window. The model is asked the same steps in the same
      order as `search` asks them on its way down, so states get the same
      numbers.

    And a linearization found is one: each op placed was a candidate (invoked
    before every return not placed) and legal in the state then.
    Not used with reduction 6 (`t.sc`): its allowances are left to `search`."""
    calls, ret, ro, bl, cls, need, makes = t.calls, t.ret, t.ro, t.bl, t.cls, t.need, t.makes
    okix, ibit, lookahead = t.okix, t.ibit, t.lookahead
    crashed_calls, producer_calls = t.crashed_calls, t.producer_calls
    trans, state_of = tr.trans, tr.state_of
    oks, by_ret, call_at = orders
    first_ret = ret[by_ret[rp]]
    while call_at[oks[nx]] < first_ret:
        win.append(oks[nx])
        nx += 1
    k = bisect_left(crashed_calls, first_ret)  # crashed ops invoked before it
    path: list[tuple] = []
    pruned: list[tuple[int, int, int]] = []
    while True:
        # The window, as `_window` reads it off the linked list.
        now = state_of[sid]
        i = -1
        chosen: dict[int, int] = {}
        needy: list[int] = []
        for y in win:
            if ro[y]:
                u = need[y]
                if u is not NOTHING:
                    ns = sid if u == now else -1
                else:
                    ns = trans[y].get(sid)
                    if ns is None:
                        ns = tr(y, sid)
                if ns == sid:
                    i = y  # reduction 1
                    break
                needy.append(y)
                continue
            if lookahead and need[y] is not NOTHING:
                needy.append(y)
            c = cls[y]
            z = chosen.get(c)
            if z is None or ret[y] < ret[z]:
                chosen[c] = y
        if i >= 0:
            ns = sid
            okc = crashed = None
            j = 0
        else:
            okc = sorted(chosen.values(), key=ret.__getitem__) if len(chosen) > 1 \
                else list(chosen.values())
            crashed = None
            if k:
                crashed = crashed_memo.get((k, ib))
                if crashed is None:
                    crashed = crashed_memo[k, ib] = _crashed_window(t, k, ib)
            if lookahead and needy:  # reduction 5: `search` would backtrack from a dead one
                made = None
                for y in needy:
                    u = need[y]
                    if u is NOTHING or u == now:
                        continue
                    if made is None:
                        made = {makes[x] for x in win if not ro[x] and makes[x] is not NOTHING}
                        if crashed is not None:
                            made |= crashed[1]
                    if u in made:
                        continue
                    pc = producer_calls.get(u)
                    if pc:
                        kk = bisect_right(pc, first_ret)
                        if kk < len(pc) and pc[kk] < ret[y]:
                            continue
                    return path, pruned
            # The candidates as `search` tries them: the ok ones (`okc`), then
            # the crashed ones of effects no ok one has; j counts those tried.
            j = 0
            for y in okc:
                j += 1
                if flag and bl[y]:
                    continue  # reduction 3
                ns = trans[y].get(sid)
                if ns is None:
                    ns = tr(y, sid)
                if ns >= 0:
                    i = y
                    break
            if i < 0 and crashed is not None:
                for c, y in crashed[0]:
                    if c in chosen:
                        continue
                    j += 1
                    if flag and bl[y]:
                        continue  # reduction 3
                    ns = trans[y].get(sid)
                    if ns is None:
                        ns = tr(y, sid)
                    if ns < 0 or ns == sid:
                        continue  # reduction 7 if ns == sid
                    spare = (ib | ibit[y]) << 1 | 1
                    seen_first = run.get(ns)
                    if seen_first is None:
                        run[ns] = spare
                    elif seen_first != spare and not seen_first & ~spare:
                        pruned.append((len(path), y, ns))
                        continue  # reduction 8
                    i = y
                    break
            if i < 0:
                return path, pruned  # a dead end: `search` backtracks
        path.append((i, sid, ib, flag, okc, crashed, j, ns))
        explored += 1
        if okix[i] >= 0:
            remaining -= 1
            if remaining == 0:
                return Outcome(True, explored, calls=calls)
            win.remove(i)
            placed[i] = True
            flag = 0
            run = {ns: ib << 1}
            if by_ret[rp] == i:  # the first return goes: the window grows to the next one
                rp += 1
                while placed[by_ret[rp]]:
                    rp += 1
                first_ret = ret[by_ret[rp]]
                while call_at[oks[nx]] < first_ret:
                    win.append(oks[nx])
                    nx += 1
                k = bisect_left(crashed_calls, first_ret)
        else:
            ib |= ibit[i]
            flag = 1
        sid = ns
        if explored > budget:
            return Outcome(UNKNOWN, explored, calls=calls)


def search(calls: list[Call], model: Model, initial_state: Any,
           budget: int = MAX_CONFIGURATIONS, count_producers: bool = True) -> Outcome:
    """Is there a linearization of `calls` from `initial_state`? At most
    `budget` configurations are explored; past that the answer is unknown.
    `count_producers=False` leaves out reduction 6, whose tables cost more
    than an easy search."""
    t = _tables(calls, model, count_producers)
    calls, n_ok, n_info = t.calls, t.n_ok, t.n_info
    if n_ok == 0:
        return Outcome(True, 0, calls=calls)
    sc = t.sc
    if sc is not None and sc.shortage is not None:
        # Invalid, proven by counting (reduction 6). Search a little only to
        # name the op it cannot get past (what a person reads first), else
        # the count is the explanation.
        budget = min(budget, EXPLAIN_BUDGET)
    spent = [0] * (len(sc.starts) if sc else 0)  # crashed ops of each kind placed
    ro, bl, okix, ibit = t.ro, t.bl, t.okix, t.ibit
    crashed_memo: dict[tuple[int, int], tuple] = {}  # see `_window`
    tr = _Transitions(t, model, initial_state)
    trans = tr.trans
    descend = sc is None
    if descend:  # built if `_descend` meets a dead end
        nxt = prv = []
        head = 0
    else:
        nxt, prv, head = _event_list(t)

    # The configuration: state id, frontier (lo: ok ops 0..lo-1 all placed;
    # rel: placed ok ops above it, bit 0 = op lo), crashed ops placed (ib),
    # whether the last op placed was a crashed one (flag, reduction 3), the
    # last state-changing op placed (lw, for reports), and its candidates
    # (cands, tried up to j), worked out once, when it is first reached.
    sid = lo = rel = ib = flag = 0
    lw = -1
    remaining = n_ok
    stack: list[tuple] = []
    # Memo keys: (rel, ib, lo, 2*state + flag) packed into one int (a third
    # of the memory of a tuple; a search may keep millions).
    seen: set[int] = set()
    first: dict[int, int] = {}  # reduction 8: (ok ops placed, state) -> crashed set << 1 | flag
    lo_bits = n_ok.bit_length()
    explored = 0
    best_placed, best = 0, (0, 0, 0, 0, -1)
    culprit = -1  # at the deepest configuration, an op seen never to be placeable
    fresh = True
    cands: list[int] = []
    j = 0
    # Going down where nothing in the memo can be met again is `_descend`'s:
    # from the root, and wherever more ok ops are placed than ever before.
    # Not with reduction 6, whose allowances only this loop applies.
    placed = [False] * (len(calls) + 1)  # ok ops
    orders = _orders(t) if descend else None
    rank: list[int] = []  # ok op -> its place in orders[1], once asked for
    win: list[int] = []
    rp = nx = 0
    run: dict[int, int] = {}
    while True:
        if descend:
            descend = False
            got = _descend(t, tr, crashed_memo, budget, orders, placed, win, rp, nx, sid, ib,
                           flag, explored, remaining, run)
            if isinstance(got, Outcome):
                return got
            path, pruned = got
            if not nxt:
                nxt, prv, head = _event_list(t)
            # The path, placed again as the loop below places ops: the same
            # stack, memo keys, reduction 8's entries and skips, linked list
            # and deepest configuration (`_descend` says why its path is
            # this loop's). The loop then goes on at the dead end, with its
            # window worked out anew.
            p = 0
            for level, (i, sid, ib, flag, okc, crashed, j, ns) in enumerate(path):
                if okc is None:  # placed at once (reduction 1)
                    cands = []
                else:  # the candidates as `_window` lists them
                    cands = okc
                    if crashed is not None:
                        has = {t.cls[y] for y in okc}
                        cands = okc + [y for c, y in crashed[0] if c not in has]
                while p < len(pruned) and pruned[p][0] == level:
                    y, pns = pruned[p][1], pruned[p][2]
                    p += 1
                    seen.add(((((rel << n_info) | ib | ibit[y]) << lo_bits | lo) << STATE_BITS)
                             | (pns + pns + 1))
                stack.append((i, sid, lo, rel, ib, flag, lw, j == 0, cands, j))
                k = okix[i]
                if k >= 0:
                    d = k - lo
                    nlo = lo
                    if d:
                        nrel = rel | (1 << d)
                    else:
                        nrel = rel | 1
                        s = (nrel ^ (nrel + 1)).bit_length() - 1
                        nrel >>= s
                        nlo += s
                    seen.add(((((nrel << n_info) | ib) << lo_bits | nlo) << STATE_BITS) | (ns + ns))
                    first.setdefault(((nrel << lo_bits | nlo) << STATE_BITS) | ns, ib << 1)
                    lo, rel = nlo, nrel
                    e = i + i
                    p_, q = prv[e], nxt[e]
                    nxt[p_], prv[q] = q, p_
                    p_, q = prv[e + 1], nxt[e + 1]
                    nxt[p_], prv[q] = q, p_
                    flag = 0
                    remaining -= 1
                else:
                    seen.add(((((rel << n_info) | ib | ibit[i]) << lo_bits | lo) << STATE_BITS)
                             | (ns + ns + 1))
                    first.setdefault(((rel << lo_bits | lo) << STATE_BITS) | ns, (ib | ibit[i]) << 1 | 1)
                    ib |= ibit[i]
                    flag = 1
                sid = ns
                if not ro[i]:
                    lw = i
                explored += 1
                if k >= 0:
                    best_placed, best = n_ok - remaining, (lo, rel, ib, sid, lw)
                    culprit = -1
        i = -1
        forced = False
        if fresh:
            fresh = False
            i, cands, dead_of = _window(t, tr, nxt, head, sid, spent, ib, crashed_memo)
            forced = i >= 0
            j = 0
            if dead_of >= 0 and best[0] == lo and best[1:] == (rel, ib, sid, lw) \
                    and n_ok - remaining == best_placed:
                culprit = dead_of  # the deepest configuration dies of it
        if i < 0:
            while j < len(cands):  # try the candidates in turn
                y = cands[j]
                j += 1
                if flag and bl[y]:
                    # Reduction 3: a crashed op x then a blind op b: the state
                    # after b is the same with or without x, and nobody saw
                    # x's effect; dropping x breaks no real-time order. So if
                    # a linearization exists, one exists without x before b.
                    continue
                ns = trans[y].get(sid)
                if ns is None:
                    ns = tr(y, sid)
                if ns == sid and okix[y] < 0:
                    # Reduction 7: a crashed op that leaves the state as it
                    # was (a write of the value already there) is not needed
                    # here: drop it from any linearization placing it here,
                    # and every state and real-time order is unchanged.
                    continue
                if ns >= 0:
                    i = y
                    break
        else:
            ns = sid
        if i >= 0:
            k = okix[i]
            if k >= 0:
                d = k - lo
                nlo = lo
                if d:
                    nrel = rel | (1 << d)
                else:  # the frontier op itself: slide past the placed run
                    nrel = rel | 1
                    s = (nrel ^ (nrel + 1)).bit_length() - 1  # trailing ones
                    nrel >>= s
                    nlo += s
                key = ((((nrel << n_info) | ib) << lo_bits | nlo) << STATE_BITS) | (ns + ns)
                okkey, spare = ((nrel << lo_bits | nlo) << STATE_BITS) | ns, ib << 1
            else:
                nlo, nrel = lo, rel
                key = ((((rel << n_info) | ib | ibit[i]) << lo_bits | lo) << STATE_BITS) \
                    | (ns + ns + 1)
                okkey, spare = ((rel << lo_bits | lo) << STATE_BITS) | ns, (ib | ibit[i]) << 1 | 1
            # Reduction 8 (dominance): the first configuration reached with
            # these ok ops placed and this state, `first[okkey]` (its crashed
            # ops placed, and flag), dominates a later one that placed a
            # superset of crashed ops (and whose flag is not lower): any way
            # to finish from the later one also finishes from the first (the
            # crashed ops it uses are unplaced there too; the flag only takes
            # moves away), so the later one is not explored. Exact: if the
            # search fails while a linearization exists, take a configuration
            # met whose shortest way to finish, d, is least; explored, all its
            # moves were tried and one leads to d - 1 (reductions never
            # lengthen a way); skipped, the configuration dominating it was
            # explored and finishes in d too. Either way, a contradiction.
            seen_first = first.get(okkey)
            if seen_first is None:
                first[okkey] = spare
            elif seen_first != spare and not seen_first & ~spare:
                seen.add(key)  # known to lead nowhere new
            if key not in seen:
                seen.add(key)
                stack.append((i, sid, lo, rel, ib, flag, lw, forced, cands, j))
                sid, lo, rel = ns, nlo, nrel
                if k >= 0:
                    e = i + i  # lift the invocation and its return out of the list
                    p, q = prv[e], nxt[e]
                    nxt[p], prv[q] = q, p
                    p, q = prv[e + 1], nxt[e + 1]
                    nxt[p], prv[q] = q, p
                    flag = 0
                    remaining -= 1
                    placed[i] = True
                else:
                    ib |= ibit[i]
                    flag = 1
                    if sc is not None and sc.kind[i] >= 0:
                        spent[sc.kind[i]] += 1
                if not ro[i]:
                    lw = i
                explored += 1
                if remaining == 0:
                    return Outcome(True, explored, calls=calls)
                if explored > budget:
                    if sc is not None and sc.shortage is not None:
                        return Outcome(False, explored, calls=calls, shortage=sc.shortage)
                    return Outcome(UNKNOWN, explored, calls=calls)
                if k >= 0 and n_ok - remaining > best_placed:
                    best_placed, best = n_ok - remaining, (lo, rel, ib, sid, lw)
                    culprit = -1
                    if orders is not None:  # deeper than ever: `_descend` goes on
                        descend = True
                        if not rank:
                            rank = [0] * len(calls)
                            for r, y in enumerate(orders[1][:-1]):
                                rank[y] = r
                            ok_calls = [orders[2][y] for y in orders[0][:-1]]
                        win = []
                        x = nxt[head]
                        while not x & 1:
                            win.append(x >> 1)
                            x = nxt[x]
                        rp = rank[x >> 1]
                        nx = bisect_left(ok_calls, t.ret[x >> 1])
                        run = {sid: ib << 1}
                fresh = True
                continue
            if not forced:  # reached before, so known dead: try the next candidate
                continue
        # Dead end: undo choices back to the last one with candidates left.
        while True:
            if not stack:
                return _failure(t, tr, explored, best_placed, best, culprit)
            i, sid, lo, rel, ib, flag, lw, forced, cands, j = stack.pop()
            if okix[i] >= 0:
                e = i + i  # put them back, return first
                p, q = prv[e + 1], nxt[e + 1]
                nxt[p] = prv[q] = e + 1
                p, q = prv[e], nxt[e]
                nxt[p] = prv[q] = e
                remaining += 1
                placed[i] = False
            elif sc is not None and sc.kind[i] >= 0:
                spent[sc.kind[i]] -= 1
            if not forced:
                break


def _failure(t: _Tables, tr: _Transitions, explored: int, best_placed: int, best: tuple,
             culprit: int) -> Outcome:
    """No linearization: the outcome, with the deepest configuration reached."""
    lo, rel, ib, sid, lw = best
    okix, ibit = t.okix, t.ibit
    placed = {y for y in range(len(t.calls)) if ib & ibit[y] or (okix[y] >= 0 and (
        okix[y] < lo or (rel >> (okix[y] - lo)) & 1))}
    return Outcome(False, explored, (best_placed, placed, tr.state_of[sid], lw), culprit,
                   calls=t.calls, shortage=t.sc.shortage if t.sc else None)


# ---------------------------------------------------------------------------
# Reports


def _op_dict(history: History, c: Call, model: Model) -> dict[str, Any]:
    op = c.op
    return {
        "process": op.process,
        "f": op.f,
        "type": op.type,
        "value": op.value,
        "op": model.describe_op(c.f, c.invoke_value, c.ok_value),
        "line": history.line_of(op.invoke_pos),
        "complete-line": None if op.complete_pos is None else history.line_of(op.complete_pos),
    }


def explain_failure(history: History, key: Any, out: Outcome, model: Model,
                    initial: Any) -> dict[str, Any]:
    """The example for a key with no linearization: the op the search could
    not get past at its deepest, the state then, and the ops concurrent with it."""
    calls = out.calls
    if out.deepest is None:  # proven by counting (reduction 6), no op named by the search
        return _explain_shortage(history, key, out, model)
    depth, placed, state, lw = out.deepest
    if out.culprit >= 0:
        stuck = calls[out.culprit]
    else:  # the op whose return ended the deepest attempt
        stuck = min((c for i, c in enumerate(calls) if i not in placed and c.ret is not None),
                    key=lambda c: c.ret)
    window = [c for c in calls if c is not stuck and c.call < stuck.ret
              and (c.ret is None or c.ret > stuck.call)]
    last = calls[lw] if lw >= 0 else None
    if out.attach is not None:
        out.attach([stuck, *window, *([last] if last is not None else [])])
    if model.explain is not None:
        sentence = model.explain(key=key, depth=depth, state=state, last=last, stuck=stuck,
                                 window=window, calls=calls, line_of=history.line_of,
                                 initial=initial)
    else:
        where = "" if key is None else f"key {key}: "
        op = model.describe_op(stuck.f, stuck.invoke_value, stuck.ok_value)
        sentence = (f"{where}no linearization: after linearizing {plural(depth, 'op')} the state was "
                    f"{model.describe_state(state)}; {op} by process {stuck.op.process} "
                    f"(line {history.line_of(stuck.op.invoke_pos)}) cannot be placed")
    return {
        "key": model.thaw(key),
        "op": _op_dict(history, stuck, model),
        "window": [_op_dict(history, c, model) for c in window],
        "state": model.thaw(state),
        "linearized": depth,
        "explanation": sentence,
    }


def _explain_shortage(history: History, key: Any, out: Outcome, model: Model) -> dict[str, Any]:
    """The example for a key proven invalid by counting (`scarcity`): the
    disjoint demands for one value, and the too few crashed ops that make it."""
    calls, short = out.calls, out.shortage
    if out.attach is not None:
        out.attach([calls[i] for pair in short.demands for i in pair]
                   + [calls[t] for t in short.tokens])
    w, r = short.demands[-1]
    wc, rc = calls[w], calls[r]
    before = model.needs(wc.f, wc.invoke_value, wc.ok_value) if model.read_only(
        wc.f, wc.invoke_value, wc.ok_value) else model.installs(wc.f, wc.invoke_value, wc.ok_value)
    u = model.describe_state(short.value)
    where = "" if key is None else f"key {rm.show(key)}: "

    def who(c: Call) -> str:
        return (f"process {c.op.process}'s {model.describe_op(c.f, c.invoke_value, c.ok_value)} "
                f"(line {history.line_of(c.op.invoke_pos)})")

    pairs = "; ".join(f"{who(calls[b])} after {who(calls[a])}" for a, b in short.demands[:6])
    more = f"; and {len(short.demands) - 6} more" if len(short.demands) > 6 else ""
    supply = ", ".join(who(calls[t]) for t in short.tokens[:6]) or "none"
    sentence = (f"{where}no linearization: {len(short.demands)} times the state had to become {u} "
                f"again between an operation that completed seeing or leaving another state and "
                f"a later one that needed {u}, with no completed operation able to make it {u} "
                f"in between ({pairs}{more}); each time only an operation that crashed could, "
                f"and only {len(short.tokens)} that make {u} were invoked in time ({supply})")
    return {
        "key": model.thaw(key),
        "op": _op_dict(history, rc, model),
        "window": [_op_dict(history, calls[t], model) for t in short.tokens],
        "state": model.thaw(before),
        "linearized": None,
        "explanation": sentence,
    }


# ---------------------------------------------------------------------------
# Register workloads


def _key_ops(history: History, keyed: bool, failed_cas_observes: bool) -> tuple[list, int, int]:
    """(key, its calls, refuted: False) for each key, in the order their first
    op kept appears; and how many keys are named, and observed (an ok op, or
    a failed cas read as "not old")."""
    by_key: dict[Any, list[Call]] = {}
    keys: set[Any] = set()  # every key an op names, judged or not
    judged: set[Any] = set()  # keys where something was observed
    for op in history.ops():
        key, invoke_value, ok_value = rm.parse_op(history, op, keyed)  # validates shapes
        keys.add(key)
        if op.type == "ok" or (failed_cas_observes and op.type == "fail" and op.f == "cas"):
            judged.add(key)  # an observation: an ok op, or a failed cas read as "not old"
        f = op.f
        if op.type == "fail":  # certainly did not happen: constrains nothing...
            if not (failed_cas_observes and f == "cas"):
                continue
            f = rm.FAILED_CAS  # ...but an etcd-style failed cas saw "not old"
        if op.type == "info" and op.f == "read":  # an unknown read constrains nothing
            continue
        by_key.setdefault(key, []).append(Call(
            op, f, invoke_value, ok_value, op.invoke_pos,
            None if op.type == "info" else op.complete_pos))
    return [(key, calls, False) for key, calls in by_key.items()], len(keys), len(judged)


def keys_note(n_keys: int, n_judged: int, n_ops: int) -> str | None:
    """What a per-key verdict says of keys with nothing to judge (no operation on them completed
    ok): with none judged the verdict is unknown and this says why; None when all were judged."""
    if not n_judged:
        return nothing_to_judge("no operation completed ok" if n_ops else "the history is empty")
    if n_judged < n_keys:
        return (f"{n_keys - n_judged} of {plural(n_keys, 'key')} had nothing to judge (no operation on them "
                "completed ok); the verdict covers the others")
    return None

def check_registers(history: History, keyed: bool, initial_value: Any = None,
                    max_configurations: int = MAX_CONFIGURATIONS,
                    model: Model = REGISTER, failed_cas_observes: bool = False) -> Result:
    """Split by key, prune, search each key; merge as false > unknown > true.
    With `failed_cas_observes`, a `fail` cas is an observation (the register
    held a value other than its old one at some instant of it; see
    `register_models`), not a no-op.

    A history read into columns (`register_load.RegisterHistory`, large files) comes with
    keys already refuted by `scarcity.refuted`: those need no search, but
    for the first MAX_EXAMPLES invalid keys, which the search explains
    exactly as it would any other (on a refuted key it can only end
    invalid: the refutation is a shortage `scarcity` finds too)."""
    initial = model.init(initial_value)
    cols = history.columns if isinstance(history, RegisterHistory) else None
    if cols is not None and keyed and model is REGISTER:
        from sleuth.checker.register_columns import key_ops

        found, n_keys, n_judged = key_ops(cols, failed_cas_observes)
        groups = [(k.key, k.calls, k.refuted) for k in found]
    else:
        groups, n_keys, n_judged = _key_ops(history, keyed, failed_cas_observes)
    n_ops = len(cols.call) if cols is not None else len(history.ops())
    valid: bool | str = True
    examples: list[dict[str, Any]] = []
    notes: list[str] = []
    explored = dropped = searched = unknown_keys = bad_keys = early = 0
    for key, calls, refuted in groups:
        if refuted and len(examples) >= MAX_EXAMPLES:
            early += 1
            bad_keys += 1
            valid = merge_valid(valid, False)
            continue
        if callable(calls):
            make, calls = calls, calls()
        else:
            make = None
        kept, d = rm.prune_crashed(calls, initial)
        dropped += d
        searched += len(kept)
        # Most keys are decided at once; only the others pay for counting.
        quick = min(max_configurations, QUICK_CONFIGURATIONS)
        out = search(kept, model, initial, quick, count_producers=False)
        if out.valid == UNKNOWN and max_configurations > quick:
            explored += out.explored
            out = search(kept, model, initial, max_configurations)
        explored += out.explored
        valid = merge_valid(valid, out.valid)
        if out.valid == UNKNOWN:
            unknown_keys += 1
            where = "the register" if key is None else f"key {rm.show(key)}"
            notes.append(f"{where}: search stopped after {out.explored} configurations "
                         f"(max_configurations={max_configurations}); its verdict is unknown")
        elif out.valid is False:
            bad_keys += 1
            if len(examples) < MAX_EXAMPLES:
                if make is not None:
                    out.attach = make.attach
                examples.append(explain_failure(history, key, out, model, initial))
    if not n_judged:
        valid = UNKNOWN
    note = keys_note(n_keys, n_judged, n_ops)
    if note:
        notes.append(note)
    stats = {"keys": len(groups), "ops": n_ops, "ops-searched": searched, "keys-judged": n_judged,
             "crashed-dropped": dropped, "configurations-explored": explored,
             "nonlinearizable-keys": bad_keys, "unknown-keys": unknown_keys,
             "anomaly-counts": {models.NONLINEARIZABLE: bad_keys} if bad_keys else {}}
    if keyed:
        stats["anomaly-units"] = {models.NONLINEARIZABLE: "key"}  # what is counted: keys, not operations
    if early:
        stats["keys-refuted-unsearched"] = early
    if bad_keys > len(examples):
        notes.append(f"{plural(bad_keys, 'key')} {noun(bad_keys, 'is', 'are')} not linearizable; the first "
                     f"{len(examples)} {noun(len(examples), 'is', 'are')} explained")
    return Result(valid=valid, model="linearizable",
                  anomaly_types=[models.NONLINEARIZABLE] if examples else [],
                  anomalies={models.NONLINEARIZABLE: examples} if examples else {},
                  stats=stats, notes=notes)


def check_register(history: History, initial_value: Any = None,
                   max_configurations: int = MAX_CONFIGURATIONS,
                   failed_cas_observes: bool = False) -> Result:
    """`register` workload: independent keys, values `[key, v]`, each key judged alone."""
    return check_registers(history, True, initial_value, max_configurations,
                           failed_cas_observes=failed_cas_observes)


def check_cas_register(history: History, initial_value: Any = None,
                       max_configurations: int = MAX_CONFIGURATIONS,
                       failed_cas_observes: bool = False) -> Result:
    """`cas-register` workload: one register, values bare."""
    return check_registers(history, False, initial_value, max_configurations,
                           failed_cas_observes=failed_cas_observes)
