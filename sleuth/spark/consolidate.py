"""Job 1, consolidate: every run's history.jsonl as one Parquet dataset of operations, paired in Spark tasks.

Each run's history is one file, and a history is only meaningful whole, so
the job reads files as whole units: a few groups of runs of about equal size
per core, one partition (one task) per group, through `mapInArrow`. A task
reads each of its runs' history with
sleuth's own reader (`sleuth.history.jsonl.read_jsonl`, what `sleuth run` judges)
and pairs invokes with completions vectorized (numpy): a process has at most
one operation in flight (docs/history-format.md), so an invoke's completion is the same
process's next event, when that is a completion. An invoke with no
completion is `info`. The task writes the run's operations with pyarrow
as one new Parquet file in `campaign=C/run=R/` (Spark's escaping of the
names, asked of the driver's JVM), under a name of this task attempt's
own, and yields the file's manifest row, which Spark's partitioned writer
commits into the dataset's `_manifest/` (manifest.py: only the files a
committed manifest names are ever read, so a retried or speculative task
needs no rename). Its `run` row (verdict, first-to-last time, faults,
counts and latencies, whether its file could be read) reaches the driver
through an accumulator: one job, so
every file is read and judged once, in one pass (a job per
run, or per stage and run, made a campaign 1.6-2.3 times slower). It judges the run
while the History is in memory (`judge.py` says which part: the whole run,
or only the cross-key rules of a register run, whose keys are judged per
(run, key) afterwards) and computes its statistics (`aggregate.run_stats`).

So there is no shuffle, no sort across runs, no Python loop on the driver,
and each file is parsed once. The operations never cross into the JVM
(handing them to Spark's Parquet writer made the consolidation 1.8 times
main's time, where tasks wrote them with pyarrow). The run directories must
be readable by the executors and the dataset's location writable by them;
each run's settings reach them as a broadcast.

A file sleuth's reader refuses (a torn last line, a broken per-process rule)
is judged "unknown", as `sleuth run` judges a history it cannot read, with
the reader's one-line message; its operations still come from the lines that
are JSON events (`tolerant_events`).

A fault is active at an event when more nemesis faults have started than
stopped before it (a running sum over the run's events in index order). The
stop names come from their owner, `sleuth.nemesis.faults`; every other
nemesis event starts a fault, unless it only records that the start failed
(its value is `{"error": ...}`).
"""

from __future__ import annotations

import os
from typing import Any

import orjson

from sleuth.history.jsonl import gc_paused
from sleuth.spark.aggregate import STATS_SCHEMA, run_stats
from sleuth.spark.history_ops import ddl_columns

OPS_COLUMNS = ("campaign", "run", "run_dir", "workload", "process", "f", "key", "invoke_index", "complete_index",
               "invoke_time", "complete_time", "outcome", "invoke_value", "complete_value", "node", "error", "ts",
               "fault_active")
# The columns of each Parquet file, in order (campaign and run are the partition directories).
FILE_COLUMNS = {"workload": "string", "process": "int64", "f": "string", "key": "string", "invoke_index": "int64",
                "complete_index": "int64", "invoke_time": "int64", "complete_time": "int64", "outcome": "string",
                "invoke_value": "string", "complete_value": "string", "node": "string", "error": "string",
                "ts": "int64", "fault_active": "bool"}
RUN_SCHEMA = ("`campaign` STRING, `run` STRING, `readable` BOOLEAN, `reason` STRING, `valid` STRING, "
              "`anomaly_types` ARRAY<STRING>, `span_ns` BIGINT, `fault_events` BIGINT, " + STATS_SCHEMA)
RUN_COLUMNS = tuple(ddl_columns(RUN_SCHEMA))
_SQL = {"string": "STRING", "int64": "BIGINT", "bool": "BOOLEAN"}
# the dataset as Spark reads it: the partition columns, then each data file's columns
OPS_FILE_SCHEMA = ("`campaign` STRING, `run` STRING, "
                   + ", ".join(f"`{c}` {_SQL[t]}" for c, t in FILE_COLUMNS.items()))
