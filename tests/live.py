"""The one way a test says a component it needs is missing (Docker, Spark, a database server).

A developer's machine may lack some of them, and `make test-fast` there skips what needs
them. CI must not: `.ci/run` sets SLEUTH_REQUIRE_LIVE=1, and then a missing component fails
the test that needs it instead of skipping it silently (a CI image that lost its Docker
engine or its PostgreSQL would otherwise turn every live test into a quiet skip).
Every skip for a missing component in tests/ goes through `missing`, `needs` or
`require_module`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import NoReturn

import pytest

SWITCH = "SLEUTH_REQUIRE_LIVE"


def required() -> bool:
    """True where missing components fail (CI), not skip."""
    return os.environ.get(SWITCH, "") not in ("", "0")


def missing(component: str, reason: str = "") -> NoReturn:
    """Skip the running test because `component` is not there; fail it under the switch."""
    why = f"{component} is missing" + (f" ({reason})" if reason else "")
    if required():
        pytest.fail(f"{why}, and {SWITCH}=1 forbids skipping live tests", pytrace=False)
    pytest.skip(why, allow_module_level=True)


def present(component: str, there: bool, reason: str = "") -> bool:
    """`there`, for a test that leaves out one part when `component` is absent; under the
    switch an absent component fails the test instead."""
    if not there and required():
        missing(component, reason)
    return there


def require_module(name: str, component: str | None = None):
    """pytest.importorskip, through the switch."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        error = str(e)
    missing(component or f"Python module {name}", error)


def needs(component: str, there: Callable[[], bool], reason: str = ""):
    """A decorator for a test that needs `component` (`there()` is asked when the test runs)."""
    def mark(test):
        import functools

        @functools.wraps(test)
        def wrapped(*args, **kwargs):
            if not there():
                missing(component, reason)
            return test(*args, **kwargs)
        return wrapped
    return mark
