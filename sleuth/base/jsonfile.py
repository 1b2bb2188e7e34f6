"""JSON state files written whole or not at all (cluster.json, a runtime's node table, test.json)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from typing import Any


def write_json(path: str, obj: Any) -> None:
    """Write `obj` to `path` via a temp file and a rename, so a reader never sees half of it."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with written_whole(path) as tmp, open(tmp, "w") as f:
        json.dump(obj, f, indent=1, default=repr)


@contextlib.contextmanager
def written_whole(path: str | os.PathLike) -> Iterator[str]:
    """The path to write instead of `path`: a temp file beside it, renamed onto `path`
    when the block ends, removed if the block fails or is interrupted, so `path` holds
    either what it held before or the whole new file, never half of one. A path that
    is not a regular file (/dev/stdout, a fifo) is written in place."""
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isfile(path):
        yield path
        return
    tmp = path + ".tmp"
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
