"""The per-run HTML report (reports/run_report.py), on histories with known answers."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import orjson
import pytest
from click.testing import CliRunner
from live import missing

from sleuth.cli import main
from sleuth.history.jsonl import read_jsonl
from sleuth.reports.run_report import fault_counts, nemesis_windows, render
from sleuth.workloads.sim_list_append import write_sim


def make_run(tmp_path, db):
    d = tmp_path / db
    d.mkdir()
    write_sim(str(d / "h.jsonl"), db, 300, concurrency=5, keys=4, seed=1)
    lines = (d / "h.jsonl").read_bytes().splitlines()
    events = [orjson.loads(x) for x in lines]
    # nemesis events a third and two thirds of the way through
    for frac, f in ((0.33, "kill"), (0.66, "restart")):
        i = int(len(events) * frac)
        events.insert(i, {"index": 0, "time": events[i - 1]["time"], "type": "info",
                          "process": "nemesis", "f": f, "value": ["storage1"]})
    with open(d / "history.jsonl", "wb") as out:
        for i, e in enumerate(events):
            e["index"] = i
            out.write(orjson.dumps(e) + b"\n")
    os.remove(d / "h.jsonl")
    r = CliRunner().invoke(main, ["check", str(d / "history.jsonl"), "--workload", "list-append", "--json"])
    (d / "results.json").write_text(r.output.strip().splitlines()[-1])
    (d / "test.json").write_text(json.dumps({"name": db, "workload": "list-append", "target": "sim",
                                             "nemesis": ["kill"], "fault": [], "seed": 1}))
    (d / "nodes" / "storage1").mkdir(parents=True)
    (d / "nodes" / "storage1" / "node.log").write_text("log line\n")
    return d


def test_invalid_run_report_names_each_anomaly(tmp_path):
    d = make_run(tmp_path, "read-committed")
    results = json.loads((d / "results.json").read_text())
    assert results["valid"] is False
    page = open(render(str(d))).read()
    assert "INVALID" in page
    for name in results["anomaly-types"]:
        assert name in page
    for src in re.findall(r'<img src="([^"]+)"', page):
        assert (d / src).exists(), src
    assert "nodes/storage1/node.log" in page and (d / "timeline.html").exists()
    # each type says how many were found (cycles: at least, one per component) and how many are shown
    counts = results["stats"]["anomaly-counts"]
    for name in results["anomaly-types"]:
        shown = min(5, len(results["anomalies"][name]))
        mark = "≥" if "cycle" in results["anomalies"][name][0] else ""
        assert f'{name} <small class="found">{mark}{counts[name]:,} found, {shown} shown</small>' in page, name
    assert "≥: a cycle type is counted once per strongly connected component" in page


def test_found_counts_mark_cycle_counts_as_lower_bounds():
    from sleuth.checker.result import found_counts

    record = {"anomaly-types": ["G2-item", "lost-update", "G1a"], "also-found": ["G-single"],
              "anomalies": {"G2-item": [{"cycle": ["T1", "T2"]}], "lost-update": [{"key": 1}],
                            "G1a": [{}], "G-single": [{"cycle": ["T3", "T4"]}]},
              "stats": {"anomaly-counts": {"G2-item": 1234, "lost-update": 3, "G-single": 2},
                        "cycle-counts-are": "lower-bounds"}}
    assert found_counts(record) == {"G2-item": "≥1,234", "lost-update": "3", "G-single": "≥2"}
    record["stats"].pop("cycle-counts-are")  # counts said to be exact: no mark
    assert found_counts(record)["G2-item"] == "1,234"
    assert found_counts({"anomaly-types": ["nonlinearizable"], "stats": {}}) == {}
    units = {"anomaly-units": {"nonlinearizable": "key"}}
    assert found_counts({"anomaly-types": ["nonlinearizable"],
                         "stats": {"anomaly-counts": {"nonlinearizable": 1}, **units}}) == {"nonlinearizable": "1 key"}
    assert found_counts({"anomaly-types": ["nonlinearizable"], "stats": {
        "anomaly-counts": {"nonlinearizable": 1200}, **units}}) == {"nonlinearizable": "1,200 keys"}


def test_the_timeline_fits_the_window(tmp_path):
    """Scaled to the page's width, not a fixed 1,400 pixels that scrolled sideways."""
    d = make_run(tmp_path, "read-committed")
    render(str(d))
    svg = re.search(r"<svg [^>]*>", (d / "timeline.html").read_text()).group(0)
    assert 'width="100%"' in svg and re.search(r'viewBox="0 0 1400 \d+"', svg), svg


