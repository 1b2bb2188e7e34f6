"""The run record without a cluster: judging rules, the store, redaction, fault vocabulary, exits.

Histories with known answers come from the simulated databases (a read-committed
one is invalid under strict serializability, a serializable one valid).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import orjson
import pytest

from sleuth.base import exits
from sleuth.checker.judge import DID_NOT_FINISH, NOTHING_COMPLETED, Checks, judge, op_counts
from sleuth.cluster.faults import FAULTS as SWITCHES
from sleuth.history.jsonl import JsonlWriter, read_jsonl
from sleuth.nemesis.faults import FAULT_CLASSES, STARTS, STOPS, Schedule
from sleuth.records import store
from sleuth.records.run import Results, TestRecord
from sleuth.reports.run_report import nemesis_windows, render, seconds
from sleuth.targets import Target, redact
from sleuth.workloads.sim_list_append import write_sim

LIST_APPEND = Checks(checker="list-append", model="strict-serializable")


def sim(tmp_path, db):
    path = tmp_path / f"{db}.jsonl"
    write_sim(str(path), db, 300, concurrency=5, keys=4, seed=1)
    return read_jsonl(path)


def test_judge_known_answers_and_early_ends(tmp_path):
    bad, good = sim(tmp_path, "read-committed"), sim(tmp_path, "serializable")
    assert judge(good, LIST_APPEND)["valid"] is True
    assert judge(bad, LIST_APPEND)["valid"] is False
    # an interrupted run: what it recorded decides invalid; valid becomes unknown
    r = judge(good, LIST_APPEND, "interrupted")
    assert r["valid"] == "unknown" and r["reason"] == "interrupted"
    assert judge(bad, LIST_APPEND, "interrupted")["valid"] is False


def test_nothing_completed_is_unknown_never_valid(tmp_path):
    path = tmp_path / "h.jsonl"
    w = JsonlWriter(path)
    w.append(0, "invoke", 0, "txn", [["append", 1, 1]])
    w.append(5, "fail", 0, "txn", [["append", 1, 1]], error="40001")
    w.append(6, "invoke", 1, "txn", [["r", 1, None]])
    w.close()
    h = read_jsonl(path)
    r = judge(h, LIST_APPEND)
    assert r["valid"] == "unknown" and r["reason"] == NOTHING_COMPLETED
    assert r["counts"] == {"ops": 2, "ok": 0, "fail": 1, "info": 1}  # the open invoke counts as info
    assert exits.of_valid(r["valid"]) == exits.UNKNOWN


def test_history_writer_writes_what_the_reader_reads(tmp_path):
    path = tmp_path / "h.jsonl"
    w = JsonlWriter(path)
    w.append(10, "invoke", 0, "write", [1, 5], node="n1")
    w.append(20, "ok", 0, "write", [1, 5], node="n1", ts=7)
    w.append(30, "info", "nemesis", "kill", ["storage1"])
    w.close()
    w.close()  # a second close does nothing
    lines = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    assert [e["index"] for e in lines] == [0, 1, 2] and lines[1]["ts"] == 7 and "error" not in lines[1]
    h = read_jsonl(path)
    assert [o.type for o in h.ops()] == ["ok"] and h.ops()[0].ts == 7
    assert op_counts(h) == {"ops": 1, "ok": 1, "fail": 0, "info": 0}


def test_store_layout_and_find_run(tmp_path):
    d = store.new_run_dir(str(tmp_path / "s"), "t")
    assert os.path.isdir(store.nodes_dir(d)) and store.latest(str(tmp_path / "s")) == os.path.realpath(d)
    assert store.find_run(d) is None  # no history, no test.json yet
    open(store.history_path(d), "w").close()
    store.write_record(d, TestRecord(name="t", checks=Checks(checker="counter")), Results(valid=True))
    assert store.find_run(d) == d and store.find_run(store.history_path(d)) == d
    assert Results.read(store.results_path(d)) == Results(valid=True)
    assert not [f for f in os.listdir(d) if f.endswith(".tmp")]
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(store.StoreError, match="cannot create"):
        store.new_run_dir(str(blocker / "s"), "t")


def test_redact_hides_passwords_only():
    assert redact("postgresql://u:secret@host:5432/db") == "postgresql://u:***@host:5432/db"
    assert "secret" not in redact("postgres://u:p@h/db?password=secret&sslmode=disable")
    assert redact("postgres://u@h/db") == "postgres://u@h/db"
    assert redact("reference") == "reference"


def test_every_fault_event_is_shaded_clock_strobe_too():
    # every start event name a fault can write opens a window its heal closes
    for kind, cls in FAULT_CLASSES.items():
        for start in cls.start_fs:
            ev = [{"time": 1e9, "f": start}, {"time": 2e9, "f": cls.stop_f}]
            assert nemesis_windows(ev, 9.0) == [(1.0, 2.0, start)], kind
            assert STARTS[start] == kind and STOPS[cls.stop_f] == kind
    ev = [{"time": 1e9, "f": "clock-strobe"}, {"time": 3e9, "f": "clock-reset"}]
    assert nemesis_windows(ev, 9.0) == [(1.0, 3.0, "clock-strobe")]


class HalfPause(Target):
    """Pauses its first node, then fails: a start that breaks part of what it meant to."""
    roles = ("storage",)

    def __init__(self):
        super().__init__()
        self.paused: set[str] = set()

    def nodes(self, role):
        return ["s1", "s2"]

    def pause(self, node):
        if node == "s2":
            raise OSError("s2 unreachable")
        self.paused.add(node)

    def resume(self, node):
        self.paused.discard(node)


def test_a_fault_whose_start_fails_half_way_is_healed():
    t = HalfPause()
    events = []
    s = Schedule(t, ["pause"], 0.05, 0, lambda f, v: events.append((f, v)))
    s.start()
    for _ in range(200):  # bounded: 200 x 10 ms
        if len(events) >= 2:
            break
        __import__("time").sleep(0.01)
    s.finish(wait=5)
    assert t.paused == set(), events
    assert events[0][0] == "pause" and "error" in events[0][1] and events[1][0] == "resume"
    assert s.happened == {}  # nothing took effect as a whole: the record says so


def test_report_shows_each_explanation_once_in_seconds(tmp_path):
    d = tmp_path / "run"
    os.makedirs(d / "nodes")
    write_sim(str(d / "history.jsonl"), "read-committed", 300, concurrency=5, keys=4, seed=1)
    h = read_jsonl(d / "history.jsonl")
    results = judge(h, LIST_APPEND)
    assert results["valid"] is False
    page = open(render(str(d), history=h, test=TestRecord(name="x", workload="list-append", checks=LIST_APPEND),
                       results=results)).read()
    expected: dict[str, int] = {}  # each step's why, as often as the shown examples hold it
    for name in results["anomaly-types"]:
        for ex in results["anomalies"][name][:5]:
            for step in ex.get("steps", [])[:12]:
                why = seconds(step["why"]).replace("'", "&#39;").replace('"', "&#34;")
                why = why.replace("<", "&lt;").replace(">", "&gt;")
                expected[why] = expected.get(why, 0) + 1
    assert expected
    for why, n in expected.items():
        assert page.count(why) == n, why  # once per example: not in the sentence and the list too
    assert " ns" not in page.split("<h2>Latency")[0].split('id="anomalies"')[1]
    assert seconds("began (t=1500000000 ns)") == "began (t=1.500 s)"
    # the reference cluster's timestamps (ms of the oracle's clock), placed from the run's start
    assert seconds("wrote at ts 1795452386000", 1795452384.25) == "wrote at ts 1795452386000 (start +1.750 s)"


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sleuth(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "sleuth.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def test_unwritable_store_crashes_with_one_line_and_starts_nothing(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    home = tmp_path / "home"
    p = _sleuth("run", "--runtime", "local", "-w", "register", "--time-limit", "1",
                "--store", str(blocker / "store"), "--json", env={"SLEUTH_HOME": str(home)})
    assert p.returncode == exits.CRASHED, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr
    assert str(blocker) in p.stderr
    out = json.loads(p.stdout)  # --json: stdout is JSON only, even for a crash
    assert out["exit"] == exits.CRASHED and out["reason"].startswith("crashed")
    assert not (home / "clusters").exists()


def test_password_never_shown_and_unreachable_url_is_the_targets_failure(tmp_path):
    """Issue 43: an unreachable URL is the user's target failing, not sleuth: 254, one line, no
    crash.txt (it was 255 with a traceback), and the password nowhere."""
    url = f"postgresql://u:hunter2-secret@127.0.0.1:{_closed_port()}/db"
    p = _sleuth("run", "--target", url, "-w", "register", "--time-limit", "1", "--store",
                str(tmp_path / "s"), "--json")
    assert p.returncode == exits.BAD_INPUT, p.stderr  # nothing to run against: no verdict
    out = json.loads(p.stdout)
    assert out["exit"] == exits.BAD_INPUT and out["valid"] == "unknown"
    assert "Traceback" not in p.stderr
    assert sum(line.startswith("sleuth: error:") for line in p.stderr.splitlines()) == 1
    run_dir = out["run_dir"]
    assert not os.path.exists(store.crash_path(run_dir))
    assert "u:***@127.0.0.1" in open(store.test_path(run_dir)).read()
    for text in [p.stdout, p.stderr] + [open(os.path.join(dp, f), errors="replace").read()
                                        for dp, _, fs in os.walk(run_dir) for f in fs if not f.endswith(".png")]:
        assert "hunter2" not in text


def test_bad_usage_is_254(tmp_path):
    p = _sleuth("run", "-w", "register", "--target", "redis://u:hunter2@x/db", "--store", str(tmp_path / "s"))  # no such target kind
    assert p.returncode == exits.BAD_INPUT and len(p.stderr.strip().splitlines()) == 1
    assert "u:***@x" in p.stderr and "hunter2" not in p.stderr
    for fault, says in ((",", "--fault ',': no fault switch named"), ("stale-reads", "--fault: unknown fault 'stale-reads'")):
        p = _sleuth("run", "-w", "register", "--fault", fault, "--store", str(tmp_path / "s"))  # ran with none
        assert p.returncode == exits.BAD_INPUT and p.stderr.strip().splitlines() == [f"sleuth: error: {says}; one of "
                                                                                     + ", ".join(SWITCHES)], p.stderr
    p = _sleuth("check", str(tmp_path))  # no --workload and not a run directory
    assert p.returncode != 0 and "--workload is required" in p.stderr
    p = _sleuth("report", str(tmp_path))  # not a run directory
    assert p.returncode == exits.BAD_INPUT and len(p.stderr.strip().splitlines()) == 1
    src = os.path.join(os.path.dirname(__file__), "data", "imports", "same.edn")
    for workload in ("source", "bank", "counter"):  # --spark judges registers and transactions only
        p = _sleuth("check", "--spark", "local[1]", src, "-w", workload)  # said before a JVM starts
        assert p.returncode == exits.BAD_INPUT and p.stderr.strip().splitlines() == [
            f"sleuth: error: --workload: --spark judges register, cas-register, list-append, rw-register "
            f"histories, not {workload} (judge it without --spark)"], p.stderr


def test_check_report_writes_a_report_for_an_imported_history(tmp_path):
    src = os.path.join(os.path.dirname(__file__), "data", "imports", "same.edn")
    p = _sleuth("check", src, "-w", "list-append", "--report", str(tmp_path / "rep"))
    assert p.returncode == 0, p.stderr
    page = (tmp_path / "rep" / "index.html").read_text()
    assert "valid" in page and (tmp_path / "rep" / "history.jsonl").exists()
    assert op_counts(read_jsonl(tmp_path / "rep" / "history.jsonl"))["ok"] > 0
    # the file's own nemesis (:start-partition ... :stop-partition) is named and counted, not "none"
    assert json.loads((tmp_path / "rep" / "test.json").read_text())["nemesis"] == ["partition"]
    assert "partition: start-partition &times;1" in page


def test_check_json_gives_a_bad_run_directory_its_object(tmp_path):
    """--json: every input file has its one object; a run directory whose history is bad
    input too (254, beside the one-line error on stderr), not only the good ones."""
    src = os.path.join(os.path.dirname(__file__), "data", "imports", "same.edn")
    good, bad = tmp_path / "good", tmp_path / "bad"
    for d in (good, bad):
        assert _sleuth("check", src, "-w", "list-append", "--report", str(d)).returncode == 0
    with open(bad / "history.jsonl", "a") as fh:
        fh.write("{not json\n")
    p = _sleuth("check", "--json", str(good), str(bad))
    assert p.returncode == exits.BAD_INPUT
    records = [json.loads(line) for line in p.stdout.splitlines()]
    assert [(r["file"], r["exit"]) for r in records] == [(str(good), 0), (str(bad), 254)]
    assert records[1]["valid"] == "unknown" and "history.jsonl:" in records[1]["error"]
    assert len(p.stderr.strip().splitlines()) == 1




@pytest.mark.slow
def test_a_password_in_a_live_url_is_never_printed_or_stored(tmp_path):
    """A real run against sleuth's local PostgreSQL (trust auth accepts any password)."""
    from sleuth.targets.postgres_server import PostgresServer

    server = PostgresServer()
    server.start()
    try:
        url = server.url.replace("://sleuth@", "://sleuth:hunter2-secret@")
        assert "hunter2-secret" in url
        p = _sleuth("run", "--target", url, "-w", "register", "--time-limit", "2", "--store",
                    str(tmp_path / "s"), "--json", timeout=300)
    finally:
        server.stop()
    assert p.returncode == exits.VALID, p.stderr
    out = json.loads(p.stdout)  # the whole of stdout is one JSON object
    assert out["valid"] is True and out["ok"] > 0 and out["exit"] == 0
    assert "sleuth:***@" in p.stderr and "sleuth:***@" in open(store.test_path(out["run_dir"])).read()
    files = [os.path.join(dp, f) for dp, _, fs in os.walk(out["run_dir"]) for f in fs if not f.endswith(".png")]
    assert store.report_path(out["run_dir"]) in files
    for text in [p.stdout, p.stderr] + [open(f, errors="replace").read() for f in files]:
        assert "hunter2" not in text


