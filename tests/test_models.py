"""The model lattice: which models each anomaly rules out, checked against
Adya's and Cerone & Gotsman's definitions written out by hand."""

import pytest

from sleuth.checker import models

# (anomaly, models that must forbid it, models that must allow it)
CASES = [
    ("G0", ["read-uncommitted", "read-committed", "serializable"], []),
    ("G1a", ["read-committed", "snapshot-isolation", "strict-serializable"], ["read-uncommitted"]),
    ("G1c", ["read-committed", "repeatable-read"], ["read-uncommitted"]),
    ("G-single", ["snapshot-isolation", "repeatable-read", "serializable"], ["read-committed"]),
    ("G-nonadjacent", ["snapshot-isolation", "serializable"], ["read-committed"]),
    ("G2-item", ["repeatable-read", "serializable"], ["snapshot-isolation", "read-committed"]),
    ("lost-update", ["snapshot-isolation", "repeatable-read"], ["read-committed"]),
    ("G-single-realtime", ["strict-serializable"],
     ["serializable", "strong-session-serializable", "snapshot-isolation"]),
    ("G2-item-process", ["strong-session-serializable", "strict-serializable"], ["serializable"]),
    ("internal", list(models.MODELS), []),
    # Elle: a dirty read (G1a), which read uncommitted allows
    ("incompatible-order", ["read-committed", "strict-serializable"], ["read-uncommitted"]),
]


@pytest.mark.parametrize("anomaly,forbidden,allowed", CASES)
def test_forbids(anomaly, forbidden, allowed):
    for m in forbidden:
        assert models.forbids(m, anomaly), (m, anomaly)
    for m in allowed:
        assert not models.forbids(m, anomaly), (m, anomaly)


def test_judge_write_skew():
    not_, also, possible = models.judge(["G2-item"])
    assert not_ == ["repeatable-read"]
    assert set(also) == {"serializable", "strong-session-serializable", "strict-serializable"}
    # everything below serializable but repeatable read stays possible (Elle's lattice)
    assert set(possible) == set(models.MODELS) - {"repeatable-read", *also}
    assert {"snapshot-isolation", "strong-snapshot-isolation", "cursor-stability",
            "update-serializable", "read-committed"} <= set(possible)


def test_judge_stale_read():
    # a stale read (G-single-realtime) rules out strong snapshot isolation too
    # (Daudjee & Salem), the weakest model with real time; strict serializability with it
    not_, also, possible = models.judge(["G-single-realtime"])
    assert not_ == ["strong-snapshot-isolation"] and also == ["strict-serializable"]
    assert {"serializable", "strong-session-serializable", "snapshot-isolation"} <= set(possible)


def test_judge_nothing():
    assert models.judge([]) == ([], [], list(models.MODELS))


def test_unknown_model_is_rejected():
    with pytest.raises(ValueError, match="unknown model"):
        models.canonical("snapshot")


# -- the lattice as data (Elle's elle.consistency-model) ----------------------

# (anomaly, the weakest models that forbid it), written out from Elle's tables
# and Adya's definitions by hand
WEAKEST = [
    ("G0", ("read-uncommitted",)),
    ("G1c", ("read-committed",)),
    ("G-single", ("consistent-view", "repeatable-read")),  # snapshot isolation implies PL-2+
    ("G-nonadjacent", ("repeatable-read", "snapshot-isolation")),
    ("G2-item", ("repeatable-read",)),
    ("lost-update", ("cursor-stability", "update-atomic")),
    ("G1a", ("read-committed",)),  # read atomic implies read committed (via MAV)
    ("G0-process", ("strong-session-read-uncommitted",)),
    ("G1c-process", ("strong-session-read-committed",)),
    ("G-single-process", ("strong-session-snapshot-isolation",)),  # implied by strong-session-serializable
    ("G2-item-process", ("strong-session-serializable",)),
    ("G1c-realtime", ("strong-read-committed",)),
    ("G-nonadjacent-realtime", ("strong-snapshot-isolation",)),
    ("G2-item-realtime", ("strict-serializable",)),
    ("future-read", ("read-committed",)),
    ("incompatible-order", ("read-committed",)),
    # a changed read within one transaction: Adya's P2 (one anti-dependency, a G-single),
    # which read committed allows, and a break of Cerone et al.'s INT, which read atomic and
    # every model of theirs above it forbid (Elle's `internal`)
    ("fuzzy-read", ("consistent-view", "repeatable-read", "read-atomic")),
    # Adya: PL-CS forbids G-cursor, PL-2L G-monotonic, PL-3U G-update; each is also a
    # G-single or G2-item, which repeatable read forbids (consistent view implies PL-CS
    # and PL-2L, so it is never the weakest)
    ("G-cursor", ("cursor-stability",)),
    ("G-monotonic", ("monotonic-view", "repeatable-read")),
    ("G-update", ("update-serializable", "repeatable-read")),
    ("G-SIb", ("forward-consistent-view",)),  # Adya PL-FCV; PL-SI implies it
]


