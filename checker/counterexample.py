"""Counterexample files: what `sleuth shrink` and every invalid `sleuth run` leave behind.

`counterexample.jsonl` is a history in the ordinary format (docs/history-format.md)
that `sleuth check` reads as it is; each event also carries `line`, its line in
the original history, which readers ignore. `counterexample.json` beside it holds
the op table, how far shrinking got, and the ready-to-run `sleuth check`
command. The algorithm is `sleuth.checker.shrink`; this module only runs it the
way a history was judged and writes what it found.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable
from typing import Any

import orjson

from sleuth.base.jsonfile import written_whole
from sleuth.checker import OPTIONS
from sleuth.checker.shrink import Counterexample, shrink
from sleuth.history.jsonl import History

RUN_BUDGET = 20.0  # seconds a run spends shrinking its anomaly (sleuth run --shrink-budget)
JSONL, JSON = "counterexample.jsonl", "counterexample.json"


def check_command(path: str, workload: str, model: str | None, options: dict[str, Any],
                  timestamps: bool = False) -> str:
    """The `sleuth check` command that judges `path` as the original was judged."""
    words = ["sleuth", "check", path, "--workload", workload]
    if model:
        words += ["--model", model]
    if timestamps:
        words.append("--timestamps")
    for name, value in options.items():
        option = OPTIONS[name]
        if option.type is None:
            if value:
                words.append(option.flag)
            elif option.switch:
                words.append("--no-" + option.flag[2:])
        else:
            words += [option.flag, json.dumps(value) if option.json else str(value)]
    return shlex.join(words)


def write(ce: Counterexample, path: str, command: str) -> dict[str, Any]:
    """Write the counterexample history to `path` (and its summary beside it, as
    `<path minus .jsonl>.json`); returns that summary."""
    with written_whole(path) as tmp, open(tmp, "wb") as fh:
        for e in ce.events():
            fh.write(orjson.dumps(e) + b"\n")
    summary = {**ce.to_json(), "output": path, "command": command, "summary": ce.summary()}
    with written_whole(_summary_path(path)) as tmp, open(tmp, "wb") as fh:
        fh.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2, default=str))
    return summary


def _summary_path(path: str) -> str:
    return (path[:-len(".jsonl")] if path.endswith(".jsonl") else path) + ".json"


def for_run(run_dir: str, history: History, checks: Any, budget: float = RUN_BUDGET,
            say: Callable[[str], None] | None = None,
            stop: Callable[[], bool] | None = None) -> dict[str, Any] | None:
    """Shrink an invalid run's history into `run_dir/counterexample.jsonl`, judged as the run
    was: by the workload's checker and, on the reference cluster, the timestamp rules too;
    None when neither finds an anomaly. `stop` (asked before each check: the run's second
    Ctrl-C) ends shrinking early, and what was found so far is written."""
    from sleuth.checker.judge import check_judged

    original = check_judged(history, checks)
    if original.valid is not False or not original.anomaly_types:
        return None
    ce = shrink(history, checks.checker, lambda h: check_judged(h, checks), original, budget=budget,
                stop=stop)
    path = os.path.join(run_dir, JSONL)
    command = check_command(JSONL, checks.checker, checks.model, checks.options, timestamps=checks.timestamps)
    summary = write(ce, path, command)
    if say is not None:
        say(f"counterexample: {ce.summary()} -> {path}")
    return summary


def read_summary(run_dir: str) -> dict[str, Any] | None:
    """A run's counterexample summary, if it has one."""
    path = os.path.join(run_dir, JSON)
    if not os.path.exists(path):
        return None
    with open(path, "rb") as fh:
        return orjson.loads(fh.read())
