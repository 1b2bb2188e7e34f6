"""Campaigns: a matrix of runs from a TOML file, run one after another, each judged as Jepsen's test-all.

A campaign file (docs/campaigns.md) has a `[campaign]` table of defaults and
any number of `[[matrix]]` blocks; each block is a product of its lists
(workloads × nemeses × targets × fault switches × isolation levels × seeds),
and `[[exclude]]` tables drop the combinations they match. Names are checked
against their owners before anything runs (workloads:
`sleuth.workloads.clients.WORKLOADS`; nemesis kinds and what a target can do:
`sleuth.nemesis.faults.parse_mix`; fault switches:
`sleuth.cluster.faults.FAULTS`; isolation levels: each target's
`isolations`), so a typo costs one line on stderr, not a night.

A run with a fault switch on is *expected invalid*: the switch reproduces a
real bug, and the campaign shows the checkers catch it. Such a run found
invalid is "caught" (a pass); found valid it is "missed" (a failure, exit 1).
Everything else combines as Jepsen's `test-all` does (`sleuth.base.exits.combine`).

The campaign's own record, `campaign.json` in its directory, holds the
matrix and each run's outcome, rewritten atomically after every run, so an
interrupted campaign keeps every finished run and `--resume` runs only the
rest.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
import tomllib
from dataclasses import dataclass
from typing import Any

import msgspec

from sleuth.base import exits
from sleuth.base.names import name_problem
from sleuth.records.campaign import RECORD, CampaignRecord, Run, RunEntry, save, verdict

__all__ = ["Run", "RunEntry"]  # the matrix cell and a run's entry: sleuth/records/campaign.py owns them

DIMENSIONS = ("workload", "target", "nemesis", "fault", "isolation", "seed")
SETTINGS = {"time-limit": float, "concurrency": int, "rate": float, "keys": int,
            "nemesis-interval": float, "runtime": str, "online": bool, "fail-fast": bool}
DEFAULTS = {"time-limit": 30.0, "concurrency": 10, "rate": 200.0, "keys": 8,
            "nemesis-interval": 5.0, "runtime": None, "online": False, "fail-fast": False}


class CampaignError(Exception):
    """Bad campaign input: the message names the file and the key (and line, where TOML gives one)."""


@dataclass(frozen=True)
class Campaign:
    name: str
    file: str
    runs: tuple[Run, ...]


def load(path: str) -> Campaign:
    """Parse and expand a campaign file; every name checked. Raises CampaignError."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as e:
        raise CampaignError(f"{path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:  # its message carries "(at line L, column C)"
        raise CampaignError(f"{path}: {e}") from None
    return expand(doc, path)


def expand(doc: dict, path: str) -> Campaign:
    """The runs a parsed campaign document describes, in file order, exclusions dropped."""
    def bad(where: str, msg: str) -> CampaignError:
        return CampaignError(f"{path}: {where}: {msg}")

    unknown = set(doc) - {"campaign", "matrix", "exclude"}
    if unknown:
        raise bad(sorted(unknown)[0], "unknown table; a campaign has [campaign], [[matrix]] and [[exclude]]")
    head = doc.get("campaign", {})
    if not isinstance(head, dict):
        raise bad("campaign", "must be a table")
    name = head.get("name") or os.path.splitext(os.path.basename(path))[0]
    if (problem := name_problem(name)) is not None:
        raise bad("campaign.name", problem)
    base = _settings(head, "campaign", bad, extra={"name", "seeds", "expect"} | set(DIMENSIONS))
    blocks = doc.get("matrix")
    if not isinstance(blocks, list) or not blocks:
        raise bad("matrix", "at least one [[matrix]] block is needed")
    excludes = doc.get("exclude", [])
    if not isinstance(excludes, list):
        raise bad("exclude", "must be an array of tables ([[exclude]])")
    checked_excludes = []
    for i, e in enumerate(excludes):
        if not isinstance(e, dict):
            raise bad(f"exclude[{i + 1}]", "must be a table")
        checked_excludes.append(_dims(e, f"exclude[{i + 1}]", bad, head=None))
    runs: dict[str, tuple[Run, str]] = {}
    targets: dict[tuple, Any] = {}  # building a target starts nothing; one per kind is enough
    for i, block in enumerate(blocks):
        where = f"matrix[{i + 1}]"
        if not isinstance(block, dict):
            raise bad(where, "must be a table")
        settings = {**base, **_settings(block, where, bad, extra=set(DIMENSIONS) | {"expect"})}
        dims = _dims(block, where, bad, head=head)
        expect = block.get("expect", head.get("expect"))
        if expect not in (None, "valid", "invalid"):
            raise bad(f"{where}.expect", f"{expect!r}: valid or invalid")
        for w, t, n, fl, asked, seed in itertools.product(
                dims["workload"], dims["target"], dims["nemesis"], dims["fault"], dims["isolation"] or [None],
                dims["seed"]):
            cell = {"workload": w, "target": t, "nemesis": n, "fault": fl, "isolation": asked, "seed": seed}
            runtime = settings["runtime"] if t == "reference" else None
            iso = cell["isolation"] = _check_cell(cell, runtime, where, bad, targets)
            if any(_matches(ex, cell) for ex in checked_excludes):
                continue
            run = Run(id=run_id(cell), workload=w, target=t, nemesis=n, fault=fl, isolation=iso, seed=seed,
                      time_limit=settings["time-limit"], concurrency=settings["concurrency"],
                      rate=settings["rate"], keys=settings["keys"],
                      nemesis_interval=settings["nemesis-interval"], runtime=runtime,
                      expect=expect or ("invalid" if fl else "valid"),
                      online=settings["online"] or settings["fail-fast"], fail_fast=settings["fail-fast"])
            if run.id in runs:
                raise bad(where, f"run {run.id} is already in {runs[run.id][1]}")
            runs[run.id] = (run, where)
    if not runs:
        raise bad("exclude", "every run of the matrix is excluded")
    return Campaign(name=name, file=path, runs=tuple(r for r, _ in runs.values()))


def run_id(cell: dict) -> str:
    """A stable, readable name for a cell: its run directory and its JUnit test case."""
    from sleuth.targets import label

    return ".".join([cell["workload"], label(cell["target"]), (cell["nemesis"] or "none").replace(",", "+"),
                     (cell["fault"] or "none").replace(",", "+"), cell["isolation"] or "default",
                     f"s{cell['seed']}"])


def _settings(table: dict, where: str, bad, extra: set[str]) -> dict:
    out = dict(DEFAULTS) if where == "campaign" else {}
    for k, v in table.items():
        if k in extra:
            continue
        if k not in SETTINGS:
            raise bad(f"{where}.{k}", f"unknown key; one of {', '.join([*DIMENSIONS, *SETTINGS, 'expect'])}")
        typ = SETTINGS[k]
        if typ is bool:
            if not isinstance(v, bool):
                raise bad(f"{where}.{k}", f"{v!r} is not true or false")
            out[k] = v
            continue
        if typ is str and not isinstance(v, str) or typ is not str and (
                not isinstance(v, int | float) or isinstance(v, bool) or typ is int and not isinstance(v, int)):
            raise bad(f"{where}.{k}", f"{v!r} is not a {typ.__name__}")
        if typ is not str and v < (0 if k == "rate" else 1):
            raise bad(f"{where}.{k}", f"{v!r} is too small")
        out[k] = typ(v)
    if out.get("runtime") not in (None, "local", "docker", "ssh"):
        raise bad(f"{where}.runtime", f"{out['runtime']!r}: local, docker or ssh")
    return out


def _as_list(v: Any) -> list:
    return v if isinstance(v, list) else [v]


def _dims(table: dict, where: str, bad, head: dict | None) -> dict[str, list]:
    """A block's dimensions as lists (defaults from `head`, the [campaign] table), every name checked.

    With `head=None` the table is an exclusion: only the keys it lists, the rest empty (match anything).
    """
    from sleuth.cluster.faults import FAULTS
    from sleuth.nemesis.faults import KINDS
    from sleuth.workloads.clients import WORKLOADS

    exclusion = head is None
    if exclusion and set(table) - set(DIMENSIONS):
        raise bad(f"{where}.{sorted(set(table) - set(DIMENSIONS))[0]}", f"unknown key; one of {', '.join(DIMENSIONS)}")
    fallback = {"workload": [], "target": ["reference"], "nemesis": ["none"], "fault": ["none"],
                "isolation": [], "seed": [0]}
    out = {}
    for key, default in fallback.items():
        if exclusion:
            out[key] = _as_list(table.get(key, []))
        else:
            out[key] = _as_list(table.get(key, head.get("seeds" if key == "seed" else key, default)))
    if not exclusion and not out["workload"]:
        raise bad(f"{where}.workload", "missing: which workloads to run")
    for w in out["workload"]:
        if w not in WORKLOADS:
            raise bad(f"{where}.workload", f"unknown workload {w!r}; one of {', '.join(WORKLOADS)}")
    for t in out["target"]:  # which targets exist is make_target's to say (_check_cell asks it)
        if not isinstance(t, str):
            raise bad(f"{where}.target", f"{t!r} is not a name")
    out["nemesis"] = [_names(v, KINDS, f"{where}.nemesis", "nemesis", bad) for v in out["nemesis"]]
    out["fault"] = [_names(v, FAULTS, f"{where}.fault", "fault switch", bad) for v in out["fault"]]
    for seed in out["seed"]:
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise bad(f"{where}.seed", f"{seed!r} is not an integer")
    for iso in out["isolation"]:
        if not isinstance(iso, str):
            raise bad(f"{where}.isolation", f"{iso!r} is not a name")
    return out


def _names(value: Any, vocabulary: tuple[str, ...], where: str, what: str, bad) -> str:
    """"kill, partition" -> "kill,partition" (a name given twice counts once); "none" or "" -> ""."""
    if not isinstance(value, str):
        raise bad(where, f"{value!r} is not a name")
    parts = list(dict.fromkeys(p.strip() for p in value.split(",") if p.strip() and p.strip() != "none"))
    for p in parts:
        if p not in vocabulary:
            raise bad(where, f"unknown {what} {p!r}; one of none, {', '.join(vocabulary)}")
    return ",".join(parts)


def _check_cell(cell: dict, runtime: str | None, where: str, bad, targets: dict) -> str | None:
    """Ask the target's own rules whether it can run this cell; return its isolation level."""
    from sleuth.nemesis.faults import parse_mix
    from sleuth.targets import Unsupported, make_target, refuse_upstream
    from sleuth.workloads.clients import WORKLOADS

    faults = tuple(cell["fault"].split(",")) if cell["fault"] else ()
    key = (cell["target"], runtime, faults)
    try:
        if key not in targets:
            targets[key] = make_target(cell["target"], runtime, faults)
        target = targets[key]
        parse_mix(cell["nemesis"], target)
        refuse_upstream(target, WORKLOADS[cell["workload"]])
        target.workload(cell["workload"], 1)  # a target with workloads of its own (etcd) may lack this one
    except Unsupported as e:
        raise bad(where, f"{run_id(cell)}: {e}") from None
    iso = cell["isolation"] or target.default_isolation()
    if target.isolations and iso not in target.isolations:
        raise bad(f"{where}.isolation", f"{iso!r}: target {cell['target']} offers {', '.join(target.isolations)}")
    return iso


def _matches(exclusion: dict[str, list], cell: dict) -> bool:
    return all(not values or cell[k] in values for k, values in exclusion.items())


# --- outcomes -------------------------------------------------------------------------------------

# --- running --------------------------------------------------------------------------------------

def execute_run(run: Run, store: str, say) -> RunEntry:
    """The one call into the runner: run `run` with its run directory under `store`; its entry
    in the campaign record, done: valid, anomaly-types, also-found (allowed by the model),
    run_dir, report, ops/ok/fail/info, crashed (None, or why sleuth itself failed).
    """
    from sleuth.run.runner import INTERRUPTED, RunConfig, execute

    cfg = RunConfig(target=run.target, runtime=run.runtime, workload=run.workload, nemesis=run.nemesis or None,
                    faults=tuple(run.fault.split(",")) if run.fault else (), isolation=run.isolation,
                    time_limit=run.time_limit, concurrency=run.concurrency, rate=run.rate, keys=run.keys,
                    seed=run.seed, store=store, nemesis_interval=run.nemesis_interval, name=run.id,
                    progress=False, online=run.online, fail_fast=run.fail_fast)
    try:
        rec = execute(cfg, say=say)  # a run record; sleuth's own failures come back as status 255
    except Exception as e:  # sleuth failed before the run could even start (no run directory)
        return RunEntry.of_outcome(run, valid="unknown", anomaly_types=[], run_dir=None, report=None, counts={},
                                   crashed=f"{type(e).__name__}: {e}")
    if rec.ended == INTERRUPTED:  # SIGINT/SIGTERM: the runner healed and judged; the campaign stops
        raise KeyboardInterrupt
    return RunEntry.of_outcome(run, valid=rec.valid, anomaly_types=list(rec.anomaly_types),
                               also_found=list(rec.results.get("also-found", [])),
                               run_dir=os.path.abspath(rec.run_dir), report=rec.report, counts=rec.counts,
                               crashed=crash_of(rec.status, rec.reason))


def crash_of(status: int | None, reason: str | None) -> str | None:
    """Why a run was not carried out (its `crashed` in the campaign record), from what its
    record says: the run's exit status and reason (RunRecord, test.json's `status`/`reason`).

    A run whose target (a URL: the user's database) failed before its first operation is
    exit 254 to `sleuth run`; in a campaign it is, as a crash, a run not carried out."""
    if status in (exits.CRASHED, exits.BAD_INPUT):
        return reason or f"exit {status}"
    return None


def new_record(campaign: Campaign, campaign_dir: str) -> dict:
    return CampaignRecord(name=campaign.name, file=os.path.abspath(campaign.file), dir=os.path.abspath(campaign_dir),
                          started=time.time(), runs=[RunEntry(run=r) for r in campaign.runs]).to_json()


def campaign_dir(store: str, name: str, resume: bool) -> tuple[str, bool]:
    """`store/campaigns/<name>/<start time>/`: the newest one with --resume, else a new one."""
    parent = os.path.join(store, "campaigns", name)
    if resume:
        earlier = sorted(d for d in (os.listdir(parent) if os.path.isdir(parent) else [])
                         if os.path.exists(os.path.join(parent, d, RECORD)))
        if earlier:
            return os.path.join(parent, earlier[-1]), True
        raise CampaignError(f"--resume: no campaign {name!r} in {parent}")
    stamp = time.strftime("%Y%m%dT%H%M%S")
    d, k = os.path.join(parent, stamp), 1
    while os.path.exists(d):
        k += 1
        d = os.path.join(parent, f"{stamp}-{k}")
    os.makedirs(d)
    return d, False


def run_all(record: dict, say, log, progress: bool) -> None:
    """Run every pending run of `record` in order, saving the record after each.

    KeyboardInterrupt (SIGINT, or SIGTERM turned into it by the CLI) ends the
    current run through the runner's own teardown, marks it interrupted, saves,
    and propagates.
    """
    from tqdm import tqdm

    runs = record["runs"]
    pending = [i for i, r in enumerate(runs) if r["status"] != "done"]
    bar = tqdm(total=len(runs), initial=len(runs) - len(pending), unit="run",
               disable=not progress, file=sys.stderr, dynamic_ncols=True)
    store = os.path.join(record["dir"], "runs")
    try:
        for i in pending:
            run = Run.from_json(runs[i]["run"])
            bar.set_description(run.id)
            started = time.time()
            runs[i] = RunEntry(run=run, status="running", started=started).to_json()
            save(record)
            try:
                done = execute_run(run, store, log)
            except KeyboardInterrupt:
                runs[i] = RunEntry(run=run, status="interrupted", started=started).to_json()
                record["interrupted"] = True
                save(record)
                raise
            r = runs[i] = msgspec.structs.replace(done, started=started, finished=time.time()).to_json()
            save(record)
            label, _ = verdict(r)
            line = (f"{label:>7}  {run.id}  {exits.verdict_word(r['valid'])}"
                    + (f"  {', '.join(r['anomaly-types'])}" if r["anomaly-types"] else "")
                    + (f"  crashed: {str(r['crashed']).splitlines()[0]}" if r.get("crashed") else ""))
            if progress:
                bar.write(line, file=sys.stderr)
            else:
                say(line)
            bar.update(1)
    finally:
        bar.close()
    record["finished"], record["interrupted"] = time.time(), False
    save(record)


def run_dirs(record: dict) -> list[str]:
    return [r["run_dir"] for r in record["runs"] if r.get("status") == "done" and r.get("run_dir")]


def judge_with_spark(dirs: list[str], out_dir: str, campaign: str, master: str | None, say):
    """The one call into the Spark jobs (sleuth.spark, issue 12): the campaign table, as pandas."""
    from sleuth.spark.jobs import judge_runs

    return judge_runs(dirs, out_dir, campaign=campaign, master=master, say=say)


def record_of_runs(directory: str) -> dict:
    """A campaign record for any directory of runs (`sleuth campaign judge DIR` without campaign.json).

    Each run directory below `directory` (it has test.json and results.json)
    becomes one finished run; one with a fault switch on is expected invalid. A record file
    that is not one is refused (`sleuth.records.run.RecordError`, naming it), not skipped.
    """
    from sleuth.records import store
    from sleuth.records.run import Results, TestRecord

    runs = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        if store.TEST in files and store.RESULTS in files:
            dirs.clear()
            test = TestRecord.read(store.test_path(root))
            results = Results.read(store.results_path(root))
            cell = {"workload": test.workload or "?", "target": test.target or "?", "nemesis": ",".join(test.nemesis),
                    "fault": ",".join(test.fault), "isolation": test.isolation, "seed": test.seed or 0}
            run = Run(id=os.path.relpath(root, directory), **cell, time_limit=test.time_limit or 0,
                      concurrency=test.concurrency or 0, rate=test.rate or 0, keys=test.keys or 0,
                      nemesis_interval=test.nemesis_interval or 0, runtime=test.runtime,
                      expect="invalid" if cell["fault"] else "valid")
            runs.append(RunEntry.of_outcome(
                run, valid=results.valid, anomaly_types=results.anomaly_types, run_dir=os.path.abspath(root),
                report=store.report_path(root), counts=test.summary, crashed=crash_of(test.status, test.reason),
                started=test.started, finished=test.finished or None))
    name = os.path.basename(os.path.normpath(os.path.abspath(directory)))
    return CampaignRecord(name=name, dir=os.path.abspath(directory), runs=runs).to_json()
