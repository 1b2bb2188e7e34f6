"""How the cluster's services talk: JSON messages over TCP, one per line.

A request is `{"id": n, "op": name, "args": {...}}`; the answer is
`{"id": n, "ok": value}` or `{"id": n, "err": [code, message, extra]}`.
Requests on one connection may be pipelined; answers carry the request id.

`RpcClient` keeps one connection to a peer, reconnects after a failure, and
binds its source address to the caller's own node address when given one, so
that partitions made with iptables by address cut exactly the intended links
(the local runtime puts every node on its own 127.0.x.y address).

Errors: `RpcError` is an answer from the peer (it did the work and refused);
`Unavailable` means no answer came (refused, reset, timed out), so the caller
cannot know whether the peer acted.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

log = logging.getLogger("sleuth.rpc")
LIMIT = 256 * 1024 * 1024  # largest message (a snapshot of a big table)


class RpcError(Exception):
    """The peer answered with an error."""

    def __init__(self, code: str, message: str, extra: Any = None):
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.extra = code, message, extra


class Unavailable(Exception):
    """No answer: the peer is down, cut off, paused or too slow."""


Handler = Callable[..., Awaitable[Any]]


async def serve(host: str, port: int, handlers: dict[str, Handler]) -> asyncio.base_events.Server:
    """Answer requests with `await handlers[op](**args)`; a handler raises RpcError to refuse."""

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tasks: set[asyncio.Task] = set()

        async def answer(msg: dict) -> None:
            rid = msg.get("id")
            try:
                fn = handlers.get(msg.get("op"))
                if fn is None:
                    raise RpcError("unknown-op", f"no such operation {msg.get('op')!r}")
                reply = {"id": rid, "ok": await fn(**msg.get("args", {}))}
            except RpcError as e:
                reply = {"id": rid, "err": [e.code, e.message, e.extra]}
            except Exception as e:  # a bug in a handler must not kill the connection
                log.exception("handler %s failed", msg.get("op"))
                reply = {"id": rid, "err": ["internal", f"{type(e).__name__}: {e}", None]}
            try:
                writer.write(orjson.dumps(reply) + b"\n")
                await writer.drain()
            except (ConnectionError, RuntimeError):
                pass

        try:
            while line := await reader.readline():
                task = asyncio.create_task(answer(orjson.loads(line)))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            for t in tasks:
                t.cancel()
            writer.close()

    return await asyncio.start_server(connection, host, port, limit=LIMIT, reuse_address=True)


class RpcClient:
    """One pipelined connection to a peer, made on first use and after each failure."""

    def __init__(self, host: str, port: int, source: str | None = None,
                 connect_timeout: float = 2.0):
        self.host, self.port, self.source = host, port, source
        self.connect_timeout = connect_timeout
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future] = {}
        self.writer: asyncio.StreamWriter | None = None
        self.reader_task: asyncio.Task | None = None
        self.connecting = asyncio.Lock()

    def __repr__(self) -> str:
        return f"RpcClient({self.host}:{self.port})"

    async def _connect(self) -> asyncio.StreamWriter:
        async with self.connecting:
            if self.writer is not None and not self.writer.is_closing():
                return self.writer
            local = (self.source, 0) if self.source else None
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port, limit=LIMIT, local_addr=local),
                    self.connect_timeout)
            except (TimeoutError, OSError) as e:
                raise Unavailable(f"{self.host}:{self.port}: {e or 'connect timed out'}") from None
            self.writer = writer
            self.reader_task = asyncio.create_task(self._read(reader, writer))
            return writer

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                msg = orjson.loads(line)
                fut = self.pending.pop(msg["id"], None)
                if fut is None or fut.done():
                    continue
                if "err" in msg:
                    fut.set_exception(RpcError(*msg["err"]))
                else:
                    fut.set_result(msg["ok"])
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            self._drop(writer, "connection closed")

    def _drop(self, writer: asyncio.StreamWriter, why: str) -> None:
        if self.writer is writer:
            self.writer = None
            writer.close()
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(Unavailable(f"{self.host}:{self.port}: {why}"))
            self.pending.clear()

    async def call(self, op: str, timeout: float = 5.0, **args: Any) -> Any:
        writer = await self._connect()
        rid = next(self.ids)
        fut = asyncio.get_running_loop().create_future()
        self.pending[rid] = fut
        try:
            writer.write(orjson.dumps({"id": rid, "op": op, "args": args}) + b"\n")
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            # A peer that does not answer in time (paused, cut off) is treated as gone,
            # so the next call reconnects instead of queueing behind a dead link.
            self._drop(writer, f"{op} timed out after {timeout}s")
            raise Unavailable(f"{self.host}:{self.port}: {op} timed out after {timeout}s") from None
        finally:
            self.pending.pop(rid, None)

    async def close(self) -> None:
        if self.writer is not None:
            self._drop(self.writer, "closed")


def call_sync(host: str, port: int, op: str, timeout: float = 5.0, **args: Any) -> Any:
    """One request from synchronous code (the CLI, tests)."""

    async def once() -> Any:
        client = RpcClient(host, port)
        try:
            return await client.call(op, timeout=timeout, **args)
        finally:
            await client.close()

    return asyncio.run(once())
