"""Online checking is prefix-sound (sleuth.checker.online): an anomaly the online
engines report after any prefix of a history is an anomaly of the whole history, by
brute force and by the offline checker.

Random small histories (the brute-force corpora of tests/test_cycles_bruteforce.py and
tests/test_linearizable.py) are fed to an engine one event at a time; after every
event (every prefix) whatever it has reported must hold of the full history: each model
forbidding a reported type has no serial order by brute force and is judged invalid
offline, and the prefix alone (its pending operations as info) is invalid offline too.
"""

import random
import re

import pytest
from brute import serial_order_exists
from test_cycles_bruteforce import brute_txns, generate, to_history
from test_linearizable import brute_force, random_history

from sleuth.checker import cycles, list_append, models
from sleuth.checker.linearizable import check_cas_register, check_register
from sleuth.checker.online import Feed, engine_for
from sleuth.checker.online.list_append import MISSING
from sleuth.checker.online.list_append import Engine as ListAppendEngine
from sleuth.checker.online.order import Order
from sleuth.history.jsonl import Event, History, read_jsonl

BRUTE_MODELS = ("serializable", "strong-session-serializable", "strict-serializable")
ONLINE_MODELS = (*BRUTE_MODELS, "snapshot-isolation", "repeatable-read", "read-committed")
NON_CYCLE = ("G1a", "G1b", "internal", "incompatible-order")
CYCLE_TYPES = set(cycles.TYPES)


def online(events, workload, model=None, window=None, **options):
    """Feed `events` one at a time; what was found, and how many after each event.
    `window`: list-append keeps only that many transactions (forgetting older ones)."""
    h = History([], "h")
    found = []
    if window is not None:
        engine = ListAppendEngine(h, model, found.append, sweep=window)
    else:
        engine = engine_for(workload, h, model, found.append, options)
    feed = Feed(h, engine)
    marks = []
    for e in events:
        feed.event(e.type, e.process, e.f, e.value, e.time, e.node, e.error, e.ts)
        engine.tick(force=True)  # every prefix searched (registers batch their searches)
        marks.append(len(found))
    return found, marks


def prefix(events, n):
    return History([Event(i, e.time, e.type, e.process, e.f, e.value) for i, e in enumerate(events[:n])], "p")


def test_order_finds_cycles_and_keeps_a_topological_order():
    rnd = random.Random(7)
    for _ in range(300):
        n = rnd.randint(2, 12)
        o = Order()
        for v in range(n):
            o.node(v)
        kept = set()
        for _ in range(rnd.randint(1, 30)):
            a, b = rnd.randrange(n), rnd.randrange(n)
            cycle = o.add(a, b, 0)
            reach = _reaches(kept, b, a)
            if a == b:
                assert cycle is None
                continue
            assert (cycle is not None) is reach
            if cycle is None:
                kept.add((a, b))
            else:  # a real path b ~> a of kept edges, then a -> b
                assert cycle[-1][:2] == (a, b) and cycle[0][0] == b
                assert all((x, y) in kept for x, y, _ in cycle[:-1])
                assert all(cycle[i][1] == cycle[i + 1][0] for i in range(len(cycle) - 1))
            assert all(o.ord[x] < o.ord[y] for x, y in kept)


def _reaches(edges, a, b):
    seen, stack = {a}, [a]
    while stack:
        x = stack.pop()
        if x == b:
            return True
        for s, d in edges:
            if s == x and d not in seen:
                seen.add(d)
                stack.append(d)
    return False


def aborted_reads(rnd, txns):
    """Some transactions that took effect are reported failed (their appends were
    read: aborted reads, G1a), as a database that acknowledges wrongly would."""
    return [(p, s, e, "fail", m) if typ == "ok" and p != 9 and rnd.random() < 0.25
            and any(f == "append" for f, _, _ in m) else (p, s, e, typ, m) for p, s, e, typ, m in txns]


@pytest.mark.parametrize("kind, window", [("final-read", None), ("no-final-read", None),
                                          ("aborted-reads", None), ("final-read", 2), ("aborted-reads", 3)])
def test_list_append_every_prefix_is_sound(kind, window):
    """`window`: the engine forgets all but the last few transactions (and their keys) as it
    goes: still sound."""
    reported = 0
    for seed in range(100 if window else 150):
        rnd = random.Random(50_000 + seed)
        txns = generate(rnd, final_read=kind != "no-final-read", txns=(3, 7))
        if kind == "aborted-reads":
            txns = aborted_reads(rnd, txns)
        h = to_history(txns)
        offline = {m: list_append.check(h, m) for m in ONLINE_MODELS}
        brute = {m: serial_order_exists(brute_txns(txns), m) for m in BRUTE_MODELS}
        for model in ONLINE_MODELS:
            found, marks = online(h.events, "list-append", model, window)
            reported += bool(found)
            for f in found:
                where = (seed, model, f.name, f.explanation, [e.to_dict() for e in h.events])
                assert models.forbids(model, f.name), where
                for m in ONLINE_MODELS:
                    if models.forbids(m, f.name):
                        assert offline[m].valid is False, where
                        if m in brute:
                            assert brute[m] is False, where
                if f.name in NON_CYCLE:
                    assert f.name in offline[model].anomaly_types, where
                elif f.rule == MISSING:  # a read without an acknowledged append: offline finds
                    # the cycle through the key's versions, or, when an element of a failed
                    # transaction cuts that order, the aborted read
                    assert set(offline[model].anomaly_types) & (CYCLE_TYPES | {"G1a", "dirty-update"}), where
                else:  # a cycle: offline finds one too (it may name it otherwise: it looks for
                    #     one cycle of each type per component, and names the one it finds)
                    assert set(offline[model].anomaly_types) & CYCLE_TYPES, where
            for n, count in enumerate(marks, 1):
                if count and (n == 1 or marks[n - 2] < count):  # something new at this prefix
                    assert list_append.check(prefix(h.events, n), model).valid is False, (seed, model, n)
    assert reported > (10 if window else 40)  # the engines do find things: the test is not vacuous


