"""`sleuth check --spark`: one history larger than a machine, judged on Spark.

The work that grows with the history runs on executors over Parquet
(`history_ops`: reading, validating, pairing; `history_keys`: per-key
linearizability, version orders, non-cycle anomalies, ww/wr/rw edges). The
driver then holds only integer arrays: per operation its type, process and
positions, and the dependency edges as (src, dst, kind) op ids.

For list-append and rw-register, the driver adds process order and real-time
order in linear size (`checker.txn.process_edges`, `checker.graph.
barrier_realtime`, exactly as `checker.txn.analyze` does) and finds the
strongly connected components with scipy. Only the operations that touch a
key of some transaction in a non-trivial component are fetched (from the
Parquet, by id, micro-ops cut to those keys) and judged by the single-process
checker itself (`Analysis` + `txn.analyze`), with the non-cycle anomalies the
executors found. Why that sub-history has the same cycles:

- every transaction on a cycle is in a non-trivial component, and every key
  it touches is fetched with all its operations, so every data edge between
  two such transactions is rebuilt, from the same reads and writes;
- between two transactions of one component, every transaction of the same
  process in between is in that component too (it is reachable from the
  first and reaches the second), so process edges inside a component are
  unchanged; real-time order is a relation on positions, unchanged;
- every edge of the sub-history is an edge of the whole history, or a
  process edge that shortcuts a chain of them, so it has no cycle the whole
  history lacks.

So its components on cycles are the whole history's, with the same edges in
the same relative order, and the cycle search (`checker.cycles`) finds the
same cycles and explains them with the same words.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import signal
import threading
import time
from typing import Any

import numpy as np
import orjson

from sleuth.base.words import noun, plural
from sleuth.checker import graph as g
from sleuth.checker import models
from sleuth.checker.result import UNKNOWN, Result, merge_valid, nothing_to_judge
from sleuth.history.jsonl import HistoryError
from sleuth.spark import history_keys as hk
from sleuth.spark.history_ops import (
    cache_dir,
    committed,
    imported,
    input_files,
    load_ops,
    native,
    ops_dataset,
    ops_files,
    remove,
    uri,
)
from sleuth.spark.manifest import MANIFEST_SCHEMA, commit, dataset, manifest_uri, token
from sleuth.spark.session import (
    LOG_LEVEL,
    Progress,
    spark_session,
    unreachable,
    unreachable_message,
    warm,
)

DEFAULT_MASTER = "local[*]"
# what the tasks of a check import (session.warm: started with the session, not in the
# first job, where two workers importing at once cost the second core most of its gain)
WORKER_MODULES = ("pyarrow.parquet", "sleuth.spark.history_pair", "sleuth.spark.history_keys")
MAX_EXAMPLES = 1000  # per non-cycle anomaly type kept in the result; counts are exact


def check(path: str, workload: str, options: dict[str, Any], master: str | None = None,
          say=lambda s: None) -> Result:
    """Judge the history at `path` (file, directory of shards, consolidation Parquet). A file
    in another format `sleuth check` reads is judged from its JSON Lines copy (`imported`):
    the same events, so the same verdict; an error found in the copy names the input's line."""
    if not native(path):
        copy, history = imported(path, workload)  # bad input is named before a JVM starts
        say(f"{path} read by sleuth check's importer into {copy} (JSON Lines: the lines that "
            "explanations name are that file's)")
        try:
            return check(copy, workload, options, master, say)
        except HistoryError as e:
            if e.source != copy:
                raise
            raise HistoryError(path, None if e.line is None else history.line_of(e.line - 1), e.problem) from None
    input_files(path)  # a missing input is bad input before a JVM starts
    if not (master or DEFAULT_MASTER).startswith("local"):
        path = os.path.abspath(path)  # the executors' working directory is not ours
    t0 = time.perf_counter()
    told = say

    def say(s: str) -> None:  # each step with the seconds since the check began
        told(f"{s} ({time.perf_counter() - t0:.1f} s)")

    spark = spark_session(master or DEFAULT_MASTER, "sleuth-check")
    with _jvm_log_off(spark), _interrupts(spark), Progress(spark, say) as progress:
        workers = warm(spark, [workload], WORKER_MODULES)
        say(f"Spark session on {master or DEFAULT_MASTER}, {workers} Python workers ready")
        if not spark.sparkContext.master.startswith("local"):
            _readable_on_executors(spark, path)
        progress.step("reading, decoding and pairing the history")
        ops_dir, meta = load_ops(spark, path, say)
        progress.step(f"judging {meta['ops']} operations in {hk.buckets_for(meta['ops'])} key buckets "
                      "(a task per bucket)")
        judged = _judge(spark, path, ops_dir, meta, workload, options, say)
        out = _read(judged)
        errors = out[out["tag"] == hk.ERROR]
        if len(errors):
            first = errors.sort_values("a").iloc[0]
            raise HistoryError(path, hk.optional_int(first["a"]), first["text"])
        if workload in hk.REGISTERS:
            return _merge_registers(out[out["tag"] == hk.REGISTER]["text"].tolist(), meta["ops"])
        progress.step("fetching the transactions in strongly connected components")
        return _cycles(spark, path, ops_dir, meta, judged, out, workload, options, say)


