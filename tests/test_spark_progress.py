"""What a user follows while the Spark jobs run (session.Progress), and the look that names an input
the executors cannot reach (session.unreachable) before any job reads it (issue 46)."""

from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace

import pytest
from live import require_module


class Tracker:
    """Spark's status tracker as Progress asks it: active stage ids and each stage's task counts."""

    def __init__(self, stages: dict[int, tuple[int, int, int]]) -> None:
        self.stages = stages  # id -> (tasks, completed, running)

    def getActiveStageIds(self):  # noqa: N802 - pyspark's name
        return list(self.stages)

    def getStageInfo(self, sid):  # noqa: N802
        tasks, done, running = self.stages[sid]
        return SimpleNamespace(numTasks=tasks, numCompletedTasks=done, numActiveTasks=running)


def fake_spark(tracker: Tracker):
    return SimpleNamespace(sparkContext=SimpleNamespace(statusTracker=lambda: tracker))


def test_a_line_names_the_step_and_each_running_stages_tasks():
    from sleuth.spark.session import Progress

    tracker = Tracker({7: (64, 12, 2), 5: (8, 8, 0)})
    p = Progress(fake_spark(tracker), print)
    assert p.line() is None  # no step yet: nothing to say
    p.step("judging 1000 operations in 64 key buckets")
    assert p.line() == ("judging 1000 operations in 64 key buckets: stage 5, 8/8 tasks done; "
                        "stage 7, 12/64 tasks done (2 running)")
    tracker.stages.clear()
    assert p.line() is None  # between jobs: no stage runs


def test_the_thread_says_each_change_once_and_stops():
    from sleuth.spark.session import Progress

    tracker = Tracker({3: (40, 0, 2)})
    said: list[str] = []
    changed = threading.Event()

    def say(s: str) -> None:
        said.append(s)
        changed.set()

    def wait_for(n: int) -> None:  # bounded: the thread polls every 10 ms
        deadline = time.monotonic() + 10
        while len(said) < n and time.monotonic() < deadline:
            changed.wait(0.05)
            changed.clear()

    with Progress(fake_spark(tracker), say, every=0, poll=0.01) as p:
        p.step("pairing")
        wait_for(1)
        time.sleep(0.1)  # more polls of an unchanged stage: no second line
        assert said == ["pairing: stage 3, 0/40 tasks done (2 running)"]
        tracker.stages[3] = (40, 40, 0)
        wait_for(2)
    assert said == ["pairing: stage 3, 0/40 tasks done (2 running)", "pairing: stage 3, 40/40 tasks done"]
    assert not p.thread.is_alive()


def test_a_step_quicker_than_every_says_nothing():
    from sleuth.spark.session import Progress

    said: list[str] = []
    with Progress(fake_spark(Tracker({1: (4, 1, 1)})), said.append, every=3600, poll=0.01) as p:
        p.step("consolidating")
        time.sleep(0.1)
    assert said == []


@pytest.mark.spark
@pytest.mark.slow
def test_unreachable_names_the_first_path_an_executor_lacks(tmp_path):
    """A path missing where the executors run is one they cannot reach (a directory not mounted
    in a worker's container): the first such input, then the first output, in the order given."""
    require_module("pyspark", "Spark (pyspark)")
    from sleuth.spark.session import spark_session, unreachable, unreachable_message

    there = tmp_path / "h.jsonl"
    there.write_text("")
    out = tmp_path / "out"
    out.mkdir()
    gone1, gone2 = str(tmp_path / "no" / "a.jsonl"), str(tmp_path / "no" / "b.jsonl")
    spark = spark_session("local[2]", "sleuth-test-progress")
    try:
        assert unreachable(spark, [str(there)], [str(out)]) is None
        host, path, kind = unreachable(spark, [str(there), gone2, gone1], [str(out)])
        assert (path, kind) == (gone2, "read")
        host, path, kind = unreachable(spark, [str(there)], [str(tmp_path / "no")])
        assert (path, kind) == (str(tmp_path / "no"), "write")
        assert host == os.uname().nodename
        assert unreachable_message(host, path, kind).startswith(f"the Spark executor on {host} cannot write into {path}")
    finally:
        spark.stop()
