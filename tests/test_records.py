"""Issue 45: a run directory's record files are typed and versioned (sleuth/records/run.py), with one
writer (sleuth.records.store.write_record) and one reader each; files written before `format`
existed still read; a file that is not a record is refused with one line naming it (254)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from source_tree import PRODUCT, sources

from sleuth.base import exits
from sleuth.checker.checks import Checks
from sleuth.checker.judge import DID_NOT_FINISH, judge, run_ended
from sleuth.history.jsonl import read_jsonl
from sleuth.records import store
from sleuth.records.run import FORMAT, RecordError, Results, TestRecord

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "records")
SLEUTH = os.path.join(os.path.dirname(sys.executable), "sleuth")


def _code(exts=(".py",)):
    return sources(exts, PRODUCT + ("bench",))


def test_one_writer_and_one_name_for_each_record_file():
    """The record files are named in the store alone (every other module asks it for the
    path) and written by its `write_record` alone: no module builds one by hand again."""
    named = [f"{path}: {m.group(0)}" for path, text in _code() if path != os.path.join("sleuth", "records", "store.py")
             for m in re.finditer(r'["\'](test|results)\.json["\']', text)]
    assert named == []
    written = [f"{path}: {m.group(0)}" for path, text in _code()
               for m in re.finditer(r"write_json\([^)]*(test_path|results_path|TEST|RESULTS)", text)
               if path != os.path.join("sleuth", "records", "store.py")]
    assert written == []
    writers = [path for path, text in _code() if re.search(r"^def write_record\(", text, re.M)]
    assert writers == [os.path.join("sleuth", "records", "store.py")]
    # a record is made from its dict in one place only (`Record.of`, which campaign.json's type
    # shares; Checks, a part of test.json, in its own module)
    readers = {path for path, text in _code() if "msgspec.convert(" in text}
    assert readers == {os.path.join("sleuth", "records", "run.py"), os.path.join("checker", "checks.py")}


def _run_dir(tmp_path, results=None, test=None):
    d = tmp_path / "run"
    (d / "nodes").mkdir(parents=True)
    with open(store.history_path(str(d)), "w") as f:
        for i, (typ, fn, v) in enumerate([("invoke", "add", 1), ("ok", "add", 1), ("invoke", "read", None),
                                          ("ok", "read", 1)]):
            f.write(json.dumps({"index": i, "time": i * 1000, "type": typ, "process": 0, "f": fn, "value": v}) + "\n")
    checks = Checks(checker="counter")
    test = test or TestRecord(name="c", workload="counter", target="reference", checks=checks, started=1.0,
                              finished=2.0, status=0)
    store.write_record(str(d), test, results or Results.of(judge(read_jsonl(store.history_path(str(d))), checks)))
    return d


def test_records_round_trip_through_their_files_with_their_format(tmp_path):
    d = _run_dir(tmp_path)
    test, results = TestRecord.read(store.test_path(str(d))), Results.read(store.results_path(str(d)))
    assert test.format == results.format == FORMAT
    assert json.loads((d / "test.json").read_text())["format"] == FORMAT
    assert json.loads((d / "results.json").read_text())["format"] == FORMAT
    assert test.checks == Checks(checker="counter") and test.finished == 2.0
    assert results.valid is True and results.counts == {"ops": 2, "ok": 2, "fail": 0, "info": 0}
    again = tmp_path / "again"
    again.mkdir()
    store.write_record(str(again), test, results)
    assert (again / "test.json").read_text() == (d / "test.json").read_text()
    assert (again / "results.json").read_text() == (d / "results.json").read_text()


def test_files_written_before_format_existed_still_read():
    old = TestRecord.read(os.path.join(DATA, "test-format0.json"))
    assert old.format == FORMAT and old.seed == 3 and old.faults_happened == {"kill": 2}
    assert old.checks == Checks(checker="rw-register", model="serializable", options={"linearizable_keys": True})
    assert run_ended(old) is None
    # a run stored before test.json held its checks: re-derived as the runner derived them then;
    # `finished: null` is a run killed outright
    before = TestRecord.read(os.path.join(DATA, "test-before-checks.json"))
    assert before.checks == Checks(checker="register", model="linearizable", timestamps=True)
    assert run_ended(before) == DID_NOT_FINISH
    # `sleuth check --report`'s: no `finished` at all is a whole history, not a run cut short
    checked = TestRecord.read(os.path.join(DATA, "test-checked-history.json"))
    assert checked.checks.kwargs() == {"total": 50} and run_ended(checked) is None
    assert "finished" not in checked.to_json()
    results = Results.read(os.path.join(DATA, "results-format0.json"))
    assert results.valid is False and results.anomaly_types == ["G2-item"] and results.not_ == ["serializable"]
    assert results.was_judged
    assert not Results.read(os.path.join(DATA, "results-not-judged-format0.json")).was_judged


@pytest.mark.parametrize("text,words", [
    ("{not json", "not JSON"),
    ("[1, 2]", "not a run record"),
    ('{"format": 1, "checks": {"checker": "counter", "options": {}}, "seed": "three"}', "$.seed"),
    ('{"format": 1, "checks": {"checker": "counter", "model": "serializable", "options": {}}}',
     "not a model of the counter checker"),
    ('{"format": 99, "checks": {"checker": "counter", "options": {}}}', "written by a newer sleuth"),
    ('{"workload": "nosuch"}', "cannot tell what the run checked"),
])
def test_a_test_json_that_is_not_a_record_is_refused_naming_it(tmp_path, text, words):
    path = tmp_path / "test.json"
    path.write_text(text)
    with pytest.raises(RecordError) as e:
        TestRecord.read(str(path))
    assert str(e.value).startswith(f"{path}: ") and words in str(e.value) and "\n" not in str(e.value)


def _sleuth(*args):
    return subprocess.run([SLEUTH, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("broken", ["test.json", "results.json"])
def test_sleuth_report_refuses_a_bad_record_file_with_254_naming_it(tmp_path, broken):
    """On main an unreadable test.json or results.json was read as {} and the report
    rendered from nothing, exit 0."""
    d = _run_dir(tmp_path)
    (d / broken).write_text('{"valid": "maybe"}' if broken == "results.json" else "[]")
    p = _sleuth("report", str(d))
    assert p.returncode == exits.BAD_INPUT, p.stderr
    assert str(d / broken) in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert "Traceback" not in p.stderr


def test_sleuth_check_refuses_a_run_whose_test_json_is_bad(tmp_path):
    d = _run_dir(tmp_path)
    (d / "test.json").write_text('{"format": 1, "checks": {"checker": "counter", "options": {"total": 3}}}')
    p = _sleuth("check", str(d))
    assert p.returncode == exits.BAD_INPUT
    assert str(d / "test.json") in p.stderr and "takes no option 'total'" in p.stderr


def test_campaign_judge_refuses_a_run_directory_with_a_bad_results_json(tmp_path):
    """On main a run whose record files could not be read was skipped in silence: `sleuth
    campaign judge` judged the others and passed."""
    runs = tmp_path / "runs"
    good = _run_dir(runs)
    bad = runs / "bad"
    os.rename(_run_dir(tmp_path / "b"), bad)
    (bad / "results.json").write_text('{"valid": true, "anomaly-types": "none"}')
    p = _sleuth("campaign", "judge", str(runs), "--no-spark")
    assert p.returncode == exits.BAD_INPUT, (p.stdout, p.stderr)
    assert str(bad / "results.json") in p.stderr and "Traceback" not in p.stderr
    assert good.exists()


def test_campaign_entries_are_made_one_way_and_the_record_written_by_save_alone():
    """Issue 45: campaign run entries were built or edited in four places (new_record,
    run_all's updates, execute_run's two dicts, record_of_runs)."""
    campaign = os.path.join("sleuth", "records", "campaign.py")
    edited = [f"{path}: {m.group(0)}" for path, text in _code()
              for m in re.finditer(r'\.update\(\s*(status|valid)=|"run": asdict\(|"status": "(pending|done)"', text)]
    assert edited == []
    written = [path for path, text in _code() if re.search(r"write_json\([^)]*RECORD", text)]
    assert written == [campaign]


def test_a_campaign_record_round_trips_and_an_old_one_reads():
    from sleuth.campaign.matrix import Run
    from sleuth.records.campaign import CampaignRecord, RunEntry

    old = CampaignRecord.read(os.path.join(DATA, "campaign-format0.json"))
    assert old.format == FORMAT and old.interrupted and [r.status for r in old.runs] == ["done", "pending"]
    done, pending = old.runs
    assert done.valid is True and done.also_found == [] and (done.ok, done.fail) == (9, 1)
    assert done.run.online is False and pending.run.expect == "invalid"  # cells before --online existed
    assert pending == RunEntry(run=pending.run)
    assert isinstance(done.run, Run)
    assert CampaignRecord.of(old.to_json()) == old
    assert old.to_json()["runs"][0]["anomaly-types"] == []


def test_campaign_judge_refuses_a_campaign_json_that_is_not_one(tmp_path):
    """On main a campaign.json that was not JSON ended `sleuth campaign judge` in a traceback."""
    d = tmp_path / "c"
    d.mkdir()
    (d / "campaign.json").write_text('{"name": "n", "dir": "x", "runs": [{"status": "done"}]}')
    p = _sleuth("campaign", "judge", str(d), "--no-spark")
    assert p.returncode == exits.BAD_INPUT and str(d / "campaign.json") in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and "$.runs[0]" in p.stderr
