"""The rw-register and source online engines are prefix-sound, as tests/test_online.py shows
for list-append and registers: fed one event at a time, whatever they have reported after
any prefix is an anomaly of the whole history (by brute force over serial orders, and
offline) and of the prefix alone (offline, its pending operations as info).
"""

import json
import random
import select
import subprocess

import orjson
import pytest
from brute import serial_order_exists
from test_check_follow import SLEUTH, end_marker
from test_cycles_bruteforce import to_history, transactions
from test_online import online, prefix

from sleuth.checker import cycles, models, rw_register
from sleuth.checker.online import Feed
from sleuth.checker.online.rw_register import Engine
from sleuth.checker.source import check_source
from sleuth.history.jsonl import Event, History, read_jsonl

BRUTE_MODELS = ("serializable", "strong-session-serializable", "strict-serializable")
MODELS = (*BRUTE_MODELS, "snapshot-isolation", "repeatable-read", "read-committed")
CYCLE_TYPES = set(cycles.TYPES)


def rw_txns(rnd):
    """Three to six rw-register transactions on x and y (one in ten failing, one in ten
    crashing), executed in a random serial order half the time (reads see what that
    order left, so strict models often hold), else reading any value some transaction
    wrote, nil, or now and then one nobody wrote."""
    txns = [list(t) for t in transactions(rnd, ["x", "y"], (3, 6), write="w")]
    written = {k: [v for t in txns for f, kk, v in t[4] if f == "w" and kk == k] for k in "xy"}
    serial = rnd.random() < 0.5
    state: dict = {}
    for t in sorted(txns, key=lambda t: rnd.uniform(t[1], t[2])) if serial else txns:
        own: dict = {}
        out = []
        for f, k, v in t[4]:
            if f == "w":
                own[k] = v
            elif k in own:
                v = own[k]
            elif serial:
                v = state.get(k)
            else:
                v = rnd.choice([None, *written[k], 99] if rnd.random() < 0.1 else [None, *written[k]])
            out.append([f, k, v])
        t[4] = out
        if serial and (t[3] == "ok" or (t[3] == "info" and rnd.random() < 0.5)):
            state.update(own)
    return [tuple(t) for t in txns]


def brute_txns(txns):
    return [(p, s, e, typ, mops if typ == "ok" else [[f, k, None if f == "r" else v] for f, k, v in mops])
            for p, s, e, typ, mops in txns]


def rw_online(events, model, sweep, wfr_keys=True):
    """`online` for the rw-register engine sweeping when it keeps `sweep` transactions (1: it
    forgets all it may at every invoke)."""
    found = []
    engine = Engine(History([], "h"), model, found.append, wfr_keys=wfr_keys, sweep=sweep)
    feed = Feed(engine.history, engine)
    marks = []
    for e in events:
        feed.event(e.type, e.process, e.f, e.value, e.time)
        marks.append(len(found))
    return found, marks, engine


@pytest.mark.parametrize("sweep", [1, 10**9])
def test_rw_register_every_prefix_is_sound(sweep):
    """Forgetting all it may at every transaction (sweep 1) or nothing."""
    reported = types = forgotten = 0
    names = set()
    for seed in range(150):
        rnd = random.Random(47_000 + seed)
        txns = rw_txns(rnd)
        h = to_history(txns)
        offline = {m: rw_register.check(h, m) for m in MODELS}
        brute = {m: serial_order_exists(brute_txns(txns), m, registers=True) for m in BRUTE_MODELS}
        for model in MODELS:
            found, marks, engine = rw_online(h.events, model, sweep)
            forgotten += engine.forgotten
            reported += bool(found)
            for f in found:
                names.add(f.name)
                where = (seed, model, f.name, f.explanation, txns)
                assert models.forbids(model, f.name), where
                for m in MODELS:
                    if models.forbids(m, f.name):
                        assert offline[m].valid is False, where
                        if m in brute:
                            assert brute[m] is False, where
                if f.name in CYCLE_TYPES:  # offline finds a cycle there too (it may name it otherwise)
                    assert set(offline[model].anomaly_types) & CYCLE_TYPES, where
                else:
                    assert f.name in offline[model].anomaly_types, where
                types += f.name in offline[model].anomaly_types
            for n, count in enumerate(marks, 1):
                if count and (n == 1 or marks[n - 2] < count):  # something new at this prefix
                    assert rw_register.check(prefix(h.events, n), model).valid is False, (seed, model, n, txns)
    assert reported > 100 and types > 100, (reported, types)
    # cycles, G1a/G1b and the transactions' own anomalies all occur: the test is not vacuous
    assert {"G1a", "G1b", "G1c", "G-single-realtime", "future-read"} <= names, names
    assert (forgotten > 1000) is (sweep == 1), forgotten


