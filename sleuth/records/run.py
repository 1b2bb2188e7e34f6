"""A run directory's record files as types: test.json (`TestRecord`) and results.json (`Results`).

Each file has one type here, one writer (`sleuth.records.store.write_record`, which
takes these types and nothing else) and one reader (`TestRecord.read`,
`Results.read`). Every file carries `format`, the version of its shape
(`FORMAT`); a file without it was written before versions existed (format
0) and is read by upgrading it first (`_upgrade_test`): the checks such a
run applied are re-derived as the runner derived them then, and the first
shape of `checks` (`linearizable_keys`, `total` beside `checker`) becomes
today's (`options`). A file from a newer sleuth (a higher format) is refused
rather than half understood.

A file that is not JSON, not an object, or not of the type is bad input:
`RecordError`, whose message is one line naming the file and the problem,
which the commands print and exit 254 on (docs/exit-status.md).

Fields that a writer may leave out keep that distinction (`UNSET`): a
test.json without `finished` is a history checked with `sleuth check
--report` (no run, so nothing was cut short), while `finished: null` is a run
killed outright before it could conclude; results without `judged` were
judged (not_judged writes `"judged": false`).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

import msgspec
from msgspec import UNSET, UnsetType

from sleuth.checker.checks import Checks

FORMAT = 1  # the record files' shape; 0: written before `format` existed


class RecordError(Exception):
    """A record file that cannot be read as its type (one line: the file and why)."""


class Record(msgspec.Struct, kw_only=True):
    """What every record file's type shares: `format`, one reader (`of` a parsed file, `read` a
    path) and the dict its one writer writes (`to_json`)."""

    what: ClassVar[str]  # how an error names the record: "a run record"
    format: int = FORMAT

    @classmethod
    def _upgrade(cls, d: dict[str, Any], source: str) -> dict[str, Any]:
        """A parsed file (any format up to FORMAT) in today's shape."""
        check_format(d, source)
        return {**d, "format": FORMAT}

    @classmethod
    def of(cls, d: Any, source: str = "record") -> Any:
        """The record from its dict (as made, or as parsed from a file of any format up to
        FORMAT); RecordError naming `source` when it is not one."""
        if not isinstance(d, dict):
            raise RecordError(f"{source}: not {cls.what} (a JSON object), but {type(d).__name__}")
        try:
            return msgspec.convert(cls._upgrade(d, source), cls)
        except msgspec.ValidationError as e:
            raise RecordError(f"{source}: not {cls.what}: {e}") from None

    @classmethod
    def read(cls, path: str) -> Any:
        return cls.of(load_json(path), path)

    def to_json(self) -> dict[str, Any]:
        return msgspec.to_builtins(self, enc_hook=repr)  # as write_json: what JSON cannot hold, by its repr


class TestRecord(Record, kw_only=True):
    """test.json: what ran, then how it went (`sleuth.run.runner.RunRecord.test_record`), or, for a
    history checked with `sleuth check --report`, what was judged (`report_history`)."""

    __test__ = False  # not a pytest class, whatever its name
    what = "a run record"

    name: str = ""
    workload: str = ""  # the run's client workload; the checker's name for a checked history
    target: str = ""
    runtime: str | None = None
    nemesis: list[str] = []
    fault: list[str] = []
    isolation: str | None = None
    model: str | None = None
    time_limit: float | None = None
    concurrency: int | None = None
    rate: float | None = None
    keys: int | None = None
    seed: int | None = None
    nemesis_interval: float | None = None
    checks: Checks
    started: float | None = None
    finished: float | None | UnsetType = UNSET  # None: the run never concluded; unset: no run
    faults_happened: dict[str, int] = {}
    nemesis_errors: list[str] = []
    summary: dict[str, int] = {}
    status: int | None = None  # the run's exit status (sleuth.base.exits)
    reason: str | None = None
    ended: str | None = None
    crash_file: str | None = None
    notes: list[str] = []
    duration_s: float | None = None

    @classmethod
    def _upgrade(cls, d: dict[str, Any], source: str) -> dict[str, Any]:
        return _upgrade_test(d, source)


def _upgrade_test(d: dict[str, Any], source: str) -> dict[str, Any]:
    """A parsed test.json in today's shape (FORMAT)."""
    version = check_format(d, source)
    if version == 0:
        d = {**d, "checks": _legacy_checks(d, source).to_json(), "format": FORMAT}
    return d


def _legacy_checks(d: dict[str, Any], source: str) -> Checks:
    """The checks of a test.json of format 0: its `checks` (either shape), or, for runs stored
    before test.json held them, re-derived the way the runner derived them then."""
    try:
        if "checks" in d:
            return Checks.from_json(d["checks"])
        checker = d.get("workload", "")
        model = d.get("model") if checker in ("list-append", "rw-register") else None
        return Checks(checker=checker, model="linearizable" if checker == "register" else model,
                      options={"linearizable_keys": True} if d.get("linearizable_keys") else {},
                      timestamps=d.get("target") == "reference" and d.get("isolation") == "strict-serializable")
    except (TypeError, ValueError) as e:
        raise RecordError(f"{source}: cannot tell what the run checked ({e})") from None


class Results(Record, kw_only=True, rename={
        "anomaly_types": "anomaly-types", "not_": "not", "also_not": "also-not", "also_found": "also-found"}):
    """results.json: a verdict as written, whether a run's (`sleuth.checker.judge.judge`: with `counts`,
    and `timestamps`, `online` where they apply) or a checked history's (`Result.to_json`).
    In memory the judging functions hand it on as that dict; `Results.of` makes it this type
    at the one writer, and `to_json` gives the dict back to the pages that render it."""

    what = "a verdict"

    valid: bool | Literal["unknown"]  # as sleuth.base.exits spells a verdict in JSON
    model: str | None | UnsetType = UNSET
    anomaly_types: list[str] = []
    not_: list[str] | UnsetType = UNSET
    also_not: list[str] | UnsetType = UNSET
    possible: list[str] | UnsetType = UNSET
    also_found: list[str] = []
    anomalies: dict[str, list[Any]] = {}
    stats: dict[str, Any] | UnsetType = UNSET
    notes: list[str] | UnsetType = UNSET
    incomplete: list[str] | UnsetType = UNSET
    judged: bool | UnsetType = UNSET  # false: not judged (sleuth.checker.judge.not_judged)
    reason: str | None | UnsetType = UNSET
    counts: dict[str, int] | UnsetType = UNSET
    timestamps: dict[str, Any] | UnsetType = UNSET  # the grey-box rules' own result
    online: dict[str, Any] | UnsetType = UNSET  # what a run judged online found

    @property
    def was_judged(self) -> bool:
        """Whether these come from judging the history (sleuth.checker.judge.was_judged)."""
        from sleuth.checker.judge import was_judged

        return was_judged(self.to_json())


def check_format(d: dict[str, Any], source: str) -> int:
    v = d.get("format", 0)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise RecordError(f"{source}: format {v!r} is not a record format")
    if v > FORMAT:
        raise RecordError(f"{source}: format {v} was written by a newer sleuth (this one reads up to {FORMAT})")
    return v


def load_json(path: str) -> Any:
    try:
        with open(path, "rb") as f:
            return json.loads(f.read())
    except OSError as e:
        raise RecordError(f"{path}: {e.strerror or e}") from None
    except ValueError as e:
        raise RecordError(f"{path}: not JSON ({e})") from None
