"""The Spark jobs of a campaign: consolidate, judge, audit durability, aggregate (issue 12).

The API `sleuth campaign` calls after its runs:

    from sleuth.spark.jobs import judge_runs
    table = judge_runs(run_dirs, out_dir, campaign="adhoc", master=None, say=print)

`run_dirs`: directories as `sleuth run` writes them (test.json, history.jsonl,
results.json, nodes/<node>/data/ for reference runs). One SparkSession per
call (embedded `local[*]` when `master` is None, else `spark://HOST:PORT`;
an active session with the same master is reused and left running). The four
jobs write into `out_dir`:

- `operations/`: Parquet partitioned by campaign and run, one row per client
  operation (consolidate.FILE_COLUMNS), paired in Spark tasks that each take a group of whole runs;
- `campaign.parquet` and `campaign.csv`: the campaign table (aggregate.COLUMNS),
  one row per run; also returned as a pandas DataFrame;
- `durability.parquet`: every lost or phantom write (run, anomaly, key,
  value, process, f, history line, the operation's value).

Judging (judge.py) runs in the task that consolidates each run (the whole
run; for register workloads the rules that span keys), plus
`groupBy(run, key).applyInPandas` tasks for register workloads' keys.
`say` gets one line per job; the returned table's `attrs["timings"]` holds
each job's seconds.
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any

from sleuth.base.exits import valid_of_text, verdict_text
from sleuth.base.words import plural
from sleuth.records import store
from sleuth.records.run import Results, TestRecord
from sleuth.spark.session import Progress, unreachable, unreachable_message, warm

JUDGED_SCHEMA = "run STRING, part STRING, valid STRING, anomaly_types ARRAY<STRING>, error STRING"


def run_meta(run_dirs: list[str], campaign: str) -> list[dict[str, Any]]:
    """One record per run from its test.json and results.json (small: read on the driver)."""
    dirs = [os.path.realpath(d) for d in run_dirs]
    if len(set(dirs)) != len(dirs):
        raise ValueError("the same run directory is given twice")
    common = os.path.commonpath([os.path.dirname(d) for d in dirs]) if dirs else ""
    out = []
    for d in dirs:
        test = TestRecord.read(store.test_path(d))
        results = (Results.read(store.results_path(d)) if os.path.exists(store.results_path(d))
                   else None)  # a run killed outright wrote none: its own verdict is unknown
        out.append({"campaign": campaign, "run": os.path.relpath(d, common), "run_dir": d,
                    "workload": test.workload, "target": test.target, "nemesis": ",".join(test.nemesis),
                    "fault": ",".join(test.fault), "isolation": test.isolation or "", "model": test.model or "",
                    "seed": test.seed or 0, "run_valid": verdict_text(results and results.valid),
                    "run_anomaly_types": sorted(results.anomaly_types if results else []), "test": test})
    return out


def session(master: str | None):
    """The SparkSession: the active one if it has this master, else a new one (and whether we own it)."""
    from pyspark.sql import SparkSession

    from sleuth.spark.session import spark_session

    want = master or "local[*]"
    active = SparkSession.getActiveSession()
    if active is not None and active.sparkContext.master == want:
        return active, False
    return spark_session(want, app="sleuth-campaign"), True


# what a campaign's consolidation and judging tasks import (session.warm)
CAMPAIGN_MODULES = ("pandas", "pyarrow.parquet", "sleuth.checker.judge", "sleuth.checker.timestamps",
                    "sleuth.spark.consolidate")


def _judge_group(tests: dict[str, dict], part: str, key, pdf):
    """applyInPandas: one group's rows -> one verdict row (runs on an executor)."""
    import pandas as pd

    from sleuth.spark.judge import history_of, judge_history

    run = key[0]
    try:
        h = history_of(pdf.sort_values("invoke_index").itertuples(index=False), f"{run}/history.jsonl")
        r = judge_history(h, tests[run], part)
        valid, types, error = verdict_text(r["valid"]), r["anomaly-types"], None
    except Exception as e:  # a malformed history is "unknown", as sleuth run says
        valid, types, error = verdict_text(None), [], f"{type(e).__name__}: {e}"
    return pd.DataFrame({"run": [run], "part": [part], "valid": [valid], "anomaly_types": [types],
                         "error": [error]})


def reachable_on_executors(spark, meta: list[dict], out_dir: str) -> None:
    """On a cluster, every executor must read each run's history and write into `out_dir` at the
    driver's paths (`session.unreachable`); a run whose history even the driver lacks is judged
    unknown as ever. Else a HistoryError naming the first path some executor cannot reach."""
    from sleuth.history.jsonl import HistoryError

    histories = [h for h in (os.path.join(m["run_dir"], "history.jsonl") for m in meta) if os.path.exists(h)]
    found = unreachable(spark, read=histories, write=[out_dir])
    if found is not None:
        raise HistoryError(found[1], None, unreachable_message(*found))


