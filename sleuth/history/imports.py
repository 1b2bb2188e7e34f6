"""Load any supported history file into a `History` (docs/history-format.md, "Imports").

Formats, chosen by extension and then by content:

- `.jsonl`: sleuth's own JSON Lines (`sleuth.history.jsonl.read_jsonl`, strict).
- `.edn`: Jepsen's `history.edn`: one op map per line, or the whole file one
  vector/list of maps (pretty-printed over many lines or not); `;` comments;
  newer Jepsen's `#jepsen.history.Op{...}` records. Read by `sleuth.history.edn`.
- `.json`: a JSON array of op objects (as elle-cli reads them), or JSON Lines
  when the content is one object per line.
- `.txt`, `.log`, anything else: sniffed. JSON Lines if the first line starts
  with `{"`, a JSON array if the file starts with `[{"` (or `[]`), EDN if it
  starts with `{:`, a `[` or `(` holding maps or keywords, a `#tag` or a `;`
  comment, else Jepsen's text history:
  `PROCESS<TAB>:TYPE<TAB>:F<TAB>VALUE[<TAB>ERROR...]`, tabs or runs of spaces,
  VALUE EDN, any log prefix before the process ignored
  (`INFO  jepsen.util - 3	:invoke	:read	nil`). In a `.log` file, lines that
  are not history lines (other log output, stack traces) are skipped; in any
  other text file they are errors.

Foreign ops are normalised to docs/history-format.md's events: keywords become strings
without the colon (JSON's ":invoke"-style strings too, for type, f, process
and micro-op names), `:process :nemesis` -> "nemesis". Imported files are
often sparse:

- no `index`: file order (indices, when present, must increase; events are
  renumbered 0..n-1 in file order either way);
- no `time`: file order (time = index) when no op has one; otherwise an op
  without a time gets the previous op's. Times need not be monotone (Jepsen
  reads its clock before appending an event): the file order is the
  real-time order, and `History.time_backwards` says where time went back;
- no `f` on an op whose value is a list of micro-ops (`[:append k v]`,
  `[:r k v]`, `[:w k v]`): `f = "txn"`;
- no `process` on any op: one sequential client. It is process 0 until an
  `info` completion, then the next process (a crashed client gets a fresh
  process id, as in Jepsen); its invokes and completions must alternate.

Every error is a `HistoryError` naming the file and the 1-based line (for a
JSON array, the line where the element starts). Pairing runs at load time, so
an unpaired completion is reported here too.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from sys import intern
from typing import Any

import orjson

from sleuth.history import edn
from sleuth.history.jsonl import (
    MICRO_OPS,
    NEMESIS,
    RULES,
    Event,
    History,
    HistoryError,
    Rule,
    gc_paused,
    read_jsonl,
)


@gc_paused
def load(path: str | os.PathLike, events: bool = True, micro_ops: tuple[str, ...] = ()) -> History:
    """Read a history in any supported format (see the module docstring).

    `events=False` and `micro_ops` are passed on to `read_jsonl` (a compact
    load keeping only ops); the other formats always keep their events.
    """
    source = os.fspath(path)
    ext = os.path.splitext(source)[1].lower()
    if ext == ".jsonl":
        return read_jsonl(source, events=events, micro_ops=micro_ops)
    text = _read_text(source)
    if ext == ".edn":
        return load_edn(text, source)
    head = text.lstrip()[:200]
    if ext == ".json":
        return load_json_lines(text, source) if head.startswith("{") else load_json(text, source)
    if JSON_LINES_START.match(head):
        return load_json_lines(text, source)
    if JSON_ARRAY_START.match(head):
        return load_json(text, source)
    if EDN_START.match(head):
        return load_edn(text, source)
    return load_text(text, source, skip_noise=(ext == ".log"))


# Sniffing a file's start (leading whitespace removed).
JSON_LINES_START = re.compile(r'\{\s*("|\}\s*$)')
JSON_ARRAY_START = re.compile(r'\[\s*(\{\s*"|\]|$)')
EDN_START = re.compile(r"(;|#[a-zA-Z{]|\{\s*[:}]|[\[(]\s*([{\[(#:\])]|$))")


def _read_text(source: str) -> str:
    try:
        with open(source, "rb") as fh:
            data = fh.read()
    except OSError as e:
        raise HistoryError(source, None, e.strerror or str(e)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise HistoryError(source, line, f"not UTF-8 text ({e.reason})") from None


# ---------------------------------------------------------------------------
# Readers: each decodes the file into (op map, source line) pairs for `build`.


def load_edn(text: str, source: str) -> History:
    try:
        reader = edn.read_lines(text.split("\n"))
    except edn.EdnError as e:
        raise HistoryError(source, e.line, f"bad EDN: {e.problem}") from None
    return build(zip(reader.items, reader.lines, strict=True), source)


def load_json(text: str, source: str) -> History:
    """A JSON array of op objects; each op's line is where its element starts."""
    decode = json.JSONDecoder().raw_decode
    ws = re.compile(r"\s*").match
    pos = ws(text).end()
    if text[pos:pos + 1] != "[":
        raise HistoryError(source, _line_at(text, pos), "expected a JSON array of operations")
    items: list[tuple[Any, int]] = []
    line, counted = 1, 0
    pos = ws(text, pos + 1).end()
    if text[pos:pos + 1] == "]":
        pos += 1
    else:
        while True:
            line += text.count("\n", counted, pos)
            counted = pos
            try:
                value, pos = decode(text, pos)
            except json.JSONDecodeError as e:
                raise HistoryError(source, e.lineno, f"not valid JSON ({e.msg}, column {e.colno})") from None
            items.append((value, line))
            pos = ws(text, pos).end()
            sep = text[pos:pos + 1]
            pos = ws(text, pos + 1).end()
            if sep == "]":
                break
            if sep != ",":
                raise HistoryError(source, _line_at(text, pos - 1),
                                   f"expected ',' or ']' after element {len(items)} of the array")
    if text[pos:].strip():
        raise HistoryError(source, _line_at(text, pos), "text after the end of the JSON array")
    return build(items, source)


