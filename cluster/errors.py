"""Why a `sleuth cluster` step could not proceed, and the exit status that says so.

Its own module so that control.py and the runtimes it loads (runtime_ssh.py
raises these too) need not import each other.
"""

from __future__ import annotations

from sleuth.base.exits import BAD_INPUT, CRASHED


class ClusterError(Exception):
    """A cluster command cannot proceed because of what it was asked (printed as one line;
    exit 254): an unknown cluster or node, a bad option, a malformed nodes file."""

    status = BAD_INPUT


class ClusterFailed(ClusterError):
    """The cluster itself failed: a node would not start or answer, a host or engine
    refused (exit 255: sleuth could not do its job, which is not the user's input)."""

    status = CRASHED