def test_list_append_g1a_and_g1b_online():
    """Adya's aborted read (G1a) and intermediate read (G1b), by hand."""
    ev = [("invoke", 0, [["append", "x", 1]]), ("fail", 0, [["append", "x", 1]]),
          ("invoke", 1, [["r", "x", None]]), ("ok", 1, [["r", "x", [1]]]),
          ("invoke", 2, [["append", "y", 1], ["append", "y", 2]]), ("ok", 2, [["append", "y", 1], ["append", "y", 2]]),
          ("invoke", 3, [["r", "y", None]]), ("ok", 3, [["r", "y", [1]]])]
    events = [Event(i, i, t, p, "txn", v) for i, (t, p, v) in enumerate(ev)]
    found, marks = online(events, "list-append", "read-committed")
    assert [(f.name, f.line) for f in found] == [("G1a", 4), ("G1b", 8)]
    assert marks == [0, 0, 0, 1, 1, 1, 1, 2]
    offline = list_append.check(History(events, "h"), "read-committed")
    assert {"G1a", "G1b"} <= set(offline.anomaly_types)


def test_g1a_waits_for_the_writer_to_fail():
    """A read of a pending append is no anomaly until its writer fails."""
    ev = [("invoke", 0, [["append", "x", 1]]), ("invoke", 1, [["r", "x", None]]),
          ("ok", 1, [["r", "x", [1]]]), ("fail", 0, [["append", "x", 1]])]
    events = [Event(i, i, t, p, "txn", v) for i, (t, p, v) in enumerate(ev)]
    found, marks = online(events, "list-append", "serializable")
    assert marks == [0, 0, 0, 1] and found[0].name == "G1a" and found[0].line == 4


@pytest.mark.parametrize("keyed", [False, True], ids=["cas-register", "register"])
def test_registers_every_prefix_is_sound(keyed):
    rnd = random.Random(4747 + keyed)
    check = check_register if keyed else check_cas_register
    reported = 0
    for n in range(400):
        initial = rnd.choice([None, 0])
        events, ops = random_history(rnd, keyed, initial)
        found, marks = online(events, "register" if keyed else "cas-register", initial_value=initial)
        if not found:
            continue
        reported += 1
        where = (n, initial, [e.to_dict() for e in events])
        assert brute_force(ops, initial) is False, where
        assert check(History(events, "h"), initial_value=initial).valid is False, where
        first = next(i for i, c in enumerate(marks, 1) if c)
        assert check(prefix(events, first), initial_value=initial).valid is False, where
    assert reported > 50


def test_no_cycle_through_a_transaction_that_then_fails():
    """T0 is pending while reads order it (ww T0->T2 on x, wr T2->R on y, rw R->T0 on x):
    a cycle only if T0 happened. It fails: no cycle (offline has none), only the aborted read."""
    ev = [("invoke", 0, [["append", "x", 1]]),
          ("invoke", 2, [["append", "x", 2], ["append", "y", 1]]), ("ok", 2, [["append", "x", 2], ["append", "y", 1]]),
          ("invoke", 3, [["r", "y", None], ["r", "x", None]]), ("ok", 3, [["r", "y", [1]], ["r", "x", []]]),
          ("invoke", 4, [["r", "x", None]]), ("ok", 4, [["r", "x", [1, 2]]]),
          ("fail", 0, [["append", "x", 1]])]
    events = [Event(i, i, t, p, "txn", v) for i, (t, p, v) in enumerate(ev)]
    offline = list_append.check(History(events, "h"), "serializable")
    assert not set(offline.anomaly_types) & CYCLE_TYPES and "G1a" in offline.anomaly_types
    found, marks = online(events, "list-append", "serializable")
    assert [f.name for f in found] == ["G1a"] and marks[-2] == 0
    # had it completed ok, the same lines close a G-single at its completion
    ok = events[:-1] + [Event(7, 7, "ok", 0, "txn", [["append", "x", 1]])]
    found, _ = online(ok, "list-append", "serializable")
    assert [(f.name, f.line) for f in found] == [("G-single", 8)]