@pytest.mark.parametrize("sweep", [1, 10**9])
def test_a_certified_rw_register_verdict_is_offline_s_on_every_prefix(sweep):
    """Whenever the rw-register engine certifies a prefix (so `--follow` skips the offline
    pass), offline finds that prefix valid with no anomaly of any type, with the same notes
    (not brute force: offline itself misses what blind writes leave unordered, and the
    certified verdict is offline's, not more). Only models with real-time order are certified (the
    engine adds real-time edges only for them). Not vacuous: many prefixes are certified,
    among them some whose only cycle offline would find through the rule that readers of nil
    precede first writes, and many invalid ones are refused."""
    from sleuth.checker.online import Feed
    from sleuth.checker.online.rw_register import Engine

    certified = refused = forgotten = 0
    for seed in range(150):
        rnd = random.Random(47_500 + seed)
        txns = rw_txns(rnd)
        h = to_history(txns)
        for model in ("strict-serializable", "serializable"):
            for n in range(1, len(h.events) + 1):
                p = prefix(h.events, n)
                e = Engine(History([], "h"), model, lambda f: None, sweep=sweep)
                feed = Feed(e.history, e)
                for x in p.events:
                    feed.event(x.type, x.process, x.f, x.value, x.time)
                e.finish()
                if e.certified():
                    assert model == "strict-serializable"
                    certified += 1
                    forgotten += e.forgotten
                    off = rw_register.check(p, model)
                    where = (seed, model, n, [x.to_dict() for x in p.events])
                    assert off.valid is True and not off.anomalies and off.notes == e.result(model).notes, where
                elif model == "strict-serializable" and rw_register.check(p, model).valid is False:
                    refused += 1
    assert certified > 300 and refused > 200, (certified, refused)
    assert (forgotten > 300) is (sweep == 1), forgotten  # certified after forgetting, too


def test_rw_register_readers_of_nil_precede_first_writes_online():
    """T1 wrote x = 1 (blind: a first value of x) and committed before T2 began; T2 read
    x = nil. Offline: T2 -rw-> T1 (readers of nil precede first values) and T1 -rt-> T2,
    a G-single-realtime. Online the same cycle is found at T2's completion, not certified."""
    rows = [("invoke", 0, [["w", "x", 1]]), ("ok", 0, [["w", "x", 1]]),
            ("invoke", 1, [["r", "x", None]]), ("ok", 1, [["r", "x", None]])]
    assert rw_register.check(History(ev(rows), "h"), "strict-serializable").anomaly_types == ["G-single-realtime"]
    found, marks = online(ev(rows), "rw-register", "strict-serializable")
    assert [(f.name, f.line) for f in found] == [("G-single-realtime", 4)], found


def serial_rw_history(path, n, rnd, stale=False, per_client=False):
    """n rw-register transactions of five clients on eight keys, each taking effect at its
    completion (a strict serializable database); with `stale`, one read in fifty returns a
    value the key held earlier. Values count up from 1, or with `per_client` as sleuth's
    clients write them (client c's n-th value is n * 1000 + c + 1: not increasing per key)."""
    state, old, t, nxt, pending, done = {}, {}, 0, 1, {}, 0
    counts = [0] * 5
    with open(path, "w") as out:
        def emit(d):
            nonlocal t
            out.write(json.dumps({"index": t, "time": t, **d}) + "\n")
            t += 1
        while done < n or pending:
            p = rnd.randrange(5)
            if p in pending:
                res = []
                for f, k, v in pending.pop(p):
                    if f == "w":
                        old.setdefault(k, []).append(v)
                        state[k] = v
                    else:
                        v = rnd.choice(old[k][:-1]) if stale and len(old.get(k, ())) > 1 and rnd.random() < 0.02 \
                            else state.get(k)
                    res.append([f, k, v])
                emit({"type": "ok", "process": p, "f": "txn", "value": res})
            elif done < n:
                mops = []
                for _ in range(rnd.randint(1, 3)):
                    k = rnd.randrange(8)
                    mops.append(["r", k, None] if rnd.random() < 0.5
                                else ["w", k, counts[p] * 1000 + p + 1 if per_client else nxt])
                    nxt += 1
                    counts[p] += 1
                pending[p] = mops
                done += 1
                emit({"type": "invoke", "process": p, "f": "txn", "value": mops})
        emit({"type": "info", "process": "nemesis", "f": "end"})


