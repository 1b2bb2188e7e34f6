"""The coordinator: a PostgreSQL-wire front end over the oracle and the storage nodes.

Seeds 002 and 001, as this coordinator implements them:

- **Leadership.** On start it bumps the catalog epoch at the oracle and tells
  every storage node, fencing every older coordinator. Every write round and
  every strict-serializable read names the epoch; a fenced coordinator answers
  25006.
- **Group commit.** Writes queue up; one round takes them all, gets one
  `write_ts` from the oracle (which also confirms leadership), appends to
  every shard with `compare_and_append` (tables that were not written get an
  empty append, so every upper passes the new timestamp), waits until the
  storage nodes have fsynced, calls `apply_write`, and only then answers.
- **Reads.** Strict serializable reads run at the oracle's `read_ts`;
  serializable reads at the newest timestamp every read shard has sealed
  (no oracle call, possibly stale); strong session serializable reads at
  least at the session's own latest timestamp. A read holds a capability on
  its timestamp; `since` is downgraded only below every held timestamp.
- **Read-then-write** (UPDATE, DELETE, INSERT … SELECT) by optimistic
  concurrency: read at `as_of` (the latest sealed state), compute the diffs,
  and submit a write that may commit only if no shard it read has moved past
  `as_of + 1`; on conflict, read again. At most 4 run at once; a bounded
  number of attempts, then 40001.
- **Transactions** are read-only or write-only, as in Materialize.
- **Source tables** (cluster/source.py) are read-only here: a source node
  writes them. With `SET real_time_recency = true` a read of one first asks
  its source for a timestamp covering the upstream's current LSN (seed 003)
  and reads at least there. A source errored by a change it cannot ingest
  (an upstream TRUNCATE) makes its tables inaccessible, as in Materialize:
  every read of one fails with its error (XX000), a real-time-recent one at
  once, others once the coordinator has seen the source's status (each second).

The fault switches this process honours: `stale-read`, `no-fencing`,
`rtw-no-conflict`, `write-ts-not-strict` (the oracle and storage nodes
honour the others).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from sleuth.cluster import sql
from sleuth.cluster.pgwire import Result, SQLError
from sleuth.cluster.rpc import RpcClient, RpcError, Unavailable

log = logging.getLogger("sleuth.coordinator")

OCC_PERMITS = 4
OCC_ATTEMPTS = 200
STALE_MS = 2_000  # how far back the stale-read fault reads
SINCE_LAG_MS = 30_000  # since trails the oracle's read_ts by this much, at least
RPC_TIMEOUT = 3.0
ORACLE_BACKOFF = 0.5  # after the oracle failed a round, writes are refused this long
_RTR_TIMEOUT = ("timed out before ingesting the source's visible frontier when real-time-recency "
                "query issued")  # Materialize's words; its code for them is 57014 (query_canceled)


class Conflict(Exception):
    """A read-then-write lost its race: read again."""


@dataclass
class Write:
    """One queued write: updates per table, and for a read-then-write the state it read."""
    updates: dict[str, list]  # table -> [[row, diff]]
    as_of: int | None = None  # read-then-write: the timestamp its diffs were computed at
    read_seq: int = 0  # read-then-write: the coordinator's write sequence before it read
    reads: tuple[str, ...] = ()  # tables the read-then-write read
    keyed: dict[str, set] = field(default_factory=dict)  # rtw-no-conflict: keys it overwrites
    done: asyncio.Future = None  # -> commit timestamp, or an exception
    tries: int = 0


class Coordinator:
    def __init__(self, name: str, oracle: tuple[str, int], storage: list[tuple[str, int]],
                 faults: set[str], source: str | None = None):
        self.name, self.faults = name, faults
        self.oracle = RpcClient(*oracle, source=source)
        self.storage = [RpcClient(h, p, source=source) for h, p in storage]
        self.epoch = 0
        self.catalog: dict[str, list[tuple[str, int]]] = {}
        # table -> the storage shard holding its rows (oracle.py: never reused after a drop).
        # Every other dict here is keyed by table; only storage calls speak shard names.
        self.shards: dict[str, str] = {}
        self.not_null: dict[str, list[str]] = {}  # table -> its NOT NULL columns
        self.sources: dict[str, dict] = {}  # source table -> {name, node, addr} (read-only here)
        self.source_rpc: dict[str, RpcClient] = {}
        self.source_errors: dict[str, str] = {}  # source address -> why it is errored, for good
        self.bind = source
        self.uppers: dict[str, int] = {}
        # table -> the latest timestamp a write to it may have landed at. A read-then-write
        # that read at as_of may commit only if no table it touched was written after as_of
        # (empty appends that only move the upper do not count).
        self.last_write: dict[str, int] = {}
        # The same by commit order: a round that wrote a table gets a new sequence number.
        # (Timestamps alone are not enough once the write-ts-not-strict bug reuses them.)
        self.seq = 0
        self.last_write_seq: dict[str, int] = {}
        self.queue: list[Write] = []
        self.wake = asyncio.Event()
        self.occ = asyncio.Semaphore(OCC_PERMITS)
        self.holds: collections.Counter[int] = collections.Counter()
        self.local_read_ts = 0  # the largest timestamp this coordinator applied or was told
        self.last_round = 0.0
        self.backoff_until = 0.0
        self.rounds = 0
        self.round_done = asyncio.Condition()
        self.finishing: set[asyncio.Task] = set()
        self.started = time.time()

    # -- start-up -----------------------------------------------------------------

    async def start(self) -> None:
        self.epoch = await self.oracle.call("bump_epoch")
        for node in self.storage:  # fence older coordinators at the storage layer too
            try:
                await node.call("fence", epoch=self.epoch, timeout=RPC_TIMEOUT)
            except Unavailable as e:
                log.warning("could not fence %s: %s", node, e)
        await self.refresh_catalog()
        asyncio.create_task(self._group_commit_loop())
        asyncio.create_task(self._maintenance_loop())
        asyncio.create_task(self._source_watch_loop())
        log.info("coordinator %s leads at epoch %d", self.name, self.epoch)

    def node_of(self, table: str) -> int:
        if table in self.sources:  # a source keeps all its shards on one node
            return self.sources[table]["node"]
        return self.node_of_shard(self.shard(table))

    def node_of_shard(self, shard: str) -> int:
        return zlib.crc32(shard.encode()) % len(self.storage)

    def shard(self, table: str) -> str:
        return self.shards.get(table, table)

    def tables_of(self, by_shard: dict) -> dict:
        """A storage answer keyed by shard, keyed by table (shards of no current table dropped)."""
        table_of = {s: t for t, s in self.shards.items()}
        return {table_of[s]: v for s, v in by_shard.items() if s in table_of}

    def sent_epoch(self) -> int | None:
        return None if "no-fencing" in self.faults else self.epoch

    async def refresh_catalog(self) -> None:
        self.set_catalog(await self.oracle.call("catalog", timeout=RPC_TIMEOUT))
        await self.refresh_uppers(list(self.catalog))

    def set_catalog(self, catalog: dict) -> None:
        """The oracle's catalog; a table dropped or re-created since forgets what we knew of it."""
        shards = {n: t["shard"] for n, t in catalog.items()}
        for name in set(self.shards) | set(shards):
            if self.shards.get(name) != shards.get(name):
                for known in (self.uppers, self.last_write, self.last_write_seq):
                    known.pop(name, None)
        self.shards = shards
        self.not_null = {n: t.get("not_null", []) for n, t in catalog.items()}
        self.sources = {n: t["source"] for n, t in catalog.items() if t.get("source")}
        self.catalog = {n: [tuple(c) for c in t["columns"]] for n, t in catalog.items()}

    async def refresh_uppers(self, tables: list[str]) -> None:
        by_node: dict[int, list[str]] = collections.defaultdict(list)
        for t in tables:
            by_node[self.node_of(t)].append(t)
        for i, names in by_node.items():
            try:
                uppers = await self.storage[i].call("uppers", shards=[self.shard(t) for t in names],
                                                    timeout=RPC_TIMEOUT)
                self._learned(self.tables_of(uppers))
            except (Unavailable, RpcError):
                pass

    def _learned(self, uppers: dict[str, int]) -> None:
        """Uppers seen from storage, not from our own appends: assume anything was written."""
        for t, u in uppers.items():
            if self.uppers.get(t) != u:
                self.last_write[t] = max(self.last_write.get(t, -1), u - 1)
                self.seq += 1
                self.last_write_seq[t] = self.seq
            self.uppers[t] = u

    async def table(self, name: str) -> list[tuple[str, int]]:
        if name not in self.catalog:
            await self.refresh_catalog()
            if name not in self.catalog:
                raise SQLError("42P01", f'relation "{name}" does not exist')
        return self.catalog[name]

    # -- group commit -------------------------------------------------------------

    async def submit(self, w: Write) -> int:
        if time.monotonic() < self.backoff_until:  # a circuit breaker: the oracle just failed
            raise SQLError("58000", "timestamp oracle unavailable (backing off); nothing was written")
        w.done = asyncio.get_running_loop().create_future()
        self.queue.append(w)
        self.wake.set()
        return await w.done

    async def _group_commit_loop(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            batch, self.queue = self.queue, []
            if not batch:
                continue
            try:
                await self._round(batch)
            except Exception as e:  # never let the loop die; fail the round's writes
                log.exception("group commit round failed")
                for w in batch:
                    if not w.done.done():
                        w.done.set_exception(SQLError("08007", f"write outcome unknown: {e}"))
            async with self.round_done:
                self.round_done.notify_all()

    async def moved_past(self, tables: set[str], as_of: int, seq: int, timeout: float = 1.0) -> None:
        """Wait until a write to one of these tables after as_of is visible (it beat our read)."""
        async with self.round_done:
            try:
                await asyncio.wait_for(self.round_done.wait_for(
                    lambda: any(self.last_write.get(t, -1) > as_of or self.last_write_seq.get(t, 0) > seq
                                for t in tables)), timeout)
            except TimeoutError:
                pass

    async def _round(self, batch: list[Write]) -> None:
        self.rounds += 1
        self.last_round = time.monotonic()
        try:
            ts = await self.oracle.call("write_ts", epoch=self.sent_epoch(), timeout=RPC_TIMEOUT)
        except RpcError as e:
            if e.code == "fenced":
                return _fail_all(batch, SQLError("25006", f"coordinator {self.name} is fenced: {e.message}"))
            self.backoff_until = time.monotonic() + ORACLE_BACKOFF
            return _fail_all(batch, SQLError("58000", f"timestamp oracle refused: {e.message}"))
        except Unavailable as e:  # nothing was written yet: a definite failure
            self.backoff_until = time.monotonic() + ORACLE_BACKOFF
            return _fail_all(batch, SQLError("58000", f"timestamp oracle unavailable: {e}"))

        # Admit at most one read-then-write per table, and only if nothing moved since its read.
        admitted, claimed = [], set()
        for w in batch:
            if w.as_of is not None:
                touched = set(w.updates) | set(w.reads)
                fresh = all(self.last_write.get(t, -1) <= w.as_of < self.uppers.get(t, 0)
                            and self.last_write_seq.get(t, 0) <= w.read_seq for t in touched)
                if "rtw-no-conflict" in self.faults:
                    fresh = True  # the bug: no conflict detection
                if not fresh or touched & claimed:
                    w.done.set_exception(Conflict())
                    continue
                claimed |= touched
            admitted.append(w)
        if "rtw-no-conflict" in self.faults:
            await self._overwrite_keys(admitted)

        lenient = "write-ts-not-strict" in self.faults
        by_node: dict[int, list[dict]] = collections.defaultdict(list)
        for table in self.catalog:
            if table in self.sources:
                continue  # its source node writes it
            updates = [[list(row), ts, diff] for w in admitted for row, diff in w.updates.get(table, ())]
            expected = self.uppers.get(table, 0)
            if ts < expected and not (lenient and ts == expected - 1):
                # A stale cache (another coordinator wrote): the append will tell us the real upper.
                pass
            by_node[self.node_of(table)].append({"shard": self.shard(table), "table": table,
                                                 "updates": updates,
                                                 "expected_upper": expected,
                                                 "new_upper": max(ts + 1, expected)})
        nodes = list(by_node)
        outcomes = await asyncio.gather(*[
            self.storage[i].call("append", batches=[{k: v for k, v in b.items() if k != "table"}
                                                    for b in by_node[i]], epoch=self.sent_epoch(),
                                 lenient=lenient, timeout=RPC_TIMEOUT) for i in nodes],
            return_exceptions=True)
        state: dict[int, str] = {}
        for i, out in zip(nodes, outcomes):
            if isinstance(out, dict):
                state[i] = "ok"
                self.uppers.update(self.tables_of(out))
                for b in by_node[i]:
                    if b["updates"]:
                        self.last_write[b["table"]] = max(self.last_write.get(b["table"], -1), ts)
                        self.last_write_seq[b["table"]] = self.seq + 1
            elif isinstance(out, RpcError) and out.code == "upper-mismatch":
                state[i] = "mismatch"
                self._learned(self.tables_of(out.extra or {}))
            elif isinstance(out, RpcError) and out.code == "dropped":
                state[i] = "refused"  # another coordinator dropped a table: our catalog is old
                asyncio.create_task(self._quiet(self.refresh_catalog()))
            elif isinstance(out, RpcError) and out.code == "fenced":
                state[i] = "fenced"
            elif isinstance(out, RpcError):
                state[i] = "refused"
            else:
                state[i] = "unknown"  # no answer: the append may or may not have happened
                for b in by_node[i]:
                    self.uppers.pop(b["table"], None)
                    if b["updates"]:
                        self.last_write[b["table"]] = max(self.last_write.get(b["table"], -1), ts)
                        self.last_write_seq[b["table"]] = self.seq + 1
        self.seq += 1
        if any(s == "unknown" for s in state.values()):
            asyncio.create_task(self.refresh_uppers(list(self.catalog)))

        # Pipelining: the next round may start (its write_ts is above ours) while this one
        # waits for apply_write; this round's writers are answered only after it.
        task = asyncio.create_task(self._finish(ts, state, admitted))
        self.finishing.add(task)
        task.add_done_callback(self.finishing.discard)

    async def _finish(self, ts: int, state: dict[int, str], admitted: list[Write]) -> None:
        applied = False
        if any(s in ("ok", "unknown") for s in state.values()):
            try:
                await self.oracle.call("apply_write", ts=ts, timeout=RPC_TIMEOUT)
                applied = True
                self.local_read_ts = max(self.local_read_ts, ts)
            except (RpcError, Unavailable) as e:
                log.warning("apply_write(%d) failed: %s", ts, e)
        retry = []
        for w in admitted:
            outs = {state.get(self.node_of(t), "ok") for t in w.updates} or {"ok"}
            if outs == {"ok"}:
                if applied:
                    w.done.set_result(ts)
                else:
                    w.done.set_exception(SQLError("08007", "write is durable but the oracle did not "
                                                           "confirm its timestamp: outcome unknown"))
            elif "ok" in outs or "unknown" in outs:
                w.done.set_exception(SQLError("08007", "a storage node did not answer: the write's "
                                                       "outcome is unknown"))
            elif "fenced" in outs:
                w.done.set_exception(SQLError("25006", f"coordinator {self.name} is fenced by a newer "
                                                       f"epoch"))
            elif w.as_of is not None:
                w.done.set_exception(Conflict())
            elif "refused" in outs or w.tries >= 20:
                w.done.set_exception(SQLError("58000", "storage refused the write"))
            else:  # upper mismatch for a blind write: nothing landed, try the next round
                w.tries += 1
                retry.append(w)
        if retry:
            self.queue.extend(retry)
            self.wake.set()

    async def _overwrite_keys(self, admitted: list[Write]) -> None:
        """rtw-no-conflict: a stale read-then-write overwrites whatever the keys hold now.

        The correct coordinator never gets here. With the fault, the diffs a
        read-then-write computed against an old state would retract rows that
        are gone; instead it retracts the rows its keys (first column) hold now
        and puts its own new rows in: the classic lost update.
        """
        for w in admitted:
            for table, keys in w.keyed.items():
                if not keys:
                    continue
                now = self.uppers.get(table, 1) - 1
                current = await self.snapshot(table, now)
                adds = [(row, d) for row, d in w.updates[table] if d > 0]
                w.updates[table] = [(row, -1) for row in current if row[0] in keys] + adds

    # -- reads ----------------------------------------------------------------------

    async def read_timestamp(self, isolation: str, tables: list[str], session_ts: int) -> int:
        if isolation == "strict serializable":
            if "no-fencing" in self.faults and self.local_read_ts:
                # The bug: a leader "knows" every write went through it, so it reads at its
                # own latest timestamp without asking the oracle (and without confirming it
                # still leads). A deposed leader then misses the new leader's writes.
                return self.local_read_ts
            try:
                ts = await self.oracle.call("read_ts", epoch=self.sent_epoch(), timeout=RPC_TIMEOUT)
            except RpcError as e:
                if e.code == "fenced":
                    raise SQLError("25006", f"coordinator {self.name} is fenced: {e.message}") from None
                raise SQLError("58000", f"timestamp oracle refused: {e.message}") from None
            except Unavailable as e:
                raise SQLError("58000", f"timestamp oracle unavailable: {e}") from None
            self.local_read_ts = max(self.local_read_ts, ts)
            if "stale-read" in self.faults:
                ts = max(0, ts - STALE_MS)  # the bug: an old timestamp
            return ts
        known = [self.uppers[t] - 1 for t in tables if t in self.uppers]
        ts = min(known) if known else 0
        if isolation == "strong session serializable":
            ts = max(ts, session_ts)
        return max(ts, 0)

    async def snapshot(self, table: str, as_of: int, timeout: float = 5.0) -> list[tuple]:
        node = self.storage[self.node_of(table)]
        try:
            pairs = await node.call("snapshot", shard=self.shard(table), as_of=as_of, wait=timeout,
                                    timeout=timeout + RPC_TIMEOUT)
        except RpcError as e:
            if e.code == "dropped":  # another coordinator dropped it since our catalog was read
                await self._quiet(self.refresh_catalog())
                raise SQLError("42P01", f'relation "{table}" does not exist') from None
            if e.code == "since":
                raise SQLError("40001", f"timestamp {as_of} is no longer readable: {e.message}") from None
            if e.code == "timeout":
                raise SQLError("57014", f"storage did not reach timestamp {as_of}: {e.message}") from None
            raise SQLError("58000", f"storage refused the read: {e.message}") from None
        except Unavailable as e:
            raise SQLError("58000", f"storage unavailable: {e}") from None
        rows = []
        for row, n in pairs:
            if n < 0:
                raise SQLError("XX000", f"{table}: row {row} has negative multiplicity {n} at {as_of}")
            rows.extend([tuple(row)] * n)
        return rows

    def _source_rpc(self, addr: str) -> RpcClient:
        rpc = self.source_rpc.get(addr)
        if rpc is None:
            host, _, port = addr.rpartition(":")
            rpc = self.source_rpc[addr] = RpcClient(host, int(port), source=self.bind)
        return rpc

    async def real_time_recent_ts(self, tables: list[str], timeout: float) -> int:
        """Seed 003: a timestamp at which every source these tables come from has ingested all
        its upstream held when this was asked (0 when none is a source table)."""
        ts = 0
        for src, t in {self.sources[t]["addr"]: t for t in tables if t in self.sources}.items():
            try:
                ts = max(ts, await self._source_rpc(src).call("rtr", wait=timeout, timeout=timeout + 1))
            except RpcError as e:
                if e.code == "source-errored":  # it will never catch up: say why, at once
                    raise SQLError("XX000", self._errored(src, self.sources[t]["name"], e.message)) from None
                raise SQLError("57014", _RTR_TIMEOUT) from None
            except Unavailable:
                raise SQLError("57014", _RTR_TIMEOUT) from None
        return ts

    def readable(self, tables: list[str]) -> None:
        """SQLError XX000 when one of `tables` comes from an errored source: as in Materialize,
        such a source is inaccessible until it is created anew."""
        for t in tables:
            error = self.source_errors.get(self.sources[t]["addr"]) if t in self.sources else None
            if error is not None:
                raise SQLError("XX000", error)

    async def _source_watch_loop(self) -> None:
        """Each second, learn which sources are errored (their `status`), for `readable`; in a
        loop of its own, so a source that does not answer delays nothing else."""
        while True:
            await asyncio.sleep(1.0)
            names = {s["addr"]: s["name"] for s in self.sources.values()}
            for src, name in names.items():
                if src in self.source_errors:
                    continue
                try:
                    error = (await self._source_rpc(src).call("status", timeout=RPC_TIMEOUT)).get("error")
                except (RpcError, Unavailable):
                    continue
                if error:
                    self._errored(src, name, error)

    def _errored(self, addr: str, name: str, reason: str) -> str:
        """Record that the source at `addr` is errored for `reason`; returns what reads of its
        tables answer from now on."""
        self.source_errors[addr] = f"source {name} is errored: {reason}"
        return self.source_errors[addr]

    def read_only(self, table: str) -> None:
        if table in self.sources:
            raise SQLError("42809", f'cannot write to "{table}": it is a table of source '
                                    f'{self.sources[table]["name"]} (read-only)')

    # -- maintenance ------------------------------------------------------------------

    async def _maintenance_loop(self) -> None:
        """Keep uppers moving when idle (an empty round) and let since follow the held reads."""
        while True:
            await asyncio.sleep(1.0)
            try:
                if time.monotonic() - self.last_round > 1.0 and self.catalog:
                    w = Write({})
                    asyncio.create_task(self._quiet(self.submit(w)))
                if self.sources:  # their uppers move without us: serializable reads follow them
                    await self.refresh_uppers(list(self.sources))
                read_ts = await self.oracle.call("read_ts", timeout=RPC_TIMEOUT)
                floor = min([read_ts, *self.holds]) - SINCE_LAG_MS
                if floor > 0:
                    by_node: dict[int, dict] = collections.defaultdict(dict)
                    for t in self.catalog:
                        by_node[self.node_of(t)][self.shard(t)] = floor
                    for i, sinces in by_node.items():
                        await self.storage[i].call("downgrade_since", sinces=sinces, timeout=RPC_TIMEOUT)
            except (RpcError, Unavailable) as e:
                log.debug("maintenance: %s", e)
            except Exception:
                log.exception("maintenance failed")

    @staticmethod
    async def _quiet(aw: Any) -> None:
        try:
            await aw
        except Exception:
            pass

    async def status(self) -> dict:
        return {"role": "coordinator", "name": self.name, "epoch": self.epoch,
                "uptime": time.time() - self.started, "rounds": self.rounds,
                "tables": sorted(self.catalog), "faults": sorted(self.faults)}


def _fail_all(batch: list[Write], err: Exception) -> None:
    for w in batch:
        if not w.done.done():
            w.done.set_exception(err)


class Session:
    """One pgwire connection's state: isolation, the open transaction, the last timestamp."""

    def __init__(self, coord: Coordinator):
        self.c = coord
        self.isolation = "strict serializable"
        self.txn: dict | None = None  # {"mode": None|"read"|"write", "ts", "writes", "failed"}
        self.last_ts = 0
        self.statement_timeout = 10.0
        self.hold: int | None = None
        self.real_time_recency = False
        self.rtr_timeout = 10.0

    def level(self) -> str:
        """The isolation the next statement runs at: the open transaction's, else the session's."""
        return self.txn["isolation"] if self.txn is not None else self.isolation

    def txn_status(self) -> str:
        if self.txn is None:
            return "I"
        return "E" if self.txn["failed"] else "T"

    async def close(self) -> None:
        self._release()

    def _release(self) -> None:
        if self.hold is not None:
            self.c.holds[self.hold] -= 1
            if self.c.holds[self.hold] <= 0:
                del self.c.holds[self.hold]
            self.hold = None

    async def execute(self, text: str) -> list[Result]:
        results = []
        for stmt in sql.parse(text):
            try:
                results.append(await asyncio.wait_for(self._one(stmt), self.statement_timeout))
            except TimeoutError:
                err = SQLError("57014", "canceling statement due to statement timeout")
                if isinstance(stmt, (sql.Insert, sql.Mutate)) or (
                        isinstance(stmt, sql.Control) and stmt.kind == "commit"):
                    err = SQLError("08007", "statement timeout while committing: outcome unknown")
                self._failed()
                raise err from None
            except SQLError:
                self._failed()
                raise
        return results

    def _failed(self) -> None:
        if self.txn is not None:
            self.txn["failed"] = True

    async def _one(self, stmt: Any) -> Result:
        if self.txn is not None and self.txn["failed"] and not (
                isinstance(stmt, sql.Control) and stmt.kind in ("commit", "rollback")):
            raise SQLError("25P02", "current transaction is aborted, commands ignored until end of "
                                    "transaction block")
        if isinstance(stmt, sql.Control):
            return await self._control(stmt)
        if isinstance(stmt, sql.CreateTable):
            return await self._create(stmt)
        if isinstance(stmt, sql.DropTable):
            return await self._drop(stmt)
        if isinstance(stmt, sql.Select):
            return await self._select(stmt)
        if isinstance(stmt, sql.Insert) and stmt.select is None:
            return await self._insert(stmt)
        return await self._read_then_write(stmt)

    # -- statements ------------------------------------------------------------------

    async def _control(self, stmt: sql.Control) -> Result:
        if stmt.kind == "begin":
            if self.txn is None:
                opts = stmt.value or {}
                self.txn = {"mode": "read" if opts.get("read_only") else None, "ts": None,
                            "writes": collections.defaultdict(list), "failed": False,
                            "isolation": opts.get("isolation") or self.isolation}
            return Result([], [], "BEGIN")
        if stmt.kind in ("commit", "rollback"):
            txn, self.txn = self.txn, None
            self._release()
            if stmt.kind == "commit" and txn is not None and not txn["failed"] and txn["writes"]:
                self.last_ts = await self.c.submit(Write(dict(txn["writes"])))
            return Result([], [], "ROLLBACK" if stmt.kind == "rollback" or (txn and txn["failed"])
                          else "COMMIT")
        if stmt.kind == "set":
            if stmt.name in ("transaction_isolation", "default_transaction_isolation"):
                level = sql.isolation(stmt.value)  # an unknown level is an error, never ignored
                if self.txn is not None:
                    if self.txn["ts"] is not None or self.txn["writes"]:
                        raise SQLError("25001", "SET TRANSACTION ISOLATION LEVEL must be called "
                                                "before any query")
                    self.txn["isolation"] = level
                self.isolation = level
            elif stmt.name == "real_time_recency":
                v = str(stmt.value).lower()
                if v not in ("true", "false", "on", "off", "1", "0"):
                    raise SQLError("22023", 'parameter "real_time_recency" requires a Boolean value')
                self.real_time_recency = v in ("true", "on", "1")
            elif stmt.name == "real_time_recency_timeout":
                v = str(stmt.value).lower().rstrip("ms").strip()
                try:
                    self.rtr_timeout = float(v) / (1 if str(stmt.value).lower().endswith("s")
                                                   and not str(stmt.value).lower().endswith("ms") else 1000)
                except ValueError:
                    raise SQLError("22023", f"invalid value for real_time_recency_timeout: {stmt.value}") from None
            elif stmt.name == "statement_timeout":
                v = str(stmt.value).lower().rstrip("ms").strip() or "0"
                ms = int(float(v) * (1000 if str(stmt.value).lower().endswith("s")
                                     and not str(stmt.value).lower().endswith("ms") else 1))
                self.statement_timeout = ms / 1000 if ms > 0 else 3600.0
            return Result([], [], "SET")
        if stmt.kind == "show":
            level = self.level()
            values = {"transaction_isolation": level, "transaction isolation level": level,
                      "last_timestamp": self.last_ts, "sleuth_last_timestamp": self.last_ts,
                      "epoch": self.c.epoch, "server_version": "15.0 (sleuth)",
                      "statement_timeout": f"{int(self.statement_timeout * 1000)}ms",
                      "coordinator": self.c.name,
                      "real_time_recency": "on" if self.real_time_recency else "off",
                      "real_time_recency_timeout": f"{int(self.rtr_timeout * 1000)}ms"}
            if stmt.name not in values:
                raise SQLError("42704", f'unrecognized configuration parameter "{stmt.name}"')
            v = values[stmt.name]
            return Result([(stmt.name.replace(" ", "_"), sql.oid_of(v))], [(v,)], "SHOW")
        raise SQLError("0A000", f"unsupported statement {stmt.kind}")

    def _no_txn(self, what: str) -> None:
        if self.txn is not None:
            raise SQLError("25001", f"{what} cannot be run inside a transaction block")

    async def _create(self, stmt: sql.CreateTable) -> Result:
        self._no_txn("CREATE TABLE")
        try:
            tables = await self.c.oracle.call("create_table", epoch=self.c.sent_epoch(),
                                              name=stmt.table, columns=stmt.columns,
                                              not_null=stmt.not_null,
                                              timeout=RPC_TIMEOUT)
        except RpcError as e:
            if e.code == "exists":
                if stmt.if_not_exists:
                    await self.c.refresh_catalog()
                    return Result([], [], "CREATE TABLE")
                raise SQLError("42P07", e.message) from None
            if e.code == "fenced":
                raise SQLError("25006", f"coordinator {self.c.name} is fenced: {e.message}") from None
            raise SQLError("58000", e.message) from None
        except Unavailable as e:
            raise SQLError("58000", f"timestamp oracle unavailable: {e}") from None
        self.c.set_catalog(tables)
        await self.c.refresh_uppers([stmt.table])
        self.last_ts = await self.c.submit(Write({stmt.table: []}))  # seal the new shard's upper
        return Result([], [], "CREATE TABLE")

    async def _drop(self, stmt: sql.DropTable) -> Result:
        """The catalog forgets the table first (so no new statement finds it), then its storage
        node drops the shard (its files go; it refuses coordinators with an older catalog).
        A new table of the same name gets a new shard (oracle.py), so the old rows cannot
        come back even when that node is down at the drop: then the old shard only stays on
        its disk, named by no table, and the log says so."""
        self._no_txn("DROP TABLE")
        if stmt.table not in self.c.catalog:  # it may be a source table we have not seen yet
            await self.c._quiet(self.c.refresh_catalog())
        self.c.read_only(stmt.table)
        try:
            out = await self.c.oracle.call("drop_table", epoch=self.c.sent_epoch(), name=stmt.table,
                                           timeout=RPC_TIMEOUT)
        except RpcError as e:
            if e.code == "fenced":
                raise SQLError("25006", f"coordinator {self.c.name} is fenced: {e.message}") from None
            raise SQLError("58000", e.message) from None
        except Unavailable as e:
            raise SQLError("58000", f"timestamp oracle unavailable: {e}") from None
        shard = out["dropped"]
        self.c.set_catalog(out["catalog"])
        if shard is None:
            if stmt.if_exists:
                return Result([], [], "DROP TABLE")
            raise SQLError("42P01", f'table "{stmt.table}" does not exist')
        try:
            await self.c.storage[self.c.node_of_shard(shard)].call("drop", shard=shard, timeout=RPC_TIMEOUT)
        except (RpcError, Unavailable) as e:
            log.warning("DROP TABLE %s: storage did not drop shard %s (%s); the catalog no longer "
                        "names it", stmt.table, shard, e)
        return Result([], [], "DROP TABLE")

    async def _select(self, stmt: sql.Select) -> Result:
        if self.txn is not None:
            if self.txn["mode"] == "write":
                raise SQLError("25000", "transaction in write-only mode")
            self.txn["mode"] = "read"
        snaps, catalog = {}, {}
        for t in stmt.tables:
            catalog[t] = await self.c.table(t)
        if stmt.tables:
            ts = await self._read_ts(stmt.tables)
            for t in stmt.tables:
                snaps[t] = await self.c.snapshot(t, ts, timeout=self.statement_timeout)
            self.last_ts = max(self.last_ts, ts) if self.level() != "strict serializable" else ts
        columns, rows = stmt.run(snaps, catalog)
        return Result(columns, rows, f"SELECT {len(rows)}")

    async def _read_ts(self, tables: list[str]) -> int:
        """The timestamp of a read; inside a transaction, the same for every read."""
        self.c.readable(tables)
        if self.txn is not None and self.txn["ts"] is not None:
            return self.txn["ts"]
        rtr = 0
        if self.real_time_recency:  # first: the oracle's read_ts, asked after, is then past it
            rtr = await self.c.real_time_recent_ts(tables, self.rtr_timeout)
        ts = max(rtr, await self.c.read_timestamp(self.level(), tables, self.last_ts))
        if self.txn is not None:
            self.txn["ts"] = ts
            self.hold = ts
            self.c.holds[ts] += 1
        return ts

    async def _insert(self, stmt: sql.Insert) -> Result:
        columns = await self.c.table(stmt.table)
        self.c.read_only(stmt.table)
        rows = sql.insert_rows(stmt, columns, [])
        sql.check_not_null(stmt.table, columns, self.c.not_null.get(stmt.table, ()), rows)
        if self.txn is not None:
            if self.txn["mode"] == "read":
                raise SQLError("25006", "transaction in read-only mode")
            self.txn["mode"] = "write"
            self.txn["writes"][stmt.table].extend((r, 1) for r in rows)
        else:
            self.last_ts = await self.c.submit(Write({stmt.table: [(r, 1) for r in rows]}))
        return Result([], [], f"INSERT 0 {len(rows)}")

    async def _read_then_write(self, stmt: sql.Insert | sql.Mutate) -> Result:
        kind = "INSERT … SELECT" if isinstance(stmt, sql.Insert) else stmt.kind.upper()
        self._no_txn(kind)
        target = stmt.table
        columns = await self.c.table(target)
        self.c.read_only(target)
        reads = tuple(stmt.select.tables) if isinstance(stmt, sql.Insert) else (target,)
        catalog = {t: await self.c.table(t) for t in reads}
        self.c.readable(list(reads))
        async with self.c.occ:
            for _ in range(OCC_ATTEMPTS):
                touched = set(reads) | {target}
                if any(t not in self.c.uppers for t in touched):
                    await self.c.refresh_uppers(list(touched))
                as_of = min(self.c.uppers.get(t, 1) for t in touched) - 1
                read_seq = self.c.seq
                if as_of < 0:
                    await asyncio.sleep(0.01)
                    continue
                snaps = {t: await self.c.snapshot(t, as_of, timeout=self.statement_timeout)
                         for t in reads}
                if isinstance(stmt, sql.Insert):
                    _, out = stmt.select.run(snaps, catalog)
                    diffs = [(r, 1) for r in sql.insert_rows(stmt, columns, out)]
                else:
                    diffs = sql.mutate_diffs(stmt, columns, snaps[target])
                sql.check_not_null(target, columns, self.c.not_null.get(target, ()),
                                   [row for row, d in diffs if d > 0])
                keyed = {target: {row[0] for row, d in diffs if d < 0}} if isinstance(stmt, sql.Mutate) else {}
                try:
                    self.last_ts = await self.c.submit(Write({target: diffs}, as_of=as_of, read_seq=read_seq,
                                                             reads=reads, keyed=keyed))
                except Conflict:  # read again, once the write that beat us is visible
                    await self.c.moved_past(touched, as_of, read_seq)
                    continue
                n = sum(1 for _, d in diffs if d < 0) if isinstance(stmt, sql.Mutate) else len(diffs)
                tag = {"UPDATE": f"UPDATE {n}", "DELETE": f"DELETE {n}"}.get(kind, f"INSERT 0 {n}")
                return Result([], [], tag)
        raise SQLError("40001", f"{kind} lost its optimistic-concurrency race {OCC_ATTEMPTS} times; "
                                f"try again")
