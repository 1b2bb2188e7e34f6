"""`sleuth campaign`: the matrix from TOML, bad input, outcomes and exit status, JUnit XML, the page, serve.

No runs and no Spark here: tests/test_campaign_live.py interrupts and resumes
a live campaign, tests/test_campaign_spark.py goes through Spark.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import asdict

import pytest
from live import require_module

from sleuth.base import exits
from sleuth.campaign.matrix import CampaignError, Run, expand, load, new_record
from sleuth.cluster.faults import FAULTS
from sleuth.nemesis.faults import KINDS
from sleuth.records.campaign import outcome, run_key, save, status
from sleuth.workloads.clients import WORKLOADS

SLEUTH = os.path.join(os.path.dirname(sys.executable), "sleuth")
DATA = os.path.join(os.path.dirname(__file__), "data", "campaign")

MATRIX = """
[campaign]
name = "t"
time-limit = 5
seeds = [0, 1]

[[matrix]]
workload = ["register", "list-append"]
nemesis = ["none", "kill", "kill,partition"]

[[matrix]]
workload = "counter"
fault = "rtw-no-conflict"
seed = 3
time-limit = 7

[[matrix]]
target = "postgres"
workload = "rw-register"
isolation = ["read-committed", "serializable"]

[[exclude]]
workload = "list-append"
nemesis = "kill,partition"

[[exclude]]
seed = 1
target = "postgres"
"""


def write(tmp_path, text, name="c.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def sleuth(*args, **kw):
    return subprocess.run([SLEUTH, *args], capture_output=True, text=True, timeout=60, **kw)


def test_matrix_expands_blocks_as_products_minus_exclusions(tmp_path):
    c = load(write(tmp_path, MATRIX))
    ids = [r.id for r in c.runs]
    # block 1: 2 workloads x 3 nemeses x 2 seeds = 12, minus list-append under kill+partition (2)
    assert len([i for i in ids if ".reference." in i and not i.startswith("counter")]) == 10
    assert "register.reference.kill+partition.none.strict-serializable.s1" in ids
    assert not any(i.startswith("list-append.reference.kill+partition") for i in ids)
    # block 2: its own seed and time limit, and expected invalid (a fault switch is on)
    (counter,) = [r for r in c.runs if r.workload == "counter"]
    assert (counter.seed, counter.time_limit, counter.expect, counter.fault) == (3, 7.0, "invalid", "rtw-no-conflict")
    # block 3: isolation levels of PostgreSQL, seed 1 excluded; the reference runs default to the target's first level
    pg = [r for r in c.runs if r.target == "postgres"]
    assert [(r.isolation, r.seed) for r in pg] == [("read-committed", 0), ("serializable", 0)]
    assert all(r.expect == "valid" and r.time_limit == 5.0 for r in pg)
    assert {r.isolation for r in c.runs if r.target == "reference"} == {"strict-serializable"}
    assert len(ids) == len(set(ids)) == 13


def test_a_kind_named_twice_in_a_mix_counts_once(tmp_path):
    c = load(write(tmp_path, '[[matrix]]\nworkload = "register"\nnemesis = "kill, partition,kill"\n'))
    assert [r.nemesis for r in c.runs] == ["kill,partition"]
    assert c.runs[0].id == "register.reference.kill+partition.none.strict-serializable.s0"


def test_vocabularies_come_from_their_owners(tmp_path):
    text = f"""
