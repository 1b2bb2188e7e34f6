"""The `sleuth check` contract (docs/history-format.md): verdicts, --json lines, exit codes,
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


def test_human_output_says_how_many_of_each_type_were_found(tmp_path):
    """Two write skews on keys of their own (two components: a count of cycles is one per
    component, so "at least 2") and three lost updates, each its own (counted exactly)."""
    txns = []
    for n, (x, y) in enumerate([("x", "y"), ("u", "v")]):
        t = 100 * n
        txns += [(2 * n, t, t + 10, [R(x), A(y, 1)], [R(x, []), A(y, 1)]),
                 (2 * n + 1, t, t + 10, [R(y), A(x, 1)], [R(y, []), A(x, 1)]),
                 (2 * n, t + 20, t + 30, [R(x), R(y)], [R(x, [1]), R(y, [1])])]
    for n, k in enumerate(["a", "b", "c"]):
        t = 1000 + 100 * n
        txns += [(10, t, t + 10, [R(k), A(k, 1)], [R(k, []), A(k, 1)]),
                 (11, t, t + 10, [R(k), A(k, 2)], [R(k, []), A(k, 2)]),
                 (10, t + 20, t + 30, [R(k)], [R(k, [1, 2])])]
    path = txn_history(tmp_path / "h.jsonl", txns)
    p = run("check", path, "--workload", "list-append", "--model", "serializable", "--no-explain")
    assert p.returncode == 1, p.stderr
    found = p.stdout.splitlines()[1]
    assert found.startswith("    found: ") and "G2-item ≥2" in found and "lost-update 3" in found, p.stdout
    record = json.loads(run("check", path, "--workload", "list-append", "--model", "serializable",
                            "--json").stdout)
    assert record["stats"]["anomaly-counts"]["G2-item"] == 2
    assert record["stats"]["anomaly-counts"]["lost-update"] == 3
    assert run("check", str(tmp_path / "h.jsonl"), "--workload", "list-append", "--model",
               "read-uncommitted").stdout.count("found:") == 1  # allowed types are counted too


def test_several_files_one_json_line_each(stale, fine):
    p = run("check", fine, stale, "--workload", "list-append", "--json")
    assert p.returncode == 1
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert [(r["file"], r["valid"]) for r in rows] == [(fine, True), (stale, False)]


def test_bad_file_exits_254_with_one_line_and_keeps_other_results(tmp_path, fine):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"index": 0, "time": 0, "type": "invoke", "process": 0, "f": "txn", "value": []}\n'
                   "{oops\n")
    p = run("check", fine, str(bad), "--workload", "list-append", "--json")
    assert p.returncode == 254
    assert p.stderr.strip().count("\n") == 0
    assert f"{bad}:2:" in p.stderr and "Traceback" not in p.stderr
    good, unread = [json.loads(line) for line in p.stdout.splitlines()]
    assert good["file"] == fine  # the good file's result was still written
    assert (unread["file"], unread["valid"], unread["exit"]) == (str(bad), "unknown", 254)
    assert unread["error"].startswith(f"{bad}:2: ") and unread["anomaly-types"] == []


def test_bad_micro_op_names_its_line(tmp_path):
    path = txn_history(tmp_path / "h.jsonl", [(0, 0, 10, [["put", "x", 1]], [["put", "x", 1]])])
    p = run("check", path, "--workload", "list-append")
    assert p.returncode == 254
    assert f"{path}:1:" in p.stderr and "unknown micro-op 'put'" in p.stderr


@pytest.mark.parametrize("longest", [True, False])
def test_a_read_of_a_list_element_is_bad_input_naming_its_line(tmp_path, longest):
    """A read holding a list (or map) element is bad input at the read's line, whether it is its
    key's longest read or a shorter one (both crashed the checker: 255 and a TypeError)."""
    other = [["r", "x", [1, 2]]] if not longest else [["r", "x", [1]]]
    path = txn_history(tmp_path / "h.jsonl", [
        (0, 0, 1, [["append", "x", 1], ["append", "x", 2]], [["append", "x", 1], ["append", "x", 2]]),
        (1, 2, 3, [["r", "x", None]], other),
        (2, 4, 5, [["r", "x", None]], [["r", "x", [[1], 2]]] if not longest else [["r", "x", [1, [2], 3]]])])
    p = run("check", path, "--workload", "list-append")
    assert p.returncode == 254 and "Traceback" not in p.stderr, p.stderr
    assert f"{path}:6:" in p.stderr and "must be scalars" in p.stderr, p.stderr


