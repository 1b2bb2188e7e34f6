"""Per-key work of `sleuth check --spark`, on the executors.

Keys are hashed into buckets (many keys per task: a task per key would cost
more than the work). Each operation goes to every bucket of a key it
touches, with its micro-ops cut down to that bucket's keys (`split`); Spark's
shuffle brings each bucket's rows to one task (`judged`), which judges them by
the single-process checker's own code on a `Part` history of exactly those operations, with
their global ids and positions (so line numbers, names and explanations are
the ones `sleuth check` prints):

- register workloads: the whole checker (`checker.linearizable`), which
  splits by key itself; parts merge on the driver as `check_registers` merges
  keys;
- list-append and rw-register: the datatype's `Analysis` (version orders,
  non-cycle anomalies, ww/wr/rw edges). Everything it infers for a key uses
  only that key's micro-ops, except which `info` transactions are nodes (one
  is iff a read of *any* key observed it): here every `info` transaction is a
  node, the ones observed are reported, and the driver drops the edges of the
  others, as the single-process checker never adds them.

Each bucket answers rows of OUT_SCHEMA: tag EDGE (a -> b of kind k, op ids),
OBSERVED (info op a was observed), ANOMALIES (text: JSON name -> examples),
REGISTER (text: the part's Result as JSON, plus its key count), ERROR (a: the
line, text: the problem).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from sleuth.checker import list_append, rw_register, txn
from sleuth.history.jsonl import History, HistoryError, Op

EDGE, OBSERVED, ANOMALIES, REGISTER, ERROR = 0, 1, 2, 3, 4
OUT_SCHEMA = "`bucket` INT, `tag` INT, `a` BIGINT, `b` BIGINT, `k` INT, `text` STRING"
SPLIT_SCHEMA = ("`bucket` INT, `id` BIGINT, `process` BIGINT, `f` STRING, `type` STRING, `value` STRING, "
                "`invoke_pos` BIGINT, `complete_pos` BIGINT, `invoke_time` BIGINT, `complete_time` BIGINT, "
                "`key` STRING")
REGISTERS = ("register", "cas-register")
OPS_PER_BUCKET = 40_000


def buckets_for(ops: int) -> int:
    return max(4, math.ceil(ops / OPS_PER_BUCKET))


@dataclass
class Part(History):
    """Some of a history's operations, with their global ids and positions;
    times are shown from the whole history's first event."""

    first_time: int = 0

    @property
    def start_time(self) -> int:
        return self.first_time


def bucket_of(key: Any, n: int) -> int:
    return zlib.crc32(orjson.dumps(key, option=orjson.OPT_SORT_KEYS)) % n


def optional_int(x) -> int | None:
    """An optional integer from pandas (None, NaN or NA when missing)."""
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


OP_COLUMNS = ("id", "process", "f", "type", "value", "invoke_pos", "complete_pos", "invoke_time",
              "complete_time")
BUCKET_COLUMNS = ["bucket", *OP_COLUMNS, "key"]  # what `split` and `restrict` yield


def _op_rows(b) -> Iterator[tuple]:
    """An Arrow batch's operations as tuples in OP_COLUMNS order (a missing completion as None)."""
    yield from zip(*(b.column(c).to_pylist() for c in OP_COLUMNS), strict=True)


def _batch(rows: list[tuple]):
    """BUCKET_COLUMNS rows as an Arrow batch of SPLIT_SCHEMA."""
    import pyarrow as pa

    from sleuth.spark.history_ops import arrow_schema

    schema = arrow_schema(SPLIT_SCHEMA)
    cols = list(zip(*rows, strict=True)) if rows else [[] for _ in BUCKET_COLUMNS]
    return pa.RecordBatch.from_arrays([pa.array(c, type=t) for c, t in zip(cols, schema.types, strict=True)],
                                      schema=schema)


