"""The checker registry as the documentation shows it: the table of workloads, models and
options in docs/history-format.md is written from `sleuth.checker.WORKLOADS` and `OPTIONS`,
never by hand, so it cannot fall behind what `sleuth check` takes.

    python -m sleuth.checker.registry_doc [docs/history-format.md]

rewrites the text between the BEGIN and END markers of that file; tests/test_models.py
fails when the file differs from what this module writes.
"""

from __future__ import annotations

import os
import sys

from sleuth.checker import OPTIONS, WORKLOADS, Option

BEGIN = "<!-- BEGIN checker registry: written by `python -m sleuth.checker.registry_doc`, do not edit -->"
END = "<!-- END checker registry -->"
DOC = os.path.join("docs", "history-format.md")


def _flag(o: Option) -> str:
    if o.type is None:
        on = " (on unless turned off)" if o.default else ""
        return f"`{o.flag}/--no-{o.flag[2:]}`{on}" if o.switch else f"`{o.flag}`"
    return f"`{o.flag} {o.metavar or o.type.__name__.upper()}`"


def _models(w) -> str:
    if not w.models:
        source = w.module.removeprefix("sleuth.").replace(".", "/") + ".py"
        return f"none: judged by its invariants (`{source}`); `--model` is refused"
    names = ", ".join(f"`{m}`" for m in w.models)
    aliases = sorted({a for a, _ in w.aliases})
    if len(aliases) > 4:  # the transactional workloads take Adya's and Elle's names too
        return f"{len(w.models)}: {names}; also Adya's PL-levels and Elle's other names (docs/models.md)"
    return names + (f" (also accepted: {', '.join(f'`{a}`' for a in aliases)})" if aliases else "")


def table() -> str:
    """The Markdown the markers enclose: one row per workload, then one per option."""
    rows = ["| workload | models (default first) | options |", "| --- | --- | --- |"]
    shown: dict[tuple, str] = {}  # a workload judged as an earlier one is said to be so, not listed again
    for w in WORKLOADS.values():
        options = ", ".join(_flag(OPTIONS[o]) for o in w.options if not OPTIONS[o].own_flag) or "—"
        same = shown.setdefault((w.models, w.aliases), w.name) if w.models else w.name
        models = f"as `{same}`" if same != w.name else _models(w)
        rows.append(f"| `{w.name}` | {models} | {options} |")
    rows += ["", "| option | workloads | what it does |", "| --- | --- | --- |"]
    for o in OPTIONS.values():
        if o.own_flag:
            continue  # --model: the models column says what each workload takes
        users = ", ".join(f"`{w.name}`" for w in WORKLOADS.values() if o.name in w.options)
        text = o.help.split(": ", 1)[1] if ": " in o.help else o.help  # the help names the workloads first
        rows.append(f"| {_flag(o)} | {users} | {text} |")
    return "\n".join(rows)


def render(text: str, path: str = DOC) -> str:
    """`text` with the table between its markers replaced by `table()`; ValueError without them."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise ValueError(f"{path}: expected one {BEGIN!r} line and, after it, one {END!r}")
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    return f"{head}{BEGIN}\n{table()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    path = argv[0] if argv else DOC
    with open(path) as f:
        text = f.read()
    new = render(text, path)
    if new != text:
        with open(path, "w") as f:
            f.write(new)
        print(f"{path}: the checker registry's table rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