def readable_runs(runs) -> set[str]:
    """The runs whose history the consolidation could read (the others are unknown already)."""
    return set(runs.loc[runs["readable"].astype(bool), "run"])


def judge(ops, runs, meta: list[dict], readable: set[str], large: list[dict] = ()):
    """Job 2: verdicts per run (pandas: run, valid, anomaly_types as a sorted list, errors).

    `ops`: a function returning the consolidated operations (called only for register runs).
    `readable`: `readable_runs(runs)`.

    `runs`: the consolidation's `run` rows (pandas), which hold each run's whole-run verdict
    (consolidate.py judges it in the task that reads the run; for `large` runs, whose
    checker's verdict parts are given, only the whole-run rules). Register runs add one
    verdict per (run, key), judged here in `groupBy(run, key).applyInPandas` tasks.
    """
    import pandas as pd
    from pyspark.sql import functions as F

    from sleuth.checker.result import merge_valid
    from sleuth.spark.consolidate import keyed_workloads

    tests = {m["run"]: m["test"] for m in meta}
    keyed = [m["run"] for m in meta if m["workload"] in keyed_workloads()]
    parts = runs[["run", "valid", "anomaly_types", "reason"]].rename(columns={"reason": "error"})
    if large:  # the workload checker's verdicts of large runs (judge_large)
        parts = pd.concat([parts, pd.DataFrame(large)], ignore_index=True)
    keyed = [r for r in keyed if r in readable]  # an unreadable run is unknown already
    if keyed:
        cols = ["run", "process", "f", "invoke_index", "complete_index", "invoke_time", "complete_time",
                "outcome", "invoke_value", "complete_value", "node", "error", "ts", "key"]
        per_key = (ops().where(F.col("run").isin(*keyed)).select(*cols).groupBy("run", "key")
                   .applyInPandas(functools.partial(_judge_group, tests, "checker"), JUDGED_SCHEMA))
        parts = pd.concat([parts, per_key.toPandas()[["run", "valid", "anomaly_types", "error"]]],
                          ignore_index=True)
    rows = []
    for run, g in parts.groupby("run"):
        valid = merge_valid(*[valid_of_text(v) for v in g["valid"]])
        types = sorted({t for ts in g["anomaly_types"] for t in ts})
        rows.append({"run": run, "valid": verdict_text(valid),
                     "anomaly_types": types, "errors": [e for e in g["error"] if isinstance(e, str) and e]})
    return pd.DataFrame(rows, columns=["run", "valid", "anomaly_types", "errors"])


LARGE_RUN_BYTES = 64 << 20  # a transactional run's history from this size is judged per key (judge_large)


def large_runs(meta: list[dict], threshold: int) -> frozenset[str]:
    """The list-append and rw-register runs whose history.jsonl holds `threshold` bytes or more
    (and some bytes: a run without one is unreadable, judged unknown in its task)."""
    from sleuth.checker import WORKLOADS
    from sleuth.spark.consolidate import history_bytes

    # a keyed workload's runs are judged per key already
    return frozenset(m["run"] for m in meta if m["workload"] in WORKLOADS and WORKLOADS[m["workload"]].large
                     and not WORKLOADS[m["workload"]].keyed
                     and history_bytes(m["run_dir"]) >= max(threshold, 1))


def judge_large(spark, m: dict) -> dict:
    """One large run's workload checker, as `sleuth check --spark` runs it (history_check: per-key
    inference on the executors, only the transactions of cycles on the driver), in this session:
    no task holds the run's whole analysis. A verdict part (run, valid, anomaly_types, error)."""
    from sleuth.checker import WORKLOADS as CHECKERS
    from sleuth.spark import history_check
    checks = m["test"].checks
    options: dict[str, Any] = {"model": checks.model or CHECKERS[checks.checker].default_model}
    if checks.options.get("linearizable_keys"):
        options["linearizable_keys"] = True
    try:
        r = history_check.check(os.path.join(m["run_dir"], "history.jsonl"), checks.checker, options,
                                spark.sparkContext.master)
        return {"run": m["run"], "valid": verdict_text(r.valid), "anomaly_types": sorted(r.anomaly_types),
                "error": None}
    except Exception as e:  # a history the checker cannot judge: unknown, the rest go on
        return {"run": m["run"], "valid": verdict_text(None), "anomaly_types": [], "error": f"{type(e).__name__}: {e}"}


