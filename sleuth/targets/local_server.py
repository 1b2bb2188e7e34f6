"""A database server sleuth starts on this machine (PostgreSQL, MariaDB): its process tree.

A nemesis kills, pauses and resumes the whole tree, not only the server's
first process: PostgreSQL's backends call setsid(), so the postmaster's
process group does not reach them, and a kill that left a backend alive would
not be a crash. Each server says how it starts (`start`) and stops (`stop`);
what they share is here.
"""

from __future__ import annotations

import signal
import subprocess
from typing import Any

from sleuth.cluster import procs


class LocalServer:
    proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc else 0

    def processes(self) -> list[int]:
        """The server's first process and everything below it, parents first."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        return procs.descendants(self.proc.pid)

    def _signal_all(self, sig: int) -> list[int]:
        return procs.signal_tree(self.processes(), sig)

    def kill(self) -> None:
        """kill -9 of every process of the server, as a crash; returns once they are all gone."""
        pids = self._signal_all(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(10)
        procs.wait_gone(pids)

    def pause(self) -> None:
        """SIGSTOP to the whole tree: open sessions hang, new connections are accepted by the
        kernel and then hang."""
        self._signal_all(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal_all(signal.SIGCONT)

    def start(self, timeout: float = 30) -> None: ...
    def stop(self) -> None: ...

    def __enter__(self) -> Any:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
