"""A seeded toy store whose histories are valid under some models and not others.

Transactions run interleaved, one micro-op per tick, on one to three processes.
Each history draws how its store behaves: whether writers take a key's write lock
(no-wait: a transaction that finds the lock taken fails at once), and how reads are
served: the latest committed state, the state when the transaction began (a
snapshot), an older committed state (stale), what is there now, uncommitted
writes included (dirty), or what the process's replica has seen (replica: each
process's replica takes the others' commits one at a time, in random order, and
its own at once). In some histories each transaction writes one key or reads
them all (the shape of a long fork). A transaction then commits, fails (its writes are rolled
back) or crashes (info: it committed or not, at random, and its process is not
used again). Rarely, a read is corrupted (a value nobody wrote, or one that
ignores its own transaction's write). Some histories end with a read of every key.

Output: transactions (process, start, end, type, micro-ops) as tests/brute.py and
tests/judge.py take them; reads of failed and crashed ones hold None.
"""

from __future__ import annotations

import random

MODES = ("latest", "snapshot", "stale", "dirty", "replica")


def simulate(rnd: random.Random, datatype: str, txns: tuple[int, int] = (2, 6)):
    la = datatype == "list-append"
    write = "append" if la else "w"
    keys = ["x", "y", "z"][: rnd.randint(1, 3)]
    locks = rnd.random() < 0.6
    weights = rnd.choice([(1, 0, 0, 0, 0), (0, 1, 0, 0, 0), (2, 1, 1, 0, 0), (1, 1, 0, 1, 0), (0, 0, 1, 1, 0),
                          (1, 0, 0, 2, 0), (0, 0, 0, 1, 0), (1, 0, 1, 3, 0), (1, 0, 1, 0, 0), (0, 1, 1, 0, 0),
                          (0, 0, 0, 0, 1), (0, 0, 0, 0, 1), (0, 0, 1, 0, 4), (0, 1, 0, 0, 2)])
    corrupt = 0.1 if rnd.random() < 0.4 else 0.0
    dirty = weights[3] > 0
    outcomes = (4, 3, 2) if dirty and rnd.random() < 0.7 else rnd.choice([(8, 1, 1), (4, 3, 2)])  # ok, fail, info
    slots = 3 if dirty else rnd.randint(1, 3)
    counter = dict.fromkeys(keys, 0)
    todo = []  # per transaction: [slot, micro-ops]
    split = rnd.random() < 0.3  # each transaction writes one key or reads them all
    for _ in range(rnd.randint(*txns)):
        mops = []
        if split:
            k = rnd.choice(keys)
            if rnd.random() < 0.5 and counter[k] < 4:
                counter[k] += 1
                mops.append([write, k, counter[k]])
            else:
                mops = [["r", k, None] for k in keys]
        for _ in range(0 if split else rnd.randint(1, 5 if dirty else 4)):
            k = rnd.choice(keys)
            if rnd.random() < 0.5 and counter[k] < 4:  # a key's versions: few enough to try every order
                counter[k] += 1
                mops.append([write, k, counter[k]])
            else:
                mops.append(["r", k, None])
        todo.append({"slot": rnd.randrange(slots), "mops": mops, "at": 0})
    process = list(range(slots))
    phys: dict = {k: [] for k in keys}  # key -> [(value, txn)], in the order written
    status: dict[int, str] = {}
    locked: dict = {}  # key -> txn holding its write lock
    versions = [dict.fromkeys(keys, () if la else None)]  # committed states, after each commit
    applied: list[set] = [set() for _ in range(slots)]  # replica mode: the commits each slot has seen
    running: list[dict] = []
    out = []
    clock = 0

    def committed(k):
        vs = [v for v, w in phys[k] if status[w] == "committed"]
        return tuple(vs) if la else (vs[-1] if vs else None)

    def finish(t, typ):
        t["end"], t["type"] = clock, typ
        done = typ == "ok" or (typ == "info" and rnd.random() < 0.5)
        status[id(t)] = "committed" if done else "aborted"
        if not done:
            for k in keys:
                phys[k] = [(v, w) for v, w in phys[k] if w != id(t)]
        else:
            versions.append({k: committed(k) for k in keys})
            applied[t["slot"]].add(id(t))
        for k in [k for k, w in locked.items() if w == id(t)]:
            del locked[k]
        running.remove(t)
        if typ == "info":
            process[t["slot"]] += slots
        out.append(t)

    while todo or running:
        clock += 1
        if rnd.random() < 0.3:  # a replica catches up with one commit, in no particular order
            s = rnd.randrange(slots)
            new = [w for w, st in status.items() if st == "committed" and w not in applied[s]]
            if new:
                applied[s].add(rnd.choice(new))
        busy = {t["slot"] for t in running}
        starters = [next(t for t in todo if t["slot"] == s) for s in {t["slot"] for t in todo} - busy]
        # a dirty store's transactions overlap more: starting one comes first, half the time
        t = rnd.choice(starters if starters and dirty and rnd.random() < 0.5 else running + starters)
        if t not in running:
            todo.remove(t)
            t.update(start=clock, snap=len(versions) - 1, process=process[t["slot"]], done=[])
            status[id(t)] = "running"
            running.append(t)
            continue
        f, k, v = t["mops"][len(t["done"])]
        own = [x for g, kk, x in t["done"] if g != "r" and kk == k]
        if f != "r":
            if locks and locked.get(k, id(t)) != id(t):
                t["done"] += t["mops"][len(t["done"]):]
                finish(t, "fail")
                continue
            locked[k] = id(t)
            phys[k].append((v, id(t)))
            t["done"].append([f, k, v])
        else:
            mode = rnd.choices(MODES, weights)[0]
            if mode == "latest":
                seen = committed(k)
            elif mode == "snapshot":
                seen = versions[t["snap"]][k]
            elif mode == "stale":
                seen = versions[rnd.randrange(len(versions))][k]
            elif mode == "replica":
                vs = [x for x, w in phys[k] if w in applied[t["slot"]]]
                seen = tuple(vs) if la else (vs[-1] if vs else None)
            else:
                vs = [x for x, w in phys[k] if w != id(t) and status[w] != "aborted"]
                seen = tuple(vs) if la else (vs[-1] if vs else None)
            if la:
                seen = [x for x in seen if x not in own] + own
            elif own:
                seen = own[-1]
            if rnd.random() < corrupt:
                seen = ([*seen[:-1], 99] if seen else [99]) if la else 99
            t["done"].append(["r", k, seen])
        if len(t["done"]) == len(t["mops"]):
            finish(t, rnd.choices(["ok", "fail", "info"], outcomes)[0])
    txns = [(t["process"], t["start"], t["end"], t["type"],
             t["done"] if t["type"] == "ok" else [[f, k, None if f == "r" else v] for f, k, v in t["mops"]])
            for t in sorted(out, key=lambda t: t["start"])]
    if rnd.random() < 0.4:
        txns.append((slots * 10, clock + 1, clock + 2, "ok", [["r", k, list(committed(k)) if la else committed(k)]
                                                              for k in keys]))
    return txns


