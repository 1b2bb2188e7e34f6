"""`sleuth check --spark` against `sleuth check`, on histories with known answers.

Every comparison is of the whole result: verdict, anomaly types, the models
ruled out and still possible, and every explanation (the Spark path judges
the transactions on cycles with the single-process code, fetched from
Parquet; the non-cycle anomalies come from per-key buckets on executors).

Spark costs seconds per check, so the many small histories of the
literature and of the brute-force tests are laid end to end into one history
each (keys and processes renamed apart, each after the last in real time: no
cycle can cross two of them), and that history's anomaly types are the union
of theirs; a few are also checked alone, against brute force. One embedded
SparkSession (local[2]) serves the module; the standalone test starts a
master and a worker and runs the CLI against them.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from live import missing, require_module

pytestmark = [pytest.mark.spark, pytest.mark.slow]
require_module("pyspark", "Spark (pyspark)")

from brute import serial_order_exists  # noqa: E402
from test_cycles_bruteforce import brute_txns, generate, to_history  # noqa: E402
from test_cycles_literature import CASES  # noqa: E402
from test_linearizable import random_history as register_history  # noqa: E402
from test_rw_register_options import random_history as rw_history  # noqa: E402

from sleuth.checker import WORKLOADS, list_append, rw_register  # noqa: E402
from sleuth.history.imports import load  # noqa: E402
from sleuth.history.jsonl import Event, HistoryError, read_jsonl, write_jsonl  # noqa: E402

SLEUTH = os.path.join(os.path.dirname(sys.executable), "sleuth")
FIELDS = ("valid", "anomaly-types", "not", "also-not", "possible", "also-found", "incomplete")


@pytest.fixture(scope="module")
def spark():
    from sleuth.spark.session import spark_session

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    s = spark_session("local[2]", "sleuth-test-history")
    yield s
    s.stop()


def spark_check(path, workload, **options):
    from sleuth.spark import history_check

    said = []
    kwargs = _checks(workload, options).kwargs()  # as `sleuth check --spark` hands them on
    return history_check.check(str(path), workload, kwargs, "local[2]", said.append).to_json(), said


def single_check(path, workload, **options):
    return WORKLOADS[workload].checker()(load(str(path), events=False), **_checks(workload, options).kwargs()).to_json()


def _checks(workload, options):
    from sleuth.checker.checks import Checks

    model = options.pop("model", WORKLOADS[workload].default_model)
    return Checks(checker=workload, model=model, options=options)


def assert_same(path, workload, **options):
    """The two checkers agree on everything but statistics; returns the result."""
    want = single_check(path, workload, **options)
    got, _ = spark_check(path, workload, **options)
    assert {f: got[f] for f in FIELDS} == {f: want[f] for f in FIELDS}
    assert got["anomalies"].keys() == want["anomalies"].keys()
    for name, examples in want["anomalies"].items():
        assert sorted(got["anomalies"][name], key=_explanation) == sorted(examples, key=_explanation), name
    return got


def _explanation(example: dict) -> str:
    return example["explanation"]


def end_to_end(histories: list[list[tuple]]) -> list[tuple]:
    """Txn shapes (process, start, end, type, micro-ops) of several histories,
    one after another, keys and processes renamed apart."""
    out, shift = [], 0
    for i, txns in enumerate(histories):
        for p, start, end, typ, mops in txns:
            out.append((p + 1000 * i, start + shift, end + shift, typ,
                        [[f, f"{i}-{k}", v] for f, k, v in mops]))
        shift += max(t[2] for t in txns) + 10
    return out


def write_txns(path, txns) -> str:
    write_jsonl(to_history(txns).events, path)
    return str(path)


def test_literature_anomalies(spark, tmp_path):
    for module, name in ((list_append, "list-append"), (rw_register, "rw-register")):
        cases = [txns for checker, txns, _, _ in CASES.values() if checker is module]
        path = write_txns(tmp_path / f"{name}.jsonl", end_to_end(cases))
        got = assert_same(path, name)
        wanted = {a for checker, _, a, _ in CASES.values() if checker is module}
        assert wanted <= set(got["anomaly-types"]) | set(got["also-found"])


def test_brute_force_histories(spark, tmp_path):
    """60 random histories end to end agree; 2 alone agree with brute force too."""
    rnd = random.Random(14)
    histories = [generate(rnd, final_read=rnd.random() < 0.8) for _ in range(60)]
    assert_same(write_txns(tmp_path / "all.jsonl", end_to_end(histories)), "list-append")
    for model in ("serializable", "strict-serializable"):
        assert_same(tmp_path / "all.jsonl", "list-append", model=model)
    verdicts = set()
    for i, txns in enumerate(histories[:2]):
        got = assert_same(write_txns(tmp_path / f"{i}.jsonl", txns), "list-append")
        if any(t[3] == "ok" for t in txns) and got["valid"] is not False and txns[-1][0] == 9:
            assert serial_order_exists(brute_txns(txns), "strict-serializable")
        verdicts.add(got["valid"])


def test_rw_register_histories(spark, tmp_path):
    rnd = random.Random(7)
    histories = [rw_history(rnd, rnd.randint(2, 6)) for _ in range(40)]
    path = write_txns(tmp_path / "rw.jsonl", end_to_end(histories))
    got = assert_same(path, "rw-register")
    assert got["valid"] is False  # random reads: some history has a cycle
    assert_same(path, "rw-register", linearizable_keys=True)


def test_sim_databases(spark, tmp_path):
    from sleuth.workloads.sim_list_append import write_sim

    seen = set()
    for db in ("serializable", "snapshot-isolation", "read-committed", "stale-reads"):
        path = tmp_path / f"{db}.jsonl"
        write_sim(str(path), db, 400, concurrency=6, keys=4, seed=3)
        got = assert_same(path, "list-append")
        seen.add(got["valid"])
    assert seen == {True, False}


def test_shards_check_as_one_file(spark, tmp_path):
    from sleuth.workloads.sim_list_append import write_sim

    whole = tmp_path / "whole.jsonl"
    write_sim(str(whole), "snapshot-isolation", 600, concurrency=6, keys=4, seed=5)
    lines = whole.read_bytes().splitlines(keepends=True)
    shards = tmp_path / "shards"
    shards.mkdir()
    cut = [0, len(lines) // 3, 2 * len(lines) // 3 + 1, len(lines)]
    for i in range(3):
        (shards / f"part-{i}.jsonl").write_bytes(b"".join(lines[cut[i]:cut[i + 1]]))
    got, _ = spark_check(shards, "list-append")
    want = single_check(whole, "list-append")
    assert {f: got[f] for f in FIELDS} == {f: want[f] for f in FIELDS}
    assert want["valid"] is False


def test_campaign_consolidation_parquet(spark, tmp_path):
    """One run's partition of the consolidation's Parquet checks as its history.jsonl does."""
    from sleuth.spark import consolidate
    from sleuth.workloads.sim_list_append import write_sim

    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    write_sim(str(run / "history.jsonl"), "read-committed", 400, concurrency=6, keys=4, seed=8)
    (run / "test.json").write_text(json.dumps({"workload": "list-append", "checks": {
        "checker": "list-append", "model": "strict-serializable"}}))
    from sleuth.spark.jobs import run_meta
    consolidate.consolidate(spark, run_meta([str(run)], "c"), str(tmp_path / "operations"))
    got, _ = spark_check(tmp_path / "operations" / "campaign=c" / "run=r1", "list-append")
    want = single_check(run / "history.jsonl", "list-append")
    assert {f: got[f] for f in FIELDS} == {f: want[f] for f in FIELDS}
    assert want["valid"] is False


def test_consolidation_partitions_keep_their_names_and_are_replaced(spark, tmp_path):
    """Run names are paths relative to the runs' parent: '/', ':', '=' and ' ' survive Spark's
    partitioned writer and reader (its own escaping), and consolidating the runs again replaces
    their partitions rather than adding to them: the manifest names one file per run, and the
    files it stopped naming are gone."""
    from sleuth.spark import consolidate, manifest
    from sleuth.spark.jobs import run_meta
    from sleuth.workloads.sim_list_append import write_sim

    names = ["list-append-sim/20261123T191930", "a:b=c d", "plain"]
    dirs = []
    for i, name in enumerate(names):
        run = tmp_path / "runs" / name
        run.mkdir(parents=True)
        write_sim(str(run / "history.jsonl"), "read-committed", 50 + 10 * i, concurrency=3, keys=2, seed=i)
        (run / "test.json").write_text(json.dumps({"workload": "list-append", "checks": {
            "checker": "list-append", "model": "strict-serializable"}}))
        dirs.append(str(run))
    want = {name: len(read_jsonl(os.path.join(d, "history.jsonl")).ops()) for name, d in zip(names, dirs)}
    out = str(tmp_path / "operations")
    for _ in range(2):  # the second time replaces the partitions
        runs = consolidate.consolidate(spark, run_meta(dirs, "night/1"), out)
        assert sorted(runs["run"]) == sorted(names) and runs["readable"].all()
        got = consolidate.read_operations(out).select(["campaign", "run"]).to_pandas()
        assert set(got["campaign"]) == {"night/1"}
        assert got["run"].value_counts().to_dict() == want
        named = consolidate.operation_files(out)
        on_disk = sorted(str(p) for p in Path(out).rglob("part-*.parquet") if manifest.MANIFEST not in p.parts)
        assert len(named) == len(names) and sorted(u[len("file://"):] for u in named) == on_disk
        read = consolidate.operations(spark, out, run_meta(dirs, "night/1")).groupBy("run").count().collect()
        assert {r["run"]: r["count"] for r in read} == want


def _register_events(rnd, keyed: bool, n: int) -> list[Event]:
    """n random register histories end to end (keys and processes renamed apart)."""
    out: list[Event] = []
    shift = 0
    for i in range(n):
        events, _ = register_history(rnd, keyed, None)
        for e in events:
            value = e.value
            if keyed and isinstance(value, list):
                value = [value[0] + 10 * i, value[1]]
            out.append(Event(len(out), e.time + shift, e.type, e.process + 1000 * i, e.f, value))
        shift = out[-1].time + 10
    return out


def test_registers(spark, tmp_path):
    rnd = random.Random(3)
    path = tmp_path / "register.jsonl"
    write_jsonl(_register_events(rnd, True, 40), path)
    got = assert_same(path, "register")
    assert got["valid"] is False
    # the buckets' counts add up to the single process's
    single = single_check(path, "register")["stats"]
    assert got["stats"]["anomaly-counts"] == single["anomaly-counts"] and single["anomaly-counts"]["nonlinearizable"] > 0
    assert got["stats"]["anomaly-units"] == single["anomaly-units"] == {"nonlinearizable": "key"}
    cas = tmp_path / "cas.jsonl"
    write_jsonl(_register_events(rnd, False, 1), cas)
    assert_same(cas, "cas-register")


def test_bad_input_is_named_as_sleuth_check_names_it(spark, tmp_path):
    path = tmp_path / "bad.jsonl"
    write_txns(path, generate(random.Random(1)))
    lines = path.read_bytes().splitlines(keepends=True)
    lines[3] = b'{"index": 3, "type": "ok"\n'
    path.write_bytes(b"".join(lines))
    with pytest.raises(HistoryError) as spark_error:
        spark_check(path, "list-append")
    with pytest.raises(HistoryError) as single_error:
        single_check(path, "list-append")
    assert str(spark_error.value) == str(single_error.value)
    assert spark_error.value.line == 4
    # a value appended twice: found by a key bucket on an executor, named as sleuth check names it
    twice = [(0, 0, 1, "ok", [["append", "x", 1]]), (1, 2, 3, "ok", [["append", "y", 1], ["append", "x", 1]])]
    write_txns(tmp_path / "twice.jsonl", twice)
    with pytest.raises(HistoryError) as spark_error:
        spark_check(tmp_path / "twice.jsonl", "list-append")
    with pytest.raises(HistoryError) as single_error:
        single_check(tmp_path / "twice.jsonl", "list-append")
    assert str(spark_error.value) == str(single_error.value)
    # a completion with no invoke: the per-process rules, on Spark
    events = [Event(0, 0, "invoke", 0, "txn", [["r", "x", None]]), Event(1, 1, "ok", 1, "txn", [["r", "x", []]])]
    write_jsonl(events, tmp_path / "orphan.jsonl")
    with pytest.raises(HistoryError, match=r"orphan.jsonl:2: ok for process 1 with no invoke before it"):
        spark_check(tmp_path / "orphan.jsonl", "list-append")


def _jvm_log_level(spark) -> str:
    return spark.sparkContext._jvm.org.apache.logging.log4j.LogManager.getRootLogger().getLevel().toString()


def test_the_sessions_log_level_is_back_after_a_check(spark, tmp_path):
    """A check silences the JVM's log while it runs; a campaign's session goes on after it
    (jobs.judge_large), so its level is back afterwards, after bad input too."""
    from sleuth.spark.session import LOG_LEVEL

    path = write_txns(tmp_path / "h.jsonl", generate(random.Random(2)))
    spark_check(path, "list-append")
    assert _jvm_log_level(spark) == LOG_LEVEL
    (tmp_path / "bad.jsonl").write_bytes(b'{"index": 0, "type": "ok"}\n')
    with pytest.raises(HistoryError):
        spark_check(tmp_path / "bad.jsonl", "list-append")
    assert _jvm_log_level(spark) == LOG_LEVEL


def test_cli_bad_input_is_one_line_and_254(tmp_path):
    p = subprocess.run([SLEUTH, "check", "--spark", str(tmp_path / "missing.jsonl"), "-w", "list-append"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 254
    assert p.stderr.strip().splitlines() == [f"sleuth: error: {tmp_path / 'missing.jsonl'}: No such file or directory"]


def test_cli_stderr_holds_sleuths_lines_not_the_jvms_chatter(tmp_path):
    """The JVM logs errors only, from its start (sleuth/spark/log4j2.properties): no word of its
    log4j profile, default level or host name around the check's progress lines. The one line
    left is java's own about the incubator module Spark loads, which no log setting reaches."""
    path = write_txns(tmp_path / "h.jsonl", generate(random.Random(4)))
    p = subprocess.run([SLEUTH, "check", path, "-w", "list-append", "--spark", "local[1]"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 1), p.stderr[-3000:]
    other = [x for x in p.stderr.splitlines()
             if x.strip() and not x.startswith("sleuth: ") and not x.startswith("WARNING: Using incubator modules")]
    assert other == [], p.stderr[-3000:]
    assert any("Python workers ready" in x for x in p.stderr.splitlines())


def test_cli_ctrl_c_during_the_jobs_is_an_interrupt(tmp_path):
    """Ctrl-C (SIGINT to the process group) while the Spark jobs run: one line, "interrupted",
    exit 2 as for any interrupted check; not pyspark's tracebacks and a 255 "sleuth failed"."""
    import signal
    import time

    from sleuth.workloads.sim_list_append import write_sim

    path = tmp_path / "h.jsonl"
    write_sim(str(path), "serializable", 300_000, seed=1)  # pairing alone outlasts the signal's wait
    p = subprocess.Popen([SLEUTH, "check", str(path), "-w", "list-append", "--spark", "local[2]", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen = []
    for line in p.stderr:  # until the jobs start: the session and its workers are up
        seen.append(line)
        if "Python workers ready" in line:
            break
    time.sleep(1)
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=120)
    lines = [x for x in err.splitlines() if x.strip() and "WARN" not in x]
    assert p.returncode == 2, "".join(seen) + err[-3000:]
    record, = [json.loads(x) for x in out.splitlines()]  # --json: the file's one object, not judged
    assert (record["file"], record["valid"], record["error"]) == (str(path), "unknown", "interrupted: not judged")
    assert lines[-1] == "sleuth: error: interrupted"
    assert not any("Traceback" in x or "Error" in x for x in lines), lines


def test_paired_operations_are_reused_until_the_input_changes(spark, tmp_path):
    path = write_txns(tmp_path / "h.jsonl", generate(random.Random(2)))
    _, said = spark_check(path, "list-append")
    assert any(s.startswith("paired") for s in said)
    _, said = spark_check(path, "list-append")
    assert any(s.startswith("reusing") for s in said)
    write_txns(path, generate(random.Random(4)))
    os.utime(path, ns=(1, 1))  # even if the size happened to match
    got, said = spark_check(path, "list-append")
    assert any(s.startswith("paired") for s in said)
    assert got["valid"] == single_check(path, "list-append")["valid"]


def test_a_history_on_a_read_only_mount_is_cached_under_sleuth_home(spark, tmp_path, monkeypatch):
    """CI artifacts are often mounted read-only: the paired operations cannot go beside the
    input, so they go under $SLEUTH_HOME/spark-cache/, and are reused from there."""
    ro = tmp_path / "artifacts"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(ro)], capture_output=True).returncode:
        missing("a tmpfs mount", "needs root")
    try:
        path = write_txns(ro / "h.jsonl", generate(random.Random(2)))
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        monkeypatch.setenv("SLEUTH_HOME", str(tmp_path / "home"))
        got, said = spark_check(path, "list-append")
        assert got["valid"] == single_check(path, "list-append")["valid"]
        cached = [s for s in said if s.startswith("paired")]
        assert cached and str(tmp_path / "home" / "spark-cache") in cached[0], said
        _, said = spark_check(path, "list-append")
        assert any(s.startswith("reusing") for s in said), said
        assert os.listdir(ro) == ["h.jsonl"]
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)


