"""Data files the tasks write, committed by a manifest Spark's writer commits (sleuth/spark/manifest.py):
a task attempt that fails after writing its file leaves it behind, but no reader ever reads it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from live import require_module

# In a process of its own: `local[2,2]` retries a failed task once (Spark's local mode does not
# otherwise), and no other test's session may be the one getOrCreate returns.
JOB = textwrap.dedent("""
    import json, sys
    from sleuth.spark import manifest
    from sleuth.spark.session import spark_session

    location, out = sys.argv[1], sys.argv[2]
    spark = spark_session("local[2,2]", "sleuth-test-manifest")
    job = manifest.token()

    def task(batches):
        import pyarrow as pa
        from pyspark import TaskContext

        for b in batches:
            for i in b.column("id").to_pylist():
                f = manifest.DataFile(location, f"part={i}", job, pa.schema([("n", pa.int64())]))
                f.write(pa.table({"n": list(range(i * 100, i * 100 + 100))}))
                f.close()
                if TaskContext.get().attemptNumber() == 0 and i % 2 == 0:
                    raise RuntimeError("the first attempt dies after writing its file")
                yield pa.RecordBatch.from_pydict({"path": [f.path], "rows": [f.rows]})

    try:
        rows = spark.range(0, 4, 1, numPartitions=4).mapInArrow(task, "`path` STRING, `rows` BIGINT")
        manifest.commit(rows, location, [])
        named = manifest.entries(location, []).column("path").to_pylist()
        swept = manifest.sweep(location, job, set(), [f"part={i}" for i in range(4)], [])
    finally:
        spark.stop()
    json.dump({"named": named, "swept": swept}, open(out, "w"))
""")


@pytest.mark.spark
@pytest.mark.slow
def test_a_failed_attempts_file_is_never_read_and_is_swept(tmp_path):
    require_module("pyspark", "Spark (pyspark)")
    import pyarrow.parquet as pq

    location, out = tmp_path / "data", tmp_path / "out.json"
    p = subprocess.run([sys.executable, "-c", JOB, str(location), str(out)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(out.read_text())
    named = sorted(got["named"])
    # one file per task in the manifest; the two tasks that died once left a file each
    assert len(named) == 4 and len({n.split("/")[0] for n in named}) == 4
    assert got["swept"] == 2
    on_disk = sorted(os.path.relpath(os.path.join(d, f), location) for d, _, fs in os.walk(location)
                     for f in fs if f.startswith("part-") and "_manifest" not in d)
    assert on_disk == named  # the strays are gone, every named file is there
    from sleuth.spark.manifest import files

    values = sorted(v for u in files(str(location), []) for v in pq.read_table(u[len("file://"):])["n"].to_pylist())
    assert values == list(range(400))  # each row once: the dead attempts' copies never read
