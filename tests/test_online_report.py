"""Each anomaly carries when it happened (the time of its last operation) and when it was
found, online or only in the final pass: in `sleuth check --follow --json` and in a run's
report (`checker.online.when`)."""

import json
import subprocess

import orjson
from test_check_follow import SLEUTH
from test_run_report import make_run

from sleuth.checker.online.when import lines_named, timeline
from sleuth.history.jsonl import read_jsonl
from sleuth.reports.run_report import render


def follow_record(path, workload="list-append"):
    out = subprocess.run([SLEUTH, "check", "-w", workload, "--follow", str(path), "--json", "--idle-timeout", "0.2"],
                         capture_output=True, text=True, timeout=120).stdout.splitlines()
    return [json.loads(x) for x in out[:-1]], json.loads(out[-1])


def test_follow_json_says_when_each_anomaly_happened_and_was_found(tmp_path):
    d = make_run(tmp_path, "read-committed")
    path = d / "history.jsonl"
    events = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    online, record = follow_record(path)
    rows = record["online"]["anomalies"]
    assert [r["anomaly"] for r in rows][:len(record["anomaly-types"])] == record["anomaly-types"]
    by_online = {r["anomaly"]: r for r in rows if r["online"]}
    assert set(by_online) == {f["anomaly"] for f in online} and by_online
    assert any(not r["online"] for r in rows)  # some only in the final pass (G-monotonic, ...)
    for r in rows:
        if r["online"]:  # the line that confirmed it, and its time
            first = next(f for f in online if f["anomaly"] == r["anomaly"])
            assert (r["line"], r["found-at"]) == (first["line"], first["found-at"])
        else:  # the latest line its first example names, by the file itself
            example = record["anomalies"][r["anomaly"]][0]
            assert r["line"] == max(lines_named(example))
            assert r["found-at"] >= max(f["found-at"] for f in online)
        assert r["happened"] == round(events[r["line"] - 1]["time"] / 1e9, 6), r


def test_run_report_has_a_section_for_online_and_final_pass(tmp_path):
    d = make_run(tmp_path, "read-committed")
    online, record = follow_record(d / "history.jsonl")
    results = json.loads((d / "results.json").read_text())
    results["online"] = {"found": online, "fail-fast": False, "anomalies": record["online"]["anomalies"]}
    (d / "results.json").write_text(json.dumps(results))
    test = json.loads((d / "test.json").read_text())
    test["started"] = online[0]["found-at"] - 1.0
    (d / "test.json").write_text(json.dumps(test))
    page = open(render(str(d))).read()
    assert 'id="online"' in page
    section = page[page.index('id="online"'):page.index("Latency and throughput")]
    for r in record["online"]["anomalies"]:
        assert f"<td>{r['anomaly']}</td>" in section
    assert section.count('class="online"') == sum(r["online"] for r in record["online"]["anomalies"])
    assert section.count('class="final-pass"') == sum(not r["online"] for r in record["online"]["anomalies"])
    assert "only in the final pass" in section and "1.00 s after the run started" in section
    # a results.json from before the record had "anomalies": computed from the history
    del results["online"]["anomalies"]
    (d / "results.json").write_text(json.dumps(results))
    assert 'class="final-pass"' in open(render(str(d))).read()


def test_timeline_without_online_reports_is_all_final_pass(tmp_path):
    d = make_run(tmp_path, "read-committed")
    h = read_jsonl(str(d / "history.jsonl"))
    results = json.loads((d / "results.json").read_text())
    rows = timeline(results, h, [], 123.0)
    assert [r["anomaly"] for r in rows] == results["anomaly-types"] + results.get("also-found", [])
    assert all(not r["online"] and r["found-at"] == 123.0 and r["happened"] is not None for r in rows)