[[matrix]]
workload = {json.dumps(list(WORKLOADS))}
nemesis = {json.dumps(["none", *KINDS])}
"""
    c = load(write(tmp_path, text, "every.toml"))
    assert c.name == "every" and len(c.runs) == len(WORKLOADS) * (len(KINDS) + 1)
    for f in FAULTS:
        assert load(write(tmp_path, f'[[matrix]]\nworkload = "register"\nfault = "{f}"\n')).runs[0].expect == "invalid"


def test_the_shipped_nightly_reaches_every_workload_nemesis_fault_switch_and_target():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    load(os.path.join(repo, "campaigns", "demo.toml"))  # parses, and names only what exists
    runs = load(os.path.join(repo, "campaigns", "nightly.toml")).runs
    assert {r.workload for r in runs} == set(WORKLOADS)
    assert {k for r in runs for k in r.nemesis.split(",") if k} == set(KINDS)
    assert any(set(r.nemesis.split(",")) == set(KINDS) for r in runs)  # every kind in one run too
    assert {f for r in runs for f in r.fault.split(",") if f} == set(FAULTS)
    # the servers and clusters sleuth starts itself, and a cluster described in a file
    assert {r.target for r in runs} == {"reference", "postgres", "mariadb", "galera", "galera+relaxed-flush", "etcd",
                                        "etcd+serializable-reads", "targets/etcd.toml"}


@pytest.mark.parametrize("text, where", [
    ("[[matrix]]\nworkload = register\n", "(at line 2, column 12)"),
    ("[[matrix]]\nworkload = 'registr'\n", "matrix[1].workload: unknown workload 'registr'"),
    ("[[matrix]]\nworkload = 'register'\nnemesis = 'kill,partiton'\n", "matrix[1].nemesis: unknown nemesis 'partiton'"),
    ("[[matrix]]\nworkload = 'register'\nfault = 'stale-reads'\n", "matrix[1].fault: unknown fault switch 'stale-reads'"),
    ("[[matrix]]\nworkload = 'register'\nisolation = 'snapshot'\n", "matrix[1].isolation: 'snapshot'"),
    ("[[matrix]]\nworkload = 'register'\ntarget = 'postgres'\nfault = 'stale-read'\n", "matrix[1]: register.postgres"),
    ("[[matrix]]\nworkload = 'register'\ntarget = 'postgres'\nnemesis = 'partition'\n", "matrix[1]: register.postgres"),
    ("[[matrix]]\nworkload = 'register'\ntime-limt = 3\n", "matrix[1].time-limt: unknown key"),
    ("[[matrix]]\nworkload = 'register'\n[[exclude]]\nworkload = 'regster'\n", "exclude[1].workload"),
    ("[[matrix]]\nworkload = 'register'\n[[exclude]]\nworkload = 'register'\n", "every run of the matrix is excluded"),
    ("[campaign]\nname = 'x'\n", "matrix: at least one"),
])
def test_bad_campaign_files_exit_254_naming_file_and_key(tmp_path, text, where):
    path = write(tmp_path, text)
    p = sleuth("campaign", path, "--store", str(tmp_path / "store"))
    assert p.returncode == exits.BAD_INPUT, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr
    assert lines[0].startswith(f"sleuth: error: {path}: ") and where in lines[0], lines[0]
    assert not (tmp_path / "store").exists()  # nothing ran, nothing was created


def test_missing_file_and_resume_without_campaign_exit_254(tmp_path):
    p = sleuth("campaign", str(tmp_path / "nope.toml"))
    assert p.returncode == 254 and "nope.toml" in p.stderr
    p = sleuth("campaign", write(tmp_path, MATRIX), "--resume", "--store", str(tmp_path / "store"))
    assert p.returncode == 254 and "--resume: no campaign 't'" in p.stderr


def test_dry_run_lists_every_run_and_runs_nothing(tmp_path):
    path = write(tmp_path, MATRIX)
    p = sleuth("campaign", path, "--dry-run", "--store", str(tmp_path / "store"))
    assert p.returncode == 0, p.stderr
    listed = [line.split()[0] for line in p.stdout.splitlines()]
    assert listed == [r.id for r in load(path).runs]
    assert "counter.reference.none.rtw-no-conflict.strict-serializable.s3  (7 s, 10 clients, 200/s, expected invalid)" in p.stdout
    p = sleuth("campaign", path, "--dry-run", "--json")
    assert [r["id"] for r in json.loads(p.stdout)["runs"]] == listed  # stdout is JSON only
    assert not (tmp_path / "store").exists()


def test_outcomes_and_exit_status_as_test_all():
    assert outcome("valid", True) == ("pass", 0)
    assert outcome("valid", False) == ("invalid", 1)
    assert outcome("invalid", False) == ("caught", 0)  # a bug switch on, and the checkers saw it
    assert outcome("invalid", True) == ("missed", 1)  # a bug switch on, and nobody noticed: a failure
    assert outcome("invalid", "unknown") == ("unknown", 2)
    assert outcome("valid", True, crashed=True) == ("crashed", 255)
    assert outcome("valid", "pending") == ("pending", 2)

    def rec(*runs):
        return {"runs": [{"run": {"expect": e}, "status": "done", "valid": v, "run_dir": f"/r{i}",
                          **({"crashed": "boom"} if c else {})} for i, (e, v, c) in enumerate(runs)]}

    assert status(rec(("valid", True, 0), ("invalid", False, 0))) == 0
    assert status(rec(("valid", True, 0), ("invalid", True, 0))) == 1
    assert status(rec(("valid", False, 0), ("invalid", "unknown", 0))) == 2
    assert status(rec(("valid", "unknown", 0), ("valid", True, 1), ("valid", False, 0))) == 255
    r = rec(("valid", True, 0), ("valid", True, 0))
    r["runs"][1]["status"] = "interrupted"
    assert status(r) == 2
    # Spark's verdict (durability included) overrides the run's own
    assert status(rec(("valid", True, 0)), {run_key("/r0"): {"valid": False}}) == 1
    assert status(rec(("invalid", True, 0)), {run_key("/r0"): {"valid": False}}) == 0


def test_a_run_sleuth_cannot_start_is_crashed_exit_255_and_a_junit_error(tmp_path):
    # a PostgreSQL URL on a closed loopback port: the run fails before any operation
    path = write(tmp_path, '[campaign]\nname = "dead"\ntime-limit = 1\n[[matrix]]\nworkload = "register"\n'
                           'target = "postgresql://sleuth@127.0.0.1:1/none"\n')
    p = sleuth("campaign", path, "--store", str(tmp_path / "store"), "--no-spark", "--json")
    assert p.returncode == exits.CRASHED, p.stderr
    out = json.loads(p.stdout)
    assert [r["outcome"] for r in out["runs"]] == ["crashed"]
    (case,) = ET.parse(out["junit"]).getroot().iter("testcase")
    assert case.find("error").get("type") == "crashed" and "127.0.0.1" in case.find("error").get("message")
    assert [line for line in p.stderr.splitlines() if line.startswith("crashed ")][0].endswith("Connection refused")


CAMPAIGN = """
[campaign]
name = "fixture"
time-limit = 10

