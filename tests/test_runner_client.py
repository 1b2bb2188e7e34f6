"""How a client records an operation it could not even connect for.

Nothing of the operation was sent, so it did not happen: `fail`, not `info`
(an `info` would weaken every checker and retire the client's process). A
server that accepts connections but never answers (a paused one) must not
hang the client: the connection attempt gives up and the operation fails.
"""

from __future__ import annotations

import json
import socket
import threading

from sleuth.run import runner
from sleuth.run.runner import Client, Recorder, RunConfig
from sleuth.targets import Target
from sleuth.workloads.clients import WORKLOADS


class _Target(Target):  # a PostgreSQL-wire target at a port: the base class's psycopg driver
    family = "postgres"

    def __init__(self, port):
        super().__init__()
        self.port = port

    def dsns(self):
        return [("db", f"host=127.0.0.1 port={self.port} user=sleuth dbname=sleuth")]

    def session_sql(self, isolation):
        return []


def _ops(tmp_path, port, f, value):
    cfg = RunConfig(workload="register", concurrency=1)
    rec = Recorder(str(tmp_path / "h.jsonl"))
    client = Client(0, cfg, _Target(port), WORKLOADS["register"](2, "postgres"), rec)
    client.run_op(f, value)
    client.run_op(f, value)
    rec.close()
    return [json.loads(line) for line in open(tmp_path / "h.jsonl")]


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_write_that_could_not_connect_fails_and_keeps_its_process(tmp_path):
    events = _ops(tmp_path, _closed_port(), "write", [0, 5])
    assert [e["type"] for e in events] == ["invoke", "fail", "invoke", "fail"]
    assert {e["process"] for e in events} == {0}
    assert all("not connected" in e["error"] for e in events if e["type"] == "fail")


def test_a_server_that_never_answers_does_not_hang_the_client(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "OP_TIMEOUT", 2.0)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)  # accepts (the kernel completes the handshake) and never says a word
    held = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        events = []
        worker = threading.Thread(target=lambda: events.extend(_ops(tmp_path, srv.getsockname()[1], "write", [1, 7])))
        worker.start()
        worker.join(60)
        assert not worker.is_alive(), "the client hung on a server that never answers"
        assert [e["type"] for e in events] == ["invoke", "fail", "invoke", "fail"]
    finally:
        stop.set()
        t.join(2)
        for c in held:
            c.close()
        srv.close()


def test_clients_are_spread_evenly_over_a_clusters_nodes(tmp_path):
    """Each client's first connection goes to node slot mod n (seeded draws had put 1 client of
    10 on one of three Galera nodes, 6 on another); reconnections still draw at random."""
    class Three(Target):
        def dsns(self):
            return [("n1", "a"), ("n2", "b"), ("n3", "c")]

        def connect(self, dsn, timeout):
            return object()

    cfg = RunConfig(workload="register", concurrency=9)
    rec = Recorder(str(tmp_path / "h.jsonl"))
    clients = [Client(i, cfg, Three(), WORKLOADS["register"](2, "mysql"), rec) for i in range(9)]
    for c in clients:
        c.connect()
    assert [c.node for c in clients] == ["n1", "n2", "n3"] * 3
    rec.close()
