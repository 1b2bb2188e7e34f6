"""The `sleuth check` contract (HISTORY.md): verdicts, --json lines, exit codes,
one-line errors for bad input — through the installed console script."""

import json
import os
import subprocess
import sys

import pytest

SLEUTH = os.path.join(os.path.dirname(sys.executable), "sleuth")


def run(*args):
    return subprocess.run([SLEUTH, *args], capture_output=True, text=True, timeout=120)


def txn_history(path, txns):
    """txns: (process, invoke_t, complete_t, invoke_value, ok_value)."""
    evs = []
    for p, ti, tc, iv, ov in txns:
        evs.append((ti, 0, {"type": "invoke", "process": p, "f": "txn", "value": iv}))
        evs.append((tc, 1, {"type": "ok", "process": p, "f": "txn", "value": ov}))
    evs.sort(key=lambda e: (e[0], e[1]))
    with open(path, "w") as fh:
        for i, (t, _, e) in enumerate(evs):
            fh.write(json.dumps({"index": i, "time": t, **e}) + "\n")
    return str(path)


A = lambda k, v: ["append", k, v]  # noqa: E731
R = lambda k, v=None: ["r", k, v]  # noqa: E731


@pytest.fixture
def stale(tmp_path):
    # T0 appends 1 to x and completes; T1 starts later and reads x empty.
    return txn_history(tmp_path / "stale.jsonl", [
        (0, 0, 10, [A("x", 1)], [A("x", 1)]),
        (1, 20, 30, [R("x")], [R("x", [])]),
        (2, 40, 50, [R("x")], [R("x", [1])]),
    ])


@pytest.fixture
def fine(tmp_path):
    return txn_history(tmp_path / "fine.jsonl", [
        (0, 0, 10, [A("x", 1)], [A("x", 1)]),
        (1, 20, 30, [R("x")], [R("x", [1])]),
    ])


def test_valid_history_exits_0(fine):
    p = run("check", fine, "--workload", "list-append")
    assert p.returncode == 0, p.stderr
    assert "valid" in p.stdout


def test_stale_read_is_invalid_only_for_strict(stale):
    p = run("check", stale, "--workload", "list-append", "--json")
    assert p.returncode == 1
    r = json.loads(p.stdout)
    assert r["file"] == stale and r["valid"] is False
    assert r["anomaly-types"] == ["G-single-realtime"]
    assert r["not"] == ["strong-snapshot-isolation"]  # the weakest model with real time (Elle's lattice)
    assert r["also-not"] == ["strict-serializable"]
    p = run("check", stale, "--workload", "list-append", "--model", "serializable", "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["valid"] is True


def test_human_output_explains_the_cycle(stale):
    p = run("check", stale, "--workload", "list-append")
    assert p.returncode == 1
    assert "G-single-realtime" in p.stdout
    assert "read key 'x' = []" in p.stdout and "completed" in p.stdout


def test_several_files_one_json_line_each(stale, fine):
    p = run("check", fine, stale, "--workload", "list-append", "--json")
    assert p.returncode == 1
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert [(r["file"], r["valid"]) for r in rows] == [(fine, True), (stale, False)]


def test_bad_file_exits_2_with_one_line_and_keeps_other_results(tmp_path, fine):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"index": 0, "time": 0, "type": "invoke", "process": 0, "f": "txn", "value": []}\n'
                   "{oops\n")
    p = run("check", fine, str(bad), "--workload", "list-append", "--json")
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0
    assert f"{bad}:2:" in p.stderr and "Traceback" not in p.stderr
    assert json.loads(p.stdout)["file"] == fine  # the good file's result was still written


def test_bad_micro_op_names_its_line(tmp_path):
    path = txn_history(tmp_path / "h.jsonl", [(0, 0, 10, [["put", "x", 1]], [["put", "x", 1]])])
    p = run("check", path, "--workload", "list-append")
    assert p.returncode == 2
    assert f"{path}:1:" in p.stderr and "unknown micro-op 'put'" in p.stderr


def test_unknown_model_is_a_usage_error(fine):
    p = run("check", fine, "--workload", "list-append", "--model", "snapshot")
    assert p.returncode == 2 and "--model" in p.stderr and "Traceback" not in p.stderr


def test_bad_initial_value_is_a_usage_error(fine):
    p = run("check", fine, "--workload", "register", "--initial-value", "{nope")
    assert p.returncode == 2 and "--initial-value" in p.stderr


def test_missing_file_exits_2(tmp_path):
    p = run("check", str(tmp_path / "none.jsonl"), "--workload", "list-append")
    assert p.returncode == 2 and "none.jsonl" in p.stderr and "Traceback" not in p.stderr


def test_linearizable_keys_flag_reveals_rw_register_write_skew(tmp_path):
    """PostgreSQL-style write skew in rw-register: invisible from reads alone, G2-item with the flag."""
    W = lambda k, v: ["w", k, v]  # noqa: E731
    path = txn_history(tmp_path / "skew.jsonl", [
        (0, 0, 5, [W("x", 1), W("y", 1)], [W("x", 1), W("y", 1)]),
        (1, 10, 20, [R("x"), W("y", 2)], [R("x", 1), W("y", 2)]),
        (2, 10, 20, [R("y"), W("x", 2)], [R("y", 1), W("x", 2)]),
    ])
    assert run("check", path, "-w", "rw-register", "-m", "serializable").returncode == 0
    p = run("check", path, "-w", "rw-register", "-m", "serializable", "--linearizable-keys", "--json")
    assert p.returncode == 1 and "G2-item" in json.loads(p.stdout)["anomaly-types"], p.stdout
