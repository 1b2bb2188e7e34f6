"""One owner for each word (issue 45): a verdict's spellings live in sleuth/base/exits.py, every
anomaly's name with the model lattice (checker/models.py), and two different things no
longer share the name FAULTS. The source scans fail when a module spells a verdict, or an
anomaly's name, itself again."""

from __future__ import annotations

import ast
import os
import re

import pytest
from source_tree import sources

from sleuth.base import exits


def _sources(exts=(".py", ".j2")):
    return sources(exts)


@pytest.mark.parametrize("valid, word, headline, text, status", [
    (True, "valid", "valid", "true", exits.VALID), (False, "invalid", "INVALID", "false", exits.INVALID),
    ("unknown", "unknown", "UNKNOWN", "unknown", exits.UNKNOWN), (None, "unknown", "UNKNOWN", "unknown", exits.UNKNOWN)])
def test_a_verdicts_spellings_come_from_one_place(valid, word, headline, text, status):
    assert (exits.verdict_word(valid), exits.verdict_headline(valid), exits.verdict_text(valid),
            exits.of_valid(valid)) == (word, headline, text, status)
    assert exits.valid_of_text(text) == (valid if valid is not None else "unknown")
    assert exits.valid_of_text(text.upper()) == exits.valid_of_text(text)


# how a module spells a verdict itself: a mapping or a conditional from valid to a word
SPELLED = re.compile(r'\{\s*True:\s*"|"true" if \w+ is True|== "true"|== "false"|'
                     r'\.get\([^)]*\)\s*==\s*"unknown"|valid == (true|false)\b')


def test_no_module_spells_a_verdict_itself():
    found = [f"{path}:{text[:m.start()].count(chr(10)) + 1}: {m.group(0)}"
             for path, text in _sources() if path != os.path.join("sleuth", "base", "exits.py")
             for m in SPELLED.finditer(text)]
    assert found == []


def test_the_durability_anomalies_are_named_with_the_models_and_nowhere_else():
    from sleuth.checker.models import DURABILITY_ANOMALIES, LOST_WRITE, PHANTOM_WRITE, PROSCRIBES

    assert DURABILITY_ANOMALIES == (LOST_WRITE, PHANTOM_WRITE) == ("lost-write", "phantom-write")
    assert not {LOST_WRITE, PHANTOM_WRITE} & {a for v in PROSCRIBES.values() for a in v}
    spelled = [path for path, text in _sources((".py",)) if path != os.path.join("checker", "models.py")
               for m in re.finditer(r'"(lost|phantom)-write"', text)]
    assert spelled == []


def test_nemesis_kinds_and_fault_switches_have_different_names():
    from sleuth.cluster import faults as switches
    from sleuth.nemesis import faults as nemesis

    assert not hasattr(nemesis, "FAULTS")  # its classes by kind are FAULT_CLASSES
    assert set(nemesis.FAULT_CLASSES) == set(nemesis.KINDS)
    assert set(switches.FAULTS).isdisjoint(nemesis.KINDS)


def _literals(text: str):
    """(line, string) of each string literal in a module's code, docstrings left out (they
    may name an anomaly to explain it)."""
    tree = ast.parse(text)
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.lineno, node.value


def spelled_anomalies(sources) -> list[str]:
    """Where a module spells an anomaly's name as a literal instead of importing it from the
    model lattice (checker/models.py, the one owner of those names)."""
    from sleuth.checker.models import ANOMALIES

    found = []
    for path, text in sources:
        if path == os.path.join("checker", "models.py"):
            continue
        if path.endswith(".py"):
            found += [f"{path}:{line}: {s}" for line, s in _literals(text) if s in ANOMALIES]
        else:  # a template: a quoted name
            found += [f"{path}:{text[:m.start()].count(chr(10)) + 1}: {m.group(1)}"
                      for m in re.finditer(r"""["']([\w-]+)["']""", text) if m.group(1) in ANOMALIES]
    return found


def test_anomaly_names_are_spelled_only_by_the_model_lattice():
    # the reference cluster stands apart (it imports nothing of the tester) and has words of
    # its own that sound alike (its RPC's "internal" error)
    assert spelled_anomalies(s for s in _sources() if not s[0].startswith("cluster" + os.sep)) == []


def test_the_anomaly_check_sees_a_literal_and_not_a_docstring():
    planted = '"""A G-single is..."""\nX = ("G-single", models.G0)\ndef f():\n    """G0."""\n    return f"{a}-x"\n'
    assert spelled_anomalies([("checker/planted.py", planted)]) == ["checker/planted.py:2: G-single"]
    assert spelled_anomalies([("reports/t.j2", "{% if a == 'lost-update' %}\n")]) == ["reports/t.j2:1: lost-update"]
