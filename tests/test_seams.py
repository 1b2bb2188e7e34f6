"""Every implementation has what its seam (sleuth/base/seams.py) names."""

import inspect

import pytest

from sleuth.base import seams
from sleuth.checker import WORKLOADS as CHECKERS
from sleuth.cluster.runtime_docker import DockerRuntime
from sleuth.cluster.runtime_local import LocalRuntime
from sleuth.cluster.runtime_ssh import SshRuntime
from sleuth.nemesis import faults
from sleuth.targets import Target
from sleuth.targets.described import DescribedTarget
from sleuth.targets.etcd import EtcdTarget
from sleuth.targets.mariadb import MariaDBTarget, MySQLUrlTarget
from sleuth.targets.postgres import PostgresTarget, UrlTarget
from sleuth.targets.reference import ReferenceTarget
from sleuth.workloads.clients import WORKLOADS


def _members(protocol) -> set[str]:
    names = {n for n, v in vars(protocol).items() if inspect.isfunction(v) and not n.startswith("_")}
    return names | set(getattr(protocol, "__annotations__", {}))


@pytest.mark.parametrize("cls", [ReferenceTarget, PostgresTarget, UrlTarget, MariaDBTarget, MySQLUrlTarget,
                                 DescribedTarget, EtcdTarget])
def test_targets(cls):
    assert issubclass(cls, Target)
    missing = {m for m in _members(seams.Target) if not hasattr(cls, m) and m != "generation"}
    assert not missing, missing  # generation is set by Target.__init__


@pytest.mark.parametrize("cls", [LocalRuntime, DockerRuntime, SshRuntime])
def test_runtimes(cls):
    assert not {m for m in _members(seams.Runtime) if not hasattr(cls, m)}


def test_faults_workloads_and_checkers():
    kinds = [c for c in vars(faults).values() if inspect.isclass(c) and issubclass(c, faults.Fault)
             and c is not faults.Fault]
    assert len(kinds) >= len(faults.KINDS)
    for cls in kinds:
        assert cls.start_f and cls.stop_f and not {m for m in _members(seams.Fault) if not hasattr(cls, m)}
    for cls in WORKLOADS.values():
        assert cls.name and cls.checker in CHECKERS
        assert not {m for m in _members(seams.Workload) if not hasattr(cls, m)}
    for spec in CHECKERS.values():
        assert callable(spec.checker())


def test_the_runner_and_the_nemeses_ask_a_target_only_what_its_seam_names():
    """Issue 45: the nemeses and the runner reached a target's handles through getattr
    (add_coordinator, set_clock, retire_coordinator, socket_of, use_upstream, then runtime_name
    and workload), so a target lacking one failed late or silently. The seam names them all
    (test_targets checks every target has them); no caller probes a target by name."""
    import os
    import re

    from source_tree import sources

    probes = [f"{path}: {m.group(0)}" for path, text in sources()
              if path.startswith((os.path.join("sleuth", "run"), os.path.join("sleuth", "cli"),
                                  os.path.join("sleuth", "campaign"), "nemesis"))
              for m in re.finditer(r"\b(get|has)attr\([\w.]*target\b[^)]*\)", text)]
    assert probes == []
