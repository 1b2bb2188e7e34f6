"""The checks a history gets: one type, validated against the checker registry.

A run decides its checks once, when it starts (`sleuth.checker.judge.checks_for`),
and records them in test.json; `sleuth check` builds them from its flags;
`sleuth check RUN_DIR` reads the run's and lays the flags given over them.
Whatever the path, the checker is called in one way: with `Checks.kwargs()`,
the keyword arguments its registry entry declares (`sleuth.checker.WORKLOADS`,
`OPTIONS`), and nothing else. The model is one of them: it reaches a checker
only when the checker declares `model` (list-append, rw-register); a register
history is judged as linearizable and an invariant checker (bank, counter,
source) takes no model, so neither is handed one to swallow.

Validation happens when a `Checks` is made (`__post_init__`), so a record that
names an unknown checker, a model the checker does not take, or an option it
does not declare is refused when it is read (a record's bad input), never
passed on to a checker that would ignore it.
"""

from __future__ import annotations

from typing import Any

import msgspec


class Checks(msgspec.Struct, frozen=True, kw_only=True):
    """Which checks a run's history gets.

    checker:    the `sleuth check` workload (a key of sleuth.checker.WORKLOADS).
    model:      the model judged against (None for an invariant checker).
    options:    the checker's declared options the run (or the user) set, by the
                checker's keyword (`total`, `linearizable_keys`, …); unset ones
                take the checker's defaults.
    timestamps: the grey-box timestamp rules (checker/timestamps.py) too.
    """

    checker: str
    model: str | None = None
    options: dict[str, Any] = {}
    timestamps: bool = False

    def __post_init__(self) -> None:
        problem = _problem(self)
        if problem is not None:
            raise ValueError(problem)

    def kwargs(self) -> dict[str, Any]:
        """The keyword arguments of the checker's call: the only place they are made."""
        from sleuth.checker import WORKLOADS

        out = dict(self.options)
        if self.model is not None and "model" in WORKLOADS[self.checker].options:
            out["model"] = self.model
        return out

    def with_options(self, options: dict[str, Any]) -> Checks:
        """These checks with checker options laid over them (`sleuth check`'s flags win over a
        run's own); validated as any `Checks` is."""
        if not options:
            return self
        return msgspec.structs.replace(self, options={**self.options, **options})

    def to_json(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)

    @classmethod
    def from_json(cls, d: Any) -> Checks:
        """Checks from a record's `checks` (ValueError naming what is wrong). The shape written
        before `options` existed (`linearizable_keys`, `total` beside `checker`) reads too."""
        if not isinstance(d, dict):
            raise ValueError(f"checks must be an object, not {type(d).__name__}")
        if "options" not in d:  # the first shape: the two options a run could set, as fields
            options = {}
            if d.get("linearizable_keys"):
                options["linearizable_keys"] = True
            if d.get("total") is not None:
                options["total"] = d["total"]
            d = {k: d[k] for k in ("checker", "model", "timestamps") if k in d} | {"options": options}
        try:
            return msgspec.convert(d, cls)
        except msgspec.ValidationError as e:
            raise ValueError(str(e)) from None


def _problem(c: Checks) -> str | None:
    """What is wrong with `c` as the registry sees it, or None."""
    from sleuth.checker import OPTIONS, WORKLOADS

    spec = WORKLOADS.get(c.checker)
    if spec is None:
        return f"no checker named {c.checker!r} (one of {', '.join(WORKLOADS)})"
    if c.model is not None and c.model not in spec.models:
        takes = f"one of {', '.join(spec.models)}" if spec.models else "it takes none"
        return f"{c.model!r} is not a model of the {c.checker} checker ({takes})"
    for name, value in c.options.items():
        if name == "model" or name not in spec.options:
            takes = ", ".join(o for o in spec.options if o != "model") or "none"
            return f"the {c.checker} checker takes no option {name!r} (its options: {takes})"
        if not _fits(OPTIONS[name], value):
            return f"option {name!r}: {value!r} is not what {OPTIONS[name].flag} takes"
    return None


def _fits(option: Any, value: Any) -> bool:
    if option.json:
        return True  # any JSON value (--initial-value)
    if option.type is None:
        return isinstance(value, bool)
    if option.type is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, option.type) and not isinstance(value, bool)
