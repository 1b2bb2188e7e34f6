"""The consistency models sleuth judges, and the anomalies each one forbids.

Data, not code, as Elle's `elle.consistency-model`: three tables.

- `IMPLIES`: each model and the models directly weaker than it (a history
  that satisfies a model satisfies every model it implies).
- `PROSCRIBES`: the anomalies each model directly forbids, beyond those of
  the models it implies.
- `IMPLIED_ANOMALIES`: each anomaly and the anomalies it is a special case of
  (a G0 is also a G1c; a G-single is also a G-nonadjacent; an item
  anti-dependency cycle is a G2-item, which is a G2).

A model forbids an anomaly iff the anomaly, or one it implies, is proscribed
by the model or by a model it implies. Only models that some anomaly sleuth
can report rules out are listed (Elle's single-object models — linearizable,
sequential, causal, PRAM, ... — forbid no transactional anomaly and would
always come back "possible").

Sources, as Elle cites them: Adya, "Weak Consistency" (MIT 1999) for G0,
G1a-c, G-single, G2-item, G2, G-cursor, G-monotonic, G-MSR, G-SI, G-update
and the PL-levels (PL-1, PL-2, PL-CS, PL-2L, PL-MSR, PL-2+, PL-FCV, PL-2.99,
PL-SI, PL-3U, PL-3, PL-SS); Bailis et al., "Highly Available Transactions"
(VLDB 2014) for monotonic atomic view and read atomic; Cerone, Bernardi &
Gotsman (CONCUR 2015) for read atomic, causal, prefix and parallel snapshot
isolation; Cerone & Gotsman, "Analysing Snapshot Isolation" (PODC 2016) for
G-nonadjacent as SI's cycle condition; Daudjee & Salem (ICDE 2004, VLDB 2006)
for the strong-session and strong variants; Liu et al. (ROLA, which provides
Cerone et al.'s update atomic: Elle's edge from parallel snapshot isolation); Elle
(Kingsbury & Alvaro, VLDB 2020) for the `-process`/`-realtime` variants,
future reads, dirty updates and the strong (session) read uncommitted and
read committed generalizations. Elle keys G-single and G-nonadjacent apart
from G2-item because it also sees predicates; sleuth's cycles are over items
only, so its G-single and G-nonadjacent are G2-item cycles (Adya: a cycle
with one or more item anti-dependency edges) and imply it. Where sleuth was
stricter before Elle's table was adopted (internal, garbage reads: no model
allows them), it stays stricter. An incompatible order is read as Elle reads
it, a dirty read (G1a): two committed reads that no single order of a key's
versions can give mean some read saw a version that never joined that order,
as READ UNCOMMITTED allows (MariaDB shows it: reads of appends later rolled
back); read committed and everything above forbid it.

Lattice spine (stronger above weaker; the full graph is `IMPLIES`):

    strict-serializable
      |                 \\
    strong-session-serializable   strong-snapshot-isolation
      |          \\            /            |
    serializable   strong-session-SI   strong-read-committed
      |      \\          |                   |
    repeatable-read  snapshot-isolation  strong-session-read-committed
      |                 |                   |
    cursor-stability  parallel-SI ... read-atomic ... monotonic-atomic-view
       \\                |                  /
                     read-committed
                          |
                    read-uncommitted
"""

from __future__ import annotations

from functools import cache

# The anomaly names: this module owns them, everything else imports these (tests/test_vocabulary.py
# refuses a name spelled as a literal elsewhere). Transactional anomalies (Adya; Elle):
G0, G1, G1A, G1B, G1C = "G0", "G1", "G1a", "G1b", "G1c"
G_SINGLE, G_NONADJACENT, G2_ITEM, G2 = "G-single", "G-nonadjacent", "G2-item", "G2"
G_CURSOR, G_MONOTONIC, G_MSR, G_UPDATE = "G-cursor", "G-monotonic", "G-MSR", "G-update"
G_SI, G_SIA, G_SIB = "G-SI", "G-SIa", "G-SIb"
INTERNAL, DUPLICATE_ELEMENTS, GARBAGE_READ, CYCLIC_VERSIONS = (
    "internal", "duplicate-elements", "garbage-read", "cyclic-versions")
DIRTY_UPDATE, INCOMPATIBLE_ORDER, FUTURE_READ, FUZZY_READ, LOST_UPDATE = (
    "dirty-update", "incompatible-order", "future-read", "fuzzy-read", "lost-update")
# a cycle closed only by process order, or by real-time order: the cycle's name with this suffix
PROCESS, REALTIME = "-process", "-realtime"


def process(anomaly: str) -> str:
    """The `-process` variant of a cycle anomaly (Elle)."""
    return anomaly + PROCESS