@pytest.mark.parametrize("stale", [False, True])
def test_rw_register_follow_skips_the_final_pass_only_when_certified(tmp_path, stale):
    from test_check_follow import run

    path = tmp_path / "h.jsonl"
    serial_rw_history(str(path), 2000, random.Random(5), stale)
    r = run("check", "-w", "rw-register", "--follow", str(path), "--json")
    offline = json.loads(run("check", "-w", "rw-register", str(path), "--json").stdout)
    record = json.loads(r.stdout.splitlines()[-1])
    assert (record["valid"], record["anomaly-types"]) == (offline["valid"], offline["anomaly-types"])
    assert r.returncode == (1 if stale else 0), r.stderr
    assert record["online"]["final-pass"] == ("offline" if stale else "none")


@pytest.mark.parametrize("db", ["serial", "stale"])
def test_rw_register_memory_is_flat_over_a_long_stream(tmp_path, db):
    """20,000 transactions swept from 1,000 kept on: what the engine keeps (transactions,
    graph nodes and edges, readers, pairs, first values, forgotten latest values) is no
    larger after 20,000 than after 7,000, and it forgets over 16,000 (counted, not timed).
    A strict serializable history then ends certified with no gap, as offline judges it
    valid; stale reads of forgotten writes are gaps (and found online when they close a
    cycle), never certified. The forgotten values themselves stay, packed (8 bytes each):
    the valid stream's are sleuth's clients' (not increasing per key), the stale one's count up."""
    from sleuth.checker.online import Feed
    from sleuth.checker.online.rw_register import Engine

    path = tmp_path / "h.jsonl"
    serial_rw_history(str(path), 20_000, random.Random(8), stale=db == "stale", per_client=db == "serial")
    h = History([], str(path))
    found = []
    engine = Engine(h, "strict-serializable", found.append, sweep=1000)
    feed = Feed(h, engine)
    sizes = {}

    def size():
        return {"ops": len(engine.ops), "nodes": len(engine.deps.graph), "edges": engine.deps.graph.edges(),
                "writers": len(engine.writer), "readers": sum(map(len, engine.readers.values())),
                "succ": sum(map(len, engine.succ.values())), "firsts": sum(map(len, engine.firsts.values())),
                "tops": sum(map(len, engine.tops.values())), "judged": len(engine.judged)}

    with open(path, "rb") as f:
        for line in f:
            e = orjson.loads(line)
            feed.event(e["type"], e["process"], e["f"], e.get("value"), e["time"])
            if engine.n in (7_000, 20_000) and engine.n not in sizes:
                sizes[engine.n] = size()
    early, late = sizes[7_000], sizes[20_000]
    assert all(v <= 6 * 2000 for v in (early["ops"], late["ops"])), (early, late)
    assert all(late[k] <= 3 * max(early[k], 500) for k in early), (early, late)
    assert late["tops"] <= 8 * 5, late  # at most the concurrent writes per key
    assert engine.forgotten > 16_000 and engine.gone.count > 10_000, engine.stats()
    engine.finish()
    offline = rw_register.check(read_jsonl(str(path)), "strict-serializable")
    if db != "stale":
        assert not found and not engine.deps.gaps and engine.certified(), engine.deps.gaps
        assert offline.valid is True and not offline.anomalies
    else:
        assert not engine.certified() and offline.valid is False
        assert "a read of a forgotten write not known to be its key's latest" in engine.deps.gaps


def test_rw_register_a_value_written_again_after_its_writer_was_forgotten_is_refused():
    """Offline refuses a value written twice to one key, at the second write's line; online
    too when the first writer is long forgotten (the forgotten values are kept exactly)."""
    from sleuth.history.jsonl import HistoryError

    rows = [("invoke", 0, [["w", "x", 7]]), ("ok", 0, [["w", "x", 7]])]
    rows += [r for i in range(5) for r in (("invoke", 1, [["w", "y", i]]), ("ok", 1, [["w", "y", i]]))]
    rows += [("invoke", 2, [["w", "x", 7]]), ("ok", 2, [["w", "x", 7]])]
    with pytest.raises(HistoryError) as offline:
        rw_register.check(History(ev(rows), "h"))
    with pytest.raises(HistoryError) as online_:
        _, _, engine = rw_online(ev(rows), "strict-serializable", 1)
    assert str(offline.value).split(":")[:2] == str(online_.value).split(":")[:2] == ["h", "13"]
    _, _, engine = rw_online(ev(rows[:-2]), "strict-serializable", 1)
    assert engine.forgotten >= 5 and ("x", 7) not in engine.writer  # it was forgotten, not kept


