"""How the cluster package hangs together: one owner per fact, no import loops."""

from __future__ import annotations

import subprocess
import sys


def test_runtime_ssh_imports_without_control():
    """control.py loads the runtimes; a runtime importing control back was a loop."""
    code = ("import sys, sleuth.cluster.runtime_ssh; "
            "print('sleuth.cluster.control' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "False", p.stderr


def test_fault_switch_names_have_one_owner():
    import importlib

    from sleuth.cluster import node
    cli_cluster = importlib.import_module("sleuth.cli.cluster")  # the package exports the group
    from sleuth.cluster.faults import FAULTS

    assert not hasattr(node, "FAULTS") or node.FAULTS is FAULTS
    assert not hasattr(cli_cluster, "FAULT_CHOICES")
    (fault_opt,) = [a for a in node.parser()._actions if a.dest == "fault"]
    assert list(fault_opt.choices) == list(FAULTS)
    up_fault = next(p for p in cli_cluster.cluster.commands["up"].params if p.name == "fault")
    assert all(name in up_fault.help for name in FAULTS)
