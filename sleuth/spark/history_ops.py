"""One history, read and paired by Spark: JSON Lines (a file or a directory of
shards) or the campaign consolidation's Parquet, to a Parquet table of
operations written beside the input and reused by the next check.

Reading: Spark reads the text, and the lines are decoded on the executors by
the rules `sleuth check` applies (a batch at a time by the fast reader's
decoder, or line by line by `sleuth.history.jsonl.event_from_dict`), into an
explicit schema (`EVENT_SCHEMA`); `value` and `error` stay JSON text, so a
string value keeps its quotes. Shards are read in name order; their `index`
fields continue one another, as if the files were one (that is what makes a
split history check the same as the whole).

Pairing: in the tasks that decode the lines (`history_pair.py`, which says
why it is the pairing of the whole history), by sleuth's columnar pairer
(`sleuth.history.jsonl.pair_columns`). When a process breaks its rules, the driver
streams the files through sleuth's own `Pairer` (`pairing_error`), which
names the event as `sleuth check` does. Operation ids are invoke ordinals (so a transaction
is named `T<id>` as `sleuth check` names it). The campaign consolidation's
Parquet is already paired: its ids are counted per block of indexes.

Bad input: when some line breaks a rule, the driver streams the files once
more through `event_from_dict` (constant memory) to name the first bad line,
file and problem exactly as `sleuth check` does.

Cache: `<input>.sleuth-ops/` holds `ops/` (Parquet) and `meta.json`, which
records each input file's size and modification time; a check whose input
changed rebuilds it.
"""

from __future__ import annotations

import bisect
import glob
import hashlib
import json
import os
import re
from collections.abc import Iterator

import orjson

from sleuth.history.jsonl import (
    NEMESIS,
    Event,
    History,
    HistoryError,
    OpCount,
    Pairer,
    dumps_event,
    event_from_dict,
    events_by_rules,
)
from sleuth.spark.manifest import entries, manifest_uri, write_dataframe

EVENT_SCHEMA = ("`file` INT, `index` BIGINT, `time` BIGINT, `type` STRING, `process` BIGINT, "
                "`f` STRING, `value` STRING, `node` STRING, `error` STRING, `ts` BIGINT, `problem` STRING")
OPS_SCHEMA = ("`id` BIGINT, `process` BIGINT, `f` STRING, `type` STRING, `value` STRING, `invoke_pos` BIGINT, "
              "`complete_pos` BIGINT, `invoke_time` BIGINT, `complete_time` BIGINT, `node` STRING, "
              "`error` STRING, `ts` BIGINT")  # the table of operations in the cache
CACHE_VERSION = 3
BLOCK = 1 << 16  # indexes per block when numbering operations
NEMESIS_PROCESS = -1  # `process: "nemesis"` in the long column
SPLIT_BYTES = 32 << 20  # input bytes per task when reading and pairing


def input_files(path: str) -> list[str]:
    """The JSON Lines files of a history: the file itself, or a directory's
    `*.jsonl` in name order. Missing or empty: HistoryError (bad input)."""
    if os.path.isdir(path):
        files = sorted(glob.glob(os.path.join(path, "*.jsonl")))
        if not files and not parquet_files(path):
            raise HistoryError(path, None, "no *.jsonl or *.parquet files in this directory")
        return files
    if not os.path.exists(path):
        raise HistoryError(path, None, "No such file or directory")
    return [path]


def native(path: str) -> bool:
    """Does Spark read `path` as it is: a directory (of `*.jsonl` shards, or the campaign
    consolidation's Parquet) or a `.jsonl` file, which `sleuth check` too reads as strict
    JSON Lines? Any other file is another format `sleuth check` reads (`sleuth.history.imports`)."""
    return os.path.isdir(path) or os.path.splitext(path)[1].lower() == ".jsonl"


