"""Judging a run's history: one pure function, used by `sleuth run` and by `sleuth check RUN_DIR`.

What to check is decided once, when the run starts, from the workload, the
isolation level and what the target can say about itself (`Checks`); it is
stored in test.json, so a later `sleuth check RUN_DIR` applies exactly the
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

from dataclasses import asdict, dataclass, replace
from typing import Any

from sleuth.checker.models import ISOLATION_MODELS
from sleuth.history import History

NOTHING_COMPLETED = "no operation completed: nothing was checked"
DID_NOT_FINISH = "the run did not finish: its history may be cut short"


@dataclass(frozen=True)
class Checks:
    """Which checks a run's history gets."""

    checker: str  # the `sleuth check` workload (checker.checker_for)
    model: str | None = None
    linearizable_keys: bool = False  # rw-register: Elle's per-key real-time version inference
    total: int | None = None  # bank: the conserved total
    timestamps: bool = False  # the grey-box timestamp rules (checker/timestamps.py)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Checks:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    def with_options(self, options: dict[str, Any]) -> Checks:
        """These checks with the checker options given (`sleuth check`'s flags) that a run's
        record holds (--total, --linearizable-keys); the others are not recorded."""
        held = {k: options[k] for k in ("total", "linearizable_keys") if k in options}
        return replace(self, **held) if held else self

    @classmethod
    def of_test(cls, test: dict[str, Any]) -> Checks:
        """The checks a run applied, from its test.json (runs stored before test.json held
        `checks` get them re-derived the way the runner derived them then)."""
        if isinstance(test.get("checks"), dict):
            return cls.from_json(test["checks"])
        checker = test.get("workload", "")
        model = test.get("model") if checker in ("list-append", "rw-register") else None
        return cls(checker=checker, model="linearizable" if checker == "register" else model,
                   linearizable_keys=bool(test.get("linearizable_keys")),
                   timestamps=test.get("target") == "reference" and test.get("isolation") == "strict-serializable")


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
    return Checks(
        checker=checker, model=model,
        linearizable_keys=checker == "rw-register" and bool(target.linearizable_keys(isolation)),
        total=workload.total() if checker == "bank" else None,
        timestamps=bool(target.grey_box) and isolation == "strict-serializable")


def run_ended(test: dict[str, Any]) -> str | None:
    """Why a stored run's verdict can be no better than unknown, from its test.json: why it
    ended early as it recorded (`ended`: "interrupted", "crashed: …"), or DID_NOT_FINISH when
    its record is still the one written as it started (`finished` null: the run was killed
    outright, SIGKILL or a power loss, and never concluded); None for a run that ended at
    its time limit. (A test.json without `finished` at all, `sleuth check --report`'s, is
    a whole history.)"""
    if "finished" in test and test["finished"] is None:
        return DID_NOT_FINISH
    return test.get("ended")


def not_judged(reason: str) -> dict[str, Any]:
    """The results of a run whose history was not judged (a second signal, an unreadable
    history, a crash while judging): unknown, nothing looked for, and `"judged": false`, so
    that no report or summary reads its empty anomaly list as "none found"."""
    return {"valid": "unknown", "judged": False, "anomaly-types": [], "anomalies": {}, "reason": reason}


def was_judged(results: dict[str, Any]) -> bool:
    """Whether `results` (results.json's content) come from judging the history: false for
    `not_judged`'s, and for those written before that flag existed, which had no model."""
    return results.get("judged", "model" in results) is not False


def duration(history: History) -> float:
    """A run's duration, in seconds: from its history's first event to its last (what the
    clients measured, faults included; the setup before and the judging after are not
    in it), as `sleuth.measure` defines it for the campaign's outputs: the run's terminal
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
    from sleuth.measure import span_ns  # the one definition the campaign's figures use too

    return span_ns(times) / 1e9


def duration_text(seconds: float) -> str:
    """A run's duration as every output shows it ("14.3 s"), so none rounds it its own way."""
    return f"{seconds:.1f} s"


def op_counts(history: History) -> dict[str, int]:
    """Client operations by outcome (an invoke never completed counts as info, as docs/history-format.md says)."""
    out = {"ops": 0, "ok": 0, "fail": 0, "info": 0}
    for op in history.ops():
        out["ops"] += 1
        out[op.type] += 1
    return out


def check_workload(history: History, checks: Checks, options: dict[str, Any] | None = None) -> Any:
    """The workload's own checker under `checks` (a `Result`): what `sleuth check` runs.
    `options`: checker options a user gave (`sleuth check RUN_DIR --total 100`), which win
    over the run's own."""
    from sleuth.checker import checker_for

    kwargs: dict[str, Any] = {}
    if checks.model:
        kwargs["model"] = checks.model
    if checks.total is not None:
        kwargs["total"] = checks.total
    if checks.linearizable_keys:
        kwargs["linearizable_keys"] = True
    kwargs.update(options or {})
    return checker_for(checks.checker)(history, **kwargs)


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
          workload: bool = True, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The results of `history` under `checks` (results.json's content).

    `reason` says why the run ended early ("interrupted", "crashed: …"): an
    otherwise valid verdict is then unknown. `workload=False` leaves out the
    workload's checker and applies only the whole-run rules (timestamps, and
    the reason): the campaign's Spark judge runs a register checker per key
    and these once per run. `options`: as `check_workload`'s. Pure: reads
    nothing but its arguments.
    """
    from sleuth.checker.result import Result

    result = check_workload(history, checks, options) if workload else Result(True, checks.model or "")
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
