"""`sleuth shrink`: the smallest history that still shows an anomaly (docs/shrink.md).

Judges FILE as `sleuth check` would (same workload, model and options), then
shrinks it (sleuth.checker.shrink) and writes the counterexample with a
ready-to-run `sleuth check` command. Exit status is the verdict on FILE, never
changed by shrinking: 1 invalid (a counterexample was written), 0 valid and 2
unknown (nothing to shrink), 254 bad input, 255 crashed; interrupted (Ctrl-C,
SIGTERM) while shrinking, the smallest counterexample found so far is written
and the exit is 2.
"""

from __future__ import annotations

import json
import os
import sys

import click

from sleuth.base import exits
from sleuth.checker import WORKLOADS
from sleuth.cli.check import (
    _models_epilog,
    _option_flags,
    checks_of_flags,
    judge_file,
    timestamps_flag,
)


@click.command(epilog=_models_epilog())
@click.argument("file")
@click.option("--workload", "-w", required=True, type=click.Choice(sorted(WORKLOADS)),
              help="What the history's operations are.")
@click.option("--model", "-m", default=None, help="Consistency model to judge against (as sleuth check).")
@_option_flags
@timestamps_flag
@click.option("-o", "--output", default=None, type=click.Path(dir_okay=False),
              help="Where to write the counterexample (default: FILE.counterexample.jsonl).")
@click.option("--budget", type=click.FloatRange(min=0), default=60.0, show_default=True,
              help="Seconds to spend shrinking; then the smallest failing history found is written.")
@click.option("--anomaly", default=None, metavar="TYPE",
              help="The anomaly type to keep (default: the one whose example names the fewest operations).")
@click.option("--json", "as_json", is_flag=True, help="stdout carries one JSON object, nothing else.")
def shrink(file, workload, model, timestamps, output, budget, anomaly, as_json, **options) -> None:
    """Shrink an invalid history to a minimal counterexample that is still invalid.

    Exit status: 1 invalid (counterexample written); 0 valid, 2 unknown (nothing to
    shrink); 254 bad input; 255 sleuth itself failed. Interrupted (Ctrl-C, SIGTERM)
    while shrinking: the smallest counterexample found so far is written, exit 2.
    """
    from sleuth.checker import counterexample
    from sleuth.checker.shrink import Shrinker

    output = output or file + ".counterexample.jsonl"
    if os.path.abspath(output) == os.path.abspath(file):
        exits.die(f"-o {output}: that is the history being shrunk")
    spec = WORKLOADS[workload]
    checks = checks_of_flags(spec, model, options, timestamps)
    status, record, result, history = judge_file(file, spec, checks, events=True)
    if result is None:
        exits.die(record["error"].removeprefix("sleuth: error: "), status)
    if result.valid is not False:
        what = "valid" if result.valid is True else "unknown"
        say = f"{file}: {what} ({result.model}): nothing to shrink"
        if as_json:
            click.echo(json.dumps({"file": file, "valid": result.valid, "anomaly-types": [],
                                   "counterexample": None}))
        click.echo(say, err=as_json)
        sys.exit(status)
    if anomaly is not None and anomaly not in result.anomaly_types:
        exits.die(f"--anomaly: {anomaly!r} is not an anomaly found in {file} "
                  f"(found: {', '.join(result.anomaly_types)})")
    from sleuth.checker.judge import check_judged

    def check(h):
        return check_judged(h, checks)

    def progress(stage: str, ops: int) -> None:
        click.echo(f"sleuth: shrinking: {stage} ({ops} operations)", err=True)

    shrinker = Shrinker(history, workload, check, result, anomaly, budget, progress,
                        initial_value=checks.options.get("initial_value"))
    try:  # from the moment it says so: an interrupt may come as soon as a reader sees the line
        click.echo(f"{file}: INVALID ({result.model}) — {', '.join(result.anomaly_types)}; "
                   f"shrinking (budget {budget:g} s)", err=True)
        ce = shrinker.run()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: what was found so far is written, then exit 2
        ce = shrinker.so_far()
    command = counterexample.check_command(output, workload, checks.model, checks.options, timestamps=timestamps)
    try:
        summary = counterexample.write(ce, output, command)
    except OSError as e:
        exits.die(f"-o {output}: {e.strerror or e}")
    if as_json:
        click.echo(json.dumps({"file": file, "valid": False, "anomaly-types": result.anomaly_types,
                               "counterexample": summary}, default=str))
    else:
        _print_table(ce.rows())
    click.echo(ce.summary(), err=as_json)
    click.echo(f"wrote {output}; replay it with:\n    {command}", err=as_json)
    if ce.interrupted:  # what was found is written; the run itself was cut short
        exits.die("interrupted", exits.UNKNOWN)
    sys.exit(status)


def _print_table(rows: list[dict]) -> None:
    """Each op's name (as the explanation calls it), process, invoke/complete order, outcome,
    f, value and original line."""
    head = ("op", "process", "invoke", "complete", "type", "f", "value", "line")
    cells = [[r["name"], str(r["process"]), str(r["invoke"]), "-" if r["complete"] is None else str(r["complete"]),
              r["type"], r["f"], _short(json.dumps(r["value"])), str(r["line"])] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(head)]
    for line in [list(head), *cells]:
        click.echo("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())


def _short(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
