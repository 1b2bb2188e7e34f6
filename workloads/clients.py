"""Workloads against live SQL targets: what each operation is, and the SQL a client sends for it.

Three target families: the reference cluster (`reference`: read-only or
write-only transactions; writes to existing rows are single read-then-write
statements, as Materialize allows), general SQL databases (`general`,
PostgreSQL: full read-write transactions at the requested isolation level)
and MySQL-protocol databases (`mysql`, MariaDB/MySQL: the same transactions
in MySQL's dialect). The MySQL dialect differs where MySQL differs: every
table has a primary key (InnoDB locks the index records a statement scans,
so without one every locking write would lock every row and serialize
everything), and list-append appends as Jepsen's MySQL test does, with
`INSERT … ON DUPLICATE KEY UPDATE v = CONCAT(v, …)` on a table that starts
empty (`||` is logical OR in MySQL).

A workload is a generator of operations (`generate(rnd, slot)` gives `f` and
the invoke value, docs/history-format.md's shapes), the SQL that performs one (`perform`
returns the completed value, or raises `Failed` when the database said it
certainly did not happen), its tables (`setup`) and the final reads that
pin every key once everything is healed. Values written are unique per key:
each client slot numbers its own values.
"""

from __future__ import annotations

import random
from typing import Any

# the tables' names are the registry's (sleuth.checker), which Spark's jobs read too
from sleuth.checker import ACCOUNTS, COUNTERS, LISTS, REGISTERS, RW
from sleuth.checker import WORKLOADS as REGISTRY
from sleuth.history.jsonl import writes as writes  # the history format owns what a write is


class Failed(Exception):
    """The operation certainly did not take effect (e.g. a cas whose old value did not match)."""


class Unexpected(Exception):
    """The database answered in a way the workload cannot read (an append that changed two
    rows): what it did is unknown, so the operation is `info`. Any other exception raised while
    performing an operation that is not the driver's is a bug of sleuth's, and stops the run."""


class Workload:
    name = ""
    checker = ""  # the `sleuth check` workload its history is judged as
    tables: list[str] = []

    def __init__(self, keys: int, family: str):
        self.keys, self.family = keys, family
        self.counters: dict[int, int] = {}
        self.seen: dict[int, Any] = {}  # register: the last value a client saw per key (cas guesses)

    def unique(self, slot: int) -> int:
        """A value no other client slot writes: slot, slot + 1000, slot + 2000, …"""
        n = self.counters.get(slot, 0)
        self.counters[slot] = n + 1
        return n * 1000 + slot + 1

    def setup(self, cur: Any) -> None:
        raise NotImplementedError

    def generate(self, rnd: random.Random, slot: int) -> tuple[str, Any]:
        raise NotImplementedError

    def perform(self, conn: Any, f: str, value: Any) -> Any:
        raise NotImplementedError

    def final_reads(self) -> list[tuple[str, Any]]:
        raise NotImplementedError


def _rows_setup(cur: Any, table: str, columns: str, rows: list[tuple], family: str = "general",
                key: str = "k") -> None:
    if family == "mysql":
        cur.execute(f"CREATE TABLE {table} ({columns}, PRIMARY KEY ({key})) ENGINE=InnoDB")
    else:
        cur.execute(f"CREATE TABLE {table} ({columns})")
    if not rows:
        return
    values = ", ".join("(" + ", ".join("NULL" if v is None else repr(v) for v in r) + ")" for r in rows)
    cur.execute(f"INSERT INTO {table} VALUES {values}")


