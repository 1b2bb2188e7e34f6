"""sleuth.cluster — the reference system under test (docs/cluster.md).

`RUNTIMES` names where its nodes can run; `control.make_runtime` builds each.
Kept here, free of imports, so the CLI can offer the names without loading
the runtimes.
"""

RUNTIMES = ("docker", "local", "ssh")