def test_a_late_edge_against_a_path_inside_one_batch_is_a_gap():
    """T0 appends 1 to j and 2 to k; T1 reads j = [1] (wr T0 -> T1) and appends 1 to k.
    Both are forgotten in one sweep with their appends to k unseen (floating); then a read
    of k = [1, 2] puts T1's append first (ww T1 -> T0): a cycle (G1c), offline's verdict.
    The late edge runs against T0 -> T1 inside the batch: a gap, never a certified valid
    verdict. (The ancestors of a batch's writers were read after the first of them had
    left the graph, taking its edges with it, so they were always empty: certified.)"""
    ev = [("invoke", 0, [["append", "j", 1], ["append", "k", 2]]),
          ("ok", 0, [["append", "j", 1], ["append", "k", 2]]),
          ("invoke", 1, [["r", "j", None], ["append", "k", 1]]), ("ok", 1, [["r", "j", [1]], ["append", "k", 1]]),
          ("invoke", 2, [["r", "k", None]]), ("ok", 2, [["r", "k", [1, 2]]])]
    events = [Event(i, i, t, p, "txn", v) for i, (t, p, v) in enumerate(ev)]
    for model in ("serializable", "strict-serializable"):
        assert "G1c" in list_append.check(History(events, "h"), model).anomaly_types
        e = ListAppendEngine(History([], "h"), model, lambda f: None, sweep=3)
        feed = Feed(e.history, e)
        for x in events:
            feed.event(x.type, x.process, x.f, x.value, x.time)
        e.finish()
        assert e.nbatch == 1 and len(e.floating) == 0  # one batch of both, then shown
        assert e.gaps == {"edge into a forgotten transaction": 1} and not e.certified()


def test_a_batch_s_ancestors_stay_exact_as_late_edges_join():
    """`_batch`/`_anc`/`_join` against brute force: random DAGs on a batch's writers (bits
    in topological order, some completed info), then random late edges, each refused
    exactly when it closes a cycle with the edges so far, and every live writer's ancestors
    equal to reachability in the graph, after each edge and each writer shown."""
    from sleuth.checker.online.list_append import _anc, _batch, _join

    rnd = random.Random(4731)
    joined = refused = 0
    for _ in range(300):
        m = rnd.randint(1, 14)
        edges = {(a, b) for b in range(m) for a in range(b) if rnd.random() < rnd.choice([0.1, 0.5, 0.9])}
        ok = sum(1 << b for b in range(m) if rnd.random() < 0.8)

        def ancestors(b, edges=edges):
            seen, stack = set(), [b]
            while stack:
                n = stack.pop()
                for x, y in edges:
                    if y == n and x not in seen:
                        seen.add(x)
                        stack.append(x)
            return sum(1 << x for x in seen)

        batch = _batch(ok, [ancestors(b) for b in range(m)])
        live = set(range(m))
        for _ in range(rnd.randint(0, 12)):
            if rnd.random() < 0.2 and len(live) > 1:  # a writer shown: no longer kept up to date
                w = rnd.choice(sorted(live))
                live.discard(w)
                batch[1] &= ~(1 << w)  # as `_revealed` does
                continue
            a, b = rnd.sample(sorted(live), 2) if len(live) > 1 else (None, None)
            if a is None:
                break
            closes = ancestors(a) >> b & 1
            assert _join(batch, a, b) is (not closes), (m, edges, a, b)
            if closes:
                refused += 1
            else:
                joined += 1
                edges.add((a, b))
            for w in live:
                assert _anc(batch, w) == ancestors(w), (m, sorted(edges), w)
    assert joined > 300 and refused > 100, (joined, refused)


def test_spill_is_a_dict():
    """`Spill` (forgotten keys' summaries and floating writers' records, held in SQLite) answers
    as a dict does, for the keys a history may have (equal ints, bools and integral floats
    are one key, as in a dict; big ints and other floats in the dict beside)."""
    from sleuth.checker.online.spill import Spill

    rnd = random.Random(11)
    keys = [0, 1, True, False, 1.0, 2.5, -(1 << 63), (1 << 63) - 1, 1 << 63, -(1 << 70), "a", "", "1", 7, 7.0,
            float("inf"), None]
    values = [b"", b"x" * 100, 0, -1, (1 << 63) - 1, 1 << 63, 1 << 80]
    s, d = Spill(), {}
    for _ in range(3000):
        k = rnd.choice(keys)
        what = rnd.random()
        if what < 0.4:
            v = rnd.choice(values)
            s[k] = v
            d[k] = v
        elif what < 0.55:
            assert s.pop(k, "none") == d.pop(k, "none")
        else:
            assert (k in s) == (k in d) and s.get(k) == d.get(k)
        assert len(s) == len(d)
    assert sorted(map(repr, (v for _, v in s.items()))) == sorted(map(repr, d.values()))
    s.close()


