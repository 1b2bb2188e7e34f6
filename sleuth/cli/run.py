"""`sleuth run`, `sleuth report`, `sleuth serve`: live runs, their reports, the store over HTTP."""

from __future__ import annotations

import json
import os
import sys

import click

from sleuth.cli.cluster import FAULT_CHOICES
from sleuth.exits import BAD_INPUT


def _die(message: str) -> None:
    click.echo(f"sleuth: error: {message}", err=True)
    sys.exit(BAD_INPUT)


@click.command()
@click.option("--target", default="reference", show_default=True,
              help="reference (the bundled cluster), postgres (a local PostgreSQL sleuth starts), a postgres:// URL, "
                   "mariadb or mariadb+snapshot-isolation (a local MariaDB sleuth starts, the latter with "
                   "innodb_snapshot_isolation=ON), or a mysql://user@host:port/db URL.")
@click.option("--runtime", type=click.Choice(["docker", "local", "ssh"]), default=None,
              help="Where the reference cluster runs (default: docker where an engine answers, else local; "
                   "ssh with --nodes).")
@click.option("--nodes", "nodes_file", default=None, metavar="FILE",
              help="With --runtime ssh: the hosts, one [user@]address[:port] [key=PATH] per line.")
@click.option("--workload", "-w", required=True,
              type=click.Choice(["register", "list-append", "rw-register", "bank", "counter"]))
@click.option("--nemesis", default=None, help="Comma-separated faults: kill, pause, partition, dual-leader, clock.")
@click.option("--nemesis-interval", type=click.FloatRange(min=0.5), default=5.0, show_default=True,
              help="Seconds between a fault and its heal, and between heal and the next fault.")
@click.option("--fault", multiple=True, help=f"Reference-cluster bug switch: {', '.join(FAULT_CHOICES)}.")
@click.option("--isolation", default=None,
              help="The target's own level: strict-serializable | serializable | strong-session-serializable "
                   "(reference); read-committed | repeatable-read | serializable (PostgreSQL); read-uncommitted | "
                   "read-committed | repeatable-read | serializable (MariaDB/MySQL).")
@click.option("--time-limit", type=click.FloatRange(min=1), default=30, show_default=True, help="Seconds of load.")
@click.option("--concurrency", type=click.IntRange(1, 256), default=10, show_default=True)
@click.option("--rate", type=click.FloatRange(min=0), default=200, show_default=True,
              help="Operations per second over all clients (0 = as fast as they go).")
@click.option("--keys", type=click.IntRange(1, 10_000), default=8, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--store", default="store", show_default=True, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="End with one JSON line summarizing the run.")
def run(target, runtime, nodes_file, workload, nemesis, nemesis_interval, fault, isolation, time_limit, concurrency,
        rate, keys, seed, store, as_json) -> None:
    """Run a workload against a live target under faults, check it, write a report.

    Exit status: 0 valid, 1 invalid, 2 unknown or crashed, 254 bad usage (one line on stderr).
    """
    from sleuth.cli.cluster import _faults
    from sleuth.runner import RunConfig, execute
    from sleuth.targets import Unsupported

    cfg = RunConfig(target=target, runtime=runtime, nodes_file=nodes_file, workload=workload, nemesis=nemesis,
                    faults=tuple(_faults(fault)), isolation=isolation, time_limit=time_limit,
                    concurrency=concurrency, rate=rate, keys=keys, seed=seed, store=store,
                    nemesis_interval=nemesis_interval, progress=sys.stderr.isatty())
    try:
        s = execute(cfg, say=lambda m: click.echo(m, err=True))
    except Unsupported as e:
        _die(str(e))
    _summary(s)
    if as_json:
        click.echo(json.dumps({"valid": s["valid"], "anomaly-types": s["anomaly-types"],
                               "run_dir": s["run_dir"], "ops": s["ops"], "ok": s["ok"],
                               "fail": s["fail"], "info": s["info"]}))
    sys.exit({True: 0, False: 1}.get(s["valid"], 2))


def _summary(s: dict) -> None:
    t, r = s["test"], s["results"]
    verdict = {True: "VALID", False: "INVALID"}.get(s["valid"], "UNKNOWN")
    out = click.echo
    out("")
    out(f"  {verdict}  {t['workload']} on {t['target']}"
        + (f" ({t.get('runtime')})" if t.get("runtime") else "") + f", model {r.get('model', t.get('model'))}")
    out(f"  faults: {', '.join(t['fault']) or 'none'}   nemesis: {', '.join(t['nemesis']) or 'none'}   "
        f"isolation: {t.get('isolation')}   seed {t['seed']}")
    out(f"  ops: {s['ops']}  ok {s['ok']}  fail {s['fail']}  info {s['info']}  "
        f"in {t['finished'] - t['started']:.0f} s")
    if s["anomaly-types"]:
        out(f"  anomalies: {', '.join(s['anomaly-types'])}")
        for name in s["anomaly-types"][:4]:
            ex = (r.get("anomalies", {}).get(name) or [{}])[0]
            text = str(ex.get("explanation", "")).splitlines()
            if text:
                out(f"    {name}: {text[0][:200]}")
    if r.get("also-found"):
        out(f"  also found (allowed by the model): {', '.join(r['also-found'])}")
    for n in r.get("notes", [])[:3]:
        out(f"  note: {n}")
    if t.get("nemesis_errors"):
        out(f"  nemesis errors: {'; '.join(t['nemesis_errors'][:3])}")
    out(f"  run: {s['run_dir']}")
    if s.get("report"):
        out(f"  report: {s['report']}")


@click.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
def report(run_dir) -> None:
    """Re-render a run's report from its files."""
    from sleuth.reports.run_report import render

    for f in ("history.jsonl", "results.json"):
        if not os.path.exists(os.path.join(run_dir, f)):
            _die(f"{run_dir}: no {f} here; is this a run directory?")
    click.echo(render(run_dir))


@click.command()
@click.option("--store", default="store", show_default=True, type=click.Path(file_okay=False))
@click.option("--port", type=int, default=8080, show_default=True)
def serve(store, port) -> None:
    """Serve the store's reports over HTTP on 127.0.0.1."""
    from sleuth.reports.serve import serve as serve_store

    click.echo(f"serving {store} on http://127.0.0.1:{port}/")
    serve_store(store, "127.0.0.1", port)
