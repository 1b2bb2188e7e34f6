"""`sleuth campaign FILE.toml` (run a matrix, judge it, write its page and JUnit XML) and `sleuth campaign judge DIR`.

Human text goes to stderr (a tqdm bar over runs and one line per finished
run); with `--json` stdout carries one JSON object and nothing else. Exit
status: Jepsen's test-all over the runs (sleuth.records.campaign.outcome, sleuth.base.exits).
"""

from __future__ import annotations

import json
import os
import signal
import sys

import click

from sleuth.base import exits
from sleuth.base.words import plural


class _DefaultRun(click.Group):
    """`sleuth campaign FILE.toml …` runs; `sleuth campaign judge DIR` re-judges."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_DefaultRun, context_settings={"help_option_names": ["-h", "--help"]})
def campaign() -> None:
    """Nightly torture runs: `sleuth campaign FILE.toml [--dry-run|--resume] …`, `sleuth campaign judge DIR`."""


def _err(message: str) -> None:
    click.echo(message, err=True)


@campaign.command("run")
@click.argument("file")
@click.option("--store", default="store", show_default=True, type=click.Path(file_okay=False),
              help="Campaigns go to STORE/campaigns/<name>/<start time>/.")
@click.option("--dry-run", is_flag=True, help="List the runs and exit.")
@click.option("--resume", is_flag=True, help="Continue the newest campaign of this name: run only what did not finish.")
@click.option("--no-spark", is_flag=True, help="Judge by each run alone (no Spark, no durability audit).")
@click.option("--spark-master", default=None, metavar="spark://HOST:PORT", help="Run the Spark jobs there.")
@click.option("--json", "as_json", is_flag=True, help="Stdout: one JSON object summarizing the campaign.")
def run_campaign(file, store, dry_run, resume, no_spark, spark_master, as_json) -> None:
    """Run every run of the campaign FILE, one after another, then judge and report."""
    from sleuth.campaign.matrix import CampaignError, Run, campaign_dir, load, new_record, run_all
    from sleuth.records.campaign import save

    try:
        plan = load(file)
    except CampaignError as e:
        exits.die(str(e))
    if dry_run:
        _dry_run(plan, as_json)
        return
    try:
        cdir, resumed = campaign_dir(store, plan.name, resume)
    except CampaignError as e:
        exits.die(str(e))
    if resumed:
        record = _load_record(cdir)
        record["dir"] = os.path.abspath(cdir)  # where it is now, should the store have moved
        if [Run.from_json(r["run"]) for r in record["runs"]] != list(plan.runs):
            _err(f"sleuth campaign: {file} changed since {cdir} started; resuming the matrix recorded there")
    else:
        record = new_record(plan, cdir)
        save(record)
    todo = sum(1 for r in record["runs"] if r["status"] != "done")
    _err(f"sleuth campaign {plan.name}: {todo} of {plural(len(record['runs']), 'run')} to go → {cdir}")
    log_path = os.path.join(cdir, "campaign.log")
    interrupted = False
    previous = signal.signal(signal.SIGTERM, _interrupt)
    with open(log_path, "a") as log:
        def say(m: str) -> None:
            log.write(m + "\n")
            log.flush()
        try:
            run_all(record, _err, say, progress=sys.stderr.isatty())
        except KeyboardInterrupt:
            interrupted = True
            _err(f"sleuth campaign: interrupted; finished runs are kept. Continue with: "
                 f"sleuth campaign {file} --resume" + (f" --store {store}" if store != "store" else ""))
        finally:
            signal.signal(signal.SIGTERM, previous)
    _finish(cdir, record, spark=not (no_spark or interrupted), master=spark_master, as_json=as_json)


@campaign.command("judge")
@click.argument("directory")
@click.option("--no-spark", is_flag=True, help="Only re-render the page and JUnit XML from the runs' own verdicts.")
@click.option("--spark-master", default=None, metavar="spark://HOST:PORT", help="Run the Spark jobs there.")
@click.option("--json", "as_json", is_flag=True, help="Stdout: one JSON object summarizing the campaign.")
def judge(directory, no_spark, spark_master, as_json) -> None:
    """Re-run the Spark jobs, the page and the JUnit XML over a finished campaign (or any directory of runs)."""
    from sleuth.campaign.matrix import record_of_runs
    from sleuth.records.campaign import RECORD, save

    if not os.path.isdir(directory):
        exits.die(f"{directory}: not a directory")
    if os.path.exists(os.path.join(directory, RECORD)):
        record = _load_record(directory)
        record["dir"] = os.path.abspath(directory)
    else:
        from sleuth.records.run import RecordError

        try:
            record = record_of_runs(directory)
        except RecordError as e:
            exits.die(str(e))
        if not record["runs"]:
            exits.die(f"{directory}: no campaign.json and no run directories (test.json + results.json) below it")
        save(record)
    _finish(directory, record, spark=not no_spark, master=spark_master, as_json=as_json)


def _load_record(campaign_dir: str) -> dict:
    """campaign.json of `campaign_dir`; one that is not a campaign record is bad input (254, named)."""
    from sleuth.records.campaign import load_record
    from sleuth.records.run import RecordError

    try:
        return load_record(campaign_dir)
    except RecordError as e:
        exits.die(str(e))


def _dry_run(plan, as_json: bool) -> None:
    if as_json:
        from dataclasses import asdict
        click.echo(json.dumps({"campaign": plan.name, "runs": [asdict(r) for r in plan.runs]}))
    else:
        for r in plan.runs:
            click.echo(f"{r.id}  ({r.time_limit:g} s, {r.concurrency} clients, {r.rate:g}/s"
                       + (", expected invalid" if r.expect == "invalid" else "") + ")")
        click.echo(plural(len(plan.runs), "run"), err=True)


def _finish(cdir: str, record: dict, spark: bool, master: str | None, as_json: bool) -> None:
    """Judge (Spark, unless told not to), write the page and junit.xml, print the summary, exit."""
    from sleuth.base.exits import verdict_word
    from sleuth.campaign.matrix import judge_with_spark, run_dirs
    from sleuth.history.jsonl import HistoryError
    from sleuth.records.campaign import label_counts, status, verdict
    from sleuth.reports import campaign_report, junit

    table = None
    if spark and run_dirs(record):
        try:
            table = judge_with_spark(run_dirs(record), cdir, record["name"], master, say=_err)
        except ImportError as e:
            _err(f"sleuth campaign: Spark jobs unavailable ({e}); judged by each run alone")
        except HistoryError as e:  # a run the cluster's workers cannot read (jobs.reachable_on_executors)
            exits.die(str(e))
        except Exception as e:  # the runs are judged already; say why Spark failed and keep their verdicts
            _err(f"sleuth campaign: the Spark jobs failed ({type(e).__name__}: {e}); judged by each run alone")
    if table is None:
        from sleuth.records.run import RecordError

        try:
            table = campaign_report.table_from_runs(record)
        except RecordError as e:  # a run's test.json that is not one: bad input, named
            exits.die(str(e))
    verdicts = campaign_report.verdicts(table)
    page = campaign_report.render(cdir, table, record)
    xml = junit.write(cdir, record, verdicts)
    code = status(record, verdicts)
    labels = [verdict(r, verdicts)[0] for r in record["runs"]]
    changed = _changed_by_spark(record, verdicts)
    for r, label in zip(record["runs"], labels):  # a run's line said its own verdict; Spark's jobs decided otherwise
        v = changed.get(r["run"]["id"])
        if v is None:
            continue
        lost, phantom = int(v["row"].get("lost_writes") or 0), int(v["row"].get("phantom_writes") or 0)
        audit = ", ".join(f"{n} {what}" for n, what in ((lost, "lost"), (phantom, "phantom")) if n)
        _err(f"{label:>7}  {r['run']['id']}  {', '.join(v['anomaly_types']) or v['valid']} by Spark's jobs"
             + (f" (durability audit: {audit} writes)" if audit else "")
             + f"; the run's own checks said {verdict_word(r.get('valid'))}")
    counts = label_counts(labels)
    _err(f"sleuth campaign {record['name']}: " + ", ".join(f"{n} {k}" for k, n in counts.items() if n)
         + f"\n  page: {page}\n  junit: {xml}")
    if as_json:
        click.echo(json.dumps({"campaign": record["name"], "dir": os.path.abspath(cdir), "page": page,
                               "junit": os.path.abspath(xml), "exit": code, "counts": counts,
                               "runs": [{"id": r["run"]["id"], "outcome": lab, "run_dir": r.get("run_dir"),
                                         "valid": r.get("valid"), "anomaly-types": r.get("anomaly-types", []),
                                         "also-found": r.get("also-found", []),
                                         **({"spark-anomaly-types": changed[r["run"]["id"]]["anomaly_types"]}
                                            if r["run"]["id"] in changed else {})}
                                        for r, lab in zip(record["runs"], labels)]}))
    sys.exit(code)


def _changed_by_spark(record: dict, verdicts: dict) -> dict[str, dict]:
    """Run id -> Spark's verdict, for each finished run whose verdict Spark's jobs changed."""
    from sleuth.records.campaign import run_key
    out = {}
    for r in record["runs"]:
        v = verdicts.get(run_key(r["run_dir"])) if r.get("status") == "done" and r.get("run_dir") else None
        if v is not None and v["valid"] != r.get("valid"):
            out[r["run"]["id"]] = v
    return out


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt
