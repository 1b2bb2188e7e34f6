"""A reader for PostgreSQL's `pgoutput` logical replication messages (protocol version 1).

The source node (cluster/source.py) receives these through psycopg2's
replication connection as raw bytes. Only what the source needs is decoded:
transaction boundaries (`B`egin with its xid, `C`ommit with its end LSN),
relations (`R`: a table's name, columns and their type oids), row changes
(`I`nsert, `U`pdate, `D`elete: new and old tuples as Python values), `T`runcate
and logical messages (`M`, the source's own probes). The format is PostgreSQL's
"Logical Replication Message Formats" chapter.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

INTS = {20, 21, 23, 26}  # int8, int2, int4, oid
FLOATS = {700, 701, 1700}  # float4, float8, numeric (stored as float8 by the cluster)
BOOL = 16


def lsn_text(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def lsn_int(text: str) -> int:
    hi, _, lo = text.partition("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def value(text: str | None, oid: int):
    if text is None:
        return None
    if oid in INTS:
        return int(text)
    if oid in FLOATS:
        return float(text)
    if oid == BOOL:
        return text == "t"
    return text


def cluster_type(oid: int) -> int:
    """The cluster's column type (cluster/sql.py's oids) for an upstream type oid."""
    from sleuth.cluster.sql import BOOL as CBOOL
    from sleuth.cluster.sql import FLOAT8, INT8, TEXT
    if oid in INTS:
        return INT8
    if oid in FLOATS:
        return FLOAT8
    if oid == BOOL:
        return CBOOL
    return TEXT


@dataclass
class Relation:
    oid: int
    schema: str
    name: str
    columns: list[tuple[str, int]] = field(default_factory=list)  # (name, type oid)


class Reader:
    def __init__(self, data: bytes):
        self.b, self.i = data, 0

    def take(self, fmt: str):
        (v,) = struct.unpack_from("!" + fmt, self.b, self.i)
        self.i += struct.calcsize(fmt)
        return v

    def string(self) -> str:
        end = self.b.index(b"\0", self.i)
        s = self.b[self.i:end].decode()
        self.i = end + 1
        return s

    def tuple(self, rel: Relation) -> list:
        n = self.take("h")
        out = []
        for k in range(n):
            kind = bytes([self.take("B")])
            if kind == b"n":
                out.append(None)
            elif kind == b"u":
                raise ValueError(f"{rel.name}: unchanged TOAST value (set REPLICA IDENTITY FULL)")
            else:
                size = self.take("i")
                raw = self.b[self.i:self.i + size]
                self.i += size
                out.append(value(raw.decode(), rel.columns[k][1]))
        return out


def parse(data: bytes, relations: dict[int, Relation]) -> dict:
    """One message as a dict with its `kind`; `R` messages also update `relations`."""
    r = Reader(data)
    kind = chr(r.take("B"))
    if kind == "B":
        return {"kind": "B", "final_lsn": r.take("q"), "commit_ts": r.take("q"), "xid": r.take("I")}
    if kind == "C":
        r.take("B")
        return {"kind": "C", "commit_lsn": r.take("q"), "end_lsn": r.take("q"), "commit_ts": r.take("q")}
    if kind == "R":
        oid, schema, name = r.take("I"), r.string(), r.string()
        r.take("B")  # replica identity setting
        rel = Relation(oid, schema, name)
        for _ in range(r.take("h")):
            r.take("B")  # flags (part of the key)
            col = r.string()
            rel.columns.append((col, r.take("I")))
            r.take("i")  # typmod
        relations[oid] = rel
        return {"kind": "R", "relation": rel}
    if kind in "IUD":
        rel = relations[r.take("I")]
        out = {"kind": kind, "relation": rel.name, "old": None, "new": None}
        tag = chr(r.take("B"))
        if tag in "KO":
            out["old"] = r.tuple(rel)
            out["key_only"] = tag == "K"
            if kind == "U":
                tag = chr(r.take("B"))
        if tag == "N":
            out["new"] = r.tuple(rel)
        return out
    if kind == "T":
        n = r.take("i")
        r.take("B")
        return {"kind": "T", "relations": [relations[r.take("I")].name for _ in range(n)]}
    if kind == "M":
        r.take("B")
        lsn, prefix = r.take("q"), r.string()
        size = r.take("i")
        return {"kind": "M", "lsn": lsn, "prefix": prefix, "content": r.b[r.i:r.i + size]}
    return {"kind": kind}  # origin, type: nothing the source needs