def test_rw_register_a_final_read_of_a_quiet_key_is_judged_after_its_writer_is_forgotten():
    """x is written once, then only y for a while (x's writer forgotten); a read of x = 1 then
    is judged without a gap (the write is x's latest: no committed write of x followed it),
    and the history is certified, as offline finds it valid. A read of x's older value
    after a later write of x (stale, under strict serializability) is a gap instead."""
    rows = [("invoke", 0, [["w", "x", 1]]), ("ok", 0, [["w", "x", 1]])]
    rows += [r for i in range(5) for r in (("invoke", 1, [["r", "y", None], ["w", "y", i]]),
                                           ("ok", 1, [["r", "y", i - 1 if i else None], ["w", "y", i]]))]
    final = [("invoke", 2, [["r", "x", None], ["r", "y", None]]), ("ok", 2, [["r", "x", 1], ["r", "y", 4]])]
    found, _, engine = rw_online(ev(rows + final), "strict-serializable", 1)
    engine.finish()
    assert engine.forgotten >= 6 and not found and not engine.deps.gaps and engine.certified()
    assert rw_register.check(History(ev(rows + final), "h")).valid is True
    stale = [("invoke", 3, [["w", "x", 2]]), ("ok", 3, [["w", "x", 2]])] + rows[2:] + final
    _, _, engine = rw_online(ev(rows[:2] + stale), "strict-serializable", 1)
    engine.finish()
    assert not engine.certified() and engine.deps.gaps


def ev(rows, f="txn"):
    """[(type, process, value)] -> events, each at its own time."""
    return [Event(i, i, t, p, f, v) for i, (t, p, v) in enumerate(rows)]


def test_rw_register_read_skew_is_found_at_the_line_that_closes_it():
    """T1 read x = 1 and wrote x = 2 and y = 1 (writes follow reads: 1 < 2 in x);
    T2 saw T1's y but the x before it: G-single, at T2's completion (line 6)."""
    rows = [("invoke", 0, [["w", "x", 1]]), ("ok", 0, [["w", "x", 1]]),
            ("invoke", 1, [["r", "x", None], ["w", "x", 2], ["w", "y", 1]]),
            ("ok", 1, [["r", "x", 1], ["w", "x", 2], ["w", "y", 1]]),
            ("invoke", 2, [["r", "y", None], ["r", "x", None]]), ("ok", 2, [["r", "y", 1], ["r", "x", 1]])]
    found, marks = online(ev(rows), "rw-register", "serializable")
    assert [(f.name, f.line) for f in found] == [("G-single", 6)] and marks == [0, 0, 0, 0, 0, 1]
    assert "T2 read key 'x' = 1, which T1 overwrote with 2" in found[0].explanation, found[0].explanation
    assert "G-single" in rw_register.check(History(ev(rows), "h"), "serializable").anomaly_types
    assert online(ev(rows), "rw-register", "serializable", wfr_keys=False)[0] == []  # as offline


def test_rw_register_g1a_waits_for_the_writer_and_a_future_write_closes_a_cycle():
    # a read of a pending write is nothing until the writer fails
    rows = [("invoke", 0, [["w", "x", 1]]), ("invoke", 1, [["r", "x", None]]), ("ok", 1, [["r", "x", 1]]),
            ("fail", 0, [["w", "x", 1]])]
    found, marks = online(ev(rows), "rw-register", "read-committed")
    assert [(f.name, f.line) for f in found] == [("G1a", 4)] and marks == [0, 0, 0, 1]
    # a read of a value whose write is invoked only after the read completed: under strict
    # serializability the write must follow the read (real time) and precede it (wr)
    rows = [("invoke", 0, [["r", "x", None]]), ("ok", 0, [["r", "x", 5]]),
            ("invoke", 1, [["w", "x", 5]]), ("ok", 1, [["w", "x", 5]])]
    found, _ = online(ev(rows), "rw-register", "strict-serializable")
    assert [(f.name, f.line) for f in found] == [("G1c-realtime", 4)]
    assert rw_register.check(History(ev(rows), "h"), "strict-serializable").valid is False
    # the same read with no such write ever: a garbage read, which only the end can tell
    assert online(ev(rows[:2]), "rw-register", "strict-serializable")[0] == []


# -- source ------------------------------------------------------------------------


