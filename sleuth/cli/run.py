"""`sleuth run`, `sleuth report`, `sleuth serve`: live runs, their reports, the store over HTTP."""

from __future__ import annotations

import json
import os
import sys

import click

from sleuth.base import exits
from sleuth.cluster import RUNTIMES
from sleuth.cluster.faults import FAULTS
from sleuth.nemesis.faults import CHOICES
from sleuth.records.measure import duration_text
from sleuth.workloads.clients import WORKLOADS


def anomaly_line(name: str, explanation: str) -> str | None:
    """The summary's line for an anomaly type: its name and its first example's first line,
    clipped, and how many more lines the report shows. A cycle's explanation names its
    type already ("G-single: a cycle with …"): the name is not said twice."""
    text = explanation.splitlines()
    if not text:
        return None
    first = text[0].removeprefix(f"{name}: ")
    rest = len(text) - 1
    more = f" (+{rest} line{'s' if rest > 1 else ''} in the report)" if rest else ""
    return f"{name}: {clip(first, 200)}{more}"


def clip(text: str, width: int) -> str:
    """`text` cut to `width` characters, never silently: a cut line ends in an ellipsis."""
    return text if len(text) <= width else text[:width - 1].rstrip() + "…"


@click.command()
@click.option("--target", default="reference", show_default=True,
              help="reference (the bundled cluster), postgres (a local PostgreSQL sleuth starts), a postgres:// URL, "
                   "mariadb or mariadb+snapshot-isolation (a local MariaDB sleuth starts, the latter with "
                   "innodb_snapshot_isolation=ON), galera or galera+relaxed-flush (a local 3-node MariaDB Galera "
                   "cluster sleuth starts, the latter with innodb_flush_log_at_trx_commit=0), a "
                   "mysql://user@host:port/db URL, etcd or etcd+serializable-reads (an etcd cluster sleuth starts), "
                   "or FILE.toml (a database described in a file, docs/targets.md).")
@click.option("--nodes-count", type=click.IntRange(1, 9), default=None,
              help="Members of a cluster sleuth starts (etcd: 3 by default, or 5; a .toml: its `nodes`).")
@click.option("--runtime", type=click.Choice(RUNTIMES), default=None,
              help="Where the reference cluster runs (default: docker where an engine answers, else local; "
                   "ssh with --nodes); etcd and a FILE.toml: local (default) or docker.")
@click.option("--nodes", "nodes_file", default=None, metavar="FILE",
              help="With --runtime ssh: the hosts, one [user@]address[:port] [key=PATH] per line.")
@click.option("--workload", "-w", required=True,
              type=click.Choice(list(WORKLOADS)))
@click.option("--nemesis", default=None, help=f"Comma-separated faults: {CHOICES}; default none.")
@click.option("--nemesis-interval", type=click.FloatRange(min=0.5), default=5.0, show_default=True,
              help="Seconds between a fault and its heal, and between heal and the next fault.")
@click.option("--fault", multiple=True, help=f"Reference-cluster bug switch: {', '.join(FAULTS)}.")
@click.option("--isolation", default=None,
              help="The target's own level: strict-serializable | serializable | strong-session-serializable "
                   "(reference); read-committed | repeatable-read | serializable (PostgreSQL); read-uncommitted | "
                   "read-committed | repeatable-read | serializable (MariaDB/MySQL/Galera). Default: the target's strongest.")
@click.option("--time-limit", type=click.FloatRange(min=1), default=30, show_default=True, help="Seconds of load.")
@click.option("--concurrency", type=click.IntRange(1, 256), default=10, show_default=True)
@click.option("--rate", type=click.FloatRange(min=0), default=200, show_default=True,
              help="Operations per second over all clients (0 = as fast as they go).")
@click.option("--keys", type=click.IntRange(1, 10_000), default=8, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--store", default="store", show_default=True, type=click.Path(file_okay=False))
@click.option("--shrink-budget", type=click.FloatRange(min=0), default=20, show_default=True,
              help="Seconds to shrink an invalid history into counterexample.jsonl (0: don't).")
@click.option("--drop-tables", is_flag=True,
              help="A URL target: first drop sleuth's own tables (sleuth_…) that an earlier run left there. "
                   "Without it a run refuses (exit 254) to start where one exists; it never touches other tables.")
@click.option("--json", "as_json", is_flag=True,
              help="stdout carries one JSON object summarizing the run, nothing else (the summary goes to stderr).")
@click.option("--online", is_flag=True,
              help="Judge the history as it is recorded: anomalies are said as they are found "
                   "(and counted in the progress line). docs/online.md.")
@click.option("--fail-fast", is_flag=True,
              help="At the first anomaly found online, stop the load, heal the faults, judge what was "
                   "recorded, write the report and exit 1 (implies --online).")
def run(target, nodes_count, runtime, nodes_file, workload, nemesis, nemesis_interval, fault, isolation, time_limit, concurrency,
        rate, keys, seed, store, shrink_budget, drop_tables, as_json, online, fail_fast) -> None:
    """Run a workload against a live target under faults, check it, write a report.

    Exit status (docs/exit-status.md): 0 valid, 1 invalid, 2 unknown (could not decide,
    interrupted, nothing completed), 254 bad arguments, 255 sleuth itself failed. SIGINT or
    SIGTERM stops the run, heals, stops the nodes and judges what was recorded.
    """
    from sleuth.cli.cluster import _faults
    from sleuth.records.store import StoreError
    from sleuth.run.runner import RunConfig, execute
    from sleuth.targets import Unsupported

    cfg = RunConfig(target=target, runtime=runtime, nodes_file=nodes_file, nodes_count=nodes_count,
                    workload=workload, nemesis=nemesis,
                    faults=tuple(_faults(fault)), isolation=isolation, time_limit=time_limit,
                    concurrency=concurrency, rate=rate, keys=keys, seed=seed, store=store,
                    nemesis_interval=nemesis_interval, progress=sys.stderr.isatty(),
                    shrink_budget=shrink_budget, drop_tables=drop_tables, online=online or fail_fast,
                    fail_fast=fail_fast)
    try:
        rec = execute(cfg, say=lambda m: click.echo(m, err=True))
    except Unsupported as e:
        exits.die(str(e))
    except StoreError as e:  # nothing started: no run directory to hold a crash.txt
        _crashed(str(e), as_json)
    except Exception as e:  # sleuth's own failure before the run began
        _crashed(f"{type(e).__name__}: {e}", as_json)
    if rec.status == exits.BAD_INPUT:  # the user's target failed before the first operation
        if as_json:
            click.echo(json.dumps(rec.summary_json()))
        exits.die(rec.reason or "the target failed")
    _summary(rec)
    if rec.crash_file or (rec.status == exits.CRASHED):
        click.echo(f"sleuth: error: {rec.reason}" + (f" (traceback in {rec.crash_file})" if rec.crash_file else ""),
                   err=True)
    if as_json:
        click.echo(json.dumps(rec.summary_json()))
    sys.exit(rec.status)


def _crashed(message: str, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"valid": "unknown", "anomaly-types": [], "run_dir": None,
                               "exit": exits.CRASHED, "reason": f"crashed: {message}"}))
    exits.die(message, exits.CRASHED)


