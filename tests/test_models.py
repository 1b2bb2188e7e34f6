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
    ("incompatible-order", ["read-uncommitted", "strict-serializable"], []),
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
    assert set(possible) == {"snapshot-isolation", "read-committed", "read-uncommitted"}


def test_judge_stale_read():
    not_, also, possible = models.judge(["G-single-realtime"])
    assert not_ == ["strict-serializable"] and also == []
    assert "serializable" in possible


def test_judge_nothing():
    assert models.judge([]) == ([], [], list(models.MODELS))


def test_unknown_model_is_rejected():
    with pytest.raises(ValueError, match="unknown model"):
        models.check_model("snapshot")