def _readable_on_executors(spark, path: str) -> None:
    """On a cluster, the input must be readable and its cache directory writable at the same
    path on every executor (`session.unreachable`): else bad input, named here."""
    found = unreachable(spark, read=input_files(path), write=[cache_dir(path)])
    if found is not None:
        raise HistoryError(path, None, unreachable_message(*found))


@contextlib.contextmanager
def _jvm_log_off(spark):
    """The JVM's log off while the check runs: its errors reach the user as the command's one
    line, and the JVM's own log of them (a task failed, a cancelled job's workers gone) would
    add Java stack traces around it. Back at the sessions' LOG_LEVEL when the check is over,
    since a campaign's session goes on; not after an interrupt, as the command leaves while
    its cancelled tasks are still logging their ends."""
    spark.sparkContext.setLogLevel("OFF")
    interrupted = False
    try:
        yield
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        if not interrupted:
            spark.sparkContext.setLogLevel(LOG_LEVEL)


@contextlib.contextmanager
def _interrupts(spark):
    """A Ctrl-C during the Spark jobs is an interrupt, not a failure. pyspark's own SIGINT handler
    cancels the jobs from inside the signal handler, a second call on the Py4J connection the
    waiting call is using: the waiting call then fails with a Py4J error (which `sleuth check`
    reported as its own failure, 255) and both print tracebacks. This handler only notes the
    signal and raises KeyboardInterrupt; the jobs are cancelled after the waiting call has
    unwound, and whatever fails on the way out becomes the KeyboardInterrupt it stands for
    (the command's one line, "interrupted", exit 2)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    seen = threading.Event()
    previous = signal.getsignal(signal.SIGINT)

    def on_interrupt(signum, frame):
        seen.set()
        logging.getLogger("py4j").propagate = False  # its complaints about the broken connection
        raise KeyboardInterrupt

    def quiet(record) -> bool:  # Py4J logs the interrupted call's traceback on the root logger
        return not seen.is_set()

    signal.signal(signal.SIGINT, on_interrupt)
    logging.getLogger().addFilter(quiet)
    try:
        yield
    except BaseException as e:
        if not seen.is_set():
            raise
        with contextlib.suppress(Exception):
            spark.sparkContext.cancelAllJobs()
        raise KeyboardInterrupt from e
    finally:
        signal.signal(signal.SIGINT, previous)
        logging.getLogger().removeFilter(quiet)


def _judge(spark, path: str, ops_dir: str, meta: dict, workload: str, options: dict, say) -> str:
    """The executors' per-bucket answers, as Parquet in the cache (reused while valid)."""
    n = hk.buckets_for(meta["ops"])
    per_key = {k: v for k, v in options.items() if k not in ("model", "cycle_search_timeout")
               or workload in hk.REGISTERS}  # the driver's concern for transactions
    digest = hashlib.sha1(json.dumps([workload, sorted(per_key.items()), n, meta["inputs"]],
                                     default=repr).encode()).hexdigest()[:12]
    out_dir = os.path.join(cache_dir(path), f"judged-{workload}-{digest}")
    if committed(manifest_uri(out_dir)):
        return out_dir
    remove(out_dir)  # what an attempt at it left: no manifest names those files
    # each operation to the buckets of its keys, Spark's shuffle to a task per bucket (a hash
    # partitioning: now and then two buckets share a task), which judges it and writes its
    # answers as a file of its own; Spark's writer commits the files' manifest (history_keys.split,
    # judged_buckets; manifest.py)
    files = ops_files(ops_dir)
    named = (spark.range(0, len(files), 1, numPartitions=max(1, len(files)))
             .mapInArrow(hk.split_files(workload, n, files), hk.PACKED_SCHEMA)
             .repartition(n, "bucket")
             .mapInArrow(hk.judged_buckets(workload, path, meta["start_time"], options, uri(out_dir), token()),
                         MANIFEST_SCHEMA))
    commit(named, out_dir, [])
    say(f"judged {meta['ops']} operations in {n} key buckets")
    return out_dir