@pytest.mark.parametrize("f, invoked, completed", [("write", ["a", 1], ["b", 1]),
                                                  ("read", ["a", None], ["b", 1]),
                                                  ("cas", ["a", [1, 2]], ["b", [1, 2]])])
def test_a_register_op_completing_on_another_key_is_bad_input(tmp_path, f, invoked, completed):
    """The compact load keeps one value per ok op; it used to keep the completion's only, so the
    register checker never saw that the invoke named another key, and judged the file."""
    path = tmp_path / "h.jsonl"
    path.write_text(json.dumps({"index": 0, "time": 0, "type": "invoke", "process": 0, "f": f, "value": invoked})
                    + "\n" + json.dumps({"index": 1, "time": 1, "type": "ok", "process": 0, "f": f,
                                         "value": completed}) + "\n")
    p = run("check", str(path), "--workload", "register")
    assert p.returncode == 254 and "Traceback" not in p.stderr, p.stderr
    assert f"{path}:2:" in p.stderr and 'completes with key "b" but was invoked on key "a"' in p.stderr


def test_unknown_model_is_a_usage_error(fine):
    p = run("check", fine, "--workload", "list-append", "--model", "snapshot")
    assert p.returncode == 254 and "--model" in p.stderr and "Traceback" not in p.stderr


def test_bad_initial_value_is_a_usage_error(fine):
    p = run("check", fine, "--workload", "register", "--initial-value", "{nope")
    assert p.returncode == 254 and "--initial-value" in p.stderr


def test_missing_file_exits_254(tmp_path):
    p = run("check", str(tmp_path / "none.jsonl"), "--workload", "list-append")
    assert p.returncode == 254 and "none.jsonl" in p.stderr and "Traceback" not in p.stderr


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


# ---------------------------------------------------------------------------
# Issue 10: the contract CI and Jepsen users expect

IMPORTS = os.path.join(os.path.dirname(__file__), "data", "imports")