def source_history(rnd):
    """Appends (some failing, some crashing) of values 1.. to an upstream log, numbered in
    commit order, with reads, real-time-recent reads, acks and a final read; the cluster's
    view lags, and now and then repeats, skips or invents a row, or shows a row out of place."""
    evs, log, t = [], [], 0
    ids = [0, 1, 2]  # a client's process id: a fresh one after a crash (info), as Jepsen's
    pending: dict = {}  # client -> its completion, still to come
    lsn = value = 0
    for _ in range(rnd.randint(3, 9)):
        c = rnd.randrange(3)
        if c in pending:
            typ, f, out = pending.pop(c)
            evs.append((t, typ, ids[c], f, out))
        else:
            f = rnd.choice(["append", "append", "read", "rtr-read", "ack"])
            if f == "append":
                value += 1
                evs.append((t, "invoke", ids[c], f, value))
                fate = rnd.choices(["ok", "fail", "info"], [8, 1, 1])[0]
                if fate != "fail":
                    log.append(value)
                    lsn += 10
                if fate == "info":
                    ids[c] += 3
                else:
                    out = {"v": value, "n": len(log), "lsn": lsn, "after": lsn} if fate == "ok" else value
                    pending[c] = (fate, f, out)
            else:
                evs.append((t, "invoke", ids[c], f, None))
                if f == "ack":
                    pending[c] = ("ok", f, max(0, lsn - 10 * rnd.randint(0, 2)))
                else:
                    pending[c] = ("ok", f, _view(rnd, log))
        t += 1
    for c, (typ, f, out) in pending.items():
        if rnd.random() < 0.7:
            evs.append((t, typ, ids[c], f, out))
            t += 1
    evs.append((t, "invoke", 9, "final-read", None))
    evs.append((t + 1, "ok", 9, "final-read", _view(rnd, log)))
    return [Event(i, tt, typ, p, f, v) for i, (tt, typ, p, f, v) in enumerate(evs)]


def _view(rnd, log):
    """What a read shows: the log or a prefix of it (lag), with a fault now and then."""
    rows = [[n, v] for n, v in enumerate(log, 1)][: len(log) if rnd.random() < 0.6 else rnd.randint(0, len(log))]
    fault = rnd.random()
    if rows and fault < 0.08:
        rows.append(list(rnd.choice(rows)))  # a change ingested twice
    elif len(rows) > 1 and fault < 0.16:
        del rows[rnd.randrange(len(rows) - 1)]  # a change skipped
    elif fault < 0.2:
        rows.append([len(rows) + 1, 1000 + len(rows)])  # a row no append wrote
    elif len(rows) > 1 and fault < 0.24:
        rows[0], rows[1] = [1, rows[1][1]], [2, rows[0][1]]  # two values under swapped numbers
    return rows


def test_source_every_prefix_is_sound():
    reported = 0
    names = set()
    for seed in range(400):
        events = source_history(random.Random(4_700 + seed))
        whole = check_source(History(events, "h"))
        found, marks = online(events, "source")
        reported += bool(found)
        for f in found:
            names.add(f.name)
            assert f.name in whole.anomaly_types, (seed, f.name, f.explanation, [e.to_dict() for e in events])
        for n, count in enumerate(marks, 1):
            if count and (n == 1 or marks[n - 2] < count):
                got = check_source(prefix(events, n))
                new = {f.name for f in found[marks[n - 2] if n > 1 else 0:count]}
                assert new <= set(got.anomaly_types), (seed, n, new, got.anomaly_types)
    assert reported > 100, reported
    assert {"duplicate-change", "skipped-change", "invented-change", "stale-rtr-read", "lost-change"} <= names, names


def test_source_a_lost_change_is_found_at_the_final_read():
    rows = [("invoke", 0, "append", 1), ("ok", 0, "append", {"v": 1, "n": 1, "lsn": 5, "after": 5}),
            ("invoke", 1, "read", None), ("ok", 1, "read", []),  # a plain read may lag
            ("invoke", 2, "final-read", None), ("ok", 2, "final-read", [])]
    events = [Event(i, i, t, p, f, v) for i, (t, p, f, v) in enumerate(rows)]
    found, marks = online(events, "source")
    # a final read is real-time recent too: stale as well, as offline says
    assert [(f.name, f.line) for f in found] == [("lost-change", 6), ("stale-rtr-read", 6)], found
    assert marks == [0, 0, 0, 0, 0, 2]
    assert check_source(History(events, "h")).anomaly_types == ["lost-change", "stale-rtr-read"]


