"""Processes on this machine as /proc shows them (local nodes, the PostgreSQL server)."""

from __future__ import annotations

import os


def _stat(pid: int, tid: str | None = None) -> list[str] | None:
    """The fields of /proc/PID/stat (of one thread's: /proc/PID/task/TID/stat) after the
    command name: state, ppid, …; None once gone."""
    try:
        with open(f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(b")") + 2:].decode().split()  # the name may hold spaces and ')'


def state(pid: int) -> str | None:
    """R, S, D, T (stopped), Z (zombie), …; None when there is no such process."""
    fields = _stat(pid)
    return fields[0] if fields else None


def running(pid: int) -> bool:
    """The process exists and is not a zombie (a zombie is dead, only not yet reaped).

    A process whose main thread is a zombie while another of its threads still
    runs is not dead: SIGKILLed in the middle of an fsync, a storage node's
    main thread ends at once, but the thread blocked in the fsync (state D)
    ends only when the disk answers, and until then the process keeps its
    files and its listening socket (a restart on the same port then failed
    with "address already in use")."""
    st = state(pid)
    if st != "Z":
        return st is not None
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    return any((fields := _stat(pid, t)) and fields[0] != "Z" for t in tids)


def descendants(root: int) -> list[int]:
    """`root` and every process below it, parents before children."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            fields = _stat(int(d))
            if fields:
                children.setdefault(int(fields[1]), []).append(int(d))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def signal_tree(pids: list[int], sig: int) -> list[int]:
    """Send `sig` to a process tree (`descendants` order), children before their parents, so
    a parent never sees a child it could restart; processes already gone are skipped."""
    for pid in reversed(pids):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    return pids


def wait_gone(pids: list[int], timeout: float = 10.0) -> None:
    """Return once none of `pids` runs any more (a killed server's tree), or after `timeout`."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(running(p) for p in pids):
        time.sleep(0.05)
