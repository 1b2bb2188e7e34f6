"""End to end through Spark: a small live campaign (one run invalid by a bug switch) judged by the Spark jobs.

Needs `sleuth.spark.jobs.judge_runs` (issue 12, built beside this
module); skipped where it is not there yet. One SparkSession per call of the
CLI, two calls in this module.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from live import require_module

require_module("sleuth.spark.jobs", "Spark jobs (pyspark)")

pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.slow]

SLEUTH = os.path.join(os.path.dirname(sys.executable), "sleuth")
CAMPAIGN = """
[campaign]
name = "spark-e2e"
runtime = "local"
time-limit = 5
concurrency = 4
rate = 100

[[matrix]]
workload = "register"

[[matrix]]                # a mix: the run's directory is named …kill+pause…
workload = "list-append"
nemesis = "kill,pause"
nemesis-interval = 1

[[matrix]]                # as in campaigns/demo.toml, where seed 0 is caught in 10 s
workload = "register"
fault = "stale-read"
time-limit = 10
concurrency = 10
rate = 200
"""


def test_campaign_through_spark_writes_table_page_and_junit(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN)
    env = {**os.environ, "SLEUTH_HOME": str(tmp_path / ".home")}
    p = subprocess.run([SLEUTH, "campaign", str(path), "--store", str(tmp_path / "store"), "--json"],
                       capture_output=True, text=True, env=env, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]  # two valid runs, and the stale-read bug caught
    out = json.loads(p.stdout)
    ids = [r["id"] for r in out["runs"]]
    assert [r["outcome"] for r in out["runs"]] == ["pass", "pass", "caught"]
    assert "by Spark's jobs" not in p.stderr  # Spark agreed with every run
    cdir = out["dir"]
    for f in ("campaign.parquet", "campaign.csv", "index.html", "junit.xml"):
        assert os.path.exists(os.path.join(cdir, f)), f
    import pandas as pd

    table = pd.read_parquet(os.path.join(cdir, "campaign.parquet"))
    assert sorted(table["valid"]) == ["false", "true", "true"]
    page = open(out["page"]).read()
    assert all(i in page for i in ids) and "Spark agrees" in page
    cases = [c.get("name") for c in ET.parse(out["junit"]).getroot().iter("testcase")]
    assert cases == ids
    from test_run_report import _chromium  # the page, as a user opens it: every image loads

    shown = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                            "--virtual-time-budget=5000", "--dump-dom", f"file://{out['page']}"],
                           capture_output=True, text=True, timeout=120)
    assert 'class="matrix"' in shown.stdout and all(i in shown.stdout for i in ids)
    assert re.search(r"<img src=", shown.stdout), "the page has no image to load"
    assert 'data-images="loaded"' in shown.stdout, shown.stderr[-500:]

    assert "+pause" in out["runs"][1]["run_dir"] and table["durability"].tolist() == ["ok"] * 3

    # one acknowledged append deleted from the list-append run's storage: judged again, Spark's
    # durability audit makes that run invalid, and the summary says which run and why
    from test_spark_jobs import delete_final_row

    lost = delete_final_row(out["runs"][1]["run_dir"])
    again = subprocess.run([SLEUTH, "campaign", "judge", cdir, "--json"], capture_output=True, text=True,
                           env=env, timeout=600)
    assert again.returncode == 1, again.stderr[-3000:]
    judged = json.loads(again.stdout)["runs"]
    assert [r["outcome"] for r in judged] == ["pass", "invalid", "caught"]
    assert judged[1]["valid"] is True and judged[1]["spark-anomaly-types"] == ["lost-write"]
    assert "spark-anomaly-types" not in judged[0] and "spark-anomaly-types" not in judged[2]
    assert (f"invalid  {ids[1]}  lost-write by Spark's jobs (durability audit: {len(lost)} lost writes); "
            "the run's own checks said valid") in again.stderr, again.stderr[-3000:]
