"""A small, fast EDN reader for the subset Jepsen writes.

Supported: maps, vectors, lists, sets `#{}`, keywords, symbols, strings (with
escapes), integers (also `42N`), floats (also `1.5M`, `##Inf`, `##NaN`),
ratios, characters, `nil`/`true`/`false`, tagged literals and `;` comments;
commas are whitespace. Not supported: `#_` (discard) and strings that span
lines (Jepsen's `pr-str` escapes newlines, so neither occurs in its files).

Values become plain Python: keywords and symbols become strings (`:invoke` ->
"invoke"), `nil` -> None, vectors and lists -> lists, maps -> dicts (keys
converted the same way; a vector key becomes a tuple), sets -> sorted lists
(plain lists when unsortable), a tagged literal -> its inner value
(`#jepsen.history.Op{...}` -> a dict).

`Reader` is fed one line at a time (so it tracks lines for errors and for the
values it yields) and collects top-level values with their start lines; with
`unwrap=True` the elements of a top-level vector or list are collected
instead, so a history written as one big vector of maps yields one map per
operation. The `edn_format` package reads the same subset ~20x slower (63 s
for a 100,000-line list-append history.edn that this reads in under 3 s).

Errors raise `EdnError(line, problem)`; callers add the file name.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from typing import Any


class EdnError(ValueError):
    def __init__(self, line: int, problem: str):
        self.line, self.problem = line, problem
        super().__init__(f"line {line}: {problem}")


class _Marker:
    """A structural token (bracket, tag, ...) in the token cache."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


# Container kinds (also the markers of their opening tokens).
VECTOR, LIST, MAP, SET = _Marker("["), _Marker("("), _Marker("{"), _Marker("#{")
ROOT = _Marker("top-level [")  # a top-level vector/list whose elements are collected
CLOSE_VECTOR, CLOSE_LIST, CLOSE_BRACE = _Marker("]"), _Marker(")"), _Marker("}")
TAG, DISCARD, QUOTE, END = _Marker("#tag"), _Marker("#_"), _Marker('"'), _Marker("end")
_MISSING = _Marker("not cached")
CLOSES = {CLOSE_VECTOR: (VECTOR, ROOT), CLOSE_LIST: (LIST, ROOT), CLOSE_BRACE: (MAP, SET)}
OPENING = {VECTOR: "[", LIST: "(", ROOT: "[", MAP: "{", SET: "#{"}

TOKEN = re.compile(
    r"""
    (?:[\s,]|;[^\n]*)*                      # whitespace (commas too) and comments
    (
      \#\{                                  # set
    | [\[\](){}]
    | "[^"\\]*(?:\\.[^"\\]*)*"              # string
    | \\(?:u[0-9a-fA-F]{4}|newline|space|tab|return|formfeed|backspace|.)  # character
    | [^\s,\[\](){}";\\]+                   # keyword, symbol, number, tag
    | .                                     # a lone " (unterminated string)
    | $                                     # the end (so a trailing comment is never rescanned)
    )""",
    re.VERBOSE,
)
tokenize = TOKEN.findall

_STRUCTURAL: dict[str, Any] = {
    "[": VECTOR, "(": LIST, "{": MAP, "#{": SET,
    "]": CLOSE_VECTOR, ")": CLOSE_LIST, "}": CLOSE_BRACE, '"': QUOTE, "": END,
    "nil": None, "true": True, "false": False,
    "##Inf": float("inf"), "##-Inf": float("-inf"), "##NaN": float("nan"),
}
_CHARS = {"newline": "\n", "space": " ", "tab": "\t", "return": "\r",
          "formfeed": "\f", "backspace": "\b"}
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.S)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "b": "\b"}
_NUMBER_START = frozenset("0123456789")
_CACHE_LIMIT = 1 << 17


def _unescape(match: re.Match) -> str:
    s = match.group(1)
    if len(s) == 5:
        return chr(int(s[1:], 16))
    return _ESCAPES.get(s, s)


def _number(tok: str) -> Any:
    try:
        return int(tok)
    except ValueError:
        pass
    try:
        return float(tok)
    except ValueError:
        pass
    if tok[-1] == "N":
        return int(tok[:-1])
    if tok[-1] == "M":
        return float(tok[:-1])
    if "/" in tok:
        return float(Fraction(tok))
    return int(tok, 0)  # 0x1F and the like


def atom(tok: str) -> Any:
    """The value of one non-structural token (or a marker for a tag)."""
    c = tok[0]
    if c == ":":
        return tok[1:]
    if c == '"':
        body = tok[1:-1]
        if "\\" not in body:
            return body
        try:
            return json.loads(tok, strict=False)
        except ValueError:
            return _ESCAPE.sub(_unescape, body)
    if c in _NUMBER_START or (c in "+-" and len(tok) > 1 and tok[1] in _NUMBER_START):
        try:
            return _number(tok)
        except (ValueError, ZeroDivisionError):
            return tok  # not a number after all: keep the text, like a symbol
    if c == "\\":
        name = tok[1:]
        if len(name) == 5 and name[0] == "u":
            return chr(int(name[1:], 16))
        return _CHARS.get(name, name)
    if c == "#":
        return DISCARD if tok.startswith("#_") else TAG
    return tok  # a symbol