def _read(judged: str):
    """Everything but the edges, as pandas (edges are read as arrays by `_edges`)."""
    import pyarrow.dataset as ds

    scan = dataset(judged, hk.OUT_SCHEMA).scanner(columns=["tag", "a", "text"], filter=ds.field("tag") != hk.EDGE,
                                                  batch_readahead=1, fragment_readahead=1)
    return scan.to_table().to_pandas()


def _edges(judged: str, node: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The dependency edges between nodes, as node numbers (int32), a Parquet
    batch at a time (edges with an end that is no node are dropped, as
    `txn.Graph` drops them)."""
    import pyarrow.dataset as ds

    src, dst = [], []
    for b in dataset(judged, hk.OUT_SCHEMA).to_batches(columns=["a", "b"], filter=ds.field("tag") == hk.EDGE,
                                                       batch_readahead=1, fragment_readahead=1):
        a, d = b["a"].to_numpy(), b["b"].to_numpy()
        keep = node[a] & node[d]
        src.append(index[a[keep]])
        dst.append(index[d[keep]])
    empty = [np.zeros(0, np.int32)]
    return np.concatenate(src or empty), np.concatenate(dst or empty)


def _merge_registers(parts: list[str], n_ops: int) -> Result:
    """Merge per-bucket register results as `check_registers` merges keys."""
    from sleuth.checker.linearizable import MAX_EXAMPLES as REG_EXAMPLES
    from sleuth.checker.linearizable import keys_note

    valid: bool | str = True
    examples: list[tuple[int, dict]] = []
    notes: list[str] = []
    stats: dict[str, int] = {}
    keys = judged = 0
    for text in parts:
        p = orjson.loads(text)
        r, first = p["result"], p["first"]
        keys += p["keys"]
        st = r["stats"]
        judged += st["keys-judged"]
        part_valid = False if st["nonlinearizable-keys"] else UNKNOWN if st["unknown-keys"] else True
        valid = merge_valid(valid, part_valid)
        for ex in r["anomalies"].get(models.NONLINEARIZABLE, []):
            examples.append((first.get(orjson.dumps(ex.get("key")).decode(), 0), ex))
        notes += [x for x in r["notes"] if "search stopped after" in x]
        for k, v in st.items():
            if isinstance(v, dict):  # anomaly-counts (the sum of the keys, below) and -units
                stats.setdefault(k, v)
            else:
                stats[k] = stats.get(k, 0) + v
    examples = [ex for _, ex in sorted(examples, key=lambda x: x[0])][:REG_EXAMPLES]
    bad = stats.get("nonlinearizable-keys", 0)
    stats["anomaly-counts"] = {models.NONLINEARIZABLE: bad} if bad else {}
    if not judged:
        valid = UNKNOWN
    note = keys_note(keys, judged, n_ops)
    if note:
        notes.append(note)
    if bad > len(examples):
        notes.append(f"{plural(bad, 'key')} {noun(bad, 'is', 'are')} not linearizable; the first "
                     f"{len(examples)} {noun(len(examples), 'is', 'are')} explained")
    return Result(valid=valid, model="linearizable", anomaly_types=[models.NONLINEARIZABLE] if examples else [],
                  anomalies={models.NONLINEARIZABLE: examples} if examples else {}, stats=stats, notes=notes)


def _ops_arrays(ops_dir: str, n: int) -> dict[str, np.ndarray]:
    """Per operation, in id order (ids are 0..n-1): ok and info flags, process,
    invoke and completion positions; filled a Parquet batch at a time, so the
    driver never holds the table besides the arrays."""
    import pyarrow.compute as pc

    out = {"ok": np.zeros(n, bool), "info": np.zeros(n, bool), "process": np.zeros(n, np.int64),
           "invoke": np.zeros(n, np.int64), "complete": np.zeros(n, np.int64)}
    columns = ["id", "type", "process", "invoke_pos", "complete_pos"]
    for b in ops_dataset(ops_dir).to_batches(columns=columns, batch_readahead=1,
                                                              fragment_readahead=1):
        i = b["id"].to_numpy()
        out["ok"][i] = pc.equal(b["type"], "ok").to_numpy(zero_copy_only=False)
        out["info"][i] = pc.equal(b["type"], "info").to_numpy(zero_copy_only=False)
        out["process"][i] = b["process"].to_numpy()
        out["invoke"][i] = b["invoke_pos"].to_numpy()
        out["complete"][i] = pc.fill_null(b["complete_pos"], g.INF_TIME).to_numpy()
    return out


def _non_cycle(out) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for text in out[out["tag"] == hk.ANOMALIES]["text"].tolist():
        for name, examples in orjson.loads(text).items():
            found.setdefault(name, []).extend(examples)
    for examples in found.values():
        examples.sort(key=_example_line)
    return found


def _example_line(ex: dict) -> int:
    op = ex.get("op") or (ex.get("ops") or [{}])[0]
    return op.get("line") or 0


def _described(example: dict) -> list[dict]:
    """The transactions an example describes (`txn.describe_txn` dicts: name, line, value)."""
    out = []
    for v in example.values():
        for d in v if isinstance(v, list) else [v]:
            if isinstance(d, dict) and "name" in d and "line" in d and "value" in d:
                out.append(d)
    return out


def _full_values(spark, ops_dir: str, found: dict[str, list[dict]]) -> None:
    """Examples describe transactions cut to one bucket's keys: put back their whole values."""
    import pyarrow.dataset as ds

    described = [d for examples in found.values() for ex in examples for d in _described(ex)]
    ids = sorted({int(d["name"][1:]) for d in described if "name" in d})
    if not ids:
        return
    t = ops_dataset(ops_dir).to_table(columns=["id", "value"], filter=ds.field("id").isin(ids))
    values = dict(zip(t["id"].to_pylist(), t["value"].to_pylist(), strict=True))
    for d in described:
        v = values.get(int(d["name"][1:]))
        if v is not None:
            d["value"] = orjson.loads(v)


def _on_cycles(ops: dict[str, np.ndarray], observed: np.ndarray, judged: str) -> tuple[np.ndarray, int, int]:
    """Op ids of the transactions in non-trivial strongly connected components,
    the number of transactions, and of dependency edges. Nodes are ok
    transactions and observed info ones, as `txn.analyze` has them; process
    and real-time order are added as it adds them. int32 node numbers and
    early frees keep the driver small: this is its largest moment."""
    from sleuth.checker import txn

    node = ops["ok"].copy()
    node[observed] |= ops["info"][observed]
    n = int(node.sum())
    index = (np.cumsum(node) - 1).astype(np.int32)
    src, dst = _edges(judged, node, index)  # kinds matter only on cycles: the sub-history has them
    del index
    ps, pd = (x.astype(np.int32) for x in txn.process_edges(ops.pop("process")[node]))
    complete = np.where(ops["info"], g.INF_TIME, ops.pop("complete"))[node]
    bs, bd, nb = g.barrier_realtime(ops.pop("invoke")[node], complete, np.int32)
    del complete
    edges = len(src)
    s = np.concatenate([src, ps, bs])
    del src, ps, bs
    d = np.concatenate([dst, pd, bd])
    del dst, pd, bd
    matrix = g.adjacency(n + nb, s, d)  # g.scc_labels, with the edge arrays freed before the search
    del s, d
    labels = g.strong_labels(matrix)
    del matrix
    lab = labels[:n]
    on_cycles = np.flatnonzero(np.bincount(lab, minlength=1)[lab] > 1) if n else np.zeros(0, np.int64)
    return np.flatnonzero(node)[on_cycles], n, edges


def _cycles(spark, path: str, ops_dir: str, meta: dict, judged: str, out, workload: str,
            options: dict, say) -> Result:
    from sleuth.checker import txn

    ops = _ops_arrays(ops_dir, meta["ops"])
    observed = out[out["tag"] == hk.OBSERVED]["a"].to_numpy().astype(np.int64)
    ids, n, edges = _on_cycles(ops, observed, judged)
    say(f"{n} transactions, {edges} dependency edges; {len(ids)} in strongly connected components")
    non_cycle = _non_cycle(out)
    counts = {name: len(v) for name, v in non_cycle.items()}
    non_cycle = {name: v[:MAX_EXAMPLES] for name, v in non_cycle.items()}
    _full_values(spark, ops_dir, non_cycle)
    sub = _sub_history(spark, path, ops_dir, meta, workload, ids)
    model = options.get("model", "strict-serializable")
    if workload == "list-append":
        from sleuth.checker.labels import ListAppendLabels as Labels
        from sleuth.checker.list_append import Analysis

        an = Analysis(sub)
    else:
        from sleuth.checker.labels import RwRegisterLabels as Labels
        from sleuth.checker.rw_register import Analysis

        an = Analysis(sub, **{x: options[x] for x in ("linearizable_keys", "sequential_keys", "wfr_keys")
                              if x in options})
    r = txn.analyze(sub, an.graph, an.explain, non_cycle, model, {},
                    cycle_search_timeout=options.get("cycle_search_timeout"), edge_labels=Labels(an),
                    unseen=getattr(an, "unseen", None))  # list-append's: the sub-history holds every read of its keys
    # the verdict of `txn.analyze`, over the whole history rather than the sub-history
    notes = [x for x in r.notes if not x.startswith(nothing_to_judge(""))]
    if r.anomaly_types:
        valid: bool | str = False
    elif not ops["ok"].any():
        valid = UNKNOWN
        notes.append(nothing_to_judge("no transaction completed ok" if meta["ops"]
                                      else "the history has no transactions"))
    elif any(models.forbids(r.model, t) for t in r.incomplete):
        valid = UNKNOWN
    else:
        valid = True
    r.valid, r.notes = valid, notes
    r.stats = {**r.stats, "ops": meta["ops"], "txns": n, "edges": edges,
               "anomaly-counts": {**r.stats.get("anomaly-counts", {}), **counts},
               "sub-history-ops": len(sub.ops()), "spark": True}
    return r


def _sub_history(spark, path: str, ops_dir: str, meta: dict, workload: str, ids: np.ndarray) -> hk.Part:
    """Every operation touching a key of the transactions `ids`, cut to those keys."""
    import pyarrow.dataset as ds

    empty = hk.Part(events=[], source=path, _ops=[], first_time=meta["start_time"])
    if not len(ids):
        return empty
    t = ops_dataset(ops_dir).to_table(columns=["value"],
                                                       filter=ds.field("id").isin(ids.tolist()))
    keys = sorted({orjson.dumps(m[1]).decode() for v in t["value"].to_pylist() for m in orjson.loads(v)})
    rows = spark.read.parquet(*ops_files(ops_dir)).mapInArrow(hk.restrict(keys), hk.SPLIT_SCHEMA).toPandas()
    return hk.part_history(rows, path, meta["start_time"]) if len(rows) else empty
