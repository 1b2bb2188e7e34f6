"""A PostgreSQL wire-protocol (v3) server on asyncio; the SQL engine is the caller's.

psql and psycopg connect to it. The flow of one connection:

1. Start-up: an SSLRequest/GSSENCRequest is refused with 'N', then the
   StartupMessage names user and database; trust authentication answers
   AuthenticationOk, a few ParameterStatus messages, BackendKeyData and
   ReadyForQuery.
2. Simple query ('Q'): the whole string goes to `session.execute`, which
   returns one `Result` per statement: RowDescription (if it has columns),
   DataRows and CommandComplete for each; then ReadyForQuery.
3. Extended query: Parse stores a statement, Bind makes a portal (its
   parameters substituted into the SQL text as literals), Describe and
   Execute run it (once, at the first of the two), Sync ends the round with
   ReadyForQuery. After an error every message up to Sync is skipped.

Values travel in text format. Answers are buffered and written once per
round (at ReadyForQuery or Flush).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import struct
import time
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("sleuth.pgwire")

SSL_REQUEST, GSS_REQUEST, CANCEL_REQUEST, PROTOCOL_3 = 80877103, 80877104, 80877102, 196608


class SQLError(Exception):
    """An error answered to the client with a SQLSTATE code."""

    def __init__(self, code: str, message: str, detail: str | None = None):
        super().__init__(message)
        self.code, self.message, self.detail = code, message, detail


@dataclass
class Result:
    columns: list[tuple[str, int]]  # (name, type oid)
    rows: list[tuple]
    tag: str


# -- encoding -----------------------------------------------------------------------


def _msg(kind: bytes, payload: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(payload) + 4) + payload


def _cstr(s: str) -> bytes:
    return s.encode() + b"\0"


def _text(v: Any) -> bytes | None:
    if v is None:
        return None
    if v is True:
        return b"t"
    if v is False:
        return b"f"
    return str(v).encode()


def row_description(columns: list[tuple[str, int]]) -> bytes:
    out = [struct.pack("!h", len(columns))]
    for name, oid in columns:
        size = {20: 8, 16: 1, 701: 8}.get(oid, -1)
        out.append(_cstr(name) + struct.pack("!ihihih", 0, 0, oid, size, -1, 0))
    return _msg(b"T", b"".join(out))


def data_row(row: tuple) -> bytes:
    out = [struct.pack("!h", len(row))]
    for v in row:
        b = _text(v)
        out.append(struct.pack("!i", -1) if b is None else struct.pack("!i", len(b)) + b)
    return _msg(b"D", b"".join(out))


def error_response(code: str, message: str, detail: str | None = None, severity: str = "ERROR") -> bytes:
    fields = b"S" + _cstr(severity) + b"V" + _cstr(severity) + b"C" + _cstr(code) + b"M" + _cstr(message)
    if detail:
        fields += b"D" + _cstr(detail)
    return _msg(b"E", fields + b"\0")


def result_messages(r: Result, with_description: bool = True) -> bytes:
    out = []
    if r.columns and with_description:
        out.append(row_description(r.columns))
    out.extend(data_row(row) for row in r.rows)
    out.append(_msg(b"C", _cstr(r.tag)))
    return b"".join(out)


# -- parameters ------------------------------------------------------------------------


def literal(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, (int, float)):
        return repr(v)
    return "'" + str(v).replace("'", "''") + "'"


def substitute(sql: str, params: list[Any]) -> str:
    """Replace $1, $2, … outside quotes and comments with SQL literals."""
    if not params:
        return sql
    out, i, n = [], 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"":
            j = i + 1
            while j < n:
                if sql[j] == c:
                    if j + 1 < n and sql[j + 1] == c:
                        j += 2
                        continue
                    break
                j += 1
            out.append(sql[i:j + 1])
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j == -1 else j
            out.append(sql[i:j])
            i = j
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            j = n if j == -1 else j + 2
            out.append(sql[i:j])
            i = j
        elif c == "$" and i + 1 < n and sql[i + 1].isdigit():
            j = i + 1
            while j < n and sql[j].isdigit():
                j += 1
            k = int(sql[i + 1:j])
            if not 1 <= k <= len(params):
                raise SQLError("08P01", f"there is no parameter ${k}")
            out.append(literal(params[k - 1]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def decode_param(data: bytes | None, oid: int, fmt: int) -> Any:
    if data is None:
        return None
    if fmt == 0:
        text = data.decode()
        if oid in (20, 21, 23):
            return int(text)
        if oid in (700, 701):
            return float(text)
        if oid == 16:
            return text in ("t", "true", "1", "on")
        return text
    if oid == 21:
        return struct.unpack("!h", data)[0]
    if oid == 23:
        return struct.unpack("!i", data)[0]
    if oid == 20:
        return struct.unpack("!q", data)[0]
    if oid == 700:
        return struct.unpack("!f", data)[0]
    if oid == 701:
        return struct.unpack("!d", data)[0]
    if oid == 16:
        return data != b"\0"
    if oid in (0, 25, 1043, 19, 1042):
        return data.decode()
    raise SQLError("0A000", f"binary parameters of type {oid} are not supported")


def count_params(sql: str) -> int:
    """The highest $n in sql (outside quotes)."""
    found = []

    class Probe(list):
        def __len__(self) -> int:
            return 1 << 30

        def __getitem__(self, k: int) -> Any:
            found.append(k + 1)
            return None

    try:
        substitute(sql, Probe())
    except SQLError:
        pass
    return max(found, default=0)


# -- the connection ------------------------------------------------------------------

_DEALLOCATE = re.compile(r'(?is)^\s*deallocate\s+(prepare\s+)?(?P<name>"(?:[^"]|"")+"|[a-z_][\w$]*)\s*;?\s*$')


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, factory: Any):
        self.reader, self.writer, self.factory = reader, writer, factory
        self.out: list[bytes] = []
        self.session: Any = None
        self.statements: dict[str, tuple[str, list[int]]] = {}
        self.portals: dict[str, dict] = {}
        self.skipping = False  # after an error in extended mode, until Sync

    async def read_message(self) -> tuple[bytes, bytes]:
        head = await self.reader.readexactly(5)
        n = struct.unpack("!i", head[1:])[0]
        return head[:1], await self.reader.readexactly(n - 4)

    async def startup(self) -> bool:
        while True:
            n = struct.unpack("!i", await self.reader.readexactly(4))[0]
            body = await self.reader.readexactly(n - 4)
            code = struct.unpack("!i", body[:4])[0]
            if code in (SSL_REQUEST, GSS_REQUEST):
                self.writer.write(b"N")
                await self.writer.drain()
                continue
            if code == CANCEL_REQUEST:
                return False
            if code != PROTOCOL_3:
                self.writer.write(error_response("08P01", f"unsupported protocol {code}", severity="FATAL"))
                return False
            parts = body[4:].split(b"\0")
            params = {parts[i].decode(): parts[i + 1].decode() for i in range(0, len(parts) - 1, 2) if parts[i]}
            break
        try:
            s = self.factory(params.get("user", ""), params.get("database", ""), params)
            self.session = await s if inspect.isawaitable(s) else s
        except SQLError as e:
            self.writer.write(error_response(e.code, e.message, e.detail, "FATAL"))
            return False
        out = [_msg(b"R", struct.pack("!i", 0))]
        for k, v in (("server_version", "15.0 (sleuth)"), ("server_encoding", "UTF8"),
                     ("client_encoding", "UTF8"), ("DateStyle", "ISO, MDY"),
                     ("integer_datetimes", "on"), ("standard_conforming_strings", "on"),
                     ("TimeZone", "UTC"), ("application_name", params.get("application_name", ""))):
            out.append(_msg(b"S", _cstr(k) + _cstr(v)))
        out.append(_msg(b"K", struct.pack("!ii", id(self) & 0x7FFFFFFF, 0)))
        self.writer.write(b"".join(out))
        self.ready()
        await self.flush()
        return True

    def ready(self) -> None:
        self.out.append(_msg(b"Z", self.session.txn_status().encode()))

    async def flush(self) -> None:
        if self.out:
            self.writer.write(b"".join(self.out))
            self.out.clear()
        await self.writer.drain()

    def error(self, e: BaseException) -> None:
        """An SQLError as it is; anything else is a bug of ours: XX000 with a short message and
        an id, the traceback only in the node's log under that id (a client needs neither the
        engine's internals nor its exception text)."""
        if isinstance(e, SQLError):
            self.out.append(error_response(e.code, e.message, e.detail))
            return
        ref = f"{time.time_ns() & 0xFFFFFFFF:08x}"
        log.error("internal error %s", ref, exc_info=e)
        self.out.append(error_response("XX000", f"internal error {ref} (details in the node's log)"))

    async def run(self) -> None:
        if not await self.startup():
            return
        while True:
            kind, body = await self.read_message()
            if kind == b"X":
                return
            if self.skipping and kind != b"S":
                continue
            handler = HANDLERS.get(kind)
            if handler is None:
                self.out.append(error_response("08P01", f"unsupported message {kind!r}"))
                self.ready()
                await self.flush()
                continue
            await handler(self, body)

    # -- simple query -------------------------------------------------------------

    async def query(self, body: bytes) -> None:
        sql = body.rstrip(b"\0").decode()
        if not sql.strip():
            self.out.append(_msg(b"I"))
        else:
            try:
                for r in await self.run_sql(sql):
                    self.out.append(result_messages(r))
            except Exception as e:
                self.error(e)
        self.ready()
        await self.flush()

    async def run_sql(self, sql: str) -> list[Result]:
        """The engine's results; DEALLOCATE is answered here, where prepared statements live
        (psycopg sends it when its cache of prepared statements is full: refusing it failed
        the client's next statement)."""
        m = _DEALLOCATE.match(sql)
        if m is None:
            return await self.session.execute(sql)
        name = m.group("name")
        if name.lower() == "all":
            self.statements.clear()
            return [Result([], [], "DEALLOCATE ALL")]
        name = name[1:-1].replace('""', '"') if name.startswith('"') else name.lower()
        if self.statements.pop(name, None) is None:
            raise SQLError("26000", f'prepared statement "{name}" does not exist')
        return [Result([], [], "DEALLOCATE")]

    # -- extended query -----------------------------------------------------------

    def _fail(self, e: BaseException) -> None:
        self.error(e)
        self.skipping = True

    async def parse(self, body: bytes) -> None:
        name, rest = body.split(b"\0", 1)
        sql, rest = rest.split(b"\0", 1)
        n = struct.unpack("!h", rest[:2])[0]
        oids = list(struct.unpack(f"!{n}i", rest[2:2 + 4 * n]))
        self.statements[name.decode()] = (sql.decode(), oids)
        self.out.append(_msg(b"1"))

    async def bind(self, body: bytes) -> None:
        try:
            portal, rest = body.split(b"\0", 1)
            stmt, rest = rest.split(b"\0", 1)
            sql, oids = self.statements[stmt.decode()]
            pos = 0
            nf = struct.unpack_from("!h", rest, pos)[0]
            pos += 2
            fmts = list(struct.unpack_from(f"!{nf}h", rest, pos))
            pos += 2 * nf
            np_ = struct.unpack_from("!h", rest, pos)[0]
            pos += 2
            params = []
            for i in range(np_):
                ln = struct.unpack_from("!i", rest, pos)[0]
                pos += 4
                data = None if ln < 0 else rest[pos:pos + ln]
                pos += max(ln, 0)
                fmt = fmts[0] if nf == 1 else (fmts[i] if nf else 0)
                params.append(decode_param(data, oids[i] if i < len(oids) else 0, fmt))
            self.portals[portal.decode()] = {"sql": substitute(sql, params), "results": None,
                                             "described": False}
            self.out.append(_msg(b"2"))
        except KeyError:
            self._fail(SQLError("26000", "prepared statement does not exist"))
        except Exception as e:
            self._fail(e)

    async def _results(self, portal: dict) -> list[Result]:
        if "error" in portal:  # Describe ran it and failed: Execute must not run it again
            raise portal["error"]
        if portal["results"] is None:
            try:
                portal["results"] = await self.run_sql(portal["sql"])
            except Exception as e:
                portal["error"] = e
                raise
        return portal["results"]

    async def describe(self, body: bytes) -> None:
        kind, name = body[:1], body[1:].rstrip(b"\0").decode()
        # Only the lookups answer "does not exist": a KeyError from the engine is a bug (XX000).
        if kind == b"S":
            if name not in self.statements:
                return self._fail(SQLError("26000", f"prepared statement {name!r} does not exist"))
            sql, oids = self.statements[name]
            n = max(len(oids), count_params(sql))
            oids = [(oids[i] if i < len(oids) and oids[i] else 25) for i in range(n)]
            self.out.append(_msg(b"t", struct.pack(f"!h{n}i", n, *oids)))
            self.out.append(_msg(b"n"))  # row shape unknown until it runs
            return
        found = await self._portal_results(name)
        if found is None:
            return
        portal, results = found
        last = results[-1] if results else None
        if last is not None and last.columns:
            self.out.append(row_description(last.columns))
            portal["described"] = True
        else:
            self.out.append(_msg(b"n"))

    async def _portal_results(self, name: str) -> tuple[dict, list] | None:
        """A portal and its results (run once, then kept); None after answering with the error."""
        if name not in self.portals:
            self._fail(SQLError("34000", f"portal {name!r} does not exist"))
            return None
        portal = self.portals[name]
        try:
            return portal, await self._results(portal)
        except Exception as e:
            self._fail(e)
            return None

    async def execute(self, body: bytes) -> None:
        name = body.split(b"\0", 1)[0].decode()
        found = await self._portal_results(name)
        if found is None:
            return
        portal, results = found
        if not results:
            self.out.append(_msg(b"I"))
        for r in results:
            self.out.append(result_messages(r, with_description=not portal["described"]))

    async def sync(self, body: bytes) -> None:
        self.skipping = False
        self.portals.pop("", None)
        self.ready()
        await self.flush()

    async def flush_message(self, body: bytes) -> None:
        await self.flush()

    async def close_message(self, body: bytes) -> None:
        kind, name = body[:1], body[1:].rstrip(b"\0").decode()
        (self.statements if kind == b"S" else self.portals).pop(name, None)
        self.out.append(_msg(b"3"))


HANDLERS = {b"Q": Connection.query, b"P": Connection.parse, b"B": Connection.bind,
            b"D": Connection.describe, b"E": Connection.execute, b"S": Connection.sync,
            b"H": Connection.flush_message, b"C": Connection.close_message}


async def serve(host: str, port: int, session_factory: Any, *, on_ready: Any = None) -> asyncio.base_events.Server:
    """Listen for PostgreSQL clients; each connection gets `session_factory(user, database, params)`."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(reader, writer, session_factory)
        try:
            await conn.run()
            await conn.flush()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except Exception:
            log.exception("connection failed")
        finally:
            if conn.session is not None:
                try:
                    await conn.session.close()
                except Exception:
                    log.exception("session close failed")
            writer.close()

    server = await asyncio.start_server(handle, host, port, reuse_address=True)
    if on_ready is not None:
        on_ready(server)
    return server
