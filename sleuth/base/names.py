"""The rule for a name that becomes a directory of sleuth's own: a campaign's
(`store/campaigns/<name>/`) and a cluster's (`$SLEUTH_HOME/clusters/<name>/`). One
path component, so nothing it names can lie outside the directory meant to hold it
(`../../x`), and every such directory is one that `sleuth cluster list` finds.
Its own module, below everything that names directories (the reference cluster
imports nothing of the tester's but modules like this one)."""

from __future__ import annotations

RULE = "letters, digits, - and _ only (it names a directory)"


def name_problem(name: object) -> str | None:
    """Why `name` cannot name such a directory (the one-line message), or None if it can."""
    if isinstance(name, str) and name.replace("-", "").replace("_", "").isalnum():
        return None
    return f"{name!r}: {RULE}"