def split(workload: str, n: int):
    """mapInArrow: each op -> (bucket, op with the micro-ops of that bucket's keys)."""
    keyed = workload == "register"
    txns = workload not in REGISTERS

    def run(batches: Iterator) -> Iterator:
        memo: dict = {}  # (type, key) -> bucket for hashable keys (True == 1, but not in JSON)

        def bucket(key) -> int:
            try:
                return memo[type(key), key]
            except KeyError:
                memo[type(key), key] = bk = bucket_of(key, n)
                return bk
            except TypeError:  # a list or an object
                return bucket_of(key, n)

        for b in batches:
            out = []
            for row in _op_rows(b):
                f, value = row[2], row[4]
                v = orjson.loads(value)
                if not txns:
                    key = v[0] if keyed and type(v) is list and len(v) == 2 else None
                    k = orjson.dumps(key).decode()
                    out.append((bucket_of(key, n), *row, k))
                    continue
                if f != "txn" or type(v) is not list or not all(type(m) is list and len(m) == 3 for m in v):
                    out.append((0, *row, None))  # malformed: the checker on bucket 0 names the problem
                    continue
                parts: dict[int, list] = {}
                for m in v:
                    parts.setdefault(bucket(m[1]), []).append(m)
                if len(parts) == 1:  # one bucket holds every key: the value as it is
                    out.append((next(iter(parts)), *row, None))
                    continue
                for bk, mops in parts.items():
                    out.append((bk, *row[:4], orjson.dumps(mops).decode(), *row[5:], None))
            yield _batch(out)
    return run


def part_history(pdf, source: str, first_time: int) -> Part:
    pdf = pdf.sort_values("id")
    ops = []
    cols = [pdf[c].tolist() for c in ("id", "process", "f", "type", "value", "invoke_pos", "complete_pos",
                                       "invoke_time", "complete_time")]
    for i, process, f, typ, value, ip, cp, it, ct in zip(*cols, strict=True):
        v = orjson.loads(value)
        ops.append(Op(int(i), int(process), f, typ, v, v, int(ip), optional_int(cp), int(it), optional_int(ct)))
    return Part(events=[], source=source, _ops=ops, first_time=first_time)


class _ListAppend(list_append.Analysis):
    """list-append's Analysis, with every info transaction a node (module docstring)."""

    def _version_orders(self) -> None:
        super()._version_orders()
        self.observed_info = [op.id for op in self.graph.txns if op.type == "info"]
        self.node_of = node_of = [-1] * len(self.ops)
        txns = []
        for i, op in enumerate(self.ops):
            if op.type in ("ok", "info"):
                node_of[i] = len(txns)
                txns.append(op)
        self.graph = txn.Graph(txns)


class _RwRegister(rw_register.Analysis):
    """rw-register's Analysis, with every info transaction a node (module docstring)."""

    def _read_anomalies(self) -> set[int]:
        observed = super()._read_anomalies()
        self.observed_info = [self.ops[i].id for i in observed if self.ops[i].type == "info"]
        return set(range(len(self.ops)))


def _frame(bucket: int, rows: list[tuple], edges=None):
    """OUT_SCHEMA rows as pandas: `rows` (tag, a, b, k, text) and the edges (src, dst, kind
    arrays), the edges as whole columns (a concat of frames would test each missing text)."""
    import numpy as np
    import pandas as pd

    s, d, k = edges if edges is not None else ((), (), ())
    m = len(s)
    tags, a, b, kinds, texts = zip(*rows, strict=True) if rows else ((), (), (), (), ())
    text = np.empty(len(rows) + m, dtype=object)
    text[:len(rows)] = texts

    def ints(head, tail, dtype):  # the rows' optional ints, then the edges' ints
        values = np.concatenate([np.array([0 if x is None else x for x in head], dtype=dtype),
                                 np.asarray(tail, dtype=dtype)])
        missing = np.concatenate([np.array([x is None for x in head], dtype=bool), np.zeros(m, dtype=bool)])
        return pd.arrays.IntegerArray(values, missing)

    return pd.DataFrame({
        "bucket": np.full(len(rows) + m, bucket, dtype=np.int32),
        "tag": np.concatenate([np.asarray(tags, dtype=np.int32), np.full(m, EDGE, dtype=np.int32)]),
        "a": ints(a, s, np.int64), "b": ints(b, d, np.int64), "k": ints(kinds, k, np.int32), "text": text,
    })


