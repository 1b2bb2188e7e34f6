"""The `sleuth` command line (click): one module per family of commands.

Imports of the heavier subsystems happen inside each command, so `sleuth
check` on a register history starts in a fraction of a second.
"""

from __future__ import annotations

import click

from sleuth.cli.campaign import campaign
from sleuth.cli.check import check, sim
from sleuth.cli.cluster import cluster
from sleuth.cli.run import report, run, serve


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sleuth")
def main() -> None:
    """sleuth: a Jepsen-style consistency checker for SQL systems."""


for command in (check, sim, run, report, serve, cluster, campaign):
    main.add_command(command)
