"""`sleuth check RUN_DIR` and what a run leaves behind (issue 43: items 1, 3, 5, 10, 12).

The run directories here are made by the runner's own code, without a database: the
history of a simulated database (`sleuth sim`: its snapshot-isolation one allows write
skew, which serializability forbids, and its read-committed one is invalid even under
snapshot isolation) is recorded as the history of a `sleuth run --target postgres
--isolation repeatable-read` (judged as snapshot-isolation), whose record is written by the
runner: `started_record` as the run starts (all a run killed outright leaves), and
`_conclude` as it ends (judging, results.json, the report). The CLI is then run as a user
runs it. One test at the end makes a real, short PostgreSQL run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import orjson
import pytest

from sleuth.base import exits
from sleuth.base.interrupts import Signals
from sleuth.checker.judge import DID_NOT_FINISH
from sleuth.records import store
from sleuth.records.run import Results, TestRecord
from sleuth.run import runner
from sleuth.workloads.sim_list_append import write_sim

STARTED_AGO = 15.0  # seconds between the run's start and its conclusion (setup included)
STRETCH = 10_000  # the simulated history spans 0.07 ms; stretched to some 7 s, as a run's


def _sleuth(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "sleuth.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def make_run(tmp_path, db: str, how: str = "finished"):
    """A run directory of a repeatable-read PostgreSQL run whose history is `db`'s simulated
    one. `how`: "finished" (concluded at its time limit), "killed" (SIGKILL: test.json as
    written when the run started, no results.json), "hurried" (a second signal: concluded
    without judging). Returns (run directory, the run's record or None)."""
    cfg = runner.RunConfig(target="postgres", workload="list-append", isolation="repeatable-read",
                           store=str(tmp_path / f"store-{db}-{how}"), shrink_budget=0, progress=False)
    p = runner.plan(cfg)  # nothing starts here
    run_dir = store.new_run_dir(cfg.store, p.name)
    raw = tmp_path / f"{db}.jsonl"
    write_sim(str(raw), db, 300, concurrency=5, keys=4, seed=1)
    with open(raw, "rb") as src, open(store.history_path(run_dir), "wb") as out:
        for line in src:
            e = orjson.loads(line)
            e["time"] *= STRETCH
            out.write(orjson.dumps(e) + b"\n")
    started = time.time() - STARTED_AGO
    store.write_record(run_dir, runner.started_record(p, run_dir, started).test_record())
    if how == "killed":
        return run_dir, None
    signals = Signals()
    if how == "hurried":
        signals.fired, signals.again = "SIGTERM", True
    rec = runner._conclude(p, run_dir, None, started, runner.INTERRUPTED if how == "hurried" else None,
                           None, signals, say=lambda m: None)
    return run_dir, rec


@pytest.fixture(scope="module")
def si(tmp_path_factory):
    """A finished run whose history has write skew (allowed at snapshot isolation), and its record."""
    return make_run(tmp_path_factory.mktemp("si"), "snapshot-isolation")


@pytest.fixture(scope="module")
def si_run(si):
    return si[0]


@pytest.fixture(scope="module")
def serializable(tmp_path_factory):
    """A finished run whose history is serializable: nothing found, allowed or not."""
    return make_run(tmp_path_factory.mktemp("ser"), "serializable")


def test_the_run_itself_is_valid_as_snapshot_isolation_and_finds_write_skew(si_run):
    results = Results.read(store.results_path(si_run)).to_json()
    assert results["valid"] is True and results["model"] == "snapshot-isolation"
    assert "G2-item" in results["also-found"]  # the known answer: write skew, allowed at SI


def test_model_given_for_a_run_directory_wins_and_is_said(si_run):
    """Item 1: --model serializable on a repeatable-read run is what the user asked for: the
    write skew is invalid there, as the same history file says with that model."""
    p = _sleuth("check", si_run, "--model", "serializable")
    assert p.returncode == exits.INVALID, p.stdout + p.stderr
    first = p.stdout.splitlines()[0]
    assert first.startswith(f"{si_run}: INVALID (serializable) — ") and "G2-item" in first, p.stdout
    assert ("note: judged against serializable (--model); the run itself was judged against "
            "snapshot-isolation") in p.stdout
    f = _sleuth("check", store.history_path(si_run), "-w", "list-append", "--model", "serializable", "--json")
    j = _sleuth("check", si_run, "--model", "serializable", "--json")
    file_record, run_record = json.loads(f.stdout), json.loads(j.stdout)
    assert f.returncode == j.returncode == exits.INVALID
    assert run_record["model"] == "serializable"
    assert run_record["anomaly-types"] == file_record["anomaly-types"] and "G2-item" in run_record["anomaly-types"]
    # an alias names the same model; without --model the run's own applies
    p = _sleuth("check", si_run, "--model", "PL-3")
    assert p.returncode == exits.INVALID and "INVALID (serializable)" in p.stdout, p.stdout + p.stderr


def test_a_run_directory_prints_what_a_file_prints(si_run):
    """Item 1: `found:` counts, allowed types, explanations and --no-explain, as for a file."""
    run = _sleuth("check", si_run)
    file = _sleuth("check", store.history_path(si_run), "-w", "list-append", "--model", "snapshot-isolation")
    assert run.returncode == file.returncode == exits.VALID, run.stderr
    assert run.stdout.splitlines()[0].startswith(f"{si_run}: valid (snapshot-isolation)")
    assert "also found (allowed): " in run.stdout and "G2-item" in run.stdout.splitlines()[0]
    assert run.stdout.splitlines()[1:] == file.stdout.splitlines()[1:]
    assert re.search(r"^    found: .*G2-item ≥\d", run.stdout, re.M), run.stdout
    explained = _sleuth("check", si_run, "-m", "serializable")
    quiet = _sleuth("check", si_run, "-m", "serializable", "--no-explain")
    assert "G2-item: a cycle with adjacent anti-dependencies" in explained.stdout, explained.stdout
    assert "anti-dependencies" not in quiet.stdout and len(quiet.stdout.splitlines()) == 3, quiet.stdout


def test_options_for_a_run_directory_apply_or_are_refused(si_run, tmp_path):
    """Item 1: never ignored. -w naming the run's workload is taken (it failed with "Is a
    directory"); a checker option is passed on; what cannot apply is refused, 254, one line."""
    p = _sleuth("check", si_run, "-w", "list-append")
    assert p.returncode == exits.VALID and "Is a directory" not in p.stderr, p.stderr
    # the option reaches the checker: a search given no time at all is cut short, and says so
    p = _sleuth("check", si_run, "--cycle-search-timeout", "0", "--json")
    assert json.loads(p.stdout)["incomplete"], p.stdout
    assert not json.loads(_sleuth("check", si_run, "--json").stdout)["incomplete"]
    for args, says in ((["-w", "register"], "--workload register: "),
                       (["--model", "linearizable"], "--model: "),
                       (["--total", "5"], "--total does not apply to "),
                       (["--report", si_run], "--report "),
                       # Spark would judge it as -w's default model, not the run's (before a JVM starts)
                       (["--spark", "local[1]", "-w", "list-append"], "--spark: ")):
        p = _sleuth("check", si_run, *args)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == exits.BAD_INPUT and len(lines) == 1 and says in lines[0], (args, p.stderr)
        assert p.stdout == ""
    # --report: the run re-judged as asked, its own record untouched
    before = open(store.results_path(si_run), "rb").read()
    p = _sleuth("check", si_run, "--model", "serializable", "--report", str(tmp_path / "rep"))
    assert p.returncode == exits.INVALID, p.stderr
    page = (tmp_path / "rep" / "index.html").read_text()
    assert "Checked against <b>serializable</b>" in page and "G2-item" in page
    assert json.loads((tmp_path / "rep" / "test.json").read_text())["checks"]["model"] == "serializable"
    assert open(store.results_path(si_run), "rb").read() == before


@pytest.mark.parametrize("db, status, valid", [("snapshot-isolation", exits.UNKNOWN, "unknown"),
                                               ("read-committed", exits.INVALID, False)])
def test_a_run_killed_outright_is_at_best_unknown(tmp_path, db, status, valid):
    """Item 3: test.json still says "running" and there is no results.json: the history may
    be cut short, so it cannot show the run valid; what it already holds is invalid all the same."""
    run_dir, _ = make_run(tmp_path, db, "killed")
    assert not os.path.exists(store.results_path(run_dir))
    p = _sleuth("check", run_dir)
    assert p.returncode == status, p.stdout + p.stderr
    assert p.stdout.splitlines()[0].endswith(f"; {DID_NOT_FINISH}")
    j = _sleuth("check", run_dir, "--json")
    record = json.loads(j.stdout)
    assert j.returncode == status and record["valid"] == valid and record["reason"] == DID_NOT_FINISH
    assert DID_NOT_FINISH == "the run did not finish: its history may be cut short"
    # its history.jsonl, named beside test.json, is the same run
    assert _sleuth("check", store.history_path(run_dir)).returncode == status


def test_a_run_not_judged_says_so_in_its_report(tmp_path):
    """Item 5: a second signal skips judging; the report drawn afterwards (`sleuth report`)
    must not read the empty anomaly list as "None found" under a model it never checked."""
    run_dir, rec = make_run(tmp_path, "read-committed", "hurried")  # invalid, had it been judged
    assert rec.status == exits.UNKNOWN and "not judged" in rec.reason
    p = _sleuth("report", run_dir)
    assert p.returncode == 0, p.stderr
    page = open(store.report_path(run_dir)).read()
    assert "Checked against" not in page and "None found" not in page
    assert "<b>Not judged</b>" in page and "stopped at once by a second signal, not judged" in page
    assert "Not looked for: the history was not judged." in page
    results = Results.read(store.results_path(run_dir)).to_json()  # as the runner recorded it
    assert results["judged"] is False and results["valid"] == "unknown"
    # and judged now, it is what it is
    assert _sleuth("check", run_dir).returncode == exits.INVALID


def _history_span(run_dir: str) -> float:
    """Seconds from the history's first event to its last, read from the file itself."""
    with open(store.history_path(run_dir), "rb") as f:
        times = [orjson.loads(line)["time"] for line in f]
    return (max(times) - min(times)) / 1e9


def _summary(rec, capsys) -> str:
    from sleuth.cli.run import _summary

    capsys.readouterr()
    _summary(rec)
    return capsys.readouterr().err


def test_summary_and_report_give_one_duration(serializable, capsys):
    """Item 10: the summary said "in 15 s" (start to end, setup included) and the report
    "duration 14.0 s" (up to the last completion): one figure now, the history's span."""
    run_dir, rec = serializable
    span = _history_span(run_dir)
    assert 5 < span < 10  # far from STARTED_AGO: the two old figures would differ
    text = f"{span:.1f} s"
    summary = _summary(rec, capsys)
    assert re.search(rf"^  ops: .* in {re.escape(text)}$", summary, re.M), summary
    assert f"<th>duration</th><td>{text}</td>" in open(store.report_path(run_dir)).read()
    assert TestRecord.read(store.test_path(run_dir)).to_json()["duration_s"] == pytest.approx(span)
    # re-rendered from the directory: the same figure
    assert _sleuth("report", run_dir).returncode == 0
    assert f"<th>duration</th><td>{text}</td>" in open(store.report_path(run_dir)).read()


def test_a_valid_runs_summary_shows_the_anomalies_its_model_allows(si, serializable, capsys):
    """Item 12: valid, with write skew found (allowed at snapshot isolation): the summary says
    "found (allowed): …" with counts, as `sleuth check` does."""
    run_dir, rec = si
    results = Results.read(store.results_path(run_dir)).to_json()
    assert rec.valid is True and results["also-found"]
    lines = [line for line in _summary(rec, capsys).splitlines() if "found (allowed)" in line]
    assert len(lines) == 1 and lines[0].startswith("  found (allowed): "), lines
    for name in results["also-found"]:
        assert re.search(rf"\b{re.escape(name)} ≥?\d", lines[0]), (name, lines[0])
    # a run that found nothing allowed says nothing of it
    assert "found (allowed)" not in _summary(serializable[1], capsys)


@pytest.mark.slow
def test_a_real_postgres_run_agrees_with_itself(tmp_path):
    """A short real repeatable-read run (some 10 s): its summary's duration is its report's,
    allowed anomalies are in the summary when found, and `check RUN_DIR --model serializable`
    gives the verdict the same history file gets with that model."""
    p = subprocess.run([sys.executable, "-m", "sleuth.cli", "run", "--target", "postgres", "-w", "list-append",
                        "--isolation", "repeatable-read", "--time-limit", "4", "--keys", "4", "--rate", "400",
                        "--store", str(tmp_path / "store"), "--json"],
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == exits.VALID, p.stderr
    run_dir = json.loads(p.stdout)["run_dir"]
    results = Results.read(store.results_path(run_dir)).to_json()
    text = f"{_history_span(run_dir):.1f} s"
    assert re.search(rf"^  ops: .* in {re.escape(text)}$", p.stderr, re.M), p.stderr
    assert f"<th>duration</th><td>{text}</td>" in open(store.report_path(run_dir)).read()
    assert ("found (allowed): " in p.stderr) == bool(results["also-found"]), p.stderr
    run = _sleuth("check", run_dir, "--model", "serializable", "--json")
    file = _sleuth("check", store.history_path(run_dir), "-w", "list-append", "--model", "serializable", "--json")
    a, b = json.loads(run.stdout), json.loads(file.stdout)
    assert run.returncode == file.returncode and (a["valid"], a["anomaly-types"]) == (b["valid"], b["anomaly-types"])
    assert a["model"] == "serializable"


def test_the_summary_shows_the_anomalies_from_the_record_not_from_a_file_read_again(si, tmp_path, capsys):
    """Issue 45: the run record dropped the anomalies, so `sleuth run`'s summary (and the
    campaign's also-found) read results.json back from the run directory; the record carries
    the results it was judged with now, and the summary says the same without the file."""
    import dataclasses

    run_dir, rec = si
    assert Results.of(rec.results) == Results.read(store.results_path(run_dir))
    elsewhere = dataclasses.replace(rec, run_dir=str(tmp_path))  # no results.json there
    lines = [line for line in _summary(elsewhere, capsys).splitlines() if "found (allowed)" in line]
    assert len(lines) == 1 and all(n in lines[0] for n in rec.results["also-found"]), lines
