"""`sleuth cluster up|status|list|logs|down`: the reference cluster from the command line.

Exit status follows sleuth's table (sleuth/base/exits.py): 0 done, 254 a bad
option or an unknown cluster or node, 255 a cluster that would not start or
a runtime that failed. Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import json

import click

from sleuth.base.exits import CRASHED, die
from sleuth.cluster import RUNTIMES
from sleuth.cluster.faults import FAULTS


@click.group()
def cluster() -> None:
    """Start, inspect and stop the reference cluster (oracle, storage nodes, coordinators)."""


def _faults(values: tuple[str, ...]) -> list[str]:
    """`--fault a,b --fault c` -> [a, b, c], each switch once; a value that names none (`,`) is refused."""
    out = []
    for v in values:
        named = [f.strip() for f in v.split(",") if f.strip()]
        if not named:
            die(f"--fault {v!r}: no fault switch named; one of {', '.join(FAULTS)}")
        for f in named:
            if f not in FAULTS:
                die(f"--fault: unknown fault {f!r}; one of {', '.join(FAULTS)}")
            if f not in out:
                out.append(f)
    return out


def _name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """--name: the rule of campaign names (sleuth.base.names): one directory under $SLEUTH_HOME."""
    from sleuth.base.names import name_problem

    problem = name_problem(value)
    if problem is not None:
        raise click.BadParameter(problem)
    return value


name_option = click.option("--name", default="default", show_default=True, callback=_name,
                           help="Cluster name (several may run): letters, digits, - and _.")


def _fail(e: Exception, first_line: bool = False) -> None:
    """A ClusterError carries its status (254 or 255); anything else is ours to own (255)."""
    from sleuth.cluster.errors import ClusterError

    text = str(e) or type(e).__name__
    die(text.splitlines()[0] if first_line else text, e.status if isinstance(e, ClusterError) else CRASHED)


@cluster.command()
@click.option("--runtime", type=click.Choice(RUNTIMES), default=None,
              help="docker (default where a Docker engine answers), local processes, or ssh hosts (--nodes).")
@click.option("--nodes", "nodes_file", default=None, metavar="FILE",
              help="With --runtime ssh: the hosts, one [user@]address[:port] [key=PATH] per line.")
@click.option("--coordinators", type=click.IntRange(1, 9), default=1, show_default=True)
@click.option("--storage", type=click.IntRange(1, 9), default=2, show_default=True)
@click.option("--fault", multiple=True, help=f"Fault switch, repeatable or comma-separated: {', '.join(FAULTS)}.")
@name_option
@click.option("--source", "upstream", default=None, metavar="URL",
              help="Add a source node ingesting tables of this PostgreSQL (wal_level=logical) "
                   "by logical replication; with --source-tables.")
@click.option("--source-tables", default=None, metavar="T1,T2",
              help="The upstream tables the source ingests; they appear read-only on the coordinators.")
def up(runtime, nodes_file, coordinators, storage, fault, name, upstream, source_tables) -> None:
    """Start a cluster; returns when every coordinator answers SQL."""
    from sleuth.cluster.control import Cluster, ClusterError, default_runtime

    if bool(upstream) != bool(source_tables):
        raise click.UsageError("--source and --source-tables go together")
    source = {"upstream": upstream, "tables": [t.strip() for t in source_tables.split(",") if t.strip()]} \
        if upstream else None
    faults = _faults(fault)
    c = Cluster(name)
    runtime = runtime or default_runtime(nodes_file)
    try:
        c.up(runtime, coordinators=coordinators, storage=storage, faults=tuple(faults),
             progress=lambda m: click.echo(m, err=True), nodes_file=nodes_file, source=source)
    except ClusterError as e:
        _fail(e, first_line=not c.exists)  # a node's log tail is worth the lines
    except Exception as e:  # the runtime itself (docker, an image build, a host) failed
        _fail(e, first_line=True)
    click.echo(f"cluster {name!r} is up ({runtime}, {storage} storage, {coordinators} coordinator(s)"
               + (f", faults: {', '.join(faults)}" if faults else "") + ")")
    for n in c.coordinators():
        click.echo(f"  psql -h {n.host} -p {n.port} -U sleuth sleuth      # {n.name}")
    if coordinators > 1:
        click.echo(f"  ({c.coordinators()[-1].name} started last and leads; the others are fenced)")


@cluster.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@name_option
def status(as_json, name) -> None:
    """Each node: role, address, state, and each coordinator's epoch."""
    from sleuth.cluster.control import Cluster, ClusterError

    try:
        st = Cluster(name).status()
    except ClusterError as e:
        _fail(e)
    if as_json:
        click.echo(json.dumps(st))
        return
    click.echo(f"cluster {name!r} ({st['runtime']})" + (f", faults: {', '.join(st['faults'])}" if st["faults"] else ""))
    for n in st["nodes"]:
        epoch = f"  epoch {n['epoch']}" if n["role"] == "coordinator" else ""
        error = f"  ({n['error']})" if n.get("error") else ""
        click.echo(f"  {n['name']:<10} {n['role']:<12} {n['host']}:{n['port']:<6} {n['state']}{epoch}{error}")


@cluster.command(name="list")
@click.option("--json", "as_json", is_flag=True,
              help='One JSON object: {"clusters": [{"name", "runtime", "nodes", "state", "faults"}]}.')
def list_(as_json) -> None:
    """The clusters this machine runs (those recorded under $SLEUTH_HOME): name, runtime,
    number of nodes and state (up, degraded, down, failed)."""
    from sleuth.cluster.control import clusters

    found = clusters()
    if as_json:
        click.echo(json.dumps({"clusters": found}))
        return
    if not found:
        click.echo("no clusters (start one with `sleuth cluster up`)", err=True)
        return
    click.echo(f"{'NAME':<16} {'RUNTIME':<8} {'NODES':>5}  STATE")
    for c in found:
        faults = f"  faults: {', '.join(c['faults'])}" if c["faults"] else ""
        click.echo(f"{c['name']:<16} {c['runtime']:<8} {c['nodes']:>5}  {c['state']}{faults}")


@cluster.command()
@name_option
def down(name) -> None:
    """Stop every node and remove the cluster's containers, network and data.

    A cluster that is not there is already down: a note on stderr, status 0."""
    from sleuth.cluster.control import Cluster, ClusterError

    c = Cluster(name)
    if not c.exists:
        click.echo(f"sleuth: note: no cluster named {name!r}; nothing to stop", err=True)
        return
    try:
        c.down()
    except ClusterError as e:
        _fail(e)
    except Exception as e:
        _fail(e, first_line=True)
    click.echo(f"cluster {name!r} is down")


@cluster.command()
@click.argument("node")
@name_option
def logs(node, name) -> None:
    """Print a node's log."""
    from sleuth.cluster.control import Cluster, ClusterError

    try:
        c = Cluster(name)
        c.node(node)
        click.echo(c.runtime.logs(node), nl=False)
    except ClusterError as e:
        _fail(e)