@pytest.mark.parametrize("workload", ["rw-register", "source"])
def test_engines_refuse_what_offline_refuses(workload):
    from sleuth.checker import WORKLOADS
    from sleuth.checker.online import Feed, engine_for
    from sleuth.history.jsonl import HistoryError

    h = History([], "h")
    feed = Feed(h, engine_for(workload, h, None, lambda f: None, {}))
    with pytest.raises(HistoryError) as online_error:
        feed.event("invoke", 0, "bogus", None, 0)
    with pytest.raises(HistoryError) as offline_error:
        WORKLOADS[workload].checker()(History([Event(0, 0, "invoke", 0, "bogus", None)], "h"))
    assert str(online_error.value) == str(offline_error.value) and str(online_error.value).startswith("h:1: ")


def test_source_an_ack_rule_online_waits_for_appends_still_pending():
    """The ack confirmed LSN 20; when the read completes only n=1 (after 10) is known at or
    below it, but the pending append commits n=2 at LSN 15. The read shows 2 and not 1:
    offline, the acknowledged number is 2, which the read shows (a skipped change, not an
    acknowledged one missing), so online must not call it acknowledged-not-visible."""
    rows = [("invoke", 0, "append", 1), ("ok", 0, "append", {"v": 1, "n": 1, "lsn": 10, "after": 10}),
            ("invoke", 1, "append", 2), ("invoke", 2, "ack", None), ("ok", 2, "ack", 20),
            ("invoke", 3, "read", None), ("ok", 3, "read", [[2, 2]]),
            ("ok", 1, "append", {"v": 2, "n": 2, "lsn": 15, "after": 15})]
    events = [Event(i, i, t, p, f, v) for i, (t, p, f, v) in enumerate(rows)]
    found, _ = online(events, "source")
    assert [(f.name, f.line) for f in found] == [("skipped-change", 7)], found
    assert check_source(History(events, "h")).anomaly_types == ["skipped-change"]


# -- through `sleuth check --follow` ---------------------------------------------------


def serial_rw(n, rnd):
    """`n` rw-register transactions one after another (strictly serializable): each reads
    one of five keys and writes another, or writes one."""
    state, out, value = {}, [], 0
    for i in range(n):
        a, b = rnd.sample(range(5), 2)
        value += 1
        mops = [["r", a, state.get(a)], ["w", b, value]] if i % 2 else [["w", b, value]]
        state[b] = value
        out.append({"type": "invoke", "process": i % 3, "f": "txn",
                    "value": [[f, k, None if f == "r" else v] for f, k, v in mops]})
        out.append({"type": "ok", "process": i % 3, "f": "txn", "value": mops})
    return out


def serial_source(n):
    out, log = [], []
    for i in range(n):
        if i % 2:
            out += [{"type": "invoke", "process": 0, "f": "append", "value": i},
                    {"type": "ok", "process": 0, "f": "append",
                     "value": {"v": i, "n": len(log) + 1, "lsn": i, "after": i}}]
            log.append([len(log) + 1, i])
        else:
            out += [{"type": "invoke", "process": 1, "f": "rtr-read", "value": None},
                    {"type": "ok", "process": 1, "f": "rtr-read", "value": list(log)}]
    return out


def planted_stream(workload):
    """2,000 lines of a valid history, then an anomaly completed at a known line, then more:
    (lines, that line, the anomaly)."""
    if workload == "rw-register":
        events = serial_rw(1000, random.Random(1))
        # read skew on fresh keys: T1 read x = 1, wrote x = 2 and y = 1; T2 saw y = 1, x = 1
        skew = [(90, [["w", "x", 1]], [["w", "x", 1]]),
                (91, [["r", "x", None], ["w", "x", 2], ["w", "y", 1]], [["r", "x", 1], ["w", "x", 2], ["w", "y", 1]]),
                (92, [["r", "y", None], ["r", "x", None]], [["r", "y", 1], ["r", "x", 1]])]
        plant = [e for p, inv, ok in skew for e in ({"type": "invoke", "process": p, "f": "txn", "value": inv},
                                                    {"type": "ok", "process": p, "f": "txn", "value": ok})]
        rest, name = serial_rw(300, random.Random(2)), "G-single"
        rest = [{**e, "value": [[f, k + 10, v + 10_000 if f == "w" else (v if v is None else v + 10_000)]
                               for f, k, v in e["value"]]} for e in rest]
    else:
        events = serial_source(1000)
        log = events[-1]["value"] if events[-1]["f"] == "rtr-read" else events[-3]["value"]
        plant = [{"type": "invoke", "process": 5, "f": "rtr-read", "value": None},
                 {"type": "ok", "process": 5, "f": "rtr-read", "value": log[:-1]}]  # misses the last change
        rest, name = [e for e in serial_source(1000)[-600:] if e["f"] == "rtr-read"][:300], "stale-rtr-read"
        rest = [{**e, "value": log} for e in rest]
    events = events + plant + rest + [end_marker(0)]
    lines = [orjson.dumps({"index": i, "time": i * 1000, **e}) + b"\n" for i, e in enumerate(events)]
    return lines, 2000 + len(plant), name


