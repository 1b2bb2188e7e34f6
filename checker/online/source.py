"""The source workload, online: `checker.source`'s rules, those a prefix already proves.

Each read is judged when it completes, against what was known when it began
(every operation that completed before its invoke is known at its invoke,
so the offline rules' "completed before the read began" is a snapshot taken
then, exact on every prefix):

- `duplicate-change`, `skipped-change`: the read's own rows prove them;
- `invented-change`, a number shown with two values by two reads, or a value
  shown under another number than its append committed it as: known once
  both reads, or the read and the append's ok, have arrived (values are
  unique per append, as the workload guarantees);
- `stale-rtr-read` and `lost-change`: the largest number of an ok append
  that completed before the read began, and the largest a read that
  completed before it began showed, are both known at the read's invoke;
- `acknowledged-not-visible`: the largest number committed at or below the
  largest LSN an ack had confirmed before the read began. Offline takes it
  over every ok append of the history, online over those known so far: the
  online number is offline's or lower. So it is reported only for a read
  without gaps (rows 1..m): one that misses the online number shows none
  above it, so it misses offline's too.

Left to the final pass: a row of a value no append has written *so far*
(`invented-change`: an append of it may still be invoked), an
acknowledged-not-visible read that also skips a change (it is reported as
`skipped-change` online), and whether a history with no final read could
judge lost changes at all (the final pass's note).

Memory: the numbers and values the reads have shown (the log, which the
reads return whole anyway), and the ok appends by LSN.
"""

from __future__ import annotations

import bisect
from collections import Counter
from typing import Any

from sleuth.checker import models
from sleuth.checker.online import Found, lines_of, now
from sleuth.checker.source import FINAL, FS, READS, RTR, _where
from sleuth.history.jsonl import History, Op

MAX_REPORTS = 8  # of each type; the rest are counted


