"""The source node: ingests tables of an upstream PostgreSQL into the cluster (seeds 002, 003).

    python -m sleuth.cluster.node source --listen H:P --data DIR --oracle H:P --storage H:P,…
                                         --upstream postgresql://… --tables t1,t2

On start it reads its durable bindings back from storage, sets the upstream
up (publication, `pgoutput` slot, and for a new slot the tables' rows in its
exported snapshot, bound first at the slot's consistent point: upstream.py),
and registers each table in the catalog as a read-only source table (its
shards all on one storage node, so one append covers them all). Then, every `TICK`:

1. the committed upstream transactions received since the last tick, less
   those at or below the last durable binding (a restart resends them), are
   written at one new timestamp `ts` from the oracle (`write_ts`), in ONE
   `compare_and_append` together with the binding `(end LSN of the last, ts)`
   (bindings.py): data and binding are durable together or not at all. Every
   tick appends, if only to move the shards' upper past `ts`, so reads at the
   global timestamp do not wait;
2. `apply_write(ts)` raises the global timestamp to `ts`;
3. acknowledgement (seed 002, property 1): the slot's flush position is raised
   to the highest bound LSN whose timestamp the oracle's `read_ts` has reached.

`rtr` (a real-time-recent read, seed 003) asks the upstream for
`pg_current_wal_lsn()`, commits a probe message upstream if the stream has
not passed that LSN yet, waits until a durable binding covers it, and returns
the timestamp the read must run at least at.

An errored source (the stream met a change it cannot ingest, such as an
upstream TRUNCATE: upstream.py) ingests nothing more. It says so in `status`,
where coordinators learn it and refuse reads of its tables, and answers
`rtr` with the error at once (no read can be recent any more).

Fault switches honoured here: `ack-early` (acknowledge each transaction as it
arrives, up to a tick before it is written and the global timestamp passes it) and
`rtr-skip` (answer `rtr` with the current binding, without asking upstream).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
import zlib

from sleuth.cluster import relay, upstream
from sleuth.cluster.bindings import Bindings
from sleuth.cluster.rpc import RpcClient, RpcError, Unavailable, serve

log = logging.getLogger("sleuth.source")
TICK = 0.1
RPC_TIMEOUT = 3.0


def bindings_shard(source: str) -> str:
    return f"{source}.bindings"


def storage_node(source: str, n_storage: int) -> int:
    """Every shard of a source lives on one storage node: one append covers data and binding."""
    return zlib.crc32(source.encode()) % n_storage


class Source:
    def __init__(self, name: str, url: str, tables: list[str], oracle: tuple[str, int],
                 storage: list[tuple[str, int]], faults: set[str], addr: tuple[str, int],
                 bind: str | None = None):
        self.name, self.url, self.tables, self.faults, self.addr = name, url, tables, faults, addr
        self.bind = bind
        self.oracle = RpcClient(*oracle, source=bind)
        self.node = storage_node(name, len(storage))
        self.storage = RpcClient(*storage[self.node], source=bind)
        self.shards = {t: f"{name}.{t}" for t in tables}
        self.bshard = bindings_shard(name)
        self.uppers: dict[str, int] = {}
        self.bindings = Bindings()
        self.queue: asyncio.Queue[upstream.Txn] = asyncio.Queue()
        self.pending: list[upstream.Txn] = []
        self.changed = asyncio.Condition()
        self.read_ts = 0  # the highest global timestamp seen
        self.acked = 0
        self.ticks = 0
        self.pool = concurrent.futures.ThreadPoolExecutor(16, thread_name_prefix="upstream")
        self.repl: upstream.Replication | None = None
        self.started = time.time()

    async def _upstream(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    # -- start-up ------------------------------------------------------------------

    async def start(self) -> None:
        if self.bind:  # partitions by address must be able to cut the source from its upstream
            self.url = await relay.start(self.url, self.bind)
        await self._retry("storage", self.resync)
        schema, initial = await self._retry("the upstream", self._upstream, upstream.setup, self.url,
                                            self.name, self.tables, bool(self.bindings.lsns))
        if initial is not None:  # bound at the slot's consistent point, before anything streamed
            self.pending = [initial]
        for t in self.tables:
            source = {"name": self.name, "node": self.node, "addr": f"{self.addr[0]}:{self.addr[1]}"}
            try:
                await self._retry("the oracle", self.oracle.call, "create_table", epoch=None, name=t,
                                  columns=schema[t]["columns"], not_null=schema[t]["not_null"],
                                  source=source, shard=self.shards[t], timeout=RPC_TIMEOUT)
            except RpcError as e:
                if e.code != "exists":
                    raise
                catalog = await self.oracle.call("catalog", timeout=RPC_TIMEOUT)
                if (catalog[t].get("source") or {}).get("name") != self.name:
                    raise SystemExit(f"table {t} exists in the catalog and is not this source's") from None
        loop = asyncio.get_running_loop()

        def received(txn: upstream.Txn) -> None:  # in the replication thread
            if "ack-early" in self.faults:  # the bug: acknowledged on arrival, before it is written
                self.repl.ack = max(self.repl.ack, txn.end_lsn)
            loop.call_soon_threadsafe(self.queue.put_nowait, txn)

        start = max([self.bindings.frontier[0], *(t.end_lsn for t in self.pending)])
        self.repl = upstream.Replication(self.url, self.name, received, received=start)
        self.repl.start()
        asyncio.create_task(self._ingest_loop())
        log.info("source %s: tables %s, resuming after binding %s", self.name, self.tables,
                 self.bindings.frontier)

    @staticmethod
    async def _retry(what: str, fn, *args, **kw):
        for attempt in range(600):
            try:
                return await fn(*args, **kw)
            except RpcError:
                raise
            except Exception as e:
                if attempt % 20 == 0:
                    log.warning("waiting for %s: %s", what, e)
                await asyncio.sleep(0.1)
        raise SystemExit(f"gave up waiting for {what}")

    async def resync(self) -> None:
        """What storage holds: every shard's upper and the durable bindings."""
        shards = [*self.shards.values(), self.bshard]
        self.uppers = await self.storage.call("uppers", shards=shards, timeout=RPC_TIMEOUT)
        upper = self.uppers[self.bshard]
        pairs = []
        if upper > 0:
            rows = await self.storage.call("snapshot", shard=self.bshard, as_of=upper - 1,
                                           timeout=RPC_TIMEOUT)
            pairs = [tuple(row) for row, n in rows for _ in range(n)]
        self.bindings = Bindings(pairs)
        self.pending = [t for t in self.pending if not self.bindings.skip(t.end_lsn)]

    # -- ingestion ---------------------------------------------------------------

    async def _ingest_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK)
            while not self.queue.empty():
                txn = self.queue.get_nowait()
                if not self.bindings.skip(txn.end_lsn):
                    self.pending.append(txn)
            try:
                await self._commit()
            except Exception as e:
                log.warning("ingest: %s; reading storage's state back", e)
                try:
                    await self.resync()
                except Exception as e2:
                    log.warning("resync: %s", e2)
            await self._acknowledge()
            self.ticks += 1

    async def _commit(self) -> None:
        txns, frontier = self.pending, self.bindings.frontier[0]
        ts = await self.oracle.call("write_ts", timeout=RPC_TIMEOUT)
        updates: dict[str, list] = {s: [] for s in self.shards.values()}
        for txn in txns:
            for table, changes in txn.changes.items():
                if table in self.shards:
                    updates[self.shards[table]].extend([row, ts, diff] for row, diff in changes)
        lsn = max([t.end_lsn for t in txns], default=frontier)
        updates[self.bshard] = [[[lsn, ts], ts, 1]] if lsn > frontier else []
        batches = [{"shard": s, "updates": u, "expected_upper": self.uppers.get(s, 0),
                    "new_upper": max(ts + 1, self.uppers.get(s, 0))} for s, u in updates.items()]
        await self.storage.call("append", batches=batches, epoch=None, timeout=RPC_TIMEOUT)
        for b in batches:
            self.uppers[b["shard"]] = b["new_upper"]
        if lsn > frontier:
            self.bindings.add(lsn, ts)  # durable: in storage with its data
        self.pending = []
        await self.oracle.call("apply_write", ts=ts, timeout=RPC_TIMEOUT)
        self.read_ts = max(self.read_ts, ts)
        async with self.changed:
            self.changed.notify_all()

    async def _acknowledge(self) -> None:
        """Seed 002, property 1: acknowledge a bound LSN only once the global timestamp passed it."""
        if "ack-early" in self.faults:
            return
        try:
            self.read_ts = max(self.read_ts, await self.oracle.call("read_ts", timeout=RPC_TIMEOUT))
        except (RpcError, Unavailable):
            return
        lsn = self.bindings.ackable(self.read_ts)
        if lsn > self.repl.ack:
            self.repl.ack = lsn
            self.acked = lsn

    # -- real-time recency -----------------------------------------------------------

    async def rtr(self, wait: float = 10.0) -> int:
        """The timestamp a real-time-recent read must read at least at (seed 003)."""
        if "rtr-skip" in self.faults:  # the bug: whatever is ingested now, no upstream question
            return self.bindings.frontier[1]
        self._errored()
        deadline = time.monotonic() + wait
        try:
            target = await asyncio.wait_for(self._upstream(upstream.current_lsn, self.url), wait)
        except Exception as e:
            raise RpcError("rtr-timeout", f"could not learn the upstream's LSN: {e}") from None
        probed = False
        async with self.changed:
            while (ts := self.bindings.covering(target)) is None or ts > self.read_ts:
                self._errored()
                if not probed and self.repl.received < target:
                    probed = True  # its commit arrives after every transaction before target
                    asyncio.get_running_loop().run_in_executor(self.pool, _quiet_probe, self.url)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RpcError("rtr-timeout", f"bindings reach {self.bindings.frontier[0]}, "
                                                  f"not the upstream's {target}")
                try:
                    await asyncio.wait_for(self.changed.wait(), min(left, 0.5))
                except TimeoutError:
                    pass
        return ts

    def _errored(self) -> None:
        """RpcError `source-errored`, with the reason its `status` gives, once the stream has
        stopped on a change it cannot ingest."""
        if self.repl is not None and self.repl.error is not None:
            raise RpcError("source-errored", self.repl.error)

    async def status(self) -> dict:
        lsn, ts = self.bindings.frontier
        return {"role": "source", "name": self.name, "tables": self.tables, "binding_lsn": lsn,
                "binding_ts": ts, "acked_lsn": self.acked, "ticks": self.ticks,
                "connected": bool(self.repl and self.repl.connected),
                "error": self.repl.error if self.repl else None, "uptime": time.time() - self.started}

    async def bindings_rpc(self) -> list:
        return self.bindings.pairs()


def _quiet_probe(url: str) -> None:
    try:
        upstream.probe(url)
    except Exception as e:
        log.warning("probe: %s", e)


async def run(a) -> None:
    storage = [tuple(s.rsplit(":", 1)) for s in a.storage.split(",") if s]
    storage = [(h, int(p)) for h, p in storage]
    bind = a.listen[0] if a.listen[0] not in ("0.0.0.0", "") else None
    src = Source(a.name or "source", a.upstream, [t for t in a.tables.split(",") if t], a.oracle,
                 storage, set(a.fault), a.listen, bind=bind)
    await src.start()
    server = await serve(*a.listen, {"status": src.status, "rtr": src.rtr, "bindings": src.bindings_rpc})
    async with server:
        await server.serve_forever()