@pytest.mark.parametrize("anomaly,weakest", WEAKEST)
def test_weakest_forbidding_models(anomaly, weakest):
    assert set(models.forbidding(anomaly)) == set(weakest), models.forbidding(anomaly)


def test_models_are_listed_strongest_first_and_every_one_is_below_strict():
    pos = {m: i for i, m in enumerate(models.MODELS)}
    for m, weaker in models.IMPLIES.items():
        assert all(pos[w] > pos[m] for w in weaker), m
    assert models.weaker_or_equal("strict-serializable") == frozenset(models.MODELS)


def test_every_model_is_ruled_out_by_some_anomaly():
    """A model nothing can rule out would always be "possible": not listed."""
    for m in models.MODELS:
        assert models.forbidden_by(m), m


def test_strictly_stronger_models_forbid_strictly_more():
    for m in models.MODELS:
        for w in models.weaker_or_equal(m) - {m}:
            assert models.forbidden_by(w) <= models.forbidden_by(m), (m, w)


@pytest.mark.parametrize("alias,name", [("PL-2", "read-committed"), ("PL-2.99", "repeatable-read"),
                                        ("PL-SI", "snapshot-isolation"), ("PL-SS", "strict-serializable"),
                                        ("PL-2+", "consistent-view"), ("strong-PL-2", "strong-read-committed")])
def test_adya_names_are_accepted(alias, name):
    assert models.canonical(alias) == name
    assert models.forbids(alias, "G1c") == models.forbids(name, "G1c")


def test_each_new_model_judged_on_a_literature_case():
    """Cursor stability forbids Hermitage's lost update that read committed
    allows; consistent view (PL-2+) forbids read skew; strong snapshot
    isolation forbids the stale read that snapshot isolation allows."""
    from test_cycles_bruteforce import to_history
    from test_cycles_literature import CASES

    from sleuth.checker import list_append, rw_register
    lost = to_history(CASES["lost-update"][1])
    assert rw_register.check(lost, "read-committed").valid is True
    assert rw_register.check(lost, "cursor-stability").valid is False
    assert rw_register.check(lost, "PL-CS").valid is False
    skew = to_history(CASES["G-single"][1])
    assert list_append.check(skew, "cursor-stability").valid is True
    assert list_append.check(skew, "consistent-view").valid is False
    stale = to_history(CASES["stale"][1])
    assert list_append.check(stale, "snapshot-isolation").valid is True
    assert list_append.check(stale, "strong-session-snapshot-isolation").valid is True
    res = list_append.check(stale, "strong-snapshot-isolation")
    assert res.valid is False and res.anomaly_types == ["G-single-realtime"]
    session = to_history(CASES["session"][1])
    assert list_append.check(session, "strong-session-snapshot-isolation").valid is False
    assert list_append.check(session, "snapshot-isolation").valid is True


def test_g_single_is_a_g_update_and_a_g_sib():
    """A cycle with one rw edge holds at most one read-only transaction (a
    read-only one leaves a cycle only by rw): a G-update; and every DSG edge
    is an SSG edge: a G-SIb (Adya; Elle's implied-anomalies)."""
    assert {"G-update", "G-SIb", "G2-item"} <= models.implied("G-single")
    assert "G-update" not in models.implied("G2-item")  # the long fork is update serializable
    assert "G-single" in models.implied("G-cursor") and "G-single" in models.implied("G-monotonic")


