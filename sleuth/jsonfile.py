"""JSON state files written whole or not at all (cluster.json, a runtime's node table, test.json)."""

from __future__ import annotations

import json
import os
from typing import Any


def write_json(path: str, obj: Any) -> None:
    """Write `obj` to `path` via a temp file and a rename, so a reader never sees half of it."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, default=repr)
    os.replace(tmp, path)
