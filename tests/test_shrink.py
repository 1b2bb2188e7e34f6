"""Minimal counterexamples (checker/shrink.py, `sleuth shrink`, the run's counterexample.jsonl).

Literature anomalies (Adya 2000; Elle's list-append examples, Kingsbury & Alvaro 2020;
a stale read; a register read of an overwritten value) are spliced into large valid
histories from the serializable simulator, on keys of their own: the shrunk history must
still be invalid with the same anomaly type, hold nothing of the background, and be
1-minimal, which is checked here by removing each operation in turn and judging again.
Random invalid histories from the brute-force generator (tests/brute.py) must shrink to
histories that brute force, not our checker, still finds to have no serial order.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import orjson
import pytest
from brute import serial_order_exists
from test_cycles_bruteforce import brute_txns, generate, to_history

from sleuth.checker import checker_for, list_append
from sleuth.checker.shrink import Shrinker, shrink
from sleuth.checker.shrink_parts import unwritten
from sleuth.history.jsonl import History, read_jsonl
from sleuth.workloads import sim_register
from sleuth.workloads.sim_list_append import write_sim

SLEUTH = os.path.join(os.path.dirname(sys.executable), "sleuth")
X, Y = 10_001, 10_002  # keys the simulator never uses


def A(k, v):
    return ["append", k, v]


def R(k, v=None):
    return ["r", k, v]


# Each anomaly as events in order: (type, process, value); processes 5000+ are its own.
# A process's invoke value is its completion's with reads emptied.
def _inv(p, value):
    return ("invoke", p, [[f, k, None] if f == "r" else [f, k, v] for f, k, v in value])


def _txns(*parts):
    """parts: ("i", p, value) invoke, ("c", p, type, value) completion."""
    out = []
    for part in parts:
        out.append(_inv(part[1], part[2]) if part[0] == "i" else (part[2], part[1], part[3]))
    return out


T1 = [A(X, 1), A(Y, 1)]
T2 = [A(X, 2), A(Y, 2)]
LITERATURE = {
    # G0 (Adya): two writers ordered x: T1 < T2 and y: T2 < T1, concurrent; a reader pins both.
    "G0": _txns(("i", 5000, T1), ("i", 5001, T2), ("c", 5000, "ok", T1), ("c", 5001, "ok", T2),
                ("i", 5002, [R(X, [1, 2]), R(Y, [2, 1])]), ("c", 5002, "ok", [R(X, [1, 2]), R(Y, [2, 1])])),
    # G1a: a read of an append whose transaction failed.
    "G1a": _txns(("i", 5000, [A(X, 1)]), ("c", 5000, "fail", [A(X, 1)]),
                 ("i", 5001, [R(X, [1])]), ("c", 5001, "ok", [R(X, [1])])),
    # G1c: each of two concurrent transactions reads the other's append.
    "G1c": _txns(("i", 5000, [A(X, 1), R(Y, [1])]), ("i", 5001, [A(Y, 1), R(X, [1])]),
                 ("c", 5000, "ok", [A(X, 1), R(Y, [1])]), ("c", 5001, "ok", [A(Y, 1), R(X, [1])])),
    # G-single (read skew): T2 sees T1's y but not its x.
    "G-single": _txns(("i", 5000, T1[:1] + [A(Y, 1)]), ("i", 5001, [R(X, []), R(Y, [1])]),
                      ("c", 5000, "ok", [A(X, 1), A(Y, 1)]), ("c", 5001, "ok", [R(X, []), R(Y, [1])]),
                      ("i", 5002, [R(X, [1])]), ("c", 5002, "ok", [R(X, [1])])),
    # G2-item (write skew): each reads the key the other appends to, both empty.
    "G2-item": _txns(("i", 5000, [R(X, []), A(Y, 1)]), ("i", 5001, [R(Y, []), A(X, 1)]),
                     ("c", 5000, "ok", [R(X, []), A(Y, 1)]), ("c", 5001, "ok", [R(Y, []), A(X, 1)]),
                     ("i", 5002, [R(X, [1]), R(Y, [1])]), ("c", 5002, "ok", [R(X, [1]), R(Y, [1])])),
    # lost update: both read x empty and append to it.
    "lost-update": _txns(("i", 5000, [R(X, []), A(X, 1)]), ("i", 5001, [R(X, []), A(X, 2)]),
                         ("c", 5000, "ok", [R(X, []), A(X, 1)]), ("c", 5001, "ok", [R(X, []), A(X, 2)]),
                         ("i", 5002, [R(X, [1, 2])]), ("c", 5002, "ok", [R(X, [1, 2])])),
    # a stale read: x's append completed before the read began, which still saw x empty.
    "G-single-realtime": _txns(("i", 5000, [A(X, 1)]), ("c", 5000, "ok", [A(X, 1)]),
                               ("i", 5001, [R(X, [])]), ("c", 5001, "ok", [R(X, [])]),
                               ("i", 5002, [R(X, [1])]), ("c", 5002, "ok", [R(X, [1])])),
}


def splice(background: list[dict], anomaly: list[tuple], f: str = "txn") -> tuple[list[dict], set[int]]:
    """The background with the anomaly's events inserted in its middle (all in a row);
    the lines (1-based) the anomaly's events landed on."""
    at = len(background) // 2
    t = background[at - 1]["time"]
    mine = [{"time": t, "type": typ, "process": p, "f": f, "value": v} for typ, p, v in anomaly]
    events = background[:at] + mine + background[at:]
    for i, e in enumerate(events):
        e["index"] = i
    return events, set(range(at + 1, at + 1 + len(mine)))


