"""Judge one run's history (or one key of it) as `sleuth run` judged it, from Spark rows.

The judge job (`jobs.py`) groups the consolidated operations per run (per
run and key for register workloads: Knossos and Porcupine split a register
history per key because keys are independent, so the verdicts merge as
false > unknown > true, Jepsen's `independent` checker). Inside each task the
rows become a `sleuth.history.History` again and go to exactly the checkers
`sleuth check` uses, so the verdicts agree by construction.

Two calls to the rest of sleuth are isolated here, each in one small function,
because their owners are reshaping them:

- `_checker(name)`: today `sleuth.checker.checker_for`.
- `judge_history(history, test, part)`: the runner's judging rules
  (`sleuth.runner.judge`), restated as a pure function of the history and
  the run's `test.json`. It needs, from test.json: `workload`, `target`
  (grey-box timestamps only on the reference cluster), `isolation`
  (timestamp rules only at strict-serializable), `model` (transactional
  workloads), `linearizable_keys` (rw-register), `keys` (bank: the total is
  the workload's initial total), `crashed` (a crashed run is never valid).
  When the runner exposes its own pure function, this one should call it.
"""

from __future__ import annotations

from typing import Any

import orjson

from sleuth.history import Event, History

KEYED = ("register",)  # workloads judged per (run, key); the rest per run


def checker_name(workload: str) -> str:
    """The `sleuth check` workload a run's history is judged as (clients.py owns the map)."""
    from sleuth.workloads.clients import WORKLOADS

    return WORKLOADS[workload].checker if workload in WORKLOADS else workload


def _checker(name: str):
    from sleuth.checker import checker_for

    return checker_for(name)


def _grey_box(target: str | None) -> bool:
    from sleuth.targets.reference import ReferenceTarget

    return target == ReferenceTarget.name and ReferenceTarget.grey_box


def judge_history(history: History, test: dict, part: str = "all") -> dict[str, Any]:
    """The verdict `sleuth run` gives a history: the workload's checker plus the extra rules.

    `part`: "checker" (the workload's checker only; a key's slice of a register
    history), "extras" (the whole-run rules only: grey-box timestamps), or
    "all". Returns {"valid", "anomaly-types"} as results.json spells them.
    """
    from sleuth.checker.result import merge_valid

    name = checker_name(test["workload"])
    valid: bool | str = True
    types: set[str] = set()
    if part in ("checker", "all"):
        kwargs: dict[str, Any] = {}
        if name in ("list-append", "rw-register") and test.get("model"):
            kwargs["model"] = test["model"]
        if name == "register":
            kwargs["model"] = "linearizable"
        if name == "bank":
            from sleuth.workloads.clients import WORKLOADS

            kwargs["total"] = WORKLOADS["bank"](int(test.get("keys", 8)), "general").total()
        if name == "rw-register" and test.get("linearizable_keys"):
            kwargs["linearizable_keys"] = True
        r = _checker(name)(history, **kwargs)
        valid, types = r.valid, set(r.anomaly_types)
    if part in ("extras", "all") and _grey_box(test.get("target")) \
            and test.get("isolation") == "strict-serializable":
        from sleuth.checker import timestamps

        ts = timestamps.check(history, name)
        valid, types = merge_valid(valid, ts.valid), types | set(ts.anomaly_types)
    if test.get("crashed") and valid is True:
        valid = "unknown"
    return {"valid": valid, "anomaly-types": sorted(types)}


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


def verdict_text(valid: bool | str) -> str:
    """results.json's `valid` as the campaign table spells it: "true", "false", "unknown"."""
    return "true" if valid is True else "false" if valid is False else "unknown"
