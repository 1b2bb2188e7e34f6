"""SLEUTH_REQUIRE_LIVE (set by .ci/run): a live test whose component is missing fails in CI
instead of skipping silently; without the switch it skips, as on a developer's machine."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

PROBE = '''
import pytest
from live import missing, needs, present, require_module

def test_missing():
    missing("a warp drive", "none on this ship")

@needs("a flux capacitor", lambda: False)
def test_needs():
    pass

def test_present():
    assert present("a time machine", False) is False

def test_module():
    require_module("no_such_module_for_sleuth_tests")

@needs("air", lambda: True)
def test_there(tmp_path):
    assert tmp_path.exists() and present("air", True)
'''


def _run(tmp_path, switch):
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "SLEUTH_REQUIRE_LIVE"}
    env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
    if switch is not None:
        env["SLEUTH_REQUIRE_LIVE"] = switch
    p = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider",
                        "-p", "no:xdist", str(tmp_path / "test_probe.py")],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    return dict(re.findall(r"::(test_\w+) (PASSED|FAILED|SKIPPED)", p.stdout)), p.stdout


@pytest.mark.parametrize("switch, want", [
    (None, "SKIPPED"), ("0", "SKIPPED"), ("1", "FAILED")])
def test_a_missing_component_skips_unless_the_switch_is_on(tmp_path, switch, want):
    got, out = _run(tmp_path, switch)
    assert got == {"test_missing": want, "test_needs": want, "test_module": want,
                   "test_present": "PASSED" if want == "SKIPPED" else "FAILED",
                   "test_there": "PASSED"}, out
    if want == "FAILED":
        assert "a warp drive is missing (none on this ship), and SLEUTH_REQUIRE_LIVE=1" in out


# The one skip in tests/ that is not for a missing component (its reason is how it was run).
NOT_A_COMPONENT = {("test_run_record.py", "signal handlers live in the main thread")}


def test_every_skip_in_tests_goes_through_the_switch():
    """pytest.skip / importorskip / mark.skipif written directly would skip in CI too."""
    direct = []
    for name in sorted(os.listdir(HERE)):
        if not name.endswith(".py") or name in ("live.py", "test_live_switch.py"):
            continue
        with open(os.path.join(HERE, name)) as f:
            for n, line in enumerate(f, 1):
                if re.search(r"pytest\.(skip\(|importorskip|mark\.skipif)", line) and not any(
                        name == file and why in line for file, why in NOT_A_COMPONENT):
                    direct.append(f"{name}:{n}: {line.strip()}")
    assert direct == []