PARTITIONS = ["campaign", "run"]  # the dataset's partition directories, and its manifest's
# what a consolidation task yields: a manifest row per run (manifest.py), the run's one data file
MANIFEST_SCHEMA = "`campaign` STRING, `run` STRING, `path` STRING, `rows` BIGINT"


def stop_names() -> frozenset[str]:
    from sleuth.nemesis.faults import FAULT_CLASSES

    return frozenset(cls.stop_f for cls in FAULT_CLASSES.values())


def keyed_workloads() -> list[str]:
    """Workloads whose history is split per key (and whose `key` column is filled)."""
    from sleuth.checker import WORKLOADS

    return sorted(w for w, spec in WORKLOADS.items() if spec.keyed)


@gc_paused
def tolerant_events(path: str) -> list:
    """The lines of a file sleuth's reader refused that are still events by the format's rules
    (`sleuth.history.jsonl.event_from_dict`, each line alone: its index need not be its position),
    as Events: what the dataset keeps of a damaged history."""
    from sleuth.history.jsonl import HistoryError, event_from_dict

    out = []
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                out.append(event_from_dict(orjson.loads(raw), path, lineno, None))
            except (orjson.JSONDecodeError, HistoryError):
                continue
    return out


def _text(v) -> str | None:
    """A JSON value as the dataset keeps it: its JSON text (None for null)."""
    return None if v is None else orjson.dumps(v).decode()


def _key_text(v) -> str | None:
    """The key of a register operation's value `[key, ...]`, as text (a string key as itself)."""
    if not isinstance(v, list) or not v or v[0] is None:
        return None
    k = v[0]
    return k if isinstance(k, str) else _text(k)


def pair(events: list, keyed: bool):
    """Client operations of `events` (Events, in index order) as a pandas DataFrame with the
    dataset's per-operation columns, and the number of faults the nemesis started.

    Vectorized (`sleuth.history.jsonl.pair_columns`): an invoke is completed by its process's next
    event in index order when that event is a completion.
    """
    import numpy as np
    import pandas as pd

    stops = stop_names()
    n = len(events)
    index = np.fromiter((e.index for e in events), np.int64, n)
    # fault count at each event: +1 for a started fault, -1 for a heal
    step = np.fromiter((0 if type(e.process) is int else -1 if e.f in stops
                        else 0 if isinstance(e.value, dict) and "error" in e.value else 1 for e in events),
                       np.int64, n)
    by_index = np.argsort(index, kind="stable")
    active = np.empty(n, np.int64)
    active[by_index] = np.cumsum(step[by_index])
    # sleuth's one pairer, in its columnar form, over the events in index order: it pairs an
    # invoke with its process's next event when that is a completion, and in a damaged
    # history (which this keeps) pairs what can be, its breaches set aside.
    from sleuth.history.jsonl import TYPE_CODES, pair_columns

    process = np.fromiter((e.process if type(e.process) is int else -1 for e in events), np.int64, n)
    types = np.fromiter((TYPE_CODES[e.type] for e in events), np.int8, n)
    paired = pair_columns(process[by_index], types[by_index], np.zeros(n, np.int8))
    inv = by_index[paired.invoke]
    comp = np.where(paired.complete >= 0, by_index[np.maximum(paired.complete, 0)], -1)
    ivs = [events[i] for i in inv]
    cps = [events[c] if c >= 0 else None for c in comp]

    def completed(get):
        return [None if c is None else get(c) for c in cps]

    def ints(xs):
        return pd.array(xs, dtype="Int64")

    ops = pd.DataFrame({
        "process": ints([e.process for e in ivs]),
        "f": [e.f for e in ivs],
        "key": [_key_text(e.value) for e in ivs] if keyed else [None] * len(ivs),
        "invoke_index": ints(index[inv]),
        "complete_index": ints(completed(lambda c: c.index)),
        "invoke_time": ints([e.time for e in ivs]),
        "complete_time": ints(completed(lambda c: c.time)),
        "outcome": [("info" if c is None else c.type) for c in cps],
        "invoke_value": [_text(e.value) for e in ivs],
        "complete_value": completed(lambda c: _text(c.value)),
        "node": [(c.node if c is not None and c.node is not None else e.node) for e, c in zip(ivs, cps)],
        "error": completed(lambda c: c.error if c.error is None or isinstance(c.error, str) else _text(c.error)),
        "ts": ints(completed(lambda c: c.ts if type(c.ts) is int else None)),
        "fault_active": active[inv] > 0,
    })
    return ops, int((step > 0).sum())


