"""A mapping kept out of the process's memory: what an engine must remember of what it forgot.

The list-append engine keeps, for as long as the history runs, a summary of each
key it forgot and a record of each *floating* writer (`list_append`, "Memory"):
a final read of a key may come at any time, and must be checked against them. As
Python objects (a dict entry, a key and a value object) they cost some 180 and 100
bytes each, so a history that retires keys grew by some 15 MiB a million
transactions. `Spill` holds them in a private temporary SQLite database
(`sqlite3.connect("")`: SQLite removes it when the connection closes, or the
process ends). Its page cache is bounded (`CACHE_KIB`); beyond it, pages go to a
temporary file. So the process's memory does not grow with the keys retired:
the file does, by some 60 bytes an entry.

Why this costs little time: the engine asks only when a key is named that is not
live (`Engine.is_dead`: its first naming, or a read of a forgotten key) and when a
forgotten writer's append is shown or ordered, some microseconds each: a few per
retired key, against the hundreds of microseconds of judging the transactions
that used it.

Keys SQLite holds as Python compares them: ints (and bools, and floats with an
integral value, which equal those ints in a dict) within 64 bits, and strings; any
other key, and an int value beyond 64 bits, stays in a dict beside (`other`), so
the mapping is a dict's for every key.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

CACHE_KIB = 1024  # SQLite's page cache: the most this costs in memory
_LO, _HI = -(1 << 63), 1 << 63
_MISSING = object()


def _column(k: Any) -> Any:
    """The key as SQLite holds it, or None if it cannot (the dict beside holds it)."""
    t = type(k)
    if t is str:
        return k
    if t is int or t is bool:
        return int(k) if _LO <= k < _HI else None
    if t is float and k.is_integer() and _LO <= k < _HI:
        return int(k)
    return None


def _fits(v: Any) -> bool:
    return type(v) is bytes or (type(v) is int and _LO <= v < _HI)


class Spill:
    """key -> bytes or int, a dict's semantics, held in SQLite (see the module's docstring)."""

    def __init__(self) -> None:
        self._db: sqlite3.Connection | None = None  # opened at the first entry
        self.other: dict[Any, Any] = {}

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
        for pragma in (f"cache_size=-{CACHE_KIB}", "journal_mode=OFF", "synchronous=OFF", "temp_store=FILE"):
            db.execute(f"PRAGMA {pragma}")
        db.execute("CREATE TABLE t (k PRIMARY KEY, v) WITHOUT ROWID")
        self._db = db
        return db

    def get(self, k: Any, default: Any = None) -> Any:
        c = _column(k)
        if c is None or k in self.other:
            return self.other.get(k, default)
        if self._db is None:
            return default
        row = self._db.execute("SELECT v FROM t WHERE k = ?", (c,)).fetchone()
        return default if row is None else row[0]

    def __contains__(self, k: Any) -> bool:
        return self.get(k, _MISSING) is not _MISSING

    def __getitem__(self, k: Any) -> Any:
        v = self.get(k, _MISSING)
        if v is _MISSING:
            raise KeyError(k)
        return v

    def __setitem__(self, k: Any, v: Any) -> None:
        c = _column(k)
        if c is None or not _fits(v):
            self.pop(k, None)
            self.other[k] = v
            return
        if k in self.other:
            del self.other[k]
        db = self._db or self._open()
        db.execute("INSERT OR REPLACE INTO t VALUES (?, ?)", (c, v))

    def pop(self, k: Any, default: Any = _MISSING) -> Any:
        v = self.get(k, _MISSING)
        if v is _MISSING:
            if default is _MISSING:
                raise KeyError(k)
            return default
        if k in self.other:
            del self.other[k]
        else:
            self._db.execute("DELETE FROM t WHERE k = ?", (_column(k),))
        return v

    def __delitem__(self, k: Any) -> None:
        self.pop(k)

    def __len__(self) -> int:
        n = 0 if self._db is None else self._db.execute("SELECT COUNT(*) FROM t").fetchone()[0]
        return n + len(self.other)

    def items(self) -> Iterator[tuple[Any, Any]]:
        """Every entry (SQLite's keys as it holds them: an int for a bool or an integral float)."""
        yield from list(self.other.items())
        if self._db is not None:
            yield from self._db.execute("SELECT k, v FROM t")  # streamed: not all held at once

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
