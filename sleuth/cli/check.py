"""`sleuth check` and `sleuth sim`: judge histories, and write simulated ones."""

from __future__ import annotations

import json
import sys

import click

from sleuth.checker import CHECKERS, TRANSACTIONAL, checker_for, default_model
from sleuth.history import HistoryError

EXIT_VALID, EXIT_INVALID, EXIT_BAD_INPUT = 0, 1, 2


def fail_usage(message: str) -> None:
    """A one-line error and exit status 2, no traceback."""
    click.echo(f"sleuth: error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)


def _model_for(workload: str, model: str | None) -> str | None:
    if workload in TRANSACTIONAL:
        from sleuth.checker.models import canonical

        try:
            return canonical(model or default_model(workload))
        except ValueError as e:
            fail_usage(f"--model: {e}")
    if workload in ("register", "cas-register"):
        if model not in (None, "linearizable", "strict-serializable"):
            fail_usage(f"--model {model!r}: {workload} histories are checked for linearizability")
        return "linearizable"
    return model


def _summary_line(path: str, result) -> str:
    verdict = {True: "valid", False: "INVALID"}.get(result.valid, "UNKNOWN")
    line = f"{path}: {verdict} ({result.model})"
    if result.anomaly_types:
        line += " — " + ", ".join(result.anomaly_types)
    if result.not_:
        line += f"; not {', '.join(result.not_)}"
    if result.also_found:
        line += f"; also found (allowed): {', '.join(result.also_found)}"
    return line


@click.command()
@click.argument("files", nargs=-1, required=True)
@click.option("--workload", "-w", required=True, type=click.Choice(sorted(CHECKERS)),
              help="What the history's operations are.")
@click.option("--model", "-m", default=None,
              help="Consistency model to judge against (default: linearizable for registers, "
                   "strict-serializable for transactional workloads).")
@click.option("--initial-value", default="null", show_default=True,
              help="Register workloads: the value before any write, as JSON.")
@click.option("--total", type=int, default=None, help="bank: the conserved total (default: first complete read).")
@click.option("--no-negative", is_flag=True, help="bank: also forbid negative balances.")
@click.option("--linearizable-keys", is_flag=True,
              help="rw-register: assume each key is linearizable on its own (true of a single PostgreSQL "
                   "server at any level) and infer version orders from real time, as Elle's option does.")
@click.option("--sequential-keys", is_flag=True,
              help="rw-register: assume each key is sequentially consistent (each process sees its versions "
                   "in order) and infer version orders from process order, as Elle's option does.")
@click.option("--wfr-keys/--no-wfr-keys", default=True, show_default=True,
              help="rw-register: a transaction that read v from a key and then wrote w to it orders v before w "
                   "(writes follow reads; Elle's option).")
@click.option("--cycle-search-timeout", type=click.FloatRange(min=0), default=None,
              help="list-append, rw-register: seconds of cycle search per strongly connected component "
                   "(Elle's option; default 10). Types a cut-short search may miss are listed as incomplete.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per file on stdout (JSON Lines).")
@click.option("--explain/--no-explain", default=True, show_default=True,
              help="Print the first example of each anomaly, explained.")
def check(files, workload, model, initial_value, total, no_negative, linearizable_keys, sequential_keys,
          wfr_keys, cycle_search_timeout, as_json, explain) -> None:
    """Judge histories (history.jsonl, history.edn, Jepsen text logs, JSON arrays).

    Exit status: 0 all valid; 1 some history invalid or unknown; 2 bad input.
    """
    from sleuth.imports import load

    model = _model_for(workload, model)
    try:
        initial = json.loads(initial_value)
    except json.JSONDecodeError as e:
        fail_usage(f"--initial-value {initial_value!r} is not JSON ({e.msg})")
    run = checker_for(workload)
    status = EXIT_VALID
    bad_input = False
    progress = None
    if len(files) > 20 and not as_json and sys.stderr.isatty():
        from tqdm import tqdm

        progress = tqdm(total=len(files), unit="history", file=sys.stderr, leave=False)
    for path in files:
        try:
            history = load(path, events=False)  # checkers need ops, not every line
            result = run(history, model=model, initial_value=initial, total=total,
                         no_negative=no_negative, linearizable_keys=linearizable_keys,
                         sequential_keys=sequential_keys, wfr_keys=wfr_keys,
                         cycle_search_timeout=cycle_search_timeout)
        except HistoryError as e:
            click.echo(f"sleuth: error: {e}", err=True)
            bad_input = True
            continue
        finally:
            if progress is not None:
                progress.update(1)
        if result.valid is not True:
            status = EXIT_INVALID
        if as_json:
            out = {"file": path, **result.to_json()}
            sys.stdout.write(json.dumps(out, default=repr) + "\n")
        else:
            click.echo(_summary_line(path, result))
            if explain and result.valid is not True:
                for name in result.anomaly_types:
                    example = result.anomalies[name][0]
                    text = example.get("explanation", "")
                    click.echo("    " + text.replace("\n", "\n    "))
            for note in result.notes:
                click.echo(f"    note: {note}")
    if progress is not None:
        progress.close()
    sys.exit(EXIT_BAD_INPUT if bad_input else status)


@click.command()
@click.option("--db", required=True,
              type=click.Choice(["serializable", "snapshot-isolation", "read-committed", "stale-reads"]),
              help="The simulated database's behaviour.")
@click.option("--txns", type=click.IntRange(min=1), required=True, help="Transactions to generate.")
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