@pytest.mark.parametrize("db", ["serializable", "stale-reads"])
def test_list_append_memory_is_flat_over_a_long_stream(tmp_path, db):
    """30,000 simulated transactions, swept from 1,000 kept on: what the engine keeps
    (transactions, graph nodes and edges, live keys) is no larger after 30,000 than after
    10,000 (a strict serializable database: nothing old is ever needed again; stale reads:
    what they keep is what the rule says to keep), and a strict serializable history ends
    certified valid, with no gap, as offline judges it."""
    from sleuth.history.follow import follow
    from sleuth.workloads.sim_list_append import write_sim

    path = tmp_path / "h.jsonl"
    write_sim(str(path), db, 30_000, seed=4)
    h = History([], str(path))
    found = []
    engine = ListAppendEngine(h, "strict-serializable", found.append, sweep=1000)
    feed = Feed(h, engine)
    sizes = {}

    def size():
        return {"ops": len(engine.ops), "nodes": len(engine.graph), "edges": engine.graph.edges(),
                "order": sum(map(len, engine.order.values())), "keys": len(engine.touched),
                "writers": sum(map(len, engine.writer.values())), "waiting": len(engine.before)}

    def on_event(typ, process, f, value, time_, node, error, ts, line):
        feed.event(typ, process, f, value, time_, node, error, ts)
        if engine.n in (10_000, 30_000) and engine.n not in sizes:
            sizes[engine.n] = size()

    follow(str(path), ("append", "r"), on_event, lambda: None, idle_timeout=0.05)
    early, late = sizes[10_000], sizes[30_000]
    # kept between 1,000 and 2,000 (a sweep when it doubles): the same bound early and late
    assert all(v <= 3 * 2000 for v in (early["ops"], late["ops"])), (early, late)
    assert all(late[k] <= 4 * max(early[k], 1000) for k in early), (early, late)
    assert engine.forgotten > 25_000
    # what retired keys and floating writers leave is held in SQLite, not as Python objects:
    # only a batch's state (a few ints and a marshalled difference) per 1,000 transactions
    assert len(engine.dead) > 700 and not engine.dead.other and not engine.floating.other
    assert len(engine.batches) <= engine.nbatch <= 60, (len(engine.batches), engine.nbatch)
    engine.finish()
    if db == "serializable":
        # the final reads show appends whose writers were forgotten long before: their order
        # is placed without a gap (floating writers), so the verdict needs no offline pass
        assert not found and not engine.gaps and engine.certified(), engine.gaps
        offline = list_append.check(read_jsonl(str(path)), "strict-serializable")
        assert offline.valid is True and not offline.anomalies
    else:
        assert found and not engine.certified()  # stale reads are still caught online


@pytest.mark.parametrize("kind", ["final-read", "no-final-read", "aborted-reads"])
def test_a_certified_verdict_is_offline_s_on_every_prefix(kind):
    """Whenever the engine certifies a prefix valid (so `--follow` skips the offline pass),
    offline finds that prefix valid with no anomaly of any type, and brute force agrees:
    forgetting everything it may (sweeping at every transaction) or nothing. Not vacuous:
    most valid prefixes are certified, and some invalid ones are not."""
    certified = refused = 0
    for seed in range(80):
        rnd = random.Random(70_000 + seed)
        txns = generate(rnd, final_read=kind != "no-final-read", txns=(3, 7))
        if kind == "aborted-reads":
            txns = aborted_reads(rnd, txns)
        h = to_history(txns)
        for model in ONLINE_MODELS:
            for n in range(1, len(h.events) + 1):
                p = prefix(h.events, n)
                for sweep in (1, 10**9):
                    e = ListAppendEngine(History([], "h"), model, lambda f: None, sweep=sweep)
                    feed = Feed(e.history, e)
                    for ev in p.events:
                        feed.event(ev.type, ev.process, ev.f, ev.value, ev.time)
                    e.finish()
                    off = list_append.check(p, model)
                    if e.certified():
                        certified += 1
                        where = (seed, model, n, sweep, [ev.to_dict() for ev in p.events])
                        assert off.valid is True and not off.anomalies, where
                    elif off.valid is False:
                        refused += 1
    assert certified > 1000 and refused > 100, (certified, refused)


def test_counter_every_prefix_is_sound():
    """+1 adds, random reads: whatever the engine reports after any prefix is a read no set
    of adds could give in the whole history (brute force), and offline reports it."""
    from test_counter import achievable, random_ops
    from test_counter import history as counter_history

    from sleuth.checker.counter import check_counter

    rnd = random.Random(4711)
    reported = 0
    for n in range(400):
        ops = random_ops(rnd, [1])
        h = counter_history(ops)
        found, marks = online(h.events, "counter")
        reported += bool(found)
        reads = {o[3]: o for o in ops if o[1] == "read"}  # by start time (each read its own)
        offline = check_counter(h)
        for f in found:
            assert f.name in offline.anomaly_types, (n, ops)
            first = next(i for i, c in enumerate(marks, 1) if c)
            assert check_counter(prefix(h.events, first)).valid is False, (n, ops)
        if found:
            assert any(o[2] not in achievable(ops, o) for o in reads.values()), (n, ops)
    assert reported > 50


def test_bank_total_is_offline_s_and_reads_are_judged_as_they_complete():
    from sleuth.checker.bank import check_bank

    t = {"from": 0, "to": 1, "amount": 5}
    ev = [("invoke", 0, "read", None), ("invoke", 1, "transfer", t), ("invoke", 2, "read", None),
          ("ok", 2, "read", {"0": 5, "1": 15}),   # completes first, but read 0 was invoked first
          ("ok", 0, "read", {"0": 10, "1": 10}),  # the total: 20 (as offline takes it)
          ("ok", 1, "transfer", t), ("invoke", 3, "read", None), ("ok", 3, "read", {"0": 5, "1": 10})]
    events = [Event(i, i, typ, p, f, v) for i, (typ, p, f, v) in enumerate(ev)]
    found, marks = online(events, "bank")
    assert [(f.name, f.line) for f in found] == [("wrong-total", 8)] and marks[4] == 0
    assert check_bank(History(events, "h")).anomaly_types == ["wrong-total"]


