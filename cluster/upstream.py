"""A source node's side of its upstream PostgreSQL: setup, logical replication, LSN queries.

psycopg 3 has no replication protocol; psycopg2's `LogicalReplicationConnection`
has, so this module (and only it, in a source node) uses psycopg2.

- `setup()`: a publication `sleuth_<source>` for the tables (REPLICA IDENTITY
  FULL, so updates and deletes carry the whole old row), a `pgoutput`
  replication slot of the same name, each table's columns, and when the slot
  is new the tables' rows in the snapshot it exports (the initial snapshot).
- `Replication` (a thread): streams the slot from its confirmed position,
  groups changes into committed transactions (`Txn`, with the commit's end
  LSN), hands each to a callback, and sends the acknowledgement (`ack`) as
  the slot's flush position when the source node raises it. It reconnects
  after the upstream dies, and never hands over a transaction twice. A
  change it cannot ingest (`Unsupported`: a TRUNCATE, an old row without
  REPLICA IDENTITY FULL) is a definite error, as in Materialize: streaming
  stops for good before that transaction, and `error` says why (skipping
  it would be wrong, and a reconnect would only meet it again).
  (psycopg2 itself moves the flush position on to a keepalive's WAL end when
  everything received has been acknowledged: no transaction of ours lies in
  between, so that keeps seed 002's rule.)
- `current_lsn()`, `probe()`: for real-time-recent reads, the upstream's
  `pg_current_wal_lsn()`, and a transactional logical message, whose commit
  the stream delivers after every transaction committed before it.
"""

from __future__ import annotations

import logging
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg2
import psycopg2.extras

from sleuth.cluster import pgoutput

log = logging.getLogger("sleuth.source")
PROBE_PREFIX = "sleuth-probe"


class Unsupported(Exception):
    """A change the source cannot ingest: its stream is errored from there on."""


@dataclass
class Txn:
    end_lsn: int
    xid: int
    changes: dict[str, list] = field(default_factory=dict)  # table -> [[row, diff]]


def slot_name(source: str) -> str:
    return "sleuth_" + "".join(c if c.isalnum() else "_" for c in source.lower())


def _connect(url: str, **kw):
    return psycopg2.connect(url, connect_timeout=3, **kw)


def setup(url: str, source: str, tables: list[str], resuming: bool) -> tuple[dict, Txn | None]:
    """Publication and slot, and each table's columns and NOT NULL ones.

    Unless `resuming` (a durable binding exists), the slot is (re)created with an exported
    snapshot, and the tables' rows as of the slot's consistent point come back as one
    transaction ending there: the initial snapshot, to be bound before anything streamed.
    A slot left by a source that died before binding its snapshot is dropped first."""
    name = slot_name(source)
    conn = _connect(url)
    conn.autocommit = True
    try:
        cur = conn.cursor()
        schema = {}
        for t in tables:
            cur.execute("SELECT a.attname, a.atttypid, a.attnotnull FROM pg_attribute a "
                        "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped "
                        "ORDER BY a.attnum", (t,))
            cols = cur.fetchall()
            schema[t] = {"columns": [(c, pgoutput.cluster_type(oid)) for c, oid, _ in cols],
                         "not_null": [c for c, _, nn in cols if nn], "oids": [oid for _, oid, _ in cols]}
            cur.execute(f'ALTER TABLE "{t}" REPLICA IDENTITY FULL')
        cur.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (name,))
        if not cur.fetchone():
            cur.execute(f"CREATE PUBLICATION {name} FOR TABLE " + ", ".join(f'"{t}"' for t in tables))
        cur.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (name,))
        exists = cur.fetchone() is not None
        if resuming and exists:
            return schema, None
        if exists:
            cur.execute("SELECT pg_drop_replication_slot(%s)", (name,))
        return schema, _snapshot(url, name, tables, schema)
    finally:
        conn.close()


