"""The layer contracts `make lint` checks (pyproject.toml's [tool.importlinter], run by
ci/lint_imports.py; docs/architecture.md draws the layers): kept by the tree as it is, and
refused when a violation is planted in a copy of it. About 1 s per lint-imports run."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINT = os.path.join(ROOT, "ci", "lint_imports.py")
FOLDERS = ("sleuth", "checker", "workloads", "cluster", "nemesis", "reports")

def lint(root: str = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, LINT, "--root", root], capture_output=True, text=True, timeout=120)


def copy_tree(tmp_path) -> str:
    root = tmp_path / "repo"
    for folder in FOLDERS:
        shutil.copytree(os.path.join(ROOT, folder), root / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), root / "pyproject.toml")
    return str(root)


def test_the_tree_keeps_every_contract():
    p = lint()
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert "0 broken" in p.stdout


@pytest.mark.parametrize("module, line, contract", [
    # a checker reaching for run code (directly)
    ("checker/result.py", "import sleuth.run.runner", "a checker imports no run"),
    # a checker reaching the cluster through a module that is allowed itself (indirectly)
    ("checker/models.py", "import sleuth.workloads.source", "a checker imports no run"),
    ("cluster/faults.py", "from sleuth.checker import models", "the reference cluster imports nothing"),
    ("cluster/faults.py", "import sleuth.nemesis.faults", "the reference cluster imports nothing"),
    ("sleuth/cli/run.py", "from sleuth.cli.check import emit", "sleuth check and sleuth run"),
    # the Spark judge reads workloads' capabilities from the registry, not from the clients
    ("sleuth/spark/judge.py", "from sleuth.workloads.clients import WORKLOADS", "the Spark jobs judge with the checkers"),
    # the rooms: each imports only those below it (issue 45)
    ("sleuth/history/jsonl.py", "import sleuth.checker", "the rooms are layers"),
    ("sleuth/base/words.py", "import sleuth.history.jsonl", "the rooms are layers"),
    ("sleuth/records/run.py", "import sleuth.run.runner", "the rooms are layers"),
    ("reports/run_report.py", "import sleuth.campaign.matrix", "the rooms are layers"),
    ("nemesis/faults.py", "import sleuth.reports.run_report", "the rooms are layers"),
    ("sleuth/spark/jobs.py", "import sleuth.cli.check", "the rooms are layers"),
])
def test_a_planted_violation_is_refused(tmp_path, module, line, contract):
    root = copy_tree(tmp_path)
    path = os.path.join(root, module)
    with open(path, "a") as f:
        f.write(f"\n{line}  # planted\n")
    p = lint(root)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-2000:]
    broken = p.stdout.split("Broken contracts", 1)[1]
    assert contract in broken and "BROKEN" in p.stdout


# what is not in the repository: the design notes the project was started from
OUTSIDE = re.compile(r"\b(DESIGN|HISTORY)\.md\b|/work/" + "shared")
TEXT = (".py", ".md", ".toml", ".j2", ".sh", ".txt", ".cfg", ".yml", ".yaml", ".edn", ".html")


def test_no_file_points_outside_the_repository():
    """Issue 45: seven source files and nine docstrings pointed at the design and history
    notes the project started from, which are not in the repository (`OUTSIDE`); they
    point at docs/ now (docs/architecture.md, docs/history-format.md, docs/cluster.md)."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    found = []
    for name in files:
        if not (name.endswith(TEXT) or os.path.basename(name) == "Makefile"):
            continue
        path = os.path.join(ROOT, name)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                if OUTSIDE.search(line):
                    found.append(f"{name}:{n}: {line.strip()}")
    assert len(files) > 100 and found == []


def test_no_contract_exempts_an_import():
    """Issue 45: the checker contract exempted the Spark cluster's image builder (checker/spark
    reaching cluster/); with the rooms, Spark sits above the cluster and nothing is exempt."""
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    checker = next(c for c in contracts if c.get("source_modules") == ["sleuth.checker"])
    assert "sleuth.workloads" in checker["forbidden_modules"]
    assert [c["name"] for c in contracts if c.get("ignore_imports")] == []


def test_every_room_of_the_package_is_a_layer():
    """A newcomer can name the room of any line: every folder of the package is in the layers
    contract, and no module sits loose beside the rooms (sleuth/ holds only rooms)."""
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        pyproject = tomllib.load(f)["tool"]
    layers = next(c for c in pyproject["importlinter"]["contracts"] if c["type"] == "layers")["layers"]
    rooms = {m.strip() for layer in layers for m in re.split(r"[:|]", layer)}
    top = {p for p in pyproject["setuptools"]["packages"] if p.count(".") == 1}
    assert top - rooms == {"sleuth.cluster"}  # apart: its own contract
    loose = [n for n in os.listdir(os.path.join(ROOT, "sleuth")) if n.endswith(".py") and n != "__init__.py"]
    assert loose == []
