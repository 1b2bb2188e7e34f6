"""sleuth.checker — the analyses: linearizability, Elle-style cycle analysis, invariants.

`CHECKERS` maps each workload to the function that judges its histories, as
(module, function) so a `sleuth check` imports only what it uses.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

CHECKERS: dict[str, tuple[str, str, str | None]] = {
    # workload: (module, function, default model)
    "register": ("sleuth.checker.linearizable", "check_register", "linearizable"),
    "cas-register": ("sleuth.checker.linearizable", "check_cas_register", "linearizable"),
    "list-append": ("sleuth.checker.list_append", "check", "strict-serializable"),
    "rw-register": ("sleuth.checker.rw_register", "check", "strict-serializable"),
    "bank": ("sleuth.checker.bank", "check_bank", None),
    "counter": ("sleuth.checker.counter", "check_counter", None),
}
TRANSACTIONAL = ("list-append", "rw-register")


def checker_for(workload: str) -> Callable:
    module, function, _ = CHECKERS[workload]
    return getattr(importlib.import_module(module), function)


def default_model(workload: str) -> str | None:
    return CHECKERS[workload][2]