def test_standalone_master_gives_the_same_result(tmp_path):
    from sleuth.spark import standalone
    from sleuth.workloads.sim_list_append import write_sim

    path = tmp_path / "si.jsonl"
    write_sim(str(path), "stale-reads", 500, concurrency=6, keys=4, seed=9)
    want = single_check(path, "list-append")
    state = str(tmp_path / "spark")
    master = standalone.up(state, standalone.free_port(), cores=2, say=lambda s: None)
    try:
        p = subprocess.run([SLEUTH, "check", str(path), "-w", "list-append", "--spark", master, "--json"],
                           capture_output=True, text=True, timeout=600)
    finally:
        standalone.down(state, say=lambda s: None)
    assert p.returncode == 1, p.stderr[-3000:]
    got = orjson.loads(p.stdout)
    assert {f: got[f] for f in FIELDS} == {f: want[f] for f in FIELDS}
    assert json.loads(p.stdout)["file"] == str(path)


def _paired(spark, path) -> list[tuple]:
    """The operations `check --spark` paired, as comparable tuples in id order."""
    import pyarrow.parquet as pq

    from sleuth.spark.history_ops import load_ops

    ops_dir, meta = load_ops(spark, str(path))
    t = pq.read_table(ops_dir).to_pylist()
    return meta, sorted((r["id"], r["process"], r["f"], r["type"], orjson.loads(r["value"]), r["invoke_pos"],
                         r["complete_pos"], r["invoke_time"], r["complete_time"], r["node"], r["ts"]) for r in t)


