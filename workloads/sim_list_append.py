"""Simulated databases that produce list-append histories of known character.

An event-driven simulation: `concurrency` clients each run one transaction at
a time against an in-memory list-append store. Every transaction is invoked,
reads and writes at chosen instants, and completes; what the store does at
those instants is the database's isolation:

- `serializable`: each transaction takes effect atomically at one instant
  between its invoke and completion, so histories are strict serializable.
- `snapshot-isolation`: reads see the snapshot taken at invoke (plus the
  transaction's own appends); appends install at commit, first committer
  wins (a conflicting later committer fails). Write skew (G2-item) appears;
  G0, G1, G-single and lost updates never do.
- `read-committed`: each read sees what is committed at the instant it runs;
  appends install at commit, no conflict checks. Read skew (G-single), lost
  updates and G2 appear; G0 and G1 never do.
- `stale-reads`: serializable, but read-only transactions are sometimes
  served from a snapshot a few commits old. Serializable, not strict:
  cycles close only through real-time order.

Each appended element is stamped with the number of the commit that
installed it, so a snapshot of the store is just a commit number.
Keys rotate as in Elle's generator: a few are active at once, and a key that
has taken `max_appends` appends is retired for a fresh one. A small share
of transactions fail (no effect) or crash (`info`: took effect or not, and
the client's process is replaced, as in Jepsen). At the end, every key is
read once more, so every version order is pinned.
"""

from __future__ import annotations

import bisect
import heapq
import random
import time as _time
from array import array
from collections.abc import Iterator

import orjson

from sleuth.base.jsonfile import written_whole
from sleuth.workloads import SIM_DBS as DBS  # the one list of their names

FAIL_RATE = 0.01  # transactions the database refuses (nothing happens)
CRASH_RATE = 0.005  # transactions whose client loses the answer (info)
STALE_RATE = 0.3  # read-only transactions a stale-reads database serves late
STALE_LAG = 8  # how many commits back a stale snapshot may be
FINAL_READ_KEYS = 64  # keys per final read transaction


class Store:
    """Committed state: key -> list of appended values, each stamped with the
    number of the commit that installed it, so any past state can be read."""

    def __init__(self) -> None:
        self.lists: dict[int, list[int]] = {}
        self.stamps: dict[int, list[int]] = {}
        self.commits = 0

    def read(self, k: int, as_of: int | None = None) -> list[int]:
        """The list at key k, as of commit number `as_of` (default: now)."""
        lst = self.lists.get(k, ())
        if as_of is None:
            return list(lst)
        return list(lst[: bisect.bisect_right(self.stamps[k], as_of)]) if lst else []

    def append(self, k: int, v: int) -> None:
        self.lists.setdefault(k, []).append(v)
        self.stamps.setdefault(k, []).append(self.commits)

    def commit(self) -> None:
        self.commits += 1

    def freeze(self, k: int) -> None:
        """Key k will only be read once more, now, as of the end: keep its list
        compactly and forget its stamps (a long history's store then grows by a
        few bytes per retired key, not by two objects per append)."""
        self.stamps.pop(k, None)
        if k in self.lists:
            self.lists[k] = array("q", self.lists[k])  # type: ignore[assignment]


