"""A run's duration and throughput: the one definition every output uses.

The campaign page (with Spark's table or without it), the campaign's JUnit XML and
the Spark aggregate all show these figures, and all take them from here, from what
the run recorded in its history (docs/campaigns.md, "After the runs: Spark, the page, JUnit"):

- duration: from the run's first to its last history event, in seconds: the time
  the clients measured (load, nemesis, heal and final reads); starting the cluster
  and judging are not in it. A history with no timed event has none.
- throughput: the run's ok operations per second of that duration.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import orjson

from sleuth.history.jsonl import History
from sleuth.records.store import history_path

DURATION_HEADER = "duration, s"
THROUGHPUT_HEADER = "ok ops/s"
DEFINITION = ("duration: from the run's first to its last history event (the clients' load, faults, "
              "heal and final reads; not the cluster's start nor the judging); "
              "throughput: ok operations per second of that duration")


def span_ns(times: Iterable[int | None]) -> int:
    """Nanoseconds from the earliest to the latest event time (0 with fewer than two timed events)."""
    ts = [t for t in times if t is not None]
    return max(ts) - min(ts) if ts else 0


def seconds(span: int | float | None) -> float | None:
    """A span in nanoseconds as the run's duration in seconds; None when there is none (0 or unknown)."""
    if span is None or isinstance(span, float) and math.isnan(span) or span <= 0:
        return None
    return span / 1e9


def throughput(ok: int | float | None, duration: float | None) -> float | None:
    """ok operations per second of `duration` (seconds); None without a duration."""
    if ok is None or duration is None or isinstance(duration, float) and math.isnan(duration) or duration <= 0:
        return None
    return float(ok) / duration


def run_duration(run_dir: str) -> float | None:
    """The duration of the run in `run_dir`, from its history.jsonl (lines that cannot be read are
    skipped, as the Spark consolidation skips them); None when it has no timed events."""
    def times():
        try:
            with open(history_path(run_dir), "rb") as f:
                for line in f:
                    try:
                        t = orjson.loads(line).get("time")
                    except (orjson.JSONDecodeError, AttributeError):
                        continue
                    if isinstance(t, int) and not isinstance(t, bool):
                        yield t
        except OSError:
            return

    return seconds(span_ns(times()))


def duration(history: History) -> float:
    """A run's duration, in seconds: from its history's first event to its last (what the
    clients measured, faults included; the setup before and the judging after are not
    in it), as this module defines it for the campaign's outputs: the run's terminal
    summary, test.json (`duration_s`) and its report all show this figure. 0.0 for an
    empty history."""
    if history.compact is None:
        times = [e.time for e in history.events]
    else:  # a compact load keeps ops and nemesis events, not every completion's time
        times = [e.time for e in history.nemesis_events()]
        for o in history.ops():
            times.append(o.invoke_time)
            if o.complete_time is not None:
                times.append(o.complete_time)
    return span_ns(times) / 1e9


def duration_text(seconds: float) -> str:
    """A run's duration as every output shows it ("14.3 s"), so none rounds it its own way."""
    return f"{seconds:.1f} s"
