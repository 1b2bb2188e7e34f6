"""The generic cluster machinery (sleuth/targets/described.py) on plain processes."""

from __future__ import annotations

import os
import time

import pytest

from sleuth.targets import Unsupported
from sleuth.targets.described import LIBFAKETIME, LocalCluster, Node


@pytest.mark.skipif(not os.path.exists(LIBFAKETIME), reason="needs Debian's faketime (libfaketime)")
def test_a_faketime_clock_moves_at_once_and_back():
    c = LocalCluster([Node("n1", "127.0.12.1")], clock="faketime", tag="fttest",
                     argv=lambda n: ["sh", "-c", "while :; do date +%s; sleep 0.05; done"])
    try:
        c.start_all()
        time.sleep(0.4)
        c.set_clock("n1", 3_600_000)  # an hour ahead, no restart
        time.sleep(0.4)
        c.set_clock("n1", 0)
        time.sleep(0.4)
        with open(c.nodes["n1"].log) as f:
            seen = [int(x) for x in f.read().split()]
    finally:
        c.down()
    jumps = [b - a for a, b in zip(seen, seen[1:], strict=False)]
    assert any(3590 <= j <= 3610 for j in jumps) and any(-3610 <= j <= -3590 for j in jumps), seen
    assert not os.path.exists(c.base)  # its directory removed


def test_a_cluster_without_faketime_refuses_to_move_a_clock():
    c = LocalCluster([Node("n1", "127.0.12.1")], argv=lambda n: ["true"], tag="noclock")
    try:
        with pytest.raises(Unsupported, match="cannot be moved"):
            c.set_clock("n1", 1000)
    finally:
        c.down()


def test_kill_pause_resume_restart_reach_the_whole_process_tree():
    c = LocalCluster([Node("n1", "127.0.12.1")], tag="tree",
                     argv=lambda n: ["sh", "-c", "sleep 60 & sleep 60 & wait"])
    try:
        c.start_all()
        deadline = time.monotonic() + 5
        while len(c.pids("n1")) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = c.pids("n1")
        assert len(pids) == 3
        c.pause("n1")
        time.sleep(0.1)
        assert all(_state(p) == "T" for p in pids)
        c.resume("n1")
        time.sleep(0.1)
        assert all(_state(p) != "T" for p in pids)
        c.kill("n1")
        assert not c.alive("n1") and all(_state(p) in (None, "Z") for p in pids)
        c.restart("n1")
        assert c.alive("n1")
    finally:
        c.down()
    assert not c.alive("n1")


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None
