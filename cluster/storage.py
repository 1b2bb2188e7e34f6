"""A storage node of the reference cluster: shards of timestamped updates (seed 002).

Each table is one shard: a multiset of rows described by updates
`(row, ts, diff)`, with two frontiers:

- `upper`: every update at a timestamp below it is known; nothing below it
  can change any more;
- `since`: the state at timestamps below it is compacted away; snapshots
  are valid only at `as_of` in `[since, upper)`.

`compare_and_append(updates, expected_upper, new_upper)` is the only way to
write: it succeeds only if the shard's upper is exactly `expected_upper`,
every update's ts is in `[expected_upper, new_upper)`, and the writer's epoch
is not fenced. Several shards of one node are appended atomically in one
request (all or nothing).

Durability: every append is written to the node's log and fsynced before it
is acknowledged (unless the `ack-before-durable` fault is on, which answers
first and flushes later). The log is sealed now and then into Parquet files,
one per shard and sealed range (`shards/<shard>/<lo>-<hi>.parquet`, columns
`row` (JSON text), `ts`, `diff`), so a Spark job can read a table's whole
history back; `state.json` records the frontiers, the fencing epoch and the
sealed files. Recovery loads the Parquet files, then replays the log.

`drop(shard)` (DROP TABLE) is logged like an append, then checkpointed, then
the shard's files are deleted: its rows never come back, after any restart.
A dropped shard refuses reads and non-empty appends ("dropped"), so a
coordinator with an old catalog cannot read or write the old rows either.
The catalog never hands a dropped shard's name to a new table (oracle.py).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import os
import shutil
import time

import orjson

from sleuth.cluster.rpc import RpcError, serve

log = logging.getLogger("sleuth.storage")
SEAL_EVERY = 5_000  # updates in the log before it is sealed into Parquet


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _key(row: list) -> tuple:
    return tuple(row)


class Shard:
    """One table's updates in memory: a consolidated base at `since` plus later updates."""

    def __init__(self, name: str):
        self.name = name
        self.upper = 0
        self.since = 0
        self.base: dict[tuple, int] = {}
        self.ts: list[int] = []  # timestamps of `updates`, non-decreasing
        self.updates: list[tuple[int, tuple, int]] = []  # (ts, row, diff) with ts >= since
        self.unsealed: list[tuple[int, tuple, int]] = []
        self.sealed: list[str] = []

    def apply(self, updates: list, new_upper: int) -> None:
        for row, ts, diff in updates:
            u = (ts, _key(row), diff)
            if ts < self.since:  # only the lenient fault can write below a compacted since
                self._fold(u)
            else:
                i = bisect.bisect_right(self.ts, ts)
                self.ts.insert(i, ts)
                self.updates.insert(i, u)
            self.unsealed.append(u)
        self.upper = max(self.upper, new_upper)

    def _fold(self, u: tuple) -> None:
        ts, row, diff = u
        n = self.base.get(row, 0) + diff
        if n:
            self.base[row] = n
        else:
            self.base.pop(row, None)

    def snapshot(self, as_of: int) -> list[list]:
        state = dict(self.base)
        for ts, row, diff in self.updates[:bisect.bisect_right(self.ts, as_of)]:
            n = state.get(row, 0) + diff
            if n:
                state[row] = n
            else:
                state.pop(row, None)
        return [[list(row), n] for row, n in state.items()]

    def downgrade_since(self, since: int) -> None:
        since = min(since, self.upper)
        if since <= self.since:
            return
        cut = bisect.bisect_left(self.ts, since)  # updates below since are folded into base
        for u in self.updates[:cut]:
            self._fold(u)
        del self.updates[:cut], self.ts[:cut]
        self.since = since


