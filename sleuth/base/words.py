"""Counted nouns in what sleuth says: `plural(1, "run")` is "1 run", `plural(2, "run")` "2 runs".

The one helper for every message, summary and page that puts a count before a noun
("after linearizing 1 op", "1 run: 1 pass"); it imports nothing, so any layer may use it.
"""

from __future__ import annotations


def noun(n: int | float, word: str, words: str | None = None) -> str:
    """`word` for a count of 1, else its plural (`words`, by default `word` + "s")."""
    return word if n == 1 else (words or word + "s")


def plural(n: int | float, word: str, words: str | None = None, grouped: bool = False) -> str:
    """The count and its noun: "1 run", "3 runs", "1,024 operations" (`grouped`: thousands separated)."""
    return f"{n:,} {noun(n, word, words)}" if grouped else f"{n} {noun(n, word, words)}"
