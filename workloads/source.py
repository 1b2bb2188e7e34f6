"""The `source` workload: clients write to an upstream PostgreSQL and read through the cluster.

The reference cluster's source node (cluster/source.py) ingests the upstream
table `sleuth_src`. Operations (checked by checker/source.py, whose docstring
gives the shapes):

- `append v`: one upstream transaction takes the next number from the counter
  row `sleuth_src_head` (a row lock: numbers follow commit order, with no gaps),
  inserts `(n, v)`, records `pg_current_wal_insert_lsn()` inside the
  transaction and `pg_current_wal_lsn()` right after its commit (`after`: the
  commit lies at or below it);
- `read` / `rtr-read`: every row, through the cluster, without / with
  `SET real_time_recency = true`;
- `final-read`: an `rtr-read` made only as the run's final read (the runner's
  `final_reads`, once the load has stopped and every fault has healed); its
  own name marks it in the history, the only read that can prove a change lost;
- `ack`: the source slot's `confirmed_flush_lsn`, read upstream.

Each client keeps its own upstream connection beside the cluster connection
the runner gives it; the runner's watchdog cuts both (`cut`), so a paused
upstream hangs no client.
"""

from __future__ import annotations

import os
import random
import socket
import threading
from typing import Any

from sleuth.checker import SOURCE_CHANGES
from sleuth.checker import WORKLOADS as REGISTRY
from sleuth.checker.source import FINAL, READS, RTR
from sleuth.cluster.pgoutput import lsn_int
from sleuth.workloads.clients import WORKLOADS, Failed, Workload

TABLE = SOURCE_CHANGES  # the registry's name (sleuth.checker)
SOURCE = "source1"  # the cluster's source node (cluster/control.py names it)


class Source(Workload):
    name = checker = "source"
    tables = list(REGISTRY[checker].tables)
    upstream_tables = [TABLE]  # the target starts an upstream PostgreSQL holding these
    upstream_ops = frozenset(("append", "ack"))  # no cluster timestamp to report for these

    def __init__(self, keys: int, family: str):
        super().__init__(keys, family)
        self.upstream_url: str | None = None  # set by the target once its upstream is up
        self.conns: dict[int, Any] = {}  # client thread -> its upstream connection
        self.lock = threading.Lock()

    def upstream_setup(self, conn: Any) -> None:
        conn.execute(f"CREATE TABLE {TABLE} (n bigint PRIMARY KEY, v bigint NOT NULL)")
        conn.execute(f"CREATE TABLE {TABLE}_head (n bigint NOT NULL)")
        conn.execute(f"INSERT INTO {TABLE}_head VALUES (0)")

    def setup(self, conn: Any) -> None:
        conn.execute(f"SELECT count(*) FROM {TABLE}")  # the source registered it

    def generate(self, rnd: random.Random, slot: int) -> tuple[str, Any]:
        r = rnd.random()
        if r < 0.4:
            return "append", self.unique(slot)
        if r < 0.6:
            return "read", None
        if r < 0.9:
            return "rtr-read", None
        return "ack", None

    def _upstream(self) -> Any:
        import psycopg
        me = threading.get_ident()
        conn = self.conns.get(me)
        if conn is None or conn.closed:
            try:
                conn = psycopg.connect(self.upstream_url, autocommit=True, connect_timeout=3)
            except psycopg.OperationalError as e:  # nothing was sent: it certainly did not happen
                raise Failed(f"not connected to the upstream: {str(e).strip().splitlines()[0]}") from None
            with self.lock:
                self.conns[me] = conn
        return conn

    def _drop(self) -> None:
        conn = self.conns.pop(threading.get_ident(), None)
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def perform(self, conn: Any, f: str, value: Any) -> Any:
        if f in READS:
            conn.execute(f"SET real_time_recency = {'true' if f in RTR else 'false'}")
            return [list(r) for r in conn.execute(f"SELECT n, v FROM {TABLE} ORDER BY n").fetchall()]
        try:
            return self._append(value) if f == "append" else self._ack()
        except Failed:
            raise
        except Exception:
            self._drop()  # a fresh connection next time
            raise

    def _append(self, v: int) -> dict:
        up = self._upstream()
        up.execute("BEGIN")
        try:
            n = up.execute(f"UPDATE {TABLE}_head SET n = n + 1 RETURNING n").fetchone()[0]
            up.execute(f"INSERT INTO {TABLE} VALUES (%s, %s)", (n, v))
            lsn = up.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
        except Exception:
            try:
                up.execute("ROLLBACK")
            except Exception:
                pass
            raise
        up.execute("COMMIT")
        after = up.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
        return {"v": v, "n": n, "lsn": lsn_int(lsn), "after": lsn_int(after)}

    def _ack(self) -> int:
        from sleuth.cluster.upstream import slot_name
        row = self._upstream().execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                                       "WHERE slot_name = %s", (slot_name(SOURCE),)).fetchone()
        if row is None or row[0] is None:
            raise Failed(f"no replication slot {slot_name(SOURCE)} upstream")
        return lsn_int(row[0])

    def cut(self, thread: int) -> None:
        """The watchdog: shut the socket of this client thread's upstream connection."""
        conn = self.conns.get(thread)
        if conn is None:
            return
        try:
            s = socket.socket(fileno=os.dup(conn.pgconn.socket))
            s.shutdown(socket.SHUT_RDWR)
            s.close()
        except Exception:
            pass

    def final_reads(self) -> list[tuple[str, Any]]:
        return [(FINAL, None)]


WORKLOADS[Source.name] = Source