def write(path, events) -> str:
    with open(path, "wb") as fh:
        for e in events:
            fh.write(orjson.dumps(e) + b"\n")
    return str(path)


@pytest.fixture(scope="module")
def list_background(tmp_path_factory):
    path = tmp_path_factory.mktemp("bg") / "serializable.jsonl"
    write_sim(str(path), "serializable", 3000, concurrency=10, keys=8, seed=7)
    events = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    assert list_append.check(read_jsonl(path)).valid is True
    return events


def still_fails(h: History, check, target: str, allowed: set[str], story=None) -> bool:
    """The shrinker's test, written out here: invalid, the target type, nothing new forbidden
    (and, for registers, `story`: no read of a value nothing in the history wrote)."""
    r = check(h)
    return (r.valid is False and target in r.anomaly_types and set(r.anomaly_types) <= allowed
            and not (story is not None and story(h)))


def without_op(h: History, op) -> History:
    keep = [i for i, e in enumerate(h.events) if i not in (op.invoke_pos, op.complete_pos)]
    return History([h.events[i] for i in keep], h.source, [h.line_of(i) for i in keep])


def assert_one_minimal(h: History, check, target: str, allowed: set[str], story=None) -> None:
    for op in h.ops():
        assert not still_fails(without_op(h, op), check, target, allowed, story), \
            f"removing the op at line {h.line_of(op.invoke_pos)} keeps it failing"


@pytest.mark.parametrize("name", sorted(LITERATURE))
def test_literature_anomaly_hidden_in_a_large_history_shrinks_to_itself(tmp_path, list_background, name):
    events, lines = splice([dict(e) for e in list_background], LITERATURE[name])
    h = read_jsonl(write(tmp_path / "h.jsonl", events))
    check = checker_for("list-append")
    original = check(h)
    assert original.valid is False and name in original.anomaly_types
    ce = shrink(h, "list-append", check, original, target=name, budget=60)
    assert ce.minimal and ce.target == name
    assert ce.result.valid is False and name in ce.result.anomaly_types
    # nothing of the background is left, and each op names its line in the original file
    assert {r["line"] for r in ce.rows()} <= lines
    assert 2 <= ce.ops <= len({p for _, p, _ in LITERATURE[name]})
    assert_one_minimal(ce.history, check, name, set(original.anomaly_types))


