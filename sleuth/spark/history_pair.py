"""Pairing one history's events in the tasks that decode them, for `sleuth check --spark`.

A task reads a byte range of a file itself (the lines that begin in it,
Hadoop's rule for text splits): consecutive lines, so (in a valid history)
consecutive indexes. It decodes them a block at a time
(`history_ops.decode_block`: sleuth's one decoder of history lines, or the
rules path) and pairs each run of consecutive indexes in a block (a
*segment*) by sleuth's columnar pairer (`sleuth.history.jsonl.pair_columns`, open
at both ends): a process has at most one operation in flight
(docs/history-format.md), so an invoke's completion is the next event of the
same process, which is in the same segment unless the operation is still
open at its end. The process column says -1 for the nemesis, which the
pairer leaves out.
So each task writes, for every segment it read, its `op` rows (operations
invoked and completed inside the segment, paired) with pyarrow into one
new data file of its own, and yields (rows of ROWS_SCHEMA, which Spark's
writer commits as Parquet partitioned by `kind` in a staging location
beside the output, `kind=head/`, `kind=seg/`, ...):

- a `head` row per process: its first event in the segment (with all of the
  event when it is a completion: its invoke is in an earlier segment);
- a `tail` row per process: its last event in the segment (with all of the
  invoke when it is still open);
- one `seg` row: the segment's first and last index, its file, its first
  event's time, how many invokes it holds, and the first problem seen (a line
  the rules refuse, or a process breaking its rules inside the segment);
- last, one `file` row naming its data file: the op files' manifest
  (`sleuth.spark.manifest`), so only a committed attempt's file is read.

Everything that crosses a segment boundary is in the head and tail rows,
at most two per process and segment: the driver reads them (and only them:
the `kind` directories are pruned) from that committed output, and orders them per process by index (a group of
processes at a time, `ENDS_CHUNK`), checks the per-process rules between a
segment's tail and the next segment's head, and pairs each open invoke with
the head that completes it (`_crossing`). Operation ids are
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
`sleuth check` would (`history_ops.first_bad_line`, or, for a per-process
rule, `history_ops.pairing_error`: the files streamed through sleuth's own
`Pairer`): slow, and only then.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from sleuth.spark.history_ops import OPS_SCHEMA, arrow_schema, ddl_columns

ROWS_SCHEMA = ("`kind` STRING, `seg` BIGINT, `rank` BIGINT, `process` BIGINT, `f` STRING, `type` STRING, "
               "`value` STRING, `invoke_pos` BIGINT, `complete_pos` BIGINT, `invoke_time` BIGINT, "
               "`complete_time` BIGINT, `node` STRING, `error` STRING, `ts` BIGINT, `file` INT, `hi` BIGINT, "
               "`problem` STRING")
_NAMES = ddl_columns(ROWS_SCHEMA)
# the op rows' columns, in the files the tasks write
OP_SCHEMA = "`seg` BIGINT, `rank` BIGINT, " + OPS_SCHEMA.split(", ", 1)[1]  # OPS_SCHEMA, id to come
_OP_NAMES = ddl_columns(OP_SCHEMA)
STAGING_PARTS = ["kind"]  # the staging manifest's partition: head, tail, seg rows and file (op files)


class _Rows:
    """Column lists of the rows a task yields (ROWS_SCHEMA: head, tail and seg rows) and, apart,
    of the op rows it writes to its data file (OP_SCHEMA)."""

    def __init__(self) -> None:
        self.cols: dict[str, list] = {c: [] for c in _NAMES}
        self.ops: dict[str, list] = {c: [] for c in _OP_NAMES}

    def add(self, kind: str, seg: int, *, rank=None, process=None, f=None, type=None, value=None,
            invoke_pos=None, complete_pos=None, invoke_time=None, complete_time=None, node=None, error=None,
            ts=None, file=None, hi=None, problem=None) -> None:
        row = (kind, seg, rank, process, f, type, value, invoke_pos, complete_pos, invoke_time, complete_time,
               node, error, ts, file, hi, problem)
        for c, v in zip(self.cols.values(), row, strict=True):
            c.append(v)

    def extend_ops(self, seg: int, n: int, cols: dict[str, list]) -> None:
        """`n` op rows of segment `seg` at once, their columns in `cols`."""
        for c, v in self.ops.items():
            v += [seg] * n if c == "seg" else cols[c]

    def __len__(self) -> int:
        return len(self.cols["kind"])


def _pair_block(cols: dict, rows: _Rows) -> None:
    """Pair one decoded block (EVENT_SCHEMA columns of whole lines of one file) into `rows`:
    each run of consecutive indexes in it is a segment."""
    import numpy as np

    from sleuth.history.jsonl import TYPE_CODES

    problems = cols["problem"]
    n = len(problems)
    if any(p is not None for p in problems):  # a line the rules refuse: the driver will name it
        for fno, problem in zip(cols["file"], problems, strict=True):
            if problem is not None:
                rows.add("seg", -1, file=fno, problem=problem)
        return
    if not n:
        return
    index = np.array(cols["index"], np.int64)
    bounds = [0, *(np.flatnonzero(np.diff(index) != 1) + 1).tolist(), n]
    process = np.array(cols["process"], np.int64)
    types = np.fromiter(map(TYPE_CODES.__getitem__, cols["type"]), np.int8, n)
    f_ids: dict[str, int] = {}
    fs = np.fromiter((f_ids.setdefault(f, len(f_ids)) for f in cols["f"]), np.int64, n)
    for a, b in zip(bounds, bounds[1:], strict=False):
        seg = {c: v[a:b] for c, v in cols.items()}
        _pair_segment(seg, index[a:b], process[a:b], types[a:b], fs[a:b], rows)


def _pair_segment(c: dict, index, process, types, fs, rows: _Rows) -> None:
    """The rows of one segment (module docstring), paired by sleuth's columnar pairer
    (`sleuth.history.jsonl.pair_columns`), open at both ends: a process's first event here may
    complete an invoke of an earlier segment (a head), its last may be an invoke still open
    (a tail)."""
    import numpy as np

    from sleuth.history.jsonl import pair_columns

    lo = int(index[0])
    paired = pair_columns(process, types, fs, open_ends=True)
    problem = None
    if paired.bad >= 0:
        problem = f"process {process[paired.bad]} breaks the pairing rules at index {index[paired.bad]}"
    inv, ret = paired.invoke, paired.complete
    done = np.flatnonzero(ret >= 0)
    i, r = inv[done].tolist(), ret[done].tolist()
    typ, value, node, time = c["type"], c["value"], c["node"], c["time"]
    ops = {
        "rank": done.tolist(), "process": [c["process"][x] for x in i], "f": [c["f"][x] for x in i],
        "type": [typ[x] for x in r],
        "value": [value[y] if typ[y] == "ok" and value[y] != "null" else value[x] for x, y in zip(i, r, strict=True)],
        "invoke_pos": [c["index"][x] for x in i], "complete_pos": [c["index"][y] for y in r],
        "invoke_time": [time[x] for x in i], "complete_time": [time[y] if typ[y] != "info" else None for y in r],
        "node": [node[y] if node[y] is not None else node[x] for x, y in zip(i, r, strict=True)],
        "error": [c["error"][y] for y in r], "ts": [c["ts"][y] for y in r],
    }
    rows.extend_ops(lo, len(i), ops)
    client = process >= 0
    who = process[client]
    at = np.flatnonzero(client)
    _, first = np.unique(who, return_index=True)
    _, last = np.unique(who[::-1], return_index=True)
    rank_of = dict(zip(inv.tolist(), range(len(inv))))
    for x in at[first].tolist():
        if typ[x] == "invoke":
            rows.add("head", lo, process=c["process"][x], f=c["f"][x], type=typ[x], complete_pos=c["index"][x])
        else:
            rows.add("head", lo, process=c["process"][x], f=c["f"][x], type=typ[x], value=value[x],
                     complete_pos=c["index"][x], complete_time=time[x], node=node[x], error=c["error"][x],
                     ts=c["ts"][x])
    for x in at[len(at) - 1 - last].tolist():
        if typ[x] == "invoke":  # its last event is an invoke still open
            rows.add("tail", lo, rank=rank_of[x], process=c["process"][x], f=c["f"][x], type="invoke",
                     value=value[x], invoke_pos=c["index"][x], invoke_time=time[x], node=node[x])
        else:
            rows.add("tail", lo, process=c["process"][x], f=c["f"][x], type=typ[x], invoke_pos=c["index"][x])
    rows.add("seg", lo, rank=len(inv), invoke_time=time[0], file=c["file"][0], hi=int(index[-1]), problem=problem)


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


STAGED_OPS = "_ops"  # the op files' directory in the staging location (`_`: hidden from readers of the rows)


def decode_and_pair(files: list[str], ranges: list[tuple[int, int, int]], staging: str, job: str):
    """mapInArrow function over range numbers (`id`, positions in `ranges`): each task reads
    its byte range of a file itself, decodes and pairs it, writes its op rows with pyarrow as
    one new file (OP_SCHEMA) in `staging/_ops/` (`manifest.DataFile`: named for this attempt
    and `job`), and yields its head, tail and seg rows and then one `file` row naming that
    file (`value`: its path relative to `staging`, `rank`: its rows), which the caller hands
    to Spark's writer: the file rows are the op files' manifest (manifest.py says why that is
    safe). The text is read by the task, not by Spark's text source, and the op rows never
    cross into the JVM: the lines, or the rows, would cross into it and back."""
    def run(batches: Iterator) -> Iterator:
        import pyarrow as pa

        from sleuth.spark.history_ops import decode_block
        from sleuth.spark.manifest import DataFile

        schema, op_schema = arrow_schema(ROWS_SCHEMA), arrow_schema(OP_SCHEMA)
        for b in batches:
            for i in b.column("id").to_pylist():
                fno, start, end = ranges[i]
                out = DataFile(staging, STAGED_OPS, job, op_schema)
                for block in read_lines(files[fno], start, end):
                    rows = _Rows()
                    _pair_block(decode_block(files, fno, block), rows)
                    if rows.ops["seg"]:
                        out.write(pa.Table.from_pydict(rows.ops, schema=op_schema))
                    if len(rows):
                        yield pa.RecordBatch.from_pydict(rows.cols, schema=schema)
                if out.close():  # whole: only now may its manifest row go to the writer
                    last = _Rows()
                    last.add("file", i, rank=out.rows, value=out.path)
                    yield pa.RecordBatch.from_pydict(last.cols, schema=schema)
    return run


def write_rows(spark, files: list[str], ranges: list[tuple[int, int, int]], staging: str) -> None:
    """Decode and pair every range (a task each): the op rows written by the tasks under
    `staging` (a URI), the other rows (and each op file's) committed by Spark's writer into
    `staging`, partitioned by kind."""
    from sleuth.spark.manifest import token

    rows = spark.range(0, len(ranges), 1, numPartitions=max(1, len(ranges))).mapInArrow(
        decode_and_pair(files, ranges, staging, token()), ROWS_SCHEMA)
    rows.write.mode("overwrite").partitionBy(*STAGING_PARTS).parquet(staging)


def _ends(staging: str):
    """The committed staging output (a URI) as a dataset whose `kind` comes from the partition
    directories: a filter on it opens only those directories (never the op rows')."""
    import pyarrow.dataset as ds

    return ds.dataset(staging, format="parquet", schema=arrow_schema(ROWS_SCHEMA), partitioning="hive")


def segments_checked(spark, staging: str, files: list[str]) -> dict:
    """The seg rows: every line obeys the rules, the segments cover 0..n-1 once, in file order.
    Returns {events, start_time, offsets: [(segment lo, invokes before it)]}; else the first
    bad line's HistoryError (or the window pairing's, for a process breaking its rules)."""
    import pyarrow.dataset as ds

    from sleuth.history.jsonl import HistoryError
    from sleuth.spark.history_ops import first_bad_line, pairing_error

    t = _ends(staging).to_table(columns=["seg", "hi", "file", "rank", "invoke_time", "problem"],
                                 filter=ds.field("kind") == "seg")
    segs = sorted(zip(*(t[c].to_pylist() for c in t.column_names), strict=True))
    lines_bad = any(s[0] < 0 for s in segs)
    order_bad = bool(segs) and (segs[0][0] != 0 or any(
        b[0] != a[1] + 1 or b[2] < a[2] for a, b in zip(segs, segs[1:], strict=False)))
    if lines_bad or order_bad:
        err = first_bad_line(files)
        if err is None:
            err = HistoryError(files[0], None, "the files' indexes do not run 0, 1, 2, ... in name order")
        raise err
    if any(s[5] is not None for s in segs):
        raise pairing_error(files)
    offsets, total = [], 0
    for lo, _hi, _file, invokes, _time, _problem in segs:
        offsets.append((lo, total))
        total += invokes
    return {"events": segs[-1][1] + 1 if segs else 0, "start_time": segs[0][4] if segs else 0, "invokes": total,
            "offsets": offsets}


ENDS_CHUNK = 1 << 20  # head and tail rows the driver pairs at a time, at most (about)


def across_segments(spark, staging: str, files: list[str]):
    """Operations that cross a segment boundary (an Arrow table of OP_SCHEMA), paired on the
    driver from the head and tail rows; a process breaking its rules across a boundary raises
    the window pairing's error. A process's rows are all in one chunk (chunks are processes
    with equal low bits), so however many rows there are, the driver holds ENDS_CHUNK or so."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    data = _ends(staging)
    ends = (ds.field("kind") == "head") | (ds.field("kind") == "tail")
    k, n = 1, data.count_rows(filter=ends)
    while n > k * ENDS_CHUNK:
        k *= 2
    out = [arrow_schema(OP_SCHEMA).empty_table()]
    for j in range(k):
        chunk = data.to_table(filter=ends if k == 1 else ends & (pc.bit_wise_and(ds.field("process"), k - 1) == j))
        crossing = _crossing(chunk)
        if crossing is None:
            from sleuth.spark.history_ops import pairing_error

            raise pairing_error(files)
        out.append(pa.Table.from_pydict(crossing, schema=arrow_schema(OP_SCHEMA)))
    return pa.concat_tables(out)


def _crossing(t) -> dict | None:
    """The operations paired across boundaries from head and tail rows `t` (all the rows of
    each process in `t`), as OP_SCHEMA columns; None when a process breaks its rules.

    Per process, in index order (a head before a tail at the same index: one event as both),
    the only consecutive events not yet checked are a tail and the next head, and a process's
    first head: the pairer's rules apply to exactly those. A tail invoke is completed by the
    next head when that is its completion, else it never completes (info)."""
    import numpy as np

    head = np.asarray(t["kind"].to_numpy(zero_copy_only=False) == "head")
    complete_pos = t["complete_pos"].fill_null(0).to_numpy()
    invoke_pos = t["invoke_pos"].fill_null(0).to_numpy()
    process = t["process"].to_numpy()
    order = np.lexsort((~head, np.where(head, complete_pos, invoke_pos), process))
    # as Python objects: numpy would make the nullable integer columns float
    col = {c: np.array(t[c].to_pylist() + [None], dtype=object)[:-1][order] for c in t.column_names}
    head, process = head[order], process[order]
    typ = col["type"]
    # Sleuth's columnar pairer over boundaries: each tail with the next head of its process,
    # open at the front (a tail may be a completion); a process's first head alone, closed
    # (a completion there has no invoke anywhere).
    from sleuth.history.jsonl import TYPE_CODES, pair_columns

    first = np.zeros(len(order), bool)
    first[np.unique(process, return_index=True)[1]] = True  # sorted by process: its first row
    boundary = np.cumsum(~head | first)  # a number per (tail, next head), and per first head
    types = np.fromiter(map(TYPE_CODES.__getitem__, typ), np.int8, len(order))
    f_ids: dict = {}
    fs = np.fromiter((f_ids.setdefault(f, len(f_ids)) for f in col["f"]), np.int64, len(order))
    paired = pair_columns(boundary, types, fs, open_ends=True)
    if paired.bad >= 0 or pair_columns(np.where(head & first, boundary, -1), types, fs).bad >= 0:
        return None
    completed_by = dict(zip(paired.invoke.tolist(), paired.complete.tolist(), strict=True))
    out: dict[str, list] = {c: [] for c in ddl_columns(OP_SCHEMA)}
    for i in np.flatnonzero(~head & (types == 0)).tolist():  # tail invokes: open at a segment's end
        nx = completed_by[i]
        done = nx >= 0
        kind = typ[nx] if done else "info"
        value = col["value"][nx] if done else None
        for c in ("seg", "rank", "process", "f", "invoke_pos", "invoke_time"):
            out[c].append(col[c][i])
        out["type"].append(kind)
        out["value"].append(value if kind == "ok" and value is not None and value != "null" else col["value"][i])
        out["complete_pos"].append(col["complete_pos"][nx] if done else None)
        out["complete_time"].append(col["complete_time"][nx] if done and kind in ("ok", "fail") else None)
        out["node"].append(col["node"][nx] if done and col["node"][nx] is not None else col["node"][i])
        for c in ("error", "ts"):
            out[c].append(col[c][nx] if done else None)
    return out


def staged_files(staging: str) -> list[str]:
    """The op files the committed staging rows name (paths relative to `staging`), in order."""
    import pyarrow.dataset as ds

    t = _ends(staging).to_table(columns=["value"], filter=ds.field("kind") == "file")
    return sorted(t.column("value").to_pylist())


def operations(spark, staging: str, files: list[str], ops_dir: str) -> dict:
    """Write the history's operations (history_ops.OPS_SCHEMA, ids as invoke ordinals) into
    `ops_dir` (a URI), from the committed staging rows (`write_rows`) and the op files they
    name; returns {events, start_time, ops}.

    A task per op file numbers it (`_numbered`: id = the invokes of the segments before its
    segment + its rank in it, numpy) and writes it anew with pyarrow as a file of its own in
    `ops_dir`; one more task writes the few operations that cross a boundary, paired and
    numbered on the driver (handed over as a broadcast: the driver writes no file). Each
    task yields its file's manifest row, which Spark's writer commits (`manifest.commit`):
    readers read `ops_dir` through it (`manifest.files`). No operation crosses into the JVM:
    numbering them there as Spark read and wrote them (a broadcast join) took 1.2-1.3 times
    main's time for the whole check, where its tasks numbered them with pyarrow. Every invoke
    is one operation (paired in its segment, across a boundary, or open: info), so their
    number is the seg rows' sum of invokes."""
    import pyarrow as pa

    from sleuth.spark import manifest

    info = segments_checked(spark, staging, files)
    offsets = info.pop("offsets")
    crossing = _numbered(across_segments(spark, staging, files), offsets).cast(arrow_schema(OPS_SCHEMA))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, crossing.schema) as w:
        w.write_table(crossing)
    shared = spark.sparkContext.broadcast(sink.getvalue().to_pybytes())
    parts = staged_files(staging)
    job = manifest.token()
    try:
        tasks = spark.range(0, len(parts) + 1, 1, numPartitions=len(parts) + 1)
        manifest.commit(tasks.mapInArrow(_number_files(staging, parts, offsets, ops_dir, job, shared),
                                         "`path` STRING, `rows` BIGINT"), ops_dir, [])
    finally:
        shared.destroy()
    n = info.pop("invokes")
    return {**info, "ops": n}


def _numbered(table, offsets: list[tuple[int, int]]):
    """`table` (seg, rank and the other OPS_SCHEMA columns) with `id` for seg and rank."""
    import numpy as np
    import pyarrow as pa

    from sleuth.spark.history_ops import OPS_COLUMNS

    lo = np.array([x for x, _ in offsets] or [0], dtype=np.int64)
    before = np.array([b for _, b in offsets] or [0], dtype=np.int64)
    seg = table.column("seg").to_numpy(zero_copy_only=False).astype(np.int64)
    ids = before[np.searchsorted(lo, seg)] + table.column("rank").to_numpy(zero_copy_only=False)
    return pa.table([pa.array(ids, pa.int64()), *(table.column(c) for c in OPS_COLUMNS[1:])], names=list(OPS_COLUMNS))


def _number_files(staging: str, parts: list[str], offsets: list[tuple[int, int]], ops_dir: str, job: str, crossing):
    """mapInArrow function over positions in `parts`, and one more: each staged op file numbered,
    and the crossing operations (`crossing`: a broadcast of them as an Arrow stream), each as a
    new file in `ops_dir`, yielding its manifest row."""
    def run(batches: Iterator) -> Iterator:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from sleuth.spark.manifest import filesystem, write_file

        fsys, base = filesystem(staging)
        for b in batches:
            for i in b.column("id").to_pylist():
                if i < len(parts):
                    t = _numbered(pq.read_table(f"{base}/{parts[i]}", filesystem=fsys), offsets)
                else:
                    t = pa.ipc.open_stream(crossing.value).read_all()
                path = write_file(ops_dir, "", job, t.cast(arrow_schema(OPS_SCHEMA)))
                yield pa.RecordBatch.from_pydict({"path": [path], "rows": [t.num_rows]})
    return run
