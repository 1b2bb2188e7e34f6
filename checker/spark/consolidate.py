"""Job 1, consolidate: every run's history.jsonl as one table of operations, paired by Spark.

One row per client operation (HISTORY.md): the invoke and the event that
completes it are the same process's consecutive events (a process has at
most one operation in flight), so a window per (run, process) ordered by
index pairs them with `lead` — no Python loop on the driver. An invoke with
no completion is `info`, as HISTORY.md says.

The JSON is read with an explicit schema (inference reads every file twice
and was 3-6x slower); `value` and `error` are declared as strings, and
Spark's JSON reader then keeps any JSON value there as its raw text, so the
values survive unchanged for the checkers. A line that is not a JSON event
does not stop the job: its run is judged "unknown" (`torn_runs`), as
`sleuth run` judges a history it cannot read.

A fault is active at an event when more nemesis faults have started than
stopped before it (a running sum over the run's events in index order). The
stop names come from their owner, `sleuth.nemesis.faults`; every other
nemesis event starts a fault, unless it only records that the start failed.
"""

from __future__ import annotations

EVENT_SCHEMA = ("`index` BIGINT, `time` BIGINT, `type` STRING, `process` STRING, `f` STRING, "
                "`value` STRING, `node` STRING, `error` STRING, `ts` BIGINT, `_corrupt_record` STRING")
OPS_COLUMNS = ("campaign", "run", "run_dir", "workload", "process", "f", "key", "invoke_index", "complete_index", "invoke_time",
               "complete_time", "outcome", "invoke_value", "complete_value", "node", "error", "ts",
               "fault_active")


def stop_names() -> list[str]:
    from sleuth.nemesis.faults import FAULTS

    return sorted({cls.stop_f for cls in FAULTS.values()})


def file_dir(col: str, suffix: str):
    """The absolute directory a file sits in, from Spark's `_metadata.file_path` URI, minus `suffix`."""
    from pyspark.sql import functions as F

    path = F.expr(f"url_decode(regexp_replace({col}, '^file:(//)?', ''))")
    return F.regexp_replace(path, suffix + "$", "")


def read_events(spark, runs):
    """Every event of every run: the run's columns (campaign, run, run_dir, workload) + the event's.

    `runs`: a Spark DataFrame with one row per run (campaign, run, run_dir, workload).
    """
    from pyspark.sql import functions as F

    paths = [r.run_dir + "/history.jsonl" for r in runs.select("run_dir").collect()]
    ev = (spark.read.schema(EVENT_SCHEMA).option("mode", "PERMISSIVE")
          .option("columnNameOfCorruptRecord", "_corrupt_record").json(paths)
          .withColumn("run_dir", file_dir("_metadata.file_path", "/history.jsonl")))
    return ev.join(F.broadcast(runs), "run_dir")


def operations(events):
    """The operations table (OPS_COLUMNS), one row per invoke (jobs.py drops run_dir on disk)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    by_run = Window.partitionBy("run").orderBy("index").rowsBetween(Window.unboundedPreceding, 0)
    nemesis = F.col("process") == "nemesis"
    starts_failed = F.coalesce(F.col("value").startswith('{"error"'), F.lit(False))
    step = (F.when(nemesis & F.col("f").isin(stop_names()), -1)
            .when(nemesis & ~starts_failed, 1).otherwise(0))
    ev = events.where(F.col("_corrupt_record").isNull()).withColumn("faults", F.sum(step).over(by_run))
    client = ev.where(~nemesis)
    by_process = Window.partitionBy("run", "process").orderBy("index")
    nxt = {c: F.lead(c).over(by_process) for c in ("type", "index", "time", "value", "node", "error", "ts")}
    paired = client.select("*", *[v.alias("next_" + c) for c, v in nxt.items()]).where(F.col("type") == "invoke")
    completed = F.col("next_type").isin("ok", "fail", "info")
    keyed = F.col("workload").isin(*keyed_workloads())
    return paired.select(
        "campaign", "run", "run_dir", "workload", F.col("process").cast("long").alias("process"), "f",
        F.when(keyed, F.get_json_object("value", "$[0]")).alias("key"),
        F.col("index").alias("invoke_index"),
        F.when(completed, F.col("next_index")).alias("complete_index"),
        F.col("time").alias("invoke_time"),
        F.when(completed, F.col("next_time")).alias("complete_time"),
        F.when(completed, F.col("next_type")).otherwise(F.lit("info")).alias("outcome"),
        F.col("value").alias("invoke_value"),
        F.when(completed, F.col("next_value")).alias("complete_value"),
        F.coalesce(F.when(completed, F.col("next_node")), F.col("node")).alias("node"),
        F.when(completed, F.col("next_error")).alias("error"),
        F.when(completed, F.col("next_ts")).alias("ts"),
        (F.col("faults") > 0).alias("fault_active"))


def torn_runs(events) -> set[str]:
    """Runs with a line that is not a JSON event (a torn last line, say): judged "unknown",
    as `sleuth run` judges a history it cannot read."""
    from pyspark.sql import functions as F

    bad = events.where(F.col("_corrupt_record").isNotNull() | F.col("index").isNull()
                       | F.col("type").isNull() | F.col("process").isNull())
    return {r.run for r in bad.select("run").distinct().collect()}


def keyed_workloads() -> list[str]:
    """Workloads whose history is split per key (and whose `key` column is filled)."""
    from sleuth.checker.spark.judge import KEYED, checker_name
    from sleuth.workloads.clients import WORKLOADS

    return sorted({w for w in WORKLOADS if checker_name(w) in KEYED} | set(KEYED))


def fault_events(events):
    """Per run: how many faults were injected (nemesis events that start one)."""
    from pyspark.sql import functions as F

    nemesis = F.col("process") == "nemesis"
    starts_failed = F.coalesce(F.col("value").startswith('{"error"'), F.lit(False))
    starts = nemesis & ~F.col("f").isin(stop_names()) & ~starts_failed
    return events.groupBy("run").agg(F.sum(F.when(starts, 1).otherwise(0)).alias("fault_events"))
