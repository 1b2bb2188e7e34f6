"""The store: where runs live, and the one writer of a run directory's record files.

Layout (docs/architecture.md, "Data flow of one run"):

    <store>/<test-name>/<timestamp>/
        test.json      what ran: the run record (configuration, times, faults, counts, status)
        history.jsonl  the events (docs/history-format.md), written live by the runner's recorder
        results.json   the verdict (written once, after judging)
        index.html     the report, with its PNGs and timeline.html
        crash.txt      only when sleuth itself failed: the traceback
        nodes/<node>/  the nodes' logs
    <store>/latest  -> the newest run directory

As in Jepsen (`jepsen.store`), test.json and results.json are written whole,
from values, at the end of a run: nothing edits them in turn. test.json is
also written once when the run starts, with status "running" and the checks
the run will apply, so that a run killed outright (SIGKILL, power loss) still
leaves a directory `sleuth check RUN_DIR` can judge. The two files' types,
their format version and their readers are `sleuth.records.run`'s; `write_record`
is the only code that writes them. A store that
cannot be written is sleuth's failure (`StoreError`, exit 255), not the
system's.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from sleuth.base.jsonfile import write_json

if TYPE_CHECKING:
    from sleuth.records.run import Results, TestRecord

HISTORY, TEST, RESULTS, REPORT, CRASH, NODES = (
    "history.jsonl", "test.json", "results.json", "index.html", "crash.txt", "nodes")


class StoreError(Exception):
    """The store could not be written (one line: the path and why)."""


def history_path(run_dir: str) -> str:
    return os.path.join(run_dir, HISTORY)


def test_path(run_dir: str) -> str:
    return os.path.join(run_dir, TEST)


def results_path(run_dir: str) -> str:
    return os.path.join(run_dir, RESULTS)


def report_path(run_dir: str) -> str:
    return os.path.join(run_dir, REPORT)


def crash_path(run_dir: str) -> str:
    return os.path.join(run_dir, CRASH)


def nodes_dir(run_dir: str) -> str:
    return os.path.join(run_dir, NODES)


def new_run_dir(store: str, name: str) -> str:
    """A fresh `<store>/<name>/<timestamp>[-k]/` (with `nodes/`), and `latest` pointed at it."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    d = os.path.join(store, name, stamp)
    k = 1
    while os.path.exists(d):
        k += 1
        d = os.path.join(store, name, f"{stamp}-{k}")
    try:
        os.makedirs(nodes_dir(d))
    except OSError as e:
        raise StoreError(f"--store {store}: cannot create {d}: {e.strerror or e}") from None
    link = os.path.join(store, "latest")
    try:
        if os.path.islink(link):
            os.remove(link)
        os.symlink(os.path.relpath(d, store), link)
    except OSError:
        pass  # a store on a filesystem without symlinks still holds the run
    return d


def latest(store: str) -> str | None:
    """The newest run directory of `store`, or None."""
    link = os.path.join(store, "latest")
    return os.path.realpath(link) if os.path.isdir(link) else None


def write_record(run_dir: str, test: TestRecord, results: Results | None = None) -> None:
    """test.json and results.json, each whole (temp file and rename), at the end of a run;
    test.json alone (results None) as it starts. The one writer of both files."""
    try:
        write_json(test_path(run_dir), test.to_json())
        if results is not None:
            write_json(results_path(run_dir), results.to_json())
    except OSError as e:
        raise StoreError(f"cannot write the record of {run_dir}: {e.strerror or e}") from None


def write_crash(run_dir: str, text: str) -> str | None:
    """crash.txt (the traceback of sleuth's own failure); None when even that cannot be written."""
    try:
        with open(crash_path(run_dir), "w") as f:
            f.write(text)
        return crash_path(run_dir)
    except OSError:
        return None


def find_run(path: str) -> str | None:
    """The run directory `path` names: the directory itself, or the one holding this history.jsonl,
    provided its test.json is beside the history; else None (an ordinary history file)."""
    d = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    if os.path.isfile(path) and os.path.basename(path) != HISTORY:
        return None
    if os.path.isfile(history_path(d)) and os.path.isfile(test_path(d)):
        return d
    return None
