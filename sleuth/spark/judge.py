"""Judge one run's history (or one key of it) as `sleuth run` judged it, from Spark rows.

The judge job (`jobs.py`) groups the consolidated operations per run (per
run and key for register workloads: Knossos and Porcupine split a register
history per key because keys are independent, so the verdicts merge as
false > unknown > true, Jepsen's `independent` checker). Inside each task the
rows become a `sleuth.history.jsonl.History` again and go to exactly the checkers
`sleuth check` uses, so the verdicts agree by construction.

The run's checks come from its test.json (`sleuth.records.run.TestRecord.checks`),
and the judging is `sleuth.checker.judge`'s: the function `sleuth run` and `sleuth
check RUN_DIR` use, so a Spark verdict cannot drift from theirs.
"""

from __future__ import annotations

from typing import Any

import orjson

from sleuth.history.jsonl import Event, History


def judge_history(history: History, test: Any, part: str = "all") -> dict[str, Any]:
    """The verdict `sleuth run` gives a history, from the run's own test.json (a
    `sleuth.records.run.TestRecord`): the same pure judging function (`sleuth.checker.judge`) with the
    checks the run recorded.

    `part`: "checker" (the workload's checker only, on one key's slice of a
    register history; a key where nothing was observed counts as valid, as
    `sleuth check` only notes it), "extras" (the whole-run rules only: grey-box
    timestamps, nothing completed, a run that ended early), or "all". Returns
    {"valid", "anomaly-types"} as results.json spells them.
    """
    from sleuth.checker.judge import check_workload, judge, run_ended

    checks = test.checks
    if part == "checker":
        r = check_workload(history, checks)
        if r.stats.get("keys-judged") == 0:
            return {"valid": True, "anomaly-types": []}
        return {"valid": r.valid, "anomaly-types": sorted(r.anomaly_types)}
    results = judge(history, checks, run_ended(test), workload=part == "all")
    return {"valid": results["valid"], "anomaly-types": sorted(results["anomaly-types"])}


def part_of(keyed: bool, large: bool = False) -> str:
    """What the task that reads a whole run judges of it: everything, or only the whole-run
    rules for a register run (its keys are judged one (run, key) group each) and for a large
    run (judged by `sleuth check --spark`'s per-key jobs, jobs.judge_large)."""
    return "extras" if keyed or large else "all"


def history_of(rows, source: str) -> History:
    """A History from operation rows (the consolidated Parquet's columns), in index order.

    Each row gives its invoke event and, when it completed, its completion
    event; `lines` keeps the original history line numbers, so explanations
    point at the run's own history.jsonl.
    """
    events: list[tuple[int, Event]] = []
    for r in rows:
        p = int(r.process)
        iv = orjson.loads(r.invoke_value) if r.invoke_value is not None else None
        i = int(r.invoke_index)
        events.append((i, Event(i, int(r.invoke_time), "invoke", p, r.f, iv, r.node)))
        if r.complete_index is not None and r.complete_index == r.complete_index:  # not NaN
            cv = orjson.loads(r.complete_value) if r.complete_value is not None else None
            ts = None if r.ts is None or r.ts != r.ts else int(r.ts)
            events.append((int(r.complete_index),
                           Event(int(r.complete_index), int(r.complete_time), r.outcome, p, r.f, cv,
                                 r.node, r.error, ts)))
    events.sort(key=lambda e: e[0])
    return History([e for _, e in events], source, lines=[i + 1 for i, _ in events])


