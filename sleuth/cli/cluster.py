"""`sleuth cluster up|status|down|logs`: the reference cluster from the command line."""

from __future__ import annotations

import json
import sys

import click

FAULT_CHOICES = ("stale-read", "oracle-amnesia", "no-fencing", "rtw-no-conflict",
                 "ack-before-durable", "write-ts-not-strict")


def _die(message: str) -> None:
    click.echo(f"sleuth: error: {message}", err=True)
    sys.exit(2)


@click.group()
def cluster() -> None:
    """Start, inspect and stop the reference cluster (oracle, storage nodes, coordinators)."""


def _faults(values: tuple[str, ...]) -> list[str]:
    out = []
    for v in values:
        for f in v.split(","):
            f = f.strip()
            if f and f not in FAULT_CHOICES:
                _die(f"--fault: unknown fault {f!r}; one of {', '.join(FAULT_CHOICES)}")
            if f:
                out.append(f)
    return out


@cluster.command()
@click.option("--runtime", type=click.Choice(["docker", "local", "ssh"]), default=None,
              help="docker (default where a Docker engine answers), local processes, or ssh hosts (--nodes).")
@click.option("--nodes", "nodes_file", default=None, metavar="FILE",
              help="With --runtime ssh: the hosts, one [user@]address[:port] [key=PATH] per line.")
@click.option("--coordinators", type=click.IntRange(1, 9), default=1, show_default=True)
@click.option("--storage", type=click.IntRange(1, 9), default=2, show_default=True)
@click.option("--fault", multiple=True, help=f"Fault switch, repeatable or comma-separated: {', '.join(FAULT_CHOICES)}.")
@click.option("--name", default="default", show_default=True, help="Cluster name (several may run).")
def up(runtime, nodes_file, coordinators, storage, fault, name) -> None:
    """Start a cluster; returns when every coordinator answers SQL."""
    from sleuth.cluster.control import Cluster, ClusterError, default_runtime

    faults = _faults(fault)
    c = Cluster(name)
    runtime = runtime or default_runtime(nodes_file)
    try:
        c.up(runtime, coordinators=coordinators, storage=storage, faults=tuple(faults),
             progress=lambda m: click.echo(m, err=True), nodes_file=nodes_file)
    except ClusterError as e:
        _die(str(e).splitlines()[0] if not c.exists else str(e))
    click.echo(f"cluster {name!r} is up ({runtime}, {storage} storage, {coordinators} coordinator(s)"
               + (f", faults: {', '.join(faults)}" if faults else "") + ")")
    for n in c.coordinators():
        click.echo(f"  psql -h {n.host} -p {n.port} -U sleuth sleuth      # {n.name}")
    if coordinators > 1:
        click.echo(f"  ({c.coordinators()[-1].name} started last and leads; the others are fenced)")


@cluster.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@click.option("--name", default="default", show_default=True)
def status(as_json, name) -> None:
    """Each node: role, address, state, and each coordinator's epoch."""
    from sleuth.cluster.control import Cluster, ClusterError

    try:
        st = Cluster(name).status()
    except ClusterError as e:
        _die(str(e))
    if as_json:
        click.echo(json.dumps(st))
        return
    click.echo(f"cluster {name!r} ({st['runtime']})" + (f", faults: {', '.join(st['faults'])}" if st["faults"] else ""))
    for n in st["nodes"]:
        epoch = f"  epoch {n['epoch']}" if n["role"] == "coordinator" else ""
        click.echo(f"  {n['name']:<10} {n['role']:<12} {n['host']}:{n['port']:<6} {n['state']}{epoch}")


@cluster.command()
@click.option("--name", default="default", show_default=True)
def down(name) -> None:
    """Stop every node and remove the cluster's containers, network and data."""
    from sleuth.cluster.control import Cluster, ClusterError

    try:
        Cluster(name).down()
    except ClusterError as e:
        _die(str(e))
    click.echo(f"cluster {name!r} is down")


@cluster.command()
@click.argument("node")
@click.option("--name", default="default", show_default=True)
def logs(node, name) -> None:
    """Print a node's log."""
    from sleuth.cluster.control import Cluster, ClusterError

    try:
        c = Cluster(name)
        c.node(node)
        click.echo(c.runtime.logs(node), nl=False)
    except ClusterError as e:
        _die(str(e))