def visibility(rnd: random.Random, datatype: str):
    """A few writers and readers (of every key, or one), each reader seeing a random subset of
    the writers (in their order): read skew, fractured reads, long forks and their
    session and real-time variants are common here, rare in `simulate`. Writers
    write one key, sometimes two; one may fail or crash. Transactions run on two or
    three processes, one at a time each, at random times; in most histories a
    reader sees every write its own process made or saw before it. Rarely a read is corrupt."""
    la = datatype == "list-append"
    write = "append" if la else "w"
    keys = ["x", "y", "z"][: rnd.randint(2, 3)]
    writers = []
    distinct = rnd.sample(keys, len(keys))  # most writers write keys no other one does
    for i in range(rnd.choice((2, 2, 3))):
        ks = rnd.sample(keys, 2) if rnd.random() < 0.2 else [distinct[i % len(keys)]]
        writers.append({"mops": [[write, k, i + 1] for k in ks],
                        "type": rnd.choices(["ok", "fail", "info"], [12, 1, 1])[0]})
    readers = [{"mops": [["r", k, None] for k in (keys if rnd.random() < 0.5 else rnd.sample(keys, 1))],
                "type": "ok"} for _ in range(rnd.choice((2, 2, 3)))]
    procs = rnd.randint(2, 3)
    free, pid = [0] * procs, list(range(procs))
    for t in rnd.sample(writers + readers, len(writers) + len(readers)):
        p = rnd.randrange(procs)
        t["start"] = free[p] + rnd.randint(0, 4)
        t["end"] = t["start"] + rnd.randint(1, 6)
        t["process"] = pid[p]
        free[p] = t["end"] + 1
        if t["type"] == "info":
            pid[p] += procs  # a crashed process is not used again
    # most histories keep sessions: a reader sees what its process wrote or saw before
    sessions = rnd.random() < 0.7
    shown = [w for w in writers if w["type"] != "fail" or rnd.random() < 0.2]
    for r in sorted(readers, key=lambda r: r["start"]):
        before = [t for t in writers + readers if t["process"] == r["process"] and t["end"] < r["start"]]
        had = {id(w) for t in before for w in ([t] if t in writers else t["seen"])} if sessions else set()
        r["seen"] = seen = [w for w in shown if rnd.random() < 0.5 or id(w) in had]
        for m in r["mops"]:
            vs = [v for w in seen for f, k, v in w["mops"] if k == m[1]]
            m[2] = vs if la else (vs[-1] if vs else None)
    if rnd.random() < 0.15:  # as in `simulate`, rarely a corrupt read
        m = rnd.choice(rnd.choice(readers)["mops"])
        m[2] = [*m[2], 99] if la else 99
    out = [(t["process"], t["start"], t["end"], t["type"], t["mops"] if t["type"] == "ok"
            else [[f, k, None if f == "r" else v] for f, k, v in t["mops"]]) for t in writers + readers]
    return sorted(out, key=lambda t: t[1])
