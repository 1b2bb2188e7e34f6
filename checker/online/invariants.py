"""Counter and bank, online: each read judged when it completes.

Counter (`checker.counter`): a read must lie between what must have been
added (every ok add that completed before the read was invoked) and what
might have been (every add invoked before the read completed and not known
to have failed). At the read's completion both sums are known, except that
an add still pending then counts as possibly added: the interval online is
the offline one or wider (an add that fails later only narrows it), so a
read outside it is outside offline's too, in every extension. A read that
only a later failure puts out of bounds is left to the final pass.

Bank (`checker.bank`): every ok read sums to the total, and with
`--no-negative` shows no negative balance. A balance is judged as its read
completes. The total is `--total`, or offline takes it from the first ok
read in invoke order: online it is fixed once that read is known (every read
invoked before it has completed, none of them ok), and the reads that
completed before are judged then.

Memory: counter keeps sums and the reads in flight (flat); bank keeps the
reads that wait for the total (none once it is known).
"""

from __future__ import annotations

from typing import Any

from sleuth.checker import models
from sleuth.checker.counter import _number, _plain
from sleuth.checker.online import Found, lines_of, now
from sleuth.history.jsonl import History, Op


class Counter:
    def __init__(self, history: History, report):
        self.history, self.report = history, report
        self.ok_pos = self.ok_neg = 0.0  # ok adds completed so far
        self.inv_pos = self.inv_neg = 0.0  # adds invoked so far and not failed
        self.acked = self.begun = 0
        self.at_invoke: dict[int, tuple[float, float, int]] = {}  # read -> ok sums when it began
        self.amount: dict[int, Any] = {}  # pending add -> its amount
        self.found: list[Found] = []
        self.ops = 0

    def invoked(self, op: Op, time: int) -> None:
        self.ops += 1
        if op.f == "add":
            n = _number(self.history, op, op.invoke_value)
            self.amount[op.id] = n
            self.begun += 1
            if n >= 0:
                self.inv_pos += n
            else:
                self.inv_neg += n
        elif op.f == "read":
            self.at_invoke[op.id] = (self.ok_pos, self.ok_neg, self.acked)
        else:
            raise self.history.error(op.invoke_pos, f"counter ops are add and read, not {op.f!r}")

    def completed(self, op: Op, time: int) -> None:
        if op.f == "add":
            n = self.amount.pop(op.id)
            if op.type == "ok":
                self.acked += 1
                if n >= 0:
                    self.ok_pos += n
                else:
                    self.ok_neg += n
            elif op.type == "fail":  # never happened: no longer possible
                self.begun -= 1
                if n >= 0:
                    self.inv_pos -= n
                else:
                    self.inv_neg -= n
            return
        pos, neg, acked = self.at_invoke.pop(op.id)
        if op.type != "ok":
            return
        v = _number(self.history, op, op.value)
        lower, upper = pos + self.inv_neg, self.inv_pos + neg
        if lower <= v <= upper:
            return
        h = self.history
        name = models.COUNTER_TOO_LOW if v < lower else models.COUNTER_TOO_HIGH
        line = h.line_of(op.complete_pos)
        f = Found(name, line, time, now(),
                  f"read by process {op.process} (line {h.line_of(op.invoke_pos)}) returned {v}, but it must "
                  f"lie in [{_plain(lower)}, {_plain(upper)}]: {acked} adds were acknowledged before it began "
                  f"and {self.begun} had begun before it ended", lines_of(h, [op], line))
        self.found.append(f)
        self.report(f)

    def tick(self, force: bool = False) -> None:
        """Nothing waits: each read is judged as it completes."""

    def stats(self) -> dict[str, Any]:
        return {"ops": self.ops}


class Bank:
    def __init__(self, history: History, report, total: int | None = None, no_negative: bool = False):
        self.history, self.report = history, report
        self.total, self.no_negative = total, no_negative
        self.reads: list[Op] = []  # reads in invoke order, until the total is known
        self.found: list[Found] = []
        self.ops = 0

    def invoked(self, op: Op, time: int) -> None:
        self.ops += 1
        h = self.history
        if op.f == "transfer":
            v = op.invoke_value
            if not (isinstance(v, dict) and {"from", "to", "amount"} <= set(v)):
                raise h.error(op.invoke_pos, f"a transfer value must be {{from, to, amount}}, got {v!r}")
        elif op.f != "read":
            raise h.error(op.invoke_pos, f"bank ops are transfer and read, not {op.f!r}")
        elif self.total is None:
            self.reads.append(op)

    def completed(self, op: Op, time: int) -> None:
        if op.f != "read" or op.type != "ok":
            if self.total is None and op.f == "read":
                self._fix_total(time)
            return
        balances = op.value
        if not isinstance(balances, dict) or not all(type(b) in (int, float) for b in balances.values()):
            raise self.history.error(op.complete_pos, f"a bank read must be {{account: balance}}, got {balances!r}")
        if self.total is None:
            self._fix_total(time)
            if self.total is None:
                return  # judged when the total is known
        self._judge(op, time)

    def _fix_total(self, time: int) -> None:
        """The first read in invoke order that completed ok gives the total, once no read
        invoked before it is still pending; the reads that waited are judged then."""
        for op in self.reads:
            if op.complete_pos is None:  # pending: it may yet be ok and give the total
                return
            if op.type == "ok":
                self.total = sum(op.value.values())
                break
        else:
            return
        waited, self.reads = self.reads, []
        for op in waited:
            if op.type == "ok":
                self._judge(op, time)

    def _judge(self, op: Op, time: int) -> None:
        h = self.history
        balances = op.value
        line = h.line_of(op.complete_pos)
        s = sum(balances.values())
        if s != self.total:
            self._emit(models.WRONG_TOTAL, op, line, time,
                       f"read by process {op.process} (line {h.line_of(op.invoke_pos)}) sums to {s}, expected "
                       f"{self.total} ({'missing' if s < self.total else 'extra'} {abs(self.total - s)})")
        negative = {a: b for a, b in balances.items() if b < 0}
        if self.no_negative and negative:
            self._emit(models.NEGATIVE_BALANCE, op, line, time,
                       f"read by process {op.process} (line {h.line_of(op.invoke_pos)}) shows negative "
                       f"balances {negative}")

    def _emit(self, name: str, op: Op, line: int, time: int, text: str) -> None:
        f = Found(name, line, time, now(), text, lines_of(self.history, [op], line))
        self.found.append(f)
        self.report(f)

    def tick(self, force: bool = False) -> None:
        """Nothing waits on time."""

    def stats(self) -> dict[str, Any]:
        return {"ops": self.ops}
