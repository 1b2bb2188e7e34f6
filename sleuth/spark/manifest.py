"""Data files the tasks write themselves, committed by a manifest that Spark's writer commits.

The pattern of Delta Lake and Iceberg, for outputs whose rows are made in
Python: a task writes its rows with pyarrow straight to new Parquet files
under the output location, each under a name no other task attempt uses
(`part-<job>-<uuid4>.parquet`: never renamed, never overwritten), and
yields one small row per file (which file, for which run, how many rows).
Those rows are the job's output, written by Spark's writer and committed
by its committer into `<location>/_manifest/` (partitioned, with dynamic
partition overwrite: a job replaces the manifest's entries of its own
partitions only). Readers list the files through the committed manifest
(`files`), never by listing the data directories.

Why that is safe where a task's own temp file + rename + `_SUCCESS` is not:

- A task attempt that fails, is killed, or loses a speculative race may
  leave files behind, but its manifest rows are in its own task output,
  which Spark's committer discards; only the committed attempt's rows reach
  `_manifest/`, and a committed attempt yields a file's row only after
  pyarrow has closed that file (on an object store, completed its upload).
  So every file the manifest names is whole, and no file it does not name
  is ever read. No rename is needed, so none can be torn or non-atomic
  (object stores have no atomic rename), and nothing of ours marks success.
- Which files make the dataset is decided on the driver, in Spark's job
  commit, as for any Spark output.
- The rows never cross into the JVM: only the manifest's rows do (one per
  file). Handing a campaign's 1M operations to Spark's Parquet writer made
  its consolidation 1.8x the time of tasks writing them with pyarrow.

After the commit the driver deletes what no reader can reach any more
(`sweep`): the files this job's failed attempts left (by the job's token in
their names) and the files of entries the job replaced. That is tidiness,
not correctness: a file it misses (a killed attempt still writing) is never
read. The driver reaches the output location through pyarrow's filesystem
for its URI (the shared storage every node writes), never an executor's disk.
"""

from __future__ import annotations

import uuid

MANIFEST = "_manifest"  # under the output location; `_` hides it from readers of the data files
MANIFEST_COLUMNS = ("path", "rows")  # besides the partition columns: a file relative to the location
MANIFEST_SCHEMA = "`path` STRING, `rows` BIGINT"  # a manifest row of no partitions, as a task yields it


def token() -> str:
    """A new job's token: part of every data file name its tasks write."""
    return uuid.uuid4().hex[:16]


def filesystem(location: str):
    """pyarrow's filesystem for `location` (a path or URI) and the location's path in it."""
    from pyarrow import fs

    from sleuth.spark.history_ops import uri

    filesystem, base = fs.FileSystem.from_uri(uri(location))
    return filesystem, base.rstrip("/")


class DataFile:
    """In a task: a new Parquet file in `directory` (relative to `location`, a URI), named for this
    attempt alone, opened at the first `write` (no rows, no file); after `close`, `path` is its
    path relative to `location` (for its manifest row) and `rows` its row count."""

    def __init__(self, location: str, directory: str, job: str, schema) -> None:
        self.location, self.directory, self.schema = location, directory, schema
        name = f"part-{job}-{uuid.uuid4().hex}.parquet"
        self.path = f"{directory}/{name}" if directory else name
        self.rows = 0
        self._writer = None

    def write(self, table) -> None:
        import pyarrow.parquet as pq

        if self._writer is None:
            fsys, base = filesystem(self.location)
            if self.directory:
                fsys.create_dir(f"{base}/{self.directory}", recursive=True)
            self._writer = pq.ParquetWriter(f"{base}/{self.path}", self.schema, filesystem=fsys)
        self._writer.write_table(table)
        self.rows += table.num_rows

    def close(self) -> bool:
        """Close the file (whole from here on); False when nothing was written (no file)."""
        if self._writer is None:
            return False
        self._writer.close()
        return True


def write_file(location: str, directory: str, job: str, table) -> str:
    """In a task: `table` as a new Parquet file (`DataFile`), even with no rows; returns its path
    relative to `location`."""
    f = DataFile(location, directory, job, table.schema)
    f.write(table)
    f.close()
    return f.path


