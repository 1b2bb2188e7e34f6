"""What every checker returns, and how results compose (as Jepsen's `compose`).

Validity merges as false > unknown > true: one invalid part makes the whole
invalid; otherwise one undecided part makes it unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

UNKNOWN = "unknown"


def nothing_to_judge(what: str) -> str:
    """The note of a verdict that is unknown because nothing could be checked.

    An empty history, or one where no operation completed, is not evidence of
    correctness: Jepsen's checkers answer :unknown there, and CI must not read
    it as a pass.
    """
    return f"nothing to judge: {what}"


def merge_valid(*vs: bool | str) -> bool | str:
    if any(v is False for v in vs):
        return False
    if any(v == UNKNOWN for v in vs):
        return UNKNOWN
    return True


@dataclass
class Result:
    """A checker's verdict on one history.

    valid:         True, False or "unknown".
    anomaly_types: names of the anomalies found that the judged model forbids
                   (sorted); empty iff valid is True.
    anomalies:     name -> list of examples; each example is a JSON-able dict
                   with at least "explanation" (plain words a person can follow).
    model:         the model judged against.
    not_:          the weakest models the history rules out ("not" in JSON).
    also_not:      stronger models ruled out as a consequence.
    possible:      models the history still satisfies (of those sleuth knows).
    also_found:    anomalies found that the judged model allows.
    stats:         counts worth printing (ops, keys, edges, seconds, ...).
    notes:         caveats, e.g. a search that hit its bound.
    incomplete:    anomaly types whose search was cut short (by a time limit):
                   they may be missing or undercounted ("incomplete" in JSON).
    """

    valid: bool | str
    model: str
    anomaly_types: list[str] = field(default_factory=list)
    anomalies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    not_: list[str] = field(default_factory=list)
    also_not: list[str] = field(default_factory=list)
    possible: list[str] = field(default_factory=list)
    also_found: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "model": self.model,
            "anomaly-types": self.anomaly_types,
            "not": self.not_,
            "also-not": self.also_not,
            "possible": self.possible,
            "also-found": self.also_found,
            "anomalies": self.anomalies,
            "stats": self.stats,
            "notes": self.notes,
            "incomplete": self.incomplete,
        }


AT_LEAST = "≥"  # before a count that is a lower bound (`found_counts`)


def found_counts(record: dict[str, Any]) -> dict[str, str]:
    """How many of each anomaly type a result (`Result.to_json`, or a run's results.json)
    found, as a reader is told it: per type it names (forbidden first, then allowed) that
    the checker counted, "1,232", or "≥1,753" for a cycle type, whose count is one per
    component it was found in and so a lower bound (`stats["cycle-counts-are"]`,
    docs/cycle-search.md), with what was counted where it is not the anomaly itself
    (`stats["anomaly-units"]`: "3 keys" not linearizable). Types the checker did not
    count are left out."""
    stats = record.get("stats") or {}
    counts = stats.get("anomaly-counts") or {}
    units = stats.get("anomaly-units") or {}
    lower = stats.get("cycle-counts-are") == "lower-bounds"
    out: dict[str, str] = {}
    for name in [*record.get("anomaly-types", []), *record.get("also-found", [])]:
        if name in counts:
            first = ((record.get("anomalies") or {}).get(name) or [{}])[0]
            cycle = lower and isinstance(first, dict) and "cycle" in first
            n = counts[name]
            unit = f" {units[name]}{'' if n == 1 else 's'}" if name in units else ""
            out[name] = f"{AT_LEAST if cycle else ''}{n:,}{unit}"
    return out