def _summary(rec) -> None:
    """The human summary, on stderr (stdout is for --json)."""
    c = rec.config
    verdict = "CRASHED" if rec.status == exits.CRASHED else exits.verdict_headline(rec.valid)

    def out(line: str) -> None:
        click.echo(line, err=True)

    out("")
    out(f"  {verdict}  {c.workload} on {c.target}" + (f" ({rec.runtime})" if rec.runtime else "")
        + (f", model {rec.checks.model}" if rec.checks.model else ""))  # bank, counter, source: no model
    nemesis = ", ".join(rec.nemesis) or "none"
    if rec.nemesis:
        happened = ", ".join(f"{f} ×{n}" for f, n in sorted(rec.faults.items()))
        nemesis += f" ({happened or 'no fault was injected'})"
    isolation = f"   isolation: {c.isolation}" if c.isolation else ""  # etcd, described: none to choose
    out(f"  faults: {', '.join(c.faults) or 'none'}   nemesis: {nemesis}{isolation}   seed {c.seed}")
    n = rec.counts
    # the run's duration as its report and test.json give it (sleuth.records.measure.duration), same format
    out(f"  ops: {n['ops']}  ok {n['ok']}  fail {n['fail']}  info {n['info']}"
        + (f"  in {duration_text(rec.duration)}" if rec.duration is not None else ""))
    if rec.reason:
        out(f"  reason: {rec.reason}")
    from sleuth.checker.result import found_counts
    results = rec.results
    anomalies, found = results.get("anomalies", {}), found_counts(results)
    if rec.anomaly_types:
        out("  anomalies: " + ", ".join(f"{t} {found[t]}" if t in found else t for t in rec.anomaly_types))
        for name in rec.anomaly_types[:4]:
            line = anomaly_line(name, str((anomalies.get(name) or [{}])[0].get("explanation", "")))
            if line:
                out(f"    {line}")
    if results.get("also-found"):  # what the model allows, found all the same (README's tables)
        out("  found (allowed): " + ", ".join(f"{t} {found[t]}" if t in found else t for t in results["also-found"]))
    for note in rec.notes[:3]:
        out(f"  note: {note}")
    if rec.nemesis_errors:
        out(f"  nemesis errors: {'; '.join(rec.nemesis_errors[:3])}")
    out(f"  run: {rec.run_dir}")
    if rec.report:
        out(f"  report: {rec.report}")


@click.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
def report(run_dir) -> None:
    """Re-render a run's report from its files.

    Exit status: 0 written, 254 not a run directory (or an unreadable history), 255 failed.
    """
    from sleuth.history.jsonl import HistoryError
    from sleuth.records import store
    from sleuth.records.run import RecordError
    from sleuth.reports.run_report import render

    for f in (store.HISTORY, store.TEST, store.RESULTS):
        if not os.path.exists(os.path.join(run_dir, f)):
            exits.die(f"{run_dir}: no {f} here; is this a run directory?")
    try:
        click.echo(render(run_dir))
    except (HistoryError, RecordError) as e:
        exits.die(str(e))
    except Exception as e:
        exits.die(f"{run_dir}: the report could not be written: {type(e).__name__}: {e}", exits.CRASHED)


@click.command()
@click.option("--store", default="store", show_default=True, type=click.Path(file_okay=False))
@click.option("--port", type=int, default=8080, show_default=True)
def serve(store, port) -> None:
    """Serve the store's reports over HTTP on 127.0.0.1.

    Exit status: 0 after SIGINT or SIGTERM, 254 a port that cannot be bound.
    """
    import signal

    from sleuth.reports.serve import make_server

    try:
        server = make_server(store, "127.0.0.1", port)
    except OSError as e:
        exits.die(f"--port {port}: {e.strerror or e}")

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    click.echo(f"serving {store} on http://127.0.0.1:{server.server_address[1]}/", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    sys.exit(exits.VALID)