def judge(workload: str, source: str, first_time: int, options: dict[str, Any]):
    """One bucket's rows (pandas) -> its OUT_SCHEMA rows (pandas)."""
    import numpy as np

    def run(pdf):
        bucket = int(pdf["bucket"].iloc[0])
        try:
            h = part_history(pdf, source, first_time)
            if workload in REGISTERS:
                from sleuth.checker import checker_for

                result = checker_for(workload)(h, **options)
                text = orjson.dumps({"result": result.to_json(), "keys": int(pdf["key"].nunique()),
                                     "first": _first_positions(pdf)}, default=repr).decode()
                return _frame(bucket, [(REGISTER, None, None, None, text)])
            if workload == "list-append":
                a = _ListAppend(h)
            else:
                a = _RwRegister(h, **{k: v for k, v in options.items()
                                      if k in ("linearizable_keys", "sequential_keys", "wfr_keys")})
        except HistoryError as e:
            return _frame(bucket, [(ERROR, e.line, None, None, e.problem)])
        ids = np.asarray([op.id for op in a.graph.txns], dtype=np.int64)
        s, d, k = a.graph.arrays()
        rows = [(OBSERVED, i, None, None, None) for i in a.observed_info]
        if a.anomalies:
            rows.append((ANOMALIES, None, None, None, orjson.dumps(a.anomalies, default=repr).decode()))
        return _frame(bucket, rows, (ids[s], ids[d], k))
    return run


def _first_positions(pdf) -> dict[str, int]:
    """Each key's first invoke position: the order `check_registers` meets keys in."""
    first = pdf.groupby("key")["invoke_pos"].min()
    return {k: int(v) for k, v in first.items()}


def restrict(keys: list[str]):
    """mapInArrow: the ops touching any of `keys` (JSON texts), micro-ops cut to them (bucket 0)."""
    wanted = set(keys)

    def run(batches: Iterator) -> Iterator:
        for b in batches:
            out = []
            for row in _op_rows(b):
                mops = [m for m in orjson.loads(row[4]) if orjson.dumps(m[1]).decode() in wanted]
                if mops:
                    out.append((0, *row[:4], orjson.dumps(mops).decode(), *row[5:], None))
            yield _batch(out)
    return run


def judged(workload: str, source: str, first_time: int, options: dict[str, Any]):
    """applyInArrow function of `groupBy("bucket")`: one bucket's operations (an Arrow table
    of SPLIT_SCHEMA, as Spark's shuffle delivered them) -> its OUT_SCHEMA rows (`judge`).

    The buckets reach their tasks through Spark's shuffle, not as files the tasks write
    somewhere both can see: on a cluster only the input and the output are shared, and
    the shuffle is what Spark moves between executors (its blocks are served by the
    executor that wrote them). Arrow in and out: no pandas conversion in the JVM hand-over."""
    def run(table):
        import pyarrow as pa

        from sleuth.spark.history_ops import arrow_schema

        schema = arrow_schema(OUT_SCHEMA)
        if table.num_rows == 0:  # no group is empty, but an empty answer must keep the schema
            return schema.empty_table()
        pdf = table.to_pandas(integer_object_nulls=True)
        return pa.Table.from_pandas(judge(workload, source, first_time, options)(pdf), schema=schema,
                                    preserve_index=False)
    return run


