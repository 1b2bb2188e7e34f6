"""sleuth installs no Debian package itself: a live part whose server is missing
is refused before anything starts, naming the package and `make system`
(PostgreSQL's target used to run apt-get as root on its own, where MariaDB's
refused)."""

from __future__ import annotations

import pytest

from sleuth.campaign import matrix as campaign
from sleuth.targets import Unsupported, make_target, postgres_server, refuse_upstream
from sleuth.workloads.clients import WORKLOADS


@pytest.fixture
def no_postgresql(monkeypatch):
    monkeypatch.setattr(postgres_server, "installed_bin", lambda: None)


def test_postgres_target_refuses_without_postgresql(no_postgresql):
    with pytest.raises(Unsupported, match=r"--target postgres needs Debian's postgresql .*make system"):
        make_target("postgres", None, ())


def test_the_server_itself_refuses_without_postgresql(no_postgresql):
    with pytest.raises(RuntimeError, match="apt-get install postgresql"):
        postgres_server.PostgresServer()


def test_source_workload_refuses_without_postgresql(no_postgresql):
    target = make_target("reference", "local", ())
    with pytest.raises(Unsupported, match="--workload source: its upstream PostgreSQL needs Debian's postgresql"):
        refuse_upstream(target, WORKLOADS["source"])
    refuse_upstream(target, WORKLOADS["list-append"])  # reads no upstream: nothing to refuse


def test_source_workload_needs_the_reference_cluster():
    with pytest.raises(Unsupported, match="needs the reference cluster's source node"):
        refuse_upstream(make_target("postgresql://u@127.0.0.1:1/db", None, ()), WORKLOADS["source"])


@pytest.mark.parametrize("cell, words", [
    ('workload = "bank"\ntarget = "postgres"', "target postgres needs Debian's postgresql"),
    ('workload = "source"\ntarget = "reference"', "--workload source: its upstream PostgreSQL needs"),
])
def test_a_campaign_refuses_its_file_before_any_run(no_postgresql, cell, words):
    doc = __import__("tomllib").loads(f'[campaign]\nname = "c"\nruntime = "local"\n[[matrix]]\n{cell}\n')
    with pytest.raises(campaign.CampaignError, match=words) as e:
        campaign.expand(doc, "c.toml")
    assert str(e.value).startswith("c.toml: matrix[1]: ")


def test_installed_bin_takes_the_newest_version(monkeypatch, tmp_path):
    found = ["/usr/lib/postgresql/9/bin/initdb", "/usr/lib/postgresql/15/bin/initdb",
             "/usr/lib/postgresql/13/bin/initdb"]
    monkeypatch.setattr(postgres_server.glob, "glob", lambda pattern: list(found))
    assert postgres_server.installed_bin() == "/usr/lib/postgresql/15/bin"  # not 9, as text sorts