def judge_runs(run_dirs: list[str], out_dir: str, *, campaign: str = "adhoc",
               master: str | None = None, say=print, large_run_bytes: int = LARGE_RUN_BYTES):
    """Consolidate, judge, audit and aggregate `run_dirs`; write into `out_dir`; return the table.

    A list-append or rw-register run whose history holds `large_run_bytes` or more is judged
    as `sleuth check --spark` judges one history (`judge_large`), not inside one task."""
    import pandas as pd

    from sleuth.spark import aggregate, consolidate
    from sleuth.targets import reference_audit as durability

    meta = run_meta(run_dirs, campaign)
    out_dir = os.path.abspath(out_dir)  # the executors' working directory is not the driver's
    os.makedirs(out_dir, exist_ok=True)
    if not meta:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in aggregate.COLUMNS.items()})
    t0 = time.monotonic()
    spark, owned = session(master)
    try:
        with Progress(spark, lambda s: say(f"spark: {s}")) as progress:
            timings: dict[str, float] = {}
            t = time.monotonic()
            warm(spark, sorted({m["workload"] for m in meta}), CAMPAIGN_MODULES)
            timings["warm"] = time.monotonic() - t
            say(f"spark: {spark.sparkContext.master}, {plural(len(meta), 'run')} ({time.monotonic() - t0:.1f} s to start "
                "it and its Python workers)")
            if not spark.sparkContext.master.startswith("local"):
                reachable_on_executors(spark, meta, out_dir)
            t = time.monotonic()
            progress.step(f"consolidating and judging {plural(len(meta), 'run')} (whole runs, a task per group of runs)")
            ops_path = os.path.join(out_dir, "operations")
            large = large_runs(meta, large_run_bytes)
            runs = consolidate.consolidate(spark, meta, ops_path, large)
            # Read back only by the jobs that need it (register keys, the audit): listing a
            # campaign's partitions is a Spark job of its own, on the driver's clock.
            ops = functools.cache(lambda: consolidate.operations(spark, ops_path, meta))
            timings["consolidate"] = time.monotonic() - t
            say(f"spark: consolidated into {ops_path}, whole runs judged ({timings['consolidate']:.1f} s)")
            t = time.monotonic()
            readable = readable_runs(runs)
            progress.step(f"judging {plural(len(large), 'large run')} by key, and register runs' keys")
            verdicts = judge(ops, runs, meta, readable, [judge_large(spark, m) for m in meta
                                                         if m["run"] in large and m["run"] in readable])
            timings["judge"] = time.monotonic() - t
            say(f"spark: judged {plural(len(verdicts), 'run')}, {len(large)} of them large, per key "
                f"({timings['judge']:.1f} s)")
            t = time.monotonic()
            audited = {m["run"] for m in meta if m["workload"] in durability.audited()
                       and durability.data_dirs(m["run_dir"])}
            progress.step(f"auditing the durability of {plural(len(audited), 'run')}")
            anomalies = pd.DataFrame(columns=["run", "anomaly", "key", "value", "process", "f", "line", "op"])
            if audited:
                to_audit = spark.createDataFrame([(m["run_dir"], m["workload"]) for m in meta if m["run"] in audited],
                                                 "run_dir STRING, workload STRING")
                found = durability.audit(spark, ops(), to_audit)
                if found is not None:
                    anomalies = found.toPandas()
            anomalies.to_parquet(os.path.join(out_dir, "durability.parquet"), index=False)
            timings["audit"] = time.monotonic() - t
            say(f"spark: audited durability of {plural(len(audited), 'run')}: {len(anomalies)} lost or phantom writes "
                f"({timings['audit']:.1f} s)")
            t = time.monotonic()
            stats = runs.drop(columns=["campaign", "valid", "anomaly_types", "reason", "readable"])
            meta_df = pd.DataFrame([{k: v for k, v in m.items() if k != "test"} for m in meta])
            table = aggregate.campaign_table(meta_df, stats, verdicts, anomalies, audited)
            table.to_parquet(os.path.join(out_dir, "campaign.parquet"), index=False)
            table.to_csv(os.path.join(out_dir, "campaign.csv"), index=False)
            timings["aggregate"] = time.monotonic() - t
            table.attrs["timings"] = timings  # seconds per job, for bench/bench_spark.py
            say(f"spark: aggregated ({timings['aggregate']:.1f} s); campaign table of {plural(len(table), 'run')} in "
                f"{out_dir} ({time.monotonic() - t0:.1f} s in all)")
            return table
    finally:
        if owned:
            spark.stop()