class Register(Workload):
    """Independent registers, one row per key: read, write, cas (checked for linearizability)."""
    name = checker = "register"
    tables = list(REGISTRY[checker].tables)

    def setup(self, cur: Any) -> None:
        _rows_setup(cur, REGISTERS, "k bigint, v bigint", [(k, None) for k in range(self.keys)], self.family)

    def generate(self, rnd: random.Random, slot: int) -> tuple[str, Any]:
        k = rnd.randrange(self.keys)
        r = rnd.random()
        if r < 0.5:
            return "read", [k, None]
        if r < 0.75:
            return "write", [k, self.unique(slot)]
        old = self.seen.get(k)
        return "cas", [k, [old if old is not None else self.unique(slot), self.unique(slot)]]

    def perform(self, conn: Any, f: str, value: Any) -> Any:
        k, v = value
        if f == "read":
            row = conn.execute(f"SELECT v FROM {REGISTERS} WHERE k = {k}").fetchone()
            got = row[0] if row else None
            self.seen[k] = got
            return [k, got]
        if f == "write":
            conn.execute(f"UPDATE {REGISTERS} SET v = {v} WHERE k = {k}")
            self.seen[k] = v
            return value
        old, new = v
        cur = conn.execute(f"UPDATE {REGISTERS} SET v = {new} WHERE k = {k} AND v = {old}")
        if cur.rowcount != 1:
            raise Failed(f"cas: register {k} did not hold {old}")
        self.seen[k] = new
        return value

    def final_reads(self) -> list[tuple[str, Any]]:
        return [("read", [k, None]) for k in range(self.keys)]


class _Transactional(Workload):
    """Elle's transactional workloads: transactions of reads and writes (`write_f`) over keys.

    On the reference cluster a transaction is read-only or one write statement (Materialize's
    rule); elsewhere 1-4 micro-ops mixed. A transaction of one micro-op runs in autocommit."""
    write_f = ""

    def generate(self, rnd: random.Random, slot: int) -> tuple[str, Any]:
        if self.family == "reference":  # read-only transactions, or one write statement
            if rnd.random() < 0.5:
                ks = rnd.sample(range(self.keys), min(self.keys, rnd.randint(1, 3)))
                return "txn", [["r", k, None] for k in ks]
            return "txn", [[self.write_f, rnd.randrange(self.keys), self.unique(slot)]]
        mops = []
        for _ in range(rnd.randint(1, 4)):
            k = rnd.randrange(self.keys)
            mops.append(["r", k, None] if rnd.random() < 0.5 else [self.write_f, k, self.unique(slot)])
        return "txn", mops

    def perform(self, conn: Any, f: str, value: Any) -> Any:
        explicit = len(value) > 1
        if explicit:
            conn.execute("BEGIN")
        try:
            out = [["r", k, self.read(conn, k)] if op == "r" else self.write(conn, op, k, v)
                   for op, k, v in value]
            if explicit:
                conn.execute("COMMIT")
        except BaseException:
            if explicit:
                _rollback(conn)
            raise
        return out

    def read(self, conn: Any, k: int) -> Any: ...
    def write(self, conn: Any, op: str, k: int, v: int) -> list: ...

    def final_reads(self) -> list[tuple[str, Any]]:
        ks = list(range(self.keys))
        return [("txn", [["r", k, None] for k in ks[i:i + 8]]) for i in range(0, len(ks), 8)]


class ListAppend(_Transactional):
    """Elle's list-append: lists as text rows, appended to by read-then-write."""
    name = checker = "list-append"
    tables = list(REGISTRY[checker].tables)
    write_f = "append"

    def setup(self, cur: Any) -> None:
        # MySQL: the table starts empty and the first append of a key inserts its row (Jepsen's way)
        _rows_setup(cur, LISTS, "k bigint, v text",
                    [] if self.family == "mysql" else [(k, "") for k in range(self.keys)], self.family)

    def read(self, conn: Any, k: int) -> list[int]:
        row = conn.execute(f"SELECT v FROM {LISTS} WHERE k = {k}").fetchone()
        return [int(x) for x in (row[0] or "").split()] if row else []

    def write(self, conn: Any, op: str, k: int, v: int) -> list:
        if self.family == "mysql":  # 1 row inserted, or (found rows) 2 for the update path
            cur = conn.execute(f"INSERT INTO {LISTS} (k, v) VALUES ({k}, '{v}') "
                               f"ON DUPLICATE KEY UPDATE v = CONCAT(v, ' {v}')")
            if cur.rowcount not in (1, 2):
                raise Unexpected(f"append to key {k} affected {cur.rowcount} rows")
        else:
            cur = conn.execute(f"UPDATE {LISTS} SET v = v || ' {v}' WHERE k = {k}")
            if cur.rowcount != 1:
                raise Unexpected(f"append to key {k} updated {cur.rowcount} rows")
        return [op, k, v]