def _ops_table(ops, workload: str):
    """One run's operations as an Arrow table of FILE_COLUMNS (its data file's columns)."""
    import pyarrow as pa

    schema = pa.schema([(c, t) for c, t in FILE_COLUMNS.items()])
    if not len(ops):
        return schema.empty_table()
    return pa.Table.from_pandas(ops.assign(workload=workload)[list(FILE_COLUMNS)], schema=schema,
                                preserve_index=False)


@gc_paused
def run_rows(campaign: str, run: str, run_dir: str, workload: str, test: Any, part: str, keyed: bool):
    """Consolidate one run: its operations (an Arrow table of FILE_COLUMNS) and its `run` row
    (a one-row pandas DataFrame of RUN_COLUMNS).

    `part`: what the task judges of the run (judge.judge_history's `part`).
    """
    import pandas as pd

    from sleuth.base.exits import verdict_text
    from sleuth.history.jsonl import HistoryError, read_jsonl
    from sleuth.records.measure import span_ns
    from sleuth.spark.judge import judge_history

    path = os.path.join(run_dir, "history.jsonl")
    reason = None
    try:
        history = read_jsonl(path)
        events = history.events
    except HistoryError as e:  # as `sleuth run`: a history it cannot read is judged unknown
        history, reason = None, str(e)
        events = tolerant_events(path)
    ops, faults = pair(events, keyed)
    valid, types = verdict_text(None), []
    if history is not None:
        try:
            r = judge_history(history, test, part)
            valid, types = verdict_text(r["valid"]), r["anomaly-types"]
        except Exception as e:  # a checker that cannot judge this history: unknown, the rest go on
            reason = f"{type(e).__name__}: {e}"
    span = span_ns(e.time for e in events)  # the run's duration has one owner (sleuth.records.measure)
    row = {"campaign": campaign, "run": run, "readable": history is not None, "reason": reason, "valid": valid,
           "anomaly_types": list(types), "span_ns": span, "fault_events": faults, **run_stats(ops)}
    return _ops_table(ops, workload), pd.DataFrame([row])[list(RUN_COLUMNS)]


TASKS_PER_CORE = 4  # tasks per executor core: few enough that Spark's cost per task stays small


class _Rows:
    """An accumulator of run rows (dicts of RUN_COLUMNS) the tasks send back with their results
    (pyspark's AccumulatorParam by its two methods: this module imports no pyspark)."""

    def zero(self, value):
        return []

    def addInPlace(self, a, b):  # noqa: N802 - pyspark's name
        a.extend(b)
        return a


