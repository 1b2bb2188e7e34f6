"""`make lint`'s layer check: import-linter's contracts (pyproject.toml, [tool.importlinter])
over the `sleuth` package as it is installed.

import-linter finds a package's modules by walking the package's own folder, but sleuth's
subsystems are top-level folders that pyproject.toml's [tool.setuptools.package-dir] maps
into `sleuth.*` (checker/ is `sleuth.checker`). So the package is laid out as a wheel lays it
out, from that same mapping (the one owner of it), in a temporary folder: each module's
source copied to the place its dotted name says; then `lint-imports` runs on it. Exit status
and output are lint-imports' own (0: every contract kept; 1: one is broken, and which import
breaks it).

    python ci/lint_imports.py [--root DIR] [lint-imports options...]

`--root DIR` lints the tree at DIR instead of this repository (tests/test_layers.py plants a
violation in a copy and sees it refused).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import tomllib


def lay_out(root: str, into: str) -> None:
    """Copy the package's Python sources under `into`, as pyproject.toml maps them."""
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        setup = tomllib.load(f)["tool"]["setuptools"]
    folders = setup.get("package-dir", {})
    for package in setup["packages"]:
        # a package's folder: its own mapping, else its parent's folder and its last name
        parts = package.split(".")
        for i in range(len(parts), 0, -1):
            if ".".join(parts[:i]) in folders:
                src = os.path.join(root, folders[".".join(parts[:i])], *parts[i:])
                break
        else:
            src = os.path.join(root, *parts)
        dst = os.path.join(into, *parts)
        os.makedirs(dst, exist_ok=True)
        for name in os.listdir(src):
            if name.endswith(".py"):
                shutil.copy(os.path.join(src, name), os.path.join(dst, name))


def main(argv: list[str]) -> int:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if argv[:1] == ["--root"]:
        root, argv = os.path.abspath(argv[1]), argv[2:]
    lint = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    with tempfile.TemporaryDirectory(prefix="sleuth-lint-imports-") as tmp:
        lay_out(root, tmp)
        env = {**os.environ, "PYTHONPATH": tmp + os.pathsep + os.environ.get("PYTHONPATH", "")}
        return subprocess.run([lint, os.path.join(root, "pyproject.toml"), "--no-cache", *argv],
                              env=env, cwd=tmp).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