def test_a_register_read_of_an_overwritten_value_shrinks_to_a_minimal_nonlinearizable_history(tmp_path):
    background, stats = sim_register.simulate(ops=3000, processes=6, keys=8, seed=3)
    bg = [e.to_dict() for e in background]
    k = 999
    anomaly = [("invoke", 5000, [k, 1]), ("ok", 5000, [k, 1]), ("invoke", 5001, [k, 2]),
               ("ok", 5001, [k, 2]), ("invoke", 5002, [k, None]), ("ok", 5002, [k, 1])]
    fs = ["write", "write", "write", "write", "read", "read"]
    events, lines = splice(bg, anomaly)
    for e, f in zip(events[min(lines) - 1:max(lines)], fs, strict=True):
        e["f"] = f
    h = read_jsonl(write(tmp_path / "r.jsonl", events))
    check = checker_for("register")
    original = check(h)
    assert original.anomaly_types == ["nonlinearizable"]
    assert all(ex["key"] == k for ex in original.anomalies["nonlinearizable"])
    ce = shrink(h, "register", check, original, budget=60)
    assert ce.minimal and ce.result.valid is False
    # the read of 1 keeps its writer (a read of a value never written would also be
    # nonlinearizable, but it would no longer tell what happened), and the write of 2
    assert [(r["f"], r["value"]) for r in ce.rows()] == [("write", [k, 1]), ("write", [k, 2]),
                                                          ("read", [k, 1])]
    assert {r["line"] for r in ce.rows()} == lines - {min(lines) + 1, min(lines) + 3, max(lines)}
    assert_one_minimal(ce.history, check, "nonlinearizable", {"nonlinearizable"},
                       lambda h: unwritten(h, "register", None))


def test_rw_register_read_skew_keeps_only_the_micro_ops_it_needs(tmp_path):
    t1 = [["w", "x", 1], ["w", "y", 1]]
    t2 = [["r", "x", 1], ["w", "x", 2], ["r", "y", 1], ["w", "y", 2]]
    t3 = [["r", "x", 1], ["r", "y", 2]]
    background = []
    for i in range(400):  # each its own key, written then read
        mops = [["w", 100 + i, i], ["r", 100 + i, i]]
        background += [("invoke", 10 + i % 4, [["w", 100 + i, i], ["r", 100 + i, None]]),
                       ("ok", 10 + i % 4, mops)]
    anomaly = [_inv(1, t1), ("ok", 1, t1), _inv(2, t2), _inv(3, t3), ("ok", 2, t2), ("ok", 3, t3)]
    events, lines = splice([{"time": i, "type": t, "process": p, "f": "txn", "value": v}
                            for i, (t, p, v) in enumerate(background)], anomaly)
    h = read_jsonl(write(tmp_path / "rw.jsonl", events))
    check = checker_for("rw-register")
    original = check(h)
    # T3 is read-only: the cycle T2 -wr-> T3 -rw-> T2 is also Adya's G-update
    assert original.anomaly_types == ["G-single", "G-update"]
    ce = shrink(h, "rw-register", check, original)
    assert ce.minimal and ce.result.anomaly_types == ["G-single", "G-update"]
    assert {r["line"] for r in ce.rows()} <= lines
    # T2's read of y and T1's write of y tell nothing the cycle needs: gone
    assert [r["value"] for r in ce.rows()] == [[["w", "x", 1]], [["r", "x", 1], ["w", "x", 2], ["w", "y", 2]],
                                               [["r", "x", 1], ["r", "y", 2]]]
    assert_one_minimal(ce.history, check, "G-single", {"G-single", "G-update"})


def test_the_default_target_is_the_example_with_the_smallest_seed():
    from sleuth.checker.result import Result
    from sleuth.checker.shrink import choose_example
    from sleuth.checker.shrink_parts import named_lines

    g_single = {"txns": [{"line": 1}, {"line": 5}, {"line": 9}]}
    g2 = {"steps": [{"from-line": 3, "to-line": 7}, {"from-line": 7, "to-line": 3}]}
    r = Result(False, "serializable", ["G-single", "G2-item", "wrong"], {
        "G-single": [g_single], "G2-item": [g2], "wrong": [{"explanation": "names no line"}]})
    sized = []

    def size(ex):
        sized.append(ex)
        return len(named_lines(ex))

    def bound(ex):
        return len(named_lines(ex)) or None

    assert choose_example(r, None, bound, size) == ("G2-item", g2)
    assert sized == [g2]  # G-single's bound (3) is above G2-item's seed (2): never sized
    assert choose_example(r, "G-single", bound, size) == ("G-single", g_single)
    r.anomalies["G2-item"] = []
    assert choose_example(r, None, bound, size) == ("G-single", g_single)
    # a seed is what is named and what that needs: a later example, or another type, may be smaller
    assert choose_example(r, None, bound, lambda ex: 10 * len(named_lines(ex))) == ("G-single", g_single)
    r.anomalies["G2-item"] = [g2, {"txns": [{"line": 20}]}]
    assert choose_example(r, None, bound, lambda ex: 10 * len(named_lines(ex)))[1] == {"txns": [{"line": 20}]}
    assert choose_example(Result(False, "serializable", ["wrong"], {"wrong": [{}]}), None, bound, size) \
        == ("wrong", {})


