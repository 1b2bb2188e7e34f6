"""`sleuth check --spark` reads every format `sleuth check` reads (issue 43, item 4): Jepsen's
`history.edn` (one map per line, or one pretty-printed vector of records), its text history
(`.txt`, `.log` with log noise), elle-cli's JSON array, sparse files (no process, no f), and
gives each the verdict and anomaly types `sleuth check` gives it. Before, everything but JSON
Lines was "not valid JSON" (exit 254) with --spark.

Beside the samples of tests/data/imports (all valid), two known-invalid histories written
here in Jepsen's formats: write skew (G2-item, Adya's canonical example: two transactions
each read the key the other appends, both commit, a final read shows both appends) and a
register read of a value overwritten before it began (not linearizable). One embedded
session (local[1]) serves every file."""

from __future__ import annotations

import os
import shutil
import sys

import pytest
from live import require_module

pytestmark = pytest.mark.spark
require_module("pyspark")

from sleuth.checker import WORKLOADS  # noqa: E402
from sleuth.checker.checks import Checks  # noqa: E402
from sleuth.cli.check import judge_file, judge_spark  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data", "imports")

WRITE_SKEW_EDN = """; write skew: T0 reads y (empty) and appends to x, T1 reads x (empty) and appends to y
{:type :invoke, :f :txn, :value [[:r :y nil] [:append :x 1]], :process 0, :time 0, :index 0}
{:type :invoke, :f :txn, :value [[:r :x nil] [:append :y 2]], :process 1, :time 1, :index 1}
{:type :ok, :f :txn, :value [[:r :y []] [:append :x 1]], :process 0, :time 2, :index 2}
{:type :ok, :f :txn, :value [[:r :x []] [:append :y 2]], :process 1, :time 3, :index 3}
{:type :invoke, :f :txn, :value [[:r :x nil] [:r :y nil]], :process 0, :time 4, :index 4}
{:type :ok, :f :txn, :value [[:r :x [1]] [:r :y [2]]], :process 0, :time 5, :index 5}
"""

STALE_READ_LOG = """INFO  jepsen.core - Running test
INFO  jepsen.util - 0	:invoke	:write	1
INFO  jepsen.util - 0	:ok	:write	1
INFO  jepsen.util - 1	:invoke	:write	2
INFO  jepsen.util - 1	:ok	:write	2
WARN  jepsen.core - noise between history lines
INFO  jepsen.util - 2	:invoke	:read	nil
INFO  jepsen.util - 2	:ok	:read	1
"""


@pytest.fixture(scope="module")
def spark():
    from sleuth.spark.session import spark_session

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    s = spark_session("local[1]", "sleuth-test-formats")
    yield s
    s.stop()


def cases(tmp_path):
    (tmp_path / "write-skew.edn").write_text(WRITE_SKEW_EDN)
    (tmp_path / "stale.log").write_text(STALE_READ_LOG)
    for n in os.listdir(DATA):  # copied: the Spark path keeps its work beside its input
        shutil.copy(os.path.join(DATA, n), tmp_path / n)
    samples = [(str(tmp_path / n), "list-append", "valid") for n in
               ("same.edn", "same.json", "same.txt", "sparse.edn")]
    samples += [(str(tmp_path / n), "cas-register", v) for n, v in (("pretty.edn", "valid"), ("etcd.log", "invalid"))]
    return samples + [(str(tmp_path / "write-skew.edn"), "list-append", "invalid"),
                      (str(tmp_path / "stale.log"), "cas-register", "invalid")]


def test_every_format_gets_the_same_verdict_with_and_without_spark(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("SLEUTH_HOME", str(tmp_path / "home"))  # where a read-only input's copy would go
    for path, workload, expected in cases(tmp_path):
        spec = WORKLOADS[workload]
        checks = Checks(checker=spec.name, model=spec.default_model)
        status, want, _, _ = judge_file(path, spec, checks)
        got_status, got, _, _ = judge_spark(path, spec, checks, "local[1]", True)
        assert want["valid"] == {"valid": True, "invalid": False}[expected], (path, want)
        assert (got_status, got["valid"], got["anomaly-types"]) == (status, want["valid"], want["anomaly-types"]), \
            (path, got.get("error"), got["anomaly-types"], want["anomaly-types"])
        assert got["file"] == path
