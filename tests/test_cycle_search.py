"""Cycle search per strongly connected component, with a time budget per
component (checker/cycles.py): anomalies spread over several components are
all found; a search cut short says which types may be missing and never
answers "valid" for a model that forbids one of them; counts are reported."""

import json
import subprocess
import sys

from test_cycles_bruteforce import to_history
from test_cycles_literature import CASES

from sleuth.checker import cycles, list_append, models, rw_register
from sleuth.checker.result import UNKNOWN
from sleuth.history.jsonl import write_jsonl


def shifted(txns, dt, dp):
    """The same transactions dt later, on processes renumbered by dp."""
    return [(p + dp, s + dt, e + dt, typ, mops) for p, s, e, typ, mops in txns]


def renamed(txns, suffix):
    """The same transactions on keys renamed key+suffix (disjoint data)."""
    return [(p, s, e, typ, [[f, k + suffix, v] for f, k, v in mops]) for p, s, e, typ, mops in txns]


def two_components():
    """Adya's G0 case, then (later, on other keys and processes) the read-skew
    G-single case: real-time order links them one way only, so they are two
    strongly connected components."""
    g0 = CASES["G0"][1]
    gs = renamed(shifted(CASES["G-single"][1], 100, 10), "2")
    return to_history(g0 + gs)


def test_anomalies_in_two_components_are_both_found():
    r = list_append.check(two_components(), "strict-serializable")
    assert r.valid is False
    assert {"G0", "G-single"} <= set(r.anomaly_types), r.anomaly_types
    assert r.stats["anomaly-counts"]["G0"] >= 1 and r.stats["anomaly-counts"]["G-single"] >= 1
    assert r.stats["cycle-counts-are"] == "lower-bounds"
    assert r.incomplete == [] and r.notes == []
    # the G0 cycle runs over x and y, the G-single over x2 and y2: two components
    g0 = r.anomalies["G0"][0]["explanation"]
    gs = r.anomalies["G-single"][0]["explanation"]
    assert "'x'" in g0 and "'x2'" not in g0 and "'x2'" in gs and "'x'" not in gs.replace("'x2'", "")


def test_every_variant_is_searched_in_a_component():
    """A component holding a plain G-single also holds a G-single-realtime
    (the stale read); both are reported, not only the first found."""
    h = to_history([
        (0, 0, 10, "ok", [["append", "x", 1], ["append", "y", 1]]),
        (1, 0, 10, "ok", [["r", "x", []], ["r", "y", [1]]]),
        (2, 20, 30, "ok", [["r", "x", []]]),  # after T0 completed, and yet no 1
        (3, 40, 50, "ok", [["r", "x", [1]], ["r", "y", [1]]]),
    ])
    r = list_append.check(h, "strict-serializable")
    assert {"G-single", "G-single-realtime"} <= set(r.anomaly_types), r.anomaly_types


def test_zero_budget_is_never_valid_for_a_model_it_leaves_undecided():
    """A budget of 0 searches nothing: a component's types are incomplete
    from the first one it had a start edge for. A model that forbids an
    incomplete type gets "unknown" (or "invalid" on other evidence), never
    "valid"; a cut never turns one decided verdict into the other."""
    undecided = 0
    for name, (checker, txns, _, _) in CASES.items():
        h = to_history(txns)
        for model in ("read-committed", "serializable", "strict-serializable"):
            full = checker.check(h, model)
            cut = checker.check(h, model, cycle_search_timeout=0)
            assert cut.valid in (full.valid, UNKNOWN), (name, model)
            if any(models.forbids(model, t) for t in cut.incomplete):
                undecided += 1
                assert cut.valid is not True, (name, model)
                assert "cycle search cut short" in cut.notes[0] and "--cycle-search-timeout" in cut.notes[0]
            elif cut.valid == UNKNOWN:
                raise AssertionError(("unknown without an incomplete forbidden type", name, model))
    assert undecided >= 10  # the test did test something


def test_zero_budget_with_a_forbidden_non_cycle_anomaly_is_invalid():
    # Hermitage's lost update: forbidden by snapshot isolation whatever the cycles say
    _, txns, _, _ = CASES["lost-update"]
    r = rw_register.check(to_history(txns), "snapshot-isolation", cycle_search_timeout=0)
    assert r.valid is False and "lost-update" in r.anomaly_types


def test_incomplete_types_listed_in_spec_order():
    r = list_append.check(two_components(), "serializable", cycle_search_timeout=0)
    assert r.valid == UNKNOWN
    assert r.incomplete == [t for t in cycles.TYPES if t in set(r.incomplete)]
    assert "G0" in r.incomplete and "G-single" in r.incomplete
    assert len(r.stats["cycle-search-timeouts"]) == 2  # both components were cut short


def test_cli_reports_incomplete_in_json(tmp_path):
    path = tmp_path / "h.jsonl"
    write_jsonl(two_components().events, path)
    out = subprocess.run([sys.executable, "-m", "sleuth.cli", "check", str(path), "--workload", "list-append",
                          "--json", "--cycle-search-timeout", "0"], capture_output=True, text=True)
    doc = json.loads(out.stdout)
    assert doc["valid"] == "unknown" and "G0" in doc["incomplete"], out.stderr
    out = subprocess.run([sys.executable, "-m", "sleuth.cli", "check", str(path), "--workload", "list-append",
                          "--json"], capture_output=True, text=True)
    doc = json.loads(out.stdout)
    assert doc["valid"] is False and doc["incomplete"] == []
    assert doc["stats"]["anomaly-counts"]["G0"] >= 1


def test_every_searched_type_is_known_to_the_lattice():
    for t in cycles.TYPES:
        assert models.forbidding(t), t


def ring(n):
    """n concurrent txns, each reading the next one's key empty and appending
    to its own, then a final read of everything: one component of n, a
    G2-item cycle through all of them (write skew around a ring)."""
    from sleuth.history.jsonl import Event, History
    ev = [("invoke", i, [["r", (i + 1) % n, None], ["append", i, 1]]) for i in range(n)]
    ev += [("ok", i, [["r", (i + 1) % n, []], ["append", i, 1]]) for i in range(n)]
    ev += [("invoke", n, [["r", i, None] for i in range(n)]), ("ok", n, [["r", i, [1]] for i in range(n)])]
    return History([Event(j, j, t, p, "txn", v) for j, (t, p, v) in enumerate(ev)], "ring")


def test_a_search_cut_inside_a_large_component_is_unknown():
    """A deadline that passes mid-search (not only a budget of 0) stops it:
    the G2-item search around a 10,000-transaction ring is cut, so the type
    is incomplete and serializability, which forbids it, is unknown."""
    h = ring(10_000)
    r = list_append.check(h, "serializable", cycle_search_timeout=1e-6)
    assert r.valid == UNKNOWN and "G2-item" in r.incomplete and r.anomalies == {}
    assert r.stats["largest-component"] == 10_000
    assert r.stats["cycle-search-timeouts"][0]["searching"] == "G2-item"
    # snapshot isolation allows G2-item: the cut leaves its verdict decided
    assert list_append.check(h, "snapshot-isolation", cycle_search_timeout=1e-6).valid is True
    small = ring(50)
    # every transaction of the ring writes: the write skew is a G-update too (Adya's PL-3U)
    assert list_append.check(small, "serializable").anomaly_types == ["G-update", "G2-item"]