class Sim:
    def __init__(self, db: str, txns: int, concurrency: int, keys: int, seed: int,
                 max_appends: int = 32, max_ops: int = 4) -> None:
        if db not in DBS:
            raise ValueError(f"unknown db {db!r}; one of {', '.join(DBS)}")
        self.db, self.n, self.concurrency = db, txns, concurrency
        self.rnd = random.Random(seed)
        self.store = Store()
        self.max_appends, self.max_ops = max_appends, max_ops
        self.active = list(range(keys))
        self.next_key = keys
        self.next_value: dict[int, int] = {}
        self.touching: dict[int, int] = {}  # key -> generated txns on it not yet committed
        self.events: list[tuple] = []  # heap of (time, seq, action, txn)
        self.seq = 0
        self.index = 0
        self.out: list[bytes] = []
        self.stats = {"txns": 0, "ok": 0, "fail": 0, "info": 0}

    # -- generation ---------------------------------------------------------

    def gen_txn(self) -> list[list]:
        rnd = self.rnd
        mops = []
        for _ in range(rnd.randint(1, self.max_ops)):
            slot = rnd.randrange(len(self.active))
            k = self.active[slot]
            if rnd.random() < 0.5:
                v = self.next_value.get(k, 0) + 1
                self.next_value[k] = v
                if v >= self.max_appends:  # retire the key; a fresh one takes its slot
                    self.active[slot] = self.next_key
                    self.next_key += 1
                mops.append(["append", k, v])
            else:
                mops.append(["r", k, None])
        return mops

    def emit(self, t: int, typ: str, process: int, value) -> None:
        self.out.append(orjson.dumps({"index": self.index, "time": t, "type": typ,
                                      "process": process, "f": "txn", "value": value}))
        self.index += 1

    def schedule(self, t: int, action: str, txn: dict) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, action, txn))

    def start(self, process: int, t: int) -> None:
        rnd = self.rnd
        mops = self.gen_txn()
        t0 = t + rnd.randint(0, 2000)
        dur = rnd.randint(200, 20000)
        txn = {"process": process, "mops": mops, "t0": t0, "t1": t0 + dur,
               "commit": t0 + rnd.randint(1, dur - 1), "reads": {}, "fate": "ok"}
        r = rnd.random()
        if r < FAIL_RATE:
            txn["fate"] = "fail"
        elif r < FAIL_RATE + CRASH_RATE:
            txn["fate"] = "info"
            txn["applied"] = rnd.random() < 0.5
        for k in {k for _, k, _ in mops}:
            self.touching[k] = self.touching.get(k, 0) + 1
        self.schedule(t0, "invoke", txn)
        self.stats["txns"] += 1

    # -- the databases ------------------------------------------------------

    def on_invoke(self, t: int, txn: dict) -> None:
        self.emit(t, "invoke", txn["process"], txn["mops"])
        st = self.store
        if self.db == "snapshot-isolation":
            txn["snap"] = st.commits  # the snapshot: everything committed so far
        elif self.db == "read-committed":
            # each read runs at its own instant between invoke and commit
            span = txn["commit"] - t
            for j, (f, _, _) in enumerate(txn["mops"]):
                if f == "r":
                    self.schedule(t + span * (j + 1) // (len(txn["mops"]) + 1), "read", (txn, j))
        self.schedule(txn["commit"], "commit", txn)

    def on_read(self, t: int, arg) -> None:
        txn, j = arg
        _, k, _ = txn["mops"][j]
        txn["reads"][j] = self.store.read(k)

    def on_commit(self, t: int, txn: dict) -> None:
        self._commit(txn)
        active = self.active
        for k in {k for _, k, _ in txn["mops"]}:  # nothing reads the store for this txn again
            left = self.touching.pop(k) - 1
            if left:
                self.touching[k] = left
            elif k not in active and self.next_value.get(k, 0) >= self.max_appends:
                self.store.freeze(k)  # retired, and no txn left on it: only the final read remains

    def _commit(self, txn: dict) -> None:
        fate = txn["fate"]
        if fate == "fail" or (fate == "info" and not txn["applied"]):
            return
        st, mops, db = self.store, txn["mops"], self.db
        result: list[list] = []
        if db in ("serializable", "stale-reads"):
            as_of = None  # a stale-reads database may serve a read-only txn an old state
            if db == "stale-reads" and all(f == "r" for f, _, _ in mops) \
                    and self.rnd.random() < STALE_RATE:
                as_of = max(0, st.commits - self.rnd.randint(1, STALE_LAG))
            for f, k, v in mops:
                if f == "append":
                    st.append(k, v)
                    result.append([f, k, v])
                else:
                    result.append([f, k, st.read(k, as_of)])
            st.commit()
        else:
            own: dict[int, list[int]] = {}
            if db == "snapshot-isolation":
                snap = txn["snap"]
                if any(f == "append" and st.stamps.get(k, (-1,))[-1] >= snap for f, k, _ in mops):
                    txn["fate"] = "fail"  # first committer wins
                    return
            for j, (f, k, v) in enumerate(mops):
                if f == "append":
                    own.setdefault(k, []).append(v)
                    result.append([f, k, v])
                elif db == "snapshot-isolation":
                    result.append([f, k, st.read(k, txn["snap"] - 1) + own.get(k, [])])
                else:
                    result.append([f, k, txn["reads"][j] + own.get(k, [])])
            for f, k, v in mops:
                if f == "append":
                    st.append(k, v)
            st.commit()
        txn["result"] = result

    def on_complete(self, t: int, txn: dict) -> None:
        fate, p = txn["fate"], txn["process"]
        if fate == "ok":
            self.emit(t, "ok", p, txn["result"])
        else:
            self.emit(t, fate, p, txn["mops"])
        self.stats[fate] += 1

    # -- the run ------------------------------------------------------------

    def run(self) -> Iterator[bytes]:
        for p in range(self.concurrency):
            self.start(p, 0)
        started = self.concurrency
        handlers = {"invoke": self.on_invoke, "read": self.on_read, "commit": self.on_commit}
        t = 0
        while self.events:
            t, _, action, arg = heapq.heappop(self.events)
            if action == "commit":
                self.on_commit(t, arg)
                self.schedule(arg["t1"], "complete", arg)
            elif action == "complete":
                self.on_complete(t, arg)
                p = arg["process"]
                if arg["fate"] == "info":
                    p += self.concurrency  # a crashed client's process is never reused
                if started < self.n:
                    self.start(p, t)
                    started += 1
            else:
                handlers[action](t, arg)
            if len(self.out) >= 4096:
                yield b"\n".join(self.out) + b"\n"
                self.out.clear()
        # Final reads of every key ever used, one after another.
        p = max(self.concurrency, 1) * 1_000_000
        keys = sorted(set(self.store.lists) | set(self.next_value))
        for i in range(0, len(keys), FINAL_READ_KEYS):
            chunk = keys[i:i + FINAL_READ_KEYS]
            t += 1000
            self.emit(t, "invoke", p, [["r", k, None] for k in chunk])
            t += 1000
            self.emit(t, "ok", p, [["r", k, self.store.read(k)] for k in chunk])
            self.stats["txns"] += 1
            self.stats["ok"] += 1
        if self.out:
            yield b"\n".join(self.out) + b"\n"
            self.out.clear()


def simulate(db: str, txns: int, concurrency: int = 10, keys: int = 8, seed: int = 0) -> Iterator[bytes]:
    """JSON Lines of a simulated history, in chunks."""
    return Sim(db, txns, concurrency, keys, seed).run()


def write_sim(path: str, db: str, txns: int, concurrency: int = 10, keys: int = 8,
              seed: int = 0) -> dict:
    """Write a simulated history to `path` (whole, or not at all: an interrupted write
    leaves what was there); returns counts and seconds."""
    t = _time.perf_counter()
    sim = Sim(db, txns, concurrency, keys, seed)
    with written_whole(path) as out, open(out, "wb") as fh:
        for chunk in sim.run():
            fh.write(chunk)
    return {**sim.stats, "keys": sim.next_key, "seconds": round(_time.perf_counter() - t, 2)}