def _snapshot(url: str, name: str, tables: list[str], schema: dict) -> Txn:
    """Create the slot exporting a snapshot; read every table in it."""
    rconn = psycopg2.connect(url, connect_timeout=3,
                             connection_factory=psycopg2.extras.LogicalReplicationConnection)
    try:
        rcur = rconn.cursor()
        rcur.execute(f"CREATE_REPLICATION_SLOT {name} LOGICAL pgoutput EXPORT_SNAPSHOT")
        _, point, snapshot, _ = rcur.fetchone()
        conn = _connect(url)
        try:
            cur = conn.cursor()  # psycopg2 opens the transaction: SET TRANSACTION comes first
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("SET TRANSACTION SNAPSHOT %s", (snapshot,))
            txn = Txn(end_lsn=pgoutput.lsn_int(point), xid=0)
            for t in tables:
                cols = ", ".join(f'"{c}"::text' for c, _ in schema[t]["columns"])
                cur.execute(f'SELECT {cols} FROM "{t}"')
                oids = schema[t]["oids"]
                txn.changes[t] = [[[pgoutput.value(v, oid) for v, oid in zip(row, oids)], 1]
                                  for row in cur.fetchall()]
            conn.rollback()
        finally:
            conn.close()
        return txn
    finally:
        rconn.close()


def current_lsn(url: str) -> int:
    with _connect(url) as conn:
        cur = conn.cursor()
        cur.execute("SELECT pg_current_wal_lsn()::text")
        lsn = pgoutput.lsn_int(cur.fetchone()[0])
    conn.close()
    return lsn


def probe(url: str) -> int:
    """Commit a transactional logical message upstream; returns the message's LSN."""
    conn = _connect(url)
    try:
        conn.autocommit = True
        cur = conn.cursor()
        cur.execute("SELECT pg_logical_emit_message(true, %s, '')::text", (PROBE_PREFIX,))
        return pgoutput.lsn_int(cur.fetchone()[0])
    finally:
        conn.close()


class Replication(threading.Thread):
    """Streams the slot; `deliver(txn)` for each committed transaction above `received`."""

    def __init__(self, url: str, source: str, deliver: Callable[[Txn], None], received: int):
        super().__init__(daemon=True, name="replication")
        self.url, self.name_ = url, slot_name(source)
        self.deliver = deliver
        self.received = received  # highest end LSN handed over (or durable at start)
        self.ack = 0  # raised by the source node; sent upstream as the flush position
        self.sent = 0
        self.connected = False
        self.error: str | None = None  # set once, by an `Unsupported` change: streaming stopped

    def run(self) -> None:
        while True:
            try:
                self._stream()
            except Unsupported as e:
                self.error = str(e)
                log.error("replication stopped: %s; the source is errored (only a source created "
                          "anew, with a new slot, ingests again)", e)
                return
            except Exception as e:  # the upstream died, was cut off, restarted: reconnect
                self.connected = False
                log.warning("replication: %s; reconnecting", str(e).strip().splitlines()[0] if str(e) else e)
                time.sleep(0.3)

    def _stream(self) -> None:
        conn = psycopg2.connect(self.url, connect_timeout=3,
                                connection_factory=psycopg2.extras.LogicalReplicationConnection)
        try:
            cur = conn.cursor()
            cur.start_replication(slot_name=self.name_, decode=False, status_interval=1,
                                  options={"proto_version": "1", "publication_names": self.name_,
                                           "messages": "true"})
            self.connected, self.sent = True, 0
            relations: dict[int, pgoutput.Relation] = {}
            txn: Txn | None = None
            while True:
                if self.ack > self.sent:
                    cur.send_feedback(write_lsn=self.ack, flush_lsn=self.ack, apply_lsn=self.ack,
                                      reply=True)
                    self.sent = self.ack
                msg = cur.read_message()
                if msg is None:
                    select.select([cur], [], [], 0.02)
                    continue
                m = pgoutput.parse(msg.payload, relations)
                kind = m["kind"]
                if kind == "B":
                    txn = Txn(end_lsn=0, xid=m["xid"])
                elif kind in "IUD" and txn is not None:
                    rows = txn.changes.setdefault(m["relation"], [])
                    if m["old"] is not None:
                        if m.get("key_only"):
                            raise Unsupported(f"an old row of {m['relation']} without REPLICA IDENTITY "
                                              f"FULL at LSN {pgoutput.lsn_text(msg.data_start)}")
                        rows.append([m["old"], -1])
                    if m["new"] is not None:
                        rows.append([m["new"], 1])
                elif kind == "T" and txn is not None:
                    raise Unsupported(f"upstream TRUNCATE of {', '.join(m['relations'])} at LSN "
                                      f"{pgoutput.lsn_text(msg.data_start)}, which a source cannot ingest")
                elif kind == "C" and txn is not None:
                    txn.end_lsn = m["end_lsn"]
                    if txn.end_lsn > self.received:
                        self.received = txn.end_lsn
                        self.deliver(txn)
                    txn = None
        finally:
            self.connected = False
            conn.close()