def manifest_uri(location: str) -> str:
    from sleuth.spark.history_ops import uri

    return uri(location).rstrip("/") + "/" + MANIFEST


def commit(rows, location: str, partitions: list[str]) -> None:
    """Run the job whose output is `rows` (a Spark DataFrame of manifest rows: `partitions`, then
    MANIFEST_COLUMNS) and commit them as the manifest of `location`, replacing the entries of
    the partitions it writes (the session's dynamic partition overwrite)."""
    rows.write.mode("overwrite").partitionBy(*partitions).parquet(manifest_uri(location))


def write_dataframe(df, location: str) -> None:
    """A Spark DataFrame's rows as data files of `location` (a task's rows as one file, with
    pyarrow), committed by a manifest of no partitions: for data Spark already holds in the
    JVM, so that its readers read it as they read the tasks' own files."""
    job = token()

    def task(batches):
        import pyarrow as pa

        f = None
        for b in batches:
            if f is None:
                f = DataFile(location, "", job, b.schema)
            f.write(pa.Table.from_batches([b]))
        if f is not None and f.close():
            yield pa.RecordBatch.from_pydict({"path": [f.path], "rows": [f.rows]})

    commit(df.mapInArrow(task, MANIFEST_SCHEMA), location, [])


def entries(location: str, partitions: list[str]):
    """The committed manifest of `location` as an Arrow table (`partitions` as strings, then
    MANIFEST_COLUMNS); empty when nothing was committed there. Read on the driver."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    from pyarrow import fs

    schema = pa.schema([*((p, pa.string()) for p in partitions), ("path", pa.string()), ("rows", pa.int64())])
    fsys, base = filesystem(location)
    where = f"{base}/{MANIFEST}"
    if fsys.get_file_info(where).type != fs.FileType.Directory:
        return schema.empty_table()
    # Spark's partition directories, decoded as Spark escapes them; values kept as strings
    part = ds.partitioning(pa.schema([(p, pa.string()) for p in partitions]), flavor="hive") if partitions else None
    found = ds.dataset(where, filesystem=fsys, format="parquet", partitioning=part).to_table()
    return found.select(list(schema.names)).cast(schema)


def dataset(location: str, ddl: str):
    """The data files of `location` (no partitions) its committed manifest names, as one pyarrow
    dataset of schema `ddl` (a Spark DDL string); on the driver."""
    import pyarrow.dataset as ds

    from sleuth.spark.history_ops import arrow_schema

    fsys, base = filesystem(location)
    paths = [f"{base}/{p}" for p in sorted(entries(location, []).column("path").to_pylist())]
    return ds.dataset(paths, filesystem=fsys, format="parquet", schema=arrow_schema(ddl))


def files(location: str, partitions: list[str], where=None) -> list[str]:
    """The data files of `location` its manifest names (as URIs, in the manifest's order by
    partition and path), optionally only the rows of `where` (a function of the Arrow table
    giving a boolean mask)."""
    from sleuth.spark.history_ops import uri

    t = entries(location, partitions)
    if where is not None and t.num_rows:
        t = t.filter(where(t))
    base = uri(location).rstrip("/")
    return [f"{base}/{p}" for p in sorted(t.column("path").to_pylist())]


def sweep(location: str, job: str, before: set[str], directories: list[str], partitions: list[str]) -> int:
    """After `job` committed: delete the files no manifest entry names any more, among `before`
    (the replaced entries' paths) and the files named for `job` in `directories` (its failed or
    losing attempts'). Returns how many went. On the driver, through the location's filesystem."""
    from pyarrow import fs

    fsys, base = filesystem(location)
    live = set(entries(location, partitions).column("path").to_pylist())
    doomed = {p for p in before if p not in live}
    for d in directories:
        info = fsys.get_file_info(fs.FileSelector(f"{base}/{d}", allow_not_found=True))
        for i in info:
            rel = i.path[len(base) + 1:]
            if i.base_name.startswith(f"part-{job}-") and rel not in live:
                doomed.add(rel)
    for p in doomed:
        try:
            fsys.delete_file(f"{base}/{p}")
        except (FileNotFoundError, OSError):
            pass
    return len(doomed)