def realtime(anomaly: str) -> str:
    """The `-realtime` variant of a cycle anomaly (Elle)."""
    return anomaly + REALTIME


def base_of(anomaly: str) -> str:
    """A cycle anomaly's name without its `-process`/`-realtime` suffix."""
    return anomaly.removesuffix(REALTIME).removesuffix(PROCESS)


# model -> the models directly weaker than it (implied by it); strongest first
IMPLIES: dict[str, tuple[str, ...]] = {
    "strict-serializable": ("strong-session-serializable", "strong-snapshot-isolation", "serializable"),
    "strong-session-serializable": ("serializable", "strong-session-snapshot-isolation"),
    "strong-snapshot-isolation": ("strong-session-snapshot-isolation", "strong-read-committed"),
    "serializable": ("repeatable-read", "snapshot-isolation", "update-serializable"),
    "strong-session-snapshot-isolation": ("snapshot-isolation", "strong-session-read-committed"),
    "repeatable-read": ("cursor-stability", "monotonic-atomic-view"),
    "update-serializable": ("forward-consistent-view",),
    "snapshot-isolation": ("forward-consistent-view", "monotonic-atomic-view", "monotonic-snapshot-read",
                           "parallel-snapshot-isolation", "prefix"),
    "forward-consistent-view": ("consistent-view",),
    "consistent-view": ("cursor-stability", "monotonic-view"),
    "parallel-snapshot-isolation": ("causal-cerone", "update-atomic"),
    "prefix": ("causal-cerone",),
    "causal-cerone": ("read-atomic",),
    "update-atomic": ("read-atomic",),
    "read-atomic": ("monotonic-atomic-view",),
    "strong-read-committed": ("strong-session-read-committed", "strong-read-uncommitted"),
    "strong-session-read-committed": ("read-committed", "strong-session-read-uncommitted"),
    "cursor-stability": ("read-committed",),
    "monotonic-view": ("read-committed",),
    "monotonic-snapshot-read": ("read-committed",),
    "monotonic-atomic-view": ("read-committed",),
    "read-committed": ("read-uncommitted",),
    "strong-read-uncommitted": ("strong-session-read-uncommitted",),
    "strong-session-read-uncommitted": ("read-uncommitted",),
    "read-uncommitted": (),
}
MODELS: tuple[str, ...] = tuple(IMPLIES)  # strongest first (each before every model it implies)

# A target's isolation level (`sleuth run --isolation`) -> the model its
# histories are judged against: PostgreSQL's REPEATABLE READ is snapshot
# isolation (Ports & Grittner, VLDB 2012), the rest are named alike. A target
# may judge a level of its own differently (MySQL's REPEATABLE READ: its `models`).
ISOLATION_MODELS: dict[str, str] = {
    "strict-serializable": "strict-serializable", "serializable": "serializable",
    "strong-session-serializable": "strong-session-serializable",
    "read-committed": "read-committed", "repeatable-read": "snapshot-isolation",
}

# Other names for the same models (Adya's PL-levels, Elle's aliases) -> sleuth's name.
ALIASES: dict[str, str] = {
    "PL-1": "read-uncommitted", "PL-2": "read-committed", "PL-CS": "cursor-stability",
    "PL-2L": "monotonic-view", "PL-MSR": "monotonic-snapshot-read", "PL-2+": "consistent-view",
    "PL-FCV": "forward-consistent-view", "PL-2.99": "repeatable-read", "PL-SI": "snapshot-isolation",
    "PL-3U": "update-serializable", "PL-3": "serializable", "PL-SS": "strict-serializable",
    "conflict-serializable": "serializable", "strong-serializable": "strict-serializable",
    "strong-session-PL-1": "strong-session-read-uncommitted", "strong-session-PL-2": "strong-session-read-committed",
    "strong-PL-1": "strong-read-uncommitted", "strong-PL-2": "strong-read-committed",
    "ROLA": "update-atomic",
}

