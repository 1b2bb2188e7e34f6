"""The list-append rules sleuth adds beyond reading version orders, each on a
hand-made history whose answer follows from the definitions:

- an acknowledged append that no read ever saw came after everything seen
  (a lost write, caught by the final read and real time);
- a read of one's own uncommitted appends orders the key by its external
  part (read committed does this; it is not incompatible-order);
- a changed read within one transaction is P2 fuzzy-read: fine under read
  committed, not under read atomic (Cerone et al.'s INT), repeatable read or
  snapshot isolation;
- an info transaction happened iff one of its appends was observed.
"""

from test_cycles_bruteforce import to_history

from sleuth.checker import list_append


def history(*txns):
    """txns: (process, start, end, type, ops); ok ops carry what reads saw."""
    return to_history([(p, s, e, t, [list(m) for m in ops]) for p, s, e, t, ops in txns])


def check(h, model="strict-serializable"):
    return list_append.check(h, model)


def test_lost_write_is_caught_by_the_final_read():
    h = history(
        (0, 0, 10, "ok", [("append", "x", 1)]),
        (1, 20, 30, "ok", [("append", "x", 2)]),  # acknowledged...
        (2, 40, 50, "ok", [("r", "x", [1])]),  # ...but the final read lacks it
    )
    r = check(h)
    assert r.valid is False and r.anomaly_types == ["G-single-realtime"]
    assert "no read ever saw" in r.anomalies["G-single-realtime"][0]["explanation"]
    assert check(h, "serializable").valid is True  # the read could have run before the append


def test_unseen_append_follows_the_last_seen_one():
    # T1's append of 2 is never read; the last seen element is T0's 1; a
    # transaction that read [1] and then... T1 must follow T0 (ww).
    h = history(
        (0, 0, 10, "ok", [("append", "x", 1), ("append", "y", 1)]),
        (1, 0, 10, "ok", [("append", "x", 2), ("r", "y", [])]),
        (2, 20, 30, "ok", [("r", "x", [1])]),
    )
    # T1 read y before T0's append (T1 < T0), yet T0's x=1 precedes T1's
    # unseen x=2 (T0 < T1): a cycle with one anti-dependency. The same
    # component also holds T0 -wr-> T2 -rw-> T1 -rw-> T0 (T2 read x = [1],
    # so it precedes the unseen append): a G2-item, which every-type search
    # reports too. T1's append (entered by T0's ww) comes before its read of y (left
    # by the rw): Adya's G-monotonic; every transaction on it writes: a G-update.
    r = check(h, "serializable")
    assert r.valid is False and r.anomaly_types == ["G-monotonic", "G-single", "G-update", "G2-item"]
    assert r.anomalies["G2-item"][0]["cycle"] in (["T0", "T2", "T1"], ["T2", "T1", "T0"], ["T1", "T0", "T2"])


def test_own_uncommitted_appends_are_not_an_order_conflict():
    # read committed: T1 reads x = [1] + its own 3 while T2 commits 2 in between
    h = history(
        (0, 0, 10, "ok", [("append", "x", 1)]),
        (1, 20, 60, "ok", [("append", "x", 3), ("r", "x", [1, 3])]),
        (2, 30, 40, "ok", [("append", "x", 2)]),
        (3, 70, 80, "ok", [("r", "x", [1, 2, 3])]),
    )
    r = check(h, "read-committed")
    assert r.valid is True, r.anomaly_types
    assert "incompatible-order" not in r.also_found


def test_fuzzy_read_is_allowed_only_under_read_committed():
    h = history(
        (0, 0, 10, "ok", [("append", "x", 1)]),
        (1, 5, 60, "ok", [("r", "x", []), ("r", "x", [1])]),
        (2, 70, 80, "ok", [("r", "x", [1])]),
    )
    assert check(h, "read-committed").valid is True
    r = check(h, "snapshot-isolation")
    assert r.valid is False and "fuzzy-read" in r.anomaly_types
    assert "non-repeatable" in r.anomalies["fuzzy-read"][0]["explanation"]


# Which models allow a non-repeatable read, written out by hand: Adya's PL-2 allows P2 and so
# do the levels between it and PL-2+ that forbid only other cycles (cursor stability, PL-2L,
# PL-MSR; Bailis et al.'s monotonic atomic view, which says nothing about reading one item
# twice); every model of Cerone, Bernardi & Gotsman (CONCUR 2015) requires INT (a read of a key
# returns the transaction's own last read or write of it), so read atomic and every model above
# it forbid it, as Elle's table does for what it calls `internal`
FUZZY_ALLOWED = {"read-uncommitted", "strong-session-read-uncommitted", "strong-read-uncommitted",
                 "read-committed", "strong-session-read-committed", "strong-read-committed",
                 "cursor-stability", "monotonic-view", "monotonic-snapshot-read", "monotonic-atomic-view"}


def test_fuzzy_read_at_every_model():
    from sleuth.checker.models import MODELS
    h = history(
        (0, 0, 10, "ok", [("append", "x", 1)]),
        (1, 5, 60, "ok", [("r", "x", []), ("r", "x", [1])]),
    )
    assert FUZZY_ALLOWED < set(MODELS)
    for model in MODELS:
        r = check(h, model)
        assert r.valid is (model in FUZZY_ALLOWED), (model, r.anomaly_types, r.also_found)
        assert "fuzzy-read" in r.anomaly_types + r.also_found
    assert "read-atomic" in check(h, "read-committed").not_