[[matrix]]
workload = "list-append"
nemesis = "kill"

[[matrix]]
workload = "register"
fault = "stale-read"

[[matrix]]
workload = "counter"
fault = "rtw-no-conflict"

[[matrix]]
workload = "register"
nemesis = "kill"

[[matrix]]
workload = "bank"
"""

STAMPS = ("20260101T000000", "20260101T000100", "20260101T000200", "20260101T000300")


def fixture_campaign(tmp_path, stamp):
    """A finished campaign of five runs (the last one interrupted), with the table fixture as its campaign.csv."""
    plan = expand(__import__("tomllib").loads(CAMPAIGN), "fixture.toml")
    cdir = tmp_path / "store" / "campaigns" / "fixture" / stamp
    cdir.mkdir(parents=True)
    record = new_record(plan, str(cdir))
    own = [(True, []), (False, ["nonlinearizable"]), (True, []), (True, []), None]
    for r, s, v in zip(record["runs"], STAMPS + (None,), own):
        if v is None:
            r["status"] = "interrupted"
            continue
        d = cdir / "runs" / r["run"]["id"] / s
        d.mkdir(parents=True)
        (d / "index.html").write_text("<!doctype html><title>run</title>")
        r.update(status="done", run_dir=str(d), valid=v[0], **{"anomaly-types": v[1]}, ops=10, ok=10, fail=0,
                 info=0, started=1.0, finished=11.0)
    save(record)
    table = open(os.path.join(DATA, "table.csv")).read().replace("{runs}", str(cdir / "runs"))
    (cdir / "campaign.csv").write_text(table)
    return cdir, record


def test_junit_xml_names_every_run_and_fails_only_what_failed(tmp_path):
    from sleuth.reports import campaign_report, junit

    cdir, record = fixture_campaign(tmp_path, "20261101T020000")
    path = junit.write(str(cdir), record, campaign_report.verdicts(campaign_report.load_table(str(cdir))))
    suite = ET.parse(path).getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert list(cases) == [r["run"]["id"] for r in record["runs"]]
    kinds = {name: [x.tag for x in c if x.tag != "system-out"] for name, c in cases.items()}
    assert kinds == {
        "list-append.reference.kill.none.strict-serializable.s0": [],  # pass
        "register.reference.none.stale-read.strict-serializable.s0": [],  # caught: a pass
        "counter.reference.none.rtw-no-conflict.strict-serializable.s0": ["failure"],  # missed
        "register.reference.kill.none.strict-serializable.s0": ["failure"],  # Spark's durability audit
        "bank.reference.none.none.strict-serializable.s0": ["skipped"],  # interrupted
    }
    assert "missed" in cases["counter.reference.none.rtw-no-conflict.strict-serializable.s0"].find("failure").get("message")
    assert "lost-write" in cases["register.reference.kill.none.strict-serializable.s0"].find("failure").get("message")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped"), suite.get("errors")) == ("5", "2", "1", "0")


def test_page_renders_matrix_links_outcomes_and_trends(tmp_path):
    from sleuth.reports import campaign_report

    fixture_campaign(tmp_path, "20261101T020000")  # an earlier night
    cdir, record = fixture_campaign(tmp_path, "20261102T020000")
    page = open(campaign_report.render(str(cdir))).read()
    for r in record["runs"][:4]:
        href = os.path.relpath(os.path.join(r["run_dir"], "index.html"), cdir)
        assert f'href="{href}"' in page and (cdir / href).exists()
        # the long id may break after each dot (the runs table fits a laptop's window), and reads whole
        assert f'href="{href}">{".<wbr>".join(r["run"]["id"].split("."))}</a>' in page
    cells = re.findall(r'class="(pass|caught|missed|invalid|pending)"[^>]*>s0 \1<', page)
    assert sorted(cells) == ["caught", "invalid", "missed", "pass", "pending"]
    assert "lost-write" in page and "nonlinearizable" in page and ">lost<" in page
    assert "(lost): <b>3</b>" in page and "Runs: register.reference.kill.none" in page
    assert "5 runs: 1 pass, 1 caught, 1 invalid, 1 missed, 1 pending" in page
    imgs = re.findall(r'<img src="([^"]+)"', page)
    assert len(imgs) == 3 and all((cdir / i).stat().st_size > 1000 for i in imgs)
    nights = campaign_report.history(str(cdir), "fixture")
    assert [s for s, _, _ in nights] == ["20261101T020000", "20261102T020000"]


@pytest.mark.slow
def test_page_opens_in_headless_chromium_with_every_image(tmp_path):
    from test_run_report import _chromium

    from sleuth.reports import campaign_report

    cdir, _ = fixture_campaign(tmp_path, "20261102T020000")
    index = campaign_report.render(str(cdir))
    p = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                        "--dump-dom", f"file://{index}"], capture_output=True, text=True, timeout=120)
    assert 'class="matrix"' in p.stdout
    assert 'data-images="loaded"' in p.stdout, p.stderr[-500:]
    shot = tmp_path / "page.png"
    subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1280,2000", f"file://{index}"], capture_output=True, timeout=120)
    assert shot.stat().st_size > 10_000


def test_judge_without_spark_rewrites_page_and_junit_from_a_directory(tmp_path):
    cdir, record = fixture_campaign(tmp_path, "20261102T020000")
    os.remove(cdir / "campaign.csv")  # the runs' own verdicts only: one missed
    p = sleuth("campaign", "judge", str(cdir), "--no-spark", "--json")
    out = json.loads(p.stdout)
    assert p.returncode == 2 and out["exit"] == 2  # the interrupted run is pending: unknown
    assert out["counts"] == {"pass": 2, "caught": 1, "invalid": 0, "missed": 1, "unknown": 0, "crashed": 0,
                             "pending": 1}
    assert (cdir / "index.html").exists() and (cdir / "junit.xml").exists()


def test_judge_any_directory_of_runs(tmp_path):
    from test_run_report import make_run

    from sleuth.reports.run_report import render

    runs = tmp_path / "runs"
    runs.mkdir()
    render(str(make_run(runs, "serializable")))
    render(str(make_run(runs, "read-committed")))  # invalid as strict serializable
    p = sleuth("campaign", "judge", str(runs), "--no-spark", "--json")
    assert p.returncode == 1, p.stderr
    assert {r["id"]: r["outcome"] for r in json.loads(p.stdout)["runs"]} == {"read-committed": "invalid",
                                                                               "serializable": "pass"}
    cases = [c.get("name") for c in ET.parse(runs / "junit.xml").getroot().iter("testcase")]
    assert cases == ["read-committed", "serializable"]
    assert 'href="read-committed/index.html"' in (runs / "index.html").read_text()
    p = sleuth("campaign", "judge", str(tmp_path / "none"), "--no-spark")
    assert p.returncode == 254 and "none: not a directory" in p.stderr


def test_serve_lists_campaigns_beside_runs(tmp_path):
    import threading
    import urllib.request

    from sleuth.reports import campaign_report
    from sleuth.reports.serve import make_server

    cdir, _ = fixture_campaign(tmp_path, "20261102T020000")
    campaign_report.render(str(cdir))
    store = tmp_path / "store"
    run = store / "register-reference-no-nemesis" / "20261102T010000"
    run.mkdir(parents=True)
    (run / "results.json").write_text('{"valid": true}')
    srv = make_server(str(store), port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{srv.server_address[1]}"
        root = urllib.request.urlopen(base + "/", timeout=10).read().decode()
        assert "campaigns/fixture/20261102T020000/index.html" in root
        # the counts its page shows: Spark's durability audit made a valid run invalid
        assert re.sub(r"<[^>]+>", " ", root.split("fixture/20261102T020000</a>")[1].split("</tr>")[0]).split() == [
            "5", "runs", "1", "pass", "1", "caught", "1", "invalid", "1", "missed", "1", "pending"]
        assert "register-reference-no-nemesis/20261102T010000/index.html" in root
        assert "campaigns/fixture/index.html" not in root  # a campaign is not listed as a run
        page = urllib.request.urlopen(base + "/campaigns/fixture/20261102T020000/index.html", timeout=10).read()
        assert b'class="matrix"' in page
    finally:
        srv.shutdown()



@pytest.mark.parametrize("target, strongest", [
    ("postgresql://u@127.0.0.1:1/db", "serializable"), ("mysql://u@127.0.0.1:1/db", "serializable"),
    ("reference", "strict-serializable")])
def test_without_isolation_a_cell_and_a_run_ask_for_the_targets_strongest_level(tmp_path, target, strongest):
    # docs/campaigns.md: "the default is its strongest"; `sleuth run` keeps the same default
    from sleuth.run.runner import RunConfig, plan

    c = load(write(tmp_path, f'[[matrix]]\nworkload = "list-append"\ntarget = "{target}"\n'))
    assert [r.isolation for r in c.runs] == [strongest]
    p = plan(RunConfig(target=target, workload="list-append", runtime="local" if target == "reference" else None))
    assert p.cfg.isolation == strongest
    assert p.checks.model == strongest


def test_duration_and_throughput_are_one_definition_in_every_output(tmp_path):
    """Issue 43: the page said 88.3 ops/s over 15.0 s for a run Spark judged and 199.6 ops/s
    over 16.8 s with --no-spark (ops over the time limit; test.json's wall clock), and JUnit
    a third time (the campaign's wall clock around the run). One owner, sleuth.records.measure: the
    first to the last history event, and ok operations per second of it."""
    pd = require_module("pandas")
    require_module("pyarrow")
    from sleuth.campaign.matrix import record_of_runs
    from sleuth.reports import campaign_report, junit
    from sleuth.spark import aggregate, consolidate
    from sleuth.spark.jobs import run_meta

    d = tmp_path / "runs" / "r1"
    d.mkdir(parents=True)
    # 3 register writes on one key over 2.5 s of history, one of them failed: 2 ok of 3
    events, t = [], 500_000_000  # the first event half a second after the run's start
    for i, (typ, v) in enumerate((("ok", 1), ("fail", 2), ("ok", 3))):
        events.append({"type": "invoke", "process": i, "f": "write", "value": [0, v], "time": t})
        events.append({"type": typ, "process": i, "f": "write", "value": [0, v], "time": t + 100_000_000})
        t += 1_000_000_000
    events[-1]["time"] = 3_000_000_000
    (d / "history.jsonl").write_text("".join(json.dumps({"index": i, **e}) + "\n" for i, e in enumerate(events)))
    test = {"name": "r1", "workload": "register", "target": "reference", "nemesis": [], "fault": [],
            "isolation": "strict-serializable", "model": "linearizable", "time_limit": 2, "seed": 0,
            "started": 1000.0, "finished": 1009.0,  # cluster start and final reads: wall clock, not the load
            "summary": {"ops": 3, "ok": 2, "fail": 1, "info": 0}}
    (d / "test.json").write_text(json.dumps(test))
    (d / "results.json").write_text(json.dumps({"valid": True, "anomaly-types": []}))
    record = record_of_runs(str(tmp_path / "runs"))
    record["runs"][0].update(started=990.0, finished=1015.0)  # the campaign's clock around the whole run

    own = campaign_report.table_from_runs(record).iloc[0]  # --no-spark
    meta = run_meta([str(d)], "c")
    _, stats = consolidate.run_rows("c", meta[0]["run"], str(d), "register", meta[0]["test"], "all", True)
    stats = stats.drop(columns=["campaign", "valid", "anomaly_types", "reason", "readable"])
    spark = aggregate.campaign_table(pd.DataFrame([{k: v for k, v in m.items() if k != "test"} for m in meta]),
                                     stats, pd.DataFrame([{"run": meta[0]["run"], "valid": "true",
                                                           "anomaly_types": []}]),
                                     pd.DataFrame(columns=["run", "anomaly"]), set()).iloc[0]
    assert own["duration_s"] == spark["duration_s"] == 2.5
    assert own["throughput"] == spark["throughput"] == 2 / 2.5
    for table in (campaign_report.table_from_runs(record), pd.DataFrame([spark])):
        cdir = tmp_path / f"c{len(list(tmp_path.glob('c*')))}"
        cdir.mkdir()
        xml = junit.write(str(cdir), record, campaign_report.verdicts(table))
        case = ET.parse(xml).getroot().find("testsuite").find("testcase")
        assert case.get("time") == "2.5"
        page = open(campaign_report.render(str(cdir), table, {**record, "dir": str(cdir)})).read()
        assert "<td>0.80</td>" in page and "<td>2.50</td>" in page  # throughput, duration
        assert "ok ops/s&#8202;*</th>" in page and "duration, s&#8202;*</th>" in page  # the headers, and
        assert "* Duration: from the run&#39;s first to its last history event" in page  # what * says


def test_serve_index_is_styled_one_vocabulary_and_no_empty_heading(tmp_path):
    """Issue 43: the index was unstyled, had a "campaigns" heading over nothing, and said
    "valid" beside "INVALID"."""
    import threading
    import urllib.request

    from sleuth.reports.serve import make_server

    store = tmp_path / "store"
    store.mkdir()
    srv = make_server(str(store), port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()

    def index_page(_store):
        return urllib.request.urlopen(f"http://127.0.0.1:{srv.server_address[1]}/", timeout=10).read().decode()

    empty = index_page(str(store))
    assert "<style>" in empty and "<h2" not in empty and "No runs in this store yet" in empty
    for name, v in (("a", True), ("b", False), ("c", "unknown")):
        (store / name / "20261102T010000").mkdir(parents=True)
        (store / name / "20261102T010000" / "results.json").write_text(json.dumps({"valid": v}))
    page = index_page(str(store))
    assert "<style>" in page and 'id="runs"' in page and 'id="campaigns"' not in page  # no campaign: no heading
    words = re.findall(r'<span class="badge (\w+)">(\w+)</span>', page)
    assert sorted(words) == [("invalid", "invalid"), ("unknown", "unknown"), ("valid", "valid")]
    assert "INVALID" not in page
    srv.shutdown()


def test_campaign_page_says_yes_no_and_n_a_where_durability_was_not_audited(tmp_path):
    """Issue 43: the page showed Spark agrees as a raw `True`, and lost/phantom counts of 0
    for a run the durability audit never read."""
    from sleuth.reports import campaign_report

    cdir, record = fixture_campaign(tmp_path, "20261102T020000")
    table = campaign_report.load_table(str(cdir))
    table.loc[table["workload"] == "counter", "durability"] = "n/a"  # the audit reads no counter table
    page = open(campaign_report.render(str(cdir), table, record)).read()
    rows = {re.sub(r"<[^>]+>", "", r.split("</td>")[0]): [re.sub(r"<[^>]+>", "", c) for c in r.split("<td")[1:]]
            for r in page.split('<table class="runs">')[1].split("</table>")[0].split("<tr><td>")[1:]}
    counter = next(v for k, v in rows.items() if k.startswith("counter"))
    cells = [c.split(">", 1)[1].strip() for c in counter]
    expected = "yes" if table.loc[table["workload"] == "counter", "spark_agrees"].iloc[0] else "no"
    assert cells[3:7] == ["n/a", "n/a", "n/a", expected]  # durability, lost, phantom, Spark agrees
    assert ">True<" not in page and ">False<" not in page
    assert "Audited: 3 runs (1 not" in page


def test_one_run_is_said_in_the_singular(tmp_path):
    # issue 43: "1 runs" (the dry run's count, the campaign page's headline)
    from sleuth.reports import campaign_report

    p = sleuth("campaign", write(tmp_path, '[[matrix]]\nworkload = "register"\n', "one.toml"), "--dry-run")
    assert p.returncode == 0 and p.stderr.strip().splitlines()[-1] == "1 run", p.stderr
    cdir, record = fixture_campaign(tmp_path, "20261102T020000")
    record["runs"] = record["runs"][:1]
    page = open(campaign_report.render(str(cdir), campaign_report.load_table(str(cdir)), record)).read()
    assert "1 run: 1 pass" in page and "1 runs" not in page


def test_judge_labels_a_crashed_run_crashed_from_what_the_runner_writes(tmp_path):
    """Issue 45: `record_of_runs` read test.json's `crashed`, which no writer produces, so a run
    that crashed (test.json `status` 255, `reason` "crashed: …", as sleuth.run.runner writes it) was
    labelled unknown, exit 2, by `sleuth campaign judge`."""
    d = tmp_path / "runs" / "r1"
    d.mkdir(parents=True)
    test = {"name": "r1", "workload": "register", "target": "reference", "nemesis": [], "fault": [],
            "isolation": "strict-serializable", "seed": 0, "summary": {"ops": 0, "ok": 0, "fail": 0, "info": 0},
            "status": exits.CRASHED, "reason": "crashed: RuntimeError: boom"}
    (d / "test.json").write_text(json.dumps(test))
    (d / "results.json").write_text(json.dumps({"valid": "unknown", "anomaly-types": [],
                                                "reason": "crashed: RuntimeError: boom"}))
    p = sleuth("campaign", "judge", str(tmp_path / "runs"), "--no-spark", "--json")
    out = json.loads(p.stdout)
    assert p.returncode == exits.CRASHED and out["exit"] == exits.CRASHED, p.stderr
    assert [r["outcome"] for r in out["runs"]] == ["crashed"]
    assert out["counts"]["crashed"] == 1
def test_cells_can_ask_for_online_checking_and_fail_fast(tmp_path):
    """A soak cell of the nightly: judged as it runs, ended at its first anomaly."""
    text = """
[campaign]
online = true

[[matrix]]
workload = "register"

[[matrix]]
workload = "list-append"
fault = "write-ts-not-strict"
fail-fast = true
"""
    c = load(write(tmp_path, text))
    register, appends = c.runs
    assert (register.online, register.fail_fast) == (True, False)
    assert (appends.online, appends.fail_fast) == (True, True)
    assert Run.from_json({k: v for k, v in asdict(register).items() if k not in ("online", "fail_fast")}).online is False
    with pytest.raises(CampaignError, match=r"matrix\[1\]\.fail-fast.*not true or false"):
        load(write(tmp_path, '[[matrix]]\nworkload = "register"\nfail-fast = 1\n'))
