"""`sleuth check --follow` through the installed console script: anomalies reported while
the history is still being written, the end marker, standard input, the same verdict,
anomaly types and exit status as offline `sleuth check`, and bad input named by line."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import orjson
import pytest

from sleuth.workloads.sim_list_append import write_sim
from sleuth.workloads.sim_register import write_sim as write_register_sim

SLEUTH = os.path.join(os.path.dirname(sys.executable), "sleuth")
K = 10**9  # keys the simulation never uses
P = 10**6  # nor these processes


def run(*args, **kw):
    return subprocess.run([SLEUTH, *args], capture_output=True, text=True, timeout=120, **kw)


def read_skew(t):
    """Adya's read skew (G-single), three sequential transactions on fresh keys:
    T1 appends to x and y; T2 sees T1's x but not its y; T3 then reads y with it. T2 began
    after T1 completed, so its read of y is also a stale read: G-single-realtime as soon as
    T2 completes (line 4 of these 6), the read skew itself when T3 does (line 6)."""
    ops = [(P, [["append", K, 1], ["append", K + 1, 1]], [["append", K, 1], ["append", K + 1, 1]]),
           (P + 1, [["r", K, None], ["r", K + 1, None]], [["r", K, [1]], ["r", K + 1, []]]),
           (P + 2, [["r", K + 1, None]], [["r", K + 1, [1]]])]
    out = []
    for p, invoke, ok in ops:
        out.append({"time": t, "type": "invoke", "process": p, "f": "txn", "value": invoke})
        out.append({"time": t, "type": "ok", "process": p, "f": "txn", "value": ok})
    return out


def end_marker(t):
    return {"time": t, "type": "info", "process": "nemesis", "f": "end"}


def lines_of(events):
    return [orjson.dumps({"index": i, **{k: v for k, v in e.items() if k != "index"}}) + b"\n"
            for i, e in enumerate(events)]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A serializable sim history of 3,000 transactions with read skew spliced in after
    line 2,000, and an end marker: (lines, the line that completes the anomaly)."""
    d = tmp_path_factory.mktemp("follow")
    path = d / "sim.jsonl"
    write_sim(str(path), "serializable", 3000, seed=47)
    events = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    at = 2000
    events = events[:at] + read_skew(events[at - 1]["time"]) + events[at:]
    events.append(end_marker(events[-1]["time"]))
    return lines_of(events), at + 6