@pytest.mark.parametrize("ops", [1, 7, 12])
def test_a_counterexample_of_up_to_24_events_fits_the_reports_column(ops):
    """The counterexample's picture (one bar per operation, in event order) fits the run
    report's 1,000-pixel column up to 24 events; a longer one scrolls in its own box."""
    from sleuth.reports.counterexample import RUN_PAGE_WIDTH, timeline_svg

    rows = [{"process": i % 3, "invoke": 2 * i, "complete": 2 * i + 1, "line": i + 1, "f": "txn",
             "value": [], "type": "ok", "name": f"T{i}"} for i in range(ops)]
    width = int(re.search(r'<svg [^>]*width="(\d+)"', timeline_svg(rows, [])).group(1))
    assert width <= RUN_PAGE_WIDTH
    assert width >= 0.85 * RUN_PAGE_WIDTH or ops < 7  # and uses the column, not a corner of it


def test_a_long_counterexample_scrolls_in_its_box_not_the_page(tmp_path):
    from sleuth.reports.counterexample import RUN_PAGE_WIDTH, timeline_svg

    rows = [{"process": 0, "invoke": 2 * i, "complete": 2 * i + 1, "line": i + 1, "f": "txn", "value": [],
             "type": "ok"} for i in range(20)]
    width = int(re.search(r'<svg [^>]*width="(\d+)"', timeline_svg(rows, [])).group(1))
    assert width > RUN_PAGE_WIDTH  # 40 events: bars stay readable, at least 36 pixels an event
    d = make_run(tmp_path, "read-committed")
    page = open(render(str(d))).read()
    assert f"max-width: {RUN_PAGE_WIDTH}px;" in page  # the column the pictures are sized to
    assert re.search(r"\.counterexample-timeline \{ overflow-x: auto; \}", page)


def test_valid_run_report(tmp_path):
    d = make_run(tmp_path, "serializable")
    page = open(render(str(d))).read()
    assert ">\nvalid</p>" in page and "INVALID" not in page and "None found." in page
    assert "Grey bands: nemesis windows (kill " in page


def test_a_run_without_faults_promises_no_grey_bands(tmp_path):
    d = make_run(tmp_path, "serializable")
    kept = [orjson.loads(x) for x in (d / "history.jsonl").read_bytes().splitlines() if b'"nemesis"' not in x]
    (d / "history.jsonl").write_bytes(b"".join(orjson.dumps({**e, "index": i}) + b"\n" for i, e in enumerate(kept)))
    page = open(render(str(d))).read()
    assert "Grey bands" not in page and "No fault was injected: no nemesis window." in page


def test_the_report_shows_the_runs_own_notes_and_nemesis_errors(tmp_path):
    # the run's notes (a nemesis kind that never started, the target not recovering, a
    # failed shrink) were printed in the summary but left out of the report CI keeps
    d = make_run(tmp_path, "serializable")
    test = json.loads((d / "test.json").read_text())
    test |= {"notes": ["--nemesis pause never started: this run had room for 1 fault"],
             "nemesis_errors": ["kill: storage1 <unreachable>"]}
    (d / "test.json").write_text(json.dumps(test))
    page = open(render(str(d))).read()
    assert "<i>note: --nemesis pause never started: this run had room for 1 fault</i>" in page
    assert "<i>nemesis errors: kill: storage1 &lt;unreachable&gt;</i>" in page


def test_the_report_names_the_nodes_faults_acted_on_and_the_operations_each_node_served(tmp_path):
    d = make_run(tmp_path, "serializable")
    events = [orjson.loads(x) for x in (d / "history.jsonl").read_bytes().splitlines()]
    for e in events:  # clients spread over two nodes, as on a cluster of peers
        if e["process"] != "nemesis":
            e["node"] = f"n{e['process'] % 2 + 1}"
    t = events[-1]["time"]
    events += [{"index": 0, "time": t, "type": "info", "process": "nemesis", "f": "start-partition",
                "value": {"grudge": "isolate-one", "cut": [["n2", "n1"]]}},
               {"index": 0, "time": t + 1, "type": "info", "process": "nemesis", "f": "stop-partition",
                "value": {"healed": True}}]
    (d / "history.jsonl").write_bytes(b"".join(orjson.dumps({**e, "index": i}) + b"\n" for i, e in enumerate(events)))
    page = open(render(str(d))).read()
    text = re.sub(r"\s+", " ", re.sub("<[^>]+>", " ", page))
    assert re.search(r"node ok fail info n1 \d+ \d+ \d+ n2 \d+ \d+ \d+", text), text[:3000]
    assert re.search(r"[\d.]+ s kill: storage1 .*[\d.]+ s start-partition: \(isolate-one\) n2\|n1", text)