def _build_map(items: list, line: int) -> dict:
    if len(items) & 1:
        raise EdnError(line, f"map has an odd number of forms ({len(items)})")
    it = iter(items)
    try:
        return dict(zip(it, it, strict=True))
    except TypeError:  # an unhashable key, e.g. a vector
        it = iter(items)
        return {_hashable(k): v for k, v in zip(it, it, strict=True)}


def _hashable(x: Any) -> Any:
    if isinstance(x, list):
        return tuple(map(_hashable, x))
    if isinstance(x, dict):
        return tuple((k, _hashable(v)) for k, v in x.items())
    return x


def _build_set(items: list) -> list:
    try:
        return sorted(items)
    except TypeError:
        return items


class Reader:
    """Feed lines with `feed`; then `finish`. `items` holds the top-level
    values (or a top-level vector's elements) and `lines` their start lines."""

    def __init__(self, unwrap: bool = True):
        self.unwrap = unwrap
        self.items: list = []
        self.lines: list[int] = []
        self.cache: dict[str, Any] = dict(_STRUCTURAL)
        self.cur: list = self.items  # the container being filled
        self.stack: list[tuple[list, _Marker, int]] = []  # (parent, kind, start line)

    def feed(self, tokens: list[str], lineno: int) -> None:
        cache = self.cache
        get = cache.get
        items, item_lines = self.items, self.lines
        cur, stack = self.cur, self.stack
        try:
            for tok in tokens:
                v = get(tok, _MISSING)
                if v is _MISSING:
                    v = atom(tok)
                    if v is TAG:  # tags are ignored: a tagged value is its value
                        continue
                    if len(cache) < _CACHE_LIMIT:
                        cache[tok] = v
                if v.__class__ is not _Marker:
                    cur.append(v)
                    if cur is items:
                        item_lines.append(lineno)
                    continue
                if v is MAP or v is VECTOR or v is SET or v is LIST:
                    if cur is items and self.unwrap and not stack and (v is VECTOR or v is LIST):
                        stack.append((cur, ROOT, lineno))
                    else:
                        stack.append((cur, v, lineno))
                        cur = []
                    continue
                if v is END:
                    continue
                if v is QUOTE:
                    raise EdnError(lineno, "unterminated string")
                if v is DISCARD:
                    raise EdnError(lineno, "#_ (discard) is not supported")
                # a closing bracket
                if not stack:
                    raise EdnError(lineno, f"unbalanced '{v.name}': nothing is open")
                parent, kind, start = stack.pop()
                if kind not in CLOSES[v]:
                    raise EdnError(lineno, f"'{v.name}' closes '{OPENING[kind]}' opened at line {start}")
                if kind is ROOT:
                    continue
                if kind is MAP:
                    value = _build_map(cur, start)
                elif kind is SET:
                    value = _build_set(cur)
                else:
                    value = cur
                cur = parent
                cur.append(value)
                if cur is items:
                    item_lines.append(start)
        finally:
            self.cur = cur

    def finish(self) -> None:
        """Check that everything opened was closed (naming the outermost
        unclosed form below a top-level vector: the broken operation)."""
        if self.stack:
            frames = [f for f in self.stack if f[1] is not ROOT] or self.stack
            _, kind, start = frames[0]
            raise EdnError(start, f"unbalanced '{OPENING[kind]}': opened at line {start}, "
                                  "never closed")


def read_lines(lines, unwrap: bool = True) -> Reader:
    """Read all `lines` (strings without newlines); returns the finished Reader."""
    reader = Reader(unwrap)
    feed = reader.feed
    for lineno, line in enumerate(lines, 1):
        if line:
            feed(tokenize(line), lineno)
    reader.finish()
    return reader


def loads(text: str) -> Any:
    """The single value in `text` (None if there is none)."""
    reader = read_lines(text.split("\n"), unwrap=False)
    if len(reader.items) > 1:
        raise EdnError(reader.lines[1], "more than one value")
    return reader.items[0] if reader.items else None


_OPEN_TOKENS = frozenset(("[", "(", "{", "#{"))
_CLOSE_TOKENS = frozenset(("]", ")", "}"))


def read_prefix(text: str, lineno: int = 1) -> tuple[Any, str]:
    """Read the first value in a one-line `text`; return it and the rest of
    the text after it (None and "" for blank text)."""
    tokens: list[str] = []
    depth = 0
    end = len(text)
    for m in TOKEN.finditer(text):
        tok = m.group(1)
        if not tok:
            break
        tokens.append(tok)
        if tok in _OPEN_TOKENS:
            depth += 1
        elif tok in _CLOSE_TOKENS:
            depth -= 1
        elif tok[0] == "#" and not tok.startswith("##"):
            continue  # a tag: its value follows
        if depth <= 0:
            end = m.end()
            break
    reader = Reader(unwrap=False)
    reader.feed(tokens, lineno)
    reader.finish()
    return (reader.items[0] if reader.items else None), text[end:]