class Reader(threading.Thread):
    """Collects a process's stdout lines with the time each arrived."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream, self.lines = stream, []

    def run(self):
        for line in self.stream:
            self.lines.append((time.monotonic(), line))


def test_planted_anomaly_is_reported_before_the_stream_ends(planted):
    lines, bad_line = planted
    proc = subprocess.Popen([SLEUTH, "check", "-w", "list-append", "--follow", "-", "--no-explain"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=False)
    reader = Reader(proc.stdout)
    reader.start()
    try:
        proc.stdin.write(b"".join(lines[:bad_line]))
        proc.stdin.flush()
        planted_at = time.monotonic()
        rest = lines[bad_line:]
        for i in range(0, len(rest), 100):  # the rest, slowly: about 2 s
            time.sleep(0.05)
            proc.stdin.write(b"".join(rest[i:i + 100]))
            proc.stdin.flush()
        closed_at = time.monotonic()
        proc.stdin.close()
        status = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    found = [(t, x.decode()) for t, x in reader.lines if b"found G-single" in x and b"online" in x]
    assert found, [x for _, x in reader.lines]
    t, text = found[0]
    assert text.startswith(f"<stdin>:{bad_line - 2}: found G-single-realtime ")  # the stale read
    assert found[1][1].startswith(f"<stdin>:{bad_line}: found G-single ")  # the read skew
    assert t < closed_at and t - planted_at < 2.0
    assert status == 1
    out = b"".join(x for _, x in reader.lines).decode()
    summary = next(x for x in out.splitlines() if x.startswith("<stdin>: "))
    assert summary.startswith("<stdin>: INVALID (strict-serializable) — ") and "G-single" in summary
    assert f"found online: G-single-realtime (line {bad_line - 2}), G-single (line {bad_line})" in out
    assert "ended by: end marker" in out


def test_follows_a_growing_file_to_its_end_marker_with_offline_verdict(planted, tmp_path):
    lines, bad_line = planted
    path = tmp_path / "history.jsonl"
    path.write_bytes(b"".join(lines[:1000]))
    proc = subprocess.Popen([SLEUTH, "check", "-w", "list-append", "--follow", str(path), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def write():
        with open(path, "ab") as fh:
            for i in range(1000, len(lines), 500):
                time.sleep(0.05)
                fh.write(b"".join(lines[i:i + 500]))
                fh.flush()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        writer.join()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    records = [json.loads(x) for x in out.splitlines()]
    anomalies = [r for r in records if r.get("event") == "anomaly"]
    assert [(a["anomaly"], a["line"]) for a in anomalies] == [("G-single-realtime", bad_line - 2),
                                                              ("G-single", bad_line)]
    assert {"time", "found-at", "lines"} <= set(anomalies[0])
    final = records[-1]
    offline = json.loads(run("check", "-w", "list-append", str(path), "--json").stdout)
    assert final["valid"] is offline["valid"] is False
    assert final["anomaly-types"] == offline["anomaly-types"]
    assert final["file"] == str(path) and final["online"]["ended-by"] == "end marker"
    assert final["online"]["found"] == [{"anomaly": "G-single-realtime", "first-line": bad_line - 2},
                                        {"anomaly": "G-single", "first-line": bad_line}]


@pytest.mark.parametrize("db, status", [("serializable", 0), ("read-committed", 1), ("stale-reads", 1)])
def test_sim_databases_same_verdict_as_offline(tmp_path, db, status):
    path = tmp_path / "h.jsonl"
    write_sim(str(path), db, 1500, seed=3)
    offline = run("check", "-w", "list-append", str(path), "--json")
    with open(path, "rb") as fh:
        online = run("check", "-w", "list-append", "--follow", "-", "--json", stdin=fh)
    assert offline.returncode == online.returncode == status, online.stderr
    a, b = json.loads(offline.stdout), json.loads(online.stdout.splitlines()[-1])
    assert (a["valid"], a["anomaly-types"]) == (b["valid"], b["anomaly-types"])
    assert b["online"]["ended-by"] == "end of input"
    if status:  # something was found before the end
        assert b["online"]["found"]


@pytest.mark.parametrize("bug, status", [(None, 0), ("stale-read", 1)])
def test_registers(tmp_path, bug, status):
    path = tmp_path / "r.jsonl"
    write_register_sim(str(path), ops=3000, keys=10, seed=5, bug=bug)
    r = run("check", "-w", "register", "--follow", str(path), "--idle-timeout", "0.3")
    assert r.returncode == status, r.stderr
    offline = run("check", "-w", "register", str(path))
    assert offline.returncode == status
    assert offline.stdout.splitlines()[0] in r.stdout.splitlines()  # the same summary line
    if status:
        assert "found nonlinearizable (online" in r.stdout and "found online: nonlinearizable" in r.stdout


def test_the_online_peak_memory_is_the_checks_own(tmp_path):
    """Started by a process holding 400 MiB (as a benchmark that has just written its
    history), `--follow` records its own peak, not its parent's: Linux carries
    `ru_maxrss` across the exec (sleuth/base/memory.py)."""
    path = tmp_path / "r.jsonl"
    write_register_sim(str(path), ops=2000, keys=10, seed=5)
    ballast = bytearray(400 << 20)
    ballast[::4096] = b"x" * len(range(0, len(ballast), 4096))  # resident, page by page
    r = run("check", "-w", "register", "--follow", str(path), "--idle-timeout", "0.3", "--json")
    peak = json.loads(r.stdout.splitlines()[-1])["online"]["max-rss-mib"]
    assert 0 < peak < 200, peak
    del ballast


def test_bad_line_is_254_naming_it(tmp_path):
    path = tmp_path / "bad.jsonl"
    good = lines_of([{"time": 0, "type": "invoke", "process": 0, "f": "txn", "value": [["r", 1, None]]}])
    path.write_bytes(good[0] + b'{"index": 1, "time": 1, "type": "ok", "process": 0\n')
    r = run("check", "-w", "list-append", "--follow", str(path), "--idle-timeout", "5")
    assert r.returncode == 254
    assert r.stderr.strip().startswith(f"sleuth: error: {path}:2: ") and "Traceback" not in r.stderr
    path.write_bytes(good[0] + lines_of([{}, {"time": 1, "type": "ok", "process": 0, "f": "txn",
                                             "value": [["r", 1, []]]}])[1].replace(b'"index":1', b'"index":7'))
    r = run("check", "-w", "list-append", "--follow", str(path), "--json", "--idle-timeout", "5")
    assert r.returncode == 254 and f"{path}:2: index is 7, expected 1" in r.stderr
    assert json.loads(r.stdout)["exit"] == 254


def test_end_marker_is_an_ordinary_event_with_its_index(tmp_path):
    """The end marker is an event of the history format (docs/history-format.md: `index` is
    required), so a bare one is refused as any event without an index is, naming its line;
    the marker docs/online.md shows carries every required field and ends the follow."""
    from sleuth.history.jsonl import RULES

    required = {"index"} | {name for name, rule in RULES.items() if rule.required}
    docs = os.path.join(os.path.dirname(__file__), os.pardir, "docs", "online.md")
    with open(docs) as fh:
        shown = [json.loads(x) for x in map(str.strip, fh) if x.startswith("{") and '"f": "end"' in x]
    assert shown and all(required <= set(m) for m in shown)
    good = lines_of([{"time": 0, "type": "invoke", "process": 0, "f": "txn", "value": [["append", 1, 1]]},
                     {"time": 1, "type": "ok", "process": 0, "f": "txn", "value": [["append", 1, 1]]}])
    path = tmp_path / "h.jsonl"
    path.write_bytes(b"".join(good) + orjson.dumps(end_marker(2)) + b"\n")
    r = run("check", "-w", "list-append", "--follow", str(path), "--idle-timeout", "5")
    assert r.returncode == 254 and r.stderr.strip() == f"sleuth: error: {path}:3: missing field 'index'"
    path.write_bytes(b"".join(good) + orjson.dumps({**shown[0], "index": 2, "time": 2}) + b"\n")
    r = run("check", "-w", "list-append", "--follow", str(path), "--json", "--idle-timeout", "5")
    assert r.returncode == 0 and json.loads(r.stdout.splitlines()[-1])["online"]["ended-by"] == "end marker"


def test_options_refused():
    assert run("check", "-w", "list-append", "x.jsonl", "--idle-timeout", "1").returncode == 254
    r = run("check", "--follow", "x.jsonl")
    assert r.returncode == 254 and "--follow takes one FILE" in r.stderr
    r = run("check", "-w", "list-append", "--follow", "history.edn")
    assert r.returncode == 254 and "JSON Lines histories only" in r.stderr
    r = run("check", "-w", "list-append", "--follow", "/nonexistent/h.jsonl")
    assert r.returncode == 254 and "/nonexistent/h.jsonl" in r.stderr


def test_ctrl_c_ends_the_history_and_judges_what_was_read(planted, tmp_path):
    lines, bad_line = planted
    path = tmp_path / "h.jsonl"
    path.write_bytes(b"".join(lines[:bad_line + 500]))  # no end marker: it would wait forever
    proc = subprocess.Popen([SLEUTH, "check", "-w", "list-append", "--follow", str(path), "--no-explain"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        out = ""
        while "found G-single" not in out and time.monotonic() < deadline:
            out += proc.stdout.readline()
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, (out, rest, err)
    assert "ended by: interrupted" in rest and f"found online: G-single-realtime (line {bad_line - 2})" in rest


def test_lines_are_the_file_s_lines_with_blank_lines_in_it(tmp_path):
    """An aborted read (G1a) after blank lines: named by its line in the file, as offline."""
    ev = [{"time": 0, "type": "invoke", "process": 0, "f": "txn", "value": [["append", "x", 1]]},
          {"time": 1, "type": "fail", "process": 0, "f": "txn", "value": [["append", "x", 1]]},
          {"time": 2, "type": "invoke", "process": 1, "f": "txn", "value": [["r", "x", None]]},
          {"time": 3, "type": "ok", "process": 1, "f": "txn", "value": [["r", "x", [1]]]}]
    lines = lines_of(ev)
    path = tmp_path / "h.jsonl"
    path.write_bytes(lines[0] + b"\n" + lines[1] + b"\n\n" + lines[2] + lines[3])  # lines 1, 3, 6, 7
    r = run("check", "-w", "list-append", "--follow", str(path), "--idle-timeout", "0.3", "--json")
    records = [json.loads(x) for x in r.stdout.splitlines()]
    assert r.returncode == 1 and records[0]["anomaly"] == "G1a" and records[0]["line"] == 7
    assert records[0]["lines"] == [1, 3, 6, 7]
    offline = json.loads(run("check", "-w", "list-append", str(path), "--json").stdout)
    assert records[-1]["anomaly-types"] == offline["anomaly-types"] and "G1a" in offline["anomaly-types"]
    assert offline["anomalies"]["G1a"][0]["op"]["line"] == 6  # the same file lines offline


def test_an_interrupted_final_pass_still_says_what_the_online_phase_found(tmp_path, monkeypatch, capsys):
    """Ctrl-C in the final pass (the offline check of a long history, which may hold more than
    the machine has): unknown, exit 2, and the --json record still carries the online phase,
    its figures and why the final pass was needed. The interrupt is raised where the final
    pass runs (judge_file), as the signal would raise it there."""
    from sleuth.checker import WORKLOADS
    from sleuth.checker.checks import Checks
    from sleuth.cli import check as check_cli
    from sleuth.cli.follow import follow_check

    path = tmp_path / "stale.jsonl"
    write_sim(str(path), "stale-reads", 2000, seed=3)
    events = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    path.write_bytes(b"".join(lines_of(events + [end_marker(events[-1]["time"])])))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(check_cli, "judge_file", interrupted)
    with pytest.raises(SystemExit) as exited:
        follow_check(str(path), WORKLOADS["list-append"], Checks(checker="list-append"), None, True, False)
    assert exited.value.code == 2
    out, err = capsys.readouterr()
    record = json.loads(out.splitlines()[-1])
    online = record["online"]
    assert record["valid"] == "unknown" and record["exit"] == 2 and online["final-pass"] == "interrupted"
    assert online["ended-by"] == "end marker" and online["events"] == len(events) + 1
    assert online["found"] and online["final-pass-because"] and online["cpu-seconds"] > 0
    assert "interrupted in the final pass" in err