def test_shrinking_starts_from_the_example_with_the_smallest_seed_not_the_fewest_named(tmp_path):
    """A fuzzy read late on a busy key names one transaction, but each of the 300 elements it
    read needs its writer (else a garbage read); the read skew before it names two and needs
    one read more. Shrinking starts from the read skew: a few operations, not 300 (as in a
    MariaDB run, where the fuzzy read's 1,541 operations spent the whole budget)."""
    busy = 7
    parts = list(LITERATURE["G-single"])
    for i in range(1, 301):
        t = [A(busy, i), R(busy, list(range(1, i + 1)))]
        parts += _txns(("i", 1, t), ("c", 1, "ok", t))
    parts += [_inv(2, [R(busy), R(busy)]), *_txns(("i", 1, [A(busy, 301)]), ("c", 1, "ok", [A(busy, 301)])),
              ("ok", 2, [R(busy, list(range(1, 301))), R(busy, list(range(1, 302)))])]
    events = [{"index": i, "time": i, "type": typ, "process": p, "f": "txn", "value": v}
              for i, (typ, p, v) in enumerate(parts)]
    h = read_jsonl(write(tmp_path / "h.jsonl", events))

    def check(x):
        return list_append.check(x, "serializable")

    original = check(h)
    assert {"G-single", "fuzzy-read"} <= set(original.anomaly_types)
    ce = shrink(h, "list-append", check, original, budget=30)
    assert ce.minimal and ce.ops <= 3, ce.summary()
    assert ce.target != "fuzzy-read" and {r["line"] for r in ce.rows()} <= set(range(1, 7))
    assert_one_minimal(ce.history, check, ce.target, set(original.anomaly_types))


def _brute_of(h: History):
    """The shrunk history as tests/brute.py's txns: positions are the times."""
    inf = 10 ** 9
    return brute_txns([(o.process, o.invoke_pos, inf if o.type == "info" else o.complete_pos, o.type,
                        o.value if o.type == "ok" else o.invoke_value) for o in h.ops()])


def test_random_invalid_histories_shrink_to_ones_brute_force_still_rejects():
    model = "strict-serializable"

    def check(h):
        return list_append.check(h, model)

    done = 0
    for seed in range(400):
        txns = generate(random.Random(seed))
        h = to_history(txns)
        original = check(h)
        if original.valid is not False:
            continue
        assert not serial_order_exists(brute_txns(txns), model)
        ce = shrink(h, "list-append", check, original, budget=30)
        assert ce.minimal and ce.ops <= len(h.ops())
        assert not serial_order_exists(_brute_of(ce.history), model), (seed, ce.rows())
        assert_one_minimal(ce.history, check, ce.target, set(original.anomaly_types))
        done += 1
        if done == 40:
            break
    assert done == 40


@pytest.fixture(scope="module")
def stale_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("stale") / "stale.jsonl"
    write_sim(str(path), "stale-reads", 3000, concurrency=10, keys=8, seed=1)
    return str(path)


def test_a_spent_budget_says_where_it_stopped_and_keeps_the_verdict(stale_file):
    h = read_jsonl(stale_file)
    check = checker_for("list-append")
    original = check(h)
    ce = Shrinker(h, "list-append", check, original, budget=0).run()
    assert not ce.minimal and ce.stage == "seed" and ce.checks == 0
    assert ce.ops == len(h.ops()) and ce.result is original
    # nothing smaller was found: it does not say there was (it said "smaller than the original")
    assert ce.summary().endswith("budget spent during 'seed': no smaller history found"), ce.summary()


def test_a_budget_spent_midway_returns_the_smallest_failing_history_found_so_far(stale_file):
    import time

    h = read_jsonl(stale_file)
    checker = checker_for("list-append")

    def slow_check(x):  # every check costs 50 ms: a 0.5 s budget allows about ten
        time.sleep(0.05)
        return checker(x)

    original = checker(h)
    ce = Shrinker(h, "list-append", slow_check, original, budget=0.5).run()
    assert not ce.minimal and ce.stage != "1-minimal" and "budget spent" in ce.summary()
    assert ce.checks <= 12
    again = checker(ce.history)  # what it hands back still fails, for the same reason
    assert again.valid is False and ce.target in again.anomaly_types
    assert ce.ops <= len(h.ops())