def run_task(groups: list[list[dict]], keyed: list[str], tests, run_rows_out, ops_uri: str, job: str):
    """The mapInArrow function: task numbers (`id`, positions in `groups`) -> a manifest row
    (MANIFEST_SCHEMA) per run of that group, once the task has written the run's operations
    as a new Parquet file in its partition directory under `ops_uri` (`manifest.write_file`,
    named for this attempt and `job`); each run's `run` row goes to the driver through the
    accumulator `run_rows_out`. Each run is a small dict (campaign, run, run_dir, workload,
    large, dir: its partition directory as Spark's writer names it); `tests` is a broadcast of
    each run's test record, by run."""
    from sleuth.spark.judge import part_of
    from sleuth.spark.manifest import write_file

    def task(batches):
        import pyarrow as pa

        for b in batches:
            for i in b.column("id").to_pylist():
                for r in groups[i]:
                    k = r["workload"] in keyed
                    ops, row = run_rows(r["campaign"], r["run"], r["run_dir"], r["workload"], tests.value[r["run"]],
                                        part_of(k, r["large"]), k)
                    path = write_file(ops_uri, r["dir"], job, ops)
                    run_rows_out.add(row.to_dict("records"))
                    yield pa.RecordBatch.from_pydict({"campaign": [r["campaign"]], "run": [r["run"]], "path": [path],
                                                      "rows": [ops.num_rows]})
    return task


def history_bytes(run_dir: str) -> int:
    """The size of a run's history.jsonl (0 when it cannot be read)."""
    try:
        return os.path.getsize(os.path.join(run_dir, "history.jsonl"))
    except OSError:
        return 0


def groups_of(runs: list[dict], tasks: int) -> list[list[dict]]:
    """`runs` dealt into at most `tasks` groups of about equal history bytes: largest first, each to
    the lightest group so far (LPT), so the last task to finish is not one that drew the big runs."""
    groups: list[list[dict]] = [[] for _ in range(min(tasks, len(runs)))]
    load = [0] * len(groups)
    sizes = [history_bytes(r["run_dir"]) for r in runs]  # each file's size once
    for j in sorted(range(len(runs)), key=lambda j: -sizes[j]):  # largest first; ties in given order
        i = load.index(min(load))
        groups[i].append(runs[j])
        load[i] += sizes[j] + 1
    return groups


def partition_dir(spark, campaign: str, run: str) -> str:
    """A run's directory in the dataset, `campaign=C/run=R`, each value escaped by Spark's own
    function (its partitioned writer's and reader's), asked of the driver's JVM."""
    escape = spark.sparkContext._jvm.org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils.escapePathName
    return f"campaign={escape(campaign)}/run={escape(run)}"


def consolidate(spark, meta: list[dict], ops_path: str, large: frozenset[str] = frozenset()):
    """Consolidate every run into the dataset at `ops_path` (a path or URI, every node's; these
    runs' entries replace their old ones); returns the run rows (RUN_COLUMNS, one per run) as
    pandas.

    A task consolidates a group of whole runs (`groups_of`, TASKS_PER_CORE tasks per core):
    a task per run cost Spark about 70 ms of scheduling and worker hand-over each, on the
    jobs' clock. The tasks' input is `spark.range` (one number per group), made in the JVM:
    a DataFrame of Python rows would start a second Python worker in every task only to hand
    over a few strings. A task writes each run's operations as one new Parquet file with
    pyarrow, and its manifest row (which file, which run) goes to Spark's writer: Spark's
    committer decides which files are the dataset (manifest.py argues why that is safe with
    retried and speculative tasks, and on object stores, with no rename). Each run's row goes
    to the driver through an accumulator, so one job reads and judges each file once. The
    operations never cross into the JVM: handing them to Spark's Parquet writer made the
    consolidation 1.8 times main's time, where the tasks wrote them with pyarrow.

    `large`: runs whose workload checker the tasks leave out (jobs.judge_large judges it)."""
    import pandas as pd

    from sleuth.spark import manifest
    from sleuth.spark.history_ops import uri

    runs = [{**{k: m[k] for k in ("campaign", "run", "run_dir", "workload")}, "large": m["run"] in large,
             "dir": partition_dir(spark, m["campaign"], m["run"])} for m in meta]
    mine = {(r["campaign"], r["run"]) for r in runs}
    before = {p for c, r, p in zip(*(manifest.entries(ops_path, PARTITIONS).column(x).to_pylist()
                                     for x in ("campaign", "run", "path")), strict=True) if (c, r) in mine}
    job = manifest.token()
    tests = spark.sparkContext.broadcast({m["run"]: m["test"] for m in meta})
    out = spark.sparkContext.accumulator([], _Rows())
    groups = groups_of(runs, TASKS_PER_CORE * spark.sparkContext.defaultParallelism)
    ids = spark.range(0, len(groups), 1, numPartitions=max(1, len(groups)))
    try:
        manifest.commit(ids.mapInArrow(run_task(groups, keyed_workloads(), tests, out, uri(ops_path), job),
                                       MANIFEST_SCHEMA), ops_path, PARTITIONS)
    finally:
        tests.destroy()
    manifest.sweep(ops_path, job, before, sorted({r["dir"] for r in runs}), PARTITIONS)
    # a retried task adds its runs' rows again (the same rows): one per run, the last
    rows = {r["run"]: r for r in out.value}
    return pd.DataFrame([rows[r["run"]] for r in runs], columns=list(RUN_COLUMNS))


