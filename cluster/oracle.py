"""The timestamp oracle and catalog of the reference cluster (seeds 002, 004).

`Timeline` is Materialize's timestamp oracle for one timeline, in memory:

- `read_ts()`: the timestamp reads run at;
- `write_ts(now)`: a timestamp for a write, `max(now, last write_ts + 1)`,
  so strictly above every earlier read and write timestamp;
- `peek_write_ts()`: the last write timestamp, without advancing it;
- `apply_write(t)`: a write at t completed: raise read_ts and write_ts to t.

`read_ts <= write_ts` always holds.

`Oracle` makes timelines durable, Percolator-style (002, "Global Timestamp
Recovery"): it persists an upper bound ahead of every timestamp it hands
out, and never hands out a timestamp at or above the bound without first
persisting a higher one. On restart every timeline resumes at its bound,
above anything handed out before a crash. The `oracle-amnesia` fault
switch forgets the bound on restart, so timestamps go backwards.

The catalog lives beside it: table definitions and the coordinator epoch.
Every coordinator that starts bumps the epoch (`bump_epoch`); every catalog
step names its epoch and fails with `Fenced` once a newer one exists.

Durable state is SQLite with `synchronous=FULL`: a commit returns only after
fsync.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

WINDOW = 1_000  # how far ahead of the timestamps handed out the bound is persisted


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Fenced(Exception):
    """A step named an epoch older than the catalog's (another coordinator took over)."""

    def __init__(self, epoch: int, current: int):
        super().__init__(f"epoch {epoch} is fenced: the catalog is at epoch {current}")
        self.epoch, self.current = epoch, current


