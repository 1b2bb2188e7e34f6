"""Faults and the schedule that injects and heals them (Jepsen's nemesis).

Each fault kind has `start(rnd)`, which breaks something and returns what
was done, and `stop()`, which heals it. The schedule alternates: wait an
interval, start a fault, wait, heal, and so on, until the load's time limit
(no fault starts after it). The kinds come in rounds: each round is every
kind of the mix once, in an order shuffled by the run's seeded random
generator, so a run with room for n faults reaches n kinds (a draw per fault
could give one kind twice and another never). Every start and heal is a
nemesis event in the history (`process: "nemesis"`, `type: "info"`). At the
end everything still broken is healed.

- `kill`: SIGKILL every node of one role, then restart them. Roles rotate
  storage → oracle → coordinator, so a short run reaches each.
- `pause`: SIGSTOP / SIGCONT, roles rotating the same way.
- `dual-leader`: start another coordinator while the old one keeps serving
  (clients are spread over both); heal stops the older one.
- `clock`: bump the oracle's clock by ±(1..30) s, or strobe it (flip between
  true time and an offset every few milliseconds), alternately; heal resets it.
- `partition`: cut links with iptables by address; grudges rotate: one node
  isolated, the oracle cut from the coordinators, random halves, a
  majorities ring; with an upstream (the source workload) first the source
  node cut from its upstream PostgreSQL. Clients (on the host) still reach
  every coordinator and the upstream.
- `kill-all`: Jepsen's coordinated crash: SIGKILL every node of every role at once, then
  restart each (what no node had made durable is lost everywhere; a target whose nodes
  cannot come back one by one after that, as a Galera cluster, bootstraps itself again in
  its `restart`).
- On a cluster of peers (`sleuth.targets.described`: etcd, a database described in a
  file; Galera) each node is a role of its own, so `kill` and `pause` rotate over the nodes
  one at a time; the target names its own partition grudges (`target.grudges()`): one node
  isolated, random halves, a majorities ring, and, where the database says which node
  leads, the primary isolated.
- With an upstream, `kill` and `pause` reach the roles `source` (the source
  node) and `upstream` (the PostgreSQL server) in their rotation too.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

from sleuth.base.seams import Target, Unsupported

NONE = "none"  # --nemesis none: no faults; it stands alone


class Fault:
    """One kind of fault, and all a run needs to know of it, declared here on the kind:

    - `kind`: its name in `--nemesis` (and in a campaign's matrix);
    - `needs`: the ability of a target it needs (`Target.abilities`): `nodes` (nodes sleuth
      started and can signal), `coordinators` (a second coordinator can be started), `clock`
      (a node's clock can be moved: `Target.set_clock` on `Target.clock_nodes`), `partition`
      (links between nodes can be cut, along the grudges `Target.grudges` names);
    - `start_fs`: the names its start events may carry (the first is the usual one), `stop_f`
      the name of its heal: the history's vocabulary for this fault, owned here (the report
      shades windows by these names, the run counts them).

    `parse_mix` refuses a kind whose need a target lacks by asking the kind, never by its name."""

    kind = ""
    needs = ""
    start_fs: tuple[str, ...] = ()
    stop_f = ""

    @property
    def start_f(self) -> str:
        """The name of this fault's latest start event."""
        return self.start_fs[0]

    def __init__(self, target: Target):
        self.target = target
        self.turn = 0

    def next_role(self) -> str:
        roles = self.target.roles or ("postgres",)
        role = roles[self.turn % len(roles)]
        self.turn += 1
        return role

    def start(self, rnd: random.Random) -> Any: ...
    def stop(self) -> Any: ...


class Kill(Fault):
    kind, needs = "kill", "nodes"
    start_fs, stop_f = ("kill",), "restart"

    def start(self, rnd: random.Random) -> Any:
        self.victims = self.target.nodes(self.next_role())
        for n in self.victims:
            self.target.kill(n)
        return self.victims

    def stop(self) -> Any:
        for n in self.victims:
            self.target.restart(n)
        return self.victims


def every_node(target: Target) -> list[str]:
    """Every node of every role of `target`, each once, in role order."""
    return list(dict.fromkeys(n for role in target.roles for n in target.nodes(role)))


class KillAll(Kill):
    """Jepsen's coordinated crash: SIGKILL every node of every role at once, then restart each
    (Kill's heal). The target's `restart` brings a cluster back from a crash of every node
    (Galera: bootstrap from the node that recovered the most)."""
    kind, needs = "kill-all", "nodes"
    start_fs, stop_f = ("kill-all",), "restart-all"

    def start(self, rnd: random.Random) -> Any:
        self.victims = every_node(self.target)
        for n in self.victims:
            self.target.kill(n)
        return self.victims


class Pause(Fault):
    kind, needs = "pause", "nodes"
    start_fs, stop_f = ("pause",), "resume"

    def start(self, rnd: random.Random) -> Any:
        self.victims = self.target.nodes(self.next_role())
        for n in self.victims:
            self.target.pause(n)
        return self.victims

    def stop(self) -> Any:
        for n in self.victims:
            self.target.resume(n)
        return self.victims


class DualLeader(Fault):
    kind, needs = "dual-leader", "coordinators"
    start_fs, stop_f = ("start-dual-leader",), "stop-dual-leader"

    def start(self, rnd: random.Random) -> Any:
        self.old = self.target.nodes("coordinator")
        self.new = None
        self.new = self.target.add_coordinator()
        return {"old": self.old, "new": self.new}

    def stop(self) -> Any:
        if self.new is None:  # the second leader never came up: the old one stays
            return {"retired": [], "leader": self.old}
        for n in self.old:
            self.target.retire_coordinator(n)
        return {"retired": self.old, "leader": self.new}


class Clock(Fault):
    """Alternates a bump (one jump of ±1..30 s, held until heal) and a strobe (the clock
    flips between true time and an offset of ±0.2..10 s every 10..200 ms until heal),
    on the oracle's clock as its services see it."""

    kind, needs = "clock", "clock"
    start_fs, stop_f = ("clock-bump", "clock-strobe"), "clock-reset"
    MODES = ("bump", "strobe")

    def __init__(self, target: Target):
        super().__init__(target)
        self.strobe: threading.Thread | None = None
        self.halt = threading.Event()
        self.mode = self.MODES[0]
        self.node = "oracle"

    @property
    def start_f(self) -> str:
        return f"clock-{self.mode}"

    def start(self, rnd: random.Random) -> Any:
        mode = self.MODES[self.turn % len(self.MODES)]
        self.turn += 1
        self.mode = mode
        nodes = self.target.clock_nodes()
        self.node = nodes[0] if len(nodes) == 1 else rnd.choice(nodes)  # the reference: its oracle
        if mode == "bump":
            self.offset = rnd.choice([-1, 1]) * rnd.randint(1_000, 30_000)
            self.target.set_clock(self.node, self.offset)
            return {"node": self.node, "offset-ms": self.offset}
        delta = rnd.choice([-1, 1]) * rnd.randint(200, 10_000)
        period = rnd.randint(10, 200)
        self.halt.clear()
        self.flips = 0
        self.strobe = threading.Thread(target=self._strobe, args=(delta, period), name="clock-strobe",
                                       daemon=True)
        self.strobe.start()
        return {"node": self.node, "mode": "strobe", "delta-ms": delta, "period-ms": period}

    def _strobe(self, delta: int, period_ms: int) -> None:
        on = False
        while not self.halt.wait(period_ms / 1000):
            on = not on
            try:
                self.target.set_clock(self.node, delta if on else 0)
                self.flips += 1
            except Exception:
                pass  # the oracle may be down (another fault); keep strobing until healed

    def stop(self) -> Any:
        out: dict[str, Any] = {"node": self.node, "offset-ms": 0}
        if self.strobe is not None:
            self.halt.set()
            self.strobe.join(10)
            self.strobe = None
            out["flips"] = self.flips
        self.target.set_clock(self.node, 0)
        return out


def majorities_ring(nodes: list[str]) -> list[tuple[str, str]]:
    """Jepsen's majorities ring: nodes in a (shuffled) ring each keep the links to their nearest
    neighbours, enough to see a majority counting themselves; every other link is cut. Each node
    sees a majority, and no two see the same one (for 4 nodes or more)."""
    n = len(nodes)
    reach = (n // 2 + 1) // 2  # neighbours kept on each side: 2 * reach + 1 >= n // 2 + 1
    out = []
    for i in range(n):
        for j in range(i + 1, n):
            if min(j - i, n - (j - i)) > reach:
                out.append((nodes[i], nodes[j]))
    return out


# The partitions' grudges (Jepsen's word: which links a partition cuts). A target names those
# that mean something on it (`Target.grudges`).
ISOLATE_ONE, HALVES, MAJORITIES_RING = "isolate-one", "halves", "majorities-ring"
NODE_GRUDGES = (ISOLATE_ONE, HALVES, MAJORITIES_RING)  # any cluster of nodes
PRIMARY_GRUDGE = "isolate-primary"  # where the database can say which node leads
ORACLE_FROM_COORDINATORS = "oracle-from-coordinators"  # the reference cluster's
REFERENCE_GRUDGES = (ISOLATE_ONE, ORACLE_FROM_COORDINATORS, HALVES, MAJORITIES_RING)
SOURCE_FROM_UPSTREAM = "source-from-upstream"  # a cluster ingesting an upstream: cut first


class Partition(Fault):
    kind, needs = "partition", "partition"
    start_fs, stop_f = ("start-partition",), "stop-partition"

    def start(self, rnd: random.Random) -> Any:
        nodes = every_node(self.target)
        # the target says which grudges mean something on it (a cluster of peers has no oracle)
        grudges = self.target.grudges()
        if "upstream" in self.target.roles:  # a cluster ingesting an upstream: cut that link first
            grudges = (SOURCE_FROM_UPSTREAM, *grudges)
        grudge = grudges[self.turn % len(grudges)]
        self.turn += 1
        if grudge == SOURCE_FROM_UPSTREAM:
            pairs = [(s, "upstream") for s in self.target.nodes("source")]
        elif grudge in (ISOLATE_ONE, PRIMARY_GRUDGE):
            lone = self.target.nodes("primary")[0] if grudge == PRIMARY_GRUDGE else rnd.choice(nodes)
            pairs = [(lone, n) for n in nodes if n != lone]
        elif grudge == ORACLE_FROM_COORDINATORS:
            pairs = [("oracle", c) for c in self.target.nodes("coordinator")]
        elif grudge == HALVES:
            shuffled = nodes[:]
            rnd.shuffle(shuffled)
            half = len(shuffled) // 2
            pairs = [(a, b) for a in shuffled[:half] for b in shuffled[half:]]
        else:
            ring = nodes[:]
            rnd.shuffle(ring)
            pairs = majorities_ring(ring)
        for a, b in pairs:
            self.target.cut(a, b)
        return {"grudge": grudge, "cut": [list(p) for p in pairs]}

    def stop(self) -> Any:
        self.target.heal_cuts()
        return {"healed": True}


# The one table of nemesis kinds: kind -> the class that injects and heals it, and declares
# what it needs (not `cluster.faults.FAULTS`, the reference cluster's bug switches: another
# thing, hence another name). In the order `--help` lists them.
FAULT_CLASSES: dict[str, type[Fault]] = {cls.kind: cls for cls in (Kill, Pause, DualLeader, Clock, Partition,
                                                                    KillAll)}
KINDS = tuple(FAULT_CLASSES)
CHOICES = f"one or more of {', '.join(KINDS)}, or {NONE} (alone: no faults)"  # what --nemesis takes
# event name -> fault kind, for every start and every heal event a schedule writes
STARTS: dict[str, str] = {f: kind for kind, cls in FAULT_CLASSES.items() for f in cls.start_fs}
STOPS: dict[str, str] = {cls.stop_f: kind for kind, cls in FAULT_CLASSES.items()}
# The same, as Jepsen's combined nemesis names them (`jepsen.nemesis.combined`: the :perf
# specs that shade its plots), for histories imported from Jepsen: a kill ends with :start,
# a clock bump with :reset-clock; its :start-packet has no fault of sleuth's and is its own
# kind; a :strobe-clock is an instant there, no window. Reports read both vocabularies.
JEPSEN_STARTS: dict[str, str] = {"kill": "kill", "pause": "pause", "start-partition": "partition",
                                 "bump-clock": "clock", "start-packet": "packet"}
JEPSEN_STOPS: dict[str, str] = {"start": "kill", "resume": "pause", "stop-partition": "partition",
                                "reset-clock": "clock", "stop-packet": "packet"}
ANY_STARTS: dict[str, str] = {**JEPSEN_STARTS, **STARTS}
ANY_STOPS: dict[str, str] = {**JEPSEN_STOPS, **STOPS}


def parse_mix(text: str | None, target: Target) -> list[str]:
    """`kill,pause` -> ["kill", "pause"] (a kind named twice counts once); `none` (alone: no
    faults) -> []; refuses kinds the target cannot do, `none` beside a kind, and a mix that
    names nothing (`,`). Every refusal names the choices as `sleuth run --help` does (CHOICES)."""
    if not text:
        return []
    kinds = list(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))
    if not kinds:
        raise Unsupported(f"--nemesis {text!r}: no fault named; {CHOICES}")
    if kinds == [NONE]:
        return []
    if NONE in kinds:
        raise Unsupported(f"--nemesis {text!r}: none stands alone (it means no faults); name faults without it, "
                          f"or none by itself")
    for k in kinds:
        if k not in FAULT_CLASSES:
            raise Unsupported(f"--nemesis: unknown fault {k!r}; {CHOICES}")
        need = FAULT_CLASSES[k].needs
        if need not in target.abilities:
            raise Unsupported(target.refusal(k, need))
    return kinds


class Schedule(threading.Thread):
    """Fault, heal, fault, heal … every `interval` seconds until stopped, or until
    `end` (time.monotonic(): the load's end), after which no fault starts.

    `happened` counts the start events that took effect, by name (a nemesis that was asked
    for but injected nothing must say so); a start that raised half-way is healed all the
    same, since it may have broken part of what it meant to (some links cut, some nodes
    paused)."""

    def __init__(self, target: Target, kinds: list[str], interval: float, seed: int,
                 record: Callable[[str, Any], None], end: float | None = None):
        super().__init__(name="nemesis", daemon=True)
        self.kinds, self.interval, self.record, self.end = kinds, interval, record, end
        self.round: list[str] = []  # the kinds still to come in this round
        self.rnd = random.Random(f"nemesis-{seed}")
        self.faults = {k: FAULT_CLASSES[k](target) for k in kinds}
        self.halt = threading.Event()
        self.active: Fault | None = None
        self.errors: list[str] = []
        self.happened: dict[str, int] = {}
        self.tried: dict[str, int] = {}  # kind -> starts tried (a start that raised is a nemesis error)

    def next_kind(self) -> str:
        """The next kind of the mix: every kind once a round, each round in a seeded shuffled order."""
        if not self.round:
            self.round = self.rnd.sample(self.kinds, len(self.kinds))
        return self.round.pop(0)

    def missing(self) -> list[str]:
        """The kinds of the mix whose turn never came (the run was too short for them); a kind
        tried in vain is in `errors` instead."""
        return [k for k in self.kinds if k not in self.tried]

    def run(self) -> None:
        while not self.halt.wait(self.interval):
            if self.end is not None and time.monotonic() >= self.end:
                break  # the load is over: a fault now would meet no client
            kind = self.next_kind()
            self.tried[kind] = self.tried.get(kind, 0) + 1  # whether it takes effect or not
            fault = self.faults[kind]
            self.active = fault  # set before start: a start that fails half-way is healed too
            try:
                value = fault.start(self.rnd)  # may choose its name (clock-bump, clock-strobe)
                self.record(fault.start_f, value)
                self.happened[fault.start_f] = self.happened.get(fault.start_f, 0) + 1
            except Exception as e:
                self.errors.append(f"{kind}: {e}")
                self.record(fault.start_f, {"error": str(e)})
                self.heal()
                continue
            if self.halt.wait(self.interval):
                break
            self.heal()

    def heal(self) -> None:
        fault, self.active = self.active, None
        if fault is None:
            return
        for attempt in range(3):
            try:
                self.record(fault.stop_f, fault.stop())
                return
            except Exception as e:
                self.errors.append(f"heal {fault.stop_f}: {e}")
                time.sleep(1)

    def finish(self, wait: float = 120.0) -> None:
        """Stop injecting; heal whatever is still broken (waiting up to `wait` s for a start
        or heal in progress to return first)."""
        self.halt.set()
        if self.is_alive():
            self.join(wait)
        self.heal()