def _manifest_rows(ops_path: str, campaigns=None):
    """The committed manifest of the dataset at `ops_path` (manifest.entries), only `campaigns`'
    rows when given."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from sleuth.spark import manifest

    t = manifest.entries(ops_path, PARTITIONS)
    if campaigns is not None and t.num_rows:
        t = t.filter(pc.is_in(t.column("campaign"), value_set=pa.array(sorted(campaigns), pa.string())))
    return t


def operation_files(ops_path: str, campaigns=None) -> list[str]:
    """The data files of the dataset at `ops_path` that its committed manifest names (URIs),
    `campaigns`' only when given: what every reader of the dataset reads, never a listing."""
    from sleuth.spark.history_ops import uri

    return [f"{uri(ops_path).rstrip('/')}/{p}" for p in sorted(_manifest_rows(ops_path, campaigns)["path"].to_pylist())]


def read_operations(ops_path: str, campaigns=None):
    """The dataset at `ops_path` as one Arrow table (`campaign`, `run`, FILE_COLUMNS), read on the
    driver through its manifest: for tests and small campaigns (the jobs read it with `operations`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sleuth.spark import manifest

    fsys, base = manifest.filesystem(ops_path)
    schema = pa.schema([(c, t) for c, t in FILE_COLUMNS.items()])
    rows = _manifest_rows(ops_path, campaigns)
    parts = []
    for campaign, run, path in sorted(zip(*(rows[c].to_pylist() for c in ("campaign", "run", "path")), strict=True)):
        t = pq.read_table(f"{base}/{path}", filesystem=fsys, schema=schema)
        parts.append(t.add_column(0, "run", pa.array([run] * t.num_rows, pa.string()))
                     .add_column(0, "campaign", pa.array([campaign] * t.num_rows, pa.string())))
    whole = pa.schema([("campaign", pa.string()), ("run", pa.string()), *schema])
    return pa.concat_tables(parts) if parts else whole.empty_table()


def operations(spark, ops_path: str, meta: list[dict]):
    """The consolidated operations of these runs, read back (OPS_COLUMNS: with each run's run_dir)
    from the files the dataset's manifest names."""
    from pyspark.sql import functions as F

    from sleuth.spark.history_ops import uri

    campaigns = sorted({m["campaign"] for m in meta})
    dirs = spark.createDataFrame([(m["campaign"], m["run"], m["run_dir"]) for m in meta],
                                 "campaign STRING, run STRING, run_dir STRING")
    paths = operation_files(ops_path, campaigns)
    # an explicit schema: a campaign whose runs have no operations has no rows to infer it from;
    # the partition values come from the files' directories (Spark unescapes them)
    reader = spark.read.schema(OPS_FILE_SCHEMA).option("basePath", uri(ops_path))
    ops = reader.parquet(*paths) if paths else spark.createDataFrame([], OPS_FILE_SCHEMA)
    return ops.join(F.broadcast(dirs), ["campaign", "run"]).select(*OPS_COLUMNS)
