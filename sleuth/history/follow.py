"""Following a history as it is written (`sleuth check --follow`).

A writer appends JSON Lines events (docs/history-format.md) to a file, or to
standard input; `follow` reads what is there, waits for more, and hands each
event to an online engine (`sleuth.checker.online`) as it arrives. The
history ends at

- the **end marker**, an ordinary nemesis event of f `"end"`:
  `{"index": N, "time": T, "type": "info", "process": "nemesis", "f": "end"}`
  (a valid event, so the file stays a valid history that offline `sleuth
  check` reads as it is; lines after it are not read);
- the end of standard input (its writer closed it);
- `idle_timeout` seconds without the file growing;
- Ctrl-C or SIGTERM.

Events are validated exactly as the offline readers validate them (the same
decoders and RULES; a bad line raises `HistoryError` naming it).
"""

from __future__ import annotations

import os
import select
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from sleuth.base.interrupts import deferred
from sleuth.history.jsonl import (
    NEMESIS,
    History,
    HistoryError,
    decode_block,
    events_by_rules,
    txn_lines,
    whole_lines,
)

END_F = "end"  # f of the end marker (a nemesis event)
READ_BYTES = 1 << 20
POLL = 0.02  # seconds between looks at a file that has not grown


def is_end(process: Any, f: str) -> bool:
    return process == NEMESIS and f == END_F


@dataclass
class Followed:
    """How a followed history ended, and where its whole lines are for the final pass."""

    ended_by: str  # "end marker", "end of input", "idle timeout", "interrupted"
    events: int
    path: str  # a file holding exactly the lines read (the file itself when that is all of it)
    temporary: bool  # `path` is a copy, to be removed
    partial: bool  # a last line without its newline was left out
    seconds: float


def follow(source: str, micro_ops: tuple[str, ...], on_event: Callable[..., None],
           tick: Callable[[], None], idle_timeout: float | None = None,
           on_run: Callable[[list, int], None] | None = None) -> Followed:
    """Read `source` (a path, or "-" for standard input) as it grows, calling
    `on_event(type, process, f, value, time, node, error, ts, line)` for each event in order
    and `tick()` whenever it has read all there is (caught up with the writer). The `History` errors name `source` and the line.
    With `on_run`, a run of events read by the fast reader (each line one event, their
    indexes in order) goes to `on_run(events, first_line)` at once instead (the events
    have the fields on_event takes; their lines follow each other): one call a block,
    not one an event."""
    t0 = time.monotonic()
    stdin = source == "-"
    name = "<stdin>" if stdin else source
    tee = None
    if stdin:
        fd = 0
        tee = tempfile.NamedTemporaryFile(prefix="sleuth-follow-", suffix=".jsonl", delete=False)
    else:
        try:
            fd = os.open(source, os.O_RDONLY)
        except OSError as e:
            raise HistoryError(source, None, e.strerror or str(e)) from None
    txn = txn_lines(micro_ops) if micro_ops else None
    carry = b""
    consumed = 0  # bytes of whole lines read
    pos = 0  # events read
    line = 0  # lines read (blank ones too)
    ended_by = None
    last_growth = time.monotonic()
    try:
        while ended_by is None:
            try:
                if stdin:
                    ready, _, _ = select.select([fd], [], [], POLL)
                    data = os.read(fd, READ_BYTES) if ready else None
                    if data == b"":
                        ended_by = "end of input"
                        break
                else:
                    data = os.read(fd, READ_BYTES) or None
                if data is None:
                    tick()
                    if idle_timeout is not None and time.monotonic() - last_growth >= idle_timeout:
                        ended_by = "idle timeout"
                    elif not stdin:
                        time.sleep(POLL)
                    continue
                last_growth = time.monotonic()
                block, carry = whole_lines(carry + data)
                if not block:
                    continue
                with deferred():  # a block is judged whole: an interrupt comes after it, counted
                    n, lines, end_at = _feed_block(block, name, pos, line, txn, on_event, on_run)
                    if end_at is not None:
                        block = block[:end_at]
                        ended_by = "end marker"
                    consumed += len(block)
                    if tee is not None:
                        tee.write(block)
                    pos += n
                    line += lines
            except KeyboardInterrupt:
                ended_by = "interrupted"
    finally:
        if not stdin:
            os.close(fd)
        if tee is not None:
            tee.close()
    partial = bool(carry.strip()) and ended_by != "end marker"
    if stdin:
        path, temporary = tee.name, True
    elif os.path.getsize(source) == consumed:
        path, temporary = source, False
    else:  # lines after the end marker, or a last line not yet whole: judge what was read
        fh = tempfile.NamedTemporaryFile(prefix="sleuth-follow-", suffix=".jsonl", delete=False)
        with fh, open(source, "rb") as src:
            _copy(src, fh, consumed)
        path, temporary = fh.name, True
    return Followed(ended_by, pos, path, temporary, partial, time.monotonic() - t0)


def _copy(src, dst, n: int) -> None:
    while n > 0:
        chunk = src.read(min(n, 8 << 20))
        if not chunk:
            break
        dst.write(chunk)
        n -= len(chunk)


def _feed_block(block: bytes, source: str, pos: int, line: int, txn, on_event,
                on_run=None) -> tuple[int, int, int | None]:
    """Feed the events of `block` (whole lines; the first is line `line` + 1, event `pos`).
    Returns (events fed, lines passed, byte offset just past the end marker or None)."""
    try:
        lines = decode_block(block, txn)
        fast = len(lines) == block.count(b"\n")  # else a blank line: the slow path counts lines
    except (msgspec.MsgspecError, ValueError):
        fast = False
    if fast:
        fast = [e.index for e in lines] == list(range(pos, pos + len(lines)))  # (a Struct's field: faster than attrgetter)
    if fast:
        # the end marker names the nemesis: a block whose bytes cannot (no "nemesis", no \u
        # escape that could spell it) has none, and is not looked through event by event
        end = None
        if b'"nemesis"' in block or b"\\u" in block:
            end = next((j for j, e in enumerate(lines) if e.process == NEMESIS and e.f == END_F), None)
        if end is not None:
            lines = lines[:end + 1]
        if on_run is not None:
            on_run(lines, line + 1)
        else:
            for j, e in enumerate(lines):
                on_event(e.type, e.process, e.f, e.value, e.time, e.node, e.error, e.ts, line + j + 1)
        if end is not None:
            return end + 1, end + 1, _nth_newline(block, end) + 1
        return len(lines), len(lines), None
    n = 0
    raw = block.split(b"\n")[:-1]  # whole lines: the block ends with a newline
    for lineno, ev in events_by_rules(raw, source, line, pos):
        n += 1
        on_event(ev.type, ev.process, ev.f, ev.value, ev.time, ev.node, ev.error, ev.ts, lineno)
        if is_end(ev.process, ev.f):
            return n, lineno - line, _nth_newline(block, lineno - line - 1) + 1
    return n, len(raw), None


def _nth_newline(block: bytes, j: int) -> int:
    at = -1
    for _ in range(j + 1):
        at = block.index(b"\n", at + 1)
    return at


def remove(followed: Followed) -> None:
    if followed.temporary:
        try:
            os.unlink(followed.path)
        except OSError:
            pass


class Lines:
    """`History.lines` for a followed history: None while every line is an event."""

    def __init__(self, history: History):
        self.history = history

    def note(self, pos: int, lineno: int) -> None:
        h = self.history
        if h.lines is None and lineno != pos + 1:
            h.lines = list(range(1, pos + 1))
        if h.lines is not None:
            h.lines.append(lineno)