def _pairer(path) -> list[tuple]:
    from sleuth.history.jsonl import read_jsonl

    h = read_jsonl(str(path))
    return sorted((op.id, op.process, op.f, op.type, op.value, op.invoke_pos, op.complete_pos, op.invoke_time,
                   op.complete_time, op.node, op.ts) for op in h.ops())


def test_pairing_across_splits_and_shards_equals_the_pairer(spark, tmp_path, monkeypatch):
    """A 3 MB file is read in several splits, and 40 shards make 40 more segments: every operation
    open at a segment's end is paired across it, with the ids, values and times of sleuth's Pairer;
    also when the driver pairs the segments' ends a few processes at a time."""
    from sleuth.spark import history_pair
    from sleuth.spark.history_ops import cache_dir
    from sleuth.workloads.sim_list_append import write_sim

    whole = tmp_path / "whole.jsonl"
    write_sim(str(whole), "read-committed", 9000, concurrency=12, keys=6, seed=9)
    assert whole.stat().st_size > 2_500_000  # more than two 1 MiB splits
    want = _pairer(whole)
    meta, got = _paired(spark, whole)
    assert got == want and meta["events"] == len(whole.read_bytes().splitlines())
    lines = whole.read_bytes().splitlines(keepends=True)
    shards = tmp_path / "shards"
    shards.mkdir()
    step = len(lines) // 40 + 1
    for i in range(0, len(lines), step):
        (shards / f"part-{i:06d}.jsonl").write_bytes(b"".join(lines[i:i + step]))
    assert _paired(spark, shards)[1] == want
    shutil.rmtree(cache_dir(str(shards)))
    monkeypatch.setattr(history_pair, "ENDS_CHUNK", 50)  # some 1,500 head and tail rows: 32 chunks
    assert _paired(spark, shards)[1] == want


