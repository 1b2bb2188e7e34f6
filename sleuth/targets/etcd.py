"""etcd as a target: a cluster of Debian's `etcd` (3.4) processes, and the `etcd` client dialect.

`--target etcd` starts 3 members (`--nodes-count 5` for five) on 127.0.10.1…,
client port 2379 and peer port 2380 on each address, data in a temp dir
(`sleuth.targets.described.LocalCluster`). `--target etcd+serializable-reads`
sends every register read and read-only list-append transaction with
`serializable: true`: answered from the member's own state, without a quorum,
which etcd documents as possibly stale.

The client speaks etcd's v3 JSON gateway over HTTP (`POST /v3/kv/range`,
`/v3/kv/put`, `/v3/kv/txn`, keys and values base64) through the standard
library's `http.client`: the gateway is part of every etcd since 3.3, so no
gRPC stack or client library is needed; one persistent connection per client,
its socket visible to the runner's watchdog.

Workloads (Jepsen's etcd tests, 2020):

- `register`: read = range, write = put, cas = a txn comparing the value and
  putting the new one if equal (a failed compare is `fail`); linearizable per key.
- `list-append`: read every key of the transaction in one txn (one revision),
  then, if it appends, one txn whose compares say each key's mod_revision is
  still the one read and whose success branch puts the new lists (a failed
  compare is `fail`, nothing was written); judged strict serializable.

Errors: a request that could not connect did nothing (`fail`); on a write, a
timeout, a lost connection or an error the server sent after receiving it
(`etcdserver: request timed out`, leader changed, …) may have committed:
`info`. A failed read is always `fail`.
"""

from __future__ import annotations

import base64
import http.client
import json
import shutil
import socket
import urllib.parse
from typing import Any

from sleuth.targets import Unsupported
from sleuth.targets.described import DescribedTarget, Description
from sleuth.workloads.clients import Failed, ListAppend, Register

BUILTIN_ADDRESS = "127.0.10.{i}"
START = ("etcd", "--name", "{name}", "--data-dir", "{data}",
         "--listen-client-urls", "http://{addr}:2379", "--advertise-client-urls", "http://{addr}:2379",
         "--listen-peer-urls", "http://{addr}:2380", "--initial-advertise-peer-urls", "http://{addr}:2380",
         "--initial-cluster", "{peers}", "--initial-cluster-state", "new", "--initial-cluster-token", "{token}")
PEER = "{name}=http://{addr}:2380"
CLIENT = "http://{addr}:2379"
CLOCK_NOTE = "etcd is a Go binary: it reads the clock with its own system calls, which libfaketime does not reach"
OPTIONS = ("serializable-reads",)


def description(count: int = 3) -> Description:
    """The built-in etcd cluster (targets/etcd.toml says the same in a file)."""
    return Description(name="etcd", dialect="etcd", nodes=count, address=BUILTIN_ADDRESS, start=START,
                       client=CLIENT, peer=PEER, env={"ETCD_UNSUPPORTED_ARCH": ""}, clock="none",
                       clock_note=CLOCK_NOTE, leader=True, upload=(shutil.which("etcd") or "/usr/bin/etcd",))


class EtcdTarget(DescribedTarget):
    """`etcd` or `etcd+serializable-reads`."""

    def __init__(self, spec: str = "etcd", count: int | None = None, runtime: str | None = None,
                 nodes_file: str | None = None):
        base, _, opts = spec.partition("+")
        options = frozenset(o for o in opts.split("+") if o)
        for o in options:
            if o not in OPTIONS:
                raise Unsupported(f"--target {spec}: unknown etcd option {o!r} (one of {', '.join(OPTIONS)})")
        if shutil.which("etcd") is None:
            raise Unsupported("--target etcd needs Debian's etcd-server (/usr/bin/etcd); apt-get install etcd-server")
        if count is not None and count not in (1, 3, 5, 7):
            raise Unsupported(f"--nodes-count {count}: etcd runs 1, 3, 5 or 7 members")
        super().__init__(description(count or 3), options, runtime, nodes_file)
        self.name = spec


class EtcdError(Exception):
    """An etcd request that did not succeed. `sent`: did it (maybe) reach the server."""

    def __init__(self, message: str, sent: bool):
        super().__init__(message)
        self.sent = sent


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def unb64(s: str) -> str:
    return base64.b64decode(s).decode()


