"""The reference cluster's fault switches: the one list of their names.

Each switch reproduces a real bug class so that a checker can be shown to
catch it (docs/cluster.md, "Fault switches"); all are off by default. The node
processes accept them (`--fault`), `sleuth cluster up` and `sleuth run` offer
them. Which process honours which: the coordinator `stale-read`,
`no-fencing`, `rtw-no-conflict`, `write-ts-not-strict` (with the oracle and
storage for the last); the oracle `oracle-amnesia`; storage
`ack-before-durable`; the source node `ack-early` and `rtr-skip`.
"""

from __future__ import annotations

FAULTS: dict[str, str] = {
    "stale-read": "strict-serializable reads run at a timestamp 2 s old",
    "oracle-amnesia": "the oracle forgets its persisted bound on restart: timestamps go backwards",
    "no-fencing": "an old coordinator is not fenced; a leader reads at its own latest timestamp",
    "rtw-no-conflict": "read-then-write without conflict detection: lost updates",
    "ack-before-durable": "storage acknowledges appends before they are fsynced",
    "write-ts-not-strict": "write timestamps not strictly above earlier reads (a coarse clock, no +1)",
    "ack-early": "the source node acknowledges upstream LSNs before the global timestamp passes them",
    "rtr-skip": "real-time-recent reads are served without waiting for the upstream's current LSN",
}