def test_time_going_back_is_accepted_noted_once_and_ordered_by_position():
    """backwards.edn: T0's completion took its time before T1's invoke was
    appended. Ordered by time, T0 would precede T1 and T1's empty read would
    be a stale read (G-single-realtime); in file order they overlap."""
    path = os.path.join(IMPORTS, "backwards.edn")
    p = run("check", path, "-w", "list-append", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["valid"] is True
    notes = [line for line in p.stderr.splitlines() if "not monotone" in line]
    assert len(notes) == 1 and "line 8" in notes[0] and path in notes[0]


def write_events(path, events):
    with open(path, "w") as fh:
        for i, e in enumerate(events):
            fh.write(json.dumps({"index": i, "time": i, **e}) + "\n")
    return str(path)


def inv(p, f, v):
    return {"type": "invoke", "process": p, "f": f, "value": v}


def done(typ, p, f, v):
    return {"type": typ, "process": p, "f": f, "value": v}


NOTHING = {  # workload -> a history whose only operation failed
    "register": [inv(0, "write", [1, 3]), done("fail", 0, "write", [1, 3])],
    "cas-register": [inv(0, "cas", [1, 2]), done("fail", 0, "cas", [1, 2])],
    "list-append": [inv(0, "txn", [A("x", 1)]), done("fail", 0, "txn", [A("x", 1)])],
    "rw-register": [inv(0, "txn", [["w", "x", 1]]), done("fail", 0, "txn", [["w", "x", 1]])],
    "bank": [inv(0, "transfer", {"from": 0, "to": 1, "amount": 1}),
             done("fail", 0, "transfer", {"from": 0, "to": 1, "amount": 1})],
    "counter": [inv(0, "add", 1), done("fail", 0, "add", 1)],
}


@pytest.mark.parametrize("workload", sorted(NOTHING))
def test_nothing_to_judge_is_unknown_not_valid(tmp_path, workload):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    failed = write_events(tmp_path / "failed.jsonl", NOTHING[workload])
    p = run("check", str(empty), failed, "-w", workload, "--json")
    assert p.returncode == 2, (p.stdout, p.stderr)
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert [(r["valid"], r["exit"]) for r in rows] == [("unknown", 2), ("unknown", 2)]
    assert all(any(n.startswith("nothing to judge") for n in r["notes"]) for r in rows)


def test_a_register_key_with_only_failed_ops_does_not_make_the_rest_unknown(tmp_path):
    path = write_events(tmp_path / "h.jsonl", [
        inv(0, "write", [1, 3]), done("ok", 0, "write", [1, 3]),
        inv(0, "write", [2, 3]), done("fail", 0, "write", [2, 3]),
        inv(0, "read", [1, None]), done("ok", 0, "read", [1, 3])])
    p = run("check", path, "-w", "register", "--json")
    r = json.loads(p.stdout)
    assert p.returncode == 0 and r["valid"] is True and r["stats"]["keys-judged"] == 1
    assert any("1 of 2 keys had nothing to judge" in n for n in r["notes"])


def test_txn_completion_that_differs_from_its_invoke_is_bad_input(tmp_path):
    path = write_events(tmp_path / "h.jsonl", [
        inv(0, "txn", [A("x", 1), R("y")]), done("ok", 0, "txn", [A("x", 1), R("z", [])])])
    p = run("check", path, "-w", "list-append", "--json")
    assert p.returncode == 254 and f"{path}:2: " in p.stderr and "micro-op 2" in p.stderr
    assert json.loads(p.stdout)["exit"] == 254


def crashing_history(tmp_path):
    # Reads of a key named "crash": `buggy` below plants a bug that fires on them only.
    return write_events(tmp_path / "crash.jsonl", [
        inv(0, "txn", [R("crash")]), done("ok", 0, "txn", [R("crash", [1])])])


def buggy(*args, env=None):
    """`sleuth` with a bug planted in the list-append checker: a TypeError on a history that
    reads the key "crash" (sleuth's own failure, whatever the input)."""
    code = ("import sys\n"
            "from sleuth.checker.list_append import Analysis\n"
            "orders = Analysis._version_orders\n"
            "def planted(self):\n"
            "    if 'crash' in self.reads_by_key:\n"
            "        raise TypeError('a planted bug')\n"
            "    return orders(self)\n"
            "Analysis._version_orders = planted\n"
            "from sleuth.cli import main\n"
            "sys.argv = ['sleuth'] + sys.argv[1:]\n"
            "main()\n")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_sleuth_failing_is_255_one_line_and_combines_highest(tmp_path, fine, stale):
    crash = crashing_history(tmp_path)
    p = buggy("check", fine, stale, crash, str(tmp_path / "missing.jsonl"), "-w", "list-append", "--json")
    assert p.returncode == 255
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert [r["exit"] for r in rows] == [0, 1, 255, 254]
    assert rows[2]["valid"] == "unknown" and "sleuth failed (TypeError" in rows[2]["error"]
    assert rows[2]["error"].endswith("SLEUTH_DEBUG=1 shows the traceback")
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 2
    debug = buggy("check", crash, "-w", "list-append", env={"SLEUTH_DEBUG": "1"})
    assert debug.returncode == 255 and "Traceback" in debug.stderr and "a planted bug" in debug.stderr


@pytest.mark.parametrize("files,status", [
    (("fine",), 0), (("fine", "stale"), 1), (("stale", "empty"), 2), (("empty", "missing"), 254)])
def test_several_files_combine_to_the_highest_status(tmp_path, fine, stale, files, status):
    (tmp_path / "empty.jsonl").write_text("")
    paths = {"fine": fine, "stale": stale, "empty": str(tmp_path / "empty.jsonl"),
             "missing": str(tmp_path / "missing.jsonl")}
    p = run("check", *[paths[f] for f in files], "-w", "list-append")
    assert p.returncode == status, p.stderr


def test_json_stdout_is_json_only(tmp_path, fine):
    (tmp_path / "empty.jsonl").write_text("")
    noted = os.path.join(IMPORTS, "backwards.edn")
    p = run("check", fine, noted, str(tmp_path / "empty.jsonl"), str(tmp_path / "no.jsonl"),
            "-w", "list-append", "--json")
    rows = [json.loads(line) for line in p.stdout.splitlines()]  # every line parses
    assert len(rows) == 4 and all({"file", "valid", "anomaly-types", "exit"} <= set(r) for r in rows)
    assert "not monotone" in p.stderr and "no.jsonl" in p.stderr


# ---------------------------------------------------------------------------
# Issue 11: the typed checker registry refuses what does not apply

@pytest.mark.parametrize("args,words", [
    (("-w", "bank", "--model", "nonsense", "--linearizable-keys"), "--linearizable-keys does not apply"),
    (("-w", "bank", "--model", "serializable"), "--model does not apply"),
    (("-w", "list-append", "--linearizable-keys"), "--linearizable-keys does not apply to --workload list-append"),
    (("-w", "list-append", "--total", "10"), "--total does not apply"),
    (("-w", "counter", "--no-negative"), "--no-negative does not apply"),
    (("-w", "rw-register", "--initial-value", "0"), "--initial-value does not apply"),
    (("-w", "register", "--model", "serializable"), "'serializable' is not a model for register"),
])
def test_options_and_models_that_do_not_apply_are_refused(fine, args, words):
    p = run("check", fine, *args)
    assert p.returncode == 254, (p.stdout, p.stderr)
    assert words in p.stderr and p.stdout == "" and len(p.stderr.strip().splitlines()) == 1


def test_every_workload_declares_a_checker_its_models_and_options():
    from sleuth.checker import OPTIONS, WORKLOADS
    from sleuth.checker.models import ISOLATION_MODELS, MODELS

    for w in WORKLOADS.values():
        assert callable(w.checker()) and set(w.options) <= set(OPTIONS)
        assert set(w.models) <= set(MODELS) | {"linearizable"}
    assert WORKLOADS["register"].model("strict-serializable") == "linearizable"
    assert WORKLOADS["list-append"].model(ISOLATION_MODELS["repeatable-read"]) == "snapshot-isolation"


# ---------------------------------------------------------------------------
# Issue 10, item 10: explanations a reader can trace back to the file


def test_explanation_names_each_transaction_with_its_line_and_relative_times(tmp_path):
    evs = [(0, inv(0, "txn", [A("x", 1)])), (10_000_000, done("ok", 0, "txn", [A("x", 1)])),
           (20_000_000, inv(1, "txn", [R("x")])), (30_000_000, done("ok", 1, "txn", [R("x", [])]))]
    path = tmp_path / "h.jsonl"
    with open(path, "w") as fh:  # a run that started at t = 5 s
        for i, (t, e) in enumerate(evs):
            fh.write(json.dumps({"index": i, "time": 5_000_000_000 + t, **e}) + "\n")
    p = run("check", str(path), "-w", "list-append")
    assert p.returncode == 1
    assert "T1 (line 3) < T0 (rw)" in p.stdout and "T0 (line 1) < T1 (realtime)" in p.stdout
    assert "T0 completed (line 2, at 0.010 s) before T1 began (line 3, at 0.020 s)" in p.stdout
    ex = json.loads(run("check", str(path), "-w", "list-append", "--json").stdout)
    (cycle,) = ex["anomalies"]["G-single-realtime"]
    steps = [(s["from"], s["from-line"], s["to"], s["to-line"], s["kind"]) for s in cycle["steps"]]
    first = next(i for i, s in enumerate(steps) if s[4] == "rw")  # a cycle may start at any edge
    assert steps[first:] + steps[:first] == [("T1", 3, "T0", 1, "rw"), ("T0", 1, "T1", 3, "realtime")]
    assert {t["name"]: (t["line"], t["complete-line"]) for t in cycle["txns"]} == {"T0": (1, 2), "T1": (3, 4)}


def test_explanation_carries_jepsen_index_labels(tmp_path):
    path = tmp_path / "h.edn"
    path.write_text(
        "{:type :invoke, :f :txn, :value [[:append :x 1]], :process 0, :time 0, :index 100}\n"
        "{:type :ok, :f :txn, :value [[:append :x 1]], :process 0, :time 10, :index 101}\n"
        "{:type :invoke, :f :txn, :value [[:r :x nil]], :process 1, :time 20, :index 102}\n"
        "{:type :ok, :f :txn, :value [[:r :x []]], :process 1, :time 30, :index 103}\n")
    p = run("check", str(path), "-w", "list-append", "--json")
    (cycle,) = json.loads(p.stdout)["anomalies"]["G-single-realtime"]
    assert "T1 (line 3, index 102) <" in cycle["explanation"]
    assert "T0 (line 1, index 100) <" in cycle["explanation"]
    assert {t["name"]: t["index"] for t in cycle["txns"]} == {"T0": 100, "T1": 102}


def test_non_cycle_explanations_name_lines_too(tmp_path):
    path = write_events(tmp_path / "h.jsonl", [
        inv(0, "txn", [A("x", 1)]), done("ok", 0, "txn", [A("x", 1)]),
        inv(1, "txn", [R("x")]), done("ok", 1, "txn", [R("x", [1, 9])])])
    r = json.loads(run("check", path, "-w", "list-append", "--json").stdout)
    (garbage,) = r["anomalies"]["garbage-read"]
    assert garbage["explanation"].startswith("T1 (line 3) read key 'x'")


@pytest.mark.parametrize("args,words", [
    (("-w", "nosuch"), "Invalid value for '--workload'"),
    ((), "--workload is required"),
    (("-w", "bank", "--total", "abc"), "'abc' is not a valid integer"),
])
def test_click_usage_errors_are_bad_arguments_too(fine, args, words):
    p = run("check", fine, *args)
    assert p.returncode == 254 and words in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and p.stdout == ""


def test_a_campaign_directory_is_pointed_to_campaign_judge(tmp_path):
    cdir = tmp_path / "nightly" / "20261128T020000"
    cdir.mkdir(parents=True)
    (cdir / "campaign.json").write_text("{}")
    p = run("check", str(cdir))
    assert p.returncode == 254 and p.stdout == "" and len(p.stderr.strip().splitlines()) == 1
    assert f"{cdir}: a campaign directory; judge its runs with `sleuth campaign judge {cdir}`" in p.stderr


def test_registry_switches_and_ranges_reach_a_checker_only_when_given(monkeypatch):
    """The kinds of option the registry is designed for (a --x/--no-x switch
    whose default is on, a number with a minimum), through click's parsing."""
    import importlib

    import click
    from click.testing import CliRunner

    from sleuth.checker import OPTIONS, Option, Workload

    cc = importlib.import_module("sleuth.cli.check")  # the module; sleuth.cli.check is the command

    monkeypatch.setattr(cc, "OPTIONS", {
        **OPTIONS, "wfr_keys": Option("wfr_keys", "on unless --no-wfr-keys", switch=True, default=True),
        "search_timeout": Option("search_timeout", "seconds", float, "S", minimum=0)})
    spec = Workload("w", "m", "f", options=("wfr_keys", "search_timeout"))
    seen = []

    from sleuth.cli import _Sleuth

    @click.command()
    @cc._option_flags
    def cmd(**values):
        seen.append(cc._checker_options(spec, values))

    group = _Sleuth("sleuth")  # usage errors are 254 for every command of sleuth's group
    group.add_command(cmd, "cmd")
    runner = CliRunner()
    assert runner.invoke(group, ["cmd"]).exit_code == 0
    assert runner.invoke(group, ["cmd", "--no-wfr-keys", "--search-timeout", "2.5"]).exit_code == 0
    assert runner.invoke(group, ["cmd", "--wfr-keys"]).exit_code == 0
    assert seen == [{}, {"wfr_keys": False, "search_timeout": 2.5}, {"wfr_keys": True}]
    assert runner.invoke(group, ["cmd", "--search-timeout", "-1"]).exit_code == 254
    assert runner.invoke(group, ["cmd", "--total", "3"]).exit_code == 254  # not this workload's


def test_help_names_every_model_and_alias_each_workload_takes():
    """`sleuth check --help` and `sleuth shrink --help` list what --model accepts
    (before, only a wrong --model showed the names), each name whole on its line."""
    from sleuth.checker import WORKLOADS

    for command in ("check", "shrink"):
        p = run(command, "--help")
        assert p.returncode == 0
        words = set(p.stdout.replace(",", " ").replace(";", " ").replace("=", " ").split())
        for w in WORKLOADS.values():
            for name in (*w.models, *(a for a, _ in w.aliases)):
                assert name in words, (command, name)


def test_a_report_directory_checked_again_keeps_the_options_it_was_judged_with(tmp_path):
    """Issue 45: `--report DIR` wrote a test.json without the checks, so `sleuth check DIR`
    re-derived them from the workload's name and dropped --total, --linearizable-keys and
    --timestamps: an invalid verdict came back valid."""
    W = lambda k, v: ["w", k, v]  # noqa: E731
    skew = txn_history(tmp_path / "skew.jsonl", [  # write skew: G2-item only with --linearizable-keys
        (0, 0, 5, [W("x", 1), W("y", 1)], [W("x", 1), W("y", 1)]),
        (1, 10, 20, [R("x"), W("y", 2)], [R("x", 1), W("y", 2)]),
        (2, 10, 20, [R("y"), W("x", 2)], [R("y", 1), W("x", 2)]),
    ])
    bank = write_events(tmp_path / "bank.jsonl", [  # every read sums to 100: wrong only against --total 50
        inv(0, "read", None), done("ok", 0, "read", {"0": 60, "1": 40}),
        inv(1, "read", None), done("ok", 1, "read", {"0": 50, "1": 50})])
    for name, args, recorded in (
            ("skew", [skew, "-w", "rw-register", "-m", "serializable", "--linearizable-keys", "--timestamps"],
             {"checker": "rw-register", "model": "serializable", "options": {"linearizable_keys": True},
              "timestamps": True}),
            ("bank", [bank, "-w", "bank", "--total", "50"], {"checker": "bank", "options": {"total": 50}})):
        d = tmp_path / f"rep-{name}"
        p = run("check", *args, "--report", str(d), "--json")
        assert p.returncode == 1, (name, p.stdout, p.stderr)
        checks = json.loads((d / "test.json").read_text())["checks"]
        assert {k: checks[k] for k in recorded} == recorded, checks
        again = run("check", str(d), "--json")
        assert again.returncode == 1, (name, again.stdout, again.stderr)
        assert json.loads(again.stdout)["anomaly-types"] == json.loads(p.stdout)["anomaly-types"]
