"""`sleuth check` interrupted (docs/exit-status.md): Ctrl-C, or SIGTERM, which a CI job's
timeout sends, ends it with "interrupted" and exit 2 (SIGTERM used to kill it outright:
143, no word); with --json every input file still has its one JSON object, each line
whole: the files judged as judged, the rest "unknown", "interrupted: not judged"."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from sleuth.base import exits
from sleuth.workloads.sim_list_append import write_sim

SLEUTH = os.path.join(os.path.dirname(sys.executable), "sleuth")


def _as_in_a_terminal() -> None:
    """The child's SIGINT as a terminal's foreground job has it. A job a non-interactive
    shell starts in the background (CI runners often do) inherits SIGINT ignored, and
    Python, rightly, keeps it so: Ctrl-C there is not meant for it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _records(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]  # each line whole JSON, or this fails


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_interrupted_while_judging_a_file(tmp_path, sig):
    small, large, last = tmp_path / "small.jsonl", tmp_path / "large.jsonl", tmp_path / "last.jsonl"
    write_sim(str(small), "serializable", 50, seed=1)
    write_sim(str(large), "read-committed", 200_000, seed=1)  # seconds of judging
    write_sim(str(last), "serializable", 50, seed=2)
    p = subprocess.Popen([SLEUTH, "check", "--json", "-w", "list-append", str(small), str(large), str(last)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=_as_in_a_terminal)
    first = p.stdout.readline()  # each record is written as its file is judged
    time.sleep(0.5)  # into the large file's reading
    p.send_signal(sig)
    out, err = p.communicate(timeout=120)
    assert p.returncode == exits.UNKNOWN, err
    assert err.strip().splitlines()[-1] == "sleuth: error: interrupted"
    got = _records(first + out)
    assert [r["file"] for r in got] == [str(small), str(large), str(last)]
    assert got[0]["valid"] is True and got[0]["exit"] == 0
    for r in got[1:]:
        assert (r["valid"], r["error"], r["exit"]) == ("unknown", "interrupted: not judged", 2)


@pytest.mark.slow
def test_a_record_too_large_for_the_pipe_is_never_cut(tmp_path):
    """The reader reads nothing until after the signal, so the first record (over a pipe's
    64 KiB) waits half-written when the signal comes: it must still come out whole, and the
    interrupt's records on lines of their own after it."""
    big, other = tmp_path / "big.jsonl", tmp_path / "other.jsonl"
    write_sim(str(big), "read-committed", 10_000, seed=1)  # many anomalies: a long record
    write_sim(str(other), "serializable", 50, seed=1)
    p = subprocess.Popen([SLEUTH, "check", "--json", "-w", "list-append", str(big), str(other)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=_as_in_a_terminal)
    time.sleep(5)  # judged in about a second: by now it is blocked writing the record
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert len(out.splitlines()[0]) > 65536  # the case at hand: larger than the pipe
    got = _records(out)
    assert [r["file"] for r in got] == [str(big), str(other)]
    assert got[0]["valid"] is False and got[0]["exit"] == 1
    assert got[1]["error"] == "interrupted: not judged"
    assert p.returncode == exits.UNKNOWN, err


def test_an_interrupted_sim_leaves_the_file_as_it_was(tmp_path):
    """`sleuth sim -o FILE` stopped half-way (SIGTERM): FILE keeps what it held, no
    truncated history that a later check would judge as if it were whole, and no temp
    file is left beside it; exit 2, "interrupted"."""
    out = tmp_path / "h.jsonl"
    out.write_text("before\n")
    p = subprocess.Popen([SLEUTH, "sim", "--db", "read-committed", "--txns", "5000000", "-o", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=_as_in_a_terminal)
    deadline = time.monotonic() + 60
    while not (tmp_path / "h.jsonl.tmp").exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # until it is writing
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == exits.UNKNOWN, err
    assert err.strip().splitlines()[-1] == "sleuth: error: interrupted"
    assert out.read_text() == "before\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["h.jsonl"]


def test_sim_writes_to_a_path_that_is_no_regular_file_in_place(tmp_path):
    p = subprocess.run([SLEUTH, "sim", "--db", "serializable", "--txns", "20", "-o", "/dev/stdout"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    events = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    assert len(events) >= 40 and {e["type"] for e in events} >= {"invoke", "ok"}  # 20 txns, each two lines


@pytest.mark.parametrize("stop", [KeyboardInterrupt, OSError])
def test_a_file_written_whole_keeps_what_it_held_when_the_write_stops(tmp_path, stop):
    """`written_whole`, which every whole-file writer uses (histories, run records, counterexamples,
    sim output): stopped half-way, the file keeps its old content and no temp file is left."""
    from sleuth.base.jsonfile import write_json, written_whole
    from sleuth.history.jsonl import Event, write_jsonl

    path = tmp_path / "f.jsonl"
    path.write_text("before\n")
    with pytest.raises(stop):
        with written_whole(path) as tmp, open(tmp, "w") as fh:
            fh.write("half of the new one")
            raise stop
    assert path.read_text() == "before\n" and sorted(p.name for p in tmp_path.iterdir()) == ["f.jsonl"]
    write_jsonl([Event(0, 1, "invoke", 0, "read", None)], path)  # and whole when it finishes
    assert path.read_text().startswith('{"index":0') and not (tmp_path / "f.jsonl.tmp").exists()
    write_json(str(tmp_path / "t.json"), {"a": 1})
    assert json.loads((tmp_path / "t.json").read_text()) == {"a": 1}