class Source:
    def __init__(self, history: History, report):
        self.history, self.report = history, report
        self.appends: dict[Any, Op] = {}  # v -> its append (ok, info or pending)
        self.unsure: dict[Any, list[tuple[Op, int]]] = {}  # v of a pending append -> (read, n shown)
        self.appended: tuple[int, Op | None] = (0, None)  # the largest n of an ok append so far
        self.read_top: tuple[int, Op | None] = (0, None)  # the largest n an ok read showed so far
        self.acked: tuple[Any, Op | None] = (None, None)  # the largest LSN an ok ack returned so far
        self.at_invoke: dict[int, tuple] = {}  # read -> (appended, read_top, acked) when it began
        self.seen_as: dict[int, tuple[Any, Op]] = {}  # n -> (v, the read that first showed it)
        self.by_after: list[tuple[Any, int, int]] = []  # ok appends: (after, n, id), sorted
        self.best: list[tuple[int, int]] = []  # prefix maxima of by_after's (n, id)
        self.ok_appends: dict[int, Op] = {}  # id -> ok append
        self.counts: dict[str, int] = {}
        self.found: list[Found] = []
        self.ops = 0
        self.line = 0
        self.time: int | None = None

    def invoked(self, op: Op, time: int) -> None:
        self.ops += 1
        if op.f not in FS:
            raise self.history.error(op.invoke_pos, f"source ops are {', '.join(FS)}, not {op.f!r}")
        if op.f == "append":
            try:
                self.appends[op.invoke_value] = op
            except TypeError:
                pass  # unhashable: offline names it
        elif op.f in READS:
            self.at_invoke[op.id] = (self.appended, self.read_top, self.acked)

    def completed(self, op: Op, time: int) -> None:
        h = self.history
        self.line, self.time = h.line_of(op.complete_pos), time
        if op.f == "append":
            self._append(op)
        elif op.f == "ack":
            if op.type == "ok" and (self.acked[0] is None or op.value > self.acked[0]):
                self.acked = (op.value, op)
        else:
            snapshot = self.at_invoke.pop(op.id)
            if op.type != "ok":
                return
            if not isinstance(op.value, list):
                raise h.error(op.complete_pos, f"a {op.f} returns a list of [n, v] rows")
            try:
                self._read(op, *snapshot)
            except (TypeError, ValueError):  # a row that is no [n, v]: offline names it
                pass

    def _append(self, op: Op) -> None:
        h = self.history
        v = op.invoke_value
        if op.type == "fail":
            if self.appends.get(v) is op:
                del self.appends[v]
            self.unsure.pop(v, None)
            return
        if op.type != "ok":
            self.unsure.pop(v, None)
            return
        if not (isinstance(op.value, dict) and {"n", "after"} <= set(op.value)):
            raise h.error(op.complete_pos, "an ok append's value is {v, n, lsn, after}")
        n, after = op.value["n"], op.value["after"]
        if op.value.get("v", v) != v:
            self.appends[op.value["v"]] = op
        if n > self.appended[0]:
            self.appended = (n, op)
        item = (after, n, op.id)
        self.ok_appends[op.id] = op
        if not self.by_after or after >= self.by_after[-1][0]:
            self.by_after.append(item)
            top = self.best[-1] if self.best else (0, -1)
            self.best.append(max(top, (n, op.id)))
        else:  # out of LSN order: sorted again, maxima again
            bisect.insort(self.by_after, item)
            self.best, top = [], (0, -1)
            for _, m, i in self.by_after:
                top = max(top, (m, i))
                self.best.append(top)
        for r, shown_n in self.unsure.pop(v, ()):
            self._committed_as(r, v, shown_n, op)

    def _committed_as(self, r: Op, v: Any, n: int, w: Op) -> None:
        if w.value["n"] != n:
            h = self.history
            self._emit(models.INVENTED_CHANGE, [r, w],
                       f"{_where(h, r)} shows {v} as change n={n}, but its append ({_where(h, w)}) "
                       f"committed it as n={w.value['n']}")

    def _read(self, r: Op, appended: tuple, read_top: tuple, acked: tuple) -> None:
        h = self.history
        rows = [tuple(row) for row in r.value]
        ns = [n for n, _ in rows]
        have = set(ns)
        top = max(ns, default=0)
        counted = Counter(ns)
        twice = sorted(n for n, c in counted.items() if c > 1)
        if twice:
            self._emit(models.DUPLICATE_CHANGE, [r], f"{_where(h, r)} shows change n={twice[0]} "
                                                f"{counted[twice[0]]} times: it was ingested more than once")
        for n, v in rows:
            w = self.appends.get(v)
            if w is not None and w.complete_pos is None:
                self.unsure.setdefault(v, []).append((r, n))
            elif w is not None and w.type == "ok":
                self._committed_as(r, v, n, w)
            first = self.seen_as.setdefault(n, (v, r))
            if first[0] != v:
                self._emit(models.INVENTED_CHANGE, [r, first[1]], f"change n={n} is {first[0]} in "
                                                             f"{_where(h, first[1])} but {v} in {_where(h, r)}")
        gaps = bool(ns) and len(have) != top
        if gaps:
            missing = sorted(set(range(1, top + 1)) - have)
            self._emit(models.SKIPPED_CHANGE, [r], f"{_where(h, r)} shows change n={top} but not n={missing[0]}, "
                                              "which the upstream committed before it"
                       + (f" ({len(missing)} missing in all)" if len(missing) > 1 else ""))
        if top > self.read_top[0]:
            self.read_top = (top, r)
        n, w = appended
        if r.f == FINAL and n and n not in have:
            self._emit(models.LOST_CHANGE, [r, w], f"the final read {_where(h, r)} misses change n={n} "
                                              f"({_where(h, w)} completed before it began)")
        if r.f in RTR:
            if n and n not in have:
                self._emit(models.STALE_RTR_READ, [r, w], f"{_where(h, r)} misses change n={n}, appended by "
                                                     f"{_where(h, w)}, which completed before the read began")
            m, r0 = read_top
            if m and m not in have:
                self._emit(models.STALE_RTR_READ, [r, r0], f"{_where(h, r)} misses change n={m}, which "
                                                      f"{_where(h, r0)} showed and completed before it began")
        lsn, a = acked
        if lsn is None or gaps:
            return
        i = bisect.bisect_right(self.by_after, (lsn, float("inf"), float("inf")))
        if not i:
            return
        k, wid = self.best[i - 1]
        if k and k not in have:
            w = self.ok_appends[wid]
            self._emit(models.ACKNOWLEDGED_NOT_VISIBLE, [r, a, w],
                       f"{_where(h, r)} misses change n={k}: {_where(h, a)} saw the cluster acknowledge LSN "
                       f"{lsn} upstream before the read began, and {_where(h, w)} committed n={k} at or "
                       f"below LSN {w.value['after']}")

    def _emit(self, name: str, ops: list[Op], text: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1
        if self.counts[name] > MAX_REPORTS:
            return
        f = Found(name, self.line, self.time, now(), text, lines_of(self.history, ops, self.line))
        self.found.append(f)
        self.report(f)

    def tick(self, force: bool = False) -> None:
        """Nothing waits on time."""

    def stats(self) -> dict[str, Any]:
        return {"ops": self.ops, "log": len(self.seen_as), "counts": dict(self.counts)}
