"""Storage shards: compare_and_append, frontiers, fencing, durability (cluster/storage.py)."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from sleuth.cluster.rpc import RpcError, call_sync
from sleuth.cluster.storage import Shard, Store


def batch(shard, updates, expected, new):
    return {"shard": shard, "updates": updates, "expected_upper": expected, "new_upper": new}


def test_compare_and_append_needs_the_exact_upper(tmp_path):
    s = Store(str(tmp_path))
    assert s.compare_and_append([batch("t", [[[1, "a"], 5, 1]], 0, 6)], epoch=1) == {"t": 6}
    with pytest.raises(RpcError) as e:  # someone else's view of the upper
        s.compare_and_append([batch("t", [[[2, "b"], 7, 1]], 5, 8)], epoch=1)
    assert e.value.code == "upper-mismatch" and e.value.extra == {"t": 6}
    with pytest.raises(RpcError) as e:  # an update outside [expected, new)
        s.compare_and_append([batch("t", [[[2, "b"], 9, 1]], 6, 8)], epoch=1)
    assert e.value.code == "invalid"
    with pytest.raises(RpcError) as e:  # the upper must move forward
        s.compare_and_append([batch("t", [], 6, 6)], epoch=1)
    assert e.value.code == "invalid"
    assert s.shards["t"].snapshot(7) == [[[1, "a"], 1]]


def test_append_is_all_or_nothing_across_shards(tmp_path):
    s = Store(str(tmp_path))
    s.compare_and_append([batch("a", [], 0, 3), batch("b", [], 0, 3)], epoch=1)
    with pytest.raises(RpcError):
        s.compare_and_append([batch("a", [[[1], 3, 1]], 3, 4), batch("b", [[[1], 3, 1]], 2, 4)], epoch=1)
    assert s.shards["a"].upper == 3 and s.shards["a"].snapshot(10) == []


def test_fencing_rejects_older_epochs(tmp_path):
    s = Store(str(tmp_path))
    s.compare_and_append([batch("t", [], 0, 2)], epoch=1)
    s.fence(2)
    with pytest.raises(RpcError) as e:
        s.compare_and_append([batch("t", [], 2, 3)], epoch=1)
    assert e.value.code == "fenced"
    s.compare_and_append([batch("t", [], 2, 3)], epoch=2)
    s2 = Store(str(tmp_path))  # the fence is durable
    with pytest.raises(RpcError):
        s2.compare_and_append([batch("t", [], 3, 4)], epoch=1)


def test_snapshot_against_a_brute_force_fold():
    """Random appends and compactions: every snapshot in [since, upper) equals folding all updates."""
    rnd = random.Random(7)
    for trial in range(30):
        shard, log, upper = Shard("t"), [], 0
        for _ in range(60):
            ts = upper + rnd.randint(0, 3)
            ups = [[[rnd.randint(0, 4)], ts, rnd.choice([1, 1, -1])] for _ in range(rnd.randint(0, 3))]
            shard.apply(ups, ts + 1)
            log += ups
            upper = ts + 1
            if rnd.random() < 0.2:
                shard.downgrade_since(rnd.randint(0, upper - 1))
            as_of = rnd.randint(shard.since, upper - 1)
            want: dict = {}
            for row, t, d in log:
                if t <= as_of:
                    want[tuple(row)] = want.get(tuple(row), 0) + d
            want = {r: n for r, n in want.items() if n}
            got = {tuple(r): n for r, n in shard.snapshot(as_of)}
            assert got == want, (trial, as_of)


def test_seal_writes_parquet_and_recovery_reads_it_back(tmp_path):
    s = Store(str(tmp_path))
    s.compare_and_append([batch("t", [[[1, "x"], 1, 1], [[2, "y"], 1, 1]], 0, 2)], epoch=1)
    s.compare_and_append([batch("t", [[[1, "x"], 2, -1]], 2, 3)], epoch=1)
    assert s.seal() == 3
    files = [os.path.join(dp, f) for dp, _, fs in os.walk(tmp_path / "shards") for f in fs]
    assert len(files) == 1 and files[0].endswith(".parquet")
    t = pq.read_table(files[0]).to_pydict()
    assert sorted(zip(t["ts"], t["diff"])) == [(1, 1), (1, 1), (2, -1)]
    s.compare_and_append([batch("t", [[[3, "z"], 4, 1]], 3, 5)], epoch=1)  # in the log only
    r = Store(str(tmp_path))
    assert r.shards["t"].upper == 5
    assert sorted(map(tuple, (row for row, _ in r.shards["t"].snapshot(4)))) == [(2, "y"), (3, "z")]


def _free_port() -> int:
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def _start(tmp_path, port, *faults):
    argv = [sys.executable, "-m", "sleuth.cluster.node", "storage", "--listen", f"127.0.0.1:{port}",
            "--data", str(tmp_path)] + [a for f in faults for a in ("--fault", f)]
    p = subprocess.Popen(argv, stderr=subprocess.DEVNULL, start_new_session=True)
    for _ in range(200):
        try:
            call_sync("127.0.0.1", port, "status", timeout=1)
            return p
        except Exception:
            time.sleep(0.05)
    p.kill()
    raise AssertionError("storage node did not start")


def test_kill_9_loses_no_acknowledged_append(tmp_path):
    port = _free_port()
    p = _start(tmp_path, port)
    try:
        acked = 0
        for i in range(200):
            call_sync("127.0.0.1", port, "append", epoch=1,
                      batches=[batch("t", [[[i], i + 1, 1]], i + 1 if i else 0, i + 2)])
            acked += 1
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        p = _start(tmp_path, port)
        rows = call_sync("127.0.0.1", port, "snapshot", shard="t", as_of=acked)
        assert sorted(r[0][0] for r in rows) == list(range(acked))
    finally:
        p.kill()


def test_ack_before_durable_fault_loses_acknowledged_appends(tmp_path):
    """The fault really loses data on kill -9 (so the checkers have something to catch)."""
    port = _free_port()
    p = _start(tmp_path, port, "ack-before-durable")
    try:
        for i in range(50):
            call_sync("127.0.0.1", port, "append", epoch=1,
                      batches=[batch("t", [[[i], i + 1, 1]], i + 1 if i else 0, i + 2)])
        os.kill(p.pid, signal.SIGKILL)  # before the once-a-second flush
        p.wait()
        p = _start(tmp_path, port)
        upper = call_sync("127.0.0.1", port, "uppers", shards=["t"])["t"]
        assert upper < 51
    finally:
        p.kill()


def test_a_dropped_shard_never_comes_back(tmp_path):
    """DROP TABLE on a storage node: the rows are gone after a restart (from the log and from
    sealed Parquet alike), reads and writes of the shard are refused, other shards keep theirs."""
    s = Store(str(tmp_path))
    s.compare_and_append([{"shard": "t", "updates": [[[1], 1, 1]], "expected_upper": 0, "new_upper": 2},
                          {"shard": "u", "updates": [[[9], 1, 1]], "expected_upper": 0, "new_upper": 2}], 1)
    s.seal()  # t's first row in Parquet
    s.compare_and_append([{"shard": "t", "updates": [[[2], 2, 1]], "expected_upper": 2, "new_upper": 3}], 1)
    assert sorted(r for r, _ in s.shard("t").snapshot(2)) == [[1], [2]]
    assert s.drop("t") and not s.drop("t")
    # a stale coordinator's empty append passes by; rows for the dropped shard are refused
    s.compare_and_append([{"shard": "t", "updates": [], "expected_upper": 3, "new_upper": 4}], 1)
    with pytest.raises(RpcError) as e:
        s.compare_and_append([{"shard": "t", "updates": [[[3], 4, 1]], "expected_upper": 3, "new_upper": 5}], 1)
    assert e.value.code == "dropped"
    s.wal.close()
    for reopen in range(2):
        s = Store(str(tmp_path))
        with pytest.raises(RpcError):
            s.shard("t")
        assert "t" not in s.shards and s.shard("u").snapshot(1) == [[[9], 1]]
        assert not (tmp_path / "shards" / "t").exists()
        if reopen == 0:
            s.seal()  # and after a checkpoint that no longer lists it
        s.wal.close()
