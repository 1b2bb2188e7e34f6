"""A campaign's record, campaign.json, as types: the campaign (`CampaignRecord`), each run's
entry in it (`RunEntry`) and the matrix cell the entry is for (`Run`).

As test.json and results.json (sleuth/records/run.py): one writer (`save`, after
every run), one reader (`CampaignRecord.read`), a `format` field, and a file
written before `format` existed read as it is (its entries had the same
fields, a pending one only `run` and `status`; a cell without `online` or
`fail_fast` gets their defaults). A run's entry is made in one way: from its
cell (`RunEntry(run=…)`, pending), then replaced whole as it runs
(`msgspec.structs.replace`) or from a finished run's own record
(`RunEntry.of_outcome`), never edited key by key.

In memory the campaign code and its pages hand the record on as its dict
(`to_json`), which `save` makes this type again before writing it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any, Literal

import msgspec

from sleuth.base import exits
from sleuth.base.jsonfile import write_json
from sleuth.records.run import Record


@dataclass(frozen=True)
class Run:
    """One cell of the matrix: everything `sleuth run` needs, plus what the campaign expects of it."""
    id: str
    workload: str
    target: str
    nemesis: str  # comma-joined kinds, "" for none
    fault: str  # comma-joined switches, "" for none
    isolation: str | None
    seed: int
    time_limit: float
    concurrency: int
    rate: float
    keys: int
    nemesis_interval: float
    runtime: str | None
    expect: str  # "valid" | "invalid"
    online: bool = False  # `sleuth run --online`: judged as it is recorded
    fail_fast: bool = False  # `sleuth run --fail-fast`: ended at the first anomaly found online

    @classmethod
    def from_json(cls, d: dict) -> Run:
        """A recorded cell (a record written before a field existed gets its default)."""
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


class RunEntry(msgspec.Struct, kw_only=True, rename={"anomaly_types": "anomaly-types",
                                                     "also_found": "also-found"}):
    """One run of the campaign as campaign.json records it: its cell, where it stands, and,
    once done, what its own record says (verdict, counts, run directory, why it crashed)."""

    run: Run
    status: Literal["pending", "running", "interrupted", "done"] = "pending"
    started: float | None = None
    finished: float | None = None
    valid: bool | Literal["unknown"] | None = None
    anomaly_types: list[str] = []
    also_found: list[str] = []  # allowed by the model, found all the same
    run_dir: str | None = None
    report: str | None = None
    ops: int = 0
    ok: int = 0
    fail: int = 0
    info: int = 0
    crashed: str | None = None  # why sleuth itself failed to carry the run out

    @classmethod
    def of_outcome(cls, run: Run, *, valid: Any, anomaly_types: list[str], also_found: list[str] = (),
                   run_dir: str | None, report: str | None, counts: dict[str, int], crashed: str | None,
                   started: float | None = None, finished: float | None = None) -> RunEntry:
        """The entry of a finished run, from what its record says."""
        return cls(run=run, status="done", started=started, finished=finished, valid=valid,
                   anomaly_types=list(anomaly_types), also_found=list(also_found), run_dir=run_dir,
                   report=report, crashed=crashed, **{k: counts.get(k, 0) for k in ("ops", "ok", "fail", "info")})

    def to_json(self) -> dict[str, Any]:
        return msgspec.to_builtins(self, enc_hook=repr)  # as write_json: what JSON cannot hold, by its repr


class CampaignRecord(Record, kw_only=True):
    """campaign.json: the campaign, where it lives, and every run's entry in matrix order."""

    what = "a campaign record"
    name: str
    file: str | None = None  # the campaign file; None for `sleuth campaign judge` of any directory of runs
    dir: str
    started: float | None = None
    finished: float | None = None
    interrupted: bool = False
    runs: list[RunEntry] = []


# --- reading the record: a run's label and the campaign's status; campaign.json's one writer ------
# (the campaign runs them, its pages and JUnit read them: below both)

RECORD = "campaign.json"
NOT_AUDITED = "n/a"  # the campaign table's durability of a run whose workload the audit cannot read back

LABELS = ("pass", "caught", "invalid", "missed", "unknown", "crashed", "pending")  # `outcome`'s, in the order shown


def label_counts(labels: list[str]) -> dict[str, int]:
    """Each label's count, every label present (0 when none), in LABELS' order."""
    return {k: labels.count(k) for k in LABELS}


def outcome(expect: str, valid: Any, crashed: bool = False) -> tuple[str, int]:
    """(label, exit status) of one run against what the matrix expected of it.

    Labels: pass, invalid, caught (expected invalid, found invalid: status 0),
    missed (expected invalid, found valid: status 1), unknown (2), crashed (255),
    pending (never finished: 2, as an interrupted run is).
    """
    if crashed:
        return "crashed", exits.CRASHED
    status = exits.of_valid(valid)
    if status == exits.UNKNOWN:
        return ("pending" if valid == "pending" else "unknown"), status
    if expect == "invalid":
        return ("caught", exits.VALID) if status == exits.INVALID else ("missed", exits.INVALID)
    return ("pass", exits.VALID) if status == exits.VALID else ("invalid", exits.INVALID)


def status(record: dict, verdicts: dict[str, dict] | None = None) -> int:
    """The campaign's exit status: Jepsen's test-all over every run's outcome.

    `verdicts` maps run_key(run_dir) to Spark's verdict where Spark gave one.
    """
    return exits.combine(verdict(r, verdicts)[1] for r in record["runs"])


def verdict(r: dict, verdicts: dict[str, dict] | None = None) -> tuple[str, int]:
    """A run record's (label, status), with Spark's verdict (durability included) where it gave one."""
    if r.get("status") != "done":
        return outcome(r["run"]["expect"], "pending")
    valid = r.get("valid")
    key = run_key(r["run_dir"]) if r.get("run_dir") else None
    if verdicts and key in verdicts:
        valid = verdicts[key]["valid"]
    return outcome(r["run"]["expect"], valid, crashed=bool(r.get("crashed")))


def run_key(run_dir: str) -> str:
    """How a run directory is matched between the record and a campaign table (symlinks resolved)."""
    return os.path.realpath(run_dir)


def save(record: dict) -> None:
    """campaign.json, whole: the one writer of the campaign record (sleuth.records.campaign)."""
    write_json(os.path.join(record["dir"], RECORD), CampaignRecord.of(record).to_json())


def load_record(campaign_dir: str) -> dict:
    """campaign.json of `campaign_dir`, as its dict (RecordError names a file that is not one)."""
    return CampaignRecord.read(os.path.join(campaign_dir, RECORD)).to_json()
