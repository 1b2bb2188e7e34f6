"""`sleuth check` and `sleuth sim`: judge histories, and write simulated ones.

The `check` contract (docs/history-format.md): one verdict per file; exit
status from sleuth/base/exits.py, combined over the files; with --json, stdout
carries one JSON object per file and nothing else, human notes go to stderr.
Which models and options apply to a workload is the checker registry's to
say (sleuth/checker/__init__.py), not this module's.
"""

from __future__ import annotations

import gc
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, NoReturn

import click

import sleuth.cli as cli
from sleuth.base import exits
from sleuth.base.interrupts import deferred
from sleuth.checker import OPTIONS, WORKLOADS, Workload
from sleuth.checker.result import found_counts
from sleuth.history.jsonl import HistoryError, gc_paused, leave_unfreed
from sleuth.workloads import SIM_DBS


def _model_for(spec: Workload, model: str | None) -> str | None:
    try:
        return spec.model(model)
    except ValueError as e:
        exits.die(f"--model: {e}")


def _checker_options(spec: Workload, values: dict[str, Any], subject: str | None = None) -> dict[str, Any]:
    """The options the user gave, refused if the workload's checker does not take them
    (`subject` names what they were given for: --workload W, or a run directory)."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    kwargs: dict[str, Any] = {}
    for name, value in values.items():
        if ctx.get_parameter_source(name) in (ParameterSource.DEFAULT, None):
            continue  # not given: the checker's own default applies
        option = OPTIONS[name]
        if name not in spec.options:
            takes = ", ".join(OPTIONS[o].flag for o in spec.options if not OPTIONS[o].own_flag) or "none"
            exits.die(f"{option.flag} does not apply to {subject or f'--workload {spec.name}'} "
                      f"(its options: {takes})")
        if option.json:
            try:
                value = json.loads(value)
            except json.JSONDecodeError as e:
                exits.die(f"{option.flag} {value!r} is not JSON ({e.msg})")
        kwargs[name] = value
    return kwargs


def checks_of_flags(spec: Workload, model: str | None, options: dict[str, Any],
                    timestamps: bool = False) -> Any:
    """The checks a history file gets from `sleuth check`'s flags (a `sleuth.checker.checks.Checks`):
    the model asked (or the workload's default), the checker options given, --timestamps."""
    from sleuth.checker.checks import Checks

    given = _checker_options(spec, options)  # an option that does not apply is named before --model
    return Checks(checker=spec.name, model=_model_for(spec, model), options=given, timestamps=timestamps)


def _summary_line(path: str, results: dict[str, Any]) -> str:
    """A file's (or run's) first line, from its results (`Result.to_json`, or a run's
    results.json content): the verdict, the model it was judged against, what was found,
    and why a run's verdict is no better than unknown."""
    line = f"{path}: {exits.verdict_headline(results['valid'])} ({results.get('model')})"
    if results.get("anomaly-types"):
        line += " — " + ", ".join(results["anomaly-types"])
    if results.get("not"):
        line += f"; not {', '.join(results['not'])}"
    if results.get("also-found"):
        line += f"; also found (allowed): {', '.join(results['also-found'])}"
    if results.get("reason"):
        line += f"; {results['reason']}"
    return line


def emit(record: dict[str, Any]) -> None:
    """One --json object on stdout: its own line, written whole (Ctrl-C or SIGTERM wait
    until it is out: a record cut mid-line is no JSON at all) and flushed at once, so a
    reader sees each file's outcome as soon as it is judged."""
    with deferred():
        sys.stdout.write(json.dumps(record, default=repr) + "\n")
        sys.stdout.flush()


def error_record(path: str, message: str, status: int) -> dict[str, Any]:
    """--json's object for a file that was not judged (bad input, a crash, an interrupt):
    every input file has one (docs/history-format.md's contract)."""
    return {"file": path, "valid": "unknown", "anomaly-types": [], "error": message, "exit": status}


def _crash_message(path: str, e: BaseException) -> str:
    what = f"{type(e).__name__}: {e}".split("\n", 1)[0]
    return f"{path}: sleuth failed ({what}); SLEUTH_DEBUG=1 shows the traceback"


def _failed(path: str, e: Exception) -> tuple[int, dict[str, Any], None, None]:
    """A file that could not be judged: bad input (HistoryError) is 254 with the
    reader's one-line error; any other exception is sleuth's own failure, 255
    (with its traceback on stderr when SLEUTH_DEBUG=1)."""
    if isinstance(e, HistoryError):
        return exits.BAD_INPUT, error_record(path, str(e), exits.BAD_INPUT), None, None
    if os.environ.get("SLEUTH_DEBUG") == "1":
        import traceback

        traceback.print_exc()
    return exits.CRASHED, error_record(path, _crash_message(path, e), exits.CRASHED), None, None


@gc_paused  # the history is also freed in here: with the collector running that cost 5x more
def judge_file(path: str, spec: Workload, checks: Any,
               events: bool = False) -> tuple[int, dict[str, Any], Any, Any]:
    """Load and judge one history under `checks` (a `sleuth.checker.checks.Checks`): (exit status, JSON
    record, Result or None, the History or None).

    `events=True` keeps every event (a report draws them); checkers need only ops.
    `checks.timestamps` also applies the grey-box timestamp rules (`--timestamps`).

    Bad input is 254 with the reader's one-line error; any other exception is
    sleuth's own failure, 255 (with its traceback on stderr when SLEUTH_DEBUG=1).
    """
    try:
        history = spec.load(path, events=events)  # checkers need ops, not every line
        if history.time_backwards is not None:
            line, count = history.time_backwards
            click.echo(f"sleuth: note: {path}: time is not monotone ({count} events go back in "
                       f"time, the first at line {line}); the file order is the real-time order "
                       "and times are for display only", err=True)
        from sleuth.checker.judge import check_judged

        result = check_judged(history, checks)
    except Exception as e:  # noqa: BLE001 - bad input is 254, any other exception 255, per file
        return _failed(path, e)
    status = exits.of_valid(result.valid)
    return status, {"file": path, **result.to_json(), "exit": status}, result, history


_SPARK_MASTER = re.compile(r"^(local(\[[0-9*]+(,[0-9]+)?\])?|spark://\S+|yarn|k8s://\S+|mesos://\S+)$")


def judge_spark(path: str, spec: Workload, checks: Any, master: str,
                quiet: bool) -> tuple[int, dict[str, Any], Any, None]:
    """`judge_file` on Spark (sleuth/sleuth/spark/history_check.py): the same statuses and record."""
    from sleuth.spark.history_check import check as spark_check

    def say(s: str) -> None:
        click.echo(f"sleuth: {s}", err=True)

    try:
        result = spark_check(path, spec.name, checks.kwargs(), master, say)
    except Exception as e:  # noqa: BLE001 - bad input is 254, any other exception 255, per file
        return _failed(path, e)
    status = exits.of_valid(result.valid)
    return status, {"file": path, **result.to_json(), "exit": status}, result, None


def _option_flags(fn):
    """One click option per entry of the registry's OPTIONS table."""
    for option in reversed(OPTIONS.values()):
        if option.own_flag:
            continue  # the command declares it (--model)
        if option.type is None and option.switch:
            decls = f"{option.flag}/--no-{option.flag[2:]}"
            fn = click.option(decls, option.name, default=bool(option.default), show_default=True,
                              help=option.help)(fn)
        elif option.type is None:
            fn = click.option(option.flag, option.name, is_flag=True, default=False, help=option.help)(fn)
        else:
            kind: Any = option.type
            if option.minimum is not None:
                kind = (click.IntRange if option.type is int else click.FloatRange)(min=option.minimum)
            fn = click.option(option.flag, option.name, type=kind, default=option.default,
                              metavar=option.metavar, help=option.help)(fn)
    return fn


timestamps_flag = click.option(
    "--timestamps", is_flag=True,
    help="Grey-box: also apply the reference cluster's timestamp rules to ok operations that carry "
         "`ts` (what sleuth run checks on the reference cluster at strict serializability).")


def _models_epilog() -> str:
    """The model names --model takes, per workload, from the registry (a
    paragraph click keeps as it is, wrapped between names, not inside one)."""
    import textwrap

    groups: dict[tuple, list[str]] = {}
    for w in WORKLOADS.values():
        if w.models:
            groups.setdefault((w.models, w.aliases), []).append(w.name)
    lines = ["\b", "Models (--model), the strongest first; docs/models.md says what each forbids:"]
    for (models, aliases), names in groups.items():
        text = f"{' and '.join(names)}: {', '.join(models)}"
        if aliases:
            text += "; also " + ", ".join(f"{a}={m}" for a, m in aliases)
        lines += textwrap.wrap(text, 76, subsequent_indent="  ",
                               break_on_hyphens=False, break_long_words=False)
    return "\n".join(lines)


@click.command(epilog=_models_epilog())
@click.argument("files", nargs=-1)
@click.option("--workload", "-w", default=None, type=click.Choice(sorted(WORKLOADS)),
              help="What the history's operations are (not needed for a run directory, which says "
                   "itself; given, it must be the run's).")
@click.option("--model", "-m", default=None,
              help="Consistency model to judge against (default: linearizable for registers, "
                   "strict-serializable for transactional workloads; none for bank, counter and source, "
                   "which are judged by their invariants).")
@_option_flags
@timestamps_flag
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object per file on stdout (JSON Lines); notes go to stderr.")
@click.option("--explain/--no-explain", default=True, show_default=True,
              help="Print the first example of each anomaly, explained.")
@click.option("--report", "report_dir", default=None, type=click.Path(file_okay=False),
              help="Also write the HTML report of the (one) history into this directory.")
@click.option("--spark", "spark_master", is_flag=False, flag_value="local[*]", default=None,
              metavar="[MASTER]",
              help="Judge on Spark (a history larger than this machine; JSON Lines file, directory of "
                   "shards, or campaign Parquet): embedded local[*], or the MASTER given "
                   "(local[N], spark://HOST:PORT). docs/spark.md.")
@click.option("--follow", is_flag=True,
              help="Judge one history while it is being written (FILE, or - for standard input): "
                   "anomalies are printed as they are found; the verdict comes when the history ends "
                   "(its end marker, the end of standard input, --idle-timeout, or Ctrl-C). "
                   "docs/online.md.")
@click.option("--idle-timeout", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help="With --follow: the history has ended when the file has not grown for SECONDS.")
def check(files, workload, model, timestamps, as_json, explain, report_dir, spark_master, follow,
          idle_timeout, **options) -> None:
    """Judge histories (history.jsonl, history.edn, Jepsen text logs, JSON arrays).

    Exit status: 0 all valid; 1 some history invalid; 2 some unknown (could
    not decide, nothing to judge, interrupted by Ctrl-C or SIGTERM); 254 bad arguments or bad input; 255 sleuth
    itself failed. Several files: the highest status wins. A run directory
    (or, with no --workload, its history.jsonl beside test.json) is judged
    with the run's own checks, so the verdict is the run's, unless an option
    given here changes one (--model, a checker option, --timestamps: yours
    wins, and the output says which model was used); a run that never
    finished (killed outright) is at best unknown.
    """
    if spark_master is not None and not _SPARK_MASTER.match(spark_master):
        files, spark_master = (spark_master, *files), "local[*]"  # `--spark FILE`: the file is no master
    if not files:
        exits.die("missing argument FILES")
    if idle_timeout is not None and not follow:
        exits.die("--idle-timeout applies only with --follow")
    if follow:
        if len(files) != 1 or workload is None or report_dir or spark_master is not None:
            exits.die("--follow takes one FILE (or - for standard input) and --workload, "
                      "and no --report or --spark")
        if files[0] != "-" and os.path.isdir(files[0]):
            exits.die(f"--follow: {files[0]} is a directory; give the history file being written")
        if files[0].endswith((".edn", ".txt", ".log")):
            exits.die(f"--follow: {files[0]}: --follow reads JSON Lines histories only (Jepsen's files are "
                      "judged whole, without --follow)")
        spec = WORKLOADS[workload]
        from sleuth.cli.follow import follow_check

        sys.exit(follow_check(files[0], spec, checks_of_flags(spec, model, options, timestamps), idle_timeout,
                              as_json, explain))
    if spark_master is not None and (workload is None or report_dir or timestamps):
        exits.die("--spark needs --workload and takes no --report or --timestamps")
    if spark_master is not None:
        large = [w for w, s in WORKLOADS.items() if s.large]
        if workload not in large:
            exits.die(f"--workload: --spark judges {', '.join(large)} histories, not {workload} "
                      "(judge it without --spark)")
    if cli.PROGRAM and spark_master is None:
        # The program will leave without freeing its heap (sleuth.cli.entry),
        # so the cyclic collector is not needed again, and must not run: the
        # first collection after a long pause walks every object the check
        # allocated (3 s at 1M transactions). Nothing here builds cycles.
        gc.disable()
        cli.FAST_EXIT = True
        leave_unfreed()
    if spark_master is not None:
        from sleuth.records.store import find_run

        for f in files:
            if os.path.isdir(f) and find_run(f):  # its checks would be dropped: refused, not ignored
                exits.die(f"--spark: {f} is a run directory, judged with its own checks by `sleuth check {f}`; "
                          "for Spark, give its history.jsonl with --workload and --model")
    runs = _runs(files, workload) if spark_master is None else {}
    if report_dir and len(files) != 1:
        exits.die("--report DIR takes one history")
    plans = {f: _run_plan(f, d, workload, model, options, timestamps, report_dir) for f, d in runs.items()}
    spec, checks = None, None
    if len(plans) < len(files):  # history files: judged as --workload and the options say
        spec = WORKLOADS[workload]
        checks = checks_of_flags(spec, model, options, timestamps)
    statuses = []
    progress = None
    if len(files) > 20 and not as_json and sys.stderr.isatty():
        from tqdm import tqdm

        progress = tqdm(total=len(files), unit="history", file=sys.stderr, leave=False)
    done = 0  # files whose outcome has been written
    try:
        for path in files:
            plan = plans.get(path)
            if plan is not None:  # a run directory: its own checks, with the options given here
                status, record, results, history = judge_run(path, plan, events=report_dir is not None)
            elif spark_master is not None:
                status, record, result, history = judge_spark(path, spec, checks, spark_master, as_json)
                results = None if result is None else result.to_json()
            else:
                status, record, result, history = judge_file(path, spec, checks, events=report_dir is not None)
                results = None if result is None else result.to_json()
            statuses.append(status)
            if report_dir and results is not None:
                from sleuth.reports.run_report import report_history

                if isinstance(plan, RunPlan):
                    report = report_history(report_dir, history, results, plan.checks, path, plan.test)
                else:
                    report = report_history(report_dir, history, results, checks, path)
                click.echo(f"report: {report}", err=True)
            if progress is not None:
                progress.update(1)
            with deferred():  # each file's outcome written, then counted, before an interrupt
                if as_json:
                    emit(record)
                if results is None:
                    click.echo(f"sleuth: error: {record['error']}", err=True)
                elif not as_json:
                    _print_result(path, results, explain)
                done += 1
    except KeyboardInterrupt:
        if progress is not None:
            progress.close()
        _interrupted(files, done, statuses, as_json)
    if progress is not None:
        progress.close()
    sys.exit(exits.combine(statuses))


def _interrupted(files: tuple[str, ...], done: int, statuses: list[int], as_json: bool) -> NoReturn:
    """Ctrl-C, or SIGTERM (a CI job's timeout; `sleuth.cli.entry` makes it an interrupt),
    after `done` files: with --json a record for the file being judged and for each one
    not reached, so every input file has its object ("valid": "unknown"); "interrupted" on
    stderr; the status of the files judged, with 2 for the rest (docs/exit-status.md)."""
    if as_json:
        for path in files[done:]:
            emit(error_record(path, "interrupted: not judged", exits.UNKNOWN))
    exits.die("interrupted", exits.combine([*statuses[:done], exits.UNKNOWN]))


def _runs(files: tuple[str, ...], workload: str | None) -> dict[str, str]:
    """The arguments that are runs, each with its run directory: every argument when no
    --workload is given (each must be a run directory, or its history.jsonl beside
    test.json), else the directories (a history file given with --workload is judged as
    that workload's; a directory can only be a run)."""
    from sleuth.records.campaign import RECORD
    from sleuth.records.store import find_run

    for f in files:
        if os.path.isdir(f) and os.path.exists(os.path.join(f, RECORD)):
            exits.die(f"{f}: a campaign directory; judge its runs with `sleuth campaign judge {f}`, "
                      "or name one of its runs/<run>/<time> directories")
    runs = {}
    for f in files:
        if workload is None or os.path.isdir(f):
            run_dir = find_run(f)
            if run_dir is None and workload is None:
                exits.die("--workload is required unless each FILE is a run directory (or its history.jsonl "
                          "with test.json beside it)")
            if run_dir is None:
                exits.die(f"{f}: a directory, and no run directory (no history.jsonl with test.json in it)")
            runs[f] = run_dir
    return runs


@dataclass(frozen=True)
class RunPlan:
    """How `sleuth check` judges one run directory: the checks the run recorded, changed by
    the options given on the command line (which win), and why its verdict can be no
    better than unknown (`reason`, sleuth.checker.judge.run_ended)."""

    run_dir: str
    test: Any  # sleuth.records.run.TestRecord
    checks: Any  # sleuth.checker.checks.Checks: the run's, with the options given here laid over them
    notes: tuple[str, ...]  # what the options changed, said with the verdict
    reason: str | None


def _run_plan(path: str, run_dir: str, workload: str | None, model: str | None, options: dict[str, Any],
              timestamps: bool, report_dir: str | None) -> RunPlan | str:
    """The run's own checks (test.json's, `sleuth.records.run.TestRecord`) with the user's options applied, or the one-line
    error of a test.json that cannot say what the run checked (that run's bad input, 254).
    An option that cannot apply to the run is a bad argument: refused at once (254)."""
    import msgspec

    from sleuth.checker.judge import run_ended
    from sleuth.records.run import RecordError, TestRecord
    from sleuth.records.store import test_path

    try:
        test = TestRecord.read(test_path(run_dir))
    except RecordError as e:
        return str(e)
    checks = test.checks
    spec = WORKLOADS[checks.checker]
    if workload is not None and workload != spec.name:
        exits.die(f"--workload {workload}: {path} is a {spec.name} run; its test.json says how it is judged "
                  f"(leave --workload out, or give {spec.name})")
    if report_dir is not None and os.path.realpath(report_dir) == os.path.realpath(run_dir):
        exits.die(f"--report {report_dir}: that is the run directory being checked, whose record and report "
                  "stay as the run wrote them; name another directory")
    given = _checker_options(spec, options, f"{path}, a {spec.name} run")
    notes = []
    if model is not None:
        try:
            chosen = spec.model(model)
        except ValueError as e:
            exits.die(f"--model: {path}: {e}")
        if chosen != checks.model:
            notes.append(f"judged against {chosen} (--model); the run itself was judged against {checks.model}")
            if checks.timestamps and not timestamps:
                notes.append(f"the grey-box timestamp rules the run applied with {checks.model} are left out "
                             "under another model (--timestamps applies them)")
        checks = msgspec.structs.replace(checks, model=chosen, timestamps=timestamps or (
            checks.timestamps and chosen == checks.model))
    elif timestamps:
        checks = msgspec.structs.replace(checks, timestamps=True)
    return RunPlan(run_dir, test, checks.with_options(given), tuple(notes), run_ended(test))


@gc_paused
def judge_run(path: str, plan: RunPlan | str, events: bool = False) -> tuple[int, dict[str, Any], Any, Any]:
    """Judge one run directory as `plan` says, by the run's own judging function
    (sleuth.checker.judge.judge): (exit status, JSON record, the results dict or None, the History
    or None), as `judge_file`."""
    from sleuth.checker.judge import judge
    from sleuth.history.jsonl import read_jsonl
    from sleuth.records.store import history_path

    if isinstance(plan, str):
        return exits.BAD_INPUT, error_record(path, plan, exits.BAD_INPUT), None, None
    try:
        history = read_jsonl(history_path(plan.run_dir), events=events)
        results = judge(history, plan.checks, plan.reason)
    except Exception as e:  # noqa: BLE001 - bad input is 254, any other exception 255, per run
        return _failed(path, e)
    if plan.notes:
        results["notes"] = [*plan.notes, *results.get("notes", [])]
    status = exits.of_valid(results["valid"])
    return status, {"file": path, **results, "exit": status}, results, history


def _print_result(path: str, results: dict[str, Any], explain: bool) -> None:
    """What a file (or run) judged prints without --json: the summary line, the count of
    each type found, each forbidden type's first example explained, the notes."""
    click.echo(_summary_line(path, results))
    counts = found_counts(results)
    if counts:
        click.echo("    found: " + ", ".join(f"{name} {n}" for name, n in counts.items()))
    if explain and results["valid"] is not True:
        for name in results.get("anomaly-types", []):
            example = (results.get("anomalies", {}).get(name) or [{}])[0]
            text = example.get("explanation", "")
            if text:
                click.echo("    " + text.replace("\n", "\n    "))
    for note in results.get("notes") or []:
        click.echo(f"    note: {note}")


@click.command()
@click.option("--db", required=True,
              type=click.Choice(SIM_DBS),
              help="The simulated database's behaviour.")
@click.option("--txns", type=click.IntRange(min=1), required=True, help="Transactions to generate (then one final read per 64 keys).")
@click.option("--concurrency", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--keys", type=click.IntRange(min=1), default=8, show_default=True,
              help="Keys active at once (retired after a bounded number of appends).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, writable=True))
def sim(db, txns, concurrency, keys, seed, output) -> None:
    """Write a synthetic list-append history from a simulated database."""
    from sleuth.workloads.sim_list_append import write_sim

    stats = write_sim(output, db, txns, concurrency=concurrency, keys=keys, seed=seed)
    click.echo(f"wrote {output}: " + ", ".join(f"{k} {v}" for k, v in stats.items()))


