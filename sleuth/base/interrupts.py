"""SIGINT and SIGTERM during a long command (`sleuth run`): stop gracefully, then at once.

A CI job that times out sends SIGTERM; a person presses Ctrl-C (SIGINT). The
first signal asks the command to wind down (heal, stop its nodes, judge and
report what it has); a second one means "now", and raises `Interrupted` in the
main thread, except while the command is already tearing down (`shield`),
which must finish so that nothing is left running.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Interrupted(BaseException):
    """A second SIGINT/SIGTERM: stop at once (the nodes are still stopped on the way out).

    A BaseException, as KeyboardInterrupt is, so no `except Exception` swallows it."""


class Signals:
    """SIGINT and SIGTERM during a run. The first only sets `fired` (the run polls it: a
    handler must not take locks the interrupted code may hold); the second raises
    `Interrupted`, unless the run is already tearing down (`shield`), which must finish."""

    def __init__(self) -> None:
        self.fired: str | None = None
        self.again = False
        self.shielded = False
        self.saved: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.saved[sig] = signal.signal(sig, self._on)

    def _on(self, signum: int, frame: Any) -> None:
        if self.fired is None:
            self.fired = signal.Signals(signum).name
            return
        self.again = True
        if not self.shielded:
            self.shielded = True
            raise Interrupted(signal.Signals(signum).name)

    def shield(self) -> None:
        self.shielded = True

    def restore(self) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)
        self.saved = {}


@contextmanager
def deferred() -> Iterator[None]:
    """SIGINT and SIGTERM held back while the block runs, and delivered as it ends: for
    writing one JSON Lines record whole (a record cut by Ctrl-C in the middle, with the
    interrupt's own records after it on the same line, is no JSON at all). A write to a
    pipe that is full waits for its reader meanwhile, as it would anyway."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
