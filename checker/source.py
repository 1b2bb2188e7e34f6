"""The `source` workload's checker: an upstream log, as the cluster shows it (seeds 002, 003).

Clients append to an upstream PostgreSQL: each append is one upstream
transaction that takes the next number `n` from a counter row (locked, so
upstream commit order is the order of `n`, with no gaps: a rolled-back append
takes no number) and inserts the row `(n, v)`. Its ok value records `n` and
`after`, the upstream's WAL position read right after its commit: the commit
lies at or below `after`. Reads go through the cluster (`read`, or `rtr-read`
with real-time recency) and return every row; `ack` reads the source slot's
`confirmed_flush_lsn`, what the cluster has acknowledged upstream.

Shapes (docs/history-format.md): `append` v -> {"v", "n", "lsn", "after"}; `read`,
`rtr-read` and `final-read` null -> [[n, v], …]; `ack` null -> lsn (an integer).
A `final-read` is a real-time-recent read that the workload makes once the load
has stopped, every fault has healed and the cluster has recovered (the run's
final reads): the history marks it so, by its `f`, because nothing else could.

What a correct cluster guarantees, and the anomaly each breach is reported as:

- `duplicate-change` (d): a read holds a row twice: a change ingested twice;
- `invented-change` (c): a row no append wrote, or with another n than its
  append got, or a number shown with two different values;
- `skipped-change` (c): a read shows n but not some m < n: the ingested state
  is not a prefix of the upstream's commit order;
- `stale-rtr-read` (a, seed 003): a real-time-recent read misses an append
  that completed before the read began, or a row that a read which completed
  before it began had shown;
- `acknowledged-not-visible` (b, seed 002 property 1): a read that began after
  an `ack` of LSN A completed misses an append whose `after` is at most A;
- `lost-change` (d): a final read (`final-read`) misses an append that completed
  before it began. Only a final read can prove a change lost: a plain read may
  lag (whatever its place in the history, even the last), and a
  real-time-recent read that misses a change is `stale-rtr-read` (the change
  may still arrive). A history with no ok final read (cut short, an older
  history, or its final reads all failed) is judged on the other rules, and a
  note says that lost changes were not judged.
"""

from __future__ import annotations

import bisect
from collections import Counter
from typing import Any

from sleuth.checker import models
from sleuth.checker.result import UNKNOWN, Result, nothing_to_judge
from sleuth.history.jsonl import History

MAX_EXAMPLES = 20
SKIP_PREFIXES = True  # reads equal to the start of the checked log skip the per-row rules (below)
FINAL = "final-read"  # a real-time-recent read after every fault healed: the only proof of a lost change
RTR = ("rtr-read", FINAL)  # real-time-recent reads
READS = ("read", *RTR)
FS = ("append", "ack", *READS)
NO_FINAL = (f"no final read ({FINAL!r}) completed ok: a lost change (lost-change) is not judged, since "
            "plain reads may lag")


def _where(history: History, op) -> str:
    return f"process {op.process}'s {op.f} (line {history.line_of(op.invoke_pos)})"


def _lines(history: History, *ops) -> list[int]:
    """The invoke lines of the operations an example names (the read first): where
    shrinking starts (`checker.shrink_parts.named_lines`)."""
    return [history.line_of(op.invoke_pos) for op in ops if op is not None]


def _clean_tail(value: list, m: int, appends: dict, seen_as: dict) -> bool:
    """Do the rows of a read after its first m (which are the checked log's) break none of the
    per-row rules of `check_source`: each is [n, v] with n = m + 1, m + 2, ..., v appended
    (committed as n, if the append's outcome is known) and not shown as another n's value?"""
    try:
        for i, row in enumerate(value[m:], m + 1):
            if len(row) != 2:
                return False
            n, v = row
            w = appends.get(v)
            if n != i or w is None or (w.type == "ok" and w.value["n"] != n) or seen_as.get(n, (v,))[0] != v:
                return False
    except TypeError:  # not a row, or an unhashable value: the rules name it
        return False
    return True


