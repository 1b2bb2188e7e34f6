"""Pairing one history's events in the tasks that decode them, for `sleuth check --spark`.

A task reads a byte range of a file itself (the lines that begin in it,
Hadoop's rule for text splits): consecutive lines, so (in a valid history)
consecutive indexes. It decodes them (`history_ops._decode_fast`, or the
rules path) and pairs as it goes: a process has at most one operation in
flight (HISTORY.md), so an invoke's completion is the next event of the same
process, and within a run of consecutive indexes (a *segment*) that next
event is in the same segment unless the operation is still open at its end.
So each task writes, for every segment it read:

- `op` rows: operations invoked and completed inside the segment, paired
  (written by the task itself as Parquet, `staging/op/`);
- a `head` row per process: its first event in the segment (with all of the
  event when it is a completion: its invoke is in an earlier segment);
- a `tail` row per process: its last event in the segment (with all of the
  invoke when it is still open);
- one `seg` row: the segment's first and last index, its file, its first
  event's time, how many invokes it holds, and the first problem seen (a line
  the rules refuse, or a process breaking its rules inside the segment).

Everything that crosses a segment boundary is in the head and tail rows,
at most two per process and segment: Spark orders them per process by
index (a window over those rows alone, not over every event), checks the
per-process rules between a segment's tail and the next segment's head, and
pairs each open invoke with the head that completes it. Operation ids are
invoke ordinals: a segment's invokes are numbered in the task, and each
segment's offset is the number of invokes in the segments before it.

Why this is the pairing of the whole history: in a valid history the
segments are contiguous index ranges that cover 0..n-1 once (checked from
the seg rows), so a process's events, in index order, are its events in
segment order; inside a segment the task sees them in order; across a
boundary the only consecutive pair of a process's events is (its last in
one segment, its first in a later one with no event of it in between),
which are exactly a tail and the next head of that process in index order.

Bad input: a problem anywhere makes the driver name the first bad line as
`sleuth check` would (`history_ops.first_bad_line`, or the window pairing
of `history_ops.pair` for a per-process rule): slow, and only then.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from sleuth.checker.spark.history_ops import NEMESIS_PROCESS, arrow_schema, ddl_columns

ROWS_SCHEMA = ("`kind` STRING, `seg` BIGINT, `rank` BIGINT, `process` BIGINT, `f` STRING, `type` STRING, "
               "`value` STRING, `invoke_pos` BIGINT, `complete_pos` BIGINT, `invoke_time` BIGINT, "
               "`complete_time` BIGINT, `node` STRING, `error` STRING, `ts` BIGINT, `file` INT, `hi` BIGINT, "
               "`problem` STRING")
_NAMES = ddl_columns(ROWS_SCHEMA)
# the op rows' columns, in the files the tasks write
OP_SCHEMA = ("`seg` BIGINT, `rank` BIGINT, `process` BIGINT, `f` STRING, `type` STRING, `value` STRING, "
             "`invoke_pos` BIGINT, `complete_pos` BIGINT, `invoke_time` BIGINT, `complete_time` BIGINT, "
             "`node` STRING, `error` STRING, `ts` BIGINT")


class _Segment:
    """What a task knows of the segment it is reading."""

    def __init__(self, lo: int, file: int, time: int) -> None:
        self.lo, self.hi, self.file, self.first_time = lo, lo - 1, file, time
        self.invokes = 0
        self.problem: str | None = None
        self.last: dict[int, tuple[str, int, str]] = {}  # process -> (type, index, f) of its last event
        self.open: dict[int, tuple] = {}  # process -> (rank, index, time, f, value, node) of its open invoke


class _Rows:
    """Column lists of the rows a task yields (ROWS_SCHEMA)."""

    def __init__(self) -> None:
        self.cols: dict[str, list] = {c: [] for c in _NAMES}

    def add(self, kind: str, seg: int, *, rank=None, process=None, f=None, type=None, value=None,
            invoke_pos=None, complete_pos=None, invoke_time=None, complete_time=None, node=None, error=None,
            ts=None, file=None, hi=None, problem=None) -> None:
        row = (kind, seg, rank, process, f, type, value, invoke_pos, complete_pos, invoke_time, complete_time,
               node, error, ts, file, hi, problem)
        for c, v in zip(self.cols.values(), row, strict=True):
            c.append(v)

    def __len__(self) -> int:
        return len(self.cols["kind"])


def _close(seg: _Segment, rows: _Rows) -> None:
    """The tail rows and the seg row of a segment the task has read to its end."""
    for p, (typ, index, f) in seg.last.items():
        o = seg.open.get(p)
        if o is not None:  # its last event is the open invoke
            rank, ipos, itime, f, value, node = o
            rows.add("tail", seg.lo, rank=rank, process=p, f=f, type="invoke", value=value, invoke_pos=ipos,
                     invoke_time=itime, node=node)
        else:
            rows.add("tail", seg.lo, process=p, f=f, type=typ, invoke_pos=index)
    rows.add("seg", seg.lo, rank=seg.invokes, invoke_time=seg.first_time, file=seg.file, hi=seg.hi,
             problem=seg.problem)


def _pair_columns(cols: dict, state: list, rows: _Rows) -> None:
    """Pair one decoded batch (EVENT_SCHEMA columns) into `rows`; `state[0]` is the open segment."""
    seg: _Segment | None = state[0]
    it = zip(cols["file"], cols["index"], cols["time"], cols["type"], cols["process"], cols["f"], cols["value"],
             cols["node"], cols["error"], cols["ts"], cols["problem"], strict=True)
    for fno, index, time, typ, p, f, value, node, error, ts, problem in it:
        if problem is not None:  # a line the rules refuse: the driver will name it
            rows.add("seg", -1, file=fno, problem=problem)
            continue
        if seg is None or index != seg.hi + 1 or fno != seg.file:
            if seg is not None:
                _close(seg, rows)
            seg = _Segment(index, fno, time)
        seg.hi = index
        if p == NEMESIS_PROCESS:
            continue
        last = seg.last.get(p)
        if last is None:  # its first event here: what a boundary check and pairing need
            if typ == "invoke":
                rows.add("head", seg.lo, process=p, f=f, type=typ, complete_pos=index)
            else:
                rows.add("head", seg.lo, process=p, f=f, type=typ, value=value, complete_pos=index,
                         complete_time=time, node=node, error=error, ts=ts)
        if typ == "invoke":
            if last is not None and last[0] in ("invoke", "info") and seg.problem is None:
                seg.problem = f"process {p} breaks the pairing rules at index {index}"
            seg.open[p] = (seg.invokes, index, time, f, value, node)
            seg.invokes += 1
        else:
            o = seg.open.pop(p, None)
            if o is not None:
                rank, ipos, itime, if_, ivalue, inode = o
                if if_ != f and seg.problem is None:
                    seg.problem = f"process {p} breaks the pairing rules at index {index}"
                rows.add("op", seg.lo, rank=rank, process=p, f=if_, type=typ,
                         value=value if typ == "ok" and value != "null" else ivalue, invoke_pos=ipos,
                         complete_pos=index, invoke_time=itime, complete_time=time if typ != "info" else None,
                         node=node if node is not None else inode, error=error, ts=ts)
            elif last is not None and seg.problem is None:  # a completion with no invoke before it
                seg.problem = f"process {p} breaks the pairing rules at index {index}"
        seg.last[p] = (typ, index, f)
    state[0] = seg


def _op_writer(staging: str, i: int):
    """Where a task writes the `op` rows of range `i`: `staging/op/part-<i>.parquet`, through a
    temporary file renamed at the end, so a retried task leaves one whole file."""
    import uuid

    import pyarrow.parquet as pq

    d = os.path.join(staging, "op")
    os.makedirs(d, exist_ok=True)
    final = os.path.join(d, f"part-{i:05d}.parquet")
    tmp = os.path.join(d, f".{uuid.uuid4().hex}.tmp")
    return pq.ParquetWriter(tmp, arrow_schema(OP_SCHEMA)), tmp, final


READ_BYTES = 4 << 20  # bytes of whole lines a task decodes at a time


def splits(files: list[str], size: int) -> list[tuple[int, int, int]]:
    """The files cut into (file number, start, end) byte ranges of about `size` bytes."""
    out = []
    for fno, path in enumerate(files):
        n = os.path.getsize(path)
        k = max(1, -(-n // size))
        out += [(fno, n * i // k, n * (i + 1) // k) for i in range(k)]
    return out


def read_lines(path: str, start: int, end: int) -> Iterator[bytes]:
    """Blocks of whole lines of `path` whose first byte is in [start, end), about READ_BYTES at
    a time (Hadoop's rule for text splits: a split owns the lines that begin in it)."""
    with open(path, "rb") as fh:
        if start:
            fh.seek(start - 1)
            if fh.read(1) != b"\n":  # in the middle of a line: that line is the previous split's
                fh.readline()
        pos = fh.tell()
        while pos < end:
            data = fh.read(READ_BYTES)
            if not data:
                return
            data += fh.readline()  # whole lines only
            if pos + len(data) > end:  # keep only the lines that begin before `end`
                nl = data.find(b"\n", end - pos - 1)
                yield data if nl < 0 else data[:nl + 1]
                return
            yield data
            pos += len(data)


def decode_and_pair(files: list[str], staging: str, ranges: list[tuple[int, int, int]]):
    """mapInArrow function over range numbers (`id`, positions in `ranges`): each task reads
    its byte range of a file itself, decodes and pairs it, and yields the head, tail and seg
    rows (ROWS_SCHEMA). The `op` rows, most of the data, the task writes itself as Parquet
    under `staging/op/` (OP_SCHEMA). Neither the text nor the operations pass through the
    JVM: converting them there cost it as much CPU as the decoding and pairing, on top."""
    def run(batches: Iterator) -> Iterator:
        import pyarrow as pa

        from sleuth.checker.spark.history_ops import decode_block

        schema, op_schema = arrow_schema(ROWS_SCHEMA), arrow_schema(OP_SCHEMA)
        op_names = op_schema.names
        for b in batches:
            for i in b.column("id").to_pylist():
                fno, start, end = ranges[i]
                writer, tmp, final = _op_writer(staging, i)
                state: list = [None]
                try:
                    for block in read_lines(files[fno], start, end):
                        rows = _Rows()
                        _pair_columns(decode_block(files, fno, block), state, rows)
                        yield from _split(rows, writer, schema, op_schema, op_names, pa)
                    if state[0] is not None:
                        rows = _Rows()
                        _close(state[0], rows)
                        yield from _split(rows, writer, schema, op_schema, op_names, pa)
                    writer.close()
                    os.replace(tmp, final)
                finally:
                    if os.path.exists(tmp):
                        writer.close()
                        os.remove(tmp)
    return run


def _split(rows: _Rows, writer, schema, op_schema, op_names, pa):
    """Write the op rows of `rows`; yield the rest as one Arrow batch."""
    kinds = rows.cols["kind"]
    ops = [i for i, k in enumerate(kinds) if k == "op"]
    if ops:
        writer.write_batch(pa.RecordBatch.from_pydict(
            {c: [rows.cols[c][i] for i in ops] for c in op_names}, schema=op_schema))
    if len(ops) < len(kinds):
        rest = [i for i, k in enumerate(kinds) if k != "op"]
        yield pa.RecordBatch.from_pydict({c: [v[i] for i in rest] for c, v in rows.cols.items()}, schema=schema)


def segments_checked(spark, staged, files: list[str]) -> dict:
    """The seg rows: every line obeys the rules, the segments cover 0..n-1 once, in file order.
    Returns {events, start_time, offsets: [(segment lo, invokes before it)]}; else the first
    bad line's HistoryError (or the window pairing's, for a process breaking its rules)."""
    from pyspark.sql import functions as F

    from sleuth.checker.spark.history_ops import first_bad_line, pairing_error
    from sleuth.history import HistoryError

    segs = sorted((r["seg"], r["hi"], r["file"], r["rank"], r["invoke_time"], r["problem"])
                  for r in staged.where(F.col("kind") == "seg").collect())
    lines_bad = any(s[0] < 0 for s in segs)
    order_bad = bool(segs) and (segs[0][0] != 0 or any(
        b[0] != a[1] + 1 or b[2] < a[2] for a, b in zip(segs, segs[1:], strict=False)))
    if lines_bad or order_bad:
        err = first_bad_line(files)
        if err is None:
            err = HistoryError(files[0], None, "the files' indexes do not run 0, 1, 2, ... in name order")
        raise err
    if any(s[5] is not None for s in segs):
        raise pairing_error(spark, files)
    offsets, total = [], 0
    for lo, _hi, _file, invokes, _time, _problem in segs:
        offsets.append((lo, total))
        total += invokes
    return {"events": segs[-1][1] + 1 if segs else 0, "start_time": segs[0][4] if segs else 0,
            "offsets": offsets}


def across_segments(spark, staged, files: list[str]):
    """Operations that cross a segment boundary, paired from the head and tail rows (ROWS_SCHEMA
    columns); a process breaking its rules across a boundary raises the window pairing's error."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from sleuth.checker.spark.history_ops import pairing_error

    ends = staged.where(F.col("kind").isin("head", "tail")).withColumn(
        "at", F.when(F.col("kind") == "head", F.col("complete_pos")).otherwise(F.col("invoke_pos")))
    w = Window.partitionBy("process").orderBy("at", "kind")  # one event as both: its head first
    nxt = ("kind", "type", "f", "value", "complete_pos", "complete_time", "node", "error", "ts")
    ends = ends.select("*", *(F.lead(c).over(w).alias("n_" + c) for c in nxt),
                       F.lag("kind").over(w).alias("p_kind"), F.lag("type").over(w).alias("p_type"),
                       F.lag("f").over(w).alias("p_f"))
    head, comp = F.col("kind") == "head", F.col("type") != "invoke"
    after_tail = F.col("p_kind") == "tail"
    bad = ends.where(head & (
        (comp & F.col("p_kind").isNull())  # a process's first event is a completion
        | (after_tail & comp & (F.col("p_type") != "invoke"))
        | (after_tail & ~comp & F.col("p_type").isin("invoke", "info"))
        | (after_tail & comp & (F.col("p_type") == "invoke") & (F.col("p_f") != F.col("f")))))
    if bad.limit(1).count():
        raise pairing_error(spark, files)
    done = (F.col("n_kind") == "head") & (F.col("n_type") != "invoke")
    typ = F.when(done, F.col("n_type")).otherwise(F.lit("info"))
    return ends.where((F.col("kind") == "tail") & (F.col("type") == "invoke")).select(
        "seg", "rank", "process", "f", typ.alias("type"),
        F.when((typ == "ok") & (F.col("n_value") != "null"), F.col("n_value")).otherwise(F.col("value"))
        .alias("value"),
        "invoke_pos", F.when(done, F.col("n_complete_pos")).alias("complete_pos"), "invoke_time",
        F.when(done & typ.isin("ok", "fail"), F.col("n_complete_time")).alias("complete_time"),
        F.coalesce(F.when(done, F.col("n_node")), F.col("node")).alias("node"),
        F.when(done, F.col("n_error")).alias("error"), F.when(done, F.col("n_ts")).alias("ts"))


def operations(spark, staging: str, staged, files: list[str]) -> tuple[object, dict]:
    """The history's operations (history_ops.OPS_COLUMNS, ids as invoke ordinals) from what the
    tasks wrote (`staging/op/`) and returned (`staged`: head, tail and seg rows), and
    {events, start_time}."""
    from pyspark.sql import functions as F

    from sleuth.checker.spark.history_ops import OPS_COLUMNS

    info = segments_checked(spark, staged, files)
    crossing = across_segments(spark, staged, files)
    cols = ["seg", "rank", *OPS_COLUMNS[1:]]
    ops = spark.read.schema(OP_SCHEMA).parquet(os.path.join(staging, "op")).select(*cols) \
        .unionByName(crossing.select(*cols))
    offsets = info.pop("offsets")
    base = (F.create_map(*(F.lit(x).cast("long") for lo, before in offsets for x in (lo, before)))[F.col("seg")]
            if offsets else F.lit(0))
    return ops.select((base + F.col("rank")).cast("long").alias("id"), *OPS_COLUMNS[1:]), info
