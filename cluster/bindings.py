"""Timestamp bindings of a source: upstream LSN -> cluster timestamp (seeds 002, 003).

A binding `(lsn, ts)` says: every upstream transaction that committed at or
below `lsn` is in the cluster's storage at timestamps up to `ts`, and nothing
above `lsn` is. The source writes each binding in the same storage append as
the data it covers (one record, fsynced, all or nothing: cluster/storage.py),
so a binding is durable exactly when its data is.

Rules kept here, in one place, for the source node and its tests:

- bindings are monotone: a later binding has a higher lsn and a higher ts;
- `skip(end_lsn)`: after a restart the upstream resends from the slot's
  confirmed position; a transaction at or below the last durable binding is
  already in storage and must not be ingested twice;
- `ackable(read_ts)` (seed 002, property 1): an LSN may be acknowledged
  upstream only once the global timestamp (the oracle's read timestamp) has
  reached the timestamp bound to it, so every read from then on sees it;
- `covering(lsn)`: the timestamp a real-time-recent read must read at least
  at, once the bindings cover the upstream LSN it learned (seed 003).
"""

from __future__ import annotations

import bisect


class Bindings:
    def __init__(self, pairs: list[tuple[int, int]] = ()):
        self.lsns: list[int] = []
        self.tss: list[int] = []
        for lsn, ts in sorted(pairs):
            self.add(lsn, ts)

    def add(self, lsn: int, ts: int) -> None:
        if self.lsns and not (lsn > self.lsns[-1] and ts > self.tss[-1]):
            raise ValueError(f"binding ({lsn}, {ts}) does not follow ({self.lsns[-1]}, {self.tss[-1]})")
        self.lsns.append(lsn)
        self.tss.append(ts)

    @property
    def frontier(self) -> tuple[int, int]:
        """The last durable binding, (0, 0) before any."""
        return (self.lsns[-1], self.tss[-1]) if self.lsns else (0, 0)

    def skip(self, end_lsn: int) -> bool:
        return end_lsn <= self.frontier[0]

    def ackable(self, read_ts: int) -> int:
        """The highest bound LSN whose timestamp the global timestamp has reached (0: none)."""
        i = bisect.bisect_right(self.tss, read_ts)
        return self.lsns[i - 1] if i else 0

    def covering(self, lsn: int) -> int | None:
        """The timestamp of the first binding at or above lsn; None while none covers it."""
        i = bisect.bisect_left(self.lsns, lsn)
        return self.tss[i] if i < len(self.lsns) else None

    def pairs(self) -> list[tuple[int, int]]:
        return list(zip(self.lsns, self.tss))