@pytest.mark.parametrize("workload", ["rw-register", "source"])
def test_planted_anomaly_is_reported_before_the_stream_ends(workload, tmp_path):
    lines, bad_line, name = planted_stream(workload)
    proc = subprocess.Popen([SLEUTH, "check", "-w", workload, "--follow", "-", "--json"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(b"".join(lines[:bad_line]))
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 30)  # bounded: no hang if nothing comes
        assert ready, "nothing reported while the stream was open"
        first = orjson.loads(proc.stdout.readline())  # the anomaly, while the writer still writes
        proc.stdin.write(b"".join(lines[bad_line:]))
        proc.stdin.close()
        rest = proc.stdout.read().splitlines()
        status = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert first["event"] == "anomaly" and first["anomaly"] == name and first["line"] == bad_line, first
    assert first["time"] == (bad_line - 1) * 1000  # when it happened: its completing line's time
    record = orjson.loads(rest[-1])
    path = tmp_path / "h.jsonl"
    path.write_bytes(b"".join(lines))
    offline = json.loads(subprocess.run([SLEUTH, "check", "-w", workload, str(path), "--json"],
                                        capture_output=True, text=True, timeout=120).stdout)
    assert status == 1 and record["valid"] is False
    assert record["anomaly-types"] == offline["anomaly-types"] and name in record["anomaly-types"]
    assert record["online"]["found"][0] == {"anomaly": name, "first-line": bad_line}


# -- forgetting in one batch (issue 47: the list-append engine certified a G1c so) ------------

ONE_BATCH = "a read of a forgotten write not known to be its key's latest"
NIL_GONE = "a read of nil after a first value's writer was forgotten"


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("wfr", [True, False])
@pytest.mark.parametrize("late, anomaly, gap", [
    ([["r", "x", 1]], "G-single-realtime", ONE_BATCH),  # stale: T1 overwrote 1 (rw T2 -> T1)
    ([["r", "x", 1], ["w", "x", 3]], "lost-update", ONE_BATCH),  # T1 read 1 and wrote x too
    ([["r", "y", None]], "G-single-realtime", NIL_GONE),  # y = nil: before T1's first value of y
])
def test_rw_register_a_late_edge_into_one_forgotten_batch_is_a_gap(late, anomaly, gap, wfr, overlap):
    """T0 writes x = 1; T1 reads it (wr T0 -> T1), overwrites it with 2 and writes y = 1 (a
    first value of y). Both are forgotten in one sweep (sweep 2, at T2's invoke), T0 before
    T1 (the graph's order), so T1's pair 1 < 2 takes 1 out of x's readable forgotten values
    after T0 put it there. Then T2, begun after both completed, reads what puts it before T1:
    x = 1 (rw T2 -> T1, and with its write of x a lost update beside T1's), or y = nil (the
    rule that readers of nil precede first values). Offline finds the anomaly; online the edge
    into the batch is a gap, never a certified valid verdict. (The list-append engine's bug,
    f1229d3: such a late edge against a batch was accepted without one.) With `overlap` T1
    begins before T0 completes, so real time does not retire x = 1 when T1's 2 is kept:
    only T1's pair does. Without writes following reads offline has no pair 1 < 2, so the
    stale read alone is no anomaly there, but the gap stays: it costs only the final pass."""
    rows = [("invoke", 0, [["w", "x", 1]]), ("ok", 0, [["w", "x", 1]]),
            ("invoke", 1, [["r", "x", None], ["w", "x", 2], ["w", "y", 1]]),
            ("ok", 1, [["r", "x", 1], ["w", "x", 2], ["w", "y", 1]]),
            ("invoke", 2, [[f, k, None if f == "r" else v] for f, k, v in late]), ("ok", 2, late)]
    if overlap:
        rows[1], rows[2] = rows[2], rows[1]
    h = History(ev(rows), "h")
    offline = rw_register.check(h, "strict-serializable", wfr_keys=wfr)
    if wfr or gap == NIL_GONE:
        assert anomaly in offline.anomaly_types, offline.anomaly_types
    else:
        assert offline.anomaly_types == ([] if late == [["r", "x", 1]] else ["lost-update"])
    _, _, e = rw_online(h.events, "strict-serializable", 2, wfr)
    e.finish()
    assert e.forgotten == 2 and not e.found  # both in one batch; the cycle's edge is no longer seen
    assert e.deps.gaps == {gap: 1} and not e.certified()
    # the same three with T2 reading what T1 left: certified after the batch, as offline judges
    rows[-2:] = [("invoke", 2, [["r", "x", None], ["r", "y", None]]), ("ok", 2, [["r", "x", 2], ["r", "y", 1]])]
    _, _, e = rw_online(ev(rows), "strict-serializable", 2, wfr)
    e.finish()
    assert e.forgotten == 2 and e.certified()
    assert rw_register.check(History(ev(rows), "h"), "strict-serializable", wfr_keys=wfr).valid is True


def near_serial_rw_txns(rnd):
    """Three to twelve rw-register transactions on one to three keys, many reading a key
    before they write it (at one of three rates), applied in a random
    order consistent with real time where they overlap (one in ten failing, one in ten
    crashing, a crashed one taking effect or not), each read seeing the key's latest value,
    or, at one of four rates from never to often, any earlier one: histories that are mostly
    valid, so that many prefixes are certified, with stale reads near forgotten writes."""
    keys = ["x", "y", "z"][:rnd.randint(1, 3)]
    txns = [list(t) for t in transactions(rnd, keys, (3, rnd.choice([6, 9, 12])), write="w")]
    rmw = rnd.choice([0.0, 0.5, 0.9])
    for t in txns:  # most writes read their key first: pairs v < w, lost updates, G-single
        mops, seen = [], set()
        for f, k, v in t[4]:
            if f == "w" and k not in seen and rnd.random() < rmw:
                mops.append(["r", k, None])
            seen.add(k)
            mops.append([f, k, v])
        t[4] = mops
    versions = {k: [None] for k in keys}
    stale = rnd.choice([0.0, 0.05, 0.15, 0.4])
    for t in sorted(txns, key=lambda t: rnd.uniform(t[1], t[2])):
        own, out = {}, []
        for f, k, v in t[4]:
            if f == "w":
                own[k] = v
            elif k in own:
                v = own[k]
            else:
                v = rnd.choice(versions[k]) if rnd.random() < stale else versions[k][-1]
            out.append([f, k, v])
        t[4] = out
        if t[3] == "ok" or (t[3] == "info" and rnd.random() < 0.5):
            for k, v in own.items():
                versions[k].append(v)
    return [tuple(t) for t in txns]


def test_a_rw_register_verdict_certified_after_tiny_sweeps_is_offline_s_on_every_prefix():
    """Brute force over forgetting in batches: for 200 histories (two in three near-serial,
    the rest `rw_txns`, whose reads may see any value written, even a future one), every prefix,
    sweeps of 1 to 4 kept transactions (so one sweep forgets several at once, and prefixes
    end just after one), with and without writes following reads: whenever the engine
    certifies, offline (with the same `wfr_keys`) finds the prefix valid with no anomaly
    and the same notes. Not vacuous: thousands are certified after forgetting, hundreds of
    prefixes offline refuses are seen after forgetting (none certified), and the test fails
    if a forgotten overwriter no longer retires the value it read (`_forget_txn`), or a read
    of nil after a first value's writer was forgotten is no gap. (The same search over 21,000
    histories, 1.86M runs of a prefix, a sweep and a setting, found no disagreement.)"""
    certified = after_forgetting = refused = 0
    for seed in range(200):
        rnd = random.Random(4747 + seed)
        h = to_history(near_serial_rw_txns(rnd) if seed % 3 else rw_txns(rnd))
        for wfr in (True, False):
            offline = {}
            for sweep in (1, 2, 3, 4):
                for n in range(1, len(h.events) + 1):
                    p = prefix(h.events, n)
                    _, _, e = rw_online(p.events, "strict-serializable", sweep, wfr)
                    e.finish()
                    if n not in offline:
                        offline[n] = rw_register.check(p, "strict-serializable", wfr_keys=wfr)
                    off = offline[n]
                    if e.certified():
                        certified += 1
                        after_forgetting += e.forgotten > 0
                        where = (seed, wfr, sweep, n, [x.to_dict() for x in p.events])
                        assert off.valid is True and not off.anomalies, where
                        assert off.notes == e.result("strict-serializable").notes, where
                    elif off.valid is False and e.forgotten:
                        refused += 1  # invalid, and something was forgotten before the end
    assert certified > 5000 and after_forgetting > 2000 and refused > 200, (certified, after_forgetting, refused)