@pytest.mark.parametrize("first, second, problem", [
    ([Event(0, 0, "invoke", 0, "txn", [["r", "x", None]]), Event(1, 1, "info", 0, "txn", None)],
     [Event(2, 2, "invoke", 0, "txn", [["r", "x", None]])],
     r"process 0 is used again after its info at line 2"),
    ([Event(0, 0, "invoke", 0, "txn", [["r", "x", None]])],
     [Event(1, 1, "invoke", 0, "txn", [["r", "x", None]])],
     r"process 0 invokes while its operation from line 1 is still in flight"),
    ([Event(0, 0, "invoke", 0, "txn", [["r", "x", None]])],
     [Event(1, 1, "ok", 0, "read", [["r", "x", []]])],
     r"ok of f='read' completes an invoke of f='txn' \(line 1\)"),
    ([Event(0, 0, "invoke", 0, "txn", [["r", "x", None]]), Event(1, 1, "ok", 0, "txn", [["r", "x", []]])],
     [Event(2, 2, "fail", 0, "txn", None)],
     r"fail for process 0 with no invoke before it"),
])
@pytest.mark.parametrize("chunk", [1 << 20, 1])
def test_a_process_breaking_its_rules_across_shards_is_named(spark, tmp_path, monkeypatch, first, second, problem,
                                                            chunk):
    from sleuth.spark import history_pair

    monkeypatch.setattr(history_pair, "ENDS_CHUNK", chunk)
    d = tmp_path / "shards"
    d.mkdir()
    write_jsonl(first, d / "a.jsonl")
    write_jsonl(second, d / "b.jsonl")
    with pytest.raises(HistoryError, match=r"b\.jsonl:1: " + problem):
        _paired(spark, d)