class Store:
    """A node's shards, durable in `data_dir`."""

    def __init__(self, data_dir: str, ack_before_durable: bool = False):
        self.dir = data_dir
        os.makedirs(os.path.join(data_dir, "shards"), exist_ok=True)
        self.shards: dict[str, Shard] = {}
        self.dropped: set[str] = set()
        self.epoch = 0
        self.ack_before_durable = ack_before_durable
        self.buffer: list[bytes] = []  # records not yet in the log (ack-before-durable only)
        self._recover()
        self.wal = open(os.path.join(data_dir, "wal.jsonl"), "ab")

    # -- durability -------------------------------------------------------

    def _recover(self) -> None:
        state_path = os.path.join(self.dir, "state.json")
        if os.path.exists(state_path):
            with open(state_path, "rb") as f:
                state = orjson.loads(f.read())
            self.epoch = state["epoch"]
            self.dropped = set(state.get("dropped", ()))
            for name, s in state["shards"].items():
                shard = self.shard(name)
                for path in s["sealed"]:
                    self._load_parquet(shard, path)
                shard.unsealed.clear()
                shard.sealed = list(s["sealed"])
                shard.upper, shard.since = s["upper"], 0
                shard.downgrade_since(s["since"])
        wal = os.path.join(self.dir, "wal.jsonl")
        if os.path.exists(wal):
            with open(wal, "rb") as f:
                for line in f:
                    try:
                        rec = orjson.loads(line)
                    except orjson.JSONDecodeError:
                        break  # a torn last line: it was never acknowledged
                    self._replay(rec)

    def _load_parquet(self, shard: Shard, rel: str) -> None:
        import pyarrow.parquet as pq

        t = pq.read_table(os.path.join(self.dir, rel))
        rows = [orjson.loads(r) for r in t.column("row").to_pylist()]
        shard.apply(list(zip(rows, t.column("ts").to_pylist(), t.column("diff").to_pylist())), 0)

    def _replay(self, rec: dict) -> None:
        if "drop" in rec:
            self.shards.pop(rec["drop"], None)
            self.dropped.add(rec["drop"])
            return
        if "fence" in rec:
            self.epoch = max(self.epoch, rec["fence"])
            return
        if rec.get("epoch") is not None:
            self.epoch = max(self.epoch, rec["epoch"])
        for b in rec["batches"]:
            if b["shard"] not in self.dropped:  # appends made before its drop: gone with it
                self.shard(b["shard"]).apply(b["updates"], b["new_upper"])

    def _log(self, rec: dict) -> None:
        line = orjson.dumps(rec) + b"\n"
        if self.ack_before_durable:
            self.buffer.append(line)
            return
        self.wal.write(line)
        self.wal.flush()
        os.fsync(self.wal.fileno())

    def flush_buffer(self) -> None:
        """ack-before-durable: write what was acknowledged earlier (lost if killed before)."""
        if self.buffer:
            self.wal.write(b"".join(self.buffer))
            self.buffer.clear()
            self.wal.flush()
            os.fsync(self.wal.fileno())

    def seal(self) -> int:
        """Write each shard's unsealed updates as a Parquet file, checkpoint, empty the log."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.flush_buffer()
        n = 0
        for shard in self.shards.values():
            if not shard.unsealed:
                continue
            lo, hi = shard.unsealed[0][0], shard.unsealed[-1][0]
            rel = os.path.join("shards", shard.name, f"{lo:020d}-{hi:020d}-{len(shard.sealed)}.parquet")
            os.makedirs(os.path.join(self.dir, "shards", shard.name), exist_ok=True)
            table = pa.table({
                "row": [orjson.dumps(list(r)).decode() for _, r, _ in shard.unsealed],
                "ts": pa.array([t for t, _, _ in shard.unsealed], pa.int64()),
                "diff": pa.array([d for _, _, d in shard.unsealed], pa.int64()),
            })
            path = os.path.join(self.dir, rel)
            pq.write_table(table, path)
            with open(path, "rb+") as f:
                os.fsync(f.fileno())
            _fsync_dir(os.path.dirname(path))
            shard.sealed.append(rel)
            n += len(shard.unsealed)
            shard.unsealed.clear()
        self._checkpoint()
        self.wal.close()
        self.wal = open(os.path.join(self.dir, "wal.jsonl"), "wb")  # the checkpoint holds it all
        os.fsync(self.wal.fileno())
        return n

    def _checkpoint(self) -> None:
        state = {"epoch": self.epoch, "dropped": sorted(self.dropped), "shards": {
            s.name: {"upper": s.upper, "since": s.since, "sealed": s.sealed}
            for s in self.shards.values()}}
        tmp = os.path.join(self.dir, "state.json.tmp")
        with open(tmp, "wb") as f:
            f.write(orjson.dumps(state))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.dir, "state.json"))
        _fsync_dir(self.dir)

    # -- operations ---------------------------------------------------------

    def shard(self, name: str) -> Shard:
        if name in self.dropped:
            raise RpcError("dropped", f"shard {name} was dropped (DROP TABLE)")
        s = self.shards.get(name)
        if s is None:
            s = self.shards[name] = Shard(name)
        return s

    def drop(self, name: str) -> bool:
        """DROP TABLE: the shard and its rows are gone for good (see the module docstring)."""
        if name in self.dropped:
            return False
        self.flush_buffer()
        self._log({"drop": name})
        self.shards.pop(name, None)
        self.dropped.add(name)
        self._checkpoint()  # no longer lists the shard's Parquet files: now they may go
        shutil.rmtree(os.path.join(self.dir, "shards", name), ignore_errors=True)
        return True

    def fence(self, epoch: int) -> int:
        if epoch > self.epoch:
            self.epoch = epoch
            self._log({"fence": epoch})
        return self.epoch

    def compare_and_append(self, batches: list[dict], epoch: int | None,
                           lenient: bool = False) -> dict[str, int]:
        """Append every batch or none. A batch: {shard, updates, expected_upper, new_upper}.

        `epoch=None` skips the fencing check (only the no-fencing fault sends it);
        `lenient` lets a write land one tick below the upper (write-ts-not-strict fault).
        """
        if epoch is not None and epoch < self.epoch:
            raise RpcError("fenced", f"epoch {epoch} is fenced: storage has seen epoch {self.epoch}",
                           self.epoch)
        # A coordinator with an old catalog still sends empty appends to a dropped shard: skip
        # those; rows for it are refused (shard() raises "dropped").
        batches = [b for b in batches if b["updates"] or b["shard"] not in self.dropped]
        mismatched = {}
        for b in batches:
            shard = self.shard(b["shard"])
            lo = b["expected_upper"] - (1 if lenient else 0)
            if shard.upper != b["expected_upper"]:
                mismatched[b["shard"]] = shard.upper
            elif not (b["new_upper"] >= b["expected_upper"] + (0 if lenient else 1)
                      and all(lo <= ts < b["new_upper"] for _, ts, _ in b["updates"])):
                raise RpcError("invalid", f"updates must lie in [{lo}, {b['new_upper']}) "
                                          f"and new_upper must pass the upper")
        if mismatched:
            raise RpcError("upper-mismatch", f"uppers moved: {mismatched}", mismatched)
        rec = {"epoch": epoch, "batches": [
            {"shard": b["shard"], "updates": b["updates"], "new_upper": b["new_upper"]}
            for b in batches]}
        self._log(rec)  # durable before anyone is told
        if epoch is not None:
            self.epoch = max(self.epoch, epoch)
        for b in batches:
            self.shard(b["shard"]).apply(b["updates"], b["new_upper"])
        return {b["shard"]: self.shards[b["shard"]].upper for b in batches}

    def unsealed_count(self) -> int:
        return sum(len(s.unsealed) for s in self.shards.values())


async def run(host: str, port: int, data_dir: str, faults: set[str]) -> None:
    """The storage node's service loop."""
    store = Store(data_dir, ack_before_durable="ack-before-durable" in faults)
    changed = asyncio.Condition()
    lock = asyncio.Lock()  # one append (and its fsync) at a time, in order
    started = time.time()

    async def append(batches: list, epoch: int | None, lenient: bool = False) -> dict:
        async with lock:
            uppers = await asyncio.to_thread(store.compare_and_append, batches, epoch, lenient)
        async with changed:
            changed.notify_all()
        return uppers

    async def snapshot(shard: str, as_of: int, wait: float = 5.0) -> list:
        s = store.shard(shard)
        if as_of < s.since:
            raise RpcError("since", f"{shard}: as_of {as_of} is below since {s.since}", s.since)
        deadline = time.monotonic() + wait
        async with changed:
            while s.upper <= as_of:
                if shard in store.dropped:
                    store.shard(shard)  # raises "dropped"
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RpcError("timeout", f"{shard}: upper {s.upper} did not pass {as_of} "
                                              f"within {wait}s", s.upper)
                try:
                    await asyncio.wait_for(changed.wait(), left)
                except TimeoutError:
                    pass
        return s.snapshot(as_of)

    async def uppers(shards: list) -> dict:
        return {name: store.shard(name).upper for name in shards if name not in store.dropped}

    async def downgrade_since(sinces: dict) -> dict:
        live = {name: since for name, since in sinces.items() if name not in store.dropped}
        for name, since in live.items():
            store.shard(name).downgrade_since(since)
        return {name: store.shard(name).since for name in live}

    async def drop(shard: str) -> bool:
        async with lock:
            dropped = await asyncio.to_thread(store.drop, shard)
        async with changed:
            changed.notify_all()  # a snapshot waiting on it fails now
        return dropped

    async def fence(epoch: int) -> int:
        async with lock:
            return await asyncio.to_thread(store.fence, epoch)

    async def status() -> dict:
        return {"role": "storage", "epoch": store.epoch, "uptime": time.time() - started,
                "shards": {n: {"upper": s.upper, "since": s.since, "sealed": len(s.sealed)}
                           for n, s in store.shards.items()}}

    async def seal() -> int:
        async with lock:
            return await asyncio.to_thread(store.seal)

    server = await serve(host, port, {"append": append, "snapshot": snapshot, "uppers": uppers,
                                      "downgrade_since": downgrade_since, "fence": fence, "drop": drop,
                                      "status": status, "seal": seal})
    log.info("storage listening on %s:%s, data in %s, faults %s", host, port, data_dir, sorted(faults))
    async with server:
        while True:
            await asyncio.sleep(1.0)
            async with lock:
                if store.ack_before_durable:
                    await asyncio.to_thread(store.flush_buffer)
                if store.unsealed_count() >= SEAL_EVERY:
                    await asyncio.to_thread(store.seal)