def test_nemesis_windows_pair_starts_with_stops():
    ev = [{"time": 1e9, "f": "kill"}, {"time": 2e9, "f": "restart"},
          {"time": 3e9, "f": "start-dual-leader"}, {"time": 5e9, "f": "stop-dual-leader"},
          {"time": 6e9, "f": "pause"}]
    assert nemesis_windows(ev, 9.0) == [(1.0, 2.0, "kill"), (3.0, 5.0, "start-dual-leader"), (6.0, 9.0, "pause")]


def test_a_jepsen_historys_windows_close_with_jepsens_own_heal_events():
    """Jepsen's combined nemesis ends a kill with :start and a clock bump with :reset-clock
    (its :perf specs); read with sleuth's names only, the first kill of an imported history
    opened a window that nothing closed, and the report shaded everything after it."""
    ev = [{"time": 1e9, "f": "kill"}, {"time": 2e9, "f": "start"},
          {"time": 3e9, "f": "kill"}, {"time": 4e9, "f": "start"},
          {"time": 5e9, "f": "bump-clock"}, {"time": 6e9, "f": "reset-clock"},
          {"time": 7e9, "f": "strobe-clock"},  # an instant in Jepsen: no window
          {"time": 8e9, "f": "start-packet"}]
    assert nemesis_windows(ev, 9.0) == [(1.0, 2.0, "kill"), (3.0, 4.0, "kill"), (5.0, 6.0, "bump-clock"),
                                        (8.0, 9.0, "start-packet")]
    assert fault_counts(ev) == {"kill": 2, "bump-clock": 1, "start-packet": 1}


def _chromium():
    for name in ("chromium", "chromium-browser"):
        if shutil.which(name):
            return shutil.which(name)
    p = subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], capture_output=True,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if p.returncode != 0:
        missing("Chromium", "not installed and apt-get could not install it")
    return shutil.which("chromium")


@pytest.mark.slow
def test_report_renders_in_headless_chromium(tmp_path):
    d = make_run(tmp_path, "read-committed")
    index = render(str(d))
    p = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                        "--dump-dom", f"file://{index}"], capture_output=True, text=True, timeout=120)
    dom = p.stdout
    assert 'id="anomalies"' in dom and 'class="anomalies"' in dom
    assert 'data-images="loaded"' in dom, p.stderr[-500:]