# model -> anomalies it forbids directly (beyond the models it implies)
PROSCRIBES: dict[str, tuple[str, ...]] = {
    "read-uncommitted": (G0, INTERNAL, DUPLICATE_ELEMENTS, GARBAGE_READ, CYCLIC_VERSIONS),
    "read-committed": (G1,),  # Adya PL-2
    "cursor-stability": (G1, G_CURSOR, LOST_UPDATE),  # Adya PL-CS; Bailis
    "monotonic-view": (G1, G_MONOTONIC),  # Adya PL-2L
    "monotonic-snapshot-read": (G1, G_MSR),  # Adya PL-MSR
    "consistent-view": (G1, G_SINGLE),  # Adya PL-2+
    "forward-consistent-view": (G1, G_SIB),  # Adya PL-FCV
    "update-serializable": (G1, G_UPDATE),  # Adya PL-3U
    "repeatable-read": (G1, G2_ITEM, LOST_UPDATE),  # Adya PL-2.99; Bailis
    "snapshot-isolation": (G1, G_SI, G_NONADJACENT, INTERNAL),  # Adya PL-SI; Cerone & Gotsman
    "serializable": (G1, G2, INTERNAL),  # Adya PL-3
    "monotonic-atomic-view": (),  # Bailis: only through read committed, as far as histories show
    # Cerone et al.: every model of theirs requires INT (a transaction's read of a key returns
    # its own last read or write of it), which a changed read within one transaction breaks;
    # Bailis et al.'s read atomic includes item cut isolation, which forbids the same
    "read-atomic": (INTERNAL, G1A, FUTURE_READ, FUZZY_READ),
    "causal-cerone": (INTERNAL, G1A),  # Cerone et al. (incomplete, as in Elle)
    "prefix": (INTERNAL, G1A),  # Cerone et al. (incomplete)
    "parallel-snapshot-isolation": (INTERNAL, G1A),  # Cerone et al. (incomplete)
    "update-atomic": (LOST_UPDATE,),  # Cerone et al.; Liu et al. (ROLA)
    "strong-session-read-uncommitted": (process(G0),),  # Elle
    "strong-session-read-committed": (process(G1C),),  # Elle
    "strong-read-uncommitted": (realtime(G0),),  # Elle
    "strong-read-committed": (realtime(G1C),),  # Elle
    "strong-session-snapshot-isolation": (INTERNAL, process(G1), process(G_NONADJACENT)),  # Daudjee & Salem
    "strong-snapshot-isolation": (INTERNAL, realtime(G1), realtime(G_NONADJACENT)),  # Daudjee & Salem
    "strong-session-serializable": (process(G1), process(G2)),  # Daudjee & Salem
    "strict-serializable": (G1, realtime(G1C), realtime(G2)),  # Adya PL-SS
}