def judged_buckets(workload: str, source: str, first_time: int, options: dict[str, Any], location: str,
                   job: str):
    """mapInArrow function after `repartition(n, "bucket")`: a task's partition (every packed
    row of each bucket Spark's hash sent to it, often one bucket, sometimes two, or none) -> each
    bucket's OUT_SCHEMA rows (`judged`), in bucket order, written by the task with pyarrow as one
    new file of `location` (`manifest.DataFile`, named for `job` and this attempt); it yields
    that file's manifest row (`manifest.MANIFEST_COLUMNS`), which the caller commits. What
    `groupBy("bucket").applyInArrow` would do without its sort of every row by bucket in the JVM
    first: the partitioning alone already brings a bucket's rows to one task, and the judging
    sorts them by id itself. The answers (some edges a transaction) never cross into the JVM:
    Spark's Parquet writer, given them as rows, took some 2 s of the JVM's CPU at 1M
    transactions, which at local[2] the two Python workers had to share their cores with."""
    one = judged(workload, source, first_time, options)

    def run(batches: Iterator) -> Iterator:
        import pyarrow as pa
        import pyarrow.compute as pc

        from sleuth.spark.history_ops import arrow_schema
        from sleuth.spark.manifest import DataFile

        batches = [b for b in _unpacked(batches) if b.num_rows]
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        buckets = table["bucket"]
        out = DataFile(location, "", job, arrow_schema(OUT_SCHEMA))
        for k in sorted(pc.unique(buckets).to_pylist()):
            out.write(one(table.filter(pc.equal(buckets, k))))
        if out.close():  # whole: only now may its manifest row go to the writer
            yield pa.RecordBatch.from_pydict({"path": [out.path], "rows": [out.rows]})
    return run


PACKED_SCHEMA = "`bucket` INT, `rows` BINARY"  # a bucket's rows from one batch, as an Arrow IPC stream


def _packed(batches: Iterator) -> Iterator:
    """SPLIT_SCHEMA batches -> PACKED_SCHEMA batches: per batch, one row per bucket holding that
    bucket's rows as one Arrow IPC stream (lz4). Spark's shuffle then moves a few thousand byte
    strings rather than converting every operation into its own rows and back: it still brings
    each bucket to one task, at a fraction of the JVM's CPU."""
    import pyarrow as pa
    import pyarrow.compute as pc

    options = pa.ipc.IpcWriteOptions(compression="lz4")
    for b in batches:
        if not b.num_rows:
            continue
        t = pa.Table.from_batches([b])
        buckets, out = b.column("bucket"), []
        for k in sorted(pc.unique(buckets).to_pylist()):
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, b.schema, options=options) as w:
                w.write_table(t.filter(pc.equal(buckets, k)))
            out.append((k, sink.getvalue().to_pybytes()))
        yield pa.RecordBatch.from_arrays([pa.array([k for k, _ in out], pa.int32()),
                                          pa.array([r for _, r in out], pa.binary())], names=["bucket", "rows"])


def _unpacked(batches: Iterator) -> Iterator:
    """PACKED_SCHEMA batches -> the SPLIT_SCHEMA batches they hold."""
    import pyarrow as pa

    for b in batches:
        for rows in b.column("rows").to_pylist():
            yield from pa.ipc.open_stream(rows).read_all().to_batches()


def split_files(workload: str, n: int, files: list[str]):
    """mapInArrow function over positions in `files` (the table of operations' data files, URIs):
    each task reads its files with pyarrow and splits their operations into buckets (`split`),
    packed for the shuffle (`_packed`, PACKED_SCHEMA). Spark's Parquet reader would decode them
    in the JVM only to hand them over to Python."""
    bucketed = split(workload, n)

    def run(batches: Iterator) -> Iterator:
        import pyarrow.parquet as pq
        from pyarrow import fs

        def ops() -> Iterator:
            for b in batches:
                for i in b.column("id").to_pylist():
                    filesystem, path = fs.FileSystem.from_uri(files[i])
                    yield from pq.ParquetFile(path, filesystem=filesystem).iter_batches(
                        batch_size=65_536, columns=list(OP_COLUMNS))
        yield from _packed(bucketed(ops()))
    return run