def imported(path: str, workload: str) -> tuple[str, History]:
    """A file in another format (Jepsen's `history.edn` or text log, elle-cli's JSON array,
    a sparse file), read by the importer `sleuth check` uses for `workload` (its errors name
    the file and line as `sleuth check` names them) and written as JSON Lines, which Spark
    reads: `imported.jsonl` in the input's cache directory (`cache_dir`: beside it, or under
    $SLEUTH_HOME when its directory is read-only). Rewritten only when its bytes change, so
    the operations paired from it are reused while the input is the same. Returns the copy's
    path and the imported history (whose `line_of` maps the copy's lines back: line i of the
    copy is event i - 1)."""
    from sleuth.base.jsonfile import written_whole
    from sleuth.checker import WORKLOADS

    history = WORKLOADS[workload].load(path, events=True)
    try:
        data = b"".join(dumps_event(e) for e in history.events)
    except TypeError as e:  # a map with keys JSON cannot hold: no workload Spark judges has one
        raise HistoryError(path, None, f"cannot be written as JSON Lines for Spark ({e})") from None
    out = os.path.join(cache_dir(path), "imported.jsonl")
    try:
        with open(out, "rb") as fh:
            same = fh.read() == data
    except OSError:
        same = False
    if not same:
        with written_whole(out) as tmp, open(tmp, "wb") as fh:
            fh.write(data)
    return out, history


def parquet_files(path: str) -> list[str]:
    """The Parquet files of a directory: for (a part of) the campaign consolidation's dataset,
    the files its committed manifest names under `path` (`sleuth.spark.manifest`: a file no entry
    names is a failed task's or a replaced one); else every `*.parquet` below it."""
    from sleuth.spark import manifest
    from sleuth.spark.consolidate import PARTITIONS

    full = os.path.abspath(path)
    for root in (full, os.path.dirname(full), os.path.dirname(os.path.dirname(full))):
        if os.path.isdir(os.path.join(root, manifest.MANIFEST)):
            inside = os.path.relpath(full, root)
            paths = manifest.entries(root, PARTITIONS).column("path").to_pylist()
            return sorted(os.path.join(root, p) for p in paths
                          if inside == "." or p.startswith(inside.rstrip("/") + "/"))
    return sorted(glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True))


def cache_dir(path: str) -> str:
    """Where the paired operations of `path` are kept: beside it (`<input>.sleuth-ops`), or,
    where that cannot be written (a read-only mount of CI artifacts, another user's files),
    under `$SLEUTH_HOME/spark-cache/` (default ~/.sleuth), named by the input's absolute path."""
    full = os.path.normpath(os.path.abspath(path))
    beside = full + ".sleuth-ops"
    try:
        os.makedirs(beside, exist_ok=True)
        if os.access(beside, os.W_OK):
            return beside
    except OSError:
        pass
    home = os.environ.get("SLEUTH_HOME") or os.path.join(os.path.expanduser("~"), ".sleuth")
    digest = hashlib.sha1(full.encode()).hexdigest()[:12]
    elsewhere = os.path.join(home, "spark-cache", f"{os.path.basename(full)}-{digest}.sleuth-ops")
    os.makedirs(elsewhere, exist_ok=True)
    return elsewhere


