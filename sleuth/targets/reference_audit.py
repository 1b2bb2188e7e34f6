"""Job 3, audit durability: what the storage nodes kept, joined with what the clients were told.

A reference-cluster run directory keeps each storage node's data
(`nodes/<node>/data/`, copied by `ReferenceTarget.collect_logs` after asking
each node to seal): sealed Parquet files of `(row, ts, diff)` updates per
table (`parquet_files` below) and the write-ahead log `wal.jsonl` of what was
appended since the last seal. Both are read: a node that could not seal at
the end (dead, partitioned) still has its acknowledged appends in the wal,
since the node fsyncs the wal before it answers (seed 002).

How a history write maps to rows (the registry's `audited`, sleuth.checker):

- list-append: one row `[k, " v1 v2 ..."]` per key; an append rewrites it
  (retract the old text, insert the text with ` v` added). Appends are never
  undone, so an appended value is durable iff it is in key k's row at the
  end (the diffs summed over every timestamp).
- register, rw-register: one row `[k, v]` per key; a write (or cas) of v
  retracts the old row and inserts `[k, v]`. Values are unique per key, so
  a write of v is durable iff some update inserts `[k, v]` (the register
  moves on; the update stays in the shard's history).

`lost-write`: an `ok` write that is not durable (acknowledged, then gone: the
`ack-before-durable` bug). `phantom-write`: a write whose operation `fail`ed
(certainly did not happen) that is there anyway. `info` writes may or may
not have happened: neither. Bank and counter rows carry no unique values,
so those workloads are not audited ("n/a"), nor are runs without storage data.
"""

from __future__ import annotations

import glob
import os

from sleuth.checker import LIST_ROWS, REGISTER_ROWS, TABLE_PREFIX, WORKLOADS
from sleuth.checker.models import LOST_WRITE, PHANTOM_WRITE

WAL_SCHEMA = "`batches` ARRAY<STRUCT<`shard`: STRING, `updates`: ARRAY<ARRAY<STRING>>>>"
ROW_SCHEMA = "ARRAY<STRING>"


def audited(rows: str | None = None) -> tuple[str, ...]:
    """The workloads the audit reads back (the registry declares how: `Workload.audited`), or
    those whose rows are read as `rows` (LIST_ROWS, REGISTER_ROWS)."""
    return tuple(w for w, s in WORKLOADS.items() if s.audited and rows in (None, s.audited))


def table_of(workload: str) -> str:
    """The table a workload writes (the registry's `tables`, the first)."""
    return WORKLOADS[workload].tables[0]


def tables_of(workload: str) -> tuple[str, ...]:
    """Its table, and the name it had in runs stored before every table sleuth creates was
    named `sleuth_…` (`lists` for `sleuth_lists`): a run keeps its storage nodes' data, and an
    older run re-judged is audited against what it wrote then."""
    table = table_of(workload)
    return (table, table.removeprefix(TABLE_PREFIX))


def data_dirs(run_dir: str) -> list[str]:
    return sorted(d for d in glob.glob(os.path.join(run_dir, "nodes", "*", "data")) if os.path.isdir(d))


def file_dir(col: str, suffix: str):
    """The absolute directory a file sits in, from Spark's `_metadata.file_path` URI, minus `suffix`.

    The URI percent-encodes what a URI must (a space is %20, % is %25) and leaves `+` as it is;
    `url_decode` is form decoding, which reads `+` as a space, so a `+` is made %2B first (a
    campaign names a run of the nemesis mix kill,pause `…kill+pause…`: its writes all looked lost)."""
    from pyspark.sql import functions as F

    path = F.expr(f"url_decode(replace(regexp_replace({col}, '^file:(//)?', ''), '+', '%2B'))")
    return F.regexp_replace(path, suffix + "$", "")


def read_updates(spark, run_dirs: list[str]):
    """Every update the storage nodes of these runs kept: run_dir, table, k, v (text), ts, diff."""
    from pyspark.sql import functions as F

    dirs = [d for r in run_dirs for d in data_dirs(r)]
    parts = []
    files = parquet_files(dirs)
    if files:
        p = _sealed(spark, files)
        parts.append(p.select(
            file_dir("file", r"/nodes/[^/]+/data/shards/[^/]+/[^/]+\.parquet").alias("run_dir"),
            "table", "row", "ts", "diff"))
    wals = [os.path.join(d, "wal.jsonl") for d in dirs
            if os.path.exists(os.path.join(d, "wal.jsonl")) and os.path.getsize(os.path.join(d, "wal.jsonl"))]
    if wals:
        w = (spark.read.schema(WAL_SCHEMA).json(wals)
             .select(F.col("_metadata.file_path").alias("file"), F.explode("batches").alias("b"))
             .select("file", "b.shard", F.explode("b.updates").alias("u")))
        parts.append(w.select(
            file_dir("file", r"/nodes/[^/]+/data/wal\.jsonl").alias("run_dir"),
            F.col("shard").alias("table"), F.col("u")[0].alias("row"),
            F.col("u")[1].cast("long").alias("ts"), F.col("u")[2].cast("long").alias("diff")))
    if not parts:
        return None
    u = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    row = F.from_json("row", ROW_SCHEMA)
    return u.select("run_dir", "table", row[0].alias("k"), row[1].alias("v"), "ts", "diff")


