"""Exit status of every sleuth command: Jepsen's table (docs/exit-status.md).

0 valid · 1 invalid · 2 unknown (could not decide, interrupted, nothing to
judge) · 254 bad arguments or bad input · 255 sleuth itself failed. Many
files or runs in one call combine as 255 if any crashed, else 2 if any
unknown, else 1 if any invalid, else 0.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import NoReturn

VALID, INVALID, UNKNOWN, BAD_INPUT, CRASHED = 0, 1, 2, 254, 255


def of_valid(valid: bool | str | None) -> int:
    """The status for a verdict: True -> 0, False -> 1, anything else -> 2."""
    if valid is True:
        return VALID
    if valid is False:
        return INVALID
    return UNKNOWN


# A verdict's spellings, each owned here: `valid` in results.json and --json (true, false or
# "unknown"), its word, the word as a line or a page leads with it, its text in the campaign
# table (a string column), and its exit status (`of_valid`).

def verdict_word(valid: bool | str | None) -> str:
    """The word for a verdict wherever a page or a line names one: valid, invalid or unknown
    (one case, as the outcome labels of a campaign; also a page's CSS class)."""
    return {VALID: "valid", INVALID: "invalid"}.get(of_valid(valid), "unknown")


def verdict_headline(valid: bool | str | None) -> str:
    """The verdict as a result leads with it (`sleuth check`'s line, `sleuth run`'s summary,
    the run page's badge): its word, shouted when it needs the reader (INVALID, UNKNOWN)."""
    word = verdict_word(valid)
    return word if word == "valid" else word.upper()


def verdict_text(valid: bool | str | None) -> str:
    """A verdict as the campaign table's `valid` column spells it: "true", "false", "unknown"."""
    return {VALID: "true", INVALID: "false"}.get(of_valid(valid), "unknown")


def valid_of_text(text: object) -> bool | str:
    """`verdict_text` read back (any case): True, False, or "unknown"."""
    return {"true": True, "false": False}.get(str(text).lower(), "unknown")


def combine(statuses: Iterable[int]) -> int:
    """Several files or runs in one call: the highest status wins.

    That is Jepsen's test-all rule (255 if any crashed, else 2 if any unknown,
    else 1 if any invalid, else 0), with a file of bad input (254) ranking just
    below a crash: it was not judged, and CI must not read that as a verdict.
    Nothing at all to judge is unknown.
    """
    return max(statuses, default=UNKNOWN)


def die(message: str, status: int = BAD_INPUT) -> NoReturn:
    """One line on stderr, no traceback, and the exit status (254 unless told)."""
    print(f"sleuth: error: {message}", file=sys.stderr, flush=True)
    sys.exit(status)
