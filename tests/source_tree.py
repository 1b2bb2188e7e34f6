"""The product's source files, for the tests that search the tree for a shape: one owner for
each word (test_vocabulary.py), one writer for each record file (test_records.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRODUCT = ("sleuth", "checker", "workloads", "cluster", "nemesis", "reports")


def sources(exts: tuple[str, ...] = (".py",), tops: tuple[str, ...] = PRODUCT) -> Iterator[tuple[str, str]]:
    """(path from the repository's root, text) of every file under `tops` ending in `exts`."""
    for top in tops:
        for dirpath, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for f in files:
                if f.endswith(exts):
                    path = os.path.join(dirpath, f)
                    with open(path, encoding="utf-8") as fh:
                        yield os.path.relpath(path, ROOT), fh.read()