def uri(path: str) -> str:
    """`path` as a URI Spark's readers and writers take: one with a scheme as it is, a local
    path as `file:` of its absolute path (on a cluster, a mount every node has at that path)."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:/", path):
        return path
    return "file://" + os.path.abspath(path)


def ops_files(ops_dir: str) -> list[str]:
    """The files of a table of operations (`load_ops`'s `ops`), as URIs: those its committed
    manifest names (sleuth.spark.manifest), never a listing of the directory."""
    from sleuth.spark.manifest import files

    return files(ops_dir, [])


def ops_dataset(ops_dir: str):
    """The table of operations as a pyarrow dataset of the files its manifest names (`ops_files`)."""
    from sleuth.spark.manifest import dataset

    return dataset(ops_dir, OPS_SCHEMA)


def committed(location: str) -> bool:
    """Did a Spark job commit its output at `location`? Its committer writes `_SUCCESS` last,
    in the job's commit on the driver, so the driver can look (through pyarrow's filesystem
    for the URI's scheme, not a local stat)."""
    from pyarrow import fs

    filesystem, base = fs.FileSystem.from_uri(uri(location))
    return filesystem.get_file_info(base.rstrip("/") + "/_SUCCESS").type == fs.FileType.File


def remove(location: str) -> None:
    """Delete the directory at `location` (a URI or path) if it is there: a job's staging
    output, once read (through pyarrow's filesystem for the scheme)."""
    from pyarrow import fs

    filesystem, base = fs.FileSystem.from_uri(uri(location))
    if filesystem.get_file_info(base).type == fs.FileType.Directory:
        filesystem.delete_dir(base)


def fingerprint(files: list[str]) -> list[list]:
    return [[os.path.abspath(f), os.path.getsize(f), os.stat(f).st_mtime_ns] for f in files]


_FRACTION_OR_EXPONENT = re.compile(rb"[0-9][.eE]")  # 2.50 and 1e2 are written 2.5 and 100.0


def _loose(b: bytes) -> bool:
    """Might this JSON text differ from what `orjson.dumps` writes? Only whitespace between
    tokens (space, tab, carriage return; a line holds no newline), an escape, or a number
    with a fraction or an exponent can make it (or, harmlessly, a string that looks so)."""
    return (b" " in b or b"\\" in b or b"\t" in b or b"\r" in b
            or _FRACTION_OR_EXPONENT.search(b) is not None)


def _json_text(raw) -> str:
    """A value's JSON text as `orjson.dumps` writes it, from its text in the file: as it is
    unless it may not be compact (`_loose`: then decoded and written again)."""
    b = bytes(raw)
    if _loose(b):
        b = orjson.dumps(orjson.loads(b))
    return b.decode()


def _decode_fast(fno: int, block: bytes) -> dict | None:
    """One file's whole lines (`block`) decoded in one msgspec call, as EVENT_SCHEMA columns;
    None when some line breaks the fast reader's strict types (the slow path then judges
    every line)."""
    import msgspec

    from sleuth.history.jsonl import decode_raw_lines

    try:
        events = decode_raw_lines(block)
    except msgspec.MsgspecError:
        return None
    null = b"null"
    # a value's text is as orjson writes it, unless the file's is not compact
    text = _json_text if _loose(block) else (lambda r: bytes(r).decode())
    try:  # a value's text must be UTF-8 JSON, which msgspec does not check in a Raw
        return {
            "file": [fno] * len(events),
            "index": [e.index for e in events],
            "time": [e.time for e in events],
            "type": [e.type for e in events],
            "process": [NEMESIS_PROCESS if e.process == NEMESIS else e.process for e in events],
            "f": [e.f for e in events],
            "value": [text(e.value) for e in events],
            "node": [e.node for e in events],
            "error": [None if bytes(e.error) == null else text(e.error) for e in events],
            "ts": [e.ts for e in events],
            "problem": [None] * len(events),
        }
    except (UnicodeDecodeError, orjson.JSONDecodeError):
        return None


def _decode_slow(files: list[str], fnos: list[int], lines: list) -> dict:
    """Line by line by the rules `sleuth check` applies (`event_from_dict`): a line that
    breaks one becomes a row with its problem (the driver names the first bad line)."""
    rows = []
    for fno, line in zip(fnos, lines, strict=True):
        if not line.strip():
            continue
        source = files[fno]
        try:
            d = orjson.loads(line)
            e = event_from_dict(d, source, 0, None)
        except orjson.JSONDecodeError as x:
            rows.append((fno, None, None, None, None, None, None, None, None, None, f"not valid JSON ({x})"))
            continue
        except HistoryError as x:
            rows.append((fno, None, None, None, None, None, None, None, None, None, x.problem))
            continue
        rows.append((fno, e.index, e.time, e.type, NEMESIS_PROCESS if e.process == NEMESIS else e.process,
                     e.f, orjson.dumps(e.value).decode(), e.node,
                     None if e.error is None else orjson.dumps(e.error).decode(), e.ts, None))
    return {c: [r[i] for r in rows] for i, c in enumerate(ddl_columns(EVENT_SCHEMA))}


_ARROW = {"STRING": "string", "BIGINT": "int64", "INT": "int32"}


def ddl_columns(ddl: str) -> list[str]:
    """The column names of a DDL column list ("`a` STRING, `b` BIGINT", as EVENT_SCHEMA)."""
    return [c.split("`")[1] for c in ddl.split(", ")]


OPS_COLUMNS = tuple(ddl_columns(OPS_SCHEMA))


def arrow_schema(ddl: str):
    """The pyarrow schema of a DDL column list of STRING, BIGINT and INT columns (as EVENT_SCHEMA)."""
    import pyarrow as pa

    types = [c.split("`")[2].strip() for c in ddl.split(", ")]
    return pa.schema([(name, getattr(pa, _ARROW[t])()) for name, t in zip(ddl_columns(ddl), types, strict=True)])


def decode_block(files: list[str], fno: int, block: bytes) -> dict:
    """Whole lines of file `fno`, as bytes, as EVENT_SCHEMA column lists: by sleuth's one
    decoder of history lines in one call, values kept as their JSON text
    (`sleuth.history.jsonl.decode_raw_lines`); a block it refuses, line by line through
    `event_from_dict`, which accepts what RULES accept and names each problem."""
    cols = _decode_fast(fno, block)
    if cols is not None:
        return cols
    lines = block.split(b"\n")  # bytes: orjson judges their encoding as `sleuth check` does
    return _decode_slow(files, [fno] * len(lines), lines)


def _stream(files: list[str]) -> Iterator[tuple[str, int, int, Event]]:
    """(file, line, position, event) of every event of the files, read as `sleuth check` reads
    one (`sleuth.history.jsonl.events_by_rules`: blank lines skipped, index continuing across files);
    HistoryError at the first bad line. Constant memory."""
    pos = 0
    for source in files:
        with open(source, "rb") as fh:
            for lineno, e in events_by_rules(fh, source, 0, pos):
                yield source, lineno, pos, e
                pos += 1


def first_bad_line(files: list[str]) -> HistoryError | None:
    """The first problem of the files' lines (`_stream`), or None."""
    try:
        for _ in _stream(files):
            pass
    except HistoryError as e:
        return e
    return None


class _Where:
    """Where each event position of the files is, for `Pairer`'s messages (its `history`): a
    mark where the file or the offset from position to line changes (a blank line)."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.marks: list[tuple[str, int]] = []  # (file, line - position)

    def note(self, source: str, lineno: int, pos: int) -> None:
        if not self.marks or self.marks[-1] != (source, lineno - pos):
            self.starts.append(pos)
            self.marks.append((source, lineno - pos))

    def _at(self, pos: int) -> tuple[str, int]:
        source, offset = self.marks[bisect.bisect_right(self.starts, pos) - 1]
        return source, pos + offset

    def line_of(self, pos: int) -> int:
        return self._at(pos)[1]

    def error(self, pos: int, problem: str) -> HistoryError:
        return HistoryError(*self._at(pos), problem)


def pairing_error(files: list[str]) -> HistoryError:
    """The message of sleuth's one pairer (`sleuth.history.jsonl.Pairer`) for the first event that
    breaks a per-process rule: the files streamed once more through it, keeping no operation
    (constant memory but the processes in flight). Slow: only for a history known to break one."""
    where = _Where()
    pairer = Pairer(where)  # type: ignore[arg-type] - `_Where` is all of a History it asks
    pairer.ops = OpCount()  # type: ignore[assignment]
    try:
        for source, lineno, pos, e in _stream(files):
            where.note(source, lineno, pos)
            if e.process != NEMESIS:
                pairer.feed(pos, e.type, e.process, e.f, e.value, e.time, e.node, e.error, e.ts)
    except HistoryError as e:
        return e
    return HistoryError(files[0], None, "a process breaks the per-process rules of the history format")


def number(ops):
    """Add `id`: the operation's ordinal in invoke order, from per-block invoke counts."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ops = ops.withColumn("block", (F.col("invoke_pos") / BLOCK).cast("long"))
    counts = {r["block"]: r["n"] for r in ops.groupBy("block").agg(F.count("*").alias("n")).collect()}
    before, total = {}, 0
    for b in sorted(counts):
        before[b] = total
        total += counts[b]
    offsets = F.create_map(*(x for b, o in before.items() for x in (F.lit(b), F.lit(o)))) if before else None
    rank = F.row_number().over(Window.partitionBy("block").orderBy("invoke_pos")) - 1
    base = offsets[F.col("block")] if offsets is not None else F.lit(0)
    return ops.select((base + rank).cast("long").alias("id"), *OPS_COLUMNS[1:])


def consolidated(spark, path: str):
    """The campaign consolidation's operations (sleuth/spark/consolidate.py) under `path`, the
    files its manifest names (`parquet_files`), as OPS_COLUMNS."""
    from pyspark.sql import functions as F

    df = spark.read.parquet(*(uri(f) for f in parquet_files(path)))
    # Spark's JSON reader made a JSON null a SQL null there
    value = F.coalesce(F.when(F.col("outcome") == "ok", F.col("complete_value")), F.col("invoke_value"),
                       F.lit("null"))
    ops = df.select("process", "f", F.col("outcome").alias("type"), value.alias("value"),
                    F.col("invoke_index").alias("invoke_pos"), F.col("complete_index").alias("complete_pos"),
                    "invoke_time", F.when(F.col("outcome") != "info", F.col("complete_time"))
                    .alias("complete_time"), "node", "error", "ts")
    ops = ops.withColumn("process", F.col("process").cast("long"))
    return number(ops)


def load_ops(spark, path: str, say=lambda s: None) -> tuple[str, dict]:
    """The paired operations of the history at `path` as a Parquet directory
    (built, or reused when its input is unchanged), and its meta
    (events, start_time, ops, files)."""
    files = input_files(path)
    cache = cache_dir(path)
    meta_path = os.path.join(cache, "meta.json")
    sources = files or parquet_files(path)
    want = {"version": CACHE_VERSION, "inputs": fingerprint(sources)}
    if os.path.exists(meta_path):
        with open(meta_path) as fh:
            meta = json.load(fh)
        if {k: meta.get(k) for k in want} == want and committed(manifest_uri(os.path.join(cache, "ops"))):
            say(f"reusing paired operations in {cache}")
            return os.path.join(cache, "ops"), meta
    size = sum(os.path.getsize(f) for f in sources)
    # enough tasks for every core: byte ranges of up to SPLIT_BYTES, at least two per core (the
    # tasks are given their ranges, so the session's settings are not changed per check)
    parallel = max(4, 2 * spark.sparkContext.defaultParallelism, size // SPLIT_BYTES)
    split_bytes = max(1 << 20, min(SPLIT_BYTES, size // parallel))
    ops_dir = uri(os.path.join(cache, "ops"))
    remove(ops_dir)  # what an older check left: its files are no reader's any more
    if files:
        from sleuth.spark.history_pair import operations, splits, write_rows

        # the tasks read, decode and pair their byte ranges and write their operations; Spark's
        # writer commits the rows that cross ranges and name the files (history_pair.py); the
        # driver pairs across the ranges from those rows, and the tasks number the operations
        # into the table of operations, whose files a manifest names (manifest.py)
        staging = uri(os.path.join(cache, "staging"))
        try:
            ranges = splits(files, split_bytes)
            write_rows(spark, files, ranges, staging)
            say(f"decoded and paired {len(ranges)} byte ranges, rows committed to {staging}")
            info = operations(spark, staging, files, ops_dir)
        finally:
            remove(staging)
    else:
        ops = consolidated(spark, path)
        write_dataframe(ops, ops_dir)
        info = {"events": None, "start_time": ops.agg({"invoke_time": "min"}).collect()[0][0] or 0,
                "ops": sum(entries(ops_dir, []).column("rows").to_pylist())}
    n = info["ops"]
    meta = {**want, **info}
    with open(meta_path + ".tmp", "w") as fh:
        json.dump(meta, fh)
    os.replace(meta_path + ".tmp", meta_path)
    say(f"paired {n} operations into {cache}")
    return os.path.join(cache, "ops"), meta