class RwRegister(_Transactional):
    """Elle's rw-register: one row per key, reads and blind writes."""
    name = checker = "rw-register"
    tables = list(REGISTRY[checker].tables)
    write_f = "w"

    def setup(self, cur: Any) -> None:
        _rows_setup(cur, RW, "k bigint, v bigint", [(k, None) for k in range(self.keys)], self.family)

    def read(self, conn: Any, k: int) -> Any:
        row = conn.execute(f"SELECT v FROM {RW} WHERE k = {k}").fetchone()
        return row[0] if row else None

    def write(self, conn: Any, op: str, k: int, v: int) -> list:
        conn.execute(f"UPDATE {RW} SET v = {v} WHERE k = {k}")
        return ["w", k, v]


class Bank(Workload):
    """Transfers between accounts and whole-table reads: the total is conserved."""
    name = checker = "bank"
    tables = list(REGISTRY[checker].tables)
    INITIAL = 100

    def setup(self, cur: Any) -> None:
        _rows_setup(cur, ACCOUNTS, "id bigint, balance bigint",
                    [(a, self.INITIAL) for a in range(max(2, self.keys))], self.family, key="id")

    def generate(self, rnd: random.Random, slot: int) -> tuple[str, Any]:
        if rnd.random() < 0.5:
            return "read", None
        a, b = rnd.sample(range(max(2, self.keys)), 2)
        return "transfer", {"from": a, "to": b, "amount": rnd.randint(1, 5)}

    def perform(self, conn: Any, f: str, value: Any) -> Any:
        if f == "read":
            return {str(a): bal for a, bal in conn.execute(f"SELECT id, balance FROM {ACCOUNTS}").fetchall()}
        a, b, x = value["from"], value["to"], value["amount"]
        if self.family == "reference":  # one read-then-write statement
            conn.execute(f"UPDATE {ACCOUNTS} SET balance = balance + CASE WHEN id = {a} THEN {-x} "
                         f"ELSE {x} END WHERE id IN ({a}, {b})")
            return value
        conn.execute("BEGIN")
        try:
            conn.execute(f"UPDATE {ACCOUNTS} SET balance = balance - {x} WHERE id = {a}")
            conn.execute(f"UPDATE {ACCOUNTS} SET balance = balance + {x} WHERE id = {b}")
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
        return value

    def total(self) -> int:
        return self.INITIAL * max(2, self.keys)

    def final_reads(self) -> list[tuple[str, Any]]:
        return [("read", None)]


class Counter(Workload):
    """UPDATE … SET x = x + 1 (seed 001's read-then-write path) and reads."""
    name = checker = "counter"
    tables = list(REGISTRY[checker].tables)

    def setup(self, cur: Any) -> None:
        _rows_setup(cur, COUNTERS, "k bigint, x bigint", [(0, 0)], self.family)

    def generate(self, rnd: random.Random, slot: int) -> tuple[str, Any]:
        return ("read", None) if rnd.random() < 0.3 else ("add", 1)

    def perform(self, conn: Any, f: str, value: Any) -> Any:
        if f == "read":
            return conn.execute(f"SELECT x FROM {COUNTERS} WHERE k = 0").fetchone()[0]
        cur = conn.execute(f"UPDATE {COUNTERS} SET x = x + {value} WHERE k = 0")
        if cur.rowcount != 1:
            raise Unexpected(f"increment updated {cur.rowcount} rows")
        return value

    def final_reads(self) -> list[tuple[str, Any]]:
        return [("read", None)]


def _rollback(conn: Any) -> None:
    try:
        conn.execute("ROLLBACK")
    except Exception:
        pass


WORKLOADS = {w.name: w for w in (Register, ListAppend, RwRegister, Bank, Counter)}

# The source workload (an upstream PostgreSQL read through the cluster's source node) lives in
# its own module and adds itself here; importing it last works whichever module comes first.
from sleuth.workloads import source as _source  # noqa: E402,F401
