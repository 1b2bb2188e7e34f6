"""Issue 45: the checks a history gets are one type (checker/checks.py), validated against the
checker registry, and turned into a checker's keyword arguments in one place; no checker
takes a catch-all `**_` that would swallow an option it was never meant to get."""

from __future__ import annotations

import inspect

import pytest

from sleuth.checker import OPTIONS, WORKLOADS
from sleuth.checker.checks import Checks


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_no_checker_takes_a_catch_all_and_each_takes_what_it_declares(name):
    """On main, seven checkers took `**_`: an option or model meant for another checker
    vanished into it instead of being refused."""
    params = inspect.signature(WORKLOADS[name].checker()).parameters
    assert not [p for p in params.values() if p.kind is inspect.Parameter.VAR_KEYWORD], name
    for option in WORKLOADS[name].options:
        assert option in params, f"{name} declares {option} but its checker does not take it"


def test_the_model_reaches_only_the_checkers_that_declare_it():
    assert Checks(checker="list-append", model="serializable").kwargs() == {"model": "serializable"}
    assert Checks(checker="register", model="linearizable").kwargs() == {}  # judged as linearizable
    assert Checks(checker="bank", options={"total": 10}).kwargs() == {"total": 10}
    rw = Checks(checker="rw-register", model="snapshot-isolation", options={"linearizable_keys": True})
    assert rw.kwargs() == {"model": "snapshot-isolation", "linearizable_keys": True}
    assert "model" in OPTIONS and OPTIONS["model"].own_flag  # declared, its flag the command's own


@pytest.mark.parametrize("bad,words", [
    ({"checker": "nosuch"}, "no checker named 'nosuch'"),
    ({"checker": "bank", "model": "serializable"}, "not a model of the bank checker"),
    ({"checker": "register", "model": "serializable"}, "not a model of the register checker"),
    ({"checker": "list-append", "options": {"total": 5}}, "takes no option 'total'"),
    ({"checker": "list-append", "options": {"model": "serializable"}}, "takes no option 'model'"),
    ({"checker": "bank", "options": {"total": "5"}}, "'5' is not what --total takes"),
    ({"checker": "rw-register", "options": {"linearizable_keys": 1}}, "is not what --linearizable-keys takes"),
])
def test_checks_that_the_registry_does_not_declare_are_refused(bad, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        Checks.from_json(bad)
    with pytest.raises(ValueError):
        Checks(**bad)


def test_the_first_shape_of_checks_reads_as_today_s():
    """test.json's `checks` as written before `options` existed: the two options a run could
    set were fields of their own."""
    old = {"checker": "rw-register", "model": "serializable", "linearizable_keys": True, "total": None,
           "timestamps": False}
    assert Checks.from_json(old) == Checks(checker="rw-register", model="serializable",
                                           options={"linearizable_keys": True})
    bank = {"checker": "bank", "model": None, "linearizable_keys": False, "total": 100, "timestamps": False}
    assert Checks.from_json(bank).kwargs() == {"total": 100}


def test_options_laid_over_win_and_round_trip():
    c = Checks(checker="bank", options={"total": 100, "no_negative": True})
    assert c.with_options({"total": 50}).options == {"total": 50, "no_negative": True}
    assert Checks.from_json(c.to_json()) == c
    with pytest.raises(ValueError):
        c.with_options({"linearizable_keys": True})
