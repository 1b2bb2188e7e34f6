"""`make demo`'s exit status (demos/demo.py): the campaign's, so a demo whose live part
failed on a fresh machine (a prerequisite missing: the campaign refuses its file, 254)
does not end 0 as if it had worked."""

from __future__ import annotations

import importlib.util
import json
import os
import stat

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def demo(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("demo", os.path.join(HERE, "..", "demos", "demo.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod.tempfile, "mkdtemp", lambda prefix="": str(tmp_path / prefix))

    def fake_sleuth(stdout: str, status: int) -> None:
        """A `sleuth` that prints `stdout` and exits `status` (the campaign's outcome)."""
        path = tmp_path / "sleuth"
        path.write_text(f"#!/bin/sh\ncat <<'END'\n{stdout}\nEND\nexit {status}\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
        monkeypatch.setattr(mod, "SLEUTH", str(path))

    mod.fake_sleuth = fake_sleuth
    return mod


def test_a_campaign_that_refuses_its_file_fails_the_demo(demo, capsys):
    demo.fake_sleuth("", 254)  # what a missing mariadb-server gives
    assert demo.live() == 254
    assert "printed no summary (exit 254)" in capsys.readouterr().out


def test_a_campaign_that_passes_passes_the_demo(demo):
    demo.fake_sleuth(json.dumps({"runs": [], "page": "p.html", "junit": "j.xml"}), 0)
    assert demo.live() == 0


def test_a_campaign_with_a_run_not_as_expected_fails_the_demo(demo):
    demo.fake_sleuth(json.dumps({"runs": [], "page": "p.html", "junit": "j.xml"}), 1)
    assert demo.live() == 1


def test_the_simulated_part_runs_and_the_status_is_the_campaigns(demo, monkeypatch, capsys):
    demo.fake_sleuth("", 254)
    ran = []
    monkeypatch.setattr(demo, "main", lambda: ran.append(True))
    assert demo.run() == 254
    assert ran == [True]
    assert "the campaign did not pass (exit 254)" in capsys.readouterr().err