def test_serve_lists_runs_and_serves_reports(tmp_path):
    import threading
    import urllib.request

    from sleuth.reports.serve import make_server
    store = tmp_path / "store"
    (store / "rc").mkdir(parents=True)
    d = make_run(tmp_path, "read-committed")
    shutil.move(str(d), str(store / "rc" / "20260101T000000"))
    render(str(store / "rc" / "20260101T000000"))
    srv = make_server(str(store), port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{srv.server_address[1]}"
        root = urllib.request.urlopen(base + "/", timeout=10).read().decode()
        assert "rc/20260101T000000/index.html" in root and '<span class="badge invalid">invalid</span>' in root
        page = urllib.request.urlopen(base + "/rc/20260101T000000/index.html", timeout=10).read().decode()
        assert "INVALID" in page
    finally:
        srv.shutdown()


def test_serve_links_work_for_names_needing_quoting(tmp_path):
    """A run name with '#', '%' or a space must still link to its report (the href is URL-quoted)."""
    import re
    import threading
    import urllib.parse
    import urllib.request

    from sleuth.reports.serve import make_server
    store = tmp_path / "store"
    name = "odd #1 100%"
    (store / name).mkdir(parents=True)
    d = make_run(tmp_path, "read-committed")
    shutil.move(str(d), str(store / name / "20260101T000000"))
    render(str(store / name / "20260101T000000"))
    srv = make_server(str(store), port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{srv.server_address[1]}/"
        root = urllib.request.urlopen(base, timeout=10).read().decode()
        hrefs = re.findall(r'href="([^"]+)"', root)
        assert len(hrefs) == 1
        page = urllib.request.urlopen(urllib.parse.urljoin(base, hrefs[0]), timeout=10).read().decode()
        assert "INVALID" in page
    finally:
        srv.shutdown()


def test_the_run_summary_says_how_many_of_each_type_were_found(tmp_path, capsys):
    from types import SimpleNamespace

    from sleuth.base import exits
    from sleuth.cli.run import _summary

    d = make_run(tmp_path, "read-committed")
    results = json.loads((d / "results.json").read_text())
    config = SimpleNamespace(workload="list-append", target="sim", faults=(), isolation=None, seed=1)
    rec = SimpleNamespace(config=config, valid=False, status=exits.INVALID, runtime=None,
                          checks=SimpleNamespace(model="strict-serializable"), nemesis=[], faults={},
                          counts={"ops": 1, "ok": 1, "fail": 0, "info": 0}, started=0.0, finished=1.0, duration=1.0,
                          reason=None, anomaly_types=results["anomaly-types"], notes=[], nemesis_errors=[],
                          run_dir=str(d), report=None, results=results)
    _summary(rec)
    line = next(x for x in capsys.readouterr().err.splitlines() if x.startswith("  anomalies: "))
    counts = results["stats"]["anomaly-counts"]
    g = results["anomaly-types"][0]
    assert g.startswith("G") and f"{g} ≥{counts[g]:,}" in line, line
    assert line.count(",") >= len(results["anomaly-types"]) - 1
    rec.checks.model = None  # bank, counter, source: judged by invariants, not against a model
    _summary(rec)
    err = capsys.readouterr().err
    assert "INVALID  list-append on sim\n" in err and "model None" not in err
    rec.valid, rec.status = True, exits.VALID  # the headline sleuth check and the page give it too
    _summary(rec)
    assert "  valid  list-append on sim\n" in capsys.readouterr().err


def test_a_long_runs_timeline_shows_the_operations_of_its_first_anomaly(tmp_path, monkeypatch):
    # the timeline draws a window of operations; it drew the first ones, so a nightly run's
    # timeline ended long before the anomaly its report leads with
    import html as html_lib

    from sleuth.reports import run_report

    monkeypatch.setattr(run_report, "TIMELINE_OPS", 20)
    d = make_run(tmp_path, "read-committed")
    results = json.loads((d / "results.json").read_text())
    first = results["anomaly-types"][0]
    named = run_report.lines_named(results["anomalies"][first][0], lists=False)
    h = read_jsonl(d / "history.jsonl")
    ops, _ = run_report.load_ops(h)
    order = sorted(ops, key=lambda o: o["start"])
    i = min(j for j, o in enumerate(order) if named & set(o["lines"]))
    assert i >= 20, "the anomaly lies among the first operations: this case shows nothing"
    render(str(d), history=h)
    page = (d / "timeline.html").read_text()
    m = re.search(rf"around the first {first} example \(line (\d+)\): operations (\d+)–(\d+) of 30\d", page)
    assert m and int(m[1]) == order[i]["lines"][0], page[:400]
    lo, hi = int(m[2]), int(m[3])
    assert hi - lo + 1 == 20 and lo <= i + 1 <= hi
    tip = html_lib.escape(f"{order[i]['f']} {json.dumps(order[i]['value'])[:300]} → {order[i]['type']}")
    assert tip in page  # its bar is drawn


def test_a_run_with_no_operation_has_no_plots_and_no_warnings(tmp_path):
    # a run that crashed before its first operation: matplotlib warned twice ("No artists with
    # labels found to put in legend") and the report showed two empty plots
    d = tmp_path / "crashed"
    d.mkdir()
    (d / "history.jsonl").write_text("")
    (d / "test.json").write_text(json.dumps({"name": "crashed", "workload": "register", "target": "reference",
                                             "nemesis": [], "fault": [], "seed": 0, "status": 255,
                                             "reason": "crashed: the cluster did not start"}))
    (d / "results.json").write_text(json.dumps({"valid": "unknown", "anomaly-types": [], "anomalies": {}}))
    (d / "latency.png").write_bytes(b"an older rendering's picture")
    r = subprocess.run([os.path.join(os.path.dirname(sys.executable), "sleuth"), "report", str(d)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Warning" not in r.stderr and "warn" not in r.stderr.lower(), r.stderr
    page = (d / "index.html").read_text()
    assert "No operation completed: nothing to plot." in page
    assert "latency.png" not in page and "throughput.png" not in page
    assert not (d / "latency.png").exists() and not (d / "throughput.png").exists()