@pytest.mark.parametrize("after", [0, 1, 7])
def test_an_interrupt_midway_returns_the_smallest_failing_history_found_so_far(stale_file, after):
    """Ctrl-C (or SIGTERM, which sleuth turns into one) arriving during the checker's
    run on the n-th candidate goes on up (a run's own shrinking must not swallow it);
    `so_far` then gives what was found so far, whole and still failing."""
    h = read_jsonl(stale_file)
    checker = checker_for("list-append")
    calls = []

    def interrupted_check(x):
        calls.append(1)
        if len(calls) > after:
            raise KeyboardInterrupt
        return checker(x)

    original = checker(h)
    shrinker = Shrinker(h, "list-append", interrupted_check, original)
    with pytest.raises(KeyboardInterrupt):
        shrinker.run()
    ce = shrinker.so_far()
    assert ce.interrupted and not ce.minimal and ce.checks == after + 1
    assert "interrupted during" in ce.summary() and ce.to_json()["interrupted"] is True
    again = checker(ce.history)
    assert again.valid is False and ce.target in again.anomaly_types


def run(*args):
    return subprocess.run([SLEUTH, *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_cli_interrupted_while_shrinking_writes_what_it_found_and_exits_2(tmp_path, sig):
    import signal

    from test_check_interrupt import _as_in_a_terminal

    big, out = tmp_path / "si.jsonl", tmp_path / "ce.jsonl"
    write_sim(str(big), "snapshot-isolation", 100_000, seed=1)  # about 2 s of shrinking
    p = subprocess.Popen([SLEUTH, "shrink", str(big), "-w", "list-append", "--json", "-o", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=_as_in_a_terminal)
    said = []
    for line in p.stderr:  # the file judged, shrinking begins
        said.append(line)
        if "shrinking (budget" in line:
            break
    p.send_signal(getattr(signal, sig))
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 2, "".join(said) + stderr
    assert stderr.strip().splitlines()[-1] == "sleuth: error: interrupted"
    d = json.loads(stdout)  # stdout is the one JSON object still
    assert d["valid"] is False and d["counterexample"]["interrupted"] is True
    assert d["counterexample"]["minimal"] is False and "interrupted during" in stderr
    replay = run("check", str(out), "-w", "list-append")
    assert replay.returncode == 1 and d["counterexample"]["target"] in replay.stdout


def test_cli_writes_a_replayable_counterexample_whose_lines_point_into_the_original(stale_file, tmp_path):
    out = str(tmp_path / "ce.jsonl")
    p = run("shrink", stale_file, "--workload", "list-append", "-o", out)
    assert p.returncode == 1, p.stderr
    assert "1-minimal" in p.stderr + p.stdout
    assert p.stdout.splitlines()[0].split() == ["op", "process", "invoke", "complete", "type", "f", "value", "line"]
    original = [orjson.loads(x) for x in open(stale_file, "rb").read().splitlines()]
    shrunk = [orjson.loads(x) for x in open(out, "rb").read().splitlines()]
    assert [e["index"] for e in shrunk] == list(range(len(shrunk)))
    for e in shrunk:  # `line` is the event's line in the original file
        o = original[e["line"] - 1]
        assert (o["type"], o["process"], o["f"], o["time"]) == (e["type"], e["process"], e["f"], e["time"])
    command = next(line.split() for line in (p.stdout + p.stderr).splitlines()
                   if line.strip().startswith("sleuth check"))
    replay = run(*command[1:])
    assert replay.returncode == 1 and "INVALID" in replay.stdout
    summary = json.load(open(str(tmp_path / "ce.json")))
    assert summary["minimal"] is True and summary["ops"] == len(summary["rows"])


def test_cli_json_and_a_tiny_budget_still_exit_1(stale_file, tmp_path):
    p = run("shrink", stale_file, "-w", "list-append", "--budget", "0", "--json", "-o", str(tmp_path / "c.jsonl"))
    assert p.returncode == 1
    d = json.loads(p.stdout)
    assert d["valid"] is False and d["counterexample"]["minimal"] is False
    assert "budget spent" in p.stderr


def test_cli_valid_unknown_and_bad_input(tmp_path, list_background):
    valid = write(tmp_path / "valid.jsonl", list_background)
    p = run("shrink", valid, "-w", "list-append")
    assert p.returncode == 0 and "nothing to shrink" in p.stdout
    assert not os.path.exists(valid + ".counterexample.jsonl")
    nothing = write(tmp_path / "nothing.jsonl", [{"index": 0, "time": 0, "type": "invoke", "process": 0,
                                                  "f": "txn", "value": [R(X)]}])
    p = run("shrink", nothing, "-w", "list-append")
    assert p.returncode == 2 and "nothing to shrink" in p.stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"index": 0, "time": 0, "type": "invoke", "process": 0, "f": "txn", "value": []}\n{oops\n')
    for args in (["shrink", str(bad), "-w", "list-append"],
                 ["shrink", str(tmp_path / "missing.jsonl"), "-w", "list-append"],
                 ["shrink", valid, "-w", "list-append", "--budget", "-1"],
                 ["shrink", valid, "-w", "list-append", "-o", valid],
                 ["shrink", valid, "-w", "bank", "--model", "serializable"]):
        p = run(*args)
        assert p.returncode == 254, (args, p.stderr)
        assert p.stderr.strip().count("\n") == 0 and "Traceback" not in p.stderr
    assert f"{bad}:2:" in run("shrink", str(bad), "-w", "list-append").stderr


def test_cli_refuses_an_anomaly_the_checker_did_not_find(stale_file):
    p = run("shrink", stale_file, "-w", "list-append", "--anomaly", "G0", "--budget", "0")
    assert p.returncode == 254 and "--anomaly" in p.stderr and p.stderr.count("\n") == 1


def test_an_invalid_run_directory_gets_a_counterexample_shown_first_in_its_report(tmp_path, stale_file,
                                                                                  list_background):
    from sleuth.checker import counterexample
    from sleuth.checker.judge import Checks, judge
    from sleuth.reports.run_report import render

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "history.jsonl").write_bytes(open(stale_file, "rb").read())
    h = read_jsonl(run_dir / "history.jsonl")
    checks = Checks(checker="list-append", model="strict-serializable")
    results = judge(h, checks)
    summary = counterexample.for_run(str(run_dir), h, checks, budget=20)
    assert summary is not None and summary["minimal"]
    assert summary["command"].startswith("sleuth check counterexample.jsonl --workload list-append")
    from sleuth.records.run import TestRecord

    page = open(render(str(run_dir), h, TestRecord(name="t", workload="list-append", checks=checks), results)).read()
    assert page.index('id="counterexample"') < page.index('id="anomalies"')
    assert "<svg" in page and "counterexample.jsonl" in page
    # the workload's checker finds nothing: no counterexample, no file
    fine = tmp_path / "fine"
    fine.mkdir()
    assert counterexample.for_run(str(fine), read_jsonl(write(tmp_path / "v.jsonl", list_background)),
                                  checks) is None
    assert os.listdir(fine) == []


def test_a_runs_second_signal_ends_its_shrinking_early_and_keeps_what_was_found(tmp_path, stale_file):
    """`sleuth run` judges and shrinks shielded from a second Ctrl-C (nothing may be left
    half-done), so shrinking asks `stop` before each check: the run's second signal ends
    it there, and the counterexample found so far is written, still failing."""
    from sleuth.checker import counterexample
    from sleuth.checker.judge import Checks, check_judged

    h = read_jsonl(stale_file)
    checks = Checks(checker="list-append", model="strict-serializable")
    asked = []

    def second_signal_after_three_checks():
        asked.append(1)
        return len(asked) > 3

    summary = counterexample.for_run(str(tmp_path), h, checks, budget=60, stop=second_signal_after_three_checks)
    assert summary["interrupted"] is True and summary["minimal"] is False and summary["checks"] == 3
    again = check_judged(read_jsonl(tmp_path / "counterexample.jsonl"), checks)
    assert again.valid is False and summary["target"] in again.anomaly_types


@pytest.mark.cluster
def test_a_real_invalid_run_leaves_a_counterexample_and_shrink_budget_0_turns_it_off(tmp_path):
    """The reference cluster (local processes) with stale strict-serializable reads."""
    env = {**os.environ, "SLEUTH_HOME": str(tmp_path / "home")}
    dirs = {}
    for budget in ("20", "0"):
        p = subprocess.run([SLEUTH, "run", "--runtime", "local", "--store", str(tmp_path / "store"), "--json",
                            "-w", "list-append", "--fault", "stale-read", "--time-limit", "5",
                            "--concurrency", "4", "--rate", "50", "--shrink-budget", budget],
                           capture_output=True, text=True, timeout=300, env=env)
        assert p.returncode == 1, p.stderr
        dirs[budget] = json.loads(p.stdout)["run_dir"]
    run_dir = dirs["20"]
    assert os.path.exists(os.path.join(run_dir, "counterexample.jsonl"))
    summary = json.load(open(os.path.join(run_dir, "counterexample.json")))
    replay = subprocess.run([SLEUTH, *summary["command"].split()[1:]], cwd=run_dir,
                            capture_output=True, text=True, timeout=120)
    assert replay.returncode == 1 and summary["target"] in replay.stdout
    page = open(os.path.join(run_dir, "index.html")).read()
    assert page.index('id="counterexample"') < page.index('id="anomalies"')
    assert not os.path.exists(os.path.join(dirs["0"], "counterexample.jsonl"))
    assert 'id="counterexample"' not in open(os.path.join(dirs["0"], "index.html")).read()


def _register_history_with_a_stale_ts(n: int = 400):
    """A linearizable register history whose ts (the reference cluster's grey-box `ts`) go back
    once: after a write at ts 10*i+5 completes, a later read of that same value claims a lower
    ts. The workload's checker finds nothing; the timestamp rules find read-ts-below-write."""
    events, t = [], 0
    for i in range(n):
        p = i % 4
        events.append({"type": "invoke", "process": p, "f": "write", "value": ["k", i]})
        events.append({"type": "ok", "process": p, "f": "write", "value": ["k", i], "ts": 10 * i + 5})
        ts = 10 * i + 7 if i != n // 2 else 10 * i  # the stale one
        events.append({"type": "invoke", "process": p, "f": "read", "value": ["k", None]})
        events.append({"type": "ok", "process": p, "f": "read", "value": ["k", i], "ts": ts})
    for j, e in enumerate(events):
        e.update(index=j, time=t + j)
    return events


def test_a_verdict_of_the_timestamp_rules_alone_shrinks_and_replays_with_timestamps(tmp_path):
    path = write(tmp_path / "ts.jsonl", _register_history_with_a_stale_ts())
    plain = subprocess.run([sys.executable, "-m", "sleuth.cli", "check", path, "-w", "register"],
                           capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr  # the workload's checker alone: valid
    out = tmp_path / "ce.jsonl"
    p = subprocess.run([sys.executable, "-m", "sleuth.cli", "shrink", path, "-w", "register", "--timestamps",
                        "-o", str(out), "--json"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    summary = json.loads(p.stdout)["counterexample"]
    assert summary["command"].endswith("--timestamps") and summary["minimal"] is True
    h = read_jsonl(str(out))
    assert [(o.f, o.ts) for o in h.ops()] == [("write", 2005), ("read", 2000)]
    replay = subprocess.run([sys.executable, "-m", "sleuth.cli", "check", str(out), "-w", "register",
                             "--timestamps", "--json"], capture_output=True, text=True, timeout=120)
    assert replay.returncode == 1 and json.loads(replay.stdout)["anomaly-types"] == ["read-ts-below-write"]


def test_a_run_invalid_by_its_timestamp_rules_alone_still_leaves_a_counterexample(tmp_path):
    from sleuth.checker import counterexample
    from sleuth.checker.judge import Checks

    h = read_jsonl(write(tmp_path / "history.jsonl", _register_history_with_a_stale_ts()))
    checks = Checks(checker="register", timestamps=True)
    summary = counterexample.for_run(str(tmp_path), h, checks, budget=30)
    assert summary is not None and "--timestamps" in summary["command"]
    ce = read_jsonl(str(tmp_path / counterexample.JSONL))
    assert len(ce.ops()) == 2
    assert counterexample.for_run(str(tmp_path), h, Checks(checker="register"), budget=30) is None