def test_read_missing_its_own_append_is_internal():
    h = history((0, 0, 10, "ok", [("append", "x", 1), ("r", "x", [])]))
    r = check(h, "read-uncommitted")
    assert r.valid is False and r.anomaly_types == ["internal"]


def test_observed_info_append_committed_unobserved_may_not_have():
    observed = history(
        (0, 0, None, "info", [("append", "x", 1)]),
        (1, 20, 30, "ok", [("r", "x", [1])]),
    )
    assert check(observed).valid is True
    unobserved = history(
        (0, 0, None, "info", [("append", "x", 1)]),
        (1, 20, 30, "ok", [("r", "x", [])]),
    )
    assert check(unobserved).valid is True


def test_graph_nodes_are_ok_txns_and_observed_info_ones():
    """Nodes, in op order: every ok transaction, and an info one only when a read saw one
    of its appends, through a key with a version order (y) or one whose reads have none
    (x: incompatible-order); not a failed one, nor an info one nobody saw."""
    h = history(
        (0, 0, None, "info", [("append", "x", 1)]),  # seen by a read of x, which has no order
        (1, 5, None, "info", [("append", "y", 1)]),  # seen by a read of y
        (2, 6, None, "info", [("append", "z", 1)]),  # seen by nobody
        (3, 7, 8, "fail", [("append", "z", 2)]),
        (4, 10, 20, "ok", [("append", "x", 2)]),
        (5, 30, 40, "ok", [("r", "x", [1]), ("r", "y", [1])]),
        (6, 50, 60, "ok", [("r", "x", [2])]),
    )
    a = list_append.Analysis(h)
    assert "incompatible-order" in a.anomalies
    assert [op.process for op in a.graph.txns] == [0, 1, 4, 5, 6]
    assert [int(n) for n in a.node_of] == [0, 1, -1, -1, 2, 3, 4]


def test_failed_append_observed_is_g1a_and_dirty_update():
    h = history(
        (0, 0, 10, "fail", [("append", "x", 1)]),
        (1, 20, 30, "ok", [("append", "x", 2)]),
        (2, 40, 50, "ok", [("r", "x", [1, 2])]),
    )
    r = check(h, "read-committed")
    assert r.valid is False and {"G1a", "dirty-update"} <= set(r.anomaly_types)
    assert check(h, "read-uncommitted").valid is True


def test_reads_of_a_rolled_back_append_are_an_incompatible_order_allowed_at_read_uncommitted():
    """MariaDB at READ UNCOMMITTED: a reader sees an append whose transaction is then rolled
    back, a later one sees the key without it. The two reads have no common order: Elle's
    incompatible-order, which implies a dirty read (G1a), so read committed is ruled out and
    read uncommitted is not."""
    h = history(
        (0, 0, 30, "fail", [("append", "x", 1)]),
        (1, 10, 20, "ok", [("r", "x", [1])]),
        (2, 40, 50, "ok", [("append", "x", 2)]),
        (3, 60, 70, "ok", [("r", "x", [2])]),
    )
    r = check(h, "read-uncommitted").to_json()
    assert r["valid"] is True and r["anomaly-types"] == []
    assert r["also-found"] == ["G1a", "incompatible-order"] and "read-uncommitted" in r["possible"]
    rc = check(h, "read-committed")
    assert rc.valid is False and "read-committed" in rc.to_json()["not"]


def test_two_txns_that_read_a_list_and_append_to_it_lost_an_update():
    """Elle's lost-update on lists: T1 and T2 both read x = [1] and then append to x, so
    whichever committed later should have seen the other's append. T3 appends to x
    before reading it, and reads [1] besides its own append: it too read x = [1] and
    appended past it (T3 -rw-> T1 -ww-> T3 is a G-cursor in the graph), so it is one of
    them, though Elle, which takes only reads before a transaction's writes, leaves it out."""
    h = history((0, 0, 10, "ok", [("append", "x", 1)]),
                (1, 11, 20, "ok", [("r", "x", [1]), ("append", "x", 2)]),
                (2, 11, 20, "ok", [("r", "x", [1]), ("append", "x", 3)]),
                (0, 21, 30, "ok", [("append", "x", 4), ("r", "x", [1, 4])]),
                (1, 31, 40, "ok", [("r", "x", [1, 2, 4])]))
    r = check(h, "read-committed")
    lost = r.anomalies["lost-update"]
    assert len(lost) == 1 and lost[0]["read"] == [1]
    assert sorted(o["name"] for o in lost[0]["ops"]) == ["T1", "T2", "T3"]
    assert "(besides their own appends)" in lost[0]["explanation"]


def test_future_read_names_only_the_appends_after_the_read():
    """[append x 1, r x [1, 2], append x 2]: 2 is from the txn's future, 1 is not; the read
    also fails to end with the txn's own earlier append (internal), and the explanation
    names every append of the txn to x."""
    h = history((0, 0, 10, "ok", [("append", "x", 1), ("r", "x", [1, 2]), ("append", "x", 2)]))
    r = check(h, "read-uncommitted")
    assert r.anomalies["future-read"][0]["values"] == [2]
    assert "its own appends [1, 2]" in r.anomalies["internal"][0]["explanation"]