# (literature case of tests/test_cycles_literature.py, the weakest models it rules out,
# by hand from Adya's definitions and Elle's lattice)
LITERATURE_NOT = [
    ("G-cursor", ["cursor-stability"]),
    ("G-monotonic", ["repeatable-read", "monotonic-view"]),
    ("G-update", ["repeatable-read", "update-serializable"]),
    ("long-fork", ["repeatable-read", "snapshot-isolation"]),
    ("G-single", ["repeatable-read", "consistent-view"]),
    ("G2-item", ["repeatable-read", "update-serializable"]),
    ("lost-update", ["cursor-stability", "update-atomic"]),
]


@pytest.mark.parametrize("case,weakest", LITERATURE_NOT)
def test_every_model_name_judged_on_the_literature_cases(case, weakest):
    """Every model name and alias: invalid exactly when it implies one of the
    weakest models the case rules out."""
    from test_cycles_bruteforce import to_history
    from test_cycles_literature import CASES
    checker, txns, _, _ = CASES[case]
    h = to_history(txns)
    res = checker.check(h, "read-uncommitted")
    assert set(res.not_) == set(weakest), res.not_
    for m in [*models.MODELS, *models.ALIASES]:
        ruled_out = any(w in models.weaker_or_equal(models.canonical(m)) for w in weakest)
        assert checker.check(h, m).valid is (not ruled_out), m


# Every model name in Elle's elle.consistency-model (its `models` graph and
# `canonical-model-names`) that some anomaly rules out there, written out by hand.
# Elle's others (view-serializable, session-serializable, 1SR, and the
# single-object linearizable, sequential, causal, PRAM, writes-follow-reads,
# monotonic-reads, monotonic-writes, read-your-writes) proscribe nothing a
# transactional history shows, so a history can never rule them out.
ELLE_NAMES = """
causal-cerone read-atomic consistent-view cursor-stability monotonic-view conflict-serializable
forward-consistent-view PL-1 PL-2 PL-2+ PL-CS PL-2L PL-MSR PL-FCV PL-2.99 PL-SI PL-3U PL-3 PL-SS
repeatable-read update-serializable monotonic-atomic-view read-committed monotonic-snapshot-read
parallel-snapshot-isolation update-atomic prefix read-uncommitted serializable snapshot-isolation
strict-serializable strong-serializable strong-snapshot-isolation strong-session-serializable
strong-session-snapshot-isolation strong-session-PL-1 strong-session-PL-2 strong-PL-1 strong-PL-2
strong-session-read-uncommitted strong-session-read-committed strong-read-uncommitted
strong-read-committed
""".split()


@pytest.mark.parametrize("name", ELLE_NAMES)
def test_every_distinguishable_elle_model_name_is_accepted(name):
    assert models.canonical(name) in models.MODELS


def test_the_docs_table_of_workloads_models_and_options_is_the_registrys():
    """Issue 43: docs/history-format.md listed 7 list-append models (the CLI takes 25) and missed
    --sequential-keys, --wfr-keys and --failed-cas-observes. The table is written from the
    registry (`python -m sleuth.checker.registry_doc`); this fails when the doc differs."""
    import os

    from sleuth.checker import OPTIONS, WORKLOADS, registry_doc
    from sleuth.cli.check import check

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), registry_doc.DOC)
    with open(path) as f:
        text = f.read()
    assert registry_doc.render(text, path) == text, "run: python -m sleuth.checker.registry_doc"
    table = text.split(registry_doc.BEGIN)[1].split(registry_doc.END)[0]
    flags = {f for p in check.params for f in (*p.opts, *p.secondary_opts)}
    for o in OPTIONS.values():  # every checker flag `sleuth check` takes, named in the table
        assert o.flag in flags and f"`{o.flag}" in table, o.flag
    for m in WORKLOADS["list-append"].models:
        assert f"`{m}`" in table, m
    assert len(WORKLOADS["list-append"].models) == 25


def test_the_docs_table_is_rewritten_between_its_markers_only():
    from sleuth.checker import registry_doc

    text = f"before\n{registry_doc.BEGIN}\n| stale |\n{registry_doc.END}\nafter\n"
    out = registry_doc.render(text)
    assert out.startswith("before\n" + registry_doc.BEGIN) and out.endswith(registry_doc.END + "\nafter\n")
    assert "| stale |" not in out and "`--sequential-keys`" in out
    with pytest.raises(ValueError, match="BEGIN"):
        registry_doc.render("no markers\n")
