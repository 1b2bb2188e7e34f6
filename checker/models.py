"""The consistency models sleuth judges, and the anomalies each one forbids.

Data, not code (as Elle's `elle.consistency-model`): a table of models with
the models directly below them, and a table of anomalies with the weakest
models that forbid them. A model forbids an anomaly iff it is at or above one
of the anomaly's forbidding models in the lattice.

Sources: Adya, "Weak Consistency" (MIT 1999/2000) for G0, G1a-c, G-single,
G2-item and the PL-levels; Cerone & Gotsman, "Analysing Snapshot Isolation"
(PODC 2016) for G-nonadjacent as SI's cycle condition; Daudjee & Salem (2004)
and Elle (Kingsbury & Alvaro, VLDB 2020) for the session and real-time
variants.

Lattice (stronger above weaker):

    strict-serializable
            |
    strong-session-serializable
            |
      serializable
        /        \\
    repeatable-read   snapshot-isolation
        \\        /
      read-committed
            |
      read-uncommitted
"""

from __future__ import annotations

from functools import cache

# model -> the models directly weaker than it (implied by it)
IMPLIES: dict[str, tuple[str, ...]] = {
    "strict-serializable": ("strong-session-serializable",),
    "strong-session-serializable": ("serializable",),
    "serializable": ("repeatable-read", "snapshot-isolation"),
    "repeatable-read": ("read-committed",),
    "snapshot-isolation": ("read-committed",),
    "read-committed": ("read-uncommitted",),
    "read-uncommitted": (),
}
MODELS: tuple[str, ...] = tuple(IMPLIES)  # strongest first

# A target's isolation level (`sleuth run --isolation`) -> the model its
# histories are judged against: PostgreSQL's REPEATABLE READ is snapshot
# isolation (Ports & Grittner, VLDB 2012), the rest are named alike.
ISOLATION_MODELS: dict[str, str] = {
    "strict-serializable": "strict-serializable", "serializable": "serializable",
    "strong-session-serializable": "strong-session-serializable",
    "read-committed": "read-committed", "repeatable-read": "snapshot-isolation",
}

ALL = "read-uncommitted"  # the weakest: forbidding here means every model forbids

# Cycle anomalies: base name -> weakest models that forbid the plain cycle.
CYCLES: dict[str, tuple[str, ...]] = {
    "G0": ("read-uncommitted",),  # write cycle (Adya 4.4.1)
    "G1c": ("read-committed",),  # circular information flow (Adya 4.4.2)
    "G-single": ("repeatable-read", "snapshot-isolation"),  # one anti-dependency (Adya 4.4.3)
    "G-nonadjacent": ("repeatable-read", "snapshot-isolation"),  # Cerone & Gotsman 2016
    "G2-item": ("repeatable-read",),  # item anti-dependency cycle (Adya 4.4.3)
}
CYCLE_ORDER: tuple[str, ...] = tuple(CYCLES)  # searched in this order, simplest first

# Non-cycle anomalies -> weakest models that forbid them.
NON_CYCLES: dict[str, tuple[str, ...]] = {
    "G1a": ("read-committed",),  # aborted read (Adya 4.4.2)
    "G1b": ("read-committed",),  # intermediate read (Adya 4.4.2)
    "dirty-update": ("read-committed",),  # a committed write built on an aborted one (Elle)
    "lost-update": ("repeatable-read", "snapshot-isolation"),  # Berenson et al. 1995, P4
    "fuzzy-read": ("repeatable-read", "snapshot-isolation"),  # Berenson et al. 1995, P2
    "internal": (ALL,),  # a txn disagrees with itself: no model allows it
    "duplicate-elements": (ALL,),  # a list read containing an element twice (Elle)
    "incompatible-order": (ALL,),  # two reads of a list, neither a prefix of the other
    "garbage-read": (ALL,),  # a read of a value nobody wrote
    "cyclic-versions": (ALL,),  # a key's versions ordered both ways (Elle; rw-register, linearizable keys)
    "cycle-search-timeout": (),  # not an anomaly: a note that the search hit its bound
}


def forbidding(anomaly: str) -> tuple[str, ...]:
    """The weakest models that forbid `anomaly` (a cycle name may carry a suffix).

    A `-process` cycle needs a same-process order edge to close, so only the
    session and strict models forbid it; a `-realtime` cycle needs a real-time
    edge, so only strict serializability does.
    """
    if anomaly.endswith("-realtime"):
        return ("strict-serializable",) if anomaly[: -len("-realtime")] in CYCLES else ()
    if anomaly.endswith("-process"):
        return ("strong-session-serializable",) if anomaly[: -len("-process")] in CYCLES else ()
    if anomaly in CYCLES:
        return CYCLES[anomaly]
    return NON_CYCLES.get(anomaly, ())


@cache
def weaker_or_equal(model: str) -> frozenset[str]:
    """`model` and every model it implies."""
    out = {model}
    for m in IMPLIES[model]:
        out |= weaker_or_equal(m)
    return frozenset(out)


def forbids(model: str, anomaly: str) -> bool:
    below = weaker_or_equal(model)
    return any(m in below for m in forbidding(anomaly))


def check_model(model: str) -> str:
    if model not in IMPLIES:
        raise ValueError(f"unknown model {model!r}; known: {', '.join(MODELS)}")
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
