"""The values forgotten transactions wrote, per key: an exact set, about 8 bytes a value.

The rw-register engine forgets transactions (`rw_register`, "Memory") but
must still refuse a value written twice to one key (offline refuses such a
history, at the second write's line) and tell a read of a forgotten write
from a read of a value nobody wrote. Neither may guess: a false "not
written" would let a duplicate through to a certified verdict. So this set is
exact, and compact rather than bounded: per key, the ints (64-bit, not bool)
in sorted `array('q')` runs, merged as a binary counter merges (a new run
swallows the runs before it no longer than itself), so adding n values costs
O(n log n) in all and a lookup one bisect in each of O(log n) runs; a value
above the key's largest is answered at once (the common case: clients write
increasing values). Other values (strings, floats, bools, huge ints) in a
plain set per key, also asked for every value: `True == 1` as a dict key
offline, so a write of `True` and one of `1` are the same value there too.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from heapq import merge
from typing import Any

_LO, _HI = -(2**63), 2**63 - 1


def _packable(v: Any) -> bool:
    return type(v) is int and _LO <= v <= _HI


class Written:
    __slots__ = ("runs", "hi", "other", "count")

    def __init__(self) -> None:
        self.runs: dict[Any, list[array]] = {}  # key -> sorted runs, longest first
        self.hi: dict[Any, int] = {}  # key -> its largest packed value
        self.other: dict[Any, set] = {}  # key -> values not packed
        self.count = 0

    def add(self, k: Any, values: list) -> None:
        """Add a batch of values of key `k` (hashable)."""
        ints = sorted(v for v in values if _packable(v))
        rest = [v for v in values if not _packable(v)]
        self.count += len(values)
        if rest:
            self.other.setdefault(k, set()).update(rest)
        if not ints:
            return
        runs = self.runs.setdefault(k, [])
        run = array("q", ints)
        while runs and len(runs[-1]) <= len(run):
            run = array("q", merge(runs.pop(), run))
        runs.append(run)
        if ints[-1] > self.hi.get(k, ints[-1] - 1):
            self.hi[k] = ints[-1]

    def __contains__(self, kv: tuple) -> bool:
        """Was value v written to key k? (TypeError for an unhashable one, as a dict.)"""
        k, v = kv
        other = self.other.get(k)
        if other is not None and v in other:
            return True
        if type(v) is bool:  # equal to 0 or 1, as a dict key
            v = int(v)
        elif type(v) is float:  # 2.0 == 2 as well
            if not v.is_integer():
                return False
            v = int(v)
        if not _packable(v):
            return False
        hi = self.hi.get(k)
        if hi is None or v > hi:
            return False
        for run in self.runs[k]:
            i = bisect_left(run, v)
            if i < len(run) and run[i] == v:
                return True
        return False

    def nbytes(self) -> int:
        """The packed runs' size (the sets' not counted)."""
        return sum(run.itemsize * len(run) for runs in self.runs.values() for run in runs)