def history_writes(ops):
    """Every write of the audited workloads: run, key, value (text), outcome, and where it is."""
    from pyspark.sql import functions as F

    mops = F.from_json("value", "ARRAY<ARRAY<STRING>>")
    base = ops.withColumn("value", F.coalesce("complete_value", "invoke_value"))
    txn = (base.where(F.col("workload").isin(*(w for w in audited() if WORKLOADS[w].micro_ops)))
           .select("*", F.explode(mops).alias("m"))
           .where(F.col("m")[0].isin("append", "w"))
           .select("*", F.col("m")[1].alias("wkey"), F.col("m")[2].alias("wvalue")))
    registers = [w for w in audited() if not WORKLOADS[w].micro_ops]  # single-operation writes
    reg = (base.where(F.col("workload").isin(*registers) & F.col("f").isin("write", "cas"))
           .select("*", F.get_json_object("value", "$[0]").alias("wkey"),
                   F.when(F.col("f") == "write", F.get_json_object("value", "$[1]"))
                   .otherwise(F.get_json_object("value", "$[1][1]")).alias("wvalue")))
    cols = ["run", "run_dir", "workload", "wkey", "wvalue", "outcome", "process", "f", "invoke_value",
            "invoke_index", "complete_index"]
    return txn.select(*cols).unionByName(reg.select(*cols)).where(F.col("outcome").isin("ok", "fail"))


def audit(spark, ops, runs):
    """Lost and phantom writes: one row each (run, anomaly, key, value, process, f, line, op).

    `ops`: the operations table joined with each run's run_dir and workload;
    `runs`: run, run_dir, workload of the runs to audit (those with storage data).
    Returns None when no run has storage data.
    """
    from pyspark.sql import functions as F

    run_dirs = [r.run_dir for r in runs.collect()]
    updates = read_updates(spark, run_dirs)
    if updates is None:
        return None
    tables = spark.createDataFrame([(w, t) for w in audited() for t in tables_of(w)], "workload STRING, table STRING")
    updates = updates.join(F.broadcast(runs.join(F.broadcast(tables), "workload")), ["run_dir", "table"])
    # list-append: the values in each key's row at the end
    final = (updates.where(F.col("workload").isin(*audited(LIST_ROWS)))
             .groupBy("run_dir", "k", "v").agg(F.sum("diff").alias("n")).where("n > 0")
             .select("run_dir", F.col("k").alias("wkey"),
                     F.explode(F.split(F.trim("v"), " +")).alias("wvalue")).where("wvalue != ''"))
    # registers: every value ever inserted for each key
    inserted = (updates.where(F.col("workload").isin(*audited(REGISTER_ROWS)) & (F.col("diff") > 0))
                .select("run_dir", F.col("k").alias("wkey"), F.col("v").alias("wvalue")))
    kept = final.unionByName(inserted).distinct().withColumn("kept", F.lit(True))
    writes = history_writes(ops.join(F.broadcast(runs.select("run_dir")), "run_dir"))
    judged = writes.join(kept, ["run_dir", "wkey", "wvalue"], "left")
    lost = judged.where((F.col("outcome") == "ok") & F.col("kept").isNull()).withColumn(
        "anomaly", F.lit(LOST_WRITE))
    phantom = judged.where((F.col("outcome") == "fail") & F.col("kept").isNotNull()).withColumn(
        "anomaly", F.lit(PHANTOM_WRITE))
    return lost.unionByName(phantom).select(
        "run", "anomaly", F.col("wkey").alias("key"), F.col("wvalue").alias("value"), "process", "f",
        (F.coalesce("complete_index", "invoke_index") + 1).alias("line"),
        F.col("invoke_value").alias("op"))


# --- the storage nodes' sealed Parquet: a table's whole history ------------------------------------
# Each storage node seals its log into Parquet files, one per shard (table) and sealed range:
# `<data>/shards/<table>/<lo>-<hi>-<n>.parquet` with columns `row` (the row as JSON text), `ts`
# and `diff` (seed 002's updates). Read together they are every update the cluster ever made
# durable, so the contents of a table at any timestamp `t` since it was created is the multiset
# of rows whose diffs at `ts <= t` sum to a nonzero count: what the cluster kept, independent of
# what its coordinators answer.

def parquet_files(data_dirs: list[str]) -> list[str]:
    """Every sealed Parquet file under the storage nodes' data directories."""
    return sorted(f for d in data_dirs for f in glob.glob(os.path.join(d, "shards", "*", "*.parquet")))


def shard_updates(spark, data_dirs: list[str]):
    """One DataFrame of every sealed update: `table`, `row` (JSON text), `ts`, `diff`."""
    files = parquet_files(data_dirs)
    if not files:
        raise FileNotFoundError(f"no sealed Parquet files under {', '.join(data_dirs)}")
    return _sealed(spark, files).drop("file")


def _sealed(spark, files: list[str]):
    """The updates in sealed Parquet `files`: `file` (its path), `table` (its shard), `row`,
    `ts`, `diff`: one reading for the audit (`read_updates`) and a table's history."""
    from pyspark.sql import functions as F

    df = spark.read.parquet(*files).select(F.col("_metadata.file_path").alias("file"), "row", "ts", "diff")
    return df.select("file", F.regexp_extract("file", r"/shards/([^/]+)/[^/]+\.parquet$", 1).alias("table"),
                     "row", "ts", "diff")


def contents_at(updates, table: str, as_of: int):
    """The rows of `table` at timestamp `as_of`: `row` and its multiplicity `count` (> 0)."""
    from pyspark.sql import functions as F

    return (updates.where((F.col("table") == table) & (F.col("ts") <= as_of))
            .groupBy("row").agg(F.sum("diff").alias("count"))
            .where(F.col("count") != 0))
