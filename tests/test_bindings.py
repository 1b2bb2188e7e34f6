"""Timestamp bindings (cluster/bindings.py) and the pgoutput reader (cluster/pgoutput.py).

The acknowledgement rule is seed 002's property 1: an upstream LSN may be
acknowledged only once the global timestamp reached the timestamp bound to it.
Durability and resumption after kill -9 are shown on a real storage log (a
child process appending data and binding together, killed with SIGKILL) and,
live, in tests/test_source.py."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import time

import pytest

from sleuth.cluster import pgoutput
from sleuth.cluster.bindings import Bindings
from sleuth.cluster.storage import Store


def test_bindings_are_monotone_in_both_lsn_and_timestamp():
    b = Bindings([(100, 5), (200, 9)])
    assert b.frontier == (200, 9)
    for lsn, ts in ((200, 10), (150, 12), (300, 9), (300, 8)):
        with pytest.raises(ValueError):
            b.add(lsn, ts)
    b.add(300, 10)
    assert b.pairs() == [(100, 5), (200, 9), (300, 10)]


def test_a_restart_skips_exactly_what_the_last_durable_binding_covers():
    b = Bindings([(100, 5), (200, 9)])
    assert [b.skip(x) for x in (50, 100, 200, 201, 500)] == [True, True, True, False, False]
    assert Bindings().skip(1) is False and Bindings().frontier == (0, 0)


def test_the_ack_rule_waits_for_the_global_timestamp():
    b = Bindings([(100, 5), (200, 9), (300, 14)])
    # nothing may be acknowledged before the global timestamp reaches the first binding
    assert b.ackable(4) == 0
    assert b.ackable(5) == 100
    assert b.ackable(13) == 200  # 300 is bound to 14: not yet
    assert b.ackable(14) == 300 and b.ackable(10**9) == 300


def test_covering_is_the_first_binding_at_or_above_an_lsn():
    b = Bindings([(100, 5), (200, 9)])
    assert b.covering(1) == 5 and b.covering(100) == 5 and b.covering(101) == 9
    assert b.covering(201) is None  # not ingested yet: a real-time-recent read waits


def _tuple(*values: str | None) -> bytes:
    out = struct.pack("!h", len(values))
    for v in values:
        out += b"n" if v is None else b"t" + struct.pack("!i", len(v.encode())) + v.encode()
    return out


def test_pgoutput_messages_decode_as_the_protocol_documents():
    rels: dict = {}
    rel = (b"R" + struct.pack("!I", 16384) + b"public\0src\0" + b"f" + struct.pack("!h", 3)
           + b"\x01n\0" + struct.pack("!Ii", 20, -1) + b"\0v\0" + struct.pack("!Ii", 25, -1)
           + b"\0ok\0" + struct.pack("!Ii", 16, -1))
    assert pgoutput.parse(rel, rels)["relation"].columns == [("n", 20), ("v", 25), ("ok", 16)]
    begin = pgoutput.parse(b"B" + struct.pack("!qqI", 0x1_0000_0010, 7, 42), rels)
    assert begin == {"kind": "B", "final_lsn": 0x1_0000_0010, "commit_ts": 7, "xid": 42}
    ins = pgoutput.parse(b"I" + struct.pack("!I", 16384) + b"N" + _tuple("5", "five", "t"), rels)
    assert ins["relation"] == "src" and ins["new"] == [5, "five", True] and ins["old"] is None
    upd = pgoutput.parse(b"U" + struct.pack("!I", 16384) + b"O" + _tuple("5", "five", "t") + b"N"
                         + _tuple("5", None, "f"), rels)
    assert upd["old"] == [5, "five", True] and upd["new"] == [5, None, False]
    dele = pgoutput.parse(b"D" + struct.pack("!I", 16384) + b"O" + _tuple("5", None, "f"), rels)
    assert dele["old"] == [5, None, False] and dele["new"] is None
    commit = pgoutput.parse(b"C\0" + struct.pack("!qqq", 0x10, 0x38, 9), rels)
    assert commit["end_lsn"] == 0x38 and commit["commit_lsn"] == 0x10
    msg = pgoutput.parse(b"M\x01" + struct.pack("!q", 0x40) + b"sleuth-probe\0" + struct.pack("!i", 2)
                         + b"hi", rels)
    assert msg["prefix"] == "sleuth-probe" and msg["content"] == b"hi" and msg["lsn"] == 0x40
    assert pgoutput.lsn_int("1/A0") == 0x1_0000_00A0 and pgoutput.lsn_text(0x1_0000_00A0) == "1/A0"


WRITER = """
import sys
from sleuth.cluster.storage import Store
s = Store(sys.argv[1])
upper = s.shards["b"].upper if "b" in s.shards else 0
k = len(s.shards["d"].snapshot(upper - 1)) if upper else 0
while True:  # each append: one data row k and the binding (k, ts), in one record
    k += 1
    ts = upper
    s.compare_and_append([
        {"shard": "d", "updates": [[[k], ts, 1]], "expected_upper": upper, "new_upper": ts + 1},
        {"shard": "b", "updates": [[[k, ts], ts, 1]], "expected_upper": upper, "new_upper": ts + 1}],
        epoch=None)
    upper = ts + 1
    print(k, flush=True)
"""


def test_a_binding_is_durable_exactly_with_its_data_across_kill_9(tmp_path):
    """What the source node relies on: storage logs data and binding in one fsynced record."""
    for round_ in range(4):
        p = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE,
                             text=True)
        acknowledged = 0
        deadline = time.monotonic() + 10
        while acknowledged < 20 * (round_ + 1) and time.monotonic() < deadline:
            acknowledged = int(p.stdout.readline())
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        s = Store(str(tmp_path))
        upper = s.shards["b"].upper
        bindings = Bindings(tuple(r) for r, n in s.shards["b"].snapshot(upper - 1) for _ in range(n))
        data = sorted(r[0] for r, n in s.shards["d"].snapshot(upper - 1) for _ in range(n))
        last = bindings.frontier[0]
        assert last >= acknowledged  # nothing acknowledged is lost
        assert data == list(range(1, last + 1))  # no change twice, none missing, none beyond it
        s.wal.close()