@pytest.mark.parametrize("crash_rate", [0.0, 0.05])
def test_register_memory_is_flat_where_keys_have_quiet_moments(crash_rate):
    """30,000 operations on 5 keys: each key is cut at its quiet moments, so what the engine
    keeps after 30,000 is no more than after 10,000 (without crashes), or grows only by the
    crashed writes it must keep (with them), and stays a small part of the whole."""
    from sleuth.workloads.sim_register import simulate

    events, _ = simulate(ops=30_000, processes=5, keys=5, crash_rate=crash_rate, seed=8)
    h = History([], "h")
    found = []
    engine = engine_for("register", h, None, found.append, {})
    feed = Feed(h, engine)
    kept = {}
    for e in events:
        feed.event(e.type, e.process, e.f, e.value, e.time, e.node, e.error, e.ts)
        if engine.ops in (10_000, 30_000) and engine.ops not in kept:
            kept[engine.ops] = engine.stats()["kept"]
    from sleuth.checker.online.register import MIN_NEW

    assert not found and engine.cuts > 30_000 // (2 * MIN_NEW)  # searched (and cut) every MIN_NEW or so
    crashed = sum(e.type == "info" and e.f != "read" for e in events)
    assert kept[30_000] <= 1.5 * kept[10_000] + crashed, kept
    assert kept[30_000] < 2000 + crashed, kept
    engine.finish()
    if not crash_rate:  # the verdict is complete: --follow skips the offline pass
        assert engine.certified() and check_register(History(events, "h")).valid is True


@pytest.mark.parametrize("keyed", [False, True], ids=["cas-register", "register"])
def test_a_certified_register_verdict_is_offline_s_on_every_prefix(keyed):
    """Whenever the register engine certifies a prefix (searched after every event, so cut
    as often as it can be), offline finds the prefix linearizable with no anomaly, and brute
    force agrees. Not vacuous: most prefixes are certified, some after a cut that carried a
    crashed write, and some invalid ones are refused."""
    rnd = random.Random(4848 + keyed)
    check = check_register if keyed else check_cas_register
    certified = refused = carried = 0
    for _ in range(150):
        initial = rnd.choice([None, 0])
        events, ops = random_history(rnd, keyed, initial)
        for n in range(1, len(events) + 1):
            h = History([], "h")
            engine = engine_for("register" if keyed else "cas-register", h, None, lambda f: None,
                                {"initial_value": initial})
            feed = Feed(h, engine)
            for e in events[:n]:
                feed.event(e.type, e.process, e.f, e.value, e.time)
                engine.tick(force=True)
            engine.finish()
            off = check(prefix(events, n), initial_value=initial)
            if engine.certified():
                certified += 1
                carried += any(c.ret is None for calls in engine.by_key.values() for c in calls) \
                    and engine.cuts > 0
                where = (initial, n, [e.to_dict() for e in events[:n]])
                assert off.valid is True and not off.anomalies, where
                result = engine.result(None)
                assert result.notes == [x for x in off.notes if "search stopped" not in x], where
            elif off.valid is False:
                refused += 1
        if engine.certified():
            assert brute_force(ops, initial), (initial, [e.to_dict() for e in events])
    assert certified > 500 and refused > 100 and carried > 100, (certified, refused, carried)


def test_a_cut_that_needs_a_crashed_write_before_it_taints_the_key():
    """A crashed write of 5 made the read of 5 before the cut; a later read of 5 after a
    write of 6 would need that write again (it took effect at most once). The search from
    the cut, which keeps the crashed write, finds nothing; the engine must not certify."""
    rows = [("invoke", 0, "write", [0, 5]), ("info", 0, "write", [0, 5]),
            ("invoke", 1, "read", [0, None]), ("ok", 1, "read", [0, 5]),
            ("invoke", 1, "write", [0, 6]), ("ok", 1, "write", [0, 6]),
            ("invoke", 1, "read", [0, None]), ("ok", 1, "read", [0, 5])]
    events = [Event(i, i, t, p, f, v) for i, (t, p, f, v) in enumerate(rows)]
    assert check_register(History(events, "h")).valid is False
    h = History([], "h")
    engine = engine_for("register", h, None, lambda f: None, {})
    feed = Feed(h, engine)
    for e in events:
        feed.event(e.type, e.process, e.f, e.value, e.time)
        engine.tick(force=True)
    engine.finish()
    assert engine.cuts and engine.tainted == {0} and not engine.certified()


