"""`sleuth check --follow`: judge a history while it is being written.

Events go to the workload's online engine (`sleuth.checker.online`) as they
are read (`sleuth.history.follow`); each anomaly it confirms is printed at once
(with --json, one object per anomaly, `"event": "anomaly"`). When the
history ends, the offline checker judges the whole of it (the *final pass*),
so the summary, the --json record and the exit status are exactly those of
`sleuth check` on the same lines; the record adds `"online"`: how the
history ended, which anomaly types were found online (with the first line
of each) and which only in the final pass.
"""

from __future__ import annotations

import gc
import sys
import time
from typing import Any

import click

import sleuth.cli as cli
from sleuth.base import exits
from sleuth.base.interrupts import deferred
from sleuth.base.memory import peak_rss_mib
from sleuth.checker import Workload
from sleuth.checker.online import Feed, Found, engine_for
from sleuth.checker.online.when import timeline
from sleuth.history.jsonl import History, HistoryError


def follow_check(path: str, spec: Workload, checks: Any, idle_timeout: float | None,
                 as_json: bool, explain: bool) -> int:
    """Follow `path`, report online, judge at the end under `checks` (a `sleuth.checker.checks.Checks`);
    the exit status."""
    from sleuth.cli.check import _print_result, emit, error_record, judge_file
    from sleuth.history import follow as fl

    if cli.PROGRAM:
        gc.disable()  # nothing here builds reference cycles (as `sleuth check`)
        cli.FAST_EXIT = True
    shown = "<stdin>" if path == "-" else path
    history = History([], shown)
    found: list[Found] = []
    t0 = time.time()
    cpu0 = time.process_time()

    def report(f: Found) -> None:
        found.append(f)
        with deferred():
            if as_json:
                emit({"file": shown, "event": "anomaly", "online": True, **f.to_json(),
                      "seconds": round(f.found_at - t0, 3)})
            else:
                click.echo(f"{shown}:{f.line}: found {f.name} (online, {f.found_at - t0:.2f} s in)")
                if explain:
                    click.echo("    " + f.explanation.replace("\n", "\n    "))
                click.echo("    lines: " + ", ".join(map(str, f.lines[:40]))
                           + (" …" if len(f.lines) > 40 else ""))
            sys.stdout.flush()

    engine = engine_for(spec.name, history, checks.model, report, checks.options, timestamps=checks.timestamps)
    if engine is None:
        click.echo(f"sleuth: note: no online engine for {spec.name} yet: the history is judged when it "
                   "ends", err=True)
        feed = None
    else:
        feed = Feed(history, engine)
    lines = fl.Lines(history)
    counter = [0]

    def on_event(typ, process, f, value, time_, node, error, ts, lineno) -> None:
        if feed is None:
            counter[0] += 1
            return
        lines.note(feed.pos, lineno)
        feed.event(typ, process, f, value, time_, node, error, ts)

    def on_run(run: list, first_line: int) -> None:
        if feed is None:
            counter[0] += len(run)
        elif history.lines is None and first_line == feed.pos + 1:  # line numbers are positions
            feed.events(run)
        else:
            for j, e in enumerate(run):
                on_event(e.type, e.process, e.f, e.value, e.time, e.node, e.error, e.ts, first_line + j)

    tick = engine.tick if engine is not None else (lambda: None)
    try:
        followed = fl.follow(path, spec.micro_ops, on_event, tick, idle_timeout, on_run)
    except HistoryError as e:
        return _bad(shown, str(e), as_json)
    try:
        if followed.partial:
            click.echo(f"sleuth: note: {shown}: its last line was not whole when the history ended "
                       f"({followed.ended_by}); it is left out", err=True)
        online_seconds = followed.seconds
        online_cpu = time.process_time() - cpu0
        online_rss = peak_rss_mib()
        result = certified(engine, checks.model, followed.ended_by)
        engine_stats = engine.stats() if engine is not None else {}
        gaps = engine_stats.get("gaps") or {}
        # The engine's state is not needed again: freed before the final pass reads the
        # history again, so the two are not held at once (nothing in it is a reference cycle)
        feed = engine = tick = history = lines = None
        try:
            judged = None
            if result is not None:  # the engine's verdict is offline's: no final pass
                status = exits.of_valid(result.valid)
                record = {"file": followed.path, **result.to_json(), "exit": status}
            else:
                status, record, result, judged = judge_file(followed.path, spec, checks)
        except KeyboardInterrupt:
            # what the online phase found and cost is known: say it (a final pass stopped
            # because it would hold too much of a long history is the case this serves)
            if as_json:
                emit({**error_record(shown, "interrupted: not judged", exits.UNKNOWN),
                      "online": {**phase(followed, found, online_seconds, online_cpu, online_rss, engine_stats),
                                 "final-pass": "interrupted"}})
            exits.die(f"interrupted in the final pass (offline, because of: {', '.join(sorted(gaps))}): "
                      "not judged", exits.UNKNOWN)
    finally:
        fl.remove(followed)
    record = _renamed(record, followed.path, shown)
    if result is None:
        if as_json:
            emit(record)
        click.echo(f"sleuth: error: {record['error']}", err=True)
        return status
    results = result.to_json()
    online = phase(followed, found, online_seconds, online_cpu, online_rss, engine_stats)
    first = {f["anomaly"]: f["first-line"] for f in online["found"]}
    at_end = [t for t in results.get("anomaly-types", []) if t not in first]
    online.update({"only-at-end": at_end,
                   "final-pass": "offline" if "final-pass" not in results.get("stats", {}) else "none",
                   # each anomaly type: when it happened (its last operation) and when it was found
                   "anomalies": timeline(results, judged, [f.to_json() for f in found], time.time())})
    record["online"] = online
    with deferred():
        if as_json:
            emit(record)
        else:
            _print_result(shown, results, explain)
            click.echo(f"    ended by: {followed.ended_by}, after {followed.events} events in "
                       f"{online_seconds:.2f} s")
            if first:
                click.echo("    found online: " + ", ".join(f"{t} (line {ln})" for t, ln in first.items()))
            if at_end:
                click.echo("    found only in the final pass: " + ", ".join(at_end))
            if online["final-pass"] == "none":
                click.echo("    final pass: none needed (the online engine's verdict is complete)")
            elif gaps:
                click.echo("    final pass: offline, because of: " + ", ".join(sorted(gaps)))
    return status


