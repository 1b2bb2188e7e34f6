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
               .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
               # a partitioned write (rows by kind, a campaign's operations by run) keeps a file
               # open per partition value rather than first sorting every row by it
               .config("spark.sql.maxConcurrentOutputFileWriters", "64"))
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


def unreachable(spark, read: list[str], write: list[str] = ()) -> tuple[str, str, str] | None:
    """On a cluster, every executor must read the inputs and write the outputs at the same paths
    as the driver (storage every worker mounts): a task per core looks, so that a worker that
    cannot is bad input named before the jobs, not a stack trace from one of their tasks.
    Returns (host, path, "read" or "write") for the first path in `read` then `write` that some
    executor cannot reach, else None."""
    read, write = list(read), list(write)
    order = {p: i for i, p in enumerate(read + write)}

    def look(batches):
        import pyarrow as pa

        for _ in batches:
            pass
        bad = [(p, "read") for p in read if not os.access(p, os.R_OK)]
        bad += [(p, "write") for p in write if not os.access(p, os.W_OK)]
        host = socket.gethostname()
        yield pa.RecordBatch.from_pydict({"host": [host] * len(bad), "path": [p for p, _ in bad],
                                          "kind": [k for _, k in bad]},
                                         schema=pa.schema([("host", pa.string()), ("path", pa.string()),
                                                           ("kind", pa.string())]))

    rows = per_task(spark, spark.sparkContext.defaultParallelism, look, "host STRING, path STRING, kind STRING")
    if not rows:
        return None
    first = min(rows, key=lambda r: order[r["path"]])
    return first["host"], first["path"], first["kind"]


def unreachable_message(host: str, path: str, kind: str) -> str:
    """What a user is told when an executor cannot reach `path` (`unreachable`)."""
    what = "read" if kind == "read" else "write into"
    return (f"the Spark executor on {host} cannot {what} {path}: a cluster's workers must mount the "
            "inputs and outputs at the same path as this host (docs/spark.md, deploying)")


class Progress:
    """Progress of the Spark jobs a user can follow: while a step runs, a line through `say` when
    its stage's tasks have moved on and `every` seconds have passed since the last line
    ("pairing the history lines: stage 3, 12/40 tasks done"), from Spark's status tracker,
    polled by a daemon thread. Nothing is said of a step that ends within `every` seconds.

        with Progress(spark, say) as p:
            p.step("pairing the history lines")
            ...  # the step's Spark jobs
    """

    def __init__(self, spark, say, every: float = 10.0, poll: float = 1.0) -> None:
        import threading

        self.tracker = spark.sparkContext.statusTracker()
        self.say, self.every, self.poll = say, every, poll
        self.label: str | None = None
        self.last_said = 0.0
        self.last_line: str | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="sleuth-spark-progress", daemon=True)

    def __enter__(self) -> Progress:
        import time

        self.last_said = time.monotonic()
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=5)

    def step(self, label: str) -> None:
        import time

        self.label, self.last_line = label, None
        self.last_said = time.monotonic()

    def line(self) -> str | None:
        """The progress of the running stages, as a line (None when no stage runs)."""
        label = self.label
        if label is None:
            return None
        parts = []
        for sid in sorted(self.tracker.getActiveStageIds()):
            info = self.tracker.getStageInfo(sid)
            if info is not None and info.numTasks:
                parts.append(f"stage {sid}, {info.numCompletedTasks}/{info.numTasks} tasks done"
                             + (f" ({info.numActiveTasks} running)" if info.numActiveTasks else ""))
        return f"{label}: {'; '.join(parts)}" if parts else None

    def _run(self) -> None:
        import contextlib
        import time

        while not self.stop.wait(self.poll):
            if time.monotonic() - self.last_said < self.every:
                continue
            with contextlib.suppress(Exception):  # a session stopping under it: nothing to say
                line = self.line()
                if line is not None and line != self.last_line:
                    self.say(line)
                    self.last_line, self.last_said = line, time.monotonic()