class Timeline:
    """Materialize's in-memory timestamp oracle for one timeline."""

    def __init__(self, start: int = 0, strict: bool = True):
        self.read = start
        self.write = start
        self.strict = strict  # False only under the write-ts-not-strict fault

    def read_ts(self) -> int:
        return self.read

    def write_ts(self, now: int) -> int:
        if not self.strict:
            # The write-ts-not-strict bug: a coarse (1 s) clock and no "+ 1", so every
            # write in the same second gets the timestamp earlier reads already ran at.
            self.write = max(now // 1000 * 1000, self.write)
        else:
            self.write = max(now, self.write + 1)
        return self.write

    def peek_write_ts(self) -> int:
        return self.write

    def apply_write(self, t: int) -> None:
        self.read = max(self.read, t)
        self.write = max(self.write, t)


class Oracle:
    """Durable timelines and catalog, in one SQLite file."""

    def __init__(self, path: str, clock: Callable[[], int] = wall_clock_ms,
                 amnesia: bool = False, window: int = WINDOW, strict: bool = True):
        self.clock, self.window, self.strict = clock, window, strict
        self.lock = threading.Lock()
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("CREATE TABLE IF NOT EXISTS timelines (name TEXT PRIMARY KEY, bound INTEGER NOT NULL)")
        self.db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)")
        self.db.execute("CREATE TABLE IF NOT EXISTS tables (name TEXT PRIMARY KEY, columns TEXT NOT NULL, "
                        "epoch INTEGER NOT NULL, shard TEXT, not_null TEXT, source TEXT)")
        have = {r[1] for r in self.db.execute("PRAGMA table_info(tables)")}
        for column in ("shard", "not_null", "source"):  # a data dir from before these existed
            if column not in have:
                self.db.execute(f"ALTER TABLE tables ADD COLUMN {column} TEXT")
        self.timelines: dict[str, Timeline] = {}
        self.bounds: dict[str, int] = {}
        firsts = dict(self.db.execute("SELECT key, value FROM meta WHERE key LIKE 'first-bound:%'"))
        for name, bound in self.db.execute("SELECT name, bound FROM timelines"):
            # Resume above everything handed out before. The oracle-amnesia bug forgets
            # the bound and resumes from the first one it ever persisted.
            start = firsts.get(f"first-bound:{name}", 0) if amnesia else bound
            self.timelines[name] = Timeline(start, strict)
            self.bounds[name] = start

    # -- timelines --------------------------------------------------------

    def _timeline(self, name: str) -> Timeline:
        tl = self.timelines.get(name)
        if tl is None:
            tl = self.timelines[name] = Timeline(0, self.strict)
            self.bounds[name] = 0
        return tl

    def _cover(self, name: str, ts: int) -> None:
        """Persist a bound above ts before ts is handed out."""
        if ts >= self.bounds[name]:
            bound = ts + self.window
            self.db.execute("INSERT INTO timelines (name, bound) VALUES (?, ?) "
                            "ON CONFLICT(name) DO UPDATE SET bound = excluded.bound", (name, bound))
            if ts > 0:  # the first real timestamp's bound: where the amnesia bug resumes
                self.db.execute("INSERT INTO meta (key, value) VALUES (?, ?) "
                                "ON CONFLICT(key) DO NOTHING", (f"first-bound:{name}", bound))
            self.bounds[name] = bound

    def read_ts(self, timeline: str = "realtime") -> int:
        with self.lock:
            tl = self._timeline(timeline)
            ts = tl.read_ts()
            self._cover(timeline, ts)
            return ts

    def write_ts(self, timeline: str = "realtime") -> int:
        with self.lock:
            tl = self._timeline(timeline)
            ts = tl.write_ts(self.clock())
            self._cover(timeline, ts)
            return ts

    def peek_write_ts(self, timeline: str = "realtime") -> int:
        with self.lock:
            return self._timeline(timeline).peek_write_ts()

    def apply_write(self, ts: int, timeline: str = "realtime") -> None:
        with self.lock:
            self._cover(timeline, ts)
            self._timeline(timeline).apply_write(ts)

    # -- catalog ------------------------------------------------------------

    def epoch(self) -> int:
        row = self.db.execute("SELECT value FROM meta WHERE key = 'epoch'").fetchone()
        return row[0] if row else 0

    def bump_epoch(self) -> int:
        """A coordinator starts: the epoch goes up, fencing every older coordinator."""
        with self.lock:
            epoch = self.epoch() + 1
            self.db.execute("INSERT INTO meta (key, value) VALUES ('epoch', ?) "
                            "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (epoch,))
            return epoch

    def check_epoch(self, epoch: int) -> None:
        current = self.epoch()
        if epoch < current:
            raise Fenced(epoch, current)

    def create_table(self, epoch: int, name: str, columns: list[str], not_null: list[str] = (),
                     source: dict | None = None, shard: str | None = None) -> str:
        """A new table and its shard, which no earlier table of this name ever used.

        A table's rows live in the storage shard the catalog names. Shards are never
        reused: the first table called t keeps its rows in shard `t` (the layout the
        Parquet readers know), the n-th one after DROP TABLE in `t@n`. So a table created
        after a drop starts empty whatever became of the old shard, on every storage node
        and after any restart.

        A source node (source.py) registers its tables with `source` (its name, storage
        node and address) and names their shards itself: such a table is read-only."""
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.check_epoch(epoch)
                key = f"generation:{name}"
                row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
                generation = (row[0] if row else 0) + 1
                if shard is None:
                    shard = name if generation == 1 else f"{name}@{generation}"
                self.db.execute("INSERT INTO tables (name, columns, epoch, shard, not_null, source) "
                                "VALUES (?, ?, ?, ?, ?, ?)",
                                (name, json.dumps(columns), epoch, shard, json.dumps(list(not_null)),
                                 json.dumps(source) if source else None))
                self.db.execute("INSERT INTO meta (key, value) VALUES (?, ?) "
                                "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, generation))
                self.db.execute("COMMIT")
                return shard
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def drop_table(self, epoch: int, name: str) -> str | None:
        """Forget a table; returns its shard (for the storage nodes to drop), None if none."""
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.check_epoch(epoch)
                row = self.db.execute("SELECT coalesce(shard, name) FROM tables WHERE name = ?",
                                      (name,)).fetchone()
                self.db.execute("DELETE FROM tables WHERE name = ?", (name,))
                self.db.execute("COMMIT")
                return row[0] if row else None
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def tables(self) -> dict[str, list[str]]:
        return {name: json.loads(cols) for name, cols in self.db.execute("SELECT name, columns FROM tables")}

    def catalog(self) -> dict[str, dict]:
        """Every table: its columns, the shard that holds its rows, its NOT NULL columns, and
        for a source's table the source (name, storage node, address)."""
        out = {}
        for name, cols, shard, not_null, source in self.db.execute(
                "SELECT name, columns, shard, not_null, source FROM tables"):
            out[name] = {"columns": json.loads(cols), "shard": shard or name,
                         "not_null": json.loads(not_null or "[]")}
            if source:
                out[name]["source"] = json.loads(source)
        return out

    def close(self) -> None:
        self.db.close()


async def run(host: str, port: int, data_dir: str, faults: set[str]) -> None:
    """The oracle's service: every timeline and catalog step over RPC (cluster/rpc.py).

    Steps that name an epoch fail with `fenced` once a newer coordinator
    started. The clock the oracle reads can be offset (the clock nemesis).
    """
    import logging
    import os

    from sleuth.cluster.rpc import RpcError, serve

    offset = [0]
    oracle = Oracle(os.path.join(data_dir, "oracle.sqlite"), clock=lambda: wall_clock_ms() + offset[0],
                    amnesia="oracle-amnesia" in faults, strict="write-ts-not-strict" not in faults)
    started = time.time()

    def checked(epoch: int | None) -> None:
        if epoch is not None:
            try:
                oracle.check_epoch(epoch)
            except Fenced as e:
                raise RpcError("fenced", str(e), e.current) from None

    async def read_ts(timeline: str = "realtime", epoch: int | None = None) -> int:
        checked(epoch)
        return oracle.read_ts(timeline)

    async def write_ts(timeline: str = "realtime", epoch: int | None = None) -> int:
        checked(epoch)
        return oracle.write_ts(timeline)

    async def peek_write_ts(timeline: str = "realtime") -> int:
        return oracle.peek_write_ts(timeline)

    async def apply_write(ts: int, timeline: str = "realtime") -> None:
        oracle.apply_write(ts, timeline)

    async def bump_epoch() -> int:
        return oracle.bump_epoch()

    async def epoch() -> int:
        return oracle.epoch()

    async def create_table(epoch: int | None, name: str, columns: list, not_null: list = (),
                           source: dict | None = None, shard: str | None = None) -> dict:
        try:
            oracle.create_table(oracle.epoch() if epoch is None else epoch, name, columns, not_null,
                                source, shard)
        except Fenced as e:
            raise RpcError("fenced", str(e), e.current) from None
        except sqlite3.IntegrityError:
            raise RpcError("exists", f'relation "{name}" already exists') from None
        return oracle.catalog()

    async def drop_table(epoch: int | None, name: str) -> dict:
        try:
            shard = oracle.drop_table(oracle.epoch() if epoch is None else epoch, name)
        except Fenced as e:
            raise RpcError("fenced", str(e), e.current) from None
        return {"dropped": shard, "catalog": oracle.catalog()}

    async def tables() -> dict:
        return oracle.tables()

    async def catalog() -> dict:
        return oracle.catalog()

    async def set_clock_offset(ms: int) -> int:
        offset[0] = int(ms)
        return offset[0]

    async def status() -> dict[str, Any]:
        return {"role": "oracle", "epoch": oracle.epoch(), "uptime": time.time() - started,
                "read_ts": oracle.read_ts(), "write_ts": oracle.peek_write_ts(),
                "clock_offset": offset[0]}

    server = await serve(host, port, {
        "read_ts": read_ts, "write_ts": write_ts, "peek_write_ts": peek_write_ts,
        "apply_write": apply_write, "bump_epoch": bump_epoch, "epoch": epoch,
        "create_table": create_table, "drop_table": drop_table, "tables": tables, "catalog": catalog,
        "set_clock_offset": set_clock_offset, "status": status})
    logging.getLogger("sleuth.oracle").info("oracle listening on %s:%s, faults %s", host, port,
                                            sorted(faults))
    async with server:
        await server.serve_forever()
