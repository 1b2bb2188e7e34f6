"""The seams between sleuth's parts, as small `typing.Protocol`s (docs/architecture.md).

Jepsen's test is a map of a few roles, each a small protocol (Client,
Nemesis, DB, Checker); sleuth's are these five. Each names the methods the
other parts call and nothing else, so a reader sees where one part ends and
the next begins, and a new target, runtime, fault, workload or checker knows
exactly what to provide. The implementations:

- `Target`: `sleuth.targets` (reference, postgres, mariadb, URLs, etcd, a
  database described in a file); the base class there supplies refusals
  (`Unsupported`) for what a target cannot do.
- `Runtime`: `sleuth.cluster.runtime_local`, `runtime_docker`, `runtime_ssh`:
  the only code that knows where a reference-cluster node runs.
- `Fault`: `sleuth.nemesis.faults` (kill, pause, dual-leader, clock, partition, kill-all).
- `Workload`: `sleuth.workloads.clients` (register, list-append, rw-register,
  bank, counter).
- `Checker`: the functions the registry names (`sleuth.checker.WORKLOADS`).

Nothing imports this module at run time except to annotate, and for
`Unsupported`, the refusal a target raises and a nemesis raises for it (here,
below both, so a nemesis needs no target code); the tests check that every
implementation has what its protocol names.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # to annotate only: the seams sit below every room that implements them
    from sleuth.checker.result import Result
    from sleuth.history.jsonl import History


class Unsupported(Exception):
    """This target cannot do what was asked (e.g. kill a remote database)."""


@runtime_checkable
class Target(Protocol):
    """A system under test: started (or found), connected to, and broken on purpose."""

    name: str
    family: str  # the SQL dialect its workloads speak: reference, general (PostgreSQL), mysql
    isolations: tuple[str, ...]  # the levels `--isolation` may ask for, the default first
    roles: tuple[str, ...]  # node roles a nemesis may pick (storage, oracle, coordinator, ...)
    grey_box: bool  # does each statement report its timestamp?
    generation: int  # bumped when the set of endpoints changes: clients reconnect
    runtime_name: str | None  # where its nodes run (local, docker, ssh); None: a server it was given

    def up(self, progress=print) -> None: ...
    def down(self) -> None: ...
    def dsns(self) -> list[tuple[str, str]]: ...
    def connect(self, dsn: str, timeout: float) -> Any: ...
    def session_sql(self, isolation: str) -> list[str]: ...
    def classify(self, exc: BaseException, writes: bool) -> tuple[str, str, bool] | None: ...
    def linearizable_keys(self, isolation: str | None) -> bool: ...
    def workload(self, name: str, keys: int) -> Any: ...  # its client for a workload of the registry
    def socket_of(self, conn: Any) -> int: ...  # what the watchdog shuts when an operation hangs
    # What a nemesis or a workload may ask of it: `nodes`, `coordinators`, `clock`, `partition`
    # (each nemesis kind declares its need: `nemesis.faults.Fault.needs`), `upstream` (the source
    # workload's upstream PostgreSQL, `use_upstream`). The methods below that serve one ability
    # are declared for every target; one without the ability refuses them (`Unsupported`).
    abilities: frozenset[str]
    def refusal(self, kind: str, need: str) -> str: ...  # the line refusing a kind it cannot do
    def clock_nodes(self) -> list[str]: ...  # clock: the nodes a clock fault may move
    def set_clock(self, node: str, offset_ms: int) -> None: ...  # clock: 0 resets it
    def add_coordinator(self) -> str: ...  # coordinators: a second leader, serving at once
    def retire_coordinator(self, node: str) -> None: ...  # coordinators
    def grudges(self) -> tuple[str, ...]: ...  # partition: which cuts mean something here
    def use_upstream(self, workload: Any) -> None: ...  # upstream: start one for `workload`
    def nodes(self, role: str) -> list[str]: ...
    def kill(self, node: str) -> None: ...
    def restart(self, node: str) -> None: ...
    def pause(self, node: str) -> None: ...
    def resume(self, node: str) -> None: ...
    def cut(self, a: str, b: str) -> None: ...
    def heal_cuts(self) -> None: ...
    def collect_logs(self, into: str) -> None: ...
    def wait_healthy(self, timeout: float = 30.0) -> None: ...


@runtime_checkable
class Runtime(Protocol):
    """Where the reference cluster's nodes run: processes, containers or remote hosts."""

    def up_network(self, progress=print) -> None: ...
    def start(self, name: str, argv: list[str], ip: str, env: dict | None = None) -> None: ...
    def kill(self, name: str) -> None: ...
    def restart(self, name: str) -> None: ...
    def stop(self, name: str) -> None: ...
    def pause(self, name: str) -> None: ...
    def resume(self, name: str) -> None: ...
    def logs(self, name: str) -> str: ...
    def exec(self, name: str, argv: list[str]) -> tuple[int, str]: ...
    def cut(self, a: str, ip_a: str, b: str, ip_b: str) -> None: ...
    def heal_cuts(self) -> None: ...
    def nodes(self) -> list[dict]: ...  # each {name, ip, state}
    def remove_all(self) -> None: ...


@runtime_checkable
class Fault(Protocol):
    """One kind of nemesis fault: `start` breaks something and says what, `stop` heals it."""

    start_f: str  # the history's event name for the start (kill, pause, start-partition, ...)
    stop_f: str  # and for the heal (restart, resume, stop-partition, ...)

    def start(self, rnd: random.Random) -> Any: ...
    def stop(self) -> Any: ...


@runtime_checkable
class Workload(Protocol):
    """What clients do: generate an operation, perform it over a connection, read everything at the end."""

    name: str
    checker: str  # the `sleuth check` workload its histories are judged as

    def setup(self, conn: Any) -> None: ...
    def generate(self, rnd: random.Random, slot: int) -> tuple[str, Any]: ...
    def perform(self, conn: Any, f: str, value: Any) -> Any: ...
    def final_reads(self) -> list[tuple[str, Any]]: ...


class Checker(Protocol):
    """A history in, a verdict out: pure, reading nothing but its arguments."""

    def __call__(self, history: History, **options: Any) -> Result: ...
