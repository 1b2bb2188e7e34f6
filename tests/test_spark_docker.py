"""The durability audit on a `--runtime docker` run: the storage nodes' data is copied out of
their containers into the run directory, and Spark's audit reads it.

One real `sleuth run --runtime docker` of 5 s (list-append, the correct
cluster) and a copy of its run directory with one key's final row deleted
from a storage node's sealed Parquet (`delete_final_row`, the same doctoring
as tests/test_spark_jobs.py). One `judge_runs` call over the two: nothing on
the untouched run, exactly the deleted acknowledged appends on the copy.
"""

from __future__ import annotations

import glob
import os
import shutil

import pytest
from live import missing, require_module

pytestmark = [pytest.mark.docker, pytest.mark.spark, pytest.mark.cluster, pytest.mark.slow]
require_module("pyspark", "Spark (pyspark)")

from test_spark_jobs import delete_final_row, sleuth_run  # noqa: E402

from sleuth.workloads.clients import LISTS  # noqa: E402


def test_docker_run_keeps_its_storage_data_and_the_audit_reads_it(tmp_path):
    from sleuth.cluster.runtime_docker import DockerRuntime
    from sleuth.spark.jobs import judge_runs

    if not DockerRuntime.available():
        missing("a Docker engine", "none answers")
    env = {**os.environ, "SLEUTH_HOME": str(tmp_path / "home")}
    run = sleuth_run(str(tmp_path / "store"), env, "--runtime", "docker", "-w", "list-append", "--seed", "0")
    data = glob.glob(os.path.join(run, "nodes", "*", "data"))
    assert data, "no storage node's data was copied out of its container"
    assert not glob.glob(os.path.join(run, "nodes", "*", "data-error.txt"))
    sealed = glob.glob(os.path.join(run, "nodes", "*", "data", "shards", LISTS, "*.parquet"))
    assert sealed, "the storage nodes were asked to seal, yet no Parquet came out of the containers"

    lost = shutil.copytree(run, str(tmp_path / "doctored" / "lost"))
    deleted = delete_final_row(lost)
    assert deleted, "the deleted row held no acknowledged append"
    table = judge_runs([run, lost], str(tmp_path / "out"), campaign="docker", say=lambda m: None)
    by = {r["run_dir"]: r for r in table.to_dict("records")}
    untouched, doctored = by[os.path.realpath(run)], by[os.path.realpath(lost)]
    assert untouched["durability"] == "ok" and untouched["lost_writes"] == untouched["phantom_writes"] == 0
    assert untouched["spark_agrees"] and untouched["valid"] == untouched["run_valid"]
    assert doctored["durability"] == "lost" and doctored["lost_writes"] == len(deleted)
    assert doctored["valid"] == "false" and "lost-write" in doctored["anomaly_types"].split(",")
    import pyarrow.parquet as pq

    found = pq.read_table(str(tmp_path / "out" / "durability.parquet")).to_pandas()
    assert set(found["run"]) == {doctored["run"]}
    assert set(zip(found["key"], found["value"])) == deleted
