"""sleuth's Spark session: started once, quiet, its Python workers warmed; tasks handed work by number.

Spark runs embedded (`local[*]`) unless a master URL is given; pyspark is the
`spark` extra (`pip install 'sleuth[spark]'`), imported only here.
"""

from __future__ import annotations

import os
import socket
import sys


class SparkUnavailable(RuntimeError):
    """pyspark (or the Java it needs) is not installed."""


LOG_LEVEL = "ERROR"  # the JVM's log level in sleuth's sessions: its errors, not its chatter


def local_master(master: str) -> bool:
    return master.startswith("local")


def executor_python(master: str) -> str:
    """The Python the executors run: this interpreter on a local master (its venv has sleuth);
    on a cluster `python3` on the workers' PATH (their own installation: the containers' venv,
    `make spark-up`'s worker runs with this venv first on its PATH); `PYSPARK_PYTHON` overrides."""
    return os.environ.get("PYSPARK_PYTHON") or (sys.executable if local_master(master) else "python3")


def driver_address(master: str) -> str | None:
    """The address the executors reach the driver at: the one this host sends from towards the
    master (a cluster in containers reaches the host at the host's address on its network);
    None for a local master, or when SPARK_LOCAL_IP chooses it."""
    if local_master(master) or os.environ.get("SPARK_LOCAL_IP") or not master.startswith("spark://"):
        return None
    host = master[len("spark://"):].split(",")[0].rsplit(":", 1)[0]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect((host, 7077))  # UDP: no packet sent, only the route chosen
            return s.getsockname()[0]
        except OSError:
            return None


def spark_session(master: str = "local[*]", app: str = "sleuth"):
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        raise SparkUnavailable("pyspark is not installed: pip install 'sleuth[spark]'") from e
    log4j = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j}")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.ui.showConsoleProgress", "false")
               # fixed for the session, never changed per job: run names stay strings when read
               # back from partition paths, and writing one campaign's operations replaces only
               # that campaign's partitions
               .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
               .config("spark.sql.sources.partitionOverwriteMode", "dynamic"))
    host = "127.0.0.1" if master.startswith(("local", "spark://127.")) else driver_address(master)
    if host:  # where the executors reach the driver (a cluster on this machine: loopback)
        builder = builder.config("spark.driver.host", host).config("spark.driver.bindAddress", host)
    # pyspark reads the executors' Python from the environment when the context starts
    saved = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = executor_python(master)
    try:
        spark = builder.getOrCreate()
    finally:
        if saved is None:
            del os.environ["PYSPARK_PYTHON"]
        else:
            os.environ["PYSPARK_PYTHON"] = saved
    spark.sparkContext.setLogLevel(LOG_LEVEL)
    return spark


def per_task(spark, n: int, fn, schema: str = "rows BIGINT") -> list:
    """Run the mapInArrow function `fn` over task numbers 0..n-1 (its input's `id` column),
    one task each, and collect what they yield: how a job hands each task its own file,
    byte range or bucket when the tasks read and write their files themselves."""
    return spark.range(0, n, 1, numPartitions=max(1, n)).mapInArrow(fn, schema).collect()


def warm(spark, workloads: list[str], modules: tuple[str, ...]) -> int:
    """Start a Python worker per executor core and import `modules` and the workloads' checkers
    into it, once per session: the pyspark daemon keeps idle workers for the next job, so the
    first tasks do not pay the imports (one to three seconds a worker on this machine, both at
    once) on the clock of the work that grows with the input. Returns how many workers answered."""
    from sleuth.checker import WORKLOADS

    checkers = sorted(set(workloads) & set(WORKLOADS))
    n = spark.sparkContext.defaultParallelism
    pids = per_task(spark, n, _warm_task(modules, checkers), "pid LONG")
    return len({r["pid"] for r in pids})


def _warm_task(modules: tuple[str, ...], checkers: list[str]):
    """mapInArrow function: import `modules` and `checkers`, then give the worker's pid."""
    def task(batches):
        import importlib

        import pyarrow as pa

        for name in modules:
            importlib.import_module(name)
        from sleuth.checker import checker_for

        for c in checkers:
            checker_for(c)
        for b in batches:
            yield pa.RecordBatch.from_pydict({"pid": [os.getpid()] * b.num_rows})
    return task
