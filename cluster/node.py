"""One node of the reference cluster, as a process: `python -m sleuth.cluster.node ROLE …`.

    oracle      --listen HOST:PORT --data DIR
    storage     --listen HOST:PORT --data DIR
    coordinator --listen HOST:PORT --admin HOST:PORT --oracle HOST:PORT --storage HOST:PORT,…
    source      --listen HOST:PORT --oracle HOST:PORT --storage HOST:PORT,… --upstream URL --tables T,…

Every role takes `--fault NAME` (repeatable) and `--name`. The runtimes
(local processes, docker containers, ssh hosts) all start nodes with this
command line, so a node behaves the same wherever it runs.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

from sleuth.cluster.faults import FAULTS

ROLES = ("oracle", "storage", "coordinator", "source")


def addr(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sleuth-node", description=__doc__.splitlines()[0])
    p.add_argument("role", choices=ROLES)
    p.add_argument("--name", default=None)
    p.add_argument("--listen", required=True, type=addr)
    p.add_argument("--data", default=None)
    p.add_argument("--oracle", type=addr)
    p.add_argument("--storage", default="")
    p.add_argument("--admin", type=addr)
    p.add_argument("--upstream", default=None, help="source: the upstream PostgreSQL's URL")
    p.add_argument("--tables", default="", help="source: the upstream tables to ingest")
    p.add_argument("--fault", action="append", default=[], choices=list(FAULTS))
    return p


async def run_coordinator(a: argparse.Namespace) -> None:
    from sleuth.cluster import pgwire
    from sleuth.cluster.coordinator import Coordinator, Session
    from sleuth.cluster.rpc import serve

    storage = [addr(s) for s in a.storage.split(",") if s]
    source = a.listen[0] if a.listen[0] not in ("0.0.0.0", "") else None
    coord = Coordinator(a.name or "coordinator", a.oracle, storage, set(a.fault), source=source)
    for attempt in range(600):  # the oracle may still be starting
        try:
            await coord.start()
            break
        except Exception as e:
            if attempt % 20 == 0:
                logging.warning("waiting for the oracle and storage: %s", e)
            await asyncio.sleep(0.1)
    else:
        raise SystemExit("gave up waiting for the oracle")

    def session(user: str, _database: str, params: dict) -> Session:
        return Session(coord)

    server = await pgwire.serve(*a.listen, session)
    if a.admin:
        async def status() -> dict:
            return await coord.status()
        await serve(*a.admin, {"status": status})
    logging.info("coordinator %s serving pgwire on %s:%s", coord.name, *a.listen)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    a = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s {a.name or a.role} %(levelname)s %(name)s: %(message)s")
    if a.data:
        os.makedirs(a.data, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    faults = set(a.fault)
    if a.role == "oracle":
        from sleuth.cluster.oracle import run
        coro = run(*a.listen, a.data, faults)
    elif a.role == "storage":
        from sleuth.cluster.storage import run
        coro = run(*a.listen, a.data, faults)
    elif a.role == "source":
        from sleuth.cluster.source import run
        coro = run(a)
    else:
        coro = run_coordinator(a)
    try:
        asyncio.run(coro)
    except KeyboardInterrupt:
        pass
    except OSError as e:  # e.g. its address is taken: one line in its log, not a traceback
        logging.error("cannot serve on %s:%s: %s", *a.listen, e.strerror or e)
        sys.exit(1)


if __name__ == "__main__":
    main()
