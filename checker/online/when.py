"""When each anomaly happened and when it was found: one record, for `--json` and the reports.

An anomaly *happened* at the time of its last operation: the latest line its
example names (a cycle's transactions and steps, a non-cycle anomaly's
operations), whose event's `time` field is when it was written (ns since the
run started). It was *found* either online, at a wall-clock moment
(`Found.found_at`) while the history was still being written, or only in the
final pass, when the history had ended.

`timeline(results, history, online_found, final_at)` gives one entry per
anomaly type of the verdict (and of `also-found`), in the verdict's order:

    {"anomaly": "G-single", "online": true, "line": 2006, "happened": 1.234,
     "found-at": 1795904834.55, "found-line": 2006}

`line`/`happened`: the latest line the first example names and its time in
seconds from the run's start (from the online report itself when the type was
found online: the line that confirmed it); `found-at`: seconds since the epoch
(the final pass's end for a type found only there); `found-line`: the line
read when it was found online (absent for the final pass).
"""

from __future__ import annotations

import bisect
from typing import Any

from sleuth.history.jsonl import History


def lines_named(example: Any, lists: bool = True) -> set[int]:
    """Every line number an anomaly example names, wherever in it they are (keys ending in
    `line`, and, with `lists`, `lines` lists)."""
    out: set[int] = set()

    def walk(x: Any, key: str = "") -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, k)
        elif isinstance(x, list):
            for v in x:
                walk(v, key)
        elif (key.endswith("line") or (lists and key == "lines")) and isinstance(x, int) \
                and not isinstance(x, bool):
            out.add(x)
    walk(example)
    return out


def time_of_line(history: History, line: int) -> int | None:
    """The `time` of the event on `line` (None if no event is there)."""
    if history.lines is None:
        pos = line - 1
    else:
        pos = bisect.bisect_left(history.lines, line)
        if pos >= len(history.lines) or history.lines[pos] != line:
            return None
    if 0 <= pos < len(history.events):
        return history.events[pos].time
    for op in history.ops():  # a compact load keeps operations, not events: a scan, once per type
        if op.complete_pos == pos:
            return op.complete_time
        if op.invoke_pos == pos:
            return op.invoke_time
    return None


def timeline(results: dict[str, Any], history: History | None, online_found: list[dict[str, Any]],
             final_at: float) -> list[dict[str, Any]]:
    """One entry per anomaly type of `results` (module docstring). `online_found`: the
    online reports as `Found.to_json()` gives them, first ones first."""
    first_online: dict[str, dict] = {}
    for f in online_found:
        first_online.setdefault(f["anomaly"], f)
    out = []
    names = list(results.get("anomaly-types", [])) + list(results.get("also-found", []))
    names += [n for n in first_online if n not in names]  # found online under a name the final pass does not use
    for name in names:
        f = first_online.get(name)
        if f is not None:
            t = f.get("time")
            out.append({"anomaly": name, "online": True, "line": f["line"],
                        "happened": None if t is None else round(t / 1e9, 6),
                        "found-at": f["found-at"], "found-line": f["line"]})
            continue
        examples = results.get("anomalies", {}).get(name) or [{}]
        lines = lines_named(examples[0])
        line = max(lines) if lines else None
        t = time_of_line(history, line) if history is not None and line is not None else None
        out.append({"anomaly": name, "online": False, "line": line,
                    "happened": None if t is None else round(t / 1e9, 6), "found-at": round(final_at, 3)})
    return out
