"""This process's peak resident memory, as the online record and the benchmarks report it.

`getrusage(RUSAGE_SELF).ru_maxrss` is not this process's own figure on Linux: the
kernel carries the high-water mark across `execve`, so a process started by a large
one (Python's `subprocess` starts children by vfork, sharing the parent's memory
until the exec) reports at least its parent's size then. A benchmark that wrote a
10M-transaction history in-process and then started `sleuth check --follow` saw
419 MiB where the check itself peaked at 74. `VmHWM` in /proc/self/status is the
high-water mark of this process's own address space, new at the exec.
"""

from __future__ import annotations

import resource


def peak_rss_mib() -> float:
    """Peak resident memory of this process since it started (its exec), in MiB."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # elsewhere: KiB (Linux) at best