class EtcdConn:
    """One HTTP/1.1 keep-alive connection to one member's client URL."""

    def __init__(self, url: str, timeout: float):
        u = urllib.parse.urlsplit(url)
        self.http = http.client.HTTPConnection(u.hostname, u.port or 2379, timeout=timeout)

    def call(self, path: str, body: dict) -> dict:
        data = json.dumps(body)
        try:
            if self.http.sock is None:
                self.http.connect()
        except OSError as e:  # nothing was sent
            self.http.close()
            raise EtcdError(f"connect: {type(e).__name__}: {e}", sent=False) from None
        try:
            self.http.request("POST", path, data, {"Content-Type": "application/json"})
            resp = self.http.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException) as e:
            self.http.close()
            kind = "timeout" if isinstance(e, (TimeoutError, socket.timeout)) else type(e).__name__
            raise EtcdError(f"{kind}: {e}".rstrip(": "), sent=True) from None
        try:
            doc = json.loads(raw) if raw else {}
        except ValueError:
            raise EtcdError(f"HTTP {resp.status}: {raw[:200]!r}", sent=True) from None
        if resp.status != 200 or "error" in doc:
            raise EtcdError(f"HTTP {resp.status}: {doc.get('error') or doc.get('message') or raw[:200]!r}",
                            sent=True)
        return doc

    def range(self, key: str, serializable: bool = False) -> dict | None:
        body: dict[str, Any] = {"key": b64(key)}
        if serializable:
            body["serializable"] = True
        kvs = self.call("/v3/kv/range", body).get("kvs") or []
        return kvs[0] if kvs else None

    def put(self, key: str, value: str) -> dict:
        return self.call("/v3/kv/put", {"key": b64(key), "value": b64(value)})

    def txn(self, compare: list[dict], success: list[dict]) -> dict:
        return self.call("/v3/kv/txn", {"compare": compare, "success": success})

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> EtcdConn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EtcdRegister(Register):
    """Registers as etcd keys `r<k>`: range, put, and cas as a txn comparing the value."""

    def __init__(self, keys: int, serializable: bool):
        super().__init__(keys, "etcd")
        self.serializable = serializable

    def setup(self, conn: Any) -> None:
        pass  # a fresh cluster: every key absent (None)

    def perform(self, conn: EtcdConn, f: str, value: Any) -> Any:
        k, v = value
        key = f"r{k}"
        if f == "read":
            kv = conn.range(key, self.serializable)
            got = int(unb64(kv["value"])) if kv else None
            self.seen[k] = got
            return [k, got]
        if f == "write":
            conn.put(key, str(v))
            self.seen[k] = v
            return value
        old, new = v
        resp = conn.txn([{"key": b64(key), "target": "VALUE", "result": "EQUAL", "value": b64(str(old))}],
                        [{"requestPut": {"key": b64(key), "value": b64(str(new))}}])
        if not resp.get("succeeded"):  # proto3's JSON leaves a false out
            raise Failed(f"cas: register {k} did not hold {old}")
        self.seen[k] = new
        return value


class EtcdListAppend(ListAppend):
    """Lists as JSON under keys `l<k>`, appended to by transactions guarded by mod revisions."""

    def __init__(self, keys: int, serializable: bool):
        super().__init__(keys, "etcd")
        self.serializable = serializable

    def setup(self, conn: Any) -> None:
        pass

    def perform(self, conn: EtcdConn, f: str, value: Any) -> Any:
        keys = list(dict.fromkeys(k for _, k, _ in value))
        appends = any(op == "append" for op, _, _ in value)
        ranges = [{"requestRange": {"key": b64(f"l{k}"),
                                    **({"serializable": True} if self.serializable and not appends else {})}}
                  for k in keys]
        try:
            resp = conn.txn([], ranges)  # every key at one revision
        except EtcdError as e:  # a read: nothing was written, whatever happened
            e.sent = False
            raise
        lists: dict[int, list[int]] = {}
        revs: dict[int, str] = {}
        for k, r in zip(keys, resp.get("responses") or [], strict=False):
            kvs = (r.get("response_range") or {}).get("kvs") or []
            lists[k] = json.loads(unb64(kvs[0]["value"])) if kvs else []
            revs[k] = kvs[0]["mod_revision"] if kvs else "0"
        if len(lists) != len(keys):
            raise EtcdError(f"txn read {len(lists)} of {len(keys)} keys", sent=False)
        out = []
        for op, k, v in value:
            if op == "r":
                out.append(["r", k, list(lists[k])])
            else:
                lists[k] = [*lists[k], v]
                out.append([op, k, v])
        if not appends:
            return out
        written = list(dict.fromkeys(k for op, k, _ in value if op == "append"))
        resp = conn.txn([{"key": b64(f"l{k}"), "target": "MOD", "result": "EQUAL", "mod_revision": revs[k]}
                         for k in keys],
                        [{"requestPut": {"key": b64(f"l{k}"), "value": b64(json.dumps(lists[k]))}} for k in written])
        if not resp.get("succeeded"):
            raise Failed("a key changed between the read and the write (mod_revision compare failed)")
        return out


class EtcdDialect:
    """How sleuth's clients and nemeses speak to etcd members (a `DescribedTarget`'s dialect)."""

    knows_leader = True  # `leader()`: each member's status names the leader

    def __init__(self, target: DescribedTarget, options: frozenset[str]):
        self.target = target
        self.serializable = "serializable-reads" in options
        self.member_ids: dict[str, str] = {}  # node -> member id (stable across restarts: kept in its data)

    def connect(self, dsn: str, timeout: float) -> EtcdConn:
        return EtcdConn(dsn, timeout)

    def socket_of(self, conn: EtcdConn) -> int:
        return conn.http.sock.fileno()

    def classify(self, exc: BaseException, writes: bool) -> tuple[str, str, bool] | None:
        if not isinstance(exc, EtcdError):
            return None
        if not writes or not exc.sent:
            return "fail", str(exc), True
        return "info", str(exc), True

    def workload(self, name: str, keys: int) -> Any:
        if name == "register":
            return EtcdRegister(keys, self.serializable)
        if name == "list-append":
            return EtcdListAppend(keys, self.serializable)
        raise Unsupported(f"--workload {name}: etcd runs register and list-append")

    def _status(self, node: str, timeout: float = 1.0) -> dict:
        with EtcdConn(self.target.client_of(node), timeout) as c:
            return c.call("/v3/maintenance/status", {})

    def healthy(self) -> bool:
        """Every member answers its status and names the same leader (a quorum exists)."""
        leaders = set()
        for node in self.target.roles:
            st = self._status(node)
            self.member_ids[node] = st["header"]["member_id"]
            leaders.add(st.get("leader"))
        return len(leaders) == 1 and None not in leaders and "0" not in leaders

    def leader(self) -> str | None:
        """The node the members say leads (asked of each in turn until one answers)."""
        for node in self.target.roles:
            try:
                st = self._status(node)
            except EtcdError:
                continue
            self.member_ids[node] = st["header"]["member_id"]
            lead = st.get("leader")
            for n, mid in self.member_ids.items():
                if mid == lead:
                    return n
        return None