def random_ts_history(rnd):
    """Register operations on three processes with the timestamps a grey-box target reports:
    mostly rising with real time, sometimes stale or repeated."""
    evs, free, clock, ids = [], [0, 0, 0], 0, [0, 1, 2]
    for _ in range(rnd.randint(3, 12)):
        c = rnd.randrange(3)
        s = free[c] + rnd.randint(0, 4)
        e = s + rnd.randint(1, 6)
        free[c] = e + 1
        clock += rnd.randint(0, 3)
        f = rnd.choice(["read", "write"])
        typ = rnd.choices(["ok", "info", "fail"], [8, 1, 1])[0]
        ts = clock - rnd.choice([0, 0, 0, 1, 2, 5]) if typ == "ok" else None
        p = ids[c]
        evs.append((s, 0, "invoke", p, f, [0, None if f == "read" else rnd.randrange(3)], None))
        if typ != "info":
            evs.append((e, 1, typ, p, f, [0, rnd.randrange(3)], ts))
        else:
            ids[c] += 3
    evs.sort(key=lambda x: (x[0], x[1]))
    return [Event(i, t, typ, p, f, v, ts=ts) for i, (t, _, typ, p, f, v, ts) in enumerate(evs)]


def test_timestamp_rules_online_are_offline_s_on_every_prefix():
    """Each operation is judged at its completion as the offline sweep judges it: after every
    prefix, what was found is what offline finds in that prefix (types and counts)."""
    from sleuth.checker import timestamps

    rnd = random.Random(31)
    reported = 0
    for n in range(300):
        events = random_ts_history(rnd)
        h = History([], "h")
        found = []
        engine = engine_for("register", h, None, found.append, {}, timestamps=True)
        feed = Feed(h, engine)
        for k, e in enumerate(events, 1):
            feed.event(e.type, e.process, e.f, e.value, e.time, e.node, e.error, e.ts)
            got = [f.name for f in found if f.name in ("write-ts-not-above-read", "read-ts-below-write",
                                                       "ts-backwards")]
            want = timestamps.check(prefix_with_ts(events, k), "register").stats["violations"]
            assert {t: got.count(t) for t in set(got)} == want, (n, k, [e.to_dict() for e in events])
        reported += bool(found)
    assert reported > 50


def prefix_with_ts(events, n):
    return History([Event(i, e.time, e.type, e.process, e.f, e.value, ts=e.ts) for i, e in enumerate(events[:n])],
                   "p")


def test_a_lost_write_is_found_at_the_first_read_that_misses_it():
    """T0's append is acknowledged; T1, begun after, reads the key without it, and no read ever
    shows it (a lost write): reported at T1's completion, not at the end."""
    ev = [("invoke", 0, [["append", "x", 1]]), ("ok", 0, [["append", "x", 1]]),
          ("invoke", 1, [["append", "x", 2]]), ("ok", 1, [["append", "x", 2]]),
          ("invoke", 2, [["r", "x", None]]), ("ok", 2, [["r", "x", [2]]]),
          ("invoke", 3, [["r", "x", None]]), ("ok", 3, [["r", "x", [2]]])]
    events = [Event(i, i, t, p, "txn", v) for i, (t, p, v) in enumerate(ev)]
    found, marks = online(events, "list-append", "strict-serializable")
    assert [(f.name, f.line, f.rule) for f in found] == [("G-single-realtime", 6, MISSING)]
    assert "without 1" in found[0].explanation
    offline = list_append.check(History(events, "h"), "strict-serializable")
    assert offline.valid is False and set(offline.anomaly_types) & CYCLE_TYPES
    # serializable allows it (no real-time order): nothing reported online
    assert online(events, "list-append", "serializable")[0] == []


def test_a_key_in_use_is_not_forgotten_between_its_transactions():
    """Five keys appended to in turn by sequential transactions, each key every fifth, swept
    every eight or more: at a sweep a key may have no transaction kept, though the next
    append to it is a few transactions away. Forgetting it then made that append a gap
    ("append to a forgotten key") and sent a valid history to the offline pass; a key is now
    forgotten only when no transaction named it between two sweeps."""
    txns = [(j, 10 * j, 10 * j + 5, "ok", [["append", j % 5, j]]) for j in range(200)]
    final = [["r", k, [j for j in range(200) if j % 5 == k]] for k in range(5)]
    txns.append((999, 3000, 3001, "ok", final))
    h = to_history(txns)
    engine = ListAppendEngine(History([], "h"), "strict-serializable", lambda f: None, sweep=8)
    feed = Feed(engine.history, engine)
    for ev in h.events:
        feed.event(ev.type, ev.process, ev.f, ev.value, ev.time)
    engine.finish()
    assert engine.forgotten > 150 and not engine.gaps and engine.certified(), engine.gaps
    assert list_append.check(h, "strict-serializable").valid is True


def test_long_reads_are_swept_by_their_weight_not_only_their_count():
    """Final reads of many long keys, one after another: each weighs what a hundred ordinary
    transactions do (micro-ops and elements read), so sweeping only when the count of
    transactions kept doubles held thousands of them at the end of a 10M sim (140 MiB).
    Swept by weight too, the engine keeps a few dozen, and still certifies."""
    keys, appends, finals = 100, 20, 200
    txns, t = [], 0
    for j in range(keys * appends):
        txns.append((j, t, t + 1, "ok", [["append", j % keys, j]]))
        t += 2
    full = [["r", k, [j for j in range(keys * appends) if j % keys == k]] for k in range(keys)]
    for j in range(finals):
        txns.append((10**6 + j, t, t + 1, "ok", full))
        t += 2
    h = to_history(txns)
    engine = ListAppendEngine(History([], "h"), "strict-serializable", lambda f: None, sweep=1000)
    feed = Feed(engine.history, engine)
    most = 0
    for n, ev in enumerate(h.events):  # micro-ops as tuples, as `sleuth.history.follow` decodes them
        feed.event(ev.type, ev.process, ev.f, [tuple(m) for m in ev.value], ev.time)
        if n >= 2 * keys * appends:  # the final reads
            most = max(most, len(engine.ops))
    engine.finish()
    assert most <= 60, most
    assert not engine.gaps and engine.certified(), engine.gaps


