"""The pgwire server's error path, over real TCP with psycopg: a bug in the engine behind
it reaches the client as XX000 with a short message, its traceback only in the log."""

from __future__ import annotations

import asyncio
import logging
import threading

import psycopg
import pytest

from sleuth.cluster import pgwire


class Broken:
    """A session whose engine fails the way a bug does: an exception that is no SQLError."""

    def txn_status(self) -> str:
        return "I"

    async def execute(self, text: str) -> list:
        if text.strip().upper() == "SELECT 1":
            return [pgwire.Result([("one", 20)], [(1,)], "SELECT 1")]
        raise KeyError("<class 'sqlglot.expressions.Div'> internals")

    async def close(self) -> None:
        pass


@pytest.fixture
def server():
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box = {}

    def run() -> None:
        asyncio.set_event_loop(loop)

        async def main() -> None:
            box["server"] = await pgwire.serve("127.0.0.1", 0, lambda *a: Broken())
            ready.set()
            await box["server"].serve_forever()
        try:
            loop.run_until_complete(main())
        except asyncio.CancelledError:
            pass

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert ready.wait(10)
    yield box["server"].sockets[0].getsockname()[1]
    loop.call_soon_threadsafe(box["server"].close)
    t.join(5)


def test_internal_error_is_xx000_with_a_short_message_and_the_traceback_in_the_log(server, caplog):
    caplog.set_level(logging.ERROR, logger="sleuth.pgwire")
    with psycopg.connect(host="127.0.0.1", port=server, user="u", dbname="d", autocommit=True) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(psycopg.errors.InternalError_) as e:
            conn.execute("SELECT 7 / 2")  # simple query
        with pytest.raises(psycopg.errors.InternalError_) as e2:
            conn.execute("SELECT %s / 2", (7,), prepare=True)  # extended query
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection survives
    for err in (e.value, e2.value):
        assert err.sqlstate == "XX000"
        msg = err.diag.message_primary
        assert "internal error" in msg and "sqlglot" not in msg and "KeyError" not in msg
        ref = msg.split()[2]
        traced = [r for r in caplog.records if ref in r.getMessage()]
        assert traced and traced[0].exc_info and traced[0].exc_info[0] is KeyError