@pytest.mark.slow
def test_a_run_killed_outright_leaves_a_record_check_can_judge(tmp_path):
    """SIGKILL gives sleuth no chance to conclude: test.json, written as the run starts, still
    says what ran and what to check, so `sleuth check RUN_DIR` judges the history it left;
    a history that may be cut short cannot show the run valid: unknown (issue 43)."""
    import signal
    import time

    from sleuth.targets.postgres_server import PostgresServer

    server = PostgresServer()
    server.start()
    try:
        s = tmp_path / "s"
        proc = subprocess.Popen([sys.executable, "-m", "sleuth.cli", "run", "--target", server.url,
                                 "-w", "list-append", "--time-limit", "60", "--store", str(s)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        history = None
        while time.monotonic() < deadline:
            found = list(s.glob("*/*/history.jsonl"))
            if found and sum(1 for _ in open(found[0])) > 50:
                history = found[0]
                break
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        server.stop()
    assert history is not None, "the run recorded nothing within a minute"
    run_dir = history.parent
    assert not (run_dir / "results.json").exists()  # it never concluded
    test = json.loads((run_dir / "test.json").read_text())
    assert test["status"] == exits.UNKNOWN and test["reason"].startswith("running")
    assert test["workload"] == "list-append" and test["checks"]["checker"] == "list-append"
    p = _sleuth("check", str(run_dir), "--json")
    assert p.returncode == exits.UNKNOWN, p.stderr  # PostgreSQL's default level: nothing invalid
    record = json.loads(p.stdout)
    assert record["valid"] == "unknown" and record["reason"] == DID_NOT_FINISH


def test_serve_exits_0_on_sigterm_and_254_on_a_port_in_use(tmp_path):
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-m", "sleuth.cli", "serve", "--store", str(tmp_path),
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()  # "serving … on http://127.0.0.1:PORT/"
    assert "http://127.0.0.1:" in line, line
    port = int(line.rsplit(":", 1)[1].strip(" /\n"))
    p = _sleuth("serve", "--store", str(tmp_path), "--port", str(port), timeout=30)
    assert p.returncode == exits.BAD_INPUT and len(p.stderr.strip().splitlines()) == 1
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == exits.VALID
    assert "Traceback" not in proc.stderr.read()


def test_first_signal_asks_second_interrupts_unless_shielded():
    import signal
    import threading

    from sleuth.base.interrupts import Interrupted, Signals

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers live in the main thread")
    before = signal.getsignal(signal.SIGTERM)
    s = Signals()
    s.install()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert s.fired == "SIGTERM" and not s.again
        with pytest.raises(Interrupted):
            os.kill(os.getpid(), signal.SIGINT)
        s2 = Signals()
        s2.install()
        s2.shield()
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # shielded: teardown goes on
        assert s2.fired == "SIGINT" and s2.again
        s2.restore()
    finally:
        s.restore()
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_summary_line_is_never_cut_without_an_ellipsis():
    from sleuth.cli.run import clip

    assert clip("short", 200) == "short"
    long = "T1 (line 3) < T0 (rw) because " + "x" * 300
    cut = clip(long, 200)
    assert len(cut) == 200 and cut.endswith("…") and long.startswith(cut[:-1])


def test_a_summary_line_names_its_anomaly_once():
    from sleuth.cli.run import anomaly_line

    cycle = "G-single: a cycle with exactly one anti-dependency (read skew); 3 transactions.\nT1 < T2 (rw)"
    assert anomaly_line("G-single", cycle) == ("G-single: a cycle with exactly one anti-dependency (read skew); "
                                               "3 transactions. (+1 line in the report)")
    other = "process 4's read ran at ts 17, below ts 19 of process 9's txn"
    assert anomaly_line("read-ts-below-write", other) == f"read-ts-below-write: {other}"
    assert anomaly_line("G0", "") is None