def _variants(base: str, implies: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """A cycle anomaly's `-process` and `-realtime` variants imply what it
    does, in their own variant; the plain cycle is a trivial `-process` one,
    and a `-process` cycle a `-realtime` one (a process runs one transaction
    at a time, so process order is real-time order). As in Elle."""
    return {
        base: (*implies, process(base)),
        process(base): (*(process(a) for a in implies), realtime(base)),
        realtime(base): tuple(realtime(a) for a in implies),
    }


# anomaly -> the anomalies it is a special case of
IMPLIED_ANOMALIES: dict[str, tuple[str, ...]] = {
    **_variants(G0, (G1C,)),  # Adya
    **_variants(G1C, (G1,)),  # Adya: G1 is G1a, G1b or G1c
    **_variants(G1, ()),
    **_variants(G_SINGLE, (G_NONADJACENT, G2_ITEM)),  # item cycles; Cerone & Gotsman
    **_variants(G_NONADJACENT, (G2, G2_ITEM)),
    **_variants(G2_ITEM, (G2,)),  # Adya
    **_variants(G2, ()),
    G1A: (G1,), G1B: (G1,),
    G_SIA: (G_SI,), G_SIB: (G_SI,),  # Adya
    # Adya: every DSG edge is an SSG edge, so a DSG cycle with one rw is one in the SSG (Elle);
    # and it is a G-update: a read-only transaction leaves a cycle only by an rw edge, so a
    # cycle with one rw holds at most one read-only transaction
    G_SINGLE: (*_variants(G_SINGLE, (G_NONADJACENT, G2_ITEM))[G_SINGLE], G_SIB, G_UPDATE),
    # Adya's G-cursor(x) (one rw, the rest ww, all on x) and G-monotonic (a USG
    # cycle with one rw) fold to DSG cycles with one rw: G-single
    G_CURSOR: (G_SINGLE,), G_MONOTONIC: (G_SINGLE,),
    # Adya's G-update: a DSG cycle with an rw edge; sleuth's cycles are item cycles
    G_UPDATE: (G2_ITEM,),
    DIRTY_UPDATE: (G1A,),  # Elle: a write built on an aborted one
    INCOMPATIBLE_ORDER: (G1A,),  # Elle: some read saw a version outside the key's one order
    FUTURE_READ: (G1C,),  # Elle: a trivial cycle T -wr-> T
    FUZZY_READ: (G_SINGLE,),  # T -rw-> T' -wr-> T: Berenson et al.'s P2, one anti-dependency
    LOST_UPDATE: (G2_ITEM,),  # Adya's H_lu, as Elle
}

# The durability audit's anomalies (a campaign's Spark judge, docs/spark.md): what a run's
# storage kept against what its clients were told. They are no transactional anomaly, so
# outside the lattice: no model allows either.
LOST_WRITE = "lost-write"  # an `ok` write that is not durable (acknowledged, then gone)
PHANTOM_WRITE = "phantom-write"  # a `fail`ed write that is there all the same
DURABILITY_ANOMALIES = (LOST_WRITE, PHANTOM_WRITE)

# The invariants' anomalies, each found by one workload's checker and, like the durability
# audit's, outside the lattice (the checker that finds one says the history is invalid).
NONLINEARIZABLE = "nonlinearizable"  # registers: no linearization of a key's operations
WRONG_TOTAL, NEGATIVE_BALANCE = "wrong-total", "negative-balance"  # bank
COUNTER_TOO_LOW, COUNTER_TOO_HIGH = "counter-too-low", "counter-too-high"  # counter
# the source workload (an upstream's changes as a source node shows them)
DUPLICATE_CHANGE, INVENTED_CHANGE, SKIPPED_CHANGE, LOST_CHANGE = (
    "duplicate-change", "invented-change", "skipped-change", "lost-change")
STALE_RTR_READ, ACKNOWLEDGED_NOT_VISIBLE = "stale-rtr-read", "acknowledged-not-visible"
# the reference cluster's timestamp rules (grey-box: the timestamps its statements report)
WRITE_TS_NOT_ABOVE_READ, READ_TS_BELOW_WRITE, TS_BACKWARDS = (
    "write-ts-not-above-read", "read-ts-below-write", "ts-backwards")
INVARIANT_ANOMALIES = (
    NONLINEARIZABLE, WRONG_TOTAL, NEGATIVE_BALANCE, COUNTER_TOO_LOW, COUNTER_TOO_HIGH, DUPLICATE_CHANGE,
    INVENTED_CHANGE, SKIPPED_CHANGE, LOST_CHANGE, STALE_RTR_READ, ACKNOWLEDGED_NOT_VISIBLE,
    WRITE_TS_NOT_ABOVE_READ, READ_TS_BELOW_WRITE, TS_BACKWARDS)

# Every anomaly name sleuth reports (a cycle's variants included).
ANOMALIES: frozenset[str] = frozenset(
    {a for v in PROSCRIBES.values() for a in v} | set(IMPLIED_ANOMALIES)
    | {a for v in IMPLIED_ANOMALIES.values() for a in v} | set(DURABILITY_ANOMALIES) | set(INVARIANT_ANOMALIES))


@cache
def implied(anomaly: str) -> frozenset[str]:
    """`anomaly` and every anomaly it implies."""
    out = {anomaly}
    for a in IMPLIED_ANOMALIES.get(anomaly, ()):
        out |= implied(a)
    return frozenset(out)


@cache
def weaker_or_equal(model: str) -> frozenset[str]:
    """`model` and every model it implies."""
    out = {model}
    for m in IMPLIES[model]:
        out |= weaker_or_equal(m)
    return frozenset(out)


@cache
def forbidden_by(model: str) -> frozenset[str]:
    """Every anomaly `model` proscribes, directly or through a weaker model."""
    return frozenset(a for m in weaker_or_equal(model) for a in PROSCRIBES.get(m, ()))


def forbids(model: str, anomaly: str) -> bool:
    return not implied(anomaly).isdisjoint(forbidden_by(canonical(model)))


def forbidding(anomaly: str) -> tuple[str, ...]:
    """The weakest models that forbid `anomaly`."""
    out = [m for m in MODELS if forbids(m, anomaly)]
    return tuple(m for m in out if not any(w in out for w in weaker_or_equal(m) - {m}))


def canonical(model: str) -> str:
    """sleuth's name for `model` (an Adya PL-level or Elle alias is accepted)."""
    model = ALIASES.get(model, model)
    if model not in IMPLIES:
        raise ValueError(f"unknown model {model!r}; known: {', '.join(MODELS)} "
                         f"(and {', '.join(ALIASES)})")
    return model




def judge(anomalies: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(not, also-not, possible): the weakest models ruled out, the stronger
    ones ruled out with them, and the models still possible."""
    ruled_out = {m for m in MODELS if any(forbids(m, a) for a in anomalies)}
    weakest = [
        m for m in MODELS
        if m in ruled_out and not any(w in ruled_out for w in weaker_or_equal(m) - {m})
    ]
    also = [m for m in MODELS if m in ruled_out and m not in weakest]
    possible = [m for m in MODELS if m not in ruled_out]
    return weakest, also, possible
