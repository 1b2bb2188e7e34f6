"""Judging a run's history: one pure function, used by `sleuth run` and by `sleuth check RUN_DIR`.

What to check is decided once, when the run starts, from the workload, the
isolation level and what the target can say about itself (`Checks`); it is
stored in test.json (`sleuth.records.run.TestRecord.checks`), so a later `sleuth check RUN_DIR` applies exactly the
checks the run applied and reaches the same verdict (Jepsen's `analyze!`
re-runs the test's checker on the stored history the same way).

Validity merges as in Jepsen's `compose`: false > unknown > true. Two rules
of our own (issue 10): a history in which no operation completed checked
nothing, so it is unknown, never valid; and a run that was interrupted,
crashed or never finished (killed outright: `run_ended`) is unknown unless
the part it recorded already holds an anomaly, which is real whatever
happened afterwards (invalid).

This module also owns two facts every output of a run shares: whether its
results were judged at all (`not_judged`, `was_judged`), and its duration
(`duration`).
"""

from __future__ import annotations

from typing import Any

from sleuth.checker.checks import Checks
from sleuth.checker.models import ISOLATION_MODELS
from sleuth.history.jsonl import History

__all__ = ["Checks", "checks_for", "judge"]  # Checks: checker/checks.py owns it; judging uses it here

NOTHING_COMPLETED = "no operation completed: nothing was checked"
DID_NOT_FINISH = "the run did not finish: its history may be cut short"


def checks_for(workload: Any, target: Any, isolation: str | None) -> Checks:
    """The checks a live run applies: its workload's checker, the model its isolation level
    promises, and what the target's guarantees add (per-key linearizability, timestamps)."""
    from sleuth.checker import WORKLOADS as CHECKERS

    checker = workload.checker
    spec = CHECKERS[checker]
    # a target may judge a level of its own differently (MySQL's REPEATABLE READ is not
    # PostgreSQL's snapshot isolation): its `models` first, then the shared table; a
    # workload whose checker has no such model (registers: linearizable) keeps its own
    level = target.models.get(isolation or "", ISOLATION_MODELS.get(isolation or ""))
    model = level if level in spec.models else spec.default_model
    options: dict[str, Any] = {}
    if checker == "rw-register" and target.linearizable_keys(isolation):
        options["linearizable_keys"] = True
    if checker == "bank" and workload.total() is not None:
        options["total"] = workload.total()
    return Checks(checker=checker, model=model, options=options,
                  timestamps=bool(target.grey_box) and isolation == "strict-serializable")


def run_ended(test: Any) -> str | None:
    """Why a stored run's verdict can be no better than unknown, from its test.json (a
    `sleuth.records.run.TestRecord`): why it
    ended early as it recorded (`ended`: "interrupted", "crashed: …"), or DID_NOT_FINISH when
    its record is still the one written as it started (`finished` null: the run was killed
    outright, SIGKILL or a power loss, and never concluded); None for a run that ended at
    its time limit. (A test.json without `finished` at all, `sleuth check --report`'s, is
    a whole history.)"""
    if test.finished is None:  # unset (no `finished` at all) is a whole history
        return DID_NOT_FINISH
    return test.ended


def not_judged(reason: str) -> dict[str, Any]:
    """The results of a run whose history was not judged (a second signal, an unreadable
    history, a crash while judging): unknown, nothing looked for, and `"judged": false`, so
    that no report or summary reads its empty anomaly list as "none found"."""
    return {"valid": "unknown", "judged": False, "anomaly-types": [], "anomalies": {}, "reason": reason}


def was_judged(results: dict[str, Any]) -> bool:
    """Whether `results` (results.json's content) come from judging the history: false for
    `not_judged`'s, and for those written before that flag existed, which had no model."""
    return results.get("judged", "model" in results) is not False


def op_counts(history: History) -> dict[str, int]:
    """Client operations by outcome (an invoke never completed counts as info, as docs/history-format.md says)."""
    out = {"ops": 0, "ok": 0, "fail": 0, "info": 0}
    for op in history.ops():
        out["ops"] += 1
        out[op.type] += 1
    return out


def check_workload(history: History, checks: Checks) -> Any:
    """The workload's own checker under `checks` (a `Result`): what `sleuth check` runs, with
    the keyword arguments its registry entry declares (`Checks.kwargs`)."""
    from sleuth.checker import checker_for

    return checker_for(checks.checker)(history, **checks.kwargs())


def with_timestamps(result: Any, history: History, workload: str) -> tuple[Any, Any]:
    """`result` (a `Result`) with the grey-box timestamp rules' findings merged in (one invalid
    part makes the whole invalid), and those findings on their own."""
    from sleuth.checker import timestamps
    from sleuth.checker.result import merge_valid

    ts = timestamps.check(history, workload)
    result.valid = merge_valid(result.valid, ts.valid)
    result.anomaly_types = sorted(set(result.anomaly_types) | set(ts.anomaly_types))
    for k, v in ts.anomalies.items():
        result.anomalies.setdefault(k, v)
    counts = ts.stats.get("anomaly-counts") or {}
    if counts:
        result.stats = {**result.stats,
                        "anomaly-counts": {**counts, **(result.stats.get("anomaly-counts") or {})}}
    return result, ts


def check_judged(history: History, checks: Checks) -> Any:
    """What a run's verdict rests on, as one `Result`: the workload's checker and, where the
    checks say so, the timestamp rules (`judge` without the run's reason and counts)."""
    result = check_workload(history, checks)
    return with_timestamps(result, history, checks.checker)[0] if checks.timestamps else result


def judge(history: History, checks: Checks, reason: str | None = None, *,
          workload: bool = True) -> dict[str, Any]:
    """The results of `history` under `checks` (results.json's content).

    `reason` says why the run ended early ("interrupted", "crashed: …"): an
    otherwise valid verdict is then unknown. `workload=False` leaves out the
    workload's checker and applies only the whole-run rules (timestamps, and
    the reason): the campaign's Spark judge runs a register checker per key
    and these once per run. Pure: reads nothing but its arguments.
    """
    from sleuth.checker.result import Result

    result = check_workload(history, checks) if workload else Result(True, checks.model or "")
    ts = None
    if checks.timestamps:
        result, ts = with_timestamps(result, history, checks.checker)
    results = result.to_json()
    if ts is not None:
        results["timestamps"] = ts.to_json()
    counts = op_counts(history)
    results["counts"] = counts
    if reason is None and counts["ok"] == 0:
        reason = NOTHING_COMPLETED
    if reason is not None:
        results["reason"] = reason
        if results["valid"] is True:
            results["valid"] = "unknown"
    return results