def test_the_register_engine_reads_each_op_as_parse_op_does():
    """The engine's shortcuts for common shapes (checker/online/register.py, `invoked` and
    `completed`) give every op the (invoke value, ok value) that `parse_op` gives it, over
    values of every JSON kind (booleans equal to 1 and 0, strings, lists, objects, nulls), cas
    pairs and not-pairs, completions naming the invoke's key or another one, and ops that
    fail or crash; a shape `parse_op` refuses is refused with the same message."""
    from sleuth.checker import register_models as rm
    from sleuth.history.jsonl import HistoryError

    rnd = random.Random(4747)
    values = [0, 1, 2, True, False, None, "a", "1", [1, 2], [True, 0], {"x": 1}, 1.0]
    shapes = 0
    for _ in range(3000):
        f = rnd.choice(["read", "write", "cas"])
        key = rnd.choice([1, "1", True, [1]])
        payload = [rnd.choice(values), rnd.choice(values)] if f == "cas" and rnd.random() < 0.8 \
            else rnd.choice(values)
        invoke = [key, None if f == "read" else payload]
        typ = rnd.choice(["ok", "ok", "ok", "fail", "info"])
        other = rnd.choice([key, key, key, 2, "2", 1, True, 1.0])
        done = [other, rnd.choice(values) if f == "read" else payload]
        events = [Event(0, 1, "invoke", 0, f, invoke), Event(1, 2, typ, 0, f, done)]
        h = History([], "h")
        engine = engine_for("register", h, None, lambda found: None, {"failed_cas_observes": True})
        feed = Feed(h, engine)
        refusals = set()  # what parse_op says of the invoke alone (the engine reads it first), or the op
        for part in (events[:1], events):
            hx = History(part, "x")
            try:
                want = rm.parse_op(hx, hx.ops()[0], True)
            except HistoryError as e:
                refusals.add(str(e).split(":", 2)[-1])
        if refusals:
            with pytest.raises(HistoryError) as got:
                for e_ in events:
                    feed.event(e_.type, e_.process, e_.f, e_.value, e_.time)
            assert str(got.value).split(":", 2)[-1] in refusals
            continue
        for e_ in events:
            feed.event(e_.type, e_.process, e_.f, e_.value, e_.time)
        calls = engine._calls(rm.freeze(want[0]))
        if typ == "info" and f == "read" or typ == "fail" and f != "cas":
            assert calls == []
            continue
        (call,) = calls
        assert (call.invoke_value, call.ok_value) == want[1:], (events, call, want)
        assert all(type(a) is type(b) for a, b in zip((call.invoke_value, call.ok_value), want[1:]))
        shapes += 1
    assert shapes > 1000


def _lines(events, nemesis_every=0, rnd=None):
    """`events` as the fast reader decodes them (`sleuth.history.jsonl.Line`, values as lists),
    with a nemesis event now and then (`nemesis_every`: about one in that many)."""
    from sleuth.history.jsonl import Line

    out = []
    for e in events:
        if nemesis_every and rnd.randrange(nemesis_every) == 0:
            out.append(Line(index=len(out), time=e.time, type="info", process="nemesis", f="start-partition",
                            value={"isolated": [1]}))
        value = [list(x) if type(x) is tuple else x for x in e.value] if type(e.value) is list else e.value
        out.append(Line(index=len(out), time=e.time, type=e.type, process=e.process, f=e.f, value=value))
    return out


def _as_events(lines):
    return [Event(i, x.time, x.type, x.process, x.f, x.value) for i, x in enumerate(lines)]


