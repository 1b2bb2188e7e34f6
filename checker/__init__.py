"""sleuth.checker — the analyses: linearizability, Elle-style cycle analysis, invariants.

The registry: each workload declares, as data, the function that judges its
histories, the consistency models it can be judged against, and the options
it takes (as Jepsen's test map names its checker, and Elle's `check` takes
only the options its datatype understands). `sleuth check` and `sleuth run`
both read it, so an option or model that does not apply is refused in one
place: no checker takes a catch-all `**_` that would swallow it. The model is
one of the declared options (`model`), taken by the checkers that judge
against a chosen model; `sleuth.checker.checks.Checks.kwargs` makes every call's
keyword arguments from these declarations.

A checker is named as (module, function) and imported only when used, so a
`sleuth check` starts without loading numpy or the other checkers.

Adding an option is one line in `OPTIONS` (its CLI flag, type and help) plus
its name in the workloads that take it; the CLI builds its flags from the
table and passes a checker only the options it declared.

Each workload also declares what the rest of sleuth may rely on, so no part
keeps a table of workloads of its own: the SQL tables its clients create
(`tables`, each named `sleuth_…`), whether a campaign's Spark judge splits
its runs per key (`keyed`), whether `sleuth check --spark` can judge its
histories larger than a machine (`large`), and how the durability audit
reads its writes back from the reference cluster's storage (`audited`).
A client workload (`workloads/`) is named after the registry's workload
that judges it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sleuth.checker.models import ALIASES, MODELS


@dataclass(frozen=True)
class Option:
    """A checker option: the keyword the checker function takes, and its flag.

    type None is a boolean: `--name` (off unless given), or with switch=True
    `--name/--no-name` (its default is the checker's, `default`). A typed
    option may set a `minimum`. Only options the user gives reach a checker.
    """

    name: str  # the checker's keyword argument
    help: str
    type: type | None = None  # None: a boolean flag
    metavar: str | None = None
    json: bool = False  # the flag's text is JSON, decoded before the checker sees it
    switch: bool = False  # a boolean with both --name and --no-name
    default: Any = None  # shown in --help; the checker's own default applies
    minimum: float | None = None
    own_flag: bool = False  # the command declares the flag itself (--model), not the table


    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


OPTIONS: dict[str, Option] = {o.name: o for o in (
    Option("model", "list-append, rw-register: the consistency model to judge against.", str, "MODEL",
           own_flag=True),
    Option("initial_value", "register, cas-register: the value before any write, as JSON "
                            "(default null).", str, "JSON", json=True),
    Option("total", "bank: the conserved total (default: the first complete read).", int, "N"),
    Option("no_negative", "bank: also forbid negative balances."),
    Option("linearizable_keys", "rw-register: assume each key is linearizable on its own (true of "
                                "a single PostgreSQL server at any level) and infer version orders "
                                "from real time, as Elle's option does."),
    Option("failed_cas_observes", "register, cas-register: a failed cas means its comparison did "
                                  "not match (etcd, as Porcupine's etcd model reads it), so the "
                                  "register held another value at some instant of it."),
    Option("sequential_keys", "rw-register: assume each key is sequentially consistent (each process "
                              "sees its versions in order) and infer version orders from process "
                              "order, as Elle's option does."),
    Option("wfr_keys", "rw-register: a transaction that read v from a key and then wrote w to it "
                       "orders v before w (writes follow reads; Elle's option).", switch=True,
           default=True),
    Option("cycle_search_timeout", "list-append, rw-register: seconds of cycle search per strongly "
                                   "connected component (Elle's option; default 10). Types a cut-short "
                                   "search may miss are listed as incomplete.", float, "SECONDS",
           minimum=0),
)}

# Every table a workload creates is named `sleuth_…`, so that none is mistaken for a table of
# the user's database (`--target postgresql://…`, `mysql://…`). The runner creates them only where
# none of that name exists, and drops only those it created (docs/exit-status.md, README).
TABLE_PREFIX = "sleuth_"
REGISTERS, LISTS, RW, ACCOUNTS, COUNTERS, SOURCE_CHANGES = (
    TABLE_PREFIX + t for t in ("registers", "lists", "rw", "accounts", "counters", "src"))
# How the durability audit reads a workload's writes back from the storage nodes' rows:
LIST_ROWS = "list"  # one row [k, " v1 v2 ..."] per key, an append rewrites it: what is in it at the end
REGISTER_ROWS = "register"  # one row [k, v] per key, a write replaces it: every value ever inserted

LINEARIZABLE = ("linearizable",)
TXN_MODELS = MODELS  # the lattice of checker/models.py, strongest first


@dataclass(frozen=True)
class Workload:
    """What judges one workload's histories.

    models:  the models it can be judged against, the default first; empty
             for invariant checkers (bank, counter), which take no --model.
    aliases: other model names that mean one of `models` for this workload
             (strict serializability of single-operation transactions on one
             object is linearizability).
    options: names in OPTIONS the checker function takes (`model` among them
             when the checker judges against a chosen model).
    micro_ops: a transactional workload's micro-op functions; its checker
             takes micro-ops as lists or tuples (the compact reader's).
    tables:  the SQL tables its clients create (the first holds what they write).
    keyed:   a campaign's Spark judge splits its runs per key, one task per
             (run, key), verdicts merged (Jepsen's `independent`).
    large:   `sleuth check --spark` judges it, per key on executors: a history
             larger than a machine (sleuth/spark/history_check.py).
    audited: how the durability audit reads its writes back from the storage
             nodes (LIST_ROWS, REGISTER_ROWS), or None: not audited (bank and
             counter rows carry no unique values).
    """

    name: str
    module: str
    function: str
    models: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    aliases: tuple[tuple[str, str], ...] = ()
    reader: tuple[str, str] | None = None  # (module, function) reading a file for the checker
    micro_ops: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()
    keyed: bool = False
    large: bool = False
    audited: str | None = None

    def load(self, path: str, events: bool = True) -> Any:
        """The history in `path`: by the workload's own reader if it has one
        (it hands what it cannot read to the general one), else `sleuth.history.imports.load`."""
        if self.reader is None:
            from sleuth.history.imports import load

            return load(path, events=events, micro_ops=self.micro_ops)
        return getattr(importlib.import_module(self.reader[0]), self.reader[1])(path, events=events)

    @property
    def default_model(self) -> str | None:
        return self.models[0] if self.models else None

    def checker(self) -> Callable[..., Any]:
        return getattr(importlib.import_module(self.module), self.function)

    def model(self, requested: str | None) -> str | None:
        """The model to judge, or ValueError naming what is accepted."""
        if requested is None:
            return self.default_model
        requested = dict(self.aliases).get(requested, requested)
        if requested in self.models:
            return requested
        if not self.models:
            raise ValueError(f"{self.name} histories are judged by their invariants; "
                             "--model does not apply")
        raise ValueError(f"{requested!r} is not a model for {self.name} "
                         f"(one of {', '.join(self.models)})")


REGISTER_ALIASES = (("strict-serializable", "linearizable"),)
TXN_ALIASES = tuple(ALIASES.items())  # Adya's PL-levels and Elle's other names

WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("register", "sleuth.checker.linearizable", "check_register",
             LINEARIZABLE, ("initial_value", "failed_cas_observes"), REGISTER_ALIASES,
             ("sleuth.checker.register_load", "read_register"),
             tables=(REGISTERS,), keyed=True, large=True, audited=REGISTER_ROWS),
    Workload("cas-register", "sleuth.checker.linearizable", "check_cas_register",
             LINEARIZABLE, ("initial_value", "failed_cas_observes"), REGISTER_ALIASES, large=True),
    Workload("list-append", "sleuth.checker.list_append", "check", TXN_MODELS,
             ("model", "cycle_search_timeout"), TXN_ALIASES, micro_ops=("append", "r"),
             tables=(LISTS,), large=True, audited=LIST_ROWS),
    Workload("rw-register", "sleuth.checker.rw_register", "check", TXN_MODELS,
             ("model", "linearizable_keys", "sequential_keys", "wfr_keys", "cycle_search_timeout"), TXN_ALIASES,
             micro_ops=("r", "w"), tables=(RW,), large=True, audited=REGISTER_ROWS),
    Workload("bank", "sleuth.checker.bank", "check_bank", (), ("total", "no_negative"), tables=(ACCOUNTS,)),
    Workload("counter", "sleuth.checker.counter", "check_counter", tables=(COUNTERS,)),
    # an upstream log, via a source node
    Workload("source", "sleuth.checker.source", "check_source", tables=(SOURCE_CHANGES,)),
)}


def checker_for(workload: str) -> Callable[..., Any]:
    return WORKLOADS[workload].checker()
