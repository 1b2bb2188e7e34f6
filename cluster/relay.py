"""A TCP relay bound to a node's own address: how a source node reaches its upstream.

libpq cannot choose the address its connections come from, so a source node's
connections to the upstream PostgreSQL would all come from 127.0.0.1 and an
iptables partition by address (the local runtime's, runtime_local.py) could
not cut the source from its upstream alone. The source node therefore
connects through this relay: it listens on the node's own address and opens
each upstream connection from that address (as cluster/rpc.py does for the
cluster's own links).
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit, urlunsplit


async def _pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    try:
        while data := await r.read(65536):
            w.write(data)
            await w.drain()
    except Exception:
        pass
    finally:
        w.close()


async def start(url: str, bind: str) -> str:
    """Relay to the URL's host and port from `bind`; returns the URL that goes through it."""
    u = urlsplit(url)
    host, port = u.hostname, u.port or 5432

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            ur, uw = await asyncio.wait_for(asyncio.open_connection(host, port, local_addr=(bind, 0)), 3)
        except Exception:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, uw), _pipe(ur, writer))

    server = await asyncio.start_server(handle, bind, 0)
    relay_port = server.sockets[0].getsockname()[1]
    netloc = (u.netloc.rsplit("@", 1)[0] + "@" if "@" in u.netloc else "") + f"{bind}:{relay_port}"
    return urlunsplit(u._replace(netloc=netloc))