def _line_at(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def load_json_lines(text: str, source: str) -> History:
    """JSON Lines, sparse or not (one op object per line)."""
    def items():
        for lineno, raw in enumerate(text.split("\n"), 1):
            if raw.strip():
                try:
                    yield orjson.loads(raw), lineno
                except orjson.JSONDecodeError as e:
                    raise HistoryError(source, lineno, f"not valid JSON ({e.msg})") from None
    return build(items(), source)


TEXT_LINE = re.compile(
    r"(?:^|\s)(\d+|:nemesis)[ \t]+:(invoke|ok|fail|info)[ \t]+:([^\s\[\](){}\"]+)"
    r"(?:[ \t]+(.*?))?\s*$"
)


def load_text(text: str, source: str, skip_noise: bool = False) -> History:
    """Jepsen's text history: `PROCESS  :TYPE  :F  VALUE  [ERROR...]` per line."""
    items: list[tuple[dict, int]] = []
    search = TEXT_LINE.search
    for lineno, raw in enumerate(text.split("\n"), 1):
        m = search(raw)
        if m is None:
            if skip_noise or not raw.strip():
                continue
            raise HistoryError(source, lineno, "not a history line (expected PROCESS :TYPE :F VALUE)")
        process, typ, f, rest = m.groups()
        op: dict[str, Any] = {"process": NEMESIS if process == ":nemesis" else int(process),
                              "type": typ, "f": f, "value": None}
        if rest:
            try:
                op["value"], rest = edn.read_prefix(rest, lineno)
            except edn.EdnError as e:
                raise HistoryError(source, lineno, f"bad EDN value: {e.problem}") from None
            rest = rest.strip()
            if rest:
                op["error"] = _text_error(rest)
        items.append((op, lineno))
    if not items:
        raise HistoryError(source, None, "no history lines found (expected lines like "
                                         "'3 :invoke :read nil')")
    return build(items, source)


def _text_error(rest: str) -> Any:
    """Trailing fields of a text history line: one EDN value, else the raw text."""
    try:
        value, after = edn.read_prefix(rest)
    except edn.EdnError:
        return rest
    return rest if after.strip() else value


# ---------------------------------------------------------------------------
# Normalising decoded ops into events


def _name(x: Any) -> Any:
    """A keyword-ish string without its leading colon (JSON writes ":invoke")."""
    return x[1:] if isinstance(x, str) and x.startswith(":") else x


def _micro_ops(value: Any) -> bool:
    """Is `value` a non-empty list of micro-ops ([f, k, v] with f append/r/w)?"""
    if not isinstance(value, list) or not value:
        return False
    for mop in value:
        if not (isinstance(mop, list) and mop and isinstance(mop[0], str)
                and _name(mop[0]) in MICRO_OPS):
            return False
    return True


def _strip_micro_op_names(value: list) -> None:
    for mop in value:
        if mop[0].startswith(":"):
            mop[0] = mop[0][1:]


def _int(x: Any) -> bool:
    return type(x) is int


def build(items: Iterable[tuple[Any, int]], source: str) -> History:
    """Events from decoded op maps (each with its source line), validated,
    sparse fields filled in, paired."""
    events: list[Event] = []
    lines: list[int] = []
    labels: list[int | None] = []  # the file's own :index of each event
    missing_time: list[int] = []  # positions of events without a time
    missing_process: list[int] = []
    client_processes = 0  # client ops that name their process
    last_index = last_time = None
    backwards: list[int] = []  # lines whose time is below the previous time
    for d, lineno in items:
        def bad(problem: str, lineno: int = lineno) -> HistoryError:
            return HistoryError(source, lineno, problem)

        if not isinstance(d, dict):
            raise bad(f"expected an operation map, got {_describe(d)}")
        if "type" not in d:
            raise bad("missing type")
        typ = _name(d["type"])
        _check(RULES["type"], typ, bad)

        process = _name(d.get("process"))
        if process is None:
            missing_process.append(len(events))
            process = 0
        else:
            _check(RULES["process"], process, bad)
            client_processes += process != NEMESIS

        value = d.get("value")
        is_txn = _micro_ops(value)
        if is_txn:
            _strip_micro_op_names(value)
        f = _name(d.get("f"))
        if f is None:
            if not is_txn:
                raise bad("missing f (and the value is not a list of micro-ops)")
            f = "txn"
        else:
            _check(RULES["f"], f, bad)

        index = d.get("index")
        if index is not None:
            if not _int(index):
                raise bad(f"index must be an integer, got {_short(index)}")
            if last_index is not None and index <= last_index:
                raise bad(f"index {index} after index {last_index}: the file is not in index order")
            last_index = index
        labels.append(index)

        time = d.get("time")
        if time is None:
            missing_time.append(len(events))
            time = 0
        else:
            time = _check(RULES["time"], time, bad)
            if last_time is not None and time < last_time:
                backwards.append(lineno)
            last_time = time

        node = _check(RULES["node"], _name(d.get("node")), bad)
        ts = _check(RULES["ts"], d.get("ts"), bad)
        events.append(Event(len(events), time, intern(typ), process, intern(f), value, node,
                            d.get("error"), ts))
        lines.append(lineno)

    _fill_times(events, missing_time)
    if missing_process:
        if client_processes:
            raise HistoryError(source, lines[missing_process[0]],
                               "missing process (other operations in this file have one)")
        _one_client(events, missing_process)
    h = History(events, source, lines)
    if any(label is not None and label != pos for pos, label in enumerate(labels)):
        h.labels = labels
    if backwards:
        h.time_backwards = (backwards[0], len(backwards))
    h.ops()  # pairing errors name their line now
    return h


def _check(rule: Rule, value: Any, bad: Callable[[str], HistoryError]) -> Any:
    """`value` converted as `rule` says, or the rule's one-line error."""
    if rule.convert is not None:
        value = rule.convert(value)
    problem = rule.problem(value)
    if problem is not None:
        raise bad(problem)
    return value


def _fill_times(events: list[Event], missing: list[int]) -> None:
    if len(missing) == len(events):  # no times at all: file order
        for e in events:
            e.time = e.index
        return
    last = 0
    missing_set = set(missing)
    for e in events:
        if e.index in missing_set:
            e.time = last
        last = e.time


def _one_client(events: list[Event], positions: list[int]) -> None:
    """No client op names a process: one sequential client, with a fresh
    process id after each info (a crashed client's process is never reused)."""
    process = 0
    for pos in positions:
        e = events[pos]
        e.process = process
        if e.type == "info":
            process += 1


def _describe(x: Any) -> str:
    kind = {list: "a list", str: "a string", int: "a number", float: "a number",
            type(None): "nil", bool: "a boolean"}.get(type(x), type(x).__name__)
    return f"{kind} {_short(x)}" if x is not None else kind


def _short(x: Any) -> str:
    s = repr(x)
    return s if len(s) <= 60 else s[:57] + "..."

