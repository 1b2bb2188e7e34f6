"""The timestamp oracle: Materialize's conformance cases for a timeline, the
invariant read_ts <= write_ts under random use, recovery above everything
handed out before a kill -9 (and the amnesia fault that breaks it), and
epoch fencing of the catalog."""

import os
import random
import signal
import subprocess
import sys
import textwrap

import pytest

from sleuth.cluster.oracle import Fenced, Oracle, Timeline


def test_write_ts_is_monotone_even_when_the_clock_goes_back():
    tl = Timeline()
    assert tl.write_ts(100) == 100
    assert tl.write_ts(50) == 101  # the clock went back: still strictly above
    assert tl.write_ts(200) == 200


def test_write_ts_is_strictly_above_every_read():
    tl = Timeline()
    tl.apply_write(tl.write_ts(10))
    assert tl.read_ts() == 10
    assert tl.write_ts(5) > tl.read_ts()


def test_peek_does_not_advance():
    tl = Timeline()
    w = tl.write_ts(7)
    assert tl.peek_write_ts() == w == tl.peek_write_ts()
    assert tl.write_ts(0) == w + 1


@pytest.mark.parametrize("t,read,write", [(3, 5, 8), (6, 6, 8), (12, 12, 12)])
def test_apply_write_cases(t, read, write):
    tl = Timeline()
    tl.apply_write(5)  # read = write = 5
    tl.write_ts(8)  # write = 8
    tl.apply_write(t)  # below read, between, above write
    assert (tl.read_ts(), tl.peek_write_ts()) == (read, write)


def test_read_never_passes_write_under_random_use():
    rnd = random.Random(1)
    tl = Timeline()
    for _ in range(10_000):
        op = rnd.choice(["read", "write", "apply"])
        if op == "write":
            before = max(tl.read_ts(), tl.peek_write_ts())
            assert tl.write_ts(rnd.randint(0, 5000)) > before
        elif op == "apply":
            tl.apply_write(rnd.randint(0, tl.peek_write_ts()))
        assert tl.read_ts() <= tl.peek_write_ts()


CHILD = textwrap.dedent("""
    import sys
    from sleuth.cluster.oracle import Oracle
    o = Oracle(sys.argv[1], clock=lambda: 0, window=10)
    while True:
        w = o.write_ts()
        o.apply_write(w)
        print(w, o.read_ts(), flush=True)
""")


def run_and_kill(path, n=300):
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True)
    seen = [tuple(map(int, p.stdout.readline().split())) for _ in range(n)]
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=10)
    return max(max(pair) for pair in seen)


def test_restart_after_kill_resumes_above_everything_handed_out(tmp_path):
    path = tmp_path / "oracle.db"
    highest = run_and_kill(path)
    o = Oracle(str(path), clock=lambda: 0, window=10)
    assert o.read_ts() > highest
    assert o.write_ts() > highest


def test_amnesia_fault_goes_backwards(tmp_path):
    path = tmp_path / "oracle.db"
    highest = run_and_kill(path)
    o = Oracle(str(path), clock=lambda: 0, amnesia=True)
    assert o.write_ts() <= highest  # the bug the fault switch reproduces


def test_a_newer_coordinator_fences_the_older(tmp_path):
    o = Oracle(str(tmp_path / "o.db"))
    old = o.bump_epoch()
    o.create_table(old, "t", ["k", "v"])
    new = o.bump_epoch()
    with pytest.raises(Fenced, match=f"epoch {old} is fenced"):
        o.create_table(old, "u", ["x"])
    o.create_table(new, "u", ["x"])
    assert o.tables() == {"t": ["k", "v"], "u": ["x"]}
    o.close()
    assert Oracle(str(tmp_path / "o.db")).epoch() == new  # durable


def test_state_file_is_fsynced_sqlite(tmp_path):
    o = Oracle(str(tmp_path / "o.db"))
    assert o.db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert os.path.exists(tmp_path / "o.db")


def test_a_dropped_tables_shard_is_never_handed_out_again(tmp_path):
    """Each table gets a shard no earlier table of its name used, across restarts; the
    catalog keeps each table's NOT NULL columns; a fenced epoch cannot drop."""
    o = Oracle(str(tmp_path / "o.db"))
    e = o.bump_epoch()
    assert o.create_table(e, "t", [["k", 20]], ["k"]) == "t"  # the layout Parquet readers know
    assert o.catalog() == {"t": {"columns": [["k", 20]], "shard": "t", "not_null": ["k"]}}
    assert o.drop_table(e, "t") == "t" and o.drop_table(e, "t") is None
    assert o.create_table(e, "t", [["k", 20]]) == "t@2"
    newer = o.bump_epoch()
    with pytest.raises(Fenced):
        o.drop_table(e, "t")
    assert o.drop_table(newer, "t") == "t@2"
    o.close()
    o = Oracle(str(tmp_path / "o.db"))
    assert o.catalog() == {}
    assert o.create_table(newer, "t", [["k", 20]]) == "t@3"
    assert o.catalog()["t"] == {"columns": [["k", 20]], "shard": "t@3", "not_null": []}
