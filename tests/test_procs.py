"""sleuth.cluster.procs (cluster/procs.py): what counts as a running process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

from sleuth.cluster import procs

# The main thread ends alone (pthread_exit) while another thread sleeps: the
# process's leader is a zombie, yet the process lives on and keeps its
# listening socket, as a storage node SIGKILLed during an fsync does until the
# thread blocked in the fsync (state D) returns.
LEADER_ENDS = """
import ctypes, socket, sys, threading, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
print(s.getsockname()[1], flush=True)
threading.Thread(target=time.sleep, args=(60,)).start()
ctypes.CDLL(None).pthread_exit(None)
"""


def _wait_for_state(pid: int, want: str) -> None:
    deadline = time.monotonic() + 10
    while procs.state(pid) != want:
        assert time.monotonic() < deadline, f"state {procs.state(pid)}, not {want}"
        time.sleep(0.01)


def test_a_zombie_leader_with_a_live_thread_is_running():
    p = subprocess.Popen([sys.executable, "-c", LEADER_ENDS], stdout=subprocess.PIPE, text=True)
    try:
        port = int(p.stdout.readline())
        _wait_for_state(p.pid, "Z")
        assert procs.running(p.pid)  # the old code said not: its leader is a zombie
        with socket.socket() as s:  # and it still holds its port
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
                s.listen()
                held = False
            except OSError:
                held = True
        assert held
        os.kill(p.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while procs.running(p.pid):
            assert time.monotonic() < deadline, "the killed process still runs"
            time.sleep(0.01)
    finally:
        p.kill()
        p.wait()
    assert not procs.running(p.pid)  # reaped: gone


def test_a_plain_process_runs_until_it_ends():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert procs.running(p.pid)
    finally:
        p.kill()
    while procs.state(p.pid) not in ("Z", None):
        time.sleep(0.01)
    assert not procs.running(p.pid)  # a zombie, not yet reaped: dead
    p.wait()
    assert not procs.running(p.pid)
