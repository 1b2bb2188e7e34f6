"""The ssh runtime's nodes file: what it accepts, and a one-line error naming file:line for the rest."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sleuth.cluster.runtime_ssh import Host, parse_nodes_file


def test_jepsen_style_lines_with_defaults_comments_and_keys(tmp_path):
    f = tmp_path / "nodes"
    f.write_text("# three test hosts\n127.0.0.1\n\nadmin@127.0.0.2:2222   # a comment\n"
                 "127.0.0.3 key=~/k/id_rsa\n")
    hosts = parse_nodes_file(str(f))
    assert hosts[0] == Host("127.0.0.1", "root", 22, None)
    assert hosts[1] == Host("127.0.0.2", "admin", 2222, None)
    assert hosts[2].address == "127.0.0.3" and hosts[2].key.endswith("/k/id_rsa") and "~" not in hosts[2].key


@pytest.mark.parametrize("text, line, words", [
    ("127.0.0.1\n127.0.0.1:70000\n", 2, "bad port"),
    ("127.0.0.1:x\n", 1, "bad port"),
    ("\n\n@127.0.0.1\n", 3, "bad host"),
    ("127.0.0.1 color=blue\n", 1, "unknown field"),
    ("127.0.0.1\n127.0.0.1\n", 2, "listed twice"),
    ("no-such-host.invalid\n", 1, "cannot resolve"),
])
def test_bad_lines_name_the_file_and_line(tmp_path, text, line, words):
    f = tmp_path / "nodes"
    f.write_text(text)
    with pytest.raises(ValueError) as e:
        parse_nodes_file(str(f))
    assert str(e.value).startswith(f"{f}:{line}: ") and words in str(e.value)


def test_an_empty_or_missing_file_is_an_error(tmp_path):
    f = tmp_path / "nodes"
    f.write_text("# nothing\n")
    with pytest.raises(ValueError, match="names no hosts"):
        parse_nodes_file(str(f))
    with pytest.raises(ValueError, match="cannot read"):
        parse_nodes_file(str(tmp_path / "missing"))


@pytest.mark.parametrize("args", [
    ["cluster", "up", "--runtime", "ssh", "--nodes", "{bad}"],
    ["cluster", "up", "--runtime", "ssh"],
    ["run", "-w", "register", "--runtime", "ssh", "--nodes", "{bad}"],
    ["run", "-w", "register", "--target", "postgres", "--nodes", "{bad}"],
])
def test_the_cli_exits_254_with_one_line_and_starts_nothing(tmp_path, args):
    bad = tmp_path / "nodes"
    bad.write_text("127.0.0.1:0\n")
    home = tmp_path / "home"
    p = subprocess.run([sys.executable, "-m", "sleuth.cli", *[a.format(bad=bad) for a in args],
                        "--store", str(tmp_path / "store")] if args[0] == "run" else
                       [sys.executable, "-m", "sleuth.cli", *[a.format(bad=bad) for a in args]],
                       capture_output=True, text=True, timeout=60, env={"SLEUTH_HOME": str(home), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 254, p.stderr  # bad arguments: sleuth/base/exits.py, issue 10
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert not (home / "clusters").exists() and not (tmp_path / "store").exists()
