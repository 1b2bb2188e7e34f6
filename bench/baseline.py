"""The old code beside the new in one bench run: sleuth as it was at a git revision, importable.

`make bench-spark` prints the figures of the Spark jobs before and after a change side by side,
measured by turns in the same run (the machine is shared: figures from another day are not
comparable). `path(rev)` builds that revision's wheel once (offline, no build isolation: the
machine has no internet) and unpacks it under bench/out/baseline/<rev>/; a child process with
that directory first on PYTHONPATH imports the old `sleuth` (the editable install's finder
comes after the path entries).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# the last commit whose Spark jobs moved key buckets as files the tasks wrote (issue 46)
BASELINE = "c5845fd"


def path(rev: str = BASELINE) -> str:
    """A directory holding the `sleuth` package of `rev`, built once."""
    full = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", rev], capture_output=True, text=True,
                          check=True).stdout.strip()
    out = os.path.join(HERE, "out", "baseline", full)
    if os.path.isdir(os.path.join(out, "sleuth")):
        return out
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        os.makedirs(src)
        archive = subprocess.run(["git", "-C", ROOT, "archive", full], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", src], input=archive, check=True)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                        "-w", tmp, src], check=True)
        wheel = next(f for f in os.listdir(tmp) if f.endswith(".whl"))
        with zipfile.ZipFile(os.path.join(tmp, wheel)) as z:
            z.extractall(out + ".tmp")
    os.replace(out + ".tmp", out)
    return out


def cwd() -> str:
    """Where the children run: not the checkout, whose `sleuth/` directory would be imported
    from the working directory by Spark's Python workers (in local mode they start in the
    driver's) before anything on PYTHONPATH, so the old jobs would run the new tasks."""
    out = os.path.join(HERE, "out")
    os.makedirs(out, exist_ok=True)
    return out


def env(rev: str | None) -> dict[str, str]:
    """The environment of a child that imports `rev`'s sleuth (None: this checkout's)."""
    e = dict(os.environ)
    if rev is not None:
        e["PYTHONPATH"] = os.pathsep.join([path(rev), *filter(None, [e.get("PYTHONPATH")])])
    return e