@pytest.mark.parametrize("fco", [False, True], ids=["plain", "failed-cas-observes"])
def test_registers_in_blocks_are_prefix_sound_and_judged_as_offline(fco):
    """`Feed.events` hands the register engine whole blocks (checker/online/register.py,
    "Blocks"), cut anywhere (operations in flight across them, nemesis events inside): after
    every block, what it found holds of the prefix read so far (offline finds it invalid,
    and brute force the whole history); when the history ends, a certified verdict is
    offline's valid one, and an invalid history is found or left to the final pass. Not
    vacuous: most blocks are taken whole, and both findings and certifications happen."""
    from sleuth.checker.online.register import Engine

    taken = [0, 0]
    block = Engine.block

    def counting(self, run, pos, pairer):
        ok = block(self, run, pos, pairer)
        taken[ok] += 1
        return ok

    rnd = random.Random(4949 + fco)
    found_n = certified = 0
    try:
        Engine.block = counting
        for _ in range(300):
            initial = rnd.choice([None, 0])
            events, ops = random_history(rnd, True, initial)
            lines = _lines(events, 4, rnd)
            evs = _as_events(lines)
            h = History([], "h")
            found = []
            engine = engine_for("register", h, None, found.append,
                                {"initial_value": initial, "failed_cas_observes": fco})
            feed = Feed(h, engine)
            found_at = None
            while feed.pos < len(lines):
                end = min(len(lines), feed.pos + rnd.randint(1, 9))
                feed.events(lines[feed.pos:end])
                engine.tick(force=True)
                if found and found_at is None:
                    found_at = end
                    assert check_register(prefix(evs, end), initial_value=initial,
                                          failed_cas_observes=fco).valid is False, (end, [x.to_dict() for x in evs])
            engine.finish()
            off = check_register(History(evs, "h"), initial_value=initial, failed_cas_observes=fco)
            where = (initial, [x.to_dict() for x in evs])
            if found:
                found_n += 1
                assert off.valid is False and (fco or brute_force(ops, initial) is False), where
            if engine.certified():
                certified += 1
                assert off.valid is True and not off.anomalies, where
    finally:
        Engine.block = block
    assert found_n > 30 and certified > 100 and taken[True] > 5 * taken[False], (found_n, certified, taken)


def test_a_register_block_finds_what_event_by_event_finds_with_the_same_explanation():
    """Histories of the simulated stale-read bug, small enough that no key is searched
    before the end: read as one block (`Engine.block`) and event by event, the engine
    reports the same anomalies, at the same lines, with the same explanation and lines
    (the block's calls get their `Op`s back for it, `_attach`)."""
    from sleuth.workloads.sim_register import simulate

    compared = 0
    for seed in range(40):
        events, stats = simulate(ops=120, processes=4, keys=3, crash_rate=0.05, bug="stale-read", seed=seed)
        lines = _lines(events)
        results = []
        for whole in (True, False):
            h = History([], "h")
            found = []
            engine = engine_for("register", h, None, found.append, {})
            feed = Feed(h, engine)
            if whole:
                feed.events(lines)
            else:
                for x in lines:
                    feed.event(x.type, x.process, x.f, x.value, x.time)
            engine.finish()
            results.append([(f.name, f.line, f.explanation, f.lines) for f in found])
        assert results[0] == results[1], seed
        compared += bool(results[0])
    assert compared > 10


@pytest.mark.parametrize("rows, message", [
    # a process invokes while its op from the block before is in flight
    ([("invoke", 0, "write", [1, 1])], "process 0 invokes while its operation from line 1 is still in flight"),
    # a completion of another f than its invoke's
    ([("ok", 0, "read", [1, 1])], "ok of f='read' completes an invoke of f='write' (line 1)"),
    # a crashed process used again, inside the block
    ([("info", 0, "write", [1, 1]), ("invoke", 0, "read", [1, None])], "process 0 is used again after its info"),
])
def test_a_register_block_breaking_a_pairing_rule_is_refused_as_event_by_event(rows, message):
    """A block that breaks a pairing rule is not taken whole: event by event, the `Pairer`
    refuses it, naming the line, as it does without blocks."""
    from sleuth.history.jsonl import HistoryError, Line

    first = Line(index=0, time=0, type="invoke", process=0, f="write", value=[1, 1])
    rest = [Line(index=i + 1, time=i + 1, type=t, process=p, f=f, value=v) for i, (t, p, f, v) in enumerate(rows)]
    for blocks in ([[first], rest], [[first, *rest]]):
        h = History([], "h")
        feed = Feed(h, engine_for("register", h, None, lambda f: None, {}))
        with pytest.raises(HistoryError, match=re.escape(message)) as got:
            for b in blocks:
                feed.events(b)
        assert f"line {1 + len(rows)}" in str(got.value) or ":" in str(got.value)


def test_a_register_block_of_other_shapes_is_read_event_by_event():
    """A block holding a shape the block path does not take (a float, a boolean key, an
    object value, another f) is read event by event, as before: the same verdicts and
    refusals as `parse_op`'s."""
    from sleuth.history.jsonl import HistoryError, Line

    def feed_all(values):
        lines = []
        for k, (f, v, got) in enumerate(values):
            lines += [Line(index=2 * k, time=2 * k, type="invoke", process=0, f=f, value=v),
                      Line(index=2 * k + 1, time=2 * k + 1, type="ok", process=0, f=f, value=got)]
        h = History([], "h")
        found = []
        engine = engine_for("register", h, None, found.append, {})
        Feed(h, engine).events(lines)
        engine.finish()
        return found, engine

    # a write of 1.5 then a read of 1.5: linearizable (a float is a value like any other)
    found, engine = feed_all([("write", [0, 1.5], [0, 1.5]), ("read", [0, None], [0, 1.5])])
    assert not found and engine.certified()
    # ... and a read of 2 after it is not
    found, _ = feed_all([("write", [True, {"a": 1}], [True, {"a": 1}]), ("read", [True, None], [True, 2])])
    assert [f.name for f in found] == ["nonlinearizable"]
    with pytest.raises(HistoryError):
        feed_all([("write", [0, 1], [0, 1]), ("append", [0, 1], [0, 1])])
