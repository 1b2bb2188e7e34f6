"""How `sleuth check --workload register` reads a file (the registry's reader).

A JSON Lines file of at least `MIN_BYTES` is read into numpy columns
(`register_columns`: the checker then builds Python objects only for the keys
it searches); anything that path cannot read exactly, and every smaller file,
goes to the general reader (`sleuth.history.imports.load`), which also names the line
of any bad input. Small files never import numpy: start-up stays short.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from sleuth.history.jsonl import History, HistoryError, Op

MIN_BYTES = 1 << 20


@dataclass
class RegisterHistory(History):
    """A register history read into columns: `columns` (`register_columns.Columns`) holds
    its operations, and `linearizable.check_registers` takes them from here, the one
    declared way a reader hands a checker columns. `ops()` (which a checker of registers
    does not need) reads the file again with the general reader."""

    columns: Any = field(default=None, repr=False)

    def ops(self) -> list[Op]:
        if self._ops is None:
            from sleuth.history.imports import load

            self._ops = load(self.source, events=False).ops()
        return self._ops


def read_register(path: str | os.PathLike, events: bool = False) -> History:
    """A register history from `path`: columnar when it can be read so exactly
    (JSON Lines, at least MIN_BYTES, events not wanted), else by the general
    reader."""
    source = os.fspath(path)
    try:
        if not events and source.lower().endswith(".jsonl") \
                and os.path.getsize(source) >= MIN_BYTES:
            from sleuth.checker import register_columns as columns

            with open(source, "rb") as fh:
                try:
                    return columns.read(fh, source)
                except columns.Odd:  # not a file the columns hold exactly
                    pass
    except OSError as e:
        raise HistoryError(source, None, e.strerror or str(e)) from None
    from sleuth.history.imports import load

    return load(source, events=events)