class _Prefix:
    """Ops sorted by completion, with a running maximum of some number: the largest one
    completed strictly before a position, and the op it came from."""

    def __init__(self, items: list[tuple[int, int, Any]]):  # (complete_pos, number, op)
        items.sort(key=lambda x: x[0])
        self.pos = [p for p, _, _ in items]
        self.best: list[tuple[int, Any]] = []
        top: tuple[int, Any] = (0, None)
        for _, n, op in items:
            if n > top[0]:
                top = (n, op)
            self.best.append(top)

    def before(self, pos: int) -> tuple[int, Any]:
        i = bisect.bisect_left(self.pos, pos)
        return self.best[i - 1] if i else (0, None)


def check_source(history: History) -> Result:
    appends: dict[Any, Any] = {}  # v -> append op that may have happened (ok or info)
    ok_appends, reads, acks = [], [], []
    for op in history.ops():
        if op.f not in FS:
            raise history.error(op.invoke_pos, f"source ops are {', '.join(FS)}, not {op.f!r}")
        if op.f == "append" and op.type != "fail":
            ok_value = op.type == "ok" and isinstance(op.value, dict)  # a compact load: no invoke value
            appends[op.value["v"] if ok_value else op.invoke_value] = op
            if op.type == "ok":
                if not (isinstance(op.value, dict) and {"n", "after"} <= set(op.value)):
                    raise history.error(op.complete_pos, "an ok append's value is {v, n, lsn, after}")
                ok_appends.append(op)
        elif op.f in READS and op.type == "ok":
            if not isinstance(op.value, list):
                raise history.error(op.complete_pos, f"a {op.f} returns a list of [n, v] rows")
            reads.append(op)
        elif op.f == "ack" and op.type == "ok":
            acks.append(op)

    found: dict[str, list[dict]] = {}
    counts: dict[str, int] = {}

    def add(name: str, explanation: str, **extra: Any) -> None:
        counts[name] = counts.get(name, 0) + 1
        examples = found.setdefault(name, [])
        if len(examples) < MAX_EXAMPLES:
            examples.append({"explanation": explanation, **extra})

    seen_as: dict[int, tuple[Any, Any]] = {}  # n -> (v, the read that first showed it)
    shown: dict[int, set[int] | range] = {}  # read id -> the numbers it showed
    top: dict[int, int] = {}  # read id -> the largest of them (0: none)
    # Every read returns every row, so a run's reads are mostly the same log, growing: `log`
    # holds rows [1, v1], [2, v2], ... that earlier reads showed in that order and that broke
    # no rule below. A read whose rows are the start of `log` breaks none either (each of its
    # rows was checked as it is, and `seen_as` holds its values already), nor does one that
    # is all of `log` and then rows that break none (`_clean_tail`), which extend it: either
    # is passed over by a comparison of lists, not a Python step per row it shares with `log`.
    log: list = []
    for r in reads:
        value, m = r.value, len(log)
        if SKIP_PREFIXES and (value == log[:len(value)] if len(value) <= m
                              else value[:m] == log and _clean_tail(value, m, appends, seen_as)):
            for n, v in value[m:]:
                seen_as.setdefault(n, (v, r))
            log.extend(value[m:])
            shown[r.id], top[r.id] = range(1, len(value) + 1), len(value)
            continue
        rows = [tuple(row) for row in r.value]
        ns = [n for n, _ in rows]
        shown[r.id] = set(ns)
        top[r.id] = max(ns, default=0)
        twice = sorted(n for n, c in Counter(ns).items() if c > 1)
        if twice:
            add(models.DUPLICATE_CHANGE, f"{_where(history, r)} shows change n={twice[0]} "
                                    f"{Counter(ns)[twice[0]]} times: it was ingested more than once",
                read=r.id, n=twice[:10], lines=_lines(history, r))
        for n, v in rows:
            w = appends.get(v)
            if w is None:
                add(models.INVENTED_CHANGE, f"{_where(history, r)} shows ({n}, {v}); no append wrote {v}",
                    read=r.id, row=[n, v], lines=_lines(history, r))
            elif w.type == "ok" and w.value["n"] != n:
                add(models.INVENTED_CHANGE, f"{_where(history, r)} shows {v} as change n={n}, but its "
                                       f"append ({_where(history, w)}) committed it as n={w.value['n']}",
                    read=r.id, row=[n, v], lines=_lines(history, r, w))
            first = seen_as.setdefault(n, (v, r))
            if first[0] != v:
                add(models.INVENTED_CHANGE, f"change n={n} is {first[0]} in {_where(history, first[1])} "
                                       f"but {v} in {_where(history, r)}", read=r.id, row=[n, v],
                    lines=_lines(history, r, first[1]))
        if ns:
            missing = sorted(set(range(1, max(ns) + 1)) - set(ns))
            if missing:
                add(models.SKIPPED_CHANGE, f"{_where(history, r)} shows change n={max(ns)} but not "
                                      f"n={missing[0]}, which the upstream committed before it"
                                      + (f" ({len(missing)} missing in all)" if len(missing) > 1 else ""),
                    read=r.id, missing=missing[:10], lines=_lines(history, r))

    appended = _Prefix([(w.complete_pos, w.value["n"], w) for w in ok_appends])
    read_max = _Prefix([(r.complete_pos, top[r.id], r) for r in reads])
    by_after = sorted(ok_appends, key=lambda w: w.value["after"])
    afters = [w.value["after"] for w in by_after]
    best_upto: list[tuple[int, Any]] = []
    top: tuple[int, Any] = (0, None)
    for w in by_after:
        if w.value["n"] > top[0]:
            top = (w.value["n"], w)
        best_upto.append(top)
    acked = _Prefix([(a.complete_pos, best_upto[i - 1][0] if (i := bisect.bisect_right(afters, a.value)) else 0,
                      (a, best_upto[i - 1][1] if i else None)) for a in acks])

    for r in reads:
        have = shown[r.id]
        n, w = appended.before(r.invoke_pos)
        if r.f == FINAL and n and n not in have:
            add(models.LOST_CHANGE, f"the final read {_where(history, r)} misses change n={n} "
                               f"({_where(history, w)} completed before it began)", read=r.id, n=n,
                lines=_lines(history, r, w))
        if r.f in RTR:
            if n and n not in have:
                add(models.STALE_RTR_READ, f"{_where(history, r)} misses change n={n}, appended by "
                                      f"{_where(history, w)}, which completed before the read began",
                    read=r.id, n=n, lines=_lines(history, r, w))
            m, r0 = read_max.before(r.invoke_pos)
            if m and m not in have:
                add(models.STALE_RTR_READ, f"{_where(history, r)} misses change n={m}, which "
                                      f"{_where(history, r0)} showed and completed before it began",
                    read=r.id, n=m, lines=_lines(history, r, r0))
        k, pair = acked.before(r.invoke_pos)
        if k and k not in have:
            a, w = pair
            add(models.ACKNOWLEDGED_NOT_VISIBLE,
                f"{_where(history, r)} misses change n={k}: {_where(history, a)} saw the cluster "
                f"acknowledge LSN {a.value} upstream before the read began, and {_where(history, w)} "
                f"committed n={k} at or below LSN {w.value['after']}", read=r.id, n=k, ack=a.value,
                lines=_lines(history, r, a, w))

    names = sorted(found)
    valid: bool | str = not names
    notes = []
    finals = sum(r.f == FINAL for r in reads)
    if not reads:
        valid = UNKNOWN
        notes.append(nothing_to_judge("no read completed ok"))
    elif not finals:
        notes.append(NO_FINAL)
    return Result(valid=valid, model="source", anomaly_types=names, anomalies=found,
                  stats={"appends": len(appends), "ok-appends": len(ok_appends), "reads": len(reads),
                         "rtr-reads": sum(r.f == "rtr-read" for r in reads), "final-reads": finals,
                         "acks": len(acks),
                         "anomaly-counts": counts},
                  notes=notes)