def phase(followed: Any, found: list[Found], seconds: float, cpu: float, rss: float,
          stats: dict[str, Any]) -> dict[str, Any]:
    """The online phase's part of the record: how the history ended, what was found online
    (each type with its first line), its wall and CPU seconds and peak memory, the engine's
    counts and why a final pass is needed (its gaps)."""
    first: dict[str, int] = {}
    for f in found:
        first.setdefault(f.name, f.line)
    return {"ended-by": followed.ended_by, "events": followed.events,
            "found": [{"anomaly": t, "first-line": ln} for t, ln in first.items()],
            "seconds": round(seconds, 3), "cpu-seconds": round(cpu, 3), "max-rss-mib": round(rss),
            "final-pass-because": sorted(stats.get("gaps") or {}), "stats": stats}


def certified(engine: Any, model: str | None, ended_by: str) -> Any:
    """The engine's own verdict when it is offline's (`certified()`: a valid history, no
    anomaly of any type; see checker/online/list_append.py, "Certified verdicts", and the
    register and rw-register engines' docstrings), as the
    offline checker's Result would give it; else None (the offline pass judges). An
    interrupted follow is judged offline (what was read, as it is)."""
    if engine is None or not hasattr(engine, "certified") or ended_by == "interrupted":
        return None
    engine.finish()
    if not engine.certified():
        return None
    if hasattr(engine, "result"):  # the engine says its verdict as offline's Result
        return engine.result(model)
    from sleuth.checker import models, txn
    from sleuth.checker.result import Result

    not_, also_not, possible = models.judge([])
    stats = {**engine.stats(), "final-pass": "none: the online engine's verdict is complete"}
    notes = [txn.EMPTY_GRAPH_NOTE] if engine.data_edges == 0 and engine.ok > 1 else []
    return Result(valid=True, model=models.canonical(model or "strict-serializable"), not_=not_,
                  also_not=also_not, possible=possible, stats=stats, notes=notes)


def _renamed(record: dict[str, Any], path: str, shown: str) -> dict[str, Any]:
    """The final pass's record, naming the history as the user did (not a copy's path)."""
    record = {**record, "file": shown}
    if "error" in record and path != shown:
        record["error"] = record["error"].replace(path, shown)
    return record


def _bad(shown: str, message: str, as_json: bool) -> int:
    from sleuth.cli.check import emit, error_record

    if as_json:
        emit(error_record(shown, message, exits.BAD_INPUT))
    click.echo(f"sleuth: error: {message}", err=True)
    return exits.BAD_INPUT

